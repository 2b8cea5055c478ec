"""DS instructions against a byte-array model written here (CDNA4 ISA ch.11): ds_write/read
b32..b128 with offsets, read2/write2 (+st64), ds_swizzle (bitmask and quad-permute modes),
ds_permute/bpermute. Poisoned destinations, random data and addresses (no two lanes write the
same bytes)."""
from __future__ import annotations

import numpy as np

from emu_snippet import poison, snippet

RNG = np.random.default_rng()
L = np.arange(64)
LDS = 160 * 1024


def _bytes_of(regs):        # [n, 64] uint32 -> [64, 4n] bytes
    return np.ascontiguousarray(np.stack(regs, 1)).view(np.uint8).reshape(64, -1)


def test_write_then_read_all_widths_and_read2():
    slots = (RNG.permutation(LDS // 2048)[:64] * 2048).astype(np.uint32)   # one distinct 2 KiB slot per lane
    data = [RNG.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32) for _ in range(4)]
    regs = {1: slots, 2: data[0], 3: data[1], 4: data[2], 5: data[3]}
    rows = {r: poison() for r in range(20, 40)}
    regs.update(rows)
    lines = ["ds_write_b128 v1, v[2:5] offset:16", "ds_write_b96 v1, v[2:4] offset:48", "ds_write_b64 v1, v[2:3]",
             "ds_write_b32 v1, v5 offset:12", "ds_write2_b32 v1, v4, v3 offset0:2 offset1:11",
             "ds_write2st64_b64 v1, v[2:3], v[4:5] offset0:1 offset1:3",
             "s_waitcnt lgkmcnt(0)",
             "ds_read_b128 v[20:23], v1 offset:16", "ds_read_b96 v[24:26], v1 offset:48", "ds_read_b64 v[28:29], v1",
             "ds_read_b32 v30, v1 offset:12", "ds_read2_b32 v[32:33], v1 offset0:3 offset1:11",
             "ds_read2st64_b64 v[34:37], v1 offset0:1 offset1:3", "ds_read_u8 v38, v1 offset:17",
             "ds_read_i16 v39, v1 offset:18", "s_waitcnt lgkmcnt(0)"]
    m = snippet(lines, regs, lds=LDS)
    mem = np.zeros(LDS, np.uint8)
    b = _bytes_of(data)                                     # lane l: bytes of v2..v5
    for ln in range(64):
        a = int(slots[ln])
        mem[a + 16:a + 32] = b[ln, 0:16]
        mem[a + 48:a + 60] = b[ln, 0:12]
        mem[a:a + 8] = b[ln, 0:8]
        mem[a + 12:a + 16] = b[ln, 12:16]
        mem[a + 8:a + 12] = b[ln, 8:12]                     # write2_b32 offset0:2 (x4 bytes) <- v4
        mem[a + 44:a + 48] = b[ln, 4:8]                     # offset1:11 <- v3
        mem[a + 512:a + 520] = b[ln, 0:8]                   # st64 b64: offset * 8 * 64
        mem[a + 1536:a + 1544] = b[ln, 8:16]

    def rd(off, n):
        return np.stack([mem[int(s) + off:int(s) + off + n] for s in slots]).view(np.uint32).T
    assert np.array_equal(m.R[0, 20:24], rd(16, 16))
    assert np.array_equal(m.R[0, 24:27], rd(48, 12))
    assert np.array_equal(m.R[0, 28:30], rd(0, 8))
    assert np.array_equal(m.R[0, 30], rd(12, 4)[0])
    assert np.array_equal(m.R[0, 32:34], np.stack([rd(12, 4)[0], rd(44, 4)[0]]))
    assert np.array_equal(m.R[0, 34:38], np.concatenate([rd(512, 8), rd(1536, 8)]))
    assert np.array_equal(m.R[0, 38], np.array([mem[int(s) + 17] for s in slots], np.uint32))
    i16 = np.array([mem[int(s) + 18:int(s) + 20] for s in slots]).view(np.int16)[:, 0]
    assert np.array_equal(m.R[0, 39], i16.astype(np.int64).astype(np.uint32))


def test_swizzle_permute_bpermute():
    x = RNG.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
    ex = RNG.random(64) < 0.85
    perm = RNG.integers(0, 64, 64)
    and_m, or_m, xor_m = 0x1B, 0x02, 0x05
    bitmask = and_m | (or_m << 5) | (xor_m << 10)
    quad = [3, 1, 0, 2]
    qoff = 0x8000 | sum(q << (2 * i) for i, q in enumerate(quad))
    m = snippet([f"ds_swizzle_b32 v3, v1 offset:{bitmask}", f"ds_swizzle_b32 v4, v1 offset:{qoff}",
                 "ds_bpermute_b32 v5, v2, v1", "ds_permute_b32 v6, v2, v1", "s_waitcnt lgkmcnt(0)"],
                {1: x, 2: (4 * perm + 256 * RNG.integers(0, 4, 64)).astype(np.uint32), 3: poison(), 4: poison(),
                 5: poison(), 6: poison()}, lds=256, exec_mask=ex)
    # bitmask mode (32-lane groups): src = ((lane & and) | or) ^ xor within the group
    src = (L & ~31) | ((((L & 31) & and_m) | or_m) ^ xor_m)
    want = np.where(ex, np.where(ex[src], x[src], 0), poison())
    assert np.array_equal(m.R[0, 3], want)
    src = 4 * (L // 4) + np.array(quad)[L % 4]
    assert np.array_equal(m.R[0, 4], np.where(ex, np.where(ex[src], x[src], 0), poison()))
    # bpermute: dst[l] = src[addr[l]/4 mod 64] (pull); permute: dst[addr[l]/4] = src[l] (push)
    assert np.array_equal(m.R[0, 5], np.where(ex, np.where(ex[perm], x[perm], 0), poison()))
    push = np.zeros(64, np.uint32)
    for ln in range(64):            # active lanes in order: the highest lane wins a collision (assumed)
        if ex[ln]:
            push[perm[ln]] = x[ln]
    assert np.array_equal(m.R[0, 6], np.where(ex, push, poison()))
