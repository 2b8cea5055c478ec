"""OCP MX formats on gfx950: the f8f6f4 MFMAs, plain and with E8M0 block scales (CDNA4 ISA §7.1/7.2).

Formats (CBSZ selects A's, BLGP B's; notes §2): 0 fp8 E4M3, 1 bf8 E5M2, 2 fp6 E2M3, 3 bf6 E3M2,
4 fp4 E2M1 (OCP MX spec v1.0: bias 2^(E-1)-1; E4M3 has no inf and S.1111.111 is NaN; E5M2 has
IEEE inf/NaN; the fp6/fp4 formats have neither). E8M0 scale e = 2^(e-127), 0xFF = NaN.

Register layout: 32 values of A (or B) per lane, K_L = 32 for both shapes (ISA 7.1.4 general
formula): A[i][k] is value k % 32 of lane i + M*(k // 32), B[k][j] value k % 32 of lane
j + N*(k // 32); a lane's values are packed densely, value e in bits [w*e, w*e + w) of the lane's
registers taken as one little-endian integer (w = 8/6/4 bits: 8/6/4 VGPRs). For fp4 this is the
published lane mapping (docs.modular.com mxfp4_matmul_amd: "each lane loads 16 contiguous bytes
from its row, lane_row = lane % 16, lane_chunk = lane / 16"); dense packing of fp6 across register
boundaries is INFERRED (LLVM passes fp6 operands as 6 dwords; the bit order is not documented).

Scales (_scale_ forms): each lane holds one block of 32 values, and its scale is a byte of the
same lane's scale operand (docs.modular.com, citing CDNA4 ISA 7.2.1: "per-lane scale i32,
OPSEL-selected byte applied to the lane's (M=lane%16, K-group=lane/16) slot"). The byte index
is op_sel[n] | op_sel_hi[n] << 1 for operand n (0 = A, 1 = B): llc -mcpu=gfx950 on
llvm.amdgcn.mfma.scale.* with opsel 1/2/3 prints op_sel:[1,..] / op_sel_hi:[1,..] / both.

Arithmetic: products of these formats are exact in float64 and scales are powers of two; the K
products are summed in float64 and C added, then rounded once to float32. The matrix core's
internal precision is undocumented (notes §6.5), so this is a model, not bit-exact silicon.
"""
from __future__ import annotations

import re

import numpy as np

from ..isa.operands import Imm, Reg
from .machine import base_of, imm_bits, not_emulated, r_index, semantic, vsrc, where
from .memory import EmuError
from .ops_mfma import exec_check, layout

FORMATS = {0: ("fp8", 4, 3), 1: ("bf8", 5, 2), 2: ("fp6", 2, 3), 3: ("bf6", 3, 2), 4: ("fp4", 2, 1)}
_NAME = re.compile(r"^v_mfma_(scale_)?f32_(\d+)x(\d+)x(\d+)_f8f6f4$")


def minifloat_values(ebits: int, mbits: int) -> np.ndarray:
    """float64 value of every code of an OCP MX element format (1 sign bit, ebits, mbits)."""
    c = np.arange(1 << (1 + ebits + mbits))
    bias = (1 << (ebits - 1)) - 1
    sign = np.where(c >> (ebits + mbits) & 1, -1.0, 1.0)
    e, f = (c >> mbits) & ((1 << ebits) - 1), c & ((1 << mbits) - 1)
    mag = np.where(e == 0, f * 2.0 ** (1 - bias - mbits), ((1 << mbits) + f) * 2.0 ** (e - bias - mbits))
    top = e == (1 << ebits) - 1
    if ebits == 4 and mbits == 3:                       # E4M3: S.1111.111 is NaN, no infinities
        mag = np.where(top & (f == 7), np.nan, mag)
    elif ebits == 5 and mbits == 2:                     # E5M2: IEEE specials
        mag = np.where(top, np.where(f == 0, np.inf, np.nan), mag)
    return sign * mag


VALUES = {k: minifloat_values(eb, mb) for k, (_, eb, mb) in FORMATS.items()}
E8M0 = np.where(np.arange(256) == 255, np.nan, 2.0 ** (np.arange(256) - 127.0))


def lane_values(regs: np.ndarray, fmt: int) -> np.ndarray:
    """Registers [k, nreg, 64] (uint32) -> the 32 values of each lane [k, 64, 32] (float64)."""
    width = 1 + FORMATS[fmt][1] + FORMATS[fmt][2]
    k = regs.shape[0]
    lane_bytes = np.ascontiguousarray(regs.transpose(0, 2, 1)).view(np.uint8)      # [k, 64, 4*width]
    bits = np.unpackbits(lane_bytes, axis=-1, bitorder="little").reshape(k, 64, 32, width)
    codes = bits @ (1 << np.arange(width))
    return VALUES[fmt][codes]


def _fmt(inst, key: str) -> int:
    f = int(inst.modifiers.get(key, 0) or 0)
    if f not in FORMATS:
        raise EmuError(f"{where(inst)}: {key}:{f} selects no f8f6f4 format (0..4)")
    return f


def _scale_byte(mods, n: int) -> int:
    sel, hi = mods.get("op_sel") or [], mods.get("op_sel_hi") or []
    return (int(sel[n]) if n < len(sel) else 0) | ((int(hi[n]) if n < len(hi) else 0) << 1)


@semantic("v_mfma_f32_16x16x128_f8f6f4", "v_mfma_f32_32x32x64_f8f6f4", "v_mfma_scale_f32_16x16x128_f8f6f4",
          "v_mfma_scale_f32_32x32x64_f8f6f4")
def c_mfma_f8f6f4(inst, ctx):
    scaled, M, N, K = _NAME.match(inst.name).groups()
    M, N, K = int(M), int(N), int(K)
    if inst.modifiers.get("abid"):
        raise not_emulated(inst, "abid on an f8f6f4 MFMA")
    fa, fb = _fmt(inst, "cbsz"), _fmt(inst, "blgp")
    vdst, src0, src1, src2 = inst.operands[:4]
    nd = inst.slots[0]["dwords"]
    for op, f in ((src0, fa), (src1, fb)):
        need = 1 + FORMATS[f][1] + FORMATS[f][2]
        if getattr(base_of(op), "count", 1) < need:
            raise EmuError(f"{where(inst)}: {FORMATS[f][0]} operands take {need} registers, {op} has fewer")
    d0, a0, b0 = r_index(vdst), r_index(base_of(src0)), r_index(base_of(src1))
    c_op = base_of(src2)
    c0 = r_index(c_op) if isinstance(c_op, Reg) else None
    cconst = float(np.uint32(imm_bits(c_op.value, "f32")).view(np.float32)) if isinstance(c_op, Imm) else None
    _, _, (dr, dl) = layout(M, N, K)
    dr, dl = dr[0], dl[0]                                   # [M, N]: D[i][j] -> register, lane
    if scaled:
        ga, gb = vsrc(inst.operands[4]), vsrc(inst.operands[5])
        sa, sb = (8 * _scale_byte(inst.modifiers, n) for n in (0, 1))
    nb = K // 32
    wa, wb = (1 + FORMATS[f][1] + FORMATS[f][2] for f in (fa, fb))

    def run(m, w):
        exec_check(m, w, inst)
        A = lane_values(m.R[w, a0:a0 + wa], fa)            # [k, 64, 32]
        B = lane_values(m.R[w, b0:b0 + wb], fb)
        k = A.shape[0]
        if scaled:
            A = A * E8M0[(np.broadcast_to(ga(m, w), (k, 64)) >> np.uint32(sa)) & np.uint32(0xFF)][..., None]
            B = B * E8M0[(np.broadcast_to(gb(m, w), (k, 64)) >> np.uint32(sb)) & np.uint32(0xFF)][..., None]
        A = A.reshape(k, nb, M, 32).transpose(0, 2, 1, 3).reshape(k, M, K)          # lane i + M*kb
        Bt = B.reshape(k, nb, N, 32).transpose(0, 2, 1, 3).reshape(k, N, K)         # lane j + N*kb
        with np.errstate(all="ignore"):
            P = np.matmul(A, Bt.transpose(0, 2, 1))                                 # [k, M, N]
            C = m.R[w, c0:c0 + nd][:, dr, dl].view(np.float32) if c0 is not None else np.float32(cconst)
            D = (P + C).astype(np.float32)
        out = np.empty((k, nd, 64), np.uint32)
        out[:, dr, dl] = D.view(np.uint32)
        m.R[w, d0:d0 + nd] = out
    return run


def to_minifloat(x: np.ndarray, fmt: int) -> np.ndarray:
    """float64 -> codes of an fp6/fp4 format (no inf/NaN codes): round to nearest, ties to the even
    code; magnitudes past the largest value saturate to it (OCP MX spec v1.0 §5.3.3 conversion
    with saturation). NaN is INFERRED to give the largest magnitude (the formats have no NaN)."""
    ebits, mbits = FORMATS[fmt][1:]
    mags = VALUES[fmt][:1 << (ebits + mbits)]                 # the positive codes, ascending values
    a = np.nan_to_num(np.abs(x), nan=np.inf)
    hi = np.clip(np.searchsorted(mags, a), 1, len(mags) - 1)
    lo = hi - 1
    dl, dh = a - mags[lo], mags[hi] - a
    code = np.where((dh < dl) | ((dh == dl) & (hi % 2 == 0)), hi, lo)
    code = np.where(a >= mags[-1], len(mags) - 1, code)
    return (code | (np.signbit(x) & ~np.isnan(x)).astype(np.int64) << (ebits + mbits)).astype(np.uint32)


def scale_of(s: np.ndarray) -> np.ndarray:
    """The power of two a v_cvt_scalef32_* scale operand stands for: 2^(exponent field of the f32 - 127)
    (INFERRED for scales that are not powers of two: the callers in aiter/CK/hip pass powers of two)."""
    return E8M0[(s >> np.uint32(23)) & np.uint32(0xFF)]


@semantic("v_cvt_scalef32_pk_fp4_f32")
def c_cvt_scalef32_pk_fp4_f32(inst, ctx):
    """Byte op_sel[2] | op_sel[3] << 1 of D := {fp4(S1 / scale), fp4(S0 / scale)} (S0 in the low
    nibble); the other bytes are kept. Byte select: LLVM commit 1a86d44 ("OPSEL[3:2] selects which
    dst_byte to write"); S0 low nibble: hip's amd_hip_ocp_types.h software fallback packs r << 4 | l;
    dividing by the scale: every caller stores the scale's exponent as the E8M0 that dequantizes."""
    from .ops_vector import float_mods
    mods = inst.modifiers
    if mods.get("clamp") or mods.get("mul") or mods.get("div") or inst.is_dpp or inst.is_sdwa:
        raise not_emulated(inst, "clamp/omod/DPP/SDWA")
    dst, a, b, s = inst.operands
    sel = mods.get("op_sel") or []
    byte = (int(sel[2]) if len(sel) > 2 else 0) | ((int(sel[3]) if len(sel) > 3 else 0) << 1)
    ga, gb, gs, d = vsrc(a, "f32"), vsrc(b, "f32"), vsrc(s, "f32"), r_index(dst)
    sh = np.uint32(8 * byte)

    def run(m, w):
        sc = scale_of(gs(m, w))
        with np.errstate(all="ignore"):
            x = float_mods(ga(m, w).view(np.float32).astype(np.float64), a, "f32") / sc
            y = float_mods(gb(m, w).view(np.float32).astype(np.float64), b, "f32") / sc
        pair = to_minifloat(x, 4) | (to_minifloat(y, 4) << np.uint32(4))
        cur = m.R[w, d]
        m.vwrite(w, d, (cur & ~(np.uint32(0xFF) << sh)) | (pair.astype(np.uint32) << sh), m.execm[w])
    return run


_SMFMAC = re.compile(r"^v_smfmac_f32_(\d+)x(\d+)x(\d+)_(fp8|bf8)_(fp8|bf8)$")


def sparse_expand(vals: np.ndarray, index: np.ndarray) -> np.ndarray:
    """2:4 sparse A: a lane's 16 stored values [k, 64, 16] and its index VGPR [k, 64] -> the 32
    dense values [k, 64, 32]. Stored value v sits in group v // 2 (4 dense values each) at position
    index[2v+1:2v]; the rest of the group is zero. For 8-bit sources on gfx950 the 32 index bits
    cover the lane's 16 values (LLVM commit ef739b9, "gfx950 smfmac sparse index": "for 8 bit
    variants on gfx950, we would need the full 32 bits ... for the 16 non-zero 8 bit elements").
    The bit order (value v at bits 2v+1:2v) is INFERRED from CDNA3's 16-bit layout."""
    k = vals.shape[0]
    v = np.arange(16)
    pos = 4 * (v // 2) + ((index[..., None].astype(np.int64) >> (2 * v)) & 3)       # [k, 64, 16]
    dense = np.zeros((k, 64, 32), np.float64)
    np.put_along_axis(dense, pos, vals, axis=-1)    # two values naming one position: the later one wins
    return dense


@semantic(*[f"v_smfmac_f32_{s}_{a}_{b}" for s in ("16x16x128", "32x32x64") for a in ("fp8", "bf8")
            for b in ("fp8", "bf8")])
def c_smfmac_fp8(inst, ctx):
    """D = D + A·B with A 2:4 sparse (CDNA4 ISA §7.1 SMFMAC; C is the destination itself, src2 the
    index VGPR). Dense layout as the f8f6f4 MFMAs (K_L = 32): A[i][k] is dense value k % 32 of lane
    i + M*(k // 32), B[k][j] value k % 32 of lane j + N*(k // 32)."""
    M, N, K, ka, kb = _SMFMAC.match(inst.name).groups()
    M, N, K = int(M), int(N), int(K)
    if inst.modifiers.get("cbsz") or inst.modifiers.get("abid"):
        raise not_emulated(inst, "cbsz/abid index-set select")
    fa, fb = (0 if x == "fp8" else 1 for x in (ka, kb))
    vdst, src0, src1, src2 = inst.operands[:4]
    nd = inst.slots[0]["dwords"]
    d0, a0, b0 = r_index(vdst), r_index(base_of(src0)), r_index(base_of(src1))
    gi = vsrc(src2)
    _, _, (dr, dl) = layout(M, N, K)
    dr, dl = dr[0], dl[0]
    nb = K // 32

    def run(m, w):
        exec_check(m, w, inst)
        k = m.nw(w)
        stored = np.ascontiguousarray(m.R[w, a0:a0 + 4].transpose(0, 2, 1)).view(np.uint8)    # [k, 64, 16]
        A = sparse_expand(VALUES[fa][stored], np.broadcast_to(gi(m, w), (k, 64)))
        B = lane_values(m.R[w, b0:b0 + 8], fb)
        A = A.reshape(k, nb, M, 32).transpose(0, 2, 1, 3).reshape(k, M, K)
        Bt = B.reshape(k, nb, N, 32).transpose(0, 2, 1, 3).reshape(k, N, K)
        with np.errstate(all="ignore"):
            C = m.R[w, d0:d0 + nd][:, dr, dl].view(np.float32)
            D = (np.matmul(A, Bt.transpose(0, 2, 1)) + C).astype(np.float32)
        out = np.empty((k, nd, 64), np.uint32)
        out[:, dr, dl] = D.view(np.uint32)
        m.R[w, d0:d0 + nd] = out
    return run


@semantic("v_cvt_scalef32_pk_f32_fp4")
def c_cvt_scalef32_pk_f32_fp4(inst, ctx):
    """D[0] = fp4(low nibble) * scale, D[1] = fp4(high nibble) * scale, of byte op_sel[0] | op_sel[1] << 1
    of S0 (LLVM commit 1a86d44: "OPSEL[1:0] selects which src_byte to read"); scale as in
    v_cvt_scalef32_pk_fp4_f32 (the f32's power of two); the products are exact in float32 unless they
    leave its range."""
    mods = inst.modifiers
    if mods.get("clamp") or mods.get("mul") or mods.get("div") or inst.is_dpp or inst.is_sdwa:
        raise not_emulated(inst, "clamp/omod/DPP/SDWA")
    dst, a, s = inst.operands
    sel = mods.get("op_sel") or []
    sh = np.uint32(8 * ((int(sel[0]) if sel else 0) | ((int(sel[1]) if len(sel) > 1 else 0) << 1)))
    ga, gs, d = vsrc(a), vsrc(s, "f32"), r_index(dst)

    def run(m, w):
        byte = (ga(m, w) >> sh) & np.uint32(0xFF)
        sc = scale_of(gs(m, w))
        ex = m.execm[w]
        with np.errstate(all="ignore"):
            for half in (0, 1):
                v = VALUES[4][(byte >> np.uint32(4 * half)) & np.uint32(0xF)] * sc
                m.vwrite(w, d + half, v.astype(np.float32).view(np.uint32), ex)
    return run
