"""Table-driven SALU semantics (CDNA4 ISA ch.5 pseudocode) against formulas written here: each
row runs on many random operand pairs (one wave per pair: SGPRs are per wave), results and SCC
compared exactly. Poisoned destinations."""
from __future__ import annotations

import numpy as np

from emu_snippet import snippet

RNG = np.random.default_rng()
M32, M64 = (1 << 32) - 1, (1 << 64) - 1
NW = 24          # random operand sets, one per wave


def s32(x):
    return x - (1 << 32) if x >> 31 else x


def bfe(v, b, signed):
    off, w = b & 31, (b >> 16) & 0x7F
    r = (v >> off) & ((1 << min(w, 32)) - 1)
    if signed and w and (r >> (w - 1)) & 1:
        r -= 1 << w
    return r & M32


# name: (width a, width b, fn(a, b, scc) -> (result, scc or None))
ROWS = {
    "s_add_u32": (1, 1, lambda a, b, c: (a + b, (a + b) >> 32)),
    "s_sub_u32": (1, 1, lambda a, b, c: (a - b, int(b > a))),
    "s_addc_u32": (1, 1, lambda a, b, c: (a + b + c, (a + b + c) >> 32)),
    "s_subb_u32": (1, 1, lambda a, b, c: (a - b - c, int(b + c > a))),
    "s_add_i32": (1, 1, lambda a, b, c: (a + b, int(not -2**31 <= s32(a) + s32(b) < 2**31))),
    "s_sub_i32": (1, 1, lambda a, b, c: (a - b, int(not -2**31 <= s32(a) - s32(b) < 2**31))),
    "s_mul_i32": (1, 1, lambda a, b, c: (s32(a) * s32(b), None)),
    "s_mul_hi_u32": (1, 1, lambda a, b, c: ((a * b) >> 32, None)),
    "s_mul_hi_i32": (1, 1, lambda a, b, c: ((s32(a) * s32(b)) >> 32, None)),
    "s_min_i32": (1, 1, lambda a, b, c: (min(s32(a), s32(b)), int(s32(a) < s32(b)))),
    "s_max_u32": (1, 1, lambda a, b, c: (max(a, b), int(a > b))),
    "s_and_b32": (1, 1, lambda a, b, c: (a & b, int(a & b != 0))),
    "s_or_b64": (2, 2, lambda a, b, c: (a | b, int(a | b != 0))),
    "s_xor_b32": (1, 1, lambda a, b, c: (a ^ b, int(a ^ b != 0))),
    "s_andn2_b64": (2, 2, lambda a, b, c: (a & ~b & M64, int(a & ~b & M64 != 0))),
    "s_orn2_b32": (1, 1, lambda a, b, c: ((a | ~b) & M32, int((a | ~b) & M32 != 0))),
    "s_nand_b32": (1, 1, lambda a, b, c: (~(a & b) & M32, int(~(a & b) & M32 != 0))),
    "s_nor_b64": (2, 2, lambda a, b, c: (~(a | b) & M64, int(~(a | b) & M64 != 0))),
    "s_xnor_b32": (1, 1, lambda a, b, c: (~(a ^ b) & M32, int(~(a ^ b) & M32 != 0))),
    "s_lshl_b32": (1, 1, lambda a, b, c: ((a << (b & 31)) & M32, int((a << (b & 31)) & M32 != 0))),
    "s_lshr_b32": (1, 1, lambda a, b, c: (a >> (b & 31), int(a >> (b & 31) != 0))),
    "s_ashr_i32": (1, 1, lambda a, b, c: (s32(a) >> (b & 31), int(s32(a) >> (b & 31) != 0))),
    "s_lshl_b64": (2, 1, lambda a, b, c: ((a << (b & 63)) & M64, int((a << (b & 63)) & M64 != 0))),
    "s_lshr_b64": (2, 1, lambda a, b, c: (a >> (b & 63), int(a >> (b & 63) != 0))),
    "s_bfe_u32": (1, 1, lambda a, b, c: (bfe(a, b, False), int(bfe(a, b, False) != 0))),
    "s_bfe_i32": (1, 1, lambda a, b, c: (bfe(a, b, True), int(bfe(a, b, True) != 0))),
    "s_bfm_b32": (1, 1, lambda a, b, c: ((((1 << (a & 31)) - 1) << (b & 31)) & M32, None)),
    "s_cselect_b32": (1, 1, lambda a, b, c: (a if c else b, None)),
    "s_cselect_b64": (2, 2, lambda a, b, c: (a if c else b, None)),
    "s_lshl2_add_u32": (1, 1, lambda a, b, c: ((a << 2) + b, int(((a << 2) + b) >> 32 != 0))),
    "s_absdiff_i32": (1, 1, lambda a, b, c: (abs(s32(a) - s32(b)), int(abs(s32(a) - s32(b)) & M32 != 0))),
}
CMP = {"eq": lambda a, b: a == b, "lg": lambda a, b: a != b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
       "lt": lambda a, b: a < b, "le": lambda a, b: a <= b}


def operand(w, kind):
    x = int(RNG.integers(0, 2**63)) * 2 + int(RNG.integers(0, 2))
    edge = [0, 1, 0x7FFFFFFF, 0x80000000, M32, 31, 0x1F0005, 0x80008]
    v = edge[w] if w < len(edge) else x
    if kind == "sh" and w >= len(edge):
        v = int(RNG.integers(0, 64)) | (int(RNG.integers(0, 2)) << 10)
    return v & (M64 if kind == 2 else M32)


def test_sop2_table():
    names = list(ROWS)
    lines, regs, checks = [], {}, []
    for n, name in enumerate(names):
        wa, wb, fn = ROWS[name]
        ra, rb, rd = 4 * n % 96, 4 * n % 96 + 2, 100
        a = [operand(w, wa) for w in range(NW)]
        b = [operand((w * 7 + 3) % NW, "sh" if "sh" in name or "bfe" in name else wb) for w in range(NW)]
        scc = [int(RNG.integers(0, 2)) for _ in range(NW)]
        pa, pb, pd = (f"s[{ra}:{ra + 1}]" if wa == 2 else f"s{ra}", f"s[{rb}:{rb + 1}]" if wb == 2 else f"s{rb}",
                      f"s[{rd}:{rd + 1}]" if wa == 2 else f"s{rd}")
        m = snippet([f"{name} {pd}, {pa}, {pb}"] if not name.startswith(("s_addc", "s_subb", "s_cselect"))
                    else ["s_cmp_eq_u32 s99, 1", f"{name} {pd}, {pa}, {pb}"],
                    sregs={ra: [x & M32 for x in a], ra + 1: [x >> 32 for x in a], rb: [x & M32 for x in b],
                           rb + 1: [x >> 32 for x in b], rd: [0xDEADBEEF] * NW, rd + 1: [0xDEADBEEF] * NW, 99: scc,
                           125: [1 - c for c in scc]}, waves=NW)
        for w in range(NW):
            r, sc = fn(a[w], b[w], scc[w])
            got = int(m.S[w, rd]) | (int(m.S[w, rd + 1]) << 32 if wa == 2 else 0)
            assert got == r & (M64 if wa == 2 else M32), (name, w, hex(a[w]), hex(b[w]), hex(got))
            if sc is not None:
                assert int(m.S[w, 125]) == sc, (name, w, "scc")
    del lines, regs, checks


def test_sopc_sop1_saveexec():
    a = [operand(w, 1) for w in range(NW)]
    b = [operand((w * 5 + 1) % NW, 1) for w in range(NW)]
    for t, conv in (("u32", lambda x: x), ("i32", s32)):
        for op, f in CMP.items():
            m = snippet([f"s_cmp_{op}_{t} s4, s5"], sregs={4: a, 5: b}, waves=NW)
            assert [int(x) for x in m.S[:, 125]] == [int(f(conv(x), conv(y))) for x, y in zip(a, b)], (op, t)
    bit = [x & 63 for x in b]
    m = snippet(["s_bitcmp1_b32 s4, s5"], sregs={4: a, 5: b}, waves=NW)
    assert [int(x) for x in m.S[:, 125]] == [(x >> (y & 31)) & 1 for x, y in zip(a, b)]
    m = snippet(["s_bitcmp0_b64 s[4:5], s6"], sregs={4: a, 5: b, 6: bit}, waves=NW)
    assert [int(x) for x in m.S[:, 125]] == [1 - (((y << 32 | x) >> k) & 1) for x, y, k in zip(a, b, bit)]
    m = snippet(["s_not_b32 s10, s4", "s_brev_b32 s11, s4", "s_bcnt1_i32_b32 s12, s4", "s_ff1_i32_b32 s13, s4",
                 "s_flbit_i32_b32 s14, s4", "s_sext_i32_i16 s15, s4", "s_abs_i32 s16, s4", "s_movk_i32 s17, 0x8001"],
                sregs={4: a}, waves=NW)
    for w, x in enumerate(a):
        ff1 = (x & -x).bit_length() - 1 if x else M32
        flb = 32 - x.bit_length() if x else M32
        want = [~x & M32, int(f"{x:032b}"[::-1], 2), bin(x).count("1"), ff1, flb,
                ((x & 0xFFFF) ^ 0x8000) - 0x8000 & M32, abs(s32(x)) & M32, 0xFFFF8001]
        assert [int(v) for v in m.S[w, 10:18]] == want, (w, hex(x))
    # saveexec family: sdst = old exec, exec = f(s0, old exec), scc = exec != 0
    ex = RNG.random(64) < 0.5
    e = sum(1 << i for i in range(64) if ex[i])
    s0 = int(RNG.integers(0, 2**63)) * 2 + 1
    for op, f in {"and": lambda s, e: s & e, "or": lambda s, e: s | e, "xor": lambda s, e: s ^ e,
                  "andn2": lambda s, e: s & ~e & M64, "orn2": lambda s, e: (s | ~e) & M64,
                  "nand": lambda s, e: ~(s & e) & M64, "nor": lambda s, e: ~(s | e) & M64,
                  "xnor": lambda s, e: ~(s ^ e) & M64}.items():
        m = snippet([f"s_{op}_saveexec_b64 s[8:9], s[4:5]", "s_mov_b64 s[10:11], exec", "s_mov_b64 exec, -1"],
                    sregs={4: s0 & M32, 5: s0 >> 32}, exec_mask=ex)
        new = f(s0, e)
        assert int(m.S[0, 8]) | int(m.S[0, 9]) << 32 == e, op
        assert int(m.S[0, 10]) | int(m.S[0, 11]) << 32 == new, op
        assert int(m.S[0, 125]) == int(new != 0), op
