"""MFMA operand placement by the ISA formulas written here independently (notes §2, CDNA4 ISA
7.1.4 closed forms): every gfx950 shape the emulator runs (CDNA4 32x32x16/16x16x32 f16/bf16/fp8,
i8 16x16x64/32x32x32, CDNA3 32x32x8/16x16x16 f16/bf16 and 16x16x32/32x32x16 fp8/bf8, i8
16x16x32/32x32x16; every A/B fp8/bf8 pairing in both shapes), CBSZ/ABID broadcast and BLGP lane permutations, AGPR C/D, partial EXEC.

Reference: D = C + A·B in float64 then one rounding to float32 (int64 then 32-bit wrap for i8).
Tolerance: the emulator accumulates in float32 (DESIGN.md), in BLAS order. Every product of two
bf16/f16/fp8/bf8 values is exact in float32 (at most 11+11 significant bits, exponents in range),
so the only errors are the roundings of the K-term float32 sum and of adding C: at most
(K-1)·2^-24·Σ|a·b| + 2^-24·(|C| + Σ|a·b|) ≤ K·2^-24·(Σ|a·b| + |C|) (recursive summation bound;
blocked/pairwise orders and FMA only lower it), plus the reference's own final rounding (1 ulp).
A misplaced operand changes a result by a whole product |a·b|, far above this bound. Quarter-step
bf16/f16 inputs without specials sum exactly, so there the emulator must agree to 1 ulp. i8 results
are exact (specials exactly everywhere).
"""
from __future__ import annotations

import numpy as np
import pytest

from emu_snippet import AOFF, poison, snippet
from flyasm.emu import EmuError

RNG = np.random.default_rng()


# ---- element codecs written from the formats, not from the emulator ------------------------------
def enc(x, kind):
    """float64 values -> raw item bits (uint) for kind."""
    if kind == "f16":
        return x.astype(np.float16).view(np.uint16).astype(np.uint32)
    if kind == "bf16":
        return (x.astype(np.float32).view(np.uint32) >> 16)       # inputs are exact in bf16
    if kind == "i8":
        return (x.astype(np.int64) & 0xFF).astype(np.uint32)
    raise ValueError(kind)


def fp8_decode(b, kind):
    """OCP FP8 (gfx950): E4M3 bias 7, S.1111.111 NaN, no inf; E5M2 bias 15, IEEE inf/NaN."""
    b = np.asarray(b, np.int64)
    s = np.where(b >> 7, -1.0, 1.0)
    if kind == "fp8":
        e, mt = (b >> 3) & 15, b & 7
        v = np.where(e == 0, mt / 8 * 2.0 ** -6, (1 + mt / 8) * 2.0 ** (e - 7))
        v = np.where((e == 15) & (mt == 7), np.nan, v)
    else:
        e, mt = (b >> 2) & 31, b & 3
        v = np.where(e == 0, mt / 4 * 2.0 ** -14, (1 + mt / 4) * 2.0 ** (e - 15))
        v = np.where(e == 31, np.where(mt == 0, np.inf, np.nan), v)
    return s * v


def dec(bits, kind):
    if kind == "f16":
        return bits.astype(np.uint16).view(np.float16).astype(np.float64)
    if kind == "bf16":
        return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if kind == "i8":
        return bits.astype(np.uint8).view(np.int8).astype(np.int64)
    return fp8_decode(bits, kind)


ISIZE = {"f16": 16, "bf16": 16, "i8": 8, "fp8": 8, "bf8": 8}


def pack_items(items, bits):
    """items [64, KL] (uint) -> registers [KL*bits/32, 64]: item t at bit offset t*bits (little-endian)."""
    per = 32 // bits
    nreg = items.shape[1] // per
    regs = np.zeros((nreg, 64), np.uint64)
    for t in range(items.shape[1]):
        regs[t // per] |= items[:, t].astype(np.uint64) << np.uint64(bits * (t % per))
    return regs.astype(np.uint32)


def unpack_items(regs, bits, KL):
    per = 32 // bits
    return np.stack([(regs[t // per].astype(np.uint64) >> np.uint64(bits * (t % per))) & np.uint64((1 << bits) - 1)
                     for t in range(KL)], axis=1)


def d_slot(M, i, j):
    """(register, lane) of D[i][j] (notes §2 closed forms)."""
    if M == 32:
        return 4 * (i // 8) + i % 4, j + 32 * ((i // 4) % 2)
    return i % 4, j + 16 * (i // 4)


def a_slot(M, K, i, k):
    KL = K * M // 64
    return i + M * (k // KL), k % KL          # (lane, item); B[k][j] the same with j


SHAPES = [  # name, M, K, kind A, kind B
    ("v_mfma_f32_32x32x16_f16", 32, 16, "f16", "f16"),
    ("v_mfma_f32_16x16x32_f16", 16, 32, "f16", "f16"),
    ("v_mfma_f32_32x32x16_bf16", 32, 16, "bf16", "bf16"),
    ("v_mfma_f32_16x16x32_bf16", 16, 32, "bf16", "bf16"),
    ("v_mfma_f32_32x32x8_f16", 32, 8, "f16", "f16"),
    ("v_mfma_f32_16x16x16_f16", 16, 16, "f16", "f16"),
    ("v_mfma_f32_32x32x8_bf16", 32, 8, "bf16", "bf16"),
    ("v_mfma_f32_16x16x16_bf16", 16, 16, "bf16", "bf16"),
    ("v_mfma_i32_16x16x64_i8", 16, 64, "i8", "i8"),
    ("v_mfma_i32_32x32x32_i8", 32, 32, "i8", "i8"),
    ("v_mfma_i32_16x16x32_i8", 16, 32, "i8", "i8"),
    ("v_mfma_i32_32x32x16_i8", 32, 16, "i8", "i8"),
    ("v_mfma_f32_16x16x32_fp8_fp8", 16, 32, "fp8", "fp8"),
    ("v_mfma_f32_16x16x32_bf8_fp8", 16, 32, "bf8", "fp8"),
    ("v_mfma_f32_32x32x16_fp8_bf8", 32, 16, "fp8", "bf8"),
    ("v_mfma_f32_32x32x16_bf8_bf8", 32, 16, "bf8", "bf8"),
    ("v_mfma_f32_16x16x32_bf8_bf8", 16, 32, "bf8", "bf8"),
    ("v_mfma_f32_16x16x32_fp8_bf8", 16, 32, "fp8", "bf8"),
    ("v_mfma_f32_32x32x16_bf8_fp8", 32, 16, "bf8", "fp8"),
    ("v_mfma_f32_32x32x16_fp8_fp8", 32, 16, "fp8", "fp8"),
]


def random_items(kind, n, specials):
    if kind == "i8":
        return RNG.integers(0, 256, n).astype(np.uint32)
    if kind in ("fp8", "bf8"):
        b = RNG.integers(0, 256, n).astype(np.uint32)
        bad = (b & 0x7F) == 0x7F if kind == "fp8" else ((b >> 2) & 31) == 31
        return np.where(bad & ~specials, b & 0xF0, b)     # NaN/inf only where specials are wanted
    x = RNG.integers(-16, 17, n) / 4.0                    # exact products, sums exact in float32
    bits = enc(x, kind)
    if specials:
        sp = np.array([0.0, -0.0, np.inf, -np.inf, np.nan], np.float32)
        pos = RNG.choice(n, 3, replace=False)
        bits[pos] = enc(sp[RNG.integers(0, 5, 3)].astype(np.float64), kind)
        den = RNG.choice(n, 4, replace=False)             # denormals are kept by MFMA (ISA 7.1.2)
        bits[den] = (RNG.integers(1, 0x3FF, 4) if kind == "f16" else RNG.integers(1, 0x7F, 4)).astype(np.uint32)
    return bits


def mfma_case(name, M, K, ka, kb, *, cbsz=0, abid=0, blgp=0, agpr=False, specials=False, exec_mask=None,
              **opts):
    KL = K * M // 64
    ia = random_items(ka, 64 * KL, specials).reshape(64, KL)
    ib = random_items(kb, 64 * KL, specials).reshape(64, KL)
    na = KL * ISIZE[ka] // 32
    ra, rb = pack_items(ia, ISIZE[ka]), pack_items(ib, ISIZE[kb])
    nd = M * M // 64
    is_int = ka == "i8"
    if is_int:
        craw = RNG.integers(-2**31, 2**31, (nd, 64)).astype(np.int64).astype(np.uint32)
    else:
        craw = (RNG.integers(-999, 1000, (nd, 64)) / 8.0).astype(np.float32).view(np.uint32)
    # ---- reference: lanes the hardware reads after the CBSZ/ABID and BLGP selection ----
    S = 64 >> cbsz
    src_a = [((lane % S) + S * abid) % 64 for lane in range(64)]     # (abid < 2**cbsz; else an error)
    src_b = [[lane, lane % 32, lane % 32 + 32, (lane + 16) % 64][blgp] if blgp < 4 else lane % 16 + 16 * (blgp - 4)
             for lane in range(64)]
    A = np.zeros((M, K))
    Bm = np.zeros((K, M))
    for i in range(M):
        for k in range(K):
            lane, t = a_slot(M, K, i, k)
            A[i, k] = dec(ia[src_a[lane], t:t + 1], ka)[0]
            Bm[k, i] = dec(ib[src_b[lane], t:t + 1], kb)[0]
    C = np.zeros((M, M))
    for i in range(M):
        for j in range(M):
            r, lane = d_slot(M, i, j)
            C[i, j] = craw[r, lane].view(np.int32) if is_int else craw[r, lane].view(np.float32)
    with np.errstate(all="ignore"):
        if is_int:
            D = ((C.astype(np.int64) + A.astype(np.int64) @ Bm.astype(np.int64)) & 0xFFFFFFFF).astype(np.uint32)
        else:
            D = (C + A @ Bm).astype(np.float32)
            # float32 accumulation bound (module docstring): K·2^-24·(Σ|a·b| + |C|)
            # (zero where every partial sum is exact: quarter-step bf16/f16 inputs without specials)
            exact = not specials and ka not in ("fp8", "bf8") and kb not in ("fp8", "bf8")
            TOL = 0 * C if exact else K * 2.0 ** -24 * (np.abs(A) @ np.abs(Bm) + np.abs(C))
    # ---- run ----
    base_c = AOFF + 64 if agpr else 64
    regs = {16 + v: ra[v] for v in range(na)}
    regs.update({24 + v: rb[v] for v in range(na)})
    regs.update({base_c + r: craw[r] for r in range(nd)})
    dfile = "a" if agpr else "v"
    dd = 128 if not agpr else 96
    regs.update({(AOFF if agpr else 0) + dd + r: poison() for r in range(nd)})
    mods = "".join(f" {k}:{v}" for k, v in (("cbsz", cbsz), ("abid", abid), ("blgp", blgp)) if v)
    text = (f"{name} {dfile}[{dd}:{dd + nd - 1}], v[16:{16 + na - 1}], v[24:{24 + na - 1}], "
            f"{'a' if agpr else 'v'}[{base_c - (AOFF if agpr else 0)}:{base_c - (AOFF if agpr else 0) + nd - 1}]{mods}")
    m = snippet([text], regs, exec_mask=exec_mask, **opts)
    got = m.R[0, (AOFF if agpr else 0) + dd:(AOFF if agpr else 0) + dd + nd]
    for i in range(M):
        for j in range(M):
            r, lane = d_slot(M, i, j)
            g, want = got[r, lane], D[i, j]
            if is_int:
                assert g == want, (name, i, j)
            else:
                gf = g.view(np.float32)
                if np.isnan(want):
                    assert np.isnan(gf), (name, i, j, gf)
                else:
                    assert gf == want or abs(float(gf) - float(want)) <= \
                        np.spacing(np.float32(abs(want))) + TOL[i, j], (name, i, j, gf, want, TOL[i, j])
    return m


@pytest.mark.parametrize("name,M,K,ka,kb", SHAPES, ids=[s[0] for s in SHAPES])
def test_shape_layouts(name, M, K, ka, kb):
    mfma_case(name, M, K, ka, kb)
    if ka != "i8":
        mfma_case(name, M, K, ka, kb, specials=True)


MODS = [(0, 0, 1), (0, 0, 2), (0, 0, 3), (0, 0, 4), (0, 0, 7), (1, 0, 0), (1, 1, 0), (2, 3, 5), (4, 9, 6),
        (3, 2, 2)]


@pytest.mark.parametrize("name,M,K,ka,kb", [SHAPES[0], SHAPES[1], SHAPES[2], SHAPES[3], SHAPES[4], SHAPES[7]],
                         ids=lambda x: str(x))
def test_cbsz_abid_blgp(name, M, K, ka, kb):
    for cbsz, abid, blgp in MODS:
        mfma_case(name, M, K, ka, kb, cbsz=cbsz, abid=abid, blgp=blgp)


def test_agpr_c_and_d():
    mfma_case("v_mfma_f32_32x32x16_bf16", 32, 16, "bf16", "bf16", agpr=True)
    mfma_case("v_mfma_f32_16x16x32_f16", 16, 32, "f16", "f16", agpr=True, blgp=3)


def test_abid_out_of_range_is_an_error():
    with pytest.raises(EmuError, match="abid"):
        mfma_case("v_mfma_f32_16x16x32_f16", 16, 32, "f16", "f16", cbsz=1, abid=2)


def test_partial_exec_is_an_error_and_relaxed_runs_all_lanes():
    ex = np.ones(64, bool)
    ex[5] = False
    with pytest.raises(EmuError, match="EXEC is not all ones.*7.1.2"):
        mfma_case("v_mfma_f32_16x16x32_bf16", 16, 32, "bf16", "bf16", exec_mask=ex)
    # strict=False: EXEC ignored as on silicon (every lane written, checked by the reference)
    mfma_case("v_mfma_f32_16x16x32_bf16", 16, 32, "bf16", "bf16", exec_mask=ex, strict=False)
