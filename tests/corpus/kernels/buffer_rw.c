// @kernel: buffer_rw
// @description: one wave uses raw buffer resources (make_buffer_rsrc) for dword and dwordx4 loads and stores, including out-of-range loads (read 0) and out-of-range stores (dropped) decided by num_records
// @launch: block=64 grid=64
// @expect: ^buffer_load_dword v\d+, v\d+, s\[\d+:\d+\], 0 offen$
// @expect: ^buffer_load_dwordx4\b.* offen$
// @expect: ^buffer_store_dword\b
// @expect: ^buffer_store_dwordx4\b.* offen offset:256$
//
// src buffer: num_records = src_bytes; dst buffer: num_records = dst_bytes.
//   x    = load_b32 (src, byte offset L*4)
//   v    = load_b128(src, byte offset L*16)
//   dst[L]                  = x                (store_b32,  byte offset L*4)
//   dst[64 + 4*L .. +3]     = v                (store_b128, byte offset 256 + L*16)
//   dst[320 + L]            = x + L + 1        (store_b32,  byte offset 1280 + L*4)
#include "corpus.h"

#define RSRC_FLAGS 0x00020000 /* word 3 of the V#: DATA_FORMAT = 32, as LLVM and CK use on gfx9 */

KERNEL(64) buffer_rw(const GLOBAL unsigned *src, GLOBAL unsigned *dst, int src_bytes, int dst_bytes) {
  unsigned lane = thread_id();
  __amdgpu_buffer_rsrc_t rs = __builtin_amdgcn_make_buffer_rsrc((GLOBAL void *)src, 0, src_bytes, RSRC_FLAGS);
  __amdgpu_buffer_rsrc_t rd = __builtin_amdgcn_make_buffer_rsrc(dst, 0, dst_bytes, RSRC_FLAGS);
  unsigned x = __builtin_amdgcn_raw_buffer_load_b32(rs, lane * 4, 0, 0);
  u32x4 v = __builtin_amdgcn_raw_buffer_load_b128(rs, lane * 16, 0, 0);
  __builtin_amdgcn_raw_buffer_store_b32(x, rd, lane * 4, 0, 0);
  __builtin_amdgcn_raw_buffer_store_b128(v, rd, 256 + lane * 16, 0, 0);
  __builtin_amdgcn_raw_buffer_store_b32(x + lane + 1, rd, 1280 + lane * 4, 0, 0);
}
