// @kernel: mfma_16x16x32_bf16
// @description: one wave computes D = A*B + C (16x16 f32, K=32 bf16) with one v_mfma_f32_16x16x32_bf16
// @launch: block=64 grid=64
// @expect: \bv_mfma_f32_16x16x32_bf16\b
//
// Lane L loads a[L*8 .. +7] and b[L*8 .. +7] (bf16), c[L*4 .. +3] (f32) and stores d[L*4 .. +3].
#include "corpus.h"

KERNEL(64) mfma_16x16x32_bf16(const GLOBAL bf16x8 *a, const GLOBAL bf16x8 *b,
                              const GLOBAL f32x4 *c, GLOBAL f32x4 *d) {
  unsigned lane = thread_id();
  d[lane] = __builtin_amdgcn_mfma_f32_16x16x32_bf16(a[lane], b[lane], c[lane], 0, 0, 0);
}
