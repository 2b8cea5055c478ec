// @kernel: lds_reduce_wg256
// @description: a 256-thread workgroup (4 waves) shares an LDS array: each thread reads values written by other waves after s_barrier, then a tree reduction with a barrier per step sums the workgroup
// @launch: block=256 grid=256*G
// @expect: ^s_barrier$
// @expect: ^ds_write_b32\b
// @expect: ^ds_read_b32\b
// @expect: ^s_waitcnt lgkmcnt\(0\)$
//
// t = thread id (0..255), w = workgroup id, g = 256*w + t; int32 with wrap-around:
//   s[t] = x[g]; barrier
//   rev[g] = s[255 - t] + s[(t + 64) & 255]; barrier
//   for stride in 128, 64, ..., 1: if t < stride: s[t] += s[t + stride]; barrier
//   sums[w] = s[0]   (= sum of x[256w .. 256w+255]), written by thread 0
#include "corpus.h"

KERNEL(256) lds_reduce_wg256(const GLOBAL int *x, GLOBAL int *rev, GLOBAL int *sums) {
  LDS_ARRAY(int, s, 256);
  unsigned t = thread_id();
  unsigned g = group_id() * 256 + t;
  s[t] = x[g];
  workgroup_barrier();
  rev[g] = s[255 - t] + s[(t + 64) & 255];
  workgroup_barrier();
  for (unsigned stride = 128; stride > 0; stride >>= 1) {
    if (t < stride)
      s[t] += s[t + stride];
    workgroup_barrier();
  }
  if (t == 0)
    sums[group_id()] = s[0];
}
