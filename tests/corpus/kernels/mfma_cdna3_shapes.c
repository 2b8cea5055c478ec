// @kernel: mfma_cdna3_shapes
// @description: two independent pre-gfx950 (CDNA3) MFMA shapes in one wave: D0 = A0*B0 with v_mfma_f32_32x32x8_bf16 (builtin mfma_f32_32x32x8bf16_1k) and D1 = A1*B1 with v_mfma_f32_16x16x16_f16
// @launch: block=64 grid=64
// @expect: \bv_mfma_f32_32x32x8_bf16\b
// @expect: \bv_mfma_f32_16x16x16_f16\b
//
// 32x32x8 bf16: lane L loads 4 bf16 (as raw 16-bit) from a0[L*4 ..] and b0[L*4 ..], stores
// d0[L*16 .. +15].  16x16x16 f16: lane L loads 4 f16 from a1[L*4 ..] and b1[L*4 ..], stores
// d1[L*4 .. +3].  Both accumulate onto zero.
#include "corpus.h"

KERNEL(64) mfma_cdna3_shapes(const GLOBAL i16x4 *a0, const GLOBAL i16x4 *b0, GLOBAL f32x16 *d0,
                             const GLOBAL f16x4 *a1, const GLOBAL f16x4 *b1, GLOBAL f32x4 *d1) {
  unsigned lane = thread_id();
  d0[lane] = __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(a0[lane], b0[lane], (f32x16)(0.0f), 0, 0, 0);
  d1[lane] = __builtin_amdgcn_mfma_f32_16x16x16f16(a1[lane], b1[lane], (f32x4)(0.0f), 0, 0, 0);
}
