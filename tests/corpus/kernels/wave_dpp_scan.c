// @kernel: wave_dpp_scan
// @description: wave-level data movement: an inclusive prefix sum with DPP row_shr/row_bcast (update_dpp), quad_perm and row_mirror moves (mov_dpp), readlane/readfirstlane and ds_bpermute_b32
// @launch: block=64 grid=64*G
// @expect: (_dpp\b.*|\b)row_shr:1\b
// @expect: \brow_bcast:15\b
// @expect: \brow_bcast:31\b
// @expect: \bquad_perm:\[3,2,1,0\]
// @expect: \brow_mirror\b
// @expect: ^v_readfirstlane_b32\b
// @expect: ^ds_bpermute_b32\b
//
// g = 64*workgroup_id + lane, w = workgroup_id; all int32 with wrap-around:
//   scan[g]   = x[64w] + ... + x[g]                  (inclusive prefix sum within the wave)
//   quad[g]   = x[g ^ 3]                              (quad_perm [3,2,1,0])
//   mirror[g] = x[64w + 16*(lane/16) + 15 - lane%16]  (row_mirror)
//   bperm[g]  = x[64w + (idx[g] & 63)]                (ds_bpermute, byte address idx*4)
//   uni[g]    = scan[64w + 63] - x[64w]               (readlane 63 minus readfirstlane)
#include "corpus.h"

#define DPP_ROW_SHR(n) (0x110 + (n))
#define DPP_ROW_MIRROR 0x140
#define DPP_ROW_BCAST15 0x142
#define DPP_ROW_BCAST31 0x143
#define DPP_QUAD_PERM_3210 0x1B

KERNEL(64) wave_dpp_scan(const GLOBAL int *x, const GLOBAL int *idx, GLOBAL int *scan,
                         GLOBAL int *quad, GLOBAL int *mirror, GLOBAL int *bperm, GLOBAL int *uni) {
  unsigned lane = thread_id();
  unsigned g = group_id() * 64 + lane;
  int xv = x[g];
  int v = xv;
  /* old = 0 for lanes whose source is outside the row / rows disabled by row_mask */
  v += __builtin_amdgcn_update_dpp(0, v, DPP_ROW_SHR(1), 0xf, 0xf, 0);
  v += __builtin_amdgcn_update_dpp(0, v, DPP_ROW_SHR(2), 0xf, 0xf, 0);
  v += __builtin_amdgcn_update_dpp(0, v, DPP_ROW_SHR(4), 0xf, 0xf, 0);
  v += __builtin_amdgcn_update_dpp(0, v, DPP_ROW_SHR(8), 0xf, 0xf, 0);
  v += __builtin_amdgcn_update_dpp(0, v, DPP_ROW_BCAST15, 0xa, 0xf, 0);
  v += __builtin_amdgcn_update_dpp(0, v, DPP_ROW_BCAST31, 0xc, 0xf, 0);
  scan[g] = v;
  quad[g] = __builtin_amdgcn_mov_dpp(xv, DPP_QUAD_PERM_3210, 0xf, 0xf, 0);
  mirror[g] = __builtin_amdgcn_mov_dpp(xv, DPP_ROW_MIRROR, 0xf, 0xf, 0);
  bperm[g] = __builtin_amdgcn_ds_bpermute(idx[g] * 4, xv);
  uni[g] = __builtin_amdgcn_readlane(v, 63) - __builtin_amdgcn_readfirstlane(xv);
}
