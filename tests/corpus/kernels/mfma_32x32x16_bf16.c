// @kernel: mfma_32x32x16_bf16
// @description: one wave computes D = A*B + C (32x32 f32, K=16 bf16) with one v_mfma_f32_32x32x16_bf16
// @launch: block=64 grid=64
// @expect: \bv_mfma_f32_32x32x16_bf16\b
// @expect: ^global_load_dwordx4\b
//
// Per-lane layout (no shuffling in the kernel): lane L loads its 8 bf16 A values from
// a[L*8 .. L*8+7], its 8 B values from b[L*8 ..], its 16 f32 C values from c[L*16 ..], and
// stores the 16 f32 of D to d[L*16 ..].  Which matrix element sits where is the ISA's
// operand layout; see tests/corpus/REFERENCE.md.
#include "corpus.h"

KERNEL(64) mfma_32x32x16_bf16(const GLOBAL bf16x8 *a, const GLOBAL bf16x8 *b,
                              const GLOBAL f32x16 *c, GLOBAL f32x16 *d) {
  unsigned lane = thread_id();
  d[lane] = __builtin_amdgcn_mfma_f32_32x32x16_bf16(a[lane], b[lane], c[lane], 0, 0, 0);
}
