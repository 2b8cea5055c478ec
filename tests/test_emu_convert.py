"""Conversions and wide integer/f64 arithmetic against formulas written here from the format and ISA
definitions: v_cvt_pk_fp8_f32 / v_cvt_pk_bf8_f32 (OCP E4M3 / E5M2, RNE, op_sel word select, CLAMP),
v_cvt_f32_fp8 / bf8 (byte select by SDWA), v_cvt_pkrtz_f16_f32 (round toward zero), v_add/mul/fma_f64,
v_mad_u64_u32 / v_mad_i64_i32, the VOP2/VOP3b carry ops (Python big integers).

fp8 formats (OCP 8-bit floating point, gfx950; not CDNA3's FNUZ): E4M3 bias 7, S.1111.111 = NaN, no
inf, max 448; E5M2 bias 15, exponent 11111 = inf (mantissa 0) / NaN, max 57344. The reference encoder
below enumerates every code, decodes it from those fields, and picks the nearest (ties: even code),
with the first value past the maximum as an "overflow" candidate: overflow is NaN (E4M3) / inf (E5M2)
without CLAMP and +-max with CLAMP (assumed, see ops_vector). NaN inputs: any NaN code is accepted.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from emu_snippet import poison, snippet

RNG = np.random.default_rng()
L = np.arange(64)


# ---- fp8 reference ---------------------------------------------------------------------------------
def fp8_fields(kind):
    return (4, 3, 7) if kind == "fp8" else (5, 2, 15)


def fp8_value(code, kind):
    """Decode one code from the format definition (None for NaN, inf as float)."""
    eb, mb, bias = fp8_fields(kind)
    s, e, mt = code >> 7, (code >> mb) & ((1 << eb) - 1), code & ((1 << mb) - 1)
    if kind == "fp8" and e == 15 and mt == 7:
        return None
    if kind == "bf8" and e == 31:
        return None if mt else (-np.inf if s else np.inf)
    v = (mt / 2 ** mb) * 2.0 ** (1 - bias) if e == 0 else (1 + mt / 2 ** mb) * 2.0 ** (e - bias)
    return -v if s else v


def fp8_encode_ref(x, kind, clamp=False):
    pos = [(fp8_value(c, kind), c) for c in range(128)]
    pos = sorted((v, c) for v, c in pos if v is not None and np.isfinite(v))
    vmax, cmax = pos[-1]
    ulp = vmax - pos[-2][0]
    cands = pos + [(vmax + ulp, cmax + 1)]                 # the overflow candidate (code parity matters)
    vals = np.array([v for v, _ in cands])
    out = []
    for xv in np.asarray(x, np.float32).astype(np.float64):
        sign = 0x80 if np.signbit(xv) else 0
        a = abs(xv)
        if np.isnan(a):
            out.append(-1)
            continue
        if np.isinf(a):
            code = cmax + 1
        else:
            i = int(np.searchsorted(vals, a, side="right")) - 1
            if i >= len(vals) - 1:
                code = cmax + 1
            else:
                lo, hi = cands[i], cands[i + 1]
                dl, dh = a - lo[0], hi[0] - a
                code = lo[1] if dl < dh else hi[1] if dh < dl else (lo[1] if lo[1] % 2 == 0 else hi[1])
        if code == cmax + 1:                               # overflow
            if clamp and not np.isinf(a):
                code = cmax
            else:
                code = 0x7F if kind == "fp8" else 0x7C     # E4M3: NaN; E5M2: inf
                if kind == "fp8":
                    out.append(-1)                         # any NaN
                    continue
        out.append(code | sign)
    return np.array(out)


def fp8_inputs(kind):
    eb, mb, bias = fp8_fields(kind)
    codes = RNG.integers(0, 256, 64)
    vals = [fp8_value(int(c), kind) for c in codes]
    x = np.array([0.0 if v is None or not np.isfinite(v) else v for v in vals])
    # exact midpoints between neighbours (ties), values just off them, scaled randoms, specials
    nxt = np.array([fp8_value(int(c) + 1, kind) if (int(c) & 0x7F) < 0x7E else None for c in codes], object)
    mid = np.array([(a + b) / 2 if b is not None and np.isfinite(b) and np.isfinite(a) else a
                    for a, b in zip(x, nxt)], np.float64)
    x[:16] = mid[:16]
    x[16:24] = mid[16:24] * (1 + 2.0 ** -20)
    top = 448.0 if kind == "fp8" else 57344.0
    ulp = 32.0 if kind == "fp8" else 8192.0
    sp = [0.0, -0.0, np.inf, -np.inf, np.nan, top, top + ulp / 2, -(top + ulp / 2) * (1 + 2 ** -20), 1e6,
          2.0 ** (-6 - 3 - 1 if kind == "fp8" else -14 - 2 - 1), 1e-40, -3e-3, top + ulp / 2 * 0.999]
    x[24:24 + len(sp)] = sp
    x[40:] = RNG.standard_normal(24) * 2.0 ** RNG.integers(-10, 12, 24)
    return x.astype(np.float32)


def test_cvt_pk_fp8_bf8_rne_opsel_clamp():
    lines, checks, regs = [], [], {}
    r = 8
    for kind in ("fp8", "bf8"):
        for variant in ("lo", "hi", "neg", "clamp"):
            a, b, c, d = (fp8_inputs(kind) for _ in range(4))
            regs.update({r: a, r + 1: b, r + 2: c, r + 3: d, r + 4: poison()})
            name = f"v_cvt_pk_{kind}_f32"
            if variant == "lo":
                lines.append(f"{name} v{r + 4}, v{r}, v{r + 1}")
                want = [(0, a), (8, b)]
                keep_hi = True
            elif variant == "hi":
                lines.append(f"{name} v{r + 4}, v{r}, v{r + 1} op_sel:[0,0,1]")
                want = [(16, a), (24, b)]
                keep_hi = False
            elif variant == "neg":
                lines.append(f"{name} v{r + 4}, -v{r}, |v{r + 1}|")
                want = [(0, -a), (8, np.abs(b))]
                keep_hi = True
            else:
                lines.append(f"{name} v{r + 4}, v{r}, v{r + 1} clamp")
                lines.append(f"{name} v{r + 4}, v{r + 2}, v{r + 3} op_sel:[0,0,1] clamp")
                want = [(0, a), (8, b), (16, c), (24, d)]
                keep_hi = None
            checks.append((lines[-1], kind, r + 4, want, keep_hi, variant == "clamp"))
            r += 5
    m = snippet(lines + ["s_nop 1"], regs)
    for text, kind, row, want, keep_hi, clamp in checks:
        got = m.R[0, row]
        for shift, x in want:
            g = (got >> shift) & 0xFF
            w = fp8_encode_ref(x, kind, clamp)
            finite_in = np.isfinite(x)
            if clamp:                       # saturation of +-inf inputs is not asserted (unsure)
                w = np.where(finite_in, w, -2)
            nan = w == -1
            ok = (g == w) | (w == -2)
            if kind == "fp8":
                ok |= nan & ((g & 0x7F) == 0x7F)
            else:
                ok |= nan & ((g & 0x7C) == 0x7C) & ((g & 3) != 0)
            assert ok.all(), (text, shift, x[~ok][:4], g[~ok][:4], w[~ok][:4])
        if keep_hi is True:
            assert np.all(got >> 16 == 0xDEAD), text
        elif keep_hi is False:
            assert np.all(got & 0xFFFF == 0xBEEF), text


def test_cvt_f32_fp8_bf8_byte_select():
    x = RNG.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
    x[:4] = [0x7F7E0080, 0xFF7C7B01, 0x00FC837D, 0x387F3C00]
    lines, checks, regs = [], [], {1: x}
    for n, (kind, sel) in enumerate([(k, s) for k in ("fp8", "bf8") for s in range(4)]):
        regs[10 + n] = poison()
        lines.append(f"v_cvt_f32_{kind}_sdwa v{10 + n}, v1 src0_sel:BYTE_{sel}" if sel else f"v_cvt_f32_{kind} v{10 + n}, v1")
        checks.append((lines[-1], 10 + n, kind, sel))
    m = snippet(lines + ["s_nop 1"], regs)
    for text, row, kind, sel in checks:
        got = m.R[0, row].view(np.float32)
        for ln in range(64):
            v = fp8_value((int(x[ln]) >> (8 * sel)) & 0xFF, kind)
            if v is None:
                assert np.isnan(got[ln]), text
            else:
                assert got[ln] == v and np.signbit(got[ln]) == np.signbit(v), (text, ln)


def f16_rtz_ref(x):
    """Largest-magnitude f16 not above |x| (toward zero); inf/NaN kept; from the table of all f16s."""
    table = np.arange(0x7C00, dtype=np.uint16).view(np.float16).astype(np.float64)    # +0 .. 65504
    out = []
    for v in np.asarray(x, np.float32).astype(np.float64):
        if np.isnan(v):
            out.append(-1)
        elif np.isinf(v):
            out.append(0x7C00 | (0x8000 if v < 0 else 0))
        else:
            code = int(np.searchsorted(table, abs(v), side="right")) - 1
            out.append(code | (0x8000 if np.signbit(v) else 0))
    return np.array(out)


def test_cvt_pkrtz_f16_f32():
    a = (RNG.standard_normal(64) * 2.0 ** RNG.integers(-26, 18, 64)).astype(np.float32)
    b = (RNG.standard_normal(64) * 2.0 ** RNG.integers(-26, 18, 64)).astype(np.float32)
    a[:10] = [0.0, -0.0, np.inf, -np.inf, np.nan, 65519.0, 70000.0, -1e9, 1e-8, -6.1e-5]
    b[:4] = [1 + 2.0 ** -11, -(1 + 3 * 2.0 ** -11), 2.0 ** -25, 65504.0]      # ties would go up under RNE
    m = snippet(["v_cvt_pkrtz_f16_f32 v3, v1, v2", "v_cvt_pkrtz_f16_f32_e64 v4, -v1, |v2|", "s_nop 1"],
                {1: a, 2: b, 3: poison(), 4: poison()})
    for row, x, y in ((3, a, b), (4, -a, np.abs(b))):
        got = m.R[0, row]
        for g, w in ((got & 0xFFFF, f16_rtz_ref(x)), (got >> 16, f16_rtz_ref(y))):
            nan = w == -1
            assert np.array_equal(g[~nan], w[~nan]), (row, g[~nan][g[~nan] != w[~nan]][:4], w[~nan][g[~nan] != w[~nan]][:4])
            assert np.all(((g[nan] & 0x7C00) == 0x7C00) & ((g[nan] & 0x3FF) != 0))


# ---- f64 ------------------------------------------------------------------------------------------
def f64_inputs():
    x = RNG.standard_normal(64) * 2.0 ** RNG.integers(-60, 60, 64)
    x[RNG.permutation(64)[:8]] = [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -2.2e-308, 1.7e308]
    return x


def exact_round(fr):
    """Fraction -> nearest float64, ties to even (Python's int/int true division is correctly rounded)."""
    try:
        return fr.numerator / fr.denominator
    except OverflowError:
        return np.inf if fr > 0 else -np.inf


def ref_f64(op, a, b, c):
    out = np.empty(64)
    for i in range(64):
        x, y, z = float(a[i]), float(b[i]), float(c[i])
        if not (np.isfinite(x) and np.isfinite(y) and np.isfinite(z)):
            with np.errstate(all="ignore"):
                out[i] = {"add": np.float64(x) + y, "mul": np.float64(x) * y, "fma": np.float64(x) * y + z}[op]
            continue
        fx, fy, fz = Fraction(x), Fraction(y), Fraction(z)
        e = {"add": fx + fy, "mul": fx * fy, "fma": fx * fy + fz}[op]
        if e == 0:      # exact zero: -0 only when both addends are -0 (round to nearest)
            terms = {"add": (x, y), "mul": (x * y, -0.0 if False else 0.0), "fma": (x * y, z)}[op]
            if op == "mul":
                out[i] = x * y
            else:
                out[i] = -0.0 if all(np.signbit(t) for t in terms) else 0.0
            continue
        out[i] = exact_round(e)
    return out


def split64(x):
    u = np.asarray(x, np.float64).view(np.uint64)
    return (u & np.uint64(0xFFFFFFFF)).astype(np.uint32), (u >> np.uint64(32)).astype(np.uint32)


def test_f64_add_mul_fma():
    a, b, c = f64_inputs(), f64_inputs(), f64_inputs()
    # fma cases where rounding a*b first changes the result (single rounding is required)
    a[40:48] = 1 + 2.0 ** -30 * RNG.integers(1, 8, 8)
    b[40:48] = 1 + 2.0 ** -30 * RNG.integers(1, 8, 8)
    c[40:48] = -1.0
    regs = {}
    for r, x in ((2, a), (4, b), (6, c)):
        regs[r], regs[r + 1] = split64(x)
    for r in range(10, 16):
        regs[r] = poison()
    m = snippet(["v_add_f64 v[10:11], v[2:3], v[4:5]", "v_mul_f64 v[12:13], v[2:3], v[4:5]",
                 "v_fma_f64 v[14:15], v[2:3], v[4:5], v[6:7]", "s_nop 2"], regs)
    for row, op in ((10, "add"), (12, "mul"), (14, "fma")):
        got = (m.R[0, row].astype(np.uint64) | (m.R[0, row + 1].astype(np.uint64) << np.uint64(32))).view(np.float64)
        want = ref_f64(op, a, b, c)
        ok = (got.view(np.uint64) == want.view(np.uint64)) | (np.isnan(got) & np.isnan(want))
        assert ok.all(), (op, np.nonzero(~ok)[0], got[~ok][:3], want[~ok][:3])


# ---- wide integer ops -----------------------------------------------------------------------------
def u32s():
    x = RNG.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
    x[RNG.permutation(64)[:5]] = [0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF]
    return x


def mask_bits(m, idx):
    v = int(m.S[0, idx]) | int(m.S[0, idx + 1]) << 32
    return np.array([(v >> i) & 1 for i in range(64)], bool)


def test_mad_u64_u32_i64_i32():
    a, b = u32s(), u32s()
    c_lo, c_hi = u32s(), u32s()
    c_hi[:4] = 0xFFFFFFFF                                # near the 64-bit carry
    ex = RNG.random(64) < 0.8
    a[4] = b[4] = c_lo[4] = 0xFFFFFFFF                  # (2^32-1)^2 + 2^33-1 = 2^64 exactly: carry out
    c_hi[4], ex[4] = 1, True
    m = snippet(["v_mad_u64_u32 v[10:11], s[20:21], v1, v2, v[4:5]",
                 "v_mad_i64_i32 v[12:13], s[22:23], v1, v2, v[4:5]", "s_nop 2"],
                {1: a, 2: b, 4: c_lo, 5: c_hi, 10: poison(), 11: poison(), 12: poison(), 13: poison()},
                exec_mask=ex)
    for i in range(64):
        c = int(c_lo[i]) | int(c_hi[i]) << 32
        cs = c - (1 << 64) if c >> 63 else c
        sa = int(a[i]) - (1 << 32) if a[i] >> 31 else int(a[i])
        sb = int(b[i]) - (1 << 32) if b[i] >> 31 else int(b[i])
        ru = int(a[i]) * int(b[i]) + c
        rs = sa * sb + cs
        gu = int(m.R[0, 10, i]) | int(m.R[0, 11, i]) << 32
        gs = int(m.R[0, 12, i]) | int(m.R[0, 13, i]) << 32
        if ex[i]:
            assert gu == ru % (1 << 64) and gs == rs % (1 << 64), i
        else:
            assert m.R[0, 10, i] == 0xDEADBEEF and m.R[0, 12, i] == 0xDEADBEEF
        assert mask_bits(m, 20)[i] == (ex[i] and ru >= 1 << 64)
        assert mask_bits(m, 22)[i] == (ex[i] and not -(1 << 63) <= rs < 1 << 63)


def test_carry_chain_ops():
    a, b = u32s(), u32s()
    cin = RNG.random(64) < 0.5
    bits = int(np.packbits(cin, bitorder="little").view(np.uint64)[0])
    ex = RNG.random(64) < 0.85
    lines = ["v_add_co_u32_e64 v10, s[20:21], v1, v2",
             "v_addc_co_u32_e64 v11, s[22:23], v1, v2, s[30:31]",
             "v_sub_co_u32_e64 v12, s[24:25], v1, v2",
             "v_subb_co_u32_e64 v13, s[26:27], v1, v2, s[30:31]",
             "v_subrev_co_u32_e64 v14, s[28:29], v1, v2",
             "v_add_co_u32_e32 v15, vcc, v1, v2",
             "s_nop 1",                                          # VALU writes VCC -> VALU reads it: 2 wait states
             "v_addc_co_u32_e32 v16, vcc, v1, v2, vcc",          # chained: carry in = previous carry out
             "s_nop 1"]
    m = snippet(lines, {1: a, 2: b, **{r: poison() for r in range(10, 17)}},
                {30: bits & 0xFFFFFFFF, 31: bits >> 32}, exec_mask=ex)
    A, B, C = (np.array([int(v) for v in x], object) for x in (a, b, cin.astype(np.int64)))
    carry_e32 = [(int(x) + int(y)) >> 32 for x, y in zip(a, b)]
    refs = [(10, 20, A + B), (11, 22, A + B + C), (12, 24, A - B), (13, 26, A - B - C), (14, 28, B - A)]
    for row, sd, r in refs:
        for i in range(64):
            val, carry = int(r[i]) % (1 << 32), int(r[i]) >= (1 << 32) or int(r[i]) < 0
            if ex[i]:
                assert m.R[0, row, i] == val, (row, i)
            else:
                assert m.R[0, row, i] == 0xDEADBEEF
            assert mask_bits(m, sd)[i] == (ex[i] and carry), (row, i)
    vcc = mask_bits(m, 106)
    for i in range(64):
        if ex[i]:
            s2 = int(a[i]) + int(b[i]) + (carry_e32[i])
            assert m.R[0, 15, i] == (int(a[i]) + int(b[i])) % (1 << 32)
            assert m.R[0, 16, i] == s2 % (1 << 32) and vcc[i] == (s2 >= 1 << 32)
        else:
            assert not vcc[i]
