// @kernel: mfma_16x16x64_i8
// @description: one wave computes D = A*B + C (16x16 i32, K=64 signed i8) with v_mfma_i32_16x16x64_i8
// @launch: block=64 grid=64
// @expect: \bv_mfma_i32_16x16x64_i8\b
//
// Lane L loads 16 int8 from a[L*16 .. +15] and b[L*16 .. +15], 4 int32 from c[L*4 ..],
// stores d[L*4 .. +3].
#include "corpus.h"

KERNEL(64) mfma_16x16x64_i8(const GLOBAL i32x4 *a, const GLOBAL i32x4 *b,
                            const GLOBAL i32x4 *c, GLOBAL i32x4 *d) {
  unsigned lane = thread_id();
  d[lane] = __builtin_amdgcn_mfma_i32_16x16x64_i8(a[lane], b[lane], c[lane], 0, 0, 0);
}
