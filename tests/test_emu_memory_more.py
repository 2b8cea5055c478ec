"""More memory semantics against byte models written here (CDNA4 ISA ch.9-11, notes §3.1/§3.3):
DS sub-dword reads/writes (u8/i8/u16, b8/b16), read2/write2 b64 and st64 b32, ds_read_b64_tr_b16
(notes §3.1 lane model, written out here) and tr_b8/tr_b4 (the inferred generalisation of §3.1,
not verified against hardware), MUBUF/GLOBAL byte/short loads (zero/sign extension) and stores,
global dwordx2/x3/x4, integer atomic add (wrap, collisions, sc0 return), global_load_lds_* (LDS
address M0 + inst_offset + TID*4, or TID*16 for x3/x4).

Random data every run; destinations poisoned; partial EXEC where the instruction allows it.
"""
from __future__ import annotations

import numpy as np

from emu_snippet import POISON, poison, snippet
from flyasm.emu import Memory

RNG = np.random.default_rng()
L = np.arange(64)


def rnd32(n=64):
    return RNG.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)


def exec_sregs(ex, lo=30):
    bits = int(np.packbits(ex, bitorder="little").view(np.uint64)[0])
    return {lo: bits & 0xFFFFFFFF, lo + 1: bits >> 32}


def addresses(*sizes):
    mem = Memory()
    return [mem.alloc(n) for n in sizes]


def vsharp(base, nr, start):
    return {start: base & 0xFFFFFFFF, start + 1: (base >> 32) & 0xFFFF, start + 2: nr, start + 3: 0x00027000}


def le(b):
    return int.from_bytes(bytes(b), "little")


def sext(v, bits):
    v &= (1 << bits) - 1
    return (v - (1 << bits) if v >> (bits - 1) else v) & 0xFFFFFFFF


# ---- DS ------------------------------------------------------------------------------------------
SLOT = 2048


def test_ds_sub_dword_write2_b64_st64_b32():
    lds = 80 * SLOT
    slots = (RNG.permutation(80)[:64] * SLOT).astype(np.uint32)       # one distinct 2 KiB slot per lane
    ex = RNG.random(64) < 0.8
    ex[:2] = True
    regs = {1: slots, 3: rnd32(), 4: rnd32(), 5: rnd32(), 6: rnd32(), 7: rnd32()}
    bgw = [rnd32() for _ in range(4)]
    for i in range(4):
        regs[10 + i] = bgw[i]
    for r in range(20, 30):
        regs[r] = poison()
    bg_offs = list(range(0, 256, 16)) + [256 * q for q in range(1, 8)]
    o8, o16 = int(RNG.integers(0, 64)), 64 + 2 * int(RNG.integers(0, 32))
    p0, p1 = (int(x) for x in RNG.choice(np.arange(16, 32), 2, replace=False))
    q0, q1 = (int(x) for x in RNG.choice(np.arange(1, 8), 2, replace=False))
    r8a, r8b = int(RNG.integers(0, 64)), o8                          # reads: random and the written byte
    r16 = o16 if RNG.random() < 0.5 else 64 + 2 * int(RNG.integers(0, 32))
    rp0, rp1 = p0, int(RNG.integers(0, 32))
    rq0, rq1 = q1, int(RNG.integers(0, 8))
    lines = [f"ds_write_b128 v1, v[10:13] offset:{o}" for o in bg_offs]
    lines += ["s_waitcnt lgkmcnt(0)", "s_mov_b64 exec, s[30:31]",
              f"ds_read_i8 v20, v1 offset:{r8a}", f"ds_read_u8 v21, v1 offset:{r8a}",
              f"ds_write_b8 v1, v3 offset:{o8}", f"ds_write_b16 v1, v4 offset:{o16}",
              f"ds_write2_b64 v1, v[4:5], v[6:7] offset0:{p0} offset1:{p1}",
              f"ds_write2st64_b32 v1, v3, v7 offset0:{q0} offset1:{q1}",
              "s_waitcnt lgkmcnt(0)",
              f"ds_read_i8 v22, v1 offset:{r8b}", f"ds_read_u16 v23, v1 offset:{r16}",
              f"ds_read2_b64 v[24:27], v1 offset0:{rp0} offset1:{rp1}",
              f"ds_read2st64_b32 v[28:29], v1 offset0:{rq0} offset1:{rq1}",
              "s_waitcnt lgkmcnt(0)"]
    m = snippet(lines, regs, exec_sregs(ex), lds=lds)
    # byte model of each lane's slot
    model = {}
    for ln in range(64):
        s = bytearray(SLOT)
        blk = b"".join(int(bgw[i][ln]).to_bytes(4, "little") for i in range(4))
        for o in bg_offs:
            s[o:o + 16] = blk
        model[ln] = s
    R = m.R[0]
    u = lambda r, ln: int(regs[r][ln])
    for ln in range(64):
        s = model[ln]
        if not ex[ln]:
            assert all(R[r, ln] == POISON for r in range(20, 30)), ln
            continue
        assert R[20, ln] == sext(s[r8a], 8) and R[21, ln] == s[r8a], ln
        s[o8] = u(3, ln) & 0xFF
        s[o16:o16 + 2] = (u(4, ln) & 0xFFFF).to_bytes(2, "little")
        s[8 * p0:8 * p0 + 8] = (u(4, ln) | u(5, ln) << 32).to_bytes(8, "little")
        s[8 * p1:8 * p1 + 8] = (u(6, ln) | u(7, ln) << 32).to_bytes(8, "little")
        s[256 * q0:256 * q0 + 4] = u(3, ln).to_bytes(4, "little")
        s[256 * q1:256 * q1 + 4] = u(7, ln).to_bytes(4, "little")
        assert R[22, ln] == sext(s[r8b], 8), ln
        assert R[23, ln] == le(s[r16:r16 + 2]), ln
        want = [le(s[8 * rp0 + 4 * c:8 * rp0 + 4 * c + 4]) for c in range(2)] + \
               [le(s[8 * rp1 + 4 * c:8 * rp1 + 4 * c + 4]) for c in range(2)]
        assert list(R[24:28, ln]) == want, ln
        assert list(R[28:30, ln]) == [le(s[256 * rq0:256 * rq0 + 4]), le(s[256 * rq1:256 * rq1 + 4])], ln
    # the whole background region of every slot (writes touched only their bytes; inactive lanes none)
    got = m.LDS[:lds]
    for ln in range(64):
        a = int(slots[ln])
        for o in bg_offs:
            assert bytes(got[a + o:a + o + 16]) == bytes(model[ln][o:o + 16]), (ln, o)


def tr_b16_model(inb):
    """notes §3.1 verbatim: IN[L][e] = b16 element e of lane L's 8 bytes;
    OUT[16g+j][r] = IN[16g + 4r + j//4][j % 4]; OUT element r -> bits 16r of the 64-bit result."""
    IN = [[le(inb[ln][2 * e:2 * e + 2]) for e in range(4)] for ln in range(64)]
    out = []
    for lane in range(64):
        g, j = divmod(lane, 16)
        out.append(sum(IN[16 * g + 4 * r + j // 4][j % 4] << (16 * r) for r in range(4)))
    return out


def tr_generic_model(inb, bits):
    """INFERRED generalisation (notes §3.1, not verified): E = 64/bits elements per lane, C = 16/E;
    OUT[16g+j][r] = IN[16g + r*C + j//E][j % E]."""
    E, C = 64 // bits, 16 // (64 // bits)
    mask = (1 << bits) - 1
    IN = [[(le(inb[ln]) >> (bits * e)) & mask for e in range(E)] for ln in range(64)]
    out = []
    for lane in range(64):
        g, j = divmod(lane, 16)
        out.append(sum(IN[16 * g + r * C + j // E][j % E] << (bits * r) for r in range(E)))
    return out


def test_ds_read_b64_tr_b16_b8_b4():
    lds = 64 * 1024
    addr = (RNG.permutation(lds // 64 - 1)[:64] * 64).astype(np.uint32)    # 8-aligned (64-aligned), distinct
    off = 8 * int(RNG.integers(0, 4))
    d0, d1 = rnd32(), rnd32()
    regs = {1: addr, 2: d0, 3: d1}
    for r in range(10, 16):
        regs[r] = poison()
    lines = [f"ds_write_b64 v1, v[2:3] offset:{off}", "s_waitcnt lgkmcnt(0)",
             f"ds_read_b64_tr_b16 v[10:11], v1 offset:{off}", f"ds_read_b64_tr_b8 v[12:13], v1 offset:{off}",
             f"ds_read_b64_tr_b4 v[14:15], v1 offset:{off}", "s_waitcnt lgkmcnt(0)"]
    m = snippet(lines, regs, lds=lds)
    inb = [(int(d0[ln]) | int(d1[ln]) << 32).to_bytes(8, "little") for ln in range(64)]
    R = m.R[0]
    got = lambda r: [int(R[r, ln]) | int(R[r + 1, ln]) << 32 for ln in range(64)]
    assert got(10) == tr_b16_model(inb)
    assert got(10) == tr_generic_model(inb, 16)         # the generalisation reduces to §3.1 for b16
    assert got(12) == tr_generic_model(inb, 8)          # inferred
    assert got(14) == tr_generic_model(inb, 4)          # inferred
    assert got(10) != [le(b) for b in inb]              # it really shuffles


def test_ds_read_b64_tr_b16_gives_mfma_b_fragment():
    """notes §3.1 evidence: row-major B[32][16] (b16) in LDS, lane l of block g reads row
    k = 8g + l//4 (+4 for the second load), columns 4*(l%4)..+3 -> lane l gets n = l%16,
    k = 8g + kofs .. +3, i.e. the 16x16x32 B operand fragment (written here from notes §2)."""
    B = RNG.integers(0, 2**16, (32, 16)).astype(np.uint16)
    flat = B.reshape(-1).view(np.uint32)                      # 256 dwords, 32 B per row
    regs = {1: (L * 16).astype(np.uint32)}
    for c in range(4):
        regs[2 + c] = np.array([flat[(4 * ln + c) % 256] for ln in range(64)], np.uint32)
    lane_in, g = L % 16, L // 16
    regs[6] = ((8 * g + lane_in // 4) * 32 + (lane_in % 4) * 8).astype(np.uint32)
    for r in range(10, 14):
        regs[r] = poison()
    m = snippet(["ds_write_b128 v1, v[2:5]", "s_waitcnt lgkmcnt(0)",
                 "ds_read_b64_tr_b16 v[10:11], v6", "ds_read_b64_tr_b16 v[12:13], v6 offset:128",
                 "s_waitcnt lgkmcnt(0)"], regs, lds=1024)
    R = m.R[0]
    for ln in range(64):
        n = ln % 16
        for h, kofs in ((10, 0), (12, 4)):
            v = int(R[h, ln]) | int(R[h + 1, ln]) << 32
            assert [(v >> (16 * t)) & 0xFFFF for t in range(4)] == \
                [int(B[8 * (ln // 16) + kofs + t, n]) for t in range(4)], (ln, kofs)


# ---- MUBUF / GLOBAL sub-dword and wide -------------------------------------------------------------
def test_buffer_byte_short_loads_stores():
    size = 4096
    src = rnd32(size // 4)
    dst = rnd32(size // 4)
    dst0 = dst.copy()
    a_src, a_dst = addresses(src.nbytes, dst.nbytes)
    nr = 2048
    ex = RNG.random(64) < 0.85
    ex[:4] = True
    vb = RNG.integers(0, nr + 128, 64).astype(np.uint32)                 # byte offsets, some beyond nr
    vh = (RNG.integers(0, (nr + 128) // 2, 64) * 2).astype(np.uint32)
    vb[:2], vh[:2] = [nr - 1, nr], [nr - 2, nr]
    cand = np.array([c for c in range(0, nr + 256, 4) if not nr - 8 <= c <= nr + 8])
    slot = RNG.permutation(cand)[:64].astype(np.uint32)                 # store slots, distinct dwords
    slot[:4] = [nr - 4, nr, nr - 2, nr + 2]                             # partly / wholly out of range
    val = rnd32()
    regs = {1: vb, 2: vh, 3: slot, 4: val}
    for r in range(10, 16):
        regs[r] = poison()
    sregs = {**vsharp(a_src, nr, 8), **vsharp(a_dst, nr, 12), 20: 4}
    lines = ["buffer_load_ubyte v10, v1, s[8:11], 0 offen",
             "buffer_load_sbyte v11, v1, s[8:11], 0 offen offset:3",
             "buffer_load_ushort v12, v2, s[8:11], 0 offen",
             "buffer_load_sshort v13, v2, s[8:11], s20 offen offset:2",
             "buffer_store_byte v4, v3, s[12:15], 0 offen offset:1",
             "buffer_store_short v4, v3, s[12:15], 0 offen offset:2",
             "s_waitcnt vmcnt(0)"]
    m = snippet(lines, regs, sregs, exec_mask=ex, buffers=(src, dst))
    mb = src.view(np.uint8)
    R = m.R[0]

    def ld(rel, n):       # out of range (rel >= nr) -> 0 (offsets here are n-aligned, nr even)
        return le(mb[rel:rel + n]) if rel < nr else 0
    for ln in range(64):
        if not ex[ln]:
            assert all(R[r, ln] == POISON for r in range(10, 14))
            continue
        b, h = int(vb[ln]), int(vh[ln])
        assert R[10, ln] == ld(b, 1), ln
        assert R[11, ln] == sext(ld(b + 3, 1), 8), ln
        assert R[12, ln] == ld(h, 2), ln
        assert R[13, ln] == sext(ld(h + 6, 2), 16), ln
    want = dst0.view(np.uint8).copy()
    for ln in range(64):                                  # instruction order: every byte store first
        s = int(slot[ln])
        if ex[ln] and s + 1 < nr:
            want[s + 1] = int(val[ln]) & 0xFF
    for ln in range(64):
        s = int(slot[ln])
        if ex[ln] and s + 2 < nr:
            want[s + 2:s + 4] = np.array([int(val[ln]) & 0xFFFF], np.uint16).view(np.uint8)
    assert np.array_equal(dst.view(np.uint8), want)


def test_global_byte_short_x2_x3_x4():
    src = rnd32(8192)
    dst = rnd32(8192)
    dst0 = dst.copy()
    a_src, a_dst = addresses(src.nbytes, dst.nbytes)
    ex = RNG.random(64) < 0.85
    o = (RNG.permutation(200)[:64] * 128 + 64).astype(np.uint32)      # lane owns dst bytes [o-64, o+16)
    ob = (o + RNG.integers(0, 16, 64)).astype(np.uint32)               # any byte
    v64 = a_src + ob.astype(np.uint64)
    d64 = a_dst + o.astype(np.uint64)
    regs = {1: o, 2: ob, 3: (v64 & 0xFFFFFFFF).astype(np.uint32), 4: (v64 >> 32).astype(np.uint32),
            5: (d64 & 0xFFFFFFFF).astype(np.uint32), 6: (d64 >> 32).astype(np.uint32)}
    for r in range(10, 24):
        regs[r] = poison()
    vals = [rnd32() for _ in range(4)]
    for i in range(4):
        regs[30 + i] = vals[i]
    sregs = {8: a_src & 0xFFFFFFFF, 9: a_src >> 32, 10: a_dst & 0xFFFFFFFF, 11: a_dst >> 32}
    lines = ["global_load_ubyte v10, v2, s[8:9] offset:-5",
             "global_load_sbyte v11, v[3:4], off offset:7",
             "global_load_ushort v12, v1, s[8:9] offset:6",
             "global_load_sshort v13, v1, s[8:9] offset:-2",
             "global_load_dwordx3 v[14:16], v1, s[8:9] offset:-12",
             "global_load_dwordx3 v[17:19], v[3:4], off offset:5",        # unaligned (unaligned mode)
             "global_store_dwordx4 v1, v[30:33], s[10:11] offset:-64",
             "global_store_dwordx2 v[5:6], v[31:32], off offset:4",
             "global_store_short v1, v33, s[10:11] offset:12",
             "global_store_byte v[5:6], v30, off offset:1",
             "s_waitcnt vmcnt(0)"]
    m = snippet(lines, regs, sregs, exec_mask=ex, buffers=(src, dst))
    mb = src.view(np.uint8)
    R = m.R[0]
    want = dst0.view(np.uint8).copy()
    for ln in range(64):
        x, b = int(o[ln]), int(ob[ln])
        if not ex[ln]:
            assert all(R[r, ln] == POISON for r in range(10, 20))
            continue
        assert R[10, ln] == mb[b - 5]
        assert R[11, ln] == sext(int(mb[b + 7]), 8)
        assert R[12, ln] == le(mb[x + 6:x + 8])
        assert R[13, ln] == sext(le(mb[x - 2:x]), 16)
        assert list(R[14:17, ln]) == [le(mb[x - 12 + 4 * c:x - 8 + 4 * c]) for c in range(3)]
        assert list(R[17:20, ln]) == [le(mb[b + 5 + 4 * c:b + 9 + 4 * c]) for c in range(3)]
        w = lambda i: np.array([vals[i][ln]], np.uint32).view(np.uint8)
        want[x - 64:x - 48] = np.concatenate([w(0), w(1), w(2), w(3)])
        want[x + 4:x + 12] = np.concatenate([w(1), w(2)])
        want[x + 12:x + 14] = w(3)[:2]
        want[x + 1] = w(0)[0]
    assert np.array_equal(dst.view(np.uint8), want)


def test_integer_atomic_add_buffer_global():
    n = 32
    init = rnd32(n)
    init[:2] = [0xFFFFFFFF, 0x80000000]
    bufs = [init.copy(), init.copy(), init.copy(), init.copy()]
    a = addresses(*[b.nbytes for b in bufs])
    ex = RNG.random(64) < 0.85
    add = rnd32()
    distinct = (RNG.permutation(n)[:n] * 4).astype(np.uint32)
    voff_ret = np.concatenate([distinct, distinct + 4 * n])      # lanes 32..63 beyond num_records
    voff_col = ((L % 8) * 4).astype(np.uint32)                    # 8 lanes per word
    regs = {1: voff_ret, 2: add, 3: voff_col, 4: add.copy(), 6: poison(), 7: add.copy()}
    g64 = a[3] + voff_ret[:64].astype(np.uint64) % (4 * n)
    regs[8], regs[9] = (g64 & 0xFFFFFFFF).astype(np.uint32), (g64 >> 32).astype(np.uint32)
    regs[10] = poison()
    sregs = {**vsharp(a[0], 4 * n, 8), **vsharp(a[1], 4 * n, 12), 20: a[2] & 0xFFFFFFFF, 21: a[2] >> 32}
    lines = ["buffer_atomic_add v2, v1, s[8:11], 0 offen sc0",       # returns the pre-op value in v2
             "buffer_atomic_add v4, v3, s[12:15], 0 offen",
             "global_atomic_add v6, v3, v7, s[20:21] sc0",
             "s_waitcnt vmcnt(0)"]
    lines.insert(3, "global_atomic_add v10, v[8:9], v7, off offset:0 sc0")
    m = snippet(lines, regs, sregs, exec_mask=ex, buffers=tuple(bufs))
    R = m.R[0]
    inr = ex & (L < n)
    w0 = init.astype(np.int64).copy()
    for ln in np.nonzero(inr)[0]:
        w0[distinct[ln] // 4] += int(add[ln])
    assert np.array_equal(bufs[0], (w0 & 0xFFFFFFFF).astype(np.uint32))
    assert np.array_equal(R[2][inr], init[distinct[np.nonzero(inr)[0]] // 4])
    assert np.all(R[2][ex & ~inr] == 0) and np.all(R[2][~ex] == add[~ex])     # out of range returns 0
    for b in (bufs[1], bufs[2]):                                  # collisions: every lane accumulates
        w = init.astype(np.int64).copy()
        for j in range(8):
            w[j] += int(add[ex & (L % 8 == j)].astype(np.int64).sum())
        assert np.array_equal(b, (w & 0xFFFFFFFF).astype(np.uint32))
    # returned values with collisions (lane order unspecified): some order of the word's lanes in
    # which each returns the running sum before its own add
    for j in range(8):
        left = {int(ln) for ln in np.nonzero(ex & (L % 8 == j))[0]}
        acc = int(init[j])
        while left:
            hit = [ln for ln in left if int(R[6, ln]) == acc & 0xFFFFFFFF]
            assert hit, (j, acc)
            left.remove(hit[0])
            acc += int(add[hit[0]])
    assert np.all(R[6][~ex] == POISON)
    # global vaddr64: lane L adds into word distinct[L % 32]; two lanes per word
    w3 = init.astype(np.int64).copy()
    for ln in np.nonzero(ex)[0]:
        w3[distinct[ln % n] // 4] += int(add[ln])
    assert np.array_equal(bufs[3], (w3 & 0xFFFFFFFF).astype(np.uint32))
    assert np.all(R[10][~ex] == POISON)


def test_global_load_lds_forms():
    src = rnd32(1024)
    (a,) = addresses(src.nbytes)
    lds = 16384
    ex = RNG.random(64) < 0.85
    voff = (RNG.permutation(200)[:64] * 16).astype(np.uint32)
    v64 = a + voff.astype(np.uint64) + 4
    regs = {1: voff, 2: (v64 & 0xFFFFFFFF).astype(np.uint32), 3: (v64 >> 32).astype(np.uint32),
            4: (L * 16).astype(np.uint32), 5: poison(), 6: poison(), 7: poison(), 8: poison()}
    forms = [  # text, m0, nbytes, step, global byte offset from voff (+inst offset)
        ("global_load_lds_dword v1, s[10:11] offset:8", 4 * int(RNG.integers(0, 32)), 4, 4, 8),
        ("global_load_lds_dwordx4 v1, s[10:11] offset:16", 1024 + 16 * int(RNG.integers(0, 16)), 16, 16, 16),
        ("global_load_lds_dwordx3 v[2:3], off offset:4", 3072 + 16 * int(RNG.integers(0, 16)), 12, 16, 8),
        ("global_load_lds_ubyte v[2:3], off offset:3", 5120 + 4 * int(RNG.integers(0, 64)), 1, 4, 7),
        ("global_load_lds_ushort v1, s[10:11] offset:2", 6144 + 4 * int(RNG.integers(0, 64)), 2, 4, 2),
    ]
    lines = [f"ds_write_b128 v4, v[5:8] offset:{1024 * k}" for k in range(lds // 1024)]
    lines += ["s_waitcnt lgkmcnt(0)", "s_mov_b64 exec, s[30:31]"]
    sregs = {10: a & 0xFFFFFFFF, 11: a >> 32, **exec_sregs(ex)}
    for i, (text, m0, *_r) in enumerate(forms):
        sregs[20 + i] = m0
        lines += [f"s_mov_b32 m0, s{20 + i}", "s_nop 0", text]
    lines.append("s_waitcnt vmcnt(0)")
    m = snippet(lines, regs, sregs, lds=lds, buffers=(src,))
    got = m.LDS[:lds]
    mb = src.view(np.uint8)
    want = np.tile(np.array([POISON], np.uint32).view(np.uint8), lds // 4)
    known = np.ones(lds, bool)
    for text, m0, nbytes, step, goff in forms:
        inst_off = int(text.rsplit("offset:", 1)[1])
        for ln in range(64):
            lpos = m0 + inst_off + ln * step
            if ex[ln]:
                want[lpos:lpos + nbytes] = mb[int(voff[ln]) + goff:int(voff[ln]) + goff + nbytes]
                if nbytes < 4:       # bytes nbytes..3 of a sub-dword lane's LDS dword: left open
                    known[lpos + nbytes:lpos + 4] = False
                    rest = got[lpos + nbytes:lpos + 4]       # ... but only "untouched" or "zero-extended"
                    assert np.array_equal(rest, want[lpos + nbytes:lpos + 4]) or not rest.any(), (text, ln)
    assert np.array_equal(got[known], want[known])
