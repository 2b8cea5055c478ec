// @kernel: lds_dma
// @description: two waves fill LDS with the gfx950 16-byte LDS-DMA loads (buffer_load_dwordx4 ... lds and global_load_lds_dwordx4, M0 = LDS base), wait, barrier, then read what the other wave loaded with ds_read_b128
// @launch: block=128 grid=128
// @expect: ^s_mov_b32 m0,
// @expect: ^buffer_load_dwordx4\b.* lds$
// @expect: ^global_load_lds_dwordx4\b
// @expect: ^s_waitcnt vmcnt\(0\)
// @expect: ^s_barrier$
// @expect: ^ds_read_b128\b
//
// LDS: 256 x 16 bytes, L16[0..255].  Thread t (wave w = t/64, lane = t%64):
//   buffer form: LDS base L16[64*w] (in M0), voffset = ((t*7) & 127) * 16  ->  L16[t] = S16[(t*7) & 127]
//   global form: LDS base L16[128 + 64*w], address &S16[128 + ((t*5) & 127)]  ->  L16[128 + t] = S16[128 + ((t*5) & 127)]
// then dst16[t] = L16[(t + 64) & 127] and dst16[128 + t] = L16[255 - t].
// S16 / dst16 are src / dst viewed as 16-byte units.  src_bytes must be >= 4096.
#include "corpus.h"

KERNEL(128) lds_dma(const GLOBAL u32x4 *src, GLOBAL u32x4 *dst, int src_bytes) {
  LDS_ARRAY(u32x4, l16, 256);
  unsigned t = thread_id();
  unsigned wave = __builtin_amdgcn_readfirstlane(t >> 6);
  __amdgpu_buffer_rsrc_t rs = __builtin_amdgcn_make_buffer_rsrc((GLOBAL void *)src, 0, src_bytes, 0x00020000);
  __builtin_amdgcn_raw_ptr_buffer_load_lds(rs, (LDS void *)&l16[64 * wave], 16, ((t * 7) & 127) * 16, 0, 0, 0);
  __builtin_amdgcn_global_load_lds((GLOBAL void *)&src[128 + ((t * 5) & 127)], (LDS void *)&l16[128 + 64 * wave], 16, 0, 0);
  workgroup_barrier();
  dst[t] = l16[(t + 64) & 127];
  dst[128 + t] = l16[255 - t];
}
