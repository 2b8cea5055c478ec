"""v_mfma_{,scale_}f32_{16x16x128,32x32x64}_f8f6f4 against D = (A·sA)(B·sB) + C computed here.

Everything the emulator does is rebuilt independently in the test:
* every code of each format is decoded from its bit fields (minifloat(), OCP MX spec v1.0);
* operands are packed per lane as one little-endian integer of 32 w-bit codes (w = 8/6/4) split
  into w dwords (for fp6 this packing is INFERRED, see flyasm/emu/ops_mx.py);
* A[i][k] is code k % 32 of lane i + M*(k // 32), B[k][j] code k % 32 of lane j + N*(k // 32)
  (CDNA4 ISA 7.1.4 general formula with K_L = 32); the E8M0 scale of that block is byte
  op_sel[n] | op_sel_hi[n] << 1 of the same lane's scale VGPR;
* D[i][j] is register (i % 4) + 4*(i // (4*MI)), lane j + N*((i // 4) % MI) with MI = 64 // N
  (notes §2, one block).
The expected sums are float64 sums rounded once to float32. Tolerance: the products are exact in
float64; the emulator's and this test's float64 sums each err by at most K·2^-53·Σ|a·b| (different
orders), so the float32 results may differ by one float32 ulp plus 2·K·2^-53·Σ|a·b|.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from emu_snippet import poison, snippet
from test_emu_corpus_ops import minifloat

RNG = np.random.default_rng()
# format code (cbsz / blgp) -> (name, ebits, mbits, bias, IEEE specials, E4M3-style NaN)
FMT = {0: ("fp8", 4, 3, 7, False, True), 1: ("bf8", 5, 2, 15, True, False), 2: ("fp6", 2, 3, 1, False, False),
       3: ("bf6", 3, 2, 3, False, False), 4: ("fp4", 2, 1, 1, False, False)}
SHAPES = [(16, 16, 128), (32, 32, 64)]


def width(f):
    return 1 + FMT[f][1] + FMT[f][2]


def decode(f, code):
    return minifloat(int(code), *FMT[f][1:])


def finite_codes(f, n):
    """n random codes of format f whose value is finite (NaN/inf codes left out)."""
    pool = [c for c in range(1 << width(f)) if math.isfinite(decode(f, c))]
    return RNG.choice(pool, n)


def pack(codes, w):
    """[64, 32] codes of w bits -> [w, 64] dwords: per lane one little-endian integer."""
    out = np.zeros((w, 64), np.uint32)
    for lane in range(64):
        v = sum(int(c) << (w * e) for e, c in enumerate(codes[lane]))
        for r in range(w):
            out[r, lane] = (v >> (32 * r)) & 0xFFFFFFFF
    return out


def d_position(M, N, i, j):
    MI = 64 // N
    return (i % 4) + 4 * (i // (4 * MI)), j + N * ((i // 4) % MI)


def to_dregs(C):
    """An [M, N] float32 matrix as the [M*N/64, 64] register words of the C/D layout."""
    M, N = C.shape
    out = np.zeros((M * N // 64, 64), np.uint32)
    for i in range(M):
        for j in range(N):
            rr, ll = d_position(M, N, i, j)
            out[rr, ll] = C[i, j].view(np.uint32)
    return out


def from_dregs(regs, M, N):
    """Register words [M*N/64, 64] -> the [M, N] float32 matrix of the C/D layout."""
    out = np.zeros((M, N), np.float32)
    for i in range(M):
        for j in range(N):
            rr, ll = d_position(M, N, i, j)
            out[i, j] = regs[rr, ll].view(np.float32)
    return out


def reference(M, N, K, fa, fb, ca, cb, C, sa=None, sb=None):
    """D[i][j] from the lane codes (ca, cb [64, 32]) and per-lane scale exponents (sa, sb [64]),
    and Σ|terms| (for the tolerance)."""
    def operand(f, codes, scales, rows):
        table = np.array([decode(f, c) for c in range(1 << width(f))])
        s = np.ones(64) if scales is None else np.where(scales == 255, np.nan, 2.0 ** (scales.astype(np.float64) - 127))
        r, k = np.meshgrid(np.arange(rows), np.arange(K), indexing="ij")
        lane, item = r + rows * (k // 32), k % 32
        return table[codes[lane, item]] * s[lane]                       # [rows, K]
    A = operand(fa, ca, sa, M)                                          # A[i][k]
    Bt = operand(fb, cb, sb, N)                                         # B[k][j] as [j][k]
    D = A @ Bt.T + C.astype(np.float64)
    mag = np.abs(A) @ np.abs(Bt).T + np.abs(C.astype(np.float64))
    return D.astype(np.float32), mag


@pytest.mark.parametrize("scaled", [False, True], ids=["plain", "scale"])
@pytest.mark.parametrize("fa", sorted(FMT), ids=[FMT[f][0] for f in sorted(FMT)])
@pytest.mark.parametrize("shape", SHAPES, ids=["16x16x128", "32x32x64"])
def test_mfma_f8f6f4(shape, fa, scaled):
    """A in format fa against B in each of the five formats (one instruction per B format)."""
    M, N, K = shape
    nd = M * N // 64
    lines, regs, cases = [], {}, []
    r = 8
    for fb in sorted(FMT):
        ca, cb = finite_codes(fa, 64 * 32).reshape(64, 32), finite_codes(fb, 64 * 32).reshape(64, 32)
        C = RNG.standard_normal((M, N)).astype(np.float32) * 4
        ra, rb, rc, rd = r, r + 8, r + 16, r + 16 + nd
        rs = rd + nd
        r = rs + 2
        for q, word in enumerate(pack(ca, width(fa))):
            regs[ra + q] = word
        for q, word in enumerate(pack(cb, width(fb))):
            regs[rb + q] = word
        creg = to_dregs(C)
        for q in range(nd):
            regs[rc + q], regs[rd + q] = creg[q], poison()
        A = f"v[{ra}:{ra + width(fa) - 1}]"
        B = f"v[{rb}:{rb + width(fb) - 1}]"
        mods = f"cbsz:{fa} blgp:{fb}"
        sa = sb = None
        if scaled:
            # four random exponent bytes per lane; op_sel/op_sel_hi pick one byte per operand
            wa = RNG.integers(117, 138, (64, 4))
            wb = RNG.integers(117, 138, (64, 4))
            if fb == 0:
                wa[int(RNG.integers(64)), :] = 255           # E8M0 NaN: that lane's row block -> NaN
            bya, byb = int(RNG.integers(4)), int(RNG.integers(4))
            regs[rs] = (wa[:, 0] | wa[:, 1] << 8 | wa[:, 2] << 16 | wa[:, 3] << 24).astype(np.uint32)
            regs[rs + 1] = (wb[:, 0] | wb[:, 1] << 8 | wb[:, 2] << 16 | wb[:, 3] << 24).astype(np.uint32)
            sa, sb = wa[:, bya], wb[:, byb]
            mods = f"op_sel:[{bya & 1},{byb & 1},0] op_sel_hi:[{bya >> 1},{byb >> 1},0] " + mods
            lines.append(f"v_mfma_scale_f32_{M}x{N}x{K}_f8f6f4 v[{rd}:{rd + nd - 1}], {A}, {B}, "
                         f"v[{rc}:{rc + nd - 1}], v{rs}, v{rs + 1} {mods}")
        else:
            lines.append(f"v_mfma_f32_{M}x{N}x{K}_f8f6f4 v[{rd}:{rd + nd - 1}], {A}, {B}, v[{rc}:{rc + nd - 1}] {mods}")
        cases.append((lines[-1], fb, ca, cb, C, sa, sb, rd))
    lines.append("s_nop 15")
    m = snippet(lines, regs)
    for text, fb, ca, cb, C, sa, sb, rd in cases:
        want, mag = reference(M, N, K, fa, fb, ca, cb, C, sa, sb)
        got = from_dregs(m.R[0, rd:rd + nd], M, N)
        assert np.array_equal(np.isnan(got), np.isnan(want)), text
        fin = ~np.isnan(want)
        tol = np.abs(want[fin]).astype(np.float64) * 2.0 ** -23 + mag[fin] * 2 * K * 2.0 ** -53
        err = np.abs(got[fin].astype(np.float64) - want[fin])
        assert (err <= tol).all(), (text, float(err.max()))
        if scaled and fb == 0:
            assert np.isnan(got).any(), "the NaN scale must reach D"


@pytest.mark.parametrize("shape", [(16, 16, 128), (32, 32, 64)], ids=["16x16x128", "32x32x64"])
@pytest.mark.parametrize("ka,kb", [("fp8", "fp8"), ("bf8", "fp8"), ("fp8", "bf8"), ("bf8", "bf8")])
def test_smfmac_fp8(shape, ka, kb):
    """v_smfmac_f32_*_{fp8,bf8}: D += A·B with A 2:4 sparse. Built here from the ISA's description:
    each lane's 32 dense A values (same lane layout as above) hold two non-zeros per group of four;
    the lane stores the 16 non-zeros in order (4 VGPRs) and the index VGPR gives each one's position
    in its group, value v at bits [2v+1:2v] (INFERRED bit order, see flyasm/emu/ops_mx.py)."""
    M, N, K = shape
    nd = M * N // 64
    fa, fb = (0 if x == "fp8" else 1 for x in (ka, kb))
    stored = finite_codes(fa, 64 * 16).reshape(64, 16)
    index = np.zeros(64, np.uint64)
    dense = np.zeros((64, 32))                              # dense A values per lane
    table_a = np.array([decode(fa, c) for c in range(256)])
    for lane in range(64):
        for g in range(8):
            p0, p1 = sorted(RNG.choice(4, 2, replace=False))
            for q, p in enumerate((p0, p1)):
                v = 2 * g + q
                index[lane] |= np.uint64(int(p) << (2 * v))
                dense[lane, 4 * g + p] = table_a[stored[lane, v]]
    cb = finite_codes(fb, 64 * 32).reshape(64, 32)
    C = RNG.standard_normal((M, N)).astype(np.float32)
    regs = {}
    words = stored.astype(np.uint32).reshape(64, 4, 4)
    for q in range(4):
        regs[10 + q] = words[:, q, 0] | words[:, q, 1] << 8 | words[:, q, 2] << 16 | words[:, q, 3] << 24
    for q, word in enumerate(pack(cb, 8)):
        regs[20 + q] = word
    regs[30] = index.astype(np.uint32)
    for q, word in enumerate(to_dregs(C)):
        regs[40 + q] = word
    text = f"v_smfmac_f32_{M}x{N}x{K}_{ka}_{kb} v[40:{40 + nd - 1}], v[10:13], v[20:27], v30"
    m = snippet([text, "s_nop 15"], regs)
    i, k = np.meshgrid(np.arange(M), np.arange(K), indexing="ij")
    A = dense[i + M * (k // 32), k % 32]
    table_b = np.array([decode(fb, c) for c in range(256)])
    kk, j = np.meshgrid(np.arange(K), np.arange(N), indexing="ij")
    B = table_b[cb[j + N * (kk // 32), kk % 32]]
    want = (A @ B + C.astype(np.float64)).astype(np.float32)
    mag = np.abs(A) @ np.abs(B) + np.abs(C.astype(np.float64))
    got = from_dregs(m.R[0, 40:40 + nd], M, N)
    err = np.abs(got.astype(np.float64) - want)
    assert (err <= np.abs(want) * 2.0 ** -23 + mag * 2 * K * 2.0 ** -53).all(), (text, float(err.max()))
