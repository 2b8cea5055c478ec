"""Vector memory semantics against a byte model written here: MUBUF buffer loads/stores (offen, idxen,
both, immediate offset, SGPR soffset, V# decode, range checking), LDS-DMA, GLOBAL with saddr and with a
64-bit vaddr, atomics (add_f32, pk_add_f16, pk_add_bf16) and alignment.

Rules tested (CDNA4 ISA ch.9 "Buffer addressing"; notes §3.3):
* address = V#.base + soffset + (idxen ? index*stride : 0) + (offen ? voffset : 0) + inst_offset;
  V# word0 = base[31:0], word1 = base[47:32] | stride[13:0] << 16, word2 = num_records.
* range checking (GFX9/CDNA "Range Checking"): raw accesses (no idxen): out of range when
  offset >= num_records - soffset, i.e. the byte offset from the base (soffset included) reaches
  num_records; "load/store-dword-x{2,3,4} range-check per component": every dword on its own.
  Structured accesses (idxen, stride != 0) count num_records in records: out of range when
  index >= num_records, the whole lane (LLVM D44401: on GFX9 "IDXEN matters for interpretation of
  buffer sizes"; aiter's gfx950 backward kernels size their idxen buffers so). Out-of-range loads
  return 0, stores are dropped. The test only uses dword-aligned offsets and num_records, where
  "start >= num_records" and "end > num_records" agree.
* LDS-DMA: lane L writes LDS at M0[17:0] + inst_offset + L*4 (dword) / L*16 (x3, x4); the memory side
  uses the normal buffer address (inst_offset applied to both).
* alignment: with the ROCm default (SH_MEM_CONFIG alignment_mode = unaligned) dword loads/stores may be
  unaligned; atomics must be naturally (4-byte) aligned.
"""
from __future__ import annotations

import numpy as np
import pytest

from emu_snippet import POISON, poison, snippet
from flyasm.emu import EmuError, Memory

RNG = np.random.default_rng()
L = np.arange(64)


def addresses(*sizes):
    """Device addresses snippet() will give buffers of these sizes (same allocator, same order)."""
    mem = Memory()
    return [mem.alloc(n) for n in sizes]


def vsharp(base, stride, num_records, word3=0x00027000):
    return [base & 0xFFFFFFFF, (base >> 32) & 0xFFFF | (stride << 16), num_records, word3]


def sregs_vsharp(start, words):
    return {start + i: w for i, w in enumerate(words)}


def load_ref(mem, rel, nr, ndw, active, index=None):
    """Per lane, per dword: mem bytes at rel+4c if rel+4c < nr (raw: range checked per component), or
    if index < nr (structured: index given, the whole lane), else 0."""
    out = np.zeros((ndw, 64), np.uint32)
    for ln in range(64):
        for c in range(ndw):
            pos = int(rel[ln]) + 4 * c
            if active[ln] and (pos < nr if index is None else index[ln] < nr):
                out[c, ln] = int.from_bytes(mem[pos:pos + 4].tobytes(), "little")
    return out


def test_buffer_loads_addressing_and_range():
    size = 4096
    src = RNG.integers(1, 2**32, size // 4, dtype=np.uint64).astype(np.uint32)
    (a_src,) = addresses(src.nbytes)
    base = a_src + 64                                    # the V# base is not the allocation start
    mem = src.view(np.uint8)[64:]
    nr_raw, stride, nr_st = 2048, 48, 41                 # structured: 41 records of 48 bytes
    soff = 256
    ex = RNG.random(64) < 0.85
    voff = (RNG.integers(0, (nr_raw + 64) // 4, 64) * 4).astype(np.uint32)      # some out of range
    voff[:6] = [nr_raw - 4, nr_raw - 8, nr_raw - 12, nr_raw, nr_raw - 16, 0]     # partial x2/x3/x4
    ex[:9] = True
    idx = RNG.integers(0, nr_st + 3, 64).astype(np.uint32)
    idx[6:9] = [nr_st - 1, nr_st, nr_st + 1]                                   # the last record, and past it
    ioff = (RNG.integers(0, stride // 4 - 4, 64) * 4).astype(np.uint32)
    regs = {1: voff, 2: idx, 3: ioff}
    for r in range(10, 40):
        regs[r] = poison()
    lines = [
        "buffer_load_dword v10, v1, s[4:7], 0 offen offset:12",
        "buffer_load_dwordx2 v[12:13], v1, s[4:7], s8 offen offset:4",
        "buffer_load_dwordx3 v[14:16], v2, s[12:15], 0 idxen offset:8",
        "buffer_load_dwordx4 v[20:23], v[2:3], s[12:15], s9 idxen offen offset:16",
        "buffer_load_dword v24, off, s[4:7], s8 offset:100",
        "buffer_load_dwordx4 v[28:31], v1, s[4:7], 0 offen sc0 sc1 nt",
        "buffer_load_dwordx3 v[32:34], v1, s[4:7], s10 offen offset:8 sc1",
        "s_waitcnt vmcnt(0)",
    ]
    sregs = {**sregs_vsharp(4, vsharp(base, 0, nr_raw)), **sregs_vsharp(12, vsharp(base, stride, nr_st)),
             8: soff, 9: 32, 10: 8}
    m = snippet(lines, regs, sregs, exec_mask=ex, buffers=(src,))
    R = m.R[0]
    zero = np.zeros(64, np.int64)
    cases = [(10, 1, voff + 12, nr_raw, None), (12, 2, voff + 4 + soff, nr_raw, None),
             (14, 3, idx * stride + 8, nr_st, idx), (20, 4, idx * stride + ioff + 16 + 32, nr_st, idx),
             (24, 1, zero + soff + 100, nr_raw, None), (28, 4, voff, nr_raw, None), (32, 3, voff + 8 + 8, nr_raw, None)]
    for text, (row, ndw, rel, nr, index) in zip(lines, cases):
        want = load_ref(mem, rel.astype(np.int64), nr, ndw, ex, index)
        got = R[row:row + ndw]
        for c in range(ndw):
            assert np.array_equal(got[c][ex], want[c][ex]), (text, c)
            assert np.all(got[c][~ex] == POISON)
    # the partial lanes really were partial: x4 at nr-8 keeps 2 dwords, zeroes 2
    assert not ex[1] or (R[28, 1] != 0 and R[30, 1] == 0 and R[31, 1] == 0)


def test_buffer_stores_addressing_and_range():
    nr = 1024
    ex = RNG.random(64) < 0.85
    # distinct 16-byte slots per lane (no two lanes write the same bytes), some beyond num_records
    slot = RNG.permutation(np.arange(0, (nr + 256) // 16))[:64].astype(np.uint32) * 16
    slot[:3] = [nr - 4, nr - 8, nr - 12]
    ex[:3] = True
    vals = [RNG.integers(1, 2**32, 64, dtype=np.uint64).astype(np.uint32) for _ in range(4)]
    regs = {1: slot, 4: vals[0], 5: vals[1], 6: vals[2], 7: vals[3]}
    bufsz = [("buffer_store_dword v4, v1, s[8:11], 0 offen", 1, 0),
             ("buffer_store_dwordx2 v[4:5], v1, s[12:15], s20 offen offset:0", 2, 0),
             ("buffer_store_dwordx3 v[4:6], v1, s[16:19], 0 offen sc0 sc1", 3, 0),
             ("buffer_store_dwordx4 v[4:7], v1, s[24:27], 0 offen offset:0 nt", 4, 0)]
    # four disjoint regions of the destination, one per instruction (base differs per V#)
    region = 2048 // 4
    dsts = [np.full(region // 4, 0xA5A5A5A5, np.uint32) for _ in range(4)]
    addrs = addresses(*[d.nbytes + 2048 for d in dsts])
    bufs = [np.concatenate([d, np.full(2048 // 4, 0xA5A5A5A5, np.uint32)]) for d in dsts]
    sregs = {}
    for i, s0 in enumerate((8, 12, 16, 24)):
        sregs.update(sregs_vsharp(s0, vsharp(addrs[i], 0, nr)))
    sregs[20] = 0
    m = snippet([b[0] for b in bufsz] + ["s_waitcnt vmcnt(0)"], regs, sregs, exec_mask=ex, buffers=bufs)
    for (text, ndw, _), buf in zip(bufsz, bufs):
        want = np.full(buf.size, 0xA5A5A5A5, np.uint32).view(np.uint8).copy()
        for ln in range(64):
            for c in range(ndw):
                pos = int(slot[ln]) + 4 * c
                if ex[ln] and pos < nr:
                    want[pos:pos + 4] = np.array([vals[c][ln]], np.uint32).view(np.uint8)
        assert np.array_equal(buf.view(np.uint8), want), text


def test_lds_dma_m0_inst_offset_lane_size():
    src = RNG.integers(1, 2**32, 1024, dtype=np.uint64).astype(np.uint32)
    (a,) = addresses(src.nbytes)
    nr = 3072
    lds = 8192
    ex = RNG.random(64) < 0.85
    voff = (RNG.integers(0, (nr + 256) // 16, 64) * 16).astype(np.uint32)        # some out of range
    m0a, m0b, m0c = 4 * int(RNG.integers(0, 64)), 2048 + 16 * int(RNG.integers(0, 64)), 5120 + 4 * int(RNG.integers(0, 256))
    pois = poison()
    lines = []
    for k in range(lds // 1024):                         # poison the whole LDS first
        lines.append(f"ds_write_b128 v2, v[4:7] offset:{1024 * k}")
    lines += ["s_waitcnt lgkmcnt(0)", "s_mov_b64 exec, s[30:31]",
              "s_mov_b32 m0, s20", "s_nop 0",
              "buffer_load_dword v1, s[8:11], 0 offen offset:8 lds",
              "s_mov_b32 m0, s21", "s_nop 0",
              "buffer_load_dwordx4 v1, s[8:11], s22 offen offset:32 lds",
              "s_mov_b32 m0, s23", "s_nop 0",
              "buffer_load_dwordx3 v1, s[8:11], 0 offen offset:4 lds",
              "s_waitcnt vmcnt(0)"]
    regs = {1: voff, 2: (L * 16).astype(np.uint32), 4: pois, 5: pois, 6: pois, 7: pois}
    sregs = {**sregs_vsharp(8, vsharp(a, 0, nr)), 20: m0a, 21: m0b, 22: 16, 23: m0c}
    m = snippet(lines, regs, {**sregs, 30: 0xFFFFFFFF, 31: 0xFFFFFFFF}, lds=lds, buffers=(src,))
    got = m.LDS[:lds].copy()
    want = np.tile(np.array([POISON], np.uint32).view(np.uint8), lds // 4)
    mem = src.view(np.uint8)

    def dma(m0, inst_off, soffset, nbytes, step):
        for ln in range(64):
            rel = int(voff[ln]) + inst_off + soffset
            lpos = m0 + inst_off + ln * step
            for c in range(max(1, nbytes // 4)):
                p = rel + 4 * c
                word = mem[p:p + 4] if p < nr else np.zeros(4, np.uint8)
                want[lpos + 4 * c:lpos + 4 * c + 4] = word
    dma(m0a, 8, 0, 4, 4)
    dma(m0b, 32, 16, 16, 16)
    dma(m0c, 4, 0, 12, 16)
    assert np.array_equal(got, want)
    # EXEC: inactive lanes write nothing
    bits = int(np.packbits(ex, bitorder="little").view(np.uint64)[0])
    m2 = snippet(lines, regs, {**sregs, 30: bits & 0xFFFFFFFF, 31: bits >> 32}, lds=lds, buffers=(src,))
    g2 = m2.LDS[:lds]
    pois12 = np.tile(np.array([POISON], np.uint32).view(np.uint8), 3)
    for ln in range(64):
        p = m0c + 4 + 16 * ln
        assert np.array_equal(g2[p:p + 12], want[p:p + 12] if ex[ln] else pois12)


def test_global_saddr_and_vaddr64():
    src = RNG.integers(1, 2**32, 512, dtype=np.uint64).astype(np.uint32)
    dst = np.full(512, 0x5A5A5A5A, np.uint32)
    a_src, a_dst = addresses(src.nbytes, dst.nbytes)
    ex = RNG.random(64) < 0.85
    o1 = (RNG.permutation(120)[:64] * 16 + 16).astype(np.uint32)             # byte offsets (distinct)
    o1[:2] = [1963, 1991]                                                     # unaligned dword accesses
    v64 = (a_src + o1.astype(np.uint64))
    d64 = (a_dst + o1.astype(np.uint64))
    regs = {1: o1, 2: (v64 & 0xFFFFFFFF).astype(np.uint32), 3: (v64 >> 32).astype(np.uint32),
            4: (d64 & 0xFFFFFFFF).astype(np.uint32), 5: (d64 >> 32).astype(np.uint32)}
    for r in range(10, 24):
        regs[r] = poison()
    sregs = {6: a_src & 0xFFFFFFFF, 7: a_src >> 32, 8: a_dst & 0xFFFFFFFF, 9: a_dst >> 32}
    lines = ["global_load_dword v10, v1, s[6:7] offset:-16",
             "global_load_dwordx2 v[12:13], v[2:3], off offset:8",
             "global_load_dwordx4 v[16:19], v[2:3], off sc0 sc1 nt",
             "s_waitcnt vmcnt(0)",
             "global_store_dwordx3 v1, v[16:18], s[8:9] offset:-16",
             "global_store_dword v[4:5], v10, off offset:12",
             "s_waitcnt vmcnt(0)"]
    m = snippet(lines, regs, sregs, exec_mask=ex, buffers=(src, dst))
    mb = src.view(np.uint8)

    def rd(pos, ndw):
        return np.array([int.from_bytes(mb[pos + 4 * c:pos + 4 * c + 4].tobytes(), "little") for c in range(ndw)],
                        np.uint32)
    R = m.R[0]
    want = np.full(dst.size * 4, 0x5A, np.uint8)
    for ln in range(64):
        if not ex[ln]:
            assert R[10, ln] == POISON and R[16, ln] == POISON
            continue
        o = int(o1[ln])
        assert R[10, ln] == rd(o - 16, 1)[0]
        assert list(R[12:14, ln]) == list(rd(o + 8, 2))
        assert list(R[16:20, ln]) == list(rd(o, 4))
        want[o - 16:o - 4] = mb[o:o + 12]
    for ln in range(64):                                  # the dword store after the x3 (same order)
        if ex[ln]:
            o = int(o1[ln])
            want[o + 12:o + 16] = mb[o - 16:o - 12]
    assert np.array_equal(dst.view(np.uint8), want)


# ---- atomics -------------------------------------------------------------------------------------
def f32_vals(n, lo=-8, hi=8):
    return (RNG.uniform(1, 2, n) * 2.0 ** RNG.integers(lo, hi, n) * RNG.choice([-1, 1], n)).astype(np.float32)


def bf16_rne_bits(x64):
    """float64 (exact sum of two bf16 inside float32's range) -> bf16 bits, round to nearest even."""
    b = np.asarray(x64, np.float64).astype(np.float32).view(np.uint32).astype(np.int64)   # exact (see caller)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF


def test_atomics_add_f32_pk_f16_pk_bf16():
    n = 64
    mem_f32 = f32_vals(n)
    mem_f32[:4] = [0.0, -0.0, np.inf, 1.0]
    add_f32 = f32_vals(n)
    add_f32[:4] = [-0.0, -0.0, 1.0, np.nan]
    # f16 / bf16 pairs with exponents within 8 of each other: sums are exact in float64 (and float32)
    h_mem = (RNG.uniform(1, 2, (n, 2)) * 2.0 ** RNG.integers(-4, 4, (n, 2)) * RNG.choice([-1, 1], (n, 2)))
    h_add = (RNG.uniform(1, 2, (n, 2)) * 2.0 ** RNG.integers(-4, 4, (n, 2)) * RNG.choice([-1, 1], (n, 2)))
    h_mem16, h_add16 = h_mem.astype(np.float16), h_add.astype(np.float16)
    bm = bf16_rne_bits(h_mem)
    ba = bf16_rne_bits(h_add)
    bf = lambda bits: (np.asarray(bits, np.int64).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    bufs = [mem_f32.copy(), mem_f32.copy(), h_mem16.copy(), h_mem16.copy(),
            (bm[:, 0] | bm[:, 1] << 16).astype(np.uint32), (bm[:, 0] | bm[:, 1] << 16).astype(np.uint32)]
    addrs = addresses(*[b.nbytes for b in bufs])
    ex = RNG.random(64) < 0.85
    voff = (L * 4).astype(np.uint32)
    regs = {1: voff, 2: add_f32, 3: add_f32.copy(), 4: h_add16.view(np.uint32).reshape(-1), 5: h_add16.view(np.uint32).reshape(-1),
            6: (ba[:, 0] | ba[:, 1] << 16).astype(np.uint32), 7: (ba[:, 0] | ba[:, 1] << 16).astype(np.uint32),
            8: poison(), 9: poison()}
    for i in range(0, 4):
        regs[20 + 2 * i] = ((addrs[[1, 3, 5, 1][i]] + voff.astype(np.uint64)) & 0xFFFFFFFF).astype(np.uint32)
        regs[21 + 2 * i] = ((addrs[[1, 3, 5, 1][i]] + voff.astype(np.uint64)) >> 32).astype(np.uint32)
    sregs = {**sregs_vsharp(8, vsharp(addrs[0], 0, 256)), **sregs_vsharp(12, vsharp(addrs[2], 0, 256)),
             **sregs_vsharp(16, vsharp(addrs[4], 0, 256))}
    lines = ["buffer_atomic_add_f32 v2, v1, s[8:11], 0 offen sc0",          # returns the old value in v2
             "global_atomic_add_f32 v8, v[20:21], v3, off sc0",
             "buffer_atomic_pk_add_f16 v4, v1, s[12:15], 0 offen",
             "global_atomic_pk_add_f16 v[22:23], v5, off",
             "buffer_atomic_pk_add_bf16 v6, v1, s[16:19], 0 offen",
             "global_atomic_pk_add_bf16 v[24:25], v7, off",
             "s_waitcnt vmcnt(0)"]
    m = snippet(lines, regs, {**sregs, 28: 0}, exec_mask=ex, buffers=bufs)
    with np.errstate(all="ignore"):
        want32 = np.where(ex, (mem_f32.astype(np.float64) + add_f32.astype(np.float64)).astype(np.float32), mem_f32)
    for b in bufs[:2]:
        ok = (b.view(np.uint32) == want32.view(np.uint32)) | (np.isnan(b) & np.isnan(want32))
        assert ok.all()
    assert np.array_equal(m.R[0, 2][ex], mem_f32.view(np.uint32)[ex])        # sc0: pre-op value returned
    assert np.array_equal(m.R[0, 8][ex], mem_f32.view(np.uint32)[ex])
    assert np.array_equal(m.R[0, 8][~ex], poison()[~ex])
    want16 = np.where(ex[:, None], (h_mem16.astype(np.float64) + h_add16.astype(np.float64)).astype(np.float16),
                      h_mem16)
    for b in bufs[2:4]:
        assert np.array_equal(b.view(np.uint16), want16.view(np.uint16))
    wbf = np.where(ex[:, None], bf16_rne_bits(bf(bm) + bf(ba)), bm)
    for b in bufs[4:6]:
        assert np.array_equal(b & 0xFFFF, wbf[:, 0]) and np.array_equal(b >> 16, wbf[:, 1])
    assert not np.array_equal(wbf, bm)


def test_atomic_collisions_and_range():
    # every lane adds into 4 words: integer-valued floats, so any order gives the exact sum
    vals = RNG.integers(-1000, 1000, 64).astype(np.float32)
    buf = np.zeros(8, np.float32)
    (a,) = addresses(buf.nbytes)
    voff = ((L % 4) * 4).astype(np.uint32)
    voff[60:] = 16 + 4 * np.arange(4)          # beyond num_records=16: dropped, return 0
    m = snippet(["buffer_atomic_add_f32 v2, v1, s[8:11], 0 offen sc0", "s_waitcnt vmcnt(0)"],
                {1: voff, 2: vals}, sregs_vsharp(8, vsharp(a, 0, 16)), buffers=(buf,))
    assert np.array_equal(buf[:4], np.array([vals[:60][L[:60] % 4 == j].sum() for j in range(4)], np.float32))
    assert np.all(buf[4:] == 0) and np.all(m.R[0, 2, 60:] == 0)


def test_atomic_alignment_is_required():
    buf = np.zeros(16, np.float32)
    (a,) = addresses(buf.nbytes)
    with pytest.raises(EmuError, match="misaligned atomic"):
        snippet(["buffer_atomic_add_f32 v2, v1, s[8:11], 0 offen", "s_waitcnt vmcnt(0)"],
                {1: (L % 8 * 4 + 2).astype(np.uint32), 2: np.ones(64, np.float32)},
                sregs_vsharp(8, vsharp(a, 0, 64)), buffers=(buf,))


def test_swizzled_buffer_is_not_emulated():
    buf = np.zeros(64, np.uint32)
    (a,) = addresses(buf.nbytes)
    with pytest.raises(EmuError, match="not emulated: swizzled buffer"):
        snippet(["buffer_load_dword v2, v1, s[8:11], 0 offen", "s_waitcnt vmcnt(0)"], {1: np.zeros(64, np.uint32)},
                sregs_vsharp(8, vsharp(a, 0, 64, 0x00027000 | 1 << 23)), buffers=(buf,))
