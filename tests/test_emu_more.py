"""The remaining emulated SALU / SOPK / SOPC / branch / SMEM and VALU mnemonics against formulas
written here from the CDNA4 ISA pseudocode (ch.5 SALU, ch.12 VALU). SALU rows run one random
operand set per wave (SGPRs are per wave), many rows per launch; VALU rows reuse the table runner of
test_emu_valu (one launch, poisoned destinations). Edge values (0, ±1, INT_MIN/MAX, all ones) are
mixed into the random inputs.

Left open by the ISA text (documented, not asserted):
* v_lshl_add_u64: LLVM accepts shift amounts 0..4 only; the test uses those.
* v_cvt_f64_f32 / v_cvt_f32_f64: the NaN payload is not specified; any NaN is accepted for a NaN.
* v_fract_f32 of ±inf: the ISA pseudocode gives NaN for inf; asserted. Of -tiny: rounds to
  1.0 in f32, the ISA clamps to the largest value below 1 (0x3F7FFFFF); asserted.
"""
from __future__ import annotations

import numpy as np

from emu_snippet import AOFF, poison, snippet
from test_emu_valu import F, S, U, _run_rows, sext, u32_bits

RNG = np.random.default_rng()
M32, M64 = (1 << 32) - 1, (1 << 64) - 1
NW = 16
POIS = 0xDEADBEEF


def s32(x):
    return x - (1 << 32) if x >> 31 else x


def s64(x):
    return x - (1 << 64) if x >> 63 else x


def nz(r, mask=M32):
    return r & mask, int(r & mask != 0)


def ff1(x):
    return (x & -x).bit_length() - 1 if x else M32


def _r64(a):
    return a & M32, a >> 32


# ---- SALU: rows of (template, dst width, preset dst with b?, fn(A, B, a, b, sh, scc) -> (res, scc|None))
# templates: {D} dst, {A}/{B} 64-bit sources s[4:5]/s[6:7], {a}/{b} s8/s9, {sh} s10; SCC preset per wave
SALU = [
    ("s_and_b64 {D}, {A}, {B}", 2, lambda A, B, a, b, sh, c: nz(A & B, M64)),
    ("s_xor_b64 {D}, {A}, {B}", 2, lambda A, B, a, b, sh, c: nz(A ^ B, M64)),
    ("s_xnor_b64 {D}, {A}, {B}", 2, lambda A, B, a, b, sh, c: nz(~(A ^ B), M64)),
    ("s_nand_b64 {D}, {A}, {B}", 2, lambda A, B, a, b, sh, c: nz(~(A & B), M64)),
    ("s_orn2_b64 {D}, {A}, {B}", 2, lambda A, B, a, b, sh, c: nz(A | ~B, M64)),
    ("s_not_b64 {D}, {A}", 2, lambda A, B, a, b, sh, c: nz(~A, M64)),
    ("s_ashr_i64 {D}, {A}, {sh}", 2, lambda A, B, a, b, sh, c: nz(s64(A) >> (sh & 63), M64)),
    ("s_andn2_b32 {d}, {a}, {b}", 1, lambda A, B, a, b, sh, c: nz(a & ~b)),
    ("s_nor_b32 {d}, {a}, {b}", 1, lambda A, B, a, b, sh, c: nz(~(a | b))),
    ("s_or_b32 {d}, {a}, {b}", 1, lambda A, B, a, b, sh, c: nz(a | b)),
    ("s_max_i32 {d}, {a}, {b}", 1, lambda A, B, a, b, sh, c: (max(s32(a), s32(b)) & M32, int(s32(a) > s32(b)))),
    ("s_min_u32 {d}, {a}, {b}", 1, lambda A, B, a, b, sh, c: (min(a, b), int(a < b))),
    ("s_lshl1_add_u32 {d}, {a}, {b}", 1, lambda A, B, a, b, sh, c: ((a << 1) + b & M32, int((a << 1) + b > M32))),
    ("s_lshl3_add_u32 {d}, {a}, {b}", 1, lambda A, B, a, b, sh, c: ((a << 3) + b & M32, int((a << 3) + b > M32))),
    ("s_lshl4_add_u32 {d}, {a}, {b}", 1, lambda A, B, a, b, sh, c: ((a << 4) + b & M32, int((a << 4) + b > M32))),
    ("s_bcnt0_i32_b32 {d}, {a}", 1, lambda A, B, a, b, sh, c: nz(32 - bin(a).count("1"))),
    ("s_bcnt1_i32_b64 {d}, {A}", 1, lambda A, B, a, b, sh, c: nz(bin(A).count("1"))),
    ("s_ff0_i32_b32 {d}, {a}", 1, lambda A, B, a, b, sh, c: (ff1(~a & M32), None)),
    ("s_ff1_i32_b64 {d}, {A}", 1, lambda A, B, a, b, sh, c: (ff1(A), None)),
    ("s_flbit_i32_b64 {d}, {A}", 1, lambda A, B, a, b, sh, c: (64 - A.bit_length() if A else M32, None)),
    ("s_sext_i32_i8 {d}, {a}", 1, lambda A, B, a, b, sh, c: (((a & 0xFF) ^ 0x80) - 0x80 & M32, None)),
    ("s_cmov_b32 {d}, {a}", 1, lambda A, B, a, b, sh, c: (a if c else POIS, None)),
    ("s_cmov_b64 {D}, {A}", 2, lambda A, B, a, b, sh, c: (A if c else POIS << 32 | POIS, None)),
    # SOPK: 16-bit immediate, sign-extended; the destination is also the source (preset to b)
    ("s_cmovk_i32 {d}, 0x{k:x}", 1, lambda A, B, a, b, sh, c, k: ((sext16(k) if c else b) & M32, None)),
    ("s_addk_i32 {d}, 0x{k:x}", 1,
     lambda A, B, a, b, sh, c, k: ((s32(b) + sext16(k)) & M32, int(not -2**31 <= s32(b) + sext16(k) < 2**31))),
    ("s_mulk_i32 {d}, 0x{k:x}", 1, lambda A, B, a, b, sh, c, k: ((s32(b) * sext16(k)) & M32, None)),
    ("s_bitset0_b32 {d}, {sh}", 1, lambda A, B, a, b, sh, c: (b & ~(1 << (sh & 31)) & M32, None)),
    ("s_bitset1_b32 {d}, {sh}", 1, lambda A, B, a, b, sh, c: (b | (1 << (sh & 31)), None)),
    # SOPC: result is SCC only
    ("s_cmp_eq_u64 {A}, {B}", 0, lambda A, B, a, b, sh, c: (None, int(A == B))),
    ("s_cmp_lg_u64 {A}, {B}", 0, lambda A, B, a, b, sh, c: (None, int(A != B))),
    ("s_bitcmp0_b32 {a}, {sh}", 0, lambda A, B, a, b, sh, c: (None, 1 - ((a >> (sh & 31)) & 1))),
    ("s_bitcmp1_b64 {A}, {sh}", 0, lambda A, B, a, b, sh, c: (None, (A >> (sh & 63)) & 1)),
]
for _op, _f in {"eq": lambda x, y: x == y, "lg": lambda x, y: x != y, "gt": lambda x, y: x > y,
                "ge": lambda x, y: x >= y, "lt": lambda x, y: x < y, "le": lambda x, y: x <= y}.items():
    SALU.append((f"s_cmpk_{_op}_i32 {{a}}, 0x{{k:x}}", 0,
                 lambda A, B, a, b, sh, c, k, f=_f: (None, int(f(s32(a), sext16(k))))))
    SALU.append((f"s_cmpk_{_op}_u32 {{a}}, 0x{{k:x}}", 0,
                 lambda A, B, a, b, sh, c, k, f=_f: (None, int(f(a, k)))))


def sext16(k):
    return k - 0x10000 if k & 0x8000 else k


def _operand(w, bits):
    edge = [0, 1, M32, 0x7FFFFFFF, 0x80000000, 0xFFFF8000, 0x8000, 0x7FFF, (1 << 63), M64]
    if w < len(edge) and RNG.random() < 0.7:
        return edge[(w + bits) % len(edge)] & ((1 << bits) - 1)
    return int(RNG.integers(0, 2**62)) * 4 + int(RNG.integers(0, 4)) & ((1 << bits) - 1)


def _salu_launch(rows):
    k = int(RNG.integers(0, 0x10000))
    A = [_operand(w, 64) for w in range(NW)]
    B = [A[w] if w % 5 == 0 else _operand((w * 3 + 1) % NW, 64) for w in range(NW)]
    a = [_operand(w, 32) for w in range(NW)]
    b = [_operand((w * 7 + 2) % NW, 32) for w in range(NW)]
    for w in range(0, NW, 6):             # immediates equal to the operand for the cmpk rows
        a[w] = k if w % 12 else sext16(k) & M32
    sh = [int(RNG.integers(0, 64)) | int(RNG.integers(0, 2)) << 9 for w in range(NW)]
    scc = [int(RNG.integers(0, 2)) for w in range(NW)]
    sregs = {4: [x & M32 for x in A], 5: [x >> 32 for x in A], 6: [x & M32 for x in B], 7: [x >> 32 for x in B],
             8: a, 9: b, 10: sh, 11: scc}
    lines, checks, sd = [], [], 12
    for tmpl, dw, fn in rows:
        d = sd
        text = tmpl.format(D=f"s[{d}:{d + 1}]", d=f"s{d}", A="s[4:5]", B="s[6:7]", a="s8", b="s9", sh="s10", k=k)
        preset = b if text.startswith(("s_cmovk", "s_addk", "s_mulk", "s_bitset")) else [POIS] * NW
        sregs[d], sregs[d + 1] = preset, [POIS] * NW
        lines += ["s_cmp_lg_u32 s11, 0", text, f"s_cselect_b32 s{d + 2}, 1, 0"]
        sregs[d + 2] = [POIS] * NW
        checks.append((text, d, dw, fn))
        sd += 3
    assert sd <= 100
    m = snippet(lines, sregs=sregs, waves=NW)
    for text, d, dw, fn in checks:
        for w in range(NW):
            args = (A[w], B[w], a[w], b[w], sh[w], scc[w]) + ((k,) if "{k" in text or "0x" in text else ())
            res, sc = fn(*args)
            got = int(m.S[w, d]) | (int(m.S[w, d + 1]) << 32 if dw == 2 else 0)
            if dw:
                assert got == res & (M64 if dw == 2 else M32), (text, w, hex(A[w]), hex(a[w]), hex(b[w]), hex(got))
            want_scc = scc[w] if sc is None else sc
            assert int(m.S[w, d + 2]) == want_scc, (text, w, "scc")


def test_salu_rows():
    rows = SALU[:]
    for i in range(0, len(rows), 28):
        _salu_launch(rows[i:i + 28])


def test_branches_per_wave_conditions():
    """s_cbranch_* 1 skips one instruction when the condition holds (per wave); s_branch always."""
    cond = RNG.integers(0, 2, (6, NW))
    cond[:, 0], cond[:, 1] = 0, 1
    big = [int(RNG.integers(1, 2**32)) for _ in range(NW)]
    sregs = {20: [POIS] * NW}
    for i in range(6):
        sregs[30 + 2 * i] = [c * b for c, b in zip(cond[i], big)]        # zero or nonzero 64-bit values
        sregs[31 + 2 * i] = [0] * NW
        sregs[50 + i] = [0] * NW
    sregs[56] = [0] * NW
    lines = []
    names = ["scc0", "scc1", "vccz", "vccnz", "execz", "execnz"]
    for i, nm in enumerate(names):
        if nm.startswith("scc"):
            lines.append(f"s_cmp_lg_u32 s{30 + 2 * i}, 0")               # SCC = cond
        elif nm.startswith("vcc"):
            lines.append(f"s_mov_b64 vcc, s[{30 + 2 * i}:{31 + 2 * i}]")
        else:
            lines += ["s_mov_b64 s[20:21], exec", f"s_mov_b64 exec, s[{30 + 2 * i}:{31 + 2 * i}]"]
        lines += [f"s_cbranch_{nm} 1", f"s_mov_b32 s{50 + i}, 1"]
        if nm.startswith("exec"):
            lines.append("s_mov_b64 exec, s[20:21]")
    lines += ["s_branch 1", "s_mov_b32 s56, 1"]
    m = snippet(lines, sregs=sregs, waves=NW)
    for i, nm in enumerate(names):
        c = cond[i].astype(bool)
        taken = ~c if nm in ("scc0", "vccz", "execz") else c
        assert np.array_equal(m.S[:, 50 + i], np.where(taken, 0, 1)), nm
    assert (m.S[:, 56] == 0).all()


def test_getpc_setpc_swappc():
    """getpc = address of the next instruction; setpc jumps to an address; swappc also saves the
    next instruction's address. Checked relative to the first getpc (the code base is arbitrary)."""
    lines = ["s_getpc_b64 s[20:21]",            # 0: value g = base + 4
             "s_getpc_b64 s[22:23]",            # 1: g + 4
             "s_add_u32 s24, s20, 20",          # 2: target pc 24 = instruction 6
             "s_addc_u32 s25, s21, 0",          # 3
             "s_setpc_b64 s[24:25]",            # 4
             "s_mov_b32 s30, 1",                # 5: skipped
             "s_add_u32 s26, s20, 36",          # 6: target pc 40 = instruction 10
             "s_addc_u32 s27, s21, 0",          # 7
             "s_swappc_b64 s[28:29], s[26:27]",  # 8: saves base + 36
             "s_mov_b32 s31, 1",                # 9: skipped
             "s_mov_b32 s32, 7"]                # 10
    m = snippet(lines, sregs={30: 0, 31: 0, 32: 0, 28: POIS, 29: POIS})
    g = int(m.S[0, 20]) | int(m.S[0, 21]) << 32
    assert (int(m.S[0, 22]) | int(m.S[0, 23]) << 32) == g + 4
    assert (int(m.S[0, 28]) | int(m.S[0, 29]) << 32) == g + 32
    assert m.S[0, 30] == 0 and m.S[0, 31] == 0 and m.S[0, 32] == 7


def test_no_state_instructions():
    """s_sleep/s_setprio/s_icache_inv/s_dcache_inv/s_dcache_wb/s_ttracedata/v_nop change no register."""
    x = u32_bits()
    lines = ["s_sleep 1", "s_setprio 2", "s_icache_inv", "s_dcache_inv", "s_dcache_wb", "s_ttracedata", "v_nop",
             "s_setprio 0"]
    sv = [int(v) for v in RNG.integers(0, 2**32, 8)]
    m = snippet(lines, {1: x}, {i: v for i, v in enumerate(sv)})
    assert np.array_equal(m.R[0, 1], x) and [int(v) for v in m.S[0, :8]] == sv


def test_smem_loads():
    from test_emu_buffer import addresses
    data = RNG.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
    (base,) = addresses(data.nbytes)
    offs = {1: 4, 2: 12, 4: 32, 8: 64, 16: 128}
    lines, dst = [], 20
    for n, off in offs.items():
        name = "s_load_dword" + ("" if n == 1 else f"x{n}")
        d = f"s{dst}" if n == 1 else f"s[{dst}:{dst + n - 1}]"
        lines.append(f"{name} {d}, s[2:3], 0x{off:x}" if n != 8 else f"{name} {d}, s[2:3], s4")
        dst += n
    lines.append("s_load_dwordx2 s[60:61], s[2:3], 0x1ffffc")   # 21-bit signed: -4 from base + 8 (s[6:7])
    lines[-1] = "s_load_dwordx2 s[60:61], s[6:7], 0x1ffffc"
    lines.append("s_waitcnt lgkmcnt(0)")
    sregs = {2: base & M32, 3: base >> 32, 4: 64, 6: (base + 8) & M32, 7: (base + 8) >> 32}
    sregs.update({r: POIS for r in range(20, 62)})
    m = snippet(lines, sregs=sregs, buffers=[data.copy()])
    dst = 20
    for n, off in offs.items():
        assert np.array_equal(m.S[0, dst:dst + n], data[off // 4: off // 4 + n]), n
        dst += n
    assert np.array_equal(m.S[0, 60:62], data[1:3])


# ---- VALU rows (test_emu_valu runner: kinds u32/f32/b64 compared exactly) ----------------------
def fract_ref(a):
    x = F(a)
    r = (x - np.floor(x)).astype(np.float32).astype(np.float64)
    r = np.minimum(r, np.float64(np.float32(1) - np.float32(2.0 ** -24)))
    return np.where(np.isinf(x), np.nan, r)


def pk16(a, b, f):
    lo = f(U(a) & 0xFFFF, U(b) & 0xFFFF) & 0xFFFF
    hi = f(U(a) >> 16, U(b) >> 16) & 0xFFFF
    return lo | hi << 16


VALU = [
    ("v_add_i32 {d}, {a}, {b}", "u32 u32", lambda a, b: ("u32", S(a) + S(b))),
    ("v_sub_i32 {d}, {a}, {b}", "u32 u32", lambda a, b: ("u32", S(a) - S(b))),
    ("v_max3_u32 {d}, {a}, {b}, {c}", "u32 u32 u32", lambda a, b, c: ("u32", np.maximum(np.maximum(U(a), U(b)), U(c)))),
    ("v_min3_i32 {d}, {a}, {b}, {c}", "u32 u32 u32", lambda a, b, c: ("u32", np.minimum(np.minimum(S(a), S(b)), S(c)))),
    ("v_mad_i32_i24 {d}, {a}, {b}, {c}", "u32 u32 u32",
     lambda a, b, c: ("u32", sext(U(a), 24) * sext(U(b), 24) + S(c))),
    ("v_fract_f32 {d}, {a}", "f32", lambda a: ("f32", fract_ref(a))),
    ("v_cvt_f32_f64 {d}, {a2}", "b64",
     lambda a: ("f32", np.array([int(x) for x in a], np.uint64).view(np.float64))),
    ("v_mov_b64 {d2}, {a2}", "b64", lambda a: ("b64", a.astype(object))),
    ("v_pk_add_u16 {d}, {a}, {b}", "u32 u32", lambda a, b: ("u32", pk16(a, b, lambda x, y: x + y))),
    ("v_pk_sub_u16 {d}, {a}, {b}", "u32 u32", lambda a, b: ("u32", pk16(a, b, lambda x, y: x - y))),
    ("v_pk_mul_lo_u16 {d}, {a}, {b}", "u32 u32", lambda a, b: ("u32", pk16(a, b, lambda x, y: x * y))),
    ("v_pk_mov_b32 {d2}, {a2}, {b2} op_sel:[1,0]", "b64 b64",
     lambda a, b: ("b64", (a.astype(object) >> 32) | ((b.astype(object) & M32) << 32))),
    ("v_lshl_add_u64 {d2}, {a2}, {b}, {c2}", "b64 sh b64",
     lambda a, b, c: ("b64", (a.astype(object) << (U(b) % 5)) + c.astype(object))),
]


def test_valu_rows():
    import test_emu_valu
    orig = test_emu_valu.GEN["sh"]
    test_emu_valu.GEN["sh"] = lambda: RNG.integers(0, 5, 64).astype(np.uint32)   # lshl_add_u64: 0..4
    try:
        _run_rows([r if "lshl_add_u64" in r[0] else r for r in VALU])
    finally:
        test_emu_valu.GEN["sh"] = orig


def test_mac_fmac_mad_cvt_f64_subbrev():
    """Accumulating forms (the destination is the addend), integer-valued inputs: a*b+c exact.
    (gfx950 has no v_mac_f32 / v_mad_f32 / v_fmac_f16: llvm-mc rejects them, so the emulator does not table them.)"""
    def ints(n=64):
        return RNG.integers(-2**10, 2**10, n).astype(np.float32).view(np.uint32)
    a, b, c1, c2, c3 = ints(), ints(), ints(), ints(), ints()
    h = lambda: RNG.integers(-40, 40, 64).astype(np.float16).view(np.uint16).astype(np.uint32)
    ha, hb, hc = h(), h(), h()
    x = RNG.standard_normal(64).astype(np.float32)
    x[:5] = [0.0, -0.0, np.inf, -np.inf, 1e-40]
    cin = RNG.random(64) < 0.5
    bits = np.packbits(cin, bitorder="little").view(np.uint32)
    y, z = u32_bits(), u32_bits()
    m = snippet(["v_fmac_f32 v3, v1, v2", "v_fmac_f32_e64 v4, v1, v2", "v_fma_f32 v5, v1, v2, v6",
                 "v_fma_f16 v9, v7, v8, v9", "v_cvt_f64_f32 v[10:11], v12",
                 "v_subbrev_co_u32 v13, vcc, v14, v15, vcc", "s_nop 1"],
                {1: a, 2: b, 3: c1, 4: c2, 5: poison(), 6: c3, 7: ha, 8: hb, 9: hc, 10: poison(), 11: poison(),
                 12: x.view(np.uint32), 13: poison(), 14: y, 15: z},
                {106: int(bits[0]), 107: int(bits[1])})
    fa, fb = F(a), F(b)
    for r, c in ((3, c1), (4, c2), (5, c3)):
        assert np.array_equal(m.R[0, r], (fa * fb + F(c)).astype(np.float32).view(np.uint32)), r
    H = lambda v: (v & 0xFFFF).astype(np.uint16).view(np.float16).astype(np.float64)
    assert np.array_equal(m.R[0, 9] & 0xFFFF, (H(ha) * H(hb) + H(hc)).astype(np.float16).view(np.uint16))
    got64 = (m.R[0, 10].astype(np.uint64) | m.R[0, 11].astype(np.uint64) << np.uint64(32)).view(np.float64)
    assert np.array_equal(got64, x.astype(np.float64)) and np.array_equal(np.signbit(got64), np.signbit(x))
    r = U(z) - U(y) - cin.astype(np.int64)                       # subbrev: S1 - S0 - borrow in
    assert np.array_equal(m.R[0, 13], (r & M32).astype(np.uint32))
    vcc = np.unpackbits(m.S[0, 106:108].view(np.uint8), bitorder="little").astype(bool)
    assert np.array_equal(vcc, r < 0)


def test_accvgpr_and_permlane_swaps():
    x, y, p, q, s, t = (u32_bits() for _ in range(6))
    m = snippet(["v_accvgpr_write_b32 a1, v1", "v_accvgpr_mov_b32 a2, a3", "s_nop 2", "v_accvgpr_read_b32 v2, a4",
                 "v_permlane32_swap_b32 v5, v6", "v_permlane16_swap_b32 v7, v8", "s_nop 2"],
                {1: x, 2: poison(), AOFF + 1: poison(), AOFF + 2: poison(), AOFF + 3: y, AOFF + 4: p,
                 5: q, 6: s, 7: t, 8: x})
    assert np.array_equal(m.R[0, AOFF + 1], x) and np.array_equal(m.R[0, AOFF + 2], y)
    assert np.array_equal(m.R[0, 2], p)
    # notes §3.2: permlane32: VGPR[lane][SRC0] <-> VGPR[lane+32][VDST] for lane < 32
    v5, v6 = q.copy(), s.copy()
    v6[:32], v5[32:] = q[32:], s[:32]
    assert np.array_equal(m.R[0, 5], v5) and np.array_equal(m.R[0, 6], v6)
    v7, v8 = t.copy(), x.copy()
    for base in (0, 32):
        lo, hi = np.arange(base, base + 16), np.arange(base + 16, base + 32)
        v8[lo], v7[hi] = t[hi], x[lo]
    assert np.array_equal(m.R[0, 7], v7) and np.array_equal(m.R[0, 8], v8)
