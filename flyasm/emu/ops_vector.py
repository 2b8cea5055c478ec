"""Vector ALU semantics (CDNA4 ISA ch.6 and 12): VOP1/VOP2/VOP3/VOP3P/VOPC, DPP, SDWA, lane ops.

Most instructions are one row of VALU below: (dst type, source types, fn on typed numpy arrays).
The generic compiler decodes sources by type (inline constants typed per operand, op_sel halves),
applies VOP3 neg/abs, DPP/SDWA, clamp/omod, and writes under EXEC.
"""
from __future__ import annotations

import re

import numpy as np

from ..isa.operands import Imm, Mod, Reg
from .machine import (LANES, S_EXEC, base_of, f32_to_bf16_rne, not_emulated, r_index, s_index, semantic, vsrc)
from .memory import EmuError

F32, U32, I32 = np.float32, np.uint32, np.int32


def flush_denorm(x):
    x = x.astype(np.float32)
    return np.where(np.abs(x) < np.float32(np.finfo(np.float32).tiny), np.copysign(np.float32(0), x), x)


def fma32(a, b, c):
    # a*b is exact in float64; one more rounding of the sum to float32 (double rounding is possible
    # only in rare ties - noted as a fidelity limit).
    return (a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)).astype(np.float32)


def fma64(a, b, c):
    """V_FMA_F64: a*b+c with one rounding. Finite lanes are computed exactly (Fractions; Python's
    int/int true division rounds correctly to nearest even), the rest by float64 (inf/NaN rules)."""
    a, b, c = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(b, np.float64), np.asarray(c, np.float64))
    with np.errstate(all="ignore"):
        out = a * b + c
    from fractions import Fraction
    fin = np.isfinite(a) & np.isfinite(b) & np.isfinite(c)
    for i in zip(*np.nonzero(fin)):
        x, y, z = float(a[i]), float(b[i]), float(c[i])
        exact = Fraction(x) * Fraction(y) + Fraction(z)
        if exact == 0:                 # sign of an exact zero: as IEEE (x*y and z signs, round-to-nearest)
            out[i] = (x * y) + z if (x * y) != 0 or z != 0 else np.float64(x * y) + np.float64(z)
            continue
        try:
            out[i] = exact.numerator / exact.denominator
        except OverflowError:
            out[i] = np.inf if exact > 0 else -np.inf
    return out


def _u(x):
    return x.astype(np.uint64) & np.uint64(0xFFFFFFFF)


def bfe_u(v, off, width):
    off, width = _u(off) & np.uint64(31), _u(width) & np.uint64(31)
    return ((_u(v) >> off) & ((np.uint64(1) << width) - np.uint64(1))).astype(U32)


def bfe_i(v, off, width):
    u = bfe_u(v, off, width).astype(np.int64)
    wd = (_u(width) & np.uint64(31)).astype(np.int64)
    sign = (u >> np.maximum(wd - 1, 0)) & 1
    return np.where((wd > 0) & (sign == 1), u - (np.int64(1) << wd), u).astype(np.int64).astype(np.int32)


def perm_b32(s0, s1, sel):
    """V_PERM_B32: byte select from {S0, S1} (S1 = bytes 0-3) by the bytes of S2."""
    x = (_u(s0) << np.uint64(32)) | _u(s1)
    out = np.zeros(np.broadcast(s0, s1, sel).shape, np.uint64)
    for k in range(4):
        b = (_u(sel) >> np.uint64(8 * k)) & np.uint64(0xFF)
        byte = (x >> (np.minimum(b, np.uint64(7)) * np.uint64(8))) & np.uint64(0xFF)
        sgn = lambda v, bit: np.where((v >> np.uint64(bit)) & np.uint64(1), np.uint64(0xFF), np.uint64(0))
        byte = np.where(b == 8, sgn(_u(s1), 15), byte)
        byte = np.where(b == 9, sgn(_u(s1), 31), byte)
        byte = np.where(b == 10, sgn(_u(s0), 15), byte)
        byte = np.where(b == 11, sgn(_u(s0), 31), byte)
        byte = np.where(b == 12, np.uint64(0), byte)
        byte = np.where(b >= 13, np.uint64(0xFF), byte)
        out |= byte << np.uint64(8 * k)
    return out.astype(U32)


def rcp32(a):
    return flush_denorm(np.float32(1) / flush_denorm(a))


def pk_u8(a, sel, c):
    """V_CVT_PK_U8_F32: byte S1[1:0] of S2 := u8(S0), the other bytes kept. u8 saturates to [0, 255],
    NaN -> 0; rounding to nearest even is inferred (the ISA text says only "convert")."""
    sh = (sel & U32(3)) * U32(8)
    with np.errstate(invalid="ignore"):
        v = np.clip(np.rint(np.nan_to_num(a.astype(np.float64), nan=0.0)), 0, 255).astype(U32)
    return (c & ~(U32(0xFF) << sh)) | (v << sh)


def med3(a, b, c):
    return np.maximum(np.minimum(a, b), np.minimum(np.maximum(a, b), c))


def cvt_f32_to_i(x, lo, hi, dt):
    x = np.nan_to_num(x.astype(np.float64), nan=0.0)
    return np.clip(np.trunc(x), lo, hi).astype(dt)


def mbcnt(src, add, hi):
    # count set bits of src among lanes below this lane (lo: lanes 0-31, hi: lanes 32-63)
    lane = LANES - (32 if hi else 0)
    maskbits = np.where(lane <= 0, 0, np.where(lane >= 32, 0xFFFFFFFF, (1 << np.clip(lane, 0, 31)) - 1)).astype(U32)
    return (np.bitwise_count(src & maskbits).astype(U32) + add).astype(U32)


# type codes: f32 i32 u32 b32, f16 bf16 u16 i16, f64 u64 i64 b64
VALU = {
    "v_mov_b32": ("b32", ("b32",), lambda a: a),
    "v_mov_b64": ("b64", ("b64",), lambda a: a),
    "v_not_b32": ("b32", ("b32",), lambda a: ~a),
    "v_bfrev_b32": ("b32", ("b32",), lambda a: np.unpackbits(
        a.astype(U32)[..., None].view(np.uint8), axis=-1, bitorder="little")[..., ::-1].copy().__array__()
        .reshape(a.shape + (32,)) if False else _brev(a)),
    "v_add_f32": ("f32", ("f32", "f32"), lambda a, b: a + b),
    "v_sub_f32": ("f32", ("f32", "f32"), lambda a, b: a - b),
    "v_subrev_f32": ("f32", ("f32", "f32"), lambda a, b: b - a),
    "v_mul_f32": ("f32", ("f32", "f32"), lambda a, b: a * b),
    "v_max_f32": ("f32", ("f32", "f32"), np.fmax),
    "v_min_f32": ("f32", ("f32", "f32"), np.fmin),
    "v_fma_f32": ("f32", ("f32", "f32", "f32"), fma32),
    "v_max3_f32": ("f32", ("f32",) * 3, lambda a, b, c: np.fmax(np.fmax(a, b), c)),
    "v_min3_f32": ("f32", ("f32",) * 3, lambda a, b, c: np.fmin(np.fmin(a, b), c)),
    "v_med3_f32": ("f32", ("f32",) * 3, med3),
    "v_exp_f32": ("f32", ("f32",), lambda a: flush_denorm(np.exp2(a))),
    # TRANS ops (ISA: 1 ULP, "denormals are flushed"; emulated as inputs and results flushed to
    # signed zero, as LLVM's denormal-scaling expansions of these instructions assume)
    "v_log_f32": ("f32", ("f32",), lambda a: np.log2(flush_denorm(a))),
    "v_rcp_f32": ("f32", ("f32",), rcp32),
    # ISA 12.10: as V_RCP_F32, but a zero input raises the integer DIV0 trap flag (not modelled)
    "v_rcp_iflag_f32": ("f32", ("f32",), rcp32),
    "v_rsq_f32": ("f32", ("f32",), lambda a: flush_denorm(np.float32(1) / np.sqrt(flush_denorm(a)))),
    "v_sqrt_f32": ("f32", ("f32",), lambda a: flush_denorm(np.sqrt(flush_denorm(a)))),
    "v_floor_f32": ("f32", ("f32",), np.floor),
    "v_ceil_f32": ("f32", ("f32",), np.ceil),
    "v_trunc_f32": ("f32", ("f32",), np.trunc),
    "v_rndne_f32": ("f32", ("f32",), np.rint),
    "v_fract_f32": ("f32", ("f32",), lambda a: np.minimum(a - np.floor(a), np.float32(0.99999994))),
    "v_ldexp_f32": ("f32", ("f32", "i32"), lambda a, b: np.ldexp(a, np.clip(b, -300, 300)).astype(F32)),
    "v_cvt_f32_u32": ("f32", ("u32",), lambda a: a.astype(F32)),
    "v_cvt_f32_i32": ("f32", ("i32",), lambda a: a.astype(F32)),
    "v_cvt_u32_f32": ("u32", ("f32",), lambda a: cvt_f32_to_i(a, 0, 4294967295, U32)),
    "v_cvt_i32_f32": ("i32", ("f32",), lambda a: cvt_f32_to_i(a, -2147483648, 2147483647, I32)),
    "v_cvt_f16_f32": ("f16", ("f32",), lambda a: a.astype(np.float16)),
    "v_cvt_f32_f16": ("f32", ("f16",), lambda a: a.astype(F32)),
    "v_cvt_f32_bf16": ("f32", ("bf16",), lambda a: a),
    "v_cvt_f64_f32": ("f64", ("f32",), lambda a: a.astype(np.float64)),
    "v_cvt_f32_f64": ("f32", ("f64",), lambda a: a.astype(F32)),
    "v_cvt_pk_bf16_f32": ("b32", ("f32", "f32"), lambda a, b: f32_to_bf16_rne(a) | (f32_to_bf16_rne(b) << 16)),
    "v_cvt_pk_f16_f32": ("b32", ("f32", "f32"), lambda a, b: _h(a) | (_h(b) << 16)),
    "v_cvt_pk_u8_f32": ("b32", ("f32", "u32", "u32"), pk_u8),
    "v_cvt_pkrtz_f16_f32": ("b32", ("f32", "f32"), None),
    "v_add_u32": ("u32", ("u32", "u32"), lambda a, b: a + b),
    "v_sub_u32": ("u32", ("u32", "u32"), lambda a, b: a - b),
    "v_subrev_u32": ("u32", ("u32", "u32"), lambda a, b: b - a),
    "v_add_i32": ("i32", ("i32", "i32"), lambda a, b: a + b),
    "v_sub_i32": ("i32", ("i32", "i32"), lambda a, b: a - b),
    "v_mul_lo_u32": ("u32", ("u32", "u32"), lambda a, b: a * b),
    "v_mul_hi_u32": ("u32", ("u32", "u32"), lambda a, b: ((_u(a) * _u(b)) >> np.uint64(32)).astype(U32)),
    "v_mul_hi_i32": ("i32", ("i32", "i32"), lambda a, b: ((a.astype(np.int64) * b) >> 32).astype(I32)),
    "v_mul_u32_u24": ("u32", ("u32", "u32"), lambda a, b: (a & 0xFFFFFF) * (b & 0xFFFFFF)),
    "v_mul_hi_u32_u24": ("u32", ("u32", "u32"),
                         lambda a, b: ((_u(a & 0xFFFFFF) * _u(b & 0xFFFFFF)) >> np.uint64(32)).astype(U32)),
    "v_mul_i32_i24": ("i32", ("i32", "i32"), lambda a, b: _s24(a) * _s24(b)),
    "v_mad_u32_u24": ("u32", ("u32",) * 3, lambda a, b, c: (a & 0xFFFFFF) * (b & 0xFFFFFF) + c),
    "v_mad_i32_i24": ("i32", ("i32",) * 3, lambda a, b, c: _s24(a) * _s24(b) + c),
    "v_lshlrev_b32": ("b32", ("u32", "u32"), lambda a, b: b << (a & 31)),
    "v_lshrrev_b32": ("b32", ("u32", "u32"), lambda a, b: b >> (a & 31)),
    "v_ashrrev_i32": ("i32", ("u32", "i32"), lambda a, b: b >> (a & 31).astype(I32)),
    "v_lshlrev_b64": ("b64", ("u32", "b64"), lambda a, b: b << (a & 63).astype(np.uint64)),
    "v_lshrrev_b64": ("b64", ("u32", "b64"), lambda a, b: b >> (a & 63).astype(np.uint64)),
    "v_ashrrev_i64": ("i64", ("u32", "i64"), lambda a, b: b >> (a & 63).astype(np.int64)),
    "v_lshl_add_u64": ("b64", ("b64", "u32", "b64"), lambda a, b, c: (a << (b & 7).astype(np.uint64)) + c),
    "v_and_b32": ("b32", ("b32", "b32"), lambda a, b: a & b),
    "v_or_b32": ("b32", ("b32", "b32"), lambda a, b: a | b),
    "v_xor_b32": ("b32", ("b32", "b32"), lambda a, b: a ^ b),
    "v_or3_b32": ("b32", ("b32",) * 3, lambda a, b, c: a | b | c),
    "v_and_or_b32": ("b32", ("b32",) * 3, lambda a, b, c: (a & b) | c),
    "v_lshl_or_b32": ("b32", ("u32",) * 3, lambda a, b, c: (a << (b & 31)) | c),
    "v_lshl_add_u32": ("u32", ("u32",) * 3, lambda a, b, c: (a << (b & 31)) + c),
    "v_add_lshl_u32": ("u32", ("u32",) * 3, lambda a, b, c: (a + b) << (c & 31)),
    "v_xad_u32": ("u32", ("u32",) * 3, lambda a, b, c: (a ^ b) + c),
    "v_add3_u32": ("u32", ("u32",) * 3, lambda a, b, c: a + b + c),
    "v_max_u32": ("u32", ("u32", "u32"), np.maximum),
    "v_min_u32": ("u32", ("u32", "u32"), np.minimum),
    "v_max_i32": ("i32", ("i32", "i32"), np.maximum),
    "v_min_i32": ("i32", ("i32", "i32"), np.minimum),
    "v_max3_u32": ("u32", ("u32",) * 3, lambda a, b, c: np.maximum(np.maximum(a, b), c)),
    "v_min3_u32": ("u32", ("u32",) * 3, lambda a, b, c: np.minimum(np.minimum(a, b), c)),
    "v_max3_i32": ("i32", ("i32",) * 3, lambda a, b, c: np.maximum(np.maximum(a, b), c)),
    "v_min3_i32": ("i32", ("i32",) * 3, lambda a, b, c: np.minimum(np.minimum(a, b), c)),
    "v_med3_i32": ("i32", ("i32",) * 3, med3),
    "v_med3_u32": ("u32", ("u32",) * 3, med3),
    "v_bfe_u32": ("u32", ("u32",) * 3, bfe_u),
    "v_bfe_i32": ("i32", ("u32",) * 3, bfe_i),
    "v_bfi_b32": ("b32", ("b32",) * 3, lambda a, b, c: (a & b) | (~a & c)),
    "v_alignbit_b32": ("b32", ("u32",) * 3,
                       lambda a, b, c: (((_u(a) << np.uint64(32)) | _u(b)) >> (_u(c) & np.uint64(31))).astype(U32)),
    "v_alignbyte_b32": ("b32", ("u32",) * 3,
                        lambda a, b, c: (((_u(a) << np.uint64(32)) | _u(b)) >> ((_u(c) & np.uint64(3)) * np.uint64(8))).astype(U32)),
    "v_perm_b32": ("b32", ("u32",) * 3, perm_b32),
    "v_bcnt_u32_b32": ("u32", ("u32", "u32"), lambda a, b: np.bitwise_count(a).astype(U32) + b),
    "v_mbcnt_lo_u32_b32": ("u32", ("u32", "u32"), lambda a, b: mbcnt(a, b, False)),
    "v_mbcnt_hi_u32_b32": ("u32", ("u32", "u32"), lambda a, b: mbcnt(a, b, True)),
    "v_add_f16": ("f16", ("f16", "f16"), lambda a, b: a + b),
    "v_mul_f16": ("f16", ("f16", "f16"), lambda a, b: a * b),
    "v_sub_f16": ("f16", ("f16", "f16"), lambda a, b: a - b),
    "v_max_f16": ("f16", ("f16", "f16"), np.fmax),
    "v_min_f16": ("f16", ("f16", "f16"), np.fmin),
    "v_fma_f16": ("f16", ("f16",) * 3, lambda a, b, c: (a.astype(np.float64) * b + c).astype(np.float16)),
    "v_add_f64": ("f64", ("f64", "f64"), lambda a, b: a + b),
    "v_mul_f64": ("f64", ("f64", "f64"), lambda a, b: a * b),
    "v_fma_f64": ("f64", ("f64",) * 3, lambda a, b, c: fma64(a, b, c)),
}
# accumulate forms: D = fn(S0, S1, D)
VALU["v_fmac_f32"] = ("f32", ("f32", "f32", "f32"), fma32)
ACCUM = {"v_fmac_f32"}      # gfx950 has no v_mac_f32 / v_mad_f32 / v_fmac_f16 (llvm-mc: not supported)
VALU["v_accvgpr_read_b32"] = VALU["v_accvgpr_write_b32"] = VALU["v_accvgpr_mov_b32"] = VALU["v_mov_b32"]
VALU["v_readfirstlane_b32"] = None


def _brev(a):
    x = np.ascontiguousarray(a.astype(U32))
    b = np.unpackbits(x[..., None].view(np.uint8), axis=-1, bitorder="little")[..., ::-1]
    return np.packbits(b, axis=-1, bitorder="little").view(U32)[..., 0]


VALU["v_bfrev_b32"] = ("b32", ("b32",), _brev)


def bitop3(table: int):
    """V_BITOP3_B32 with truth table `table`: result bit = table bit (S0 << 2 | S1 << 1 | S2) of the
    sources' bits (LLVM 22 lowers (a & ~b) ^ c to bitop3:0x9c with S0 = a, S1 = c, S2 = b)."""
    def f(a, b, c):
        r = np.zeros(np.broadcast(a, b, c).shape, U32)
        for i in range(8):
            if table >> i & 1:
                r |= (a if i & 4 else ~a) & (b if i & 2 else ~b) & (c if i & 1 else ~c)
        return r
    return f


VALU["v_bitop3_b32"] = ("b32", ("b32",) * 3, bitop3(0))
# ops whose function is made from a modifier's value (c_valu makes it per instruction): name -> (modifier, maker)
BY_MODIFIER = {"v_bitop3_b32": ("bitop3", bitop3)}


def _h(x):
    return x.astype(np.float16).view(np.uint16).astype(U32)


def _s24(a):
    return ((a.astype(np.int64) & 0xFFFFFF) ^ 0x800000) - 0x800000


# ---- typed operands ---------------------------------------------------------------------------
W64 = {"f64", "u64", "i64", "b64"}
W16 = {"f16", "bf16", "u16", "i16", "b16"}


def decode(raw, typ, hi=False):
    if typ in W16:
        h = (raw >> 16) if hi else raw
        h = (h & 0xFFFF).astype(np.uint16)
        if typ == "f16":
            return h.view(np.float16)
        if typ == "bf16":
            return (h.astype(U32) << 16).view(F32)
        return h.view(np.int16) if typ == "i16" else h
    if typ in W64:
        raw = raw.astype(np.uint64)
        return raw.view(np.float64) if typ == "f64" else (raw.view(np.int64) if typ == "i64" else raw)
    raw = raw.astype(U32)
    return raw.view(F32) if typ == "f32" else (raw.view(I32) if typ == "i32" else raw)


def encode(val, typ):
    if typ in W16:
        if typ == "f16":
            return val.astype(np.float16).view(np.uint16).astype(U32)
        return val.astype(np.int64).astype(U32) & 0xFFFF
    if typ in W64:
        return val.astype(np.float64).view(np.uint64) if typ == "f64" else val.astype(np.int64).view(np.uint64) \
            if val.dtype.kind == "i" else val.astype(np.uint64)
    if typ == "f32":
        return val.astype(F32).view(U32)
    if val.dtype.kind == "f":
        return val.astype(F32).view(U32)
    return val.astype(np.int64).astype(U32) if val.dtype.kind == "i" else val.astype(U32)


def float_mods(x, op, typ, neg_override=None):
    if not isinstance(op, Mod) or typ not in ("f32", "f16", "f64", "bf16"):
        return x
    if op.abs:
        x = np.abs(x)
    if op.neg:
        x = -x
    return x


# ---- DPP (CDNA4 ISA 12.3.2: DPP16 controls on wave64) --------------------------------------------
def dpp_source_lanes(mods) -> np.ndarray:
    """Source lane of each lane for the DPP control in mods; -1 where the source is invalid."""
    L = LANES
    r = L % 16
    if "quad_perm" in mods:
        q = np.array(mods["quad_perm"])
        return 4 * (L // 4) + q[L % 4]
    if "row_shl" in mods:
        n = mods["row_shl"]
        return np.where(r + n < 16, L + n, -1)
    if "row_shr" in mods:
        n = mods["row_shr"]
        return np.where(r - n >= 0, L - n, -1)
    if "row_ror" in mods:
        n = mods["row_ror"]
        return 16 * (L // 16) + (r - n) % 16
    if mods.get("row_mirror"):
        return 16 * (L // 16) + 15 - r
    if mods.get("row_half_mirror"):
        return 8 * (L // 8) + 7 - L % 8
    if "row_bcast" in mods:
        n = mods["row_bcast"]
        if n == 15:   # lane 15 of each row feeds the whole next row
            return np.where(L >= 16, 16 * (L // 16) - 1, -1)
        if n == 31:   # lane 31 feeds rows 2 and 3
            return np.where(L >= 32, 31, -1)
    if "wave_shl" in mods:
        return np.where(L < 63, L + 1, -1)
    if "wave_shr" in mods:
        return np.where(L > 0, L - 1, -1)
    if "wave_rol" in mods:
        return (L + 1) % 64
    if "wave_ror" in mods:
        return (L - 1) % 64
    raise EmuError(f"not emulated: DPP control {mods}")


def dpp_compile(inst):
    mods = inst.modifiers
    src = dpp_source_lanes(mods)
    valid = src >= 0
    srcc = np.where(valid, src, 0)
    row_mask, bank_mask = mods.get("row_mask", 0xF), mods.get("bank_mask", 0xF)
    write = (((row_mask >> (LANES // 16)) & 1) & ((bank_mask >> ((LANES % 16) // 4)) & 1)).astype(bool)
    bound_zero = bool(mods.get("bound_ctrl"))   # BOUND_CTRL set: invalid/disabled source reads 0

    def apply(m, w, raw, execm):
        """Permute src0 lanes; returns (value, extra write mask)."""
        v = raw[:, srcc]
        ok = valid[None, :] & execm[:, srcc]
        if bound_zero:
            return np.where(ok, v, 0).astype(raw.dtype), write[None, :]
        return v, write[None, :] & ok
    return apply


SEL = {"BYTE_0": (0, 8), "BYTE_1": (8, 8), "BYTE_2": (16, 8), "BYTE_3": (24, 8), "WORD_0": (0, 16),
       "WORD_1": (16, 16), "DWORD": (0, 32)}


def sdwa_src(raw, sel, sext):
    off, n = SEL[sel]
    if n == 32:
        return raw
    v = (raw >> off) & ((1 << n) - 1)
    if sext:
        v = ((v.astype(np.int64) ^ (1 << (n - 1))) - (1 << (n - 1))).astype(np.int64).astype(U32)
    return v.astype(U32)


# ---- the generic compiler -------------------------------------------------------------------
def _opsel(mods, i):
    s = mods.get("op_sel")
    return bool(s[i]) if s and i < len(s) else False


@semantic(*[k for k, v in VALU.items() if v is not None and v[2] is not None])
def c_valu(inst, ctx):
    dt, sts, fn = VALU[inst.name]
    ops = list(inst.operands)
    mods = inst.modifiers
    if inst.name in BY_MODIFIER:
        mod, make = BY_MODIFIER[inst.name]
        fn = make(int(mods.get(mod) or 0))
    dst = ops[0]
    srcs = ops[1:]
    if inst.name in ACCUM:
        srcs = srcs + [dst]
    if len(srcs) != len(sts):
        raise not_emulated(inst, f"expected {len(sts)} sources")
    if not (isinstance(dst, Reg) and dst.file in "va"):
        raise not_emulated(inst, "destination")
    d = r_index(dst)
    nd = 2 if dt in W64 else 1
    getters = [vsrc(op, t, 2 if t in W64 else 1) for op, t in zip(srcs, sts)]
    hi = [_opsel(mods, i) for i in range(len(srcs))]
    # In asm, op_sel lists one bit per source and then the destination's: the last element is dst.
    dst_hi = _opsel(mods, len(srcs)) if dt in W16 else False
    clamp, omod = mods.get("clamp"), (mods.get("mul") or 1) / (mods.get("div") or 1)
    dpp = dpp_compile(inst) if inst.is_dpp else None
    sdwa = inst.is_sdwa
    if sdwa:
        s_sels = [mods.get("src0_sel", "DWORD"), mods.get("src1_sel", "DWORD")]
        s_sext = [isinstance(o, Mod) and o.sext for o in srcs]
        d_off, d_n = SEL[mods.get("dst_sel", "DWORD")]
        d_unused = mods.get("dst_unused", "UNUSED_PRESERVE")
    if inst.name in ("v_accvgpr_read_b32", "v_accvgpr_write_b32", "v_accvgpr_mov_b32"):
        mods = {}

    def run(m, w):
        execm = m.execm[w]
        wmask = execm
        args = []
        for i, (g, t, op) in enumerate(zip(getters, sts, srcs)):
            raw = g(m, w)
            if i == 0 and dpp is not None:
                raw, extra = dpp(m, w, np.broadcast_to(raw, (raw.shape[0], 64)), execm)
                wmask = wmask & extra
            if sdwa and i < 2:
                raw = sdwa_src(raw, s_sels[i], s_sext[i])
            args.append(float_mods(decode(raw, t, hi[i]), op, t))
        with np.errstate(all="ignore"):
            r = fn(*args)
            if omod != 1:
                r = r * r.dtype.type(omod)
            if clamp and r.dtype.kind == "f":
                r = np.clip(r, 0, 1)
        bits = encode(np.asarray(r), dt)
        if nd == 2:
            bits = np.broadcast_to(bits, (bits.shape[0], 64))
            m.vwrite(w, d, (bits & np.uint64(0xFFFFFFFF)).astype(U32), wmask)
            m.vwrite(w, d + 1, (bits >> np.uint64(32)).astype(U32), wmask)
            return
        if dst_hi:
            bits = (m.R[w, d] & U32(0xFFFF)) | (bits << 16)
        if sdwa and d_n != 32:
            bits = (bits & U32((1 << d_n) - 1)) << d_off
            if d_unused == "UNUSED_PRESERVE":
                keep = U32(0xFFFFFFFF ^ (((1 << d_n) - 1) << d_off))
                bits = bits | (m.R[w, d] & keep)
            elif d_unused == "UNUSED_SEXT" and d_off + d_n < 32:
                sign = (bits >> (d_off + d_n - 1)) & 1
                bits = bits | np.where(sign == 1, U32(0xFFFFFFFF << (d_off + d_n) & 0xFFFFFFFF), U32(0))
        m.vwrite(w, d, bits, wmask)
    return run


# ---- VOPC ---------------------------------------------------------------------------------------
CMP = {
    "f": lambda a, b: np.zeros(np.broadcast(a, b).shape, bool), "t": lambda a, b: np.ones(np.broadcast(a, b).shape, bool),
    "tru": lambda a, b: np.ones(np.broadcast(a, b).shape, bool),
    "lt": np.less, "eq": np.equal, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
    "ne": np.not_equal, "lg": lambda a, b: (a < b) | (a > b),
    "o": lambda a, b: ~(np.isnan(a) | np.isnan(b)), "u": lambda a, b: np.isnan(a) | np.isnan(b),
    "nge": lambda a, b: ~(a >= b), "nlg": lambda a, b: ~((a < b) | (a > b)), "ngt": lambda a, b: ~(a > b),
    "nle": lambda a, b: ~(a <= b), "neq": lambda a, b: ~(a == b), "nlt": lambda a, b: ~(a < b),
}
_VOPC_RE = re.compile(r"^v_cmp(x?)_([a-z]+)_([fiu]\d+)$")


def cmp_class(a, mask):
    """V_CMP_CLASS: bit test of the IEEE class of a (0 sNaN, 1 qNaN, 2 -inf, 3 -norm, 4 -denorm, 5 -0,
    6 +0, 7 +denorm, 8 +norm, 9 +inf), from the bit fields of a's own format (f16/f32/f64)."""
    a = np.asarray(a)
    nb, ne, nm = {2: (16, 5, 10), 4: (32, 8, 23), 8: (64, 11, 52)}[a.dtype.itemsize]
    b = a.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize]).astype(np.uint64)
    neg = (b >> np.uint64(nb - 1)) != 0
    ex = (b >> np.uint64(nm)) & np.uint64((1 << ne) - 1)
    fr = b & np.uint64((1 << nm) - 1)
    quiet = (fr >> np.uint64(nm - 1)) != 0
    cls = np.where(ex == (1 << ne) - 1, np.where(fr == 0, np.where(neg, 2, 9), np.where(quiet, 1, 0)),
                   np.where(ex == 0, np.where(fr == 0, np.where(neg, 5, 6), np.where(neg, 4, 7)),
                            np.where(neg, 3, 8)))
    return ((mask.astype(np.int64) >> cls) & 1).astype(bool)


def _vopc_names():
    out = []
    from ..isa import tables
    for n in tables.all_mnemonics():
        info = tables.lookup(n).info
        c = info.get("canonical", n)
        mm = _VOPC_RE.match(c)
        if mm and (mm.group(2) in CMP or mm.group(2) == "class") and mm.group(3) in ("f32", "f16", "f64", "i32", "u32",
                                                                                      "i64", "u64", "i16", "u16"):
            out.append(c)
    return out


@semantic(*_vopc_names())
def c_vopc(inst, ctx):
    x, op, t = _VOPC_RE.match(inst.name).groups()
    fn = cmp_class if op == "class" else CMP[op]
    sdst, a, b = inst.operands
    ta, tb = t, ("u32" if op == "class" else t)
    ga, gb = vsrc(a, ta, 2 if ta in W64 else 1), vsrc(b, tb, 2 if tb in W64 else 1)
    d = s_index(sdst)
    dpp = dpp_compile(inst) if inst.is_dpp else None
    if inst.is_sdwa:
        raise not_emulated(inst, "SDWA compare")

    def run(m, w):
        execm = m.execm[w]
        ra = ga(m, w)
        if dpp is not None:
            ra, _ = dpp(m, w, np.broadcast_to(ra, (ra.shape[0], 64)), execm)
        with np.errstate(all="ignore"):
            r = fn(float_mods(decode(ra, ta, _opsel(inst.modifiers, 0)), a, ta),
                   float_mods(decode(gb(m, w), tb, _opsel(inst.modifiers, 1)), b, tb))
        r = np.broadcast_to(r, execm.shape) & execm     # inactive lanes write 0
        bits = m.pack_mask(np.ascontiguousarray(r))
        m.swrite(w, d, bits, 2)
        if x:
            m.swrite(w, S_EXEC, bits, 2)
    return run


@semantic("v_cndmask_b32")
def c_cndmask(inst, ctx):
    dst, a, b, c = inst.operands
    ga, gb = vsrc(a, "f32"), vsrc(b, "f32")
    ci, d = s_index(c), r_index(dst)
    dpp = dpp_compile(inst) if inst.is_dpp else None

    def run(m, w):
        execm = m.execm[w]
        wm = execm
        ra = ga(m, w)
        if dpp is not None:
            ra, extra = dpp(m, w, np.broadcast_to(ra, (ra.shape[0], 64)), execm)
            wm = wm & extra
        va = float_mods(decode(ra, "f32"), a, "f32").view(U32)
        vb = float_mods(decode(gb(m, w), "f32"), b, "f32").view(U32)
        m.vwrite(w, d, np.where(m.lane_mask(w, ci), vb, va), wm)
    return run


CARRY = {  # name: (fn(a, b, cin) -> 64-bit result; carry-out = bit 32 (add) or borrow)
    "v_add_co_u32": (False, lambda a, b, c: a + b),
    "v_addc_co_u32": (True, lambda a, b, c: a + b + c),
    "v_sub_co_u32": (False, lambda a, b, c: a - b),
    "v_subb_co_u32": (True, lambda a, b, c: a - b - c),
    "v_subrev_co_u32": (False, lambda a, b, c: b - a),
    "v_subbrev_co_u32": (True, lambda a, b, c: b - a - c),
}


@semantic(*CARRY)
def c_carry(inst, ctx):
    has_cin, fn = CARRY[inst.name]
    ops = inst.operands
    dst, cout, a, b = ops[:4]
    cin = s_index(ops[4]) if has_cin else None
    ga, gb = vsrc(a), vsrc(b)
    d, co = r_index(dst), s_index(cout)
    if inst.is_dpp or inst.is_sdwa:
        raise not_emulated(inst, "DPP/SDWA carry op")

    def run(m, w):
        execm = m.execm[w]
        c = m.lane_mask(w, cin).astype(np.int64) if has_cin else 0
        r = fn(ga(m, w).astype(np.int64), gb(m, w).astype(np.int64), c)
        carry = (r < 0) | (r > 0xFFFFFFFF)
        m.vwrite(w, d, (r & 0xFFFFFFFF).astype(U32), execm)
        m.swrite(w, co, m.pack_mask(np.ascontiguousarray(np.broadcast_to(carry, execm.shape) & execm)), 2)
    return run


@semantic("v_mad_u64_u32", "v_mad_i64_i32")
def c_mad64(inst, ctx):
    dst, cout, a, b, c = inst.operands
    signed = inst.name == "v_mad_i64_i32"
    ga, gb, gc = vsrc(a), vsrc(b), vsrc(c, "b64", 2)
    d, co = r_index(dst), s_index(cout)

    def run(m, w):
        execm = m.execm[w]
        if signed:
            p = ga(m, w).view(I32).astype(object) * gb(m, w).view(I32).astype(object)
            r = p + gc(m, w).view(np.int64).astype(object)
            carry = (r < -(1 << 63)) | (r >= (1 << 63))
        else:
            p = ga(m, w).astype(object) * gb(m, w).astype(object)
            r = p + gc(m, w).astype(object)
            carry = r >= (1 << 64)
        r = np.broadcast_to(np.vectorize(lambda x: x & 0xFFFFFFFFFFFFFFFF, otypes=[np.uint64])(r), execm.shape)
        m.vwrite(w, d, (r & np.uint64(0xFFFFFFFF)).astype(U32), execm)
        m.vwrite(w, d + 1, (r >> np.uint64(32)).astype(U32), execm)
        m.swrite(w, co, m.pack_mask(np.ascontiguousarray(np.broadcast_to(carry.astype(bool), execm.shape) & execm)), 2)
    return run


# ---- lane access -----------------------------------------------------------------------------
@semantic("v_readlane_b32")
def c_readlane(inst, ctx):
    sdst, src, lane = inst.operands
    g = vsrc(src)
    gl = vsrc(lane)
    d = s_index(sdst)

    def run(m, w):
        v = np.broadcast_to(g(m, w), (m.nw(w), 64))
        ln = (gl(m, w)[:, 0] & 63).astype(np.int64)
        m.swrite(w, d, v[np.arange(v.shape[0]), ln])
    return run


@semantic("v_readfirstlane_b32")
def c_readfirstlane(inst, ctx):
    sdst, src = inst.operands
    g, d = vsrc(src), s_index(sdst)

    def run(m, w):
        v = np.broadcast_to(g(m, w), (m.nw(w), 64))
        ex = m.execm[w]
        ln = np.where(ex.any(axis=1), np.argmax(ex, axis=1), 0)
        m.swrite(w, d, v[np.arange(v.shape[0]), ln])
    return run


@semantic("v_writelane_b32")
def c_writelane(inst, ctx):
    vdst, src, lane = inst.operands
    g, gl, d = vsrc(src), vsrc(lane), r_index(vdst)

    def run(m, w):
        val = g(m, w)[:, 0]
        ln = (gl(m, w)[:, 0] & 63).astype(np.int64)
        mask = LANES[None, :] == ln[:, None]      # ignores EXEC (ISA: V_WRITELANE)
        m.vwrite(w, d, val[:, None], mask)
    return run


@semantic("v_permlane16_swap_b32", "v_permlane32_swap_b32")
def c_permlane_swap(inst, ctx):
    """CDNA4 ISA 12.8 (notes §3.2): both operands are written."""
    vdst, src0 = inst.operands
    if not (isinstance(vdst, Reg) and isinstance(src0, Reg)):
        raise not_emulated(inst, "operands")
    x, y = r_index(vdst), r_index(src0)
    if "permlane16" in inst.name:
        odd = (LANES // 16) % 2 == 1           # lanes of odd rows of vdst swap with even rows of src0
        sw_v = np.nonzero(odd)[0]
        sw_s = sw_v - 16
    else:
        sw_v = np.arange(32, 64)
        sw_s = np.arange(0, 32)

    def run(m, w):
        if not m.execm[w].all():
            raise EmuError(f"not emulated: {inst.name} at pc 0x{inst.pc or 0:x} with EXEC not all ones "
                           f"(behaviour of inactive lanes is undocumented)")
        a, b = m.R[w, x].copy(), m.R[w, y].copy()
        a_sw = a[:, sw_v].copy()
        a[:, sw_v] = b[:, sw_s]
        b[:, sw_s] = a_sw
        m.R[w, x] = a
        m.R[w, y] = b
    return run


@semantic("v_swap_b32")
def c_swap(inst, ctx):
    """VOP1 V_SWAP_B32: D <-> S0 in the active lanes (both VGPRs are written)."""
    vdst, src0 = inst.operands
    if not (isinstance(vdst, Reg) and isinstance(src0, Reg) and src0.file in "va") or inst.is_dpp or inst.is_sdwa:
        raise not_emulated(inst, "operands")
    x, y = r_index(vdst), r_index(src0)

    def run(m, w):
        ex = m.execm[w]
        a, b = m.R[w, x].copy(), m.R[w, y].copy()
        m.vwrite(w, x, b, ex)
        m.vwrite(w, y, a, ex)
    return run


# ---- packed math (VOP3P) ---------------------------------------------------------------------
PK = {
    "v_pk_add_f16": ("f16", 2, lambda a, b: a + b),
    "v_pk_mul_f16": ("f16", 2, lambda a, b: a * b),
    "v_pk_fma_f16": ("f16", 3, lambda a, b, c: (a.astype(np.float64) * b + c).astype(np.float16)),
    "v_pk_max_f16": ("f16", 2, np.fmax),
    "v_pk_min_f16": ("f16", 2, np.fmin),
    "v_pk_add_u16": ("u16", 2, lambda a, b: a + b),
    "v_pk_sub_u16": ("u16", 2, lambda a, b: a - b),
    "v_pk_mul_lo_u16": ("u16", 2, lambda a, b: a * b),
    "v_pk_add_f32": ("f32", 2, lambda a, b: a + b),
    "v_pk_mul_f32": ("f32", 2, lambda a, b: a * b),
    "v_pk_fma_f32": ("f32", 3, fma32),
    "v_pk_mov_b32": ("u32", 2, None),
}


@semantic(*PK)
def c_pk(inst, ctx):
    t, nsrc, fn = PK[inst.name]
    ops = inst.operands
    dst, srcs = ops[0], ops[1:1 + nsrc]
    mods = inst.modifiers
    wide = t == "f32" or t == "u32"
    op_sel = mods.get("op_sel", [0] * nsrc)
    op_sel_hi = mods.get("op_sel_hi", [1] * nsrc)
    neg_lo, neg_hi = mods.get("neg_lo", [0] * nsrc), mods.get("neg_hi", [0] * nsrc)
    d = r_index(dst)
    if wide:
        getters = [vsrc(s, "b64" if not isinstance(base_of(s), Imm) else "f32", 2 if not isinstance(base_of(s), Imm) else 1)
                   for s in srcs]
    else:
        getters = [vsrc(s, "f16" if t == "f16" else "b16") for s in srcs]

    def halves(m, w, i):
        raw = getters[i](m, w)
        if wide:
            if raw.dtype != np.uint64:          # an inline constant feeds both halves
                lo = hi = raw.astype(U32)
            else:
                words = [(raw & np.uint64(0xFFFFFFFF)).astype(U32), (raw >> np.uint64(32)).astype(U32)]
                lo, hi = words[op_sel[i]], words[op_sel_hi[i]]
            a, b = decode(lo, "f32" if t == "f32" else "u32"), decode(hi, "f32" if t == "f32" else "u32")
        else:
            a, b = decode(raw, t, bool(op_sel[i])), decode(raw, t, bool(op_sel_hi[i]))
        if t in ("f16", "f32"):
            a = -a if neg_lo[i] else a
            b = -b if neg_hi[i] else b
        return a, b

    def run(m, w):
        execm = m.execm[w]
        hs = [halves(m, w, i) for i in range(nsrc)]
        with np.errstate(all="ignore"):
            if fn is None:      # v_pk_mov_b32: lo from src0 (op_sel[0]), hi from src1 (op_sel[1]); op_sel_hi unused
                lo, hi = hs[0][0], hs[1][0]
            else:
                lo, hi = fn(*[h[0] for h in hs]), fn(*[h[1] for h in hs])
        if mods.get("clamp") and t == "f16":
            lo, hi = np.clip(lo, 0, 1), np.clip(hi, 0, 1)
        if wide:
            m.vwrite(w, d, encode(np.asarray(lo), "f32" if t == "f32" else "u32"), execm)
            m.vwrite(w, d + 1, encode(np.asarray(hi), "f32" if t == "f32" else "u32"), execm)
        else:
            m.vwrite(w, d, encode(np.asarray(lo), t) | (encode(np.asarray(hi), t) << 16), execm)
    return run


@semantic("v_nop")
def c_vnop(inst, ctx):
    return lambda m, w: None


# ---- fp8 / bf8 conversions (OCP E4M3 / E5M2 on gfx950) and v_cvt_pkrtz_f16_f32 ---------------------
# gfx950 converts to and from the OCP formats (AMD's HIP headers build __hipext_ocp_fp8_e4m3 from
# __builtin_amdgcn_cvt_pk_fp8_f32 when HIP_ENABLE_GFX950_OCP_BUILTINS; composable_kernel enables its
# OCP fast path for __gfx950__ only, FNUZ for gfx942). E4M3: bias 7, no inf, S.1111.111 = NaN, max 448;
# E5M2: bias 15, IEEE inf/NaN, max 57344. Round to nearest even; without CLAMP a finite value that
# rounds past the maximum becomes NaN (E4M3) / inf (E5M2) (OCP non-saturating conversion; software
# pre-clamps with v_med3 when it wants saturation); CLAMP saturates finite values to +-max.
FP8_FMT = {"fp8": (4, 3, 7, 448.0), "bf8": (5, 2, 15, 57344.0)}


def f32_to_fp8(x, kind, clamp=False):
    """float32 array -> fp8/bf8 codes (uint32 in [0, 255])."""
    ebits, mbits, bias, fmax = FP8_FMT[kind]
    x = np.asarray(x, np.float32).astype(np.float64)
    sign = np.signbit(x).astype(np.uint32) << 7
    a = np.abs(x)
    fin = np.isfinite(a)
    emin = 1 - bias
    with np.errstate(all="ignore"):
        e = np.floor(np.log2(np.where(fin & (a > 0), a, 1.0)))
        e = np.maximum(e, emin)
        q = np.exp2(e - mbits)                       # spacing of representable values at this binade
        r = np.rint(a / q) * q                       # a/q is exact (power-of-two scale): RNE
    over = fin & (r > fmax)
    if clamp:
        r = np.where(over, fmax, r)
        over = np.zeros_like(over)
    r = np.where(fin & ~over, r, 0.0)
    e2 = np.floor(np.log2(np.where(r > 0, r, 1.0)))
    normal = r >= 2.0 ** emin
    code_n = ((e2 + bias).astype(np.int64) << mbits) | (np.rint(r / np.exp2(e2 - mbits)).astype(np.int64) - (1 << mbits))
    code_s = np.rint(r / 2.0 ** (emin - mbits)).astype(np.int64)
    code = np.where(normal, code_n, code_s).astype(np.uint32)
    nan_code = np.uint32(0x7F)
    inf_code = np.uint32(0x7F if ebits == 4 else 0x7C)
    code = np.where(np.isnan(a), nan_code, code)
    code = np.where(np.isinf(a) | over, inf_code, code)
    return (code | sign).astype(np.uint32)


@semantic("v_cvt_pk_fp8_f32", "v_cvt_pk_bf8_f32")
def c_cvt_pk_fp8(inst, ctx):
    """D.word[OPSEL[3]] = {fp8(S1), fp8(S0)}; the other word is preserved (CDNA4 ISA VOP3 op_sel)."""
    kind = "fp8" if "_fp8_" in inst.name else "bf8"
    dst, a, b = inst.operands
    mods = inst.modifiers
    if inst.is_dpp or inst.is_sdwa or mods.get("mul") or mods.get("div"):
        raise not_emulated(inst, "DPP/SDWA/omod")
    hi = _opsel(mods, 2)               # asm op_sel:[0,0,1] = OPSEL[3] (VOP3 bit 14, llvm-mc): the high word
    if any(_opsel(mods, i) for i in range(2)):
        raise not_emulated(inst, "op_sel on sources")
    ga, gb = vsrc(a, "f32"), vsrc(b, "f32")
    d, clamp = r_index(dst), bool(mods.get("clamp"))

    def run(m, w):
        x = float_mods(decode(ga(m, w), "f32"), a, "f32")
        y = float_mods(decode(gb(m, w), "f32"), b, "f32")
        word = f32_to_fp8(x, kind, clamp) | (f32_to_fp8(y, kind, clamp) << 8)
        cur = m.R[w, d]
        val = (cur & U32(0x0000FFFF)) | (word << 16) if hi else (cur & U32(0xFFFF0000)) | word
        m.vwrite(w, d, val.astype(U32), m.execm[w])
    return run


@semantic("v_cvt_f32_fp8", "v_cvt_f32_bf8")
def c_cvt_f32_fp8(inst, ctx):
    """D.f32 = fp8/bf8 byte of S0 (byte 0, or the SDWA src0_sel byte); exact."""
    from .ops_mfma import FP8
    kind = "fp8" if inst.name.endswith("fp8") else "bf8"
    dst, a = inst.operands
    mods = inst.modifiers
    if inst.is_dpp or mods.get("op_sel") or mods.get("clamp") or mods.get("mul") or mods.get("div") \
            or isinstance(a, Mod):
        raise not_emulated(inst, "VOP3 byte select / modifiers")
    shift = {"BYTE_0": 0, "BYTE_1": 8, "BYTE_2": 16, "BYTE_3": 24}.get(mods.get("src0_sel", "BYTE_0")) \
        if inst.is_sdwa else 0
    if shift is None or (inst.is_sdwa and mods.get("dst_sel", "DWORD") != "DWORD"):
        raise not_emulated(inst, "SDWA select")
    ga, d = vsrc(a), r_index(dst)
    table = FP8[kind].astype(F32)

    def run(m, w):
        byte = (ga(m, w) >> U32(shift)) & U32(0xFF)
        m.vwrite(w, d, table[byte].view(U32), m.execm[w])
    return run


@semantic("v_cvt_pk_f32_fp8", "v_cvt_pk_f32_bf8")
def c_cvt_pk_f32_fp8(inst, ctx):
    """D[0], D[1] = the two fp8/bf8 bytes of one word of S0 (the low word; the high word with VOP3
    op_sel[0] or SDWA src0_sel:WORD_1); exact."""
    from .ops_mfma import FP8
    kind = "fp8" if inst.name.endswith("fp8") else "bf8"
    dst, a = inst.operands
    mods = inst.modifiers
    if inst.is_dpp or mods.get("clamp") or mods.get("mul") or mods.get("div") or isinstance(a, Mod):
        raise not_emulated(inst, "DPP / modifiers")
    if inst.is_sdwa:
        sel = mods.get("src0_sel", "DWORD")
        if sel not in ("WORD_0", "WORD_1", "DWORD") or mods.get("dst_sel", "DWORD") != "DWORD":
            raise not_emulated(inst, "SDWA select")
        shift = 16 if sel == "WORD_1" else 0
    else:
        shift = 16 if _opsel(mods, 0) else 0
    ga, d = vsrc(a), r_index(dst)
    table = FP8[kind].astype(F32)

    def run(m, w):
        word = ga(m, w) >> U32(shift)
        ex = m.execm[w]
        m.vwrite(w, d, table[word & U32(0xFF)].view(U32), ex)
        m.vwrite(w, d + 1, table[(word >> U32(8)) & U32(0xFF)].view(U32), ex)
    return run


def f32_to_f16_rtz(x):
    """float32 -> f16 bits rounded toward zero (finite overflow -> +-65504; inf, NaN kept)."""
    x = np.asarray(x, np.float32)
    with np.errstate(all="ignore"):
        h = x.astype(np.float16)                    # round to nearest even ...
    bits = h.view(np.uint16).astype(np.int64)
    away = np.isfinite(x) & (np.abs(h.astype(np.float64)) > np.abs(x.astype(np.float64)))
    bits = np.where(away, bits - 1, bits)           # ... then one step back toward zero if it went away
    return bits.astype(U32)


@semantic("v_cvt_pkrtz_f16_f32")
def c_cvt_pkrtz(inst, ctx):
    dst, a, b = inst.operands
    mods = inst.modifiers
    if inst.is_dpp or inst.is_sdwa or mods.get("op_sel") or mods.get("clamp") or mods.get("mul") or mods.get("div"):
        raise not_emulated(inst, "modifiers")
    ga, gb, d = vsrc(a, "f32"), vsrc(b, "f32"), r_index(dst)

    def run(m, w):
        x = float_mods(decode(ga(m, w), "f32"), a, "f32")
        y = float_mods(decode(gb(m, w), "f32"), b, "f32")
        m.vwrite(w, d, f32_to_f16_rtz(x) | (f32_to_f16_rtz(y) << 16), m.execm[w])
    return run
