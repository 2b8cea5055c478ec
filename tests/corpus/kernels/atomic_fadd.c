// @kernel: atomic_fadd
// @description: float atomic adds to global memory at device scope: one address shared by the whole grid (LLVM reduces each wave first with a readlane loop) and four addresses chosen per lane (one global_atomic_add_f32 per lane)
// @launch: block=256 grid=256*G
// @expect: ^global_atomic_add_f32\b
// @expect: ^v_readlane_b32\b
// @expect-backward-branch: ^s_cbranch_scc1\b
//
// g = global thread id:  acc[0] += x[g];  acc[1 + (g & 3)] += x[g]   (relaxed, device scope)
#include "corpus.h"

KERNEL(256) atomic_fadd(const GLOBAL float *x, GLOBAL float *acc) {
  unsigned g = group_id() * 256 + thread_id();
  float v = x[g];
  __scoped_atomic_fetch_add(&acc[0], v, __ATOMIC_RELAXED, __MEMORY_SCOPE_DEVICE);
  __scoped_atomic_fetch_add(&acc[1 + (g & 3)], v, __ATOMIC_RELAXED, __MEMORY_SCOPE_DEVICE);
}
