// @kernel: mfma_16x16x32_f16_kloop
// @description: one wave runs a GEMM k-loop with a runtime trip count: D = C + sum over nk steps of A_s*B_s (16x16 f32, 32 f16 per step) with v_mfma_f32_16x16x32_f16 chained through the accumulator
// @launch: block=64 grid=64
// @expect: \bv_mfma_f32_16x16x32_f16\b
// @expect-backward-branch: ^s_cbranch_
//
// Step s, lane L loads a[s*512 + L*8 .. +7] and b[s*512 + L*8 .. +7] (f16); C from c[L*4 ..],
// D to d[L*4 ..].  The accumulator of one MFMA is src2 of the next (MFMA -> MFMA SrcC
// dependency across the loop back-edge).
#include "corpus.h"

KERNEL(64) mfma_16x16x32_f16_kloop(const GLOBAL f16x8 *a, const GLOBAL f16x8 *b,
                                   const GLOBAL f32x4 *c, GLOBAL f32x4 *d, int nk) {
  unsigned lane = thread_id();
  f32x4 acc = c[lane];
  for (int s = 0; s < nk; ++s)
    acc = __builtin_amdgcn_mfma_f32_16x16x32_f16(a[s * 64 + lane], b[s * 64 + lane], acc, 0, 0, 0);
  d[lane] = acc;
}
