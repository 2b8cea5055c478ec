// @kernel: mfma_16x16x32_fp8
// @description: one wave computes D = A*B + C (16x16 f32, K=32, A and B in fp8 E4M3 - the OCP format on gfx950) with v_mfma_f32_16x16x32_fp8_fp8
// @launch: block=64 grid=64
// @expect: \bv_mfma_f32_16x16x32_fp8_fp8\b
//
// Lane L loads 8 fp8 bytes from a[L*8 .. +7] and b[L*8 .. +7] (one 64-bit value each),
// 4 f32 from c[L*4 ..], stores d[L*4 .. +3].
#include "corpus.h"

KERNEL(64) mfma_16x16x32_fp8(const GLOBAL long *a, const GLOBAL long *b,
                             const GLOBAL f32x4 *c, GLOBAL f32x4 *d) {
  unsigned lane = thread_id();
  d[lane] = __builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8(a[lane], b[lane], c[lane], 0, 0, 0);
}
