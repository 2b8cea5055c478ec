// @kernel: permlane_swap
// @description: one wave exchanges lanes between two registers with v_permlane32_swap_b32 and v_permlane16_swap_b32 (both registers are written)
// @launch: block=64 grid=64
// @expect: ^v_permlane32_swap_b32
// @expect: ^v_permlane16_swap_b32
//
// x, y: 64 u32 each.  The builtin takes (vdst_old, src0_old) and returns (vdst_new, src0_new).
// out[0..63] = vdst after permlane32_swap, out[64..127] = src0 after it,
// out[128..191] = vdst after permlane16_swap, out[192..255] = src0 after it.
#include "corpus.h"

KERNEL(64) permlane_swap(const GLOBAL unsigned *x, const GLOBAL unsigned *y, GLOBAL unsigned *out) {
  unsigned lane = thread_id();
  unsigned vx = x[lane], vy = y[lane];
  u32x2 r32 = __builtin_amdgcn_permlane32_swap(vx, vy, 0, 0);
  u32x2 r16 = __builtin_amdgcn_permlane16_swap(vx, vy, 0, 0);
  out[lane] = r32.x;
  out[lane + 64] = r32.y;
  out[lane + 128] = r16.x;
  out[lane + 192] = r16.y;
}
