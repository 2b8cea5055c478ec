// @kernel: ds_read_tr16_b64
// @description: one wave copies a 2 KiB tile into LDS and reads it back with the gfx950 transposing LDS load ds_read_b64_tr_b16 at per-lane byte addresses (second read uses the instruction offset field)
// @launch: block=64 grid=64
// @expect: ^ds_write_b128\b
// @expect: ^ds_read_b64_tr_b16\b
// @expect: ^ds_read_b64_tr_b16\b.* offset:256$
//
// src: 1024 u16 copied to LDS bytes [0, 2048) (lane L copies 16-byte chunks L and L+64).
// addr: per-lane LDS byte address (multiple of 8, at most 2048-8-256).
// dst[L*4 + r]       = element r of lane L's ds_read_b64_tr_b16 at addr[L]
// dst[256 + L*4 + r] = the same at addr[L] + 256
// No barrier: one wave, and LDS operations of a wave execute in order.
#include "corpus.h"

KERNEL(64) ds_read_tr16_b64(const GLOBAL u16x8 *src, const GLOBAL int *addr, GLOBAL i16x4 *dst) {
  LDS_ARRAY(u16x8, tile, 128);
  unsigned lane = thread_id();
  tile[lane] = src[lane];
  tile[lane + 64] = src[lane + 64];
  LDS i16x4 *p = (LDS i16x4 *)((LDS char *)tile + addr[lane]);
  dst[lane] = __builtin_amdgcn_ds_read_tr16_b64_v4i16(p);
  dst[lane + 64] = __builtin_amdgcn_ds_read_tr16_b64_v4i16(p + 32);
}
