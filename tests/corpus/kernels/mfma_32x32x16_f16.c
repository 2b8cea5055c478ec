// @kernel: mfma_32x32x16_f16
// @description: one wave computes D = A*B (32x32 f32, K=16 f16, no C: src2 is the inline constant 0) with v_mfma_f32_32x32x16_f16
// @launch: block=64 grid=64
// @expect: \bv_mfma_f32_32x32x16_f16\b.*, 0$
//
// Lane L loads a[L*8 .. +7] and b[L*8 .. +7] (f16) and stores d[L*16 .. +15] (f32).
#include "corpus.h"

KERNEL(64) mfma_32x32x16_f16(const GLOBAL f16x8 *a, const GLOBAL f16x8 *b, GLOBAL f32x16 *d) {
  unsigned lane = thread_id();
  d[lane] = __builtin_amdgcn_mfma_f32_32x32x16_f16(a[lane], b[lane], (f32x16)(0.0f), 0, 0, 0);
}
