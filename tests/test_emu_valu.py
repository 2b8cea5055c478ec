"""Table-driven VALU semantics: every row is an instruction and a formula written here from the
ISA guide (CDNA4 ch.12 pseudocode), run on fresh random inputs with -0, ±inf, NaN, denormals and
integer edge values; destinations are poisoned; many rows run in one emulator launch.

References compute in float64 / Python-size integers and round once: for f32 add/sub/mul and
f16 add/sub/mul/fma that single rounding of the float64 value is the correctly rounded result
(53 >= 2*24+2 bits, so the double rounding is innocuous); fma_f32 uses integer-valued inputs whose
a*b+c is exact in float64. Comparisons are bit-exact (any NaN matches any NaN) except TRANS ops:
1 ulp (ISA "1ULP accuracy"). Denormal rule assumed: MODE keeps f32/f16 denormals (flyasm sets
float_denorm_mode 3); TRANS ops flush denormal inputs and results (ISA text).
"""
from __future__ import annotations

import numpy as np
import pytest

from emu_snippet import poison, snippet

RNG = np.random.default_rng()
L = np.arange(64)
M32 = 0xFFFFFFFF


# ---- inputs --------------------------------------------------------------------------------------
def f32_bits():
    x = (RNG.standard_normal(64) * 2.0 ** RNG.integers(-30, 30, 64)).astype(np.float32)
    sp = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -3e-39, 3.4e38, -1.5, 1.0, 2.0 ** -126, 0.5],
                  np.float32)
    x[RNG.permutation(64)[:len(sp)]] = sp
    return x.view(np.uint32)


def normal_f32_bits():         # specials but no subnormals: products stay in the normal range
    # Output modifiers (mul:/div:) on a subnormal result: whether the hardware rounds before or after
    # scaling is not documented, and LLVM folds omod only when f32 denormals are flushed
    # (SIFoldOperands, isOModFoldable), so no compiler output pins it down either. Test normal results.
    x = (RNG.standard_normal(64) * 2.0 ** RNG.integers(-30, 30, 64)).astype(np.float32)
    sp = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 3.4e38, -1.5, 1.0, 0.5], np.float32)
    x[RNG.permutation(64)[:len(sp)]] = sp
    return x.view(np.uint32)


def int_f32_bits():            # integer-valued: a*b+c exact in float64
    x = RNG.integers(-2**12, 2**12, 64).astype(np.float32)
    x[RNG.permutation(64)[:4]] = [0.0, -0.0, np.inf, np.nan]
    return x.view(np.uint32)


def f16_bits():
    x = (RNG.standard_normal(64) * 2.0 ** RNG.integers(-8, 8, 64)).astype(np.float16)
    sp = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 3e-6, -1e-7, 65504, -1.5], np.float16)
    x[RNG.permutation(64)[:len(sp)]] = sp
    garbage = RNG.integers(0, 2**16, 64).astype(np.uint32) << 16     # the high half must be ignored
    return x.view(np.uint16).astype(np.uint32) | garbage


def u32_bits():
    x = RNG.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
    x[RNG.permutation(64)[:6]] = [0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0xFFFFFF]
    return x


def small_bits():              # shift amounts / bit offsets with random upper bits (masked by the ISA)
    return (RNG.integers(0, 64, 64) | (RNG.integers(0, 2, 64) << 8)).astype(np.uint32)


GEN = {"f32": f32_bits, "nf32": normal_f32_bits, "if32": int_f32_bits, "f16": f16_bits, "u32": u32_bits, "sh": small_bits}


# ---- decode / round helpers (independent of the emulator) ---------------------------------------
def F(b):
    return np.asarray(b, np.uint32).view(np.float32).astype(np.float64)


def H(b):
    return (np.asarray(b, np.uint32) & 0xFFFF).astype(np.uint16).view(np.float16).astype(np.float64)


def S(b):
    return np.asarray(b, np.uint32).view(np.int32).astype(np.int64)


def U(b):
    return np.asarray(b, np.uint32).astype(np.int64)


def to_f32(x):
    with np.errstate(all="ignore"):
        return np.asarray(x, np.float64).astype(np.float32).view(np.uint32)


def to_f16(x):
    with np.errstate(all="ignore"):
        return np.asarray(x, np.float64).astype(np.float16).view(np.uint16).astype(np.uint32)


def u32(x):
    return (np.asarray(x, object) & M32).astype(np.uint64).astype(np.uint32) if np.asarray(x).dtype == object \
        else (np.asarray(x, np.int64) & M32).astype(np.uint32)


def ftz(x):                    # flush denormal float32 values (as float64) to signed zero
    return np.where(np.abs(x) < 2.0 ** -126, np.copysign(0.0, x), x)


def fmax_ieee(a, b):           # IEEE mode: a NaN operand yields the other operand
    return np.where(np.isnan(a), b, np.where(np.isnan(b), a, np.maximum(a, b)))


def fmin_ieee(a, b):
    return np.where(np.isnan(a), b, np.where(np.isnan(b), a, np.minimum(a, b)))


def bfe(v, off, w):
    off, w = off & 31, w & 31
    return (v >> off) & ((1 << w) - 1)


def sext(v, bits):
    v = v & ((1 << bits) - 1)
    return np.where(v >> (bits - 1), v - (1 << bits), v)


def perm_ref(s0, s1, sel):
    out = np.zeros(64, np.int64)
    for ln in range(64):
        by = list(int(s1[ln]).to_bytes(4, "little")) + list(int(s0[ln]).to_bytes(4, "little"))
        r = 0
        for k in range(4):
            x = (int(sel[ln]) >> (8 * k)) & 0xFF
            if x < 8:
                val = by[x]
            elif x < 12:
                src, bit = [(s1, 15), (s1, 31), (s0, 15), (s0, 31)][x - 8]
                val = 0xFF if (int(src[ln]) >> bit) & 1 else 0
            else:
                val = 0 if x == 12 else 0xFF
            r |= val << (8 * k)
        out[ln] = r
    return out


def brev(v):
    return np.array([int(f"{int(x):032b}"[::-1], 2) for x in v], np.int64)


def mbcnt(mask, add, hi):
    m = np.asarray(mask, np.int64)
    below = np.where(L >= 32, (1 << 32) - 1, (1 << (L % 32)) - 1) if hi else \
        np.where(L >= 32, (1 << 32) - 1, (1 << L) - 1)
    below = np.where(hi, np.where(L < 32, 0, (1 << (L - 32)) - 1), below)
    return np.array([bin(int(x) & int(b)).count("1") for x, b in zip(m, below)]) + U(add)


def cvt_i(x, lo, hi):          # float -> int: truncate, clamp, NaN -> 0 (ISA V_CVT_I32_F32)
    x = np.nan_to_num(x, nan=0.0, posinf=hi, neginf=lo)
    return np.clip(np.trunc(x), lo, hi).astype(np.int64)


def bf16_rne(x32):
    b = np.asarray(x32, np.uint32).astype(np.int64)
    r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF
    return np.where(np.isnan(F(x32)), -1, r)          # -1: any bf16 NaN


# name template, source kinds, reference(raw sources...) -> (kind, value); kinds: f32/f16 (rounded
# here), u32 (integer), b64, trans (f32 within 1 ulp), f16lo (f16 bits compared in the low half)
ROWS = [
    ("v_add_f32 {d}, {a}, {b}", "f32 f32", lambda a, b: ("f32", F(a) + F(b))),
    ("v_sub_f32 {d}, {a}, {b}", "f32 f32", lambda a, b: ("f32", F(a) - F(b))),
    ("v_subrev_f32 {d}, {a}, {b}", "f32 f32", lambda a, b: ("f32", F(b) - F(a))),
    ("v_mul_f32 {d}, {a}, {b}", "f32 f32", lambda a, b: ("f32", F(a) * F(b))),
    ("v_max_f32 {d}, {a}, {b}", "f32 f32", lambda a, b: ("minmax", fmax_ieee(F(a), F(b)))),
    ("v_min_f32 {d}, {a}, {b}", "f32 f32", lambda a, b: ("minmax", fmin_ieee(F(a), F(b)))),
    ("v_fma_f32 {d}, {a}, {b}, {c}", "if32 if32 if32", lambda a, b, c: ("f32", F(a) * F(b) + F(c))),
    ("v_fma_f32 {d}, -{a}, |{b}|, -|{c}|", "if32 if32 if32",
     lambda a, b, c: ("f32", -F(a) * np.abs(F(b)) - np.abs(F(c)))),
    ("v_max3_f32 {d}, {a}, {b}, {c}", "f32 f32 f32", lambda a, b, c: ("minmax", fmax_ieee(fmax_ieee(F(a), F(b)), F(c)))),
    ("v_min3_f32 {d}, {a}, {b}, {c}", "f32 f32 f32", lambda a, b, c: ("minmax", fmin_ieee(fmin_ieee(F(a), F(b)), F(c)))),
    ("v_med3_f32 {d}, {a}, {b}, {c}", "if32 if32 if32",
     lambda a, b, c: ("minmax", np.maximum(np.minimum(F(a), F(b)), np.minimum(np.maximum(F(a), F(b)), F(c))))),
    ("v_add_f32_e64 {d}, {a}, {b} mul:4", "if32 if32", lambda a, b: ("f32", (F(a) + F(b)) * 4)),
    ("v_mul_f32_e64 {d}, {a}, {b} div:2 clamp", "nf32 nf32",
     lambda a, b: ("minmax", np.where(np.isnan(F(a) * F(b)), np.nan, np.clip(F(a) * F(b) / 2, 0, 1)))),  # sign of a clamped 0 unsure
    ("v_add_f16 {d}, {a}, {b}", "f16 f16", lambda a, b: ("f16lo", H(a) + H(b))),
    ("v_sub_f16 {d}, {a}, {b}", "f16 f16", lambda a, b: ("f16lo", H(a) - H(b))),
    ("v_mul_f16 {d}, {a}, {b}", "f16 f16", lambda a, b: ("f16lo", H(a) * H(b))),
    ("v_max_f16 {d}, {a}, {b}", "f16 f16", lambda a, b: ("f16mm", fmax_ieee(H(a), H(b)))),
    ("v_min_f16 {d}, {a}, {b}", "f16 f16", lambda a, b: ("f16mm", fmin_ieee(H(a), H(b)))),
    ("v_fma_f16 {d}, {a}, {b}, {c}", "f16 f16 f16", lambda a, b, c: ("f16lo", H(a) * H(b) + H(c))),
    ("v_add_u32 {d}, {a}, {b}", "u32 u32", lambda a, b: ("u32", U(a) + U(b))),
    ("v_sub_u32 {d}, {a}, {b}", "u32 u32", lambda a, b: ("u32", U(a) - U(b))),
    ("v_subrev_u32 {d}, {a}, {b}", "u32 u32", lambda a, b: ("u32", U(b) - U(a))),
    ("v_mul_lo_u32 {d}, {a}, {b}", "u32 u32", lambda a, b: ("u32", (U(a).astype(object) * U(b)))),
    ("v_mul_hi_u32 {d}, {a}, {b}", "u32 u32", lambda a, b: ("u32", (U(a).astype(object) * U(b)) >> 32)),
    ("v_mul_hi_i32 {d}, {a}, {b}", "u32 u32", lambda a, b: ("u32", (S(a).astype(object) * S(b)) >> 32)),
    ("v_mul_u32_u24 {d}, {a}, {b}", "u32 u32", lambda a, b: ("u32", (U(a) & 0xFFFFFF) * (U(b) & 0xFFFFFF))),
    ("v_mul_hi_u32_u24 {d}, {a}, {b}", "u32 u32",
     lambda a, b: ("u32", ((U(a) & 0xFFFFFF) * (U(b) & 0xFFFFFF)) >> 32)),
    ("v_mul_i32_i24 {d}, {a}, {b}", "u32 u32", lambda a, b: ("u32", sext(U(a), 24) * sext(U(b), 24))),
    ("v_mad_u32_u24 {d}, {a}, {b}, {c}", "u32 u32 u32",
     lambda a, b, c: ("u32", (U(a) & 0xFFFFFF) * (U(b) & 0xFFFFFF) + U(c))),
    ("v_max_u32 {d}, {a}, {b}", "u32 u32", lambda a, b: ("u32", np.maximum(U(a), U(b)))),
    ("v_min_u32 {d}, {a}, {b}", "u32 u32", lambda a, b: ("u32", np.minimum(U(a), U(b)))),
    ("v_max_i32 {d}, {a}, {b}", "u32 u32", lambda a, b: ("u32", np.maximum(S(a), S(b)))),
    ("v_min_i32 {d}, {a}, {b}", "u32 u32", lambda a, b: ("u32", np.minimum(S(a), S(b)))),
    ("v_max3_i32 {d}, {a}, {b}, {c}", "u32 u32 u32", lambda a, b, c: ("u32", np.maximum(np.maximum(S(a), S(b)), S(c)))),
    ("v_min3_u32 {d}, {a}, {b}, {c}", "u32 u32 u32", lambda a, b, c: ("u32", np.minimum(np.minimum(U(a), U(b)), U(c)))),
    ("v_med3_i32 {d}, {a}, {b}, {c}", "u32 u32 u32", lambda a, b, c: ("u32", np.sort(np.stack([S(a), S(b), S(c)]), 0)[1])),
    ("v_med3_u32 {d}, {a}, {b}, {c}", "u32 u32 u32", lambda a, b, c: ("u32", np.sort(np.stack([U(a), U(b), U(c)]), 0)[1])),
    ("v_add3_u32 {d}, {a}, {b}, {c}", "u32 u32 u32", lambda a, b, c: ("u32", U(a) + U(b) + U(c))),
    ("v_lshl_add_u32 {d}, {a}, {b}, {c}", "u32 sh u32", lambda a, b, c: ("u32", (U(a) << (U(b) & 31)) + U(c))),
    ("v_add_lshl_u32 {d}, {a}, {b}, {c}", "u32 u32 sh", lambda a, b, c: ("u32", ((U(a) + U(b)) & M32) << (U(c) & 31))),
    ("v_lshl_or_b32 {d}, {a}, {b}, {c}", "u32 sh u32", lambda a, b, c: ("u32", (U(a) << (U(b) & 31)) | U(c))),
    ("v_and_or_b32 {d}, {a}, {b}, {c}", "u32 u32 u32", lambda a, b, c: ("u32", (U(a) & U(b)) | U(c))),
    ("v_or3_b32 {d}, {a}, {b}, {c}", "u32 u32 u32", lambda a, b, c: ("u32", U(a) | U(b) | U(c))),
    ("v_xad_u32 {d}, {a}, {b}, {c}", "u32 u32 u32", lambda a, b, c: ("u32", (U(a) ^ U(b)) + U(c))),
    ("v_and_b32 {d}, {a}, {b}", "u32 u32", lambda a, b: ("u32", U(a) & U(b))),
    ("v_or_b32 {d}, {a}, {b}", "u32 u32", lambda a, b: ("u32", U(a) | U(b))),
    ("v_xor_b32 {d}, {a}, {b}", "u32 u32", lambda a, b: ("u32", U(a) ^ U(b))),
    ("v_not_b32 {d}, {a}", "u32", lambda a: ("u32", ~U(a))),
    ("v_bfrev_b32 {d}, {a}", "u32", lambda a: ("u32", brev(a))),
    ("v_lshlrev_b32 {d}, {a}, {b}", "sh u32", lambda a, b: ("u32", U(b) << (U(a) & 31))),
    ("v_lshrrev_b32 {d}, {a}, {b}", "sh u32", lambda a, b: ("u32", U(b) >> (U(a) & 31))),
    ("v_ashrrev_i32 {d}, {a}, {b}", "sh u32", lambda a, b: ("u32", S(b) >> (U(a) & 31))),
    ("v_lshlrev_b64 {d2}, {a}, {b2}", "sh b64", lambda a, b: ("b64", b.astype(object) << (U(a) & 63))),
    ("v_lshrrev_b64 {d2}, {a}, {b2}", "sh b64", lambda a, b: ("b64", b.astype(object) >> (U(a) & 63))),
    ("v_ashrrev_i64 {d2}, {a}, {b2}", "sh b64",
     lambda a, b: ("b64", np.array([int(x) - (1 << 64) if int(x) >> 63 else int(x) for x in b], object) >> (U(a) & 63))),
    ("v_bfe_u32 {d}, {a}, {b}, {c}", "u32 sh sh", lambda a, b, c: ("u32", bfe(U(a), U(b), U(c)))),
    ("v_bfe_i32 {d}, {a}, {b}, {c}", "u32 sh sh",
     lambda a, b, c: ("u32", np.where((U(c) & 31) == 0, 0, sext(bfe(U(a), U(b), U(c)), np.maximum(U(c) & 31, 1))))),
    ("v_bfi_b32 {d}, {a}, {b}, {c}", "u32 u32 u32", lambda a, b, c: ("u32", (U(a) & U(b)) | (~U(a) & U(c)))),
    ("v_alignbit_b32 {d}, {a}, {b}, {c}", "u32 u32 sh",
     lambda a, b, c: ("u32", ((U(a) << 32 | U(b)) >> (U(c) & 31)))),
    ("v_alignbyte_b32 {d}, {a}, {b}, {c}", "u32 u32 sh",
     lambda a, b, c: ("u32", ((U(a) << 32 | U(b)) >> (8 * (U(c) & 3))))),
    ("v_perm_b32 {d}, {a}, {b}, {c}", "u32 u32 u32", lambda a, b, c: ("u32", perm_ref(a, b, c))),
    ("v_bcnt_u32_b32 {d}, {a}, {b}", "u32 u32", lambda a, b: ("u32", np.array([bin(int(x)).count("1") for x in a]) + U(b))),
    ("v_mbcnt_lo_u32_b32 {d}, {a}, {b}", "u32 u32", lambda a, b: ("u32", mbcnt(a, b, False))),
    ("v_mbcnt_hi_u32_b32 {d}, {a}, {b}", "u32 u32", lambda a, b: ("u32", mbcnt(a, b, True))),
    ("v_cvt_f32_i32 {d}, {a}", "u32", lambda a: ("f32", S(a).astype(np.float64))),
    ("v_cvt_f32_u32 {d}, {a}", "u32", lambda a: ("f32", U(a).astype(np.float64))),
    ("v_cvt_i32_f32 {d}, {a}", "f32", lambda a: ("u32", cvt_i(F(a), -2**31, 2**31 - 1))),
    ("v_cvt_u32_f32 {d}, {a}", "f32", lambda a: ("u32", cvt_i(F(a), 0, 2**32 - 1))),
    ("v_cvt_f16_f32 {d}, {a}", "f32", lambda a: ("f16lo", F(a))),
    ("v_cvt_f32_f16 {d}, {a}", "f16", lambda a: ("f32", H(a))),
    ("v_cvt_f32_bf16 {d}, {a}", "u32", lambda a: ("f32", F((U(a) & 0xFFFF) << 16))),
    ("v_cvt_pk_bf16_f32 {d}, {a}, {b}", "f32 f32", lambda a, b: ("bf16x2", (bf16_rne(a), bf16_rne(b)))),
    ("v_cvt_pk_f16_f32 {d}, {a}, {b}", "f32 f32", lambda a, b: ("f16x2", (F(a), F(b)))),
    ("v_floor_f32 {d}, {a}", "f32", lambda a: ("f32", np.floor(F(a)))),
    ("v_ceil_f32 {d}, {a}", "f32", lambda a: ("f32", np.ceil(F(a)))),
    ("v_trunc_f32 {d}, {a}", "f32", lambda a: ("f32", np.trunc(F(a)))),
    ("v_rndne_f32 {d}, {a}", "f32", lambda a: ("f32", np.round(F(a)))),
    ("v_ldexp_f32 {d}, {a}, {b}", "f32 sh", lambda a, b: ("f32", F(a) * 2.0 ** (U(b).astype(np.float64) - 40))),
    ("v_exp_f32 {d}, {a}", "f32", lambda a: ("trans", ftz(np.exp2(F(a))))),
    ("v_log_f32 {d}, {a}", "f32", lambda a: ("trans", np.log2(ftz(F(a))))),
    ("v_rcp_f32 {d}, {a}", "f32", lambda a: ("trans", ftz(1.0 / ftz(F(a))))),
    ("v_rcp_iflag_f32 {d}, {a}", "f32", lambda a: ("trans", ftz(1.0 / ftz(F(a))))),
    ("v_rsq_f32 {d}, {a}", "f32", lambda a: ("trans", ftz(1.0 / np.sqrt(ftz(F(a)))))),
    ("v_sqrt_f32 {d}, {a}", "f32", lambda a: ("trans", ftz(np.sqrt(ftz(F(a)))))),
]


def _reg(n, two=False):
    return f"v[{n}:{n + 1}]" if two else f"v{n}"


def _run_rows(rows):
    lines, regs, checks = [], {}, []
    for i, (tmpl, kinds, ref) in enumerate(rows):
        base = 8 + 10 * i
        srcs, names = [], {}
        for j, kind in enumerate(kinds.split()):
            r = base + 2 * j
            if kind == "b64":
                lo, hi = u32_bits(), u32_bits()
                regs[r], regs[r + 1] = lo, hi
                srcs.append(lo.astype(np.uint64) | (hi.astype(np.uint64) << np.uint64(32)))
                names["abc"[j] + "2"] = _reg(r, True)
            else:
                x = GEN[kind]()
                if "ldexp" in tmpl and kind == "sh":
                    x = (x & 63) + 8                     # exponents -32..+31 after the -40 below
                regs[r] = x
                srcs.append(x)
            names["abc"[j]] = _reg(r)
        d = base + 6
        regs[d], regs[d + 1] = poison(), poison()
        names["d"], names["d2"] = _reg(d), _reg(d, True)
        text = tmpl.format(**names)
        if "ldexp" in tmpl:
            text = text.replace(names["b"], names["b"])
            lines.append(f"v_subrev_u32 {names['b']}, 40, {names['b']}")
            lines.append("s_nop 1")
        lines.append(text)
        checks.append((text, d, ref, srcs))
    lines.append("s_nop 4")
    m = snippet(lines, regs)
    for text, d, ref, srcs in checks:
        with np.errstate(all="ignore"):
            kind, want = ref(*srcs)
        got = m.R[0, d]
        _compare(text, kind, want, got, m.R[0, d + 1])


def _compare(text, kind, want, got, got_hi):
    if kind == "u32":
        assert np.array_equal(got, u32(want)), text
    elif kind == "b64":
        w = np.array([int(x) & ((1 << 64) - 1) for x in want], np.uint64)
        g = got.astype(np.uint64) | (got_hi.astype(np.uint64) << np.uint64(32))
        assert np.array_equal(g, w), text
    elif kind in ("f32", "minmax"):
        wb = to_f32(want)
        nan = np.isnan(np.asarray(want, np.float64))
        ok = (got == wb) | (nan & np.isnan(got.view(np.float32)))
        if kind == "minmax":            # +0 vs -0 order of equal zeros is not specified: compare values
            ok |= (got.view(np.float32) == 0) & (wb.view(np.float32) == 0)
        assert ok.all(), (text, np.nonzero(~ok)[0][:4], got[~ok][:4], wb[~ok][:4])
    elif kind in ("f16lo", "f16mm"):
        wb = to_f16(want)
        g = got & 0xFFFF
        gf = g.astype(np.uint16).view(np.float16)
        ok = (g == wb) | (np.isnan(np.asarray(want, np.float64)) & np.isnan(gf))
        if kind == "f16mm":
            ok |= (gf == 0) & (wb.astype(np.uint16).view(np.float16) == 0)
        assert ok.all(), (text, np.nonzero(~ok)[0][:4], g[~ok][:4], wb[~ok][:4])
    elif kind == "bf16x2":
        for half, w in zip((got & 0xFFFF, got >> 16), want):
            isn = w < 0
            assert np.array_equal(half[~isn], w[~isn]), text
            assert np.all((((half[isn] >> 7) & 0xFF) == 0xFF) & ((half[isn] & 0x7F) != 0)), text
    elif kind == "f16x2":
        for half, w in zip((got & 0xFFFF, got >> 16), want):
            wb = to_f16(w)
            ok = (half == wb) | (np.isnan(w) & np.isnan(half.astype(np.uint16).view(np.float16)))
            assert ok.all(), text
    elif kind == "trans":
        with np.errstate(all="ignore"):
            w = ftz(np.asarray(want, np.float64).astype(np.float32).astype(np.float64))   # overflow -> inf
        g = got.view(np.float32).astype(np.float64)
        fin = np.isfinite(w) & (np.abs(w) < 3.4e38)
        assert np.array_equal(np.isnan(g), np.isnan(w)), text
        same = ~fin & ~np.isnan(w)
        assert np.array_equal(g[same], w[same]), text
        ulp = np.spacing(np.abs(w[fin]).astype(np.float32)).astype(np.float64)
        assert np.all(np.abs(g[fin] - w[fin]) <= ulp), (text, g[fin][np.abs(g[fin] - w[fin]) > ulp][:4])
    else:
        raise AssertionError(kind)


def test_valu_table():
    for k in range(0, len(ROWS), 40):
        _run_rows(ROWS[k:k + 40])


# ---- compares, cndmask, packed math, SDWA, DPP, lane ops ---------------------------------------
CMPF = {"lt": lambda a, b: a < b, "eq": lambda a, b: a == b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b,
        "lg": lambda a, b: (a < b) | (a > b), "ge": lambda a, b: a >= b, "o": lambda a, b: ~np.isnan(a) & ~np.isnan(b),
        "u": lambda a, b: np.isnan(a) | np.isnan(b), "nge": lambda a, b: ~(a >= b), "nlg": lambda a, b: ~((a < b) | (a > b)),
        "ngt": lambda a, b: ~(a > b), "nle": lambda a, b: ~(a <= b), "neq": lambda a, b: ~(a == b),
        "nlt": lambda a, b: ~(a < b), "ne": lambda a, b: a != b}


def _bits_of(m, idx):
    return int(m.S[0, idx]) | int(m.S[0, idx + 1]) << 32


def _mask(bools):
    return sum(1 << i for i, x in enumerate(bools) if x)


def test_vopc_compares_and_class():
    a, b = f32_bits(), f32_bits()
    b[:8] = a[:8]                                   # equal pairs, incl. NaN == NaN and -0 == +0 cases
    ai, bi = u32_bits(), u32_bits()
    bi[:5] = ai[:5]
    cls = RNG.integers(0, 1024, 64).astype(np.uint32)
    lines, want = [], []
    sd = 8
    for op in ("lt", "eq", "le", "gt", "lg", "ge", "o", "u", "nge", "nlg", "ngt", "nle", "neq", "nlt"):
        lines.append(f"v_cmp_{op}_f32_e64 s[{sd}:{sd + 1}], v1, v2")
        want.append((sd, CMPF[op](F(a), F(b))))
        sd += 2
    for t, conv in (("i32", S), ("u32", U)):
        for op in ("lt", "eq", "le", "gt", "ne", "ge"):
            lines.append(f"v_cmp_{op}_{t}_e64 s[{sd}:{sd + 1}], v3, v4")
            want.append((sd, CMPF[op](conv(ai), conv(bi))))
            sd += 2
    # class bits: 0 sNaN 1 qNaN 2 -inf 3 -normal 4 -denormal 5 -0 6 +0 7 +denormal 8 +normal 9 +inf
    x = F(a)
    c = np.where(np.isnan(x), 1, np.where(np.isinf(x), np.where(x < 0, 2, 9), np.where(x == 0, np.where(
        np.signbit(x), 5, 6), np.where(np.abs(x) < 2.0 ** -126, np.where(x < 0, 4, 7), np.where(x < 0, 3, 8)))))
    lines.append(f"v_cmp_class_f32_e64 s[{sd}:{sd + 1}], v1, v5")
    want.append((sd, ((cls >> c) & 1).astype(bool)))
    m = snippet(lines, {1: a, 2: b, 3: ai, 4: bi, 5: cls})
    for (idx, w), text in zip(want, lines):
        assert _bits_of(m, idx) == _mask(w), text


def test_vcmpx_cndmask_and_exec_masking():
    a, b = u32_bits(), u32_bits()
    x, y = u32_bits(), u32_bits()
    lines = ["v_cmp_gt_u32_e32 vcc, v1, v2", "s_nop 1", "v_cndmask_b32_e32 v6, v3, v4, vcc",
             "s_mov_b64 s[20:21], exec", "v_cmpx_lt_u32_e64 s[22:23], v1, v2", "s_nop 4",
             "v_mov_b32_e32 v7, v3", "s_mov_b64 exec, s[20:21]"]
    m = snippet(lines, {1: a, 2: b, 3: x, 4: y, 6: poison(), 7: poison()})
    gt, lt = a > b, a < b
    assert np.array_equal(m.R[0, 6], np.where(gt, y, x))               # vcc lane set: src1
    assert _bits_of(m, 22) == _mask(lt) and _bits_of(m, 106) == _mask(gt)
    assert np.array_equal(m.R[0, 7], np.where(lt, x, poison()))        # written only where EXEC (= lt)


def _pk_ref(op, a, b, c, op_sel, op_sel_hi, neg_lo, neg_hi):
    def half(v, hi):
        return H(v >> 16) if hi else H(v)
    srcs = (a, b, c)
    lo = [half(srcs[i], op_sel[i]) * (-1 if neg_lo[i] else 1) for i in range(3)]
    hi = [half(srcs[i], op_sel_hi[i]) * (-1 if neg_hi[i] else 1) for i in range(3)]
    f = {"add": lambda p, q, r: p + q, "mul": lambda p, q, r: p * q, "fma": lambda p, q, r: p * q + r,
         "max": lambda p, q, r: fmax_ieee(p, q), "min": lambda p, q, r: fmin_ieee(p, q)}[op]
    return f(*lo), f(*hi)


def test_packed_f16_with_op_sel_and_neg():
    lines, checks = [], []
    regs = {}
    for n, op in enumerate(["add", "mul", "fma", "max", "min"] * 3):
        a, b, c = (f16_bits() | (f16_bits() << 16) for _ in range(3))
        r = 8 + 5 * n
        regs.update({r: a, r + 1: b, r + 2: c, r + 3: poison()})
        sel = [list(RNG.integers(0, 2, 3)) for _ in range(4)]
        if n < 5:
            sel = [[0, 0, 0], [1, 1, 1], [0, 0, 0], [0, 0, 0]]       # defaults
        nsrc = 3 if op == "fma" else 2
        srcs = f"v{r}, v{r + 1}" + (f", v{r + 2}" if nsrc == 3 else "")
        mods = "" if n < 5 else " " + " ".join(f"{k}:[{','.join(str(int(x)) for x in v[:nsrc])}]"
                                                 for k, v in zip(("op_sel", "op_sel_hi", "neg_lo", "neg_hi"), sel))
        lines.append(f"v_pk_{op}_f16 v{r + 3}, {srcs}{mods}")
        checks.append((lines[-1], r + 3, op, _pk_ref(op, a, b, c, *sel)))
    m = snippet(lines + ["s_nop 2"], regs)
    for text, d, op, (lo, hi) in checks:
        got = m.R[0, d]
        for g, w in ((got & 0xFFFF, lo), (got >> 16, hi)):
            wb = to_f16(w)
            gf = g.astype(np.uint16).view(np.float16)
            ok = (g == wb) | (np.isnan(w) & np.isnan(gf))
            if op in ("max", "min"):
                ok |= (gf == 0) & (wb.astype(np.uint16).view(np.float16) == 0)
            assert ok.all(), (text, g[~ok][:3], wb[~ok][:3])


def test_packed_f32():
    a0, a1, b0, b1 = f32_bits(), f32_bits(), f32_bits(), f32_bits()
    c0, c1 = int_f32_bits(), int_f32_bits()
    i0, i1, j0, j1 = (int_f32_bits() for _ in range(4))
    regs = {2: a0, 3: a1, 4: b0, 5: b1, 6: c0, 7: c1, 12: i0, 13: i1, 14: j0, 15: j1,
            20: poison(), 21: poison(), 22: poison(), 23: poison(), 24: poison(), 25: poison()}
    m = snippet(["v_pk_add_f32 v[20:21], v[2:3], v[4:5]",
                 "v_pk_mul_f32 v[22:23], v[2:3], v[4:5] op_sel:[1,0] op_sel_hi:[0,1] neg_lo:[0,1]",
                 "v_pk_fma_f32 v[24:25], v[12:13], v[14:15], v[6:7] neg_hi:[1,0,0]", "s_nop 2"], regs)
    _compare("pk_add lo", "f32", F(a0) + F(b0), m.R[0, 20], None)
    _compare("pk_add hi", "f32", F(a1) + F(b1), m.R[0, 21], None)
    _compare("pk_mul lo", "f32", F(a1) * -F(b0), m.R[0, 22], None)
    _compare("pk_mul hi", "f32", F(a0) * F(b1), m.R[0, 23], None)
    _compare("pk_fma lo", "f32", F(i0) * F(j0) + F(c0), m.R[0, 24], None)
    _compare("pk_fma hi", "f32", -F(i1) * F(j1) + F(c1), m.R[0, 25], None)


SELS = {"BYTE_0": (0, 8), "BYTE_1": (8, 8), "BYTE_2": (16, 8), "BYTE_3": (24, 8), "WORD_0": (0, 16),
        "WORD_1": (16, 16), "DWORD": (0, 32)}


def test_sdwa_selects():
    lines, checks, regs = [], [], {}
    for n in range(12):
        a, b, old = u32_bits(), u32_bits(), u32_bits()
        s0, s1, ds = (list(SELS)[i] for i in RNG.integers(0, 7, 3))
        unused = ["UNUSED_PRESERVE", "UNUSED_PAD", "UNUSED_SEXT"][n % 3]
        sx = n % 4 == 0
        r = 8 + 4 * n
        regs.update({r: a, r + 1: b, r + 2: old})
        src0 = f"sext(v{r})" if sx else f"v{r}"
        lines.append(f"v_add_u32_sdwa v{r + 2}, {src0}, v{r + 1} dst_sel:{ds} dst_unused:{unused} "
                     f"src0_sel:{s0} src1_sel:{s1}")

        def sel(v, name, signed):
            off, nb = SELS[name]
            x = (U(v) >> off) & ((1 << nb) - 1)
            return sext(x, nb) if signed and nb < 32 else x
        res = (sel(a, s0, sx) + sel(b, s1, False)) & M32
        off, nb = SELS[ds]
        field = (res & ((1 << nb) - 1)) << off
        if nb == 32:
            want = res
        elif unused == "UNUSED_PRESERVE":
            want = field | (U(old) & ~(((1 << nb) - 1) << off) & M32)
        elif unused == "UNUSED_SEXT":
            top = off + nb
            signbit = (field >> (top - 1)) & 1
            want = field | np.where(signbit == 1, (M32 << top) & M32, 0) if top < 32 else field
        else:
            want = field
        checks.append((lines[-1], r + 2, want))
    m = snippet(lines + ["s_nop 1"], regs)
    for text, d, want in checks:
        assert np.array_equal(m.R[0, d], u32(want)), text


def _dpp_src(ctrl):
    r = L % 16
    if ctrl.startswith("row_ror:"):
        n = int(ctrl.split(":")[1])
        return 16 * (L // 16) + (r - n) % 16            # rotate right within the row: lane gets lane-n
    return {"row_mirror": 16 * (L // 16) + 15 - r, "row_half_mirror": 8 * (L // 8) + 7 - L % 8,
            "row_bcast:15": np.where(L >= 16, 16 * (L // 16) - 1, -1), "row_bcast:31": np.where(L >= 32, 31, -1),
            "wave_shl:1": np.where(L < 63, L + 1, -1), "wave_shr:1": np.where(L > 0, L - 1, -1),
            "wave_rol:1": (L + 1) % 64, "wave_ror:1": (L - 1) % 64}[ctrl]


def test_dpp_controls_masks_bound_ctrl():
    ctrls = ["row_ror:1", "row_ror:7", "row_ror:15", "row_mirror", "row_half_mirror", "row_bcast:15", "row_bcast:31",
             "wave_shl:1", "wave_shr:1", "wave_rol:1", "wave_ror:1"]
    lines, checks, regs = [], [], {}
    ex = RNG.random(64) < 0.8
    for n, ctrl in enumerate(ctrls * 2):
        x, old, y = u32_bits(), u32_bits(), u32_bits()
        rm, bm = (int(RNG.integers(1, 16)), int(RNG.integers(1, 16))) if n >= len(ctrls) else (15, 15)
        bc = n % 2 == 1
        r = 8 + 3 * n
        regs.update({r: x, r + 1: old, r + 2: y})
        lines.append(f"v_add_u32_dpp v{r + 1}, v{r}, v{r + 2} {ctrl} row_mask:0x{rm:x} bank_mask:0x{bm:x}"
                     + (" bound_ctrl:1" if bc else ""))
        src = _dpp_src(ctrl)
        valid = (src >= 0) & ex[np.maximum(src, 0)]       # the source lane exists and is active
        enabled = (((rm >> (L // 16)) & 1) & ((bm >> ((L % 16) // 4)) & 1)).astype(bool) & ex
        val = np.where(valid, U(x)[np.maximum(src, 0)], 0)
        # invalid source: bound_ctrl -> reads 0; otherwise the lane is not written
        write = enabled & (valid | bc)
        want = np.where(write, (val + U(y)) & M32, U(old))
        checks.append((lines[-1], r + 1, want))
    m = snippet(lines, regs, exec_mask=ex)
    for text, d, want in checks:
        assert np.array_equal(m.R[0, d], u32(want)), text


def test_readlane_writelane_readfirstlane():
    x = u32_bits()
    ex = RNG.random(64) < 0.5
    ex[:3] = False
    ln = int(RNG.integers(0, 64))
    m = snippet(["v_readlane_b32 s10, v1, s12", "v_readfirstlane_b32 s11, v1", "v_writelane_b32 v2, s13, s12",
                 "v_readlane_b32 s14, v1, 70"],
                {1: x, 2: poison()}, sregs={12: ln, 13: 0x12345678}, exec_mask=ex)
    first = int(np.argmax(ex))
    assert m.S[0, 10] == x[ln] and m.S[0, 11] == x[first] and m.S[0, 14] == x[70 % 64]
    assert np.array_equal(m.R[0, 2], np.where(L == ln, 0x12345678, poison()))     # EXEC ignored (ISA)
