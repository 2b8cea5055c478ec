"""The fragment model of kernels/fa_fwd.py (kernels/fa_layouts.py) against plain numpy.

Each test pushes fresh random data through the lane maps the kernel uses and checks that the
data movement reproduces Q·Kᵀ, the softmax and P·V: layout mistakes give O(1) errors, so the
tolerances below only absorb rounding that the arithmetic itself performs (stated per test).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kernels import fa_layouts as L  # noqa: E402

LANES = np.arange(64)


def rnd(rng, shape, dtype):
    return L.b16_to_f32(L.f32_to_b16(rng.standard_normal(shape).astype(np.float32), dtype), dtype)


def test_mfma_maps_are_bijections_and_match_the_isa_table():
    # notes §2: lanes 0-31 hold k = 0..7 (v0 k0-1 ... v3 k6-7), lanes 32-63 k = 8..15.
    seen = set()
    for i in range(32):
        for k in range(16):
            lane, vg, h = i + 32 * (k // 8), (k % 8) // 2, k % 2
            seen.add((lane, vg, h))
    assert len(seen) == 64 * 8
    d = np.arange(32 * 32, dtype=np.float32).reshape(32, 32)
    assert np.array_equal(L.mfma_d_decode(L.mfma_d_encode(d)), d)
    assert len({(L.s_key(l, r, 0).item(), l % 32) for l in range(64) for r in range(16)}) == 1024


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_mfma_model_is_a_matmul(dtype):
    rng = np.random.default_rng(1)
    a, b = rnd(rng, (32, 16), dtype), rnd(rng, (16, 32), dtype)
    c = rng.standard_normal((32, 32)).astype(np.float32)
    got = L.mfma_d_decode(L.mfma_32x32x16(L.mfma_ab_encode(a, dtype, "A"), L.mfma_ab_encode(b, dtype, "B"),
                                          L.mfma_d_encode(c), dtype))
    # products of 8-bit-mantissa values are exact in float64; one float32 rounding at the end.
    np.testing.assert_allclose(got, c + a.astype(np.float64) @ b, rtol=1e-6, atol=1e-6)


GEOMS = list(L.GEOMETRY.values())
GEOM_IDS = [f"d{g.d_qk}" for g in GEOMS]


def _tiles(g):
    """(slots per row, chunks, DMA instructions per wave, real columns) of the K and V tiles (a
    swizzled fp8 tile has no division: test_fp8_swizzled_dma_is_a_permutation_of_the_tile)."""
    return (() if g.k_swizzle else ((g.k_slots, g.k_chunks, g.k_dma, g.k_cols),)) + \
        (() if g.v_swizzle else ((g.v_slots, g.v_chunks, g.v_dma, g.v_cols),))


@pytest.mark.parametrize("g", GEOMS, ids=GEOM_IDS)
def test_dma_division_magic_is_exact_for_every_slot(g):
    for slots, nchunks, _, _ in _tiles(g):
        t = np.arange(64 * nchunks)
        magic, shift = L.DIV_MAGIC[slots]
        assert np.array_equal((t * magic) >> shift, t // slots)
        assert (t * magic).max() < 1 << 24          # fits v_mul_u32_u24


@pytest.mark.parametrize("g", GEOMS, ids=GEOM_IDS)
def test_dma_covers_every_row_and_column_of_a_tile(g):
    for slots, nchunks, ndma, cols in _tiles(g):
        chunks = {L.dma_chunk(w, i, nchunks, g.waves) for w in range(g.waves) for i in range(ndma)}
        assert chunks == set(range(nchunks))
        # each wave's instructions past the last chunk go to its own dump slot, the rest to the tile
        m0s = [L.dma_m0(w, i, nchunks, 0, g) for w in range(g.waves) for i in range(ndma)]
        assert len(set(m0s)) == len(m0s) and all(m < nchunks * 1024 or m >= g.lds_dump for m in m0s)
        cells = set()
        for c in range(nchunks):
            t = 64 * c + LANES
            row, col = L.dma_slot(LANES, c, slots, cols)
            for tt, r_, c_ in zip(t, row, col):
                assert 0 <= c_ < cols and r_ == tt // slots   # padding slots re-read a real column
                if tt % slots < cols:                  # not a padding slot
                    assert c_ == tt % slots
                    cells.add((int(r_), int(c_)))
        assert cells == {(r, c) for r in range(64) for c in range(cols)}


def test_geometries_fit_lds_and_aiter_launch():
    # aiter launches 512 threads (ts_qo 256) for d 128 and 256 threads (ts_qo 128) for d 192/128
    # (client/aiter_src/csrc/mha_fwd.cu: bdx; gfx950 fmha_fwd.csv: ts_qo); gfx950 LDS: 160 KiB.
    assert (L.HD128.waves * 64, L.HD128.block_q) == (512, 256)
    assert (L.HD192.waves * 64, L.HD192.block_q) == (256, 128)
    for g in GEOMS:
        assert g.lds_bytes <= 160 * 1024
        assert (len(g.lds_k), len(g.lds_v)) == (g.k_stages, g.v_stages) and g.lds_k[0] == 0
        assert all(b - a == 64 * g.k_stride for a, b in zip(g.lds_k, g.lds_k[1:] + (g.lds_v[0],)))
        assert all(b - a == 64 * g.v_stride for a, b in zip(g.lds_v, g.lds_v[1:] + (g.lds_dump,)))


def _bank_conflicts(byte_addrs, width):
    """Max number of distinct dword addresses that share a bank among lanes served together."""
    banks = {}
    for a in byte_addrs:
        for w in range(width // 4):
            dw = a // 4 + w
            banks.setdefault(dw % 64, set()).add(dw)
    return max(len(s) for s in banks.values())


@pytest.mark.parametrize("g", GEOMS, ids=GEOM_IDS)
def test_lds_padding_makes_the_fragment_reads_conflict_free(g):
    # ds_read_b128: 16 lanes per 256-byte bank sweep; ds_read_b64(_tr): 32 lanes.
    for kk in range(g.k_steps):
        addrs = L.k_read_addr(LANES, g.k_stride) + L.k_read_imm(0, kk, g.k_stride)
        for grp in range(4):
            assert _bank_conflicts(addrs[16 * grp:16 * grp + 16], 16) == 1
    for kk in range(4):
        for db in range(4):
            addrs = L.v_read_addr(LANES) + L.v_read_imm(db, kk, 0)
            for grp in range(2):
                assert _bank_conflicts(addrs[32 * grp:32 * grp + 32], 8) == 1


@pytest.mark.parametrize("g", GEOMS, ids=GEOM_IDS)
@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_k_and_q_fragments_give_s_transposed(dtype, g):
    rng = np.random.default_rng(2)
    d, row = g.d_qk, 2 * g.d_qk
    k = rnd(rng, (64, d), dtype)
    q = rnd(rng, (32, d), dtype)
    lds = np.zeros(g.lds_bytes, np.uint8)
    kg = L.f32_to_b16(k, dtype).view(np.uint8).reshape(-1)
    for w in range(g.waves):
        for i in range(g.k_dma):
            c = L.dma_chunk(w, i, g.k_chunks, g.waves)
            L.dma_x4(lds, L.dma_m0(w, i, g.k_chunks, g.lds_k[1], g), kg,
                     L.dma_voffset(LANES, c, g.k_slots, row, g.k_cols), kg.size)
    qg = L.f32_to_b16(q, dtype).view(np.uint8).reshape(-1)
    if g.d_qk == 128:                   # the kernel's load (load_q_regs) gives q_voffset's operands
        for kk, regs in enumerate(L.load_q_regs(qg, 0, row)):
            voff = L.q_voffset(LANES, 0, row) + L.q_imm(kk)
            assert np.array_equal(regs, np.stack([qg[o:o + 16].view(np.uint32) for o in voff]))
    for kb in range(2):
        acc = np.zeros((64, 16), np.float32)
        for kk in range(g.k_steps):
            a = L.ds_read_b128(lds, g.lds_k[1] + L.k_read_addr(LANES, g.k_stride) + L.k_read_imm(kb, kk, g.k_stride))
            voff = L.q_voffset(LANES, 0, row) + L.q_imm(kk)
            b = np.stack([qg[o:o + 16].view(np.uint32) for o in voff])
            acc = L.mfma_32x32x16(a, b, acc, dtype)
        ref = k[32 * kb:32 * kb + 32].astype(np.float64) @ q.T.astype(np.float64)
        np.testing.assert_allclose(L.mfma_d_decode(acc), ref, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_v_transpose_reads_and_p_packing_give_pv(dtype):
    rng = np.random.default_rng(3)
    v = rnd(rng, (64, 128), dtype)
    s_acc = rng.standard_normal((64, 32)).astype(np.float32)
    lds = np.zeros(L.LDS_BYTES, np.uint8)
    vg = L.f32_to_b16(v, dtype).view(np.uint8).reshape(-1)
    for w in range(8):
        for i in range(3):
            c = L.dma_chunk(w, i, L.V_CHUNKS)
            L.dma_x4(lds, L.LDS_V[0] + 1024 * c, vg, L.dma_voffset(LANES, c, L.V_SLOTS, 256), vg.size)
    # P[q][key] as the fragment holds it (keys of accumulator r in the two 32-key blocks).
    p = np.zeros((32, 64), np.float32)
    for lane in range(64):
        for col in range(32):
            kb, r = divmod(col, 16)
            p[lane % 32, L.s_key(lane, r, kb)] = L.b16_to_f32(L.f32_to_b16(s_acc[lane, col], dtype), dtype)
    pregs = L.pack_p(s_acc, dtype)
    keys = L.p_key(np.arange(16))                                            # the MFMA's k order
    assert sorted(keys) == list(range(16))
    for kk in range(4):
        bmat = L.mfma_ab_decode(pregs[:, 4 * kk:4 * kk + 4], dtype, "B")      # [k][q]
        assert np.array_equal(bmat, p[:, 16 * kk + keys].T)
    for db in range(4):
        acc = np.zeros((64, 16), np.float32)
        for kk in range(4):
            a = np.concatenate([L.ds_read_b64_tr_b16(lds, L.LDS_V[0] + L.v_read_addr(LANES) + L.v_read_imm(db, kk, t))
                                for t in range(2)], axis=1)
            assert np.array_equal(L.mfma_ab_decode(a, dtype, "A"), v[16 * kk + keys, 32 * db:32 * db + 32].T)
            acc = L.mfma_32x32x16(a, pregs[:, 4 * kk:4 * kk + 4], acc, dtype)
        ref = v[:, 32 * db:32 * db + 32].T.astype(np.float64) @ p.T.astype(np.float64)
        np.testing.assert_allclose(L.mfma_d_decode(acc), ref, rtol=1e-5, atol=1e-4)


def test_output_packing_gives_rows():
    rng = np.random.default_rng(4)
    o = rng.standard_normal((128, 32)).astype(np.float32)          # Oᵀ[d][q]
    out = np.zeros(32 * 256, np.uint8)
    for db in range(4):
        acc = L.mfma_d_encode(o[32 * db:32 * db + 32])
        for st, regs in enumerate(L.pack_o(acc, "bf16")):
            offs = L.o_voffset(LANES, 16 * st, 256) + L.o_imm(db)
            for lane in range(64):
                out[offs[lane]:offs[lane] + 16] = regs[lane].view(np.uint8)
            # one store: 16 rows x 64 contiguous bytes (16 lines of 128 B), not 32 rows x 32 bytes
            assert len(set(offs // 64)) == 16 and sorted(offs % 64) == sorted(list(range(0, 64, 16)) * 16)
    got = L.b16_to_f32(out.view(np.uint16).reshape(32, 128), "bf16")
    assert np.array_equal(got, L.b16_to_f32(L.f32_to_b16(o.T, "bf16"), "bf16"))


def _reference(q, k, v, scale, causal, q0, seqlen_k):
    s = (q.astype(np.float64) @ k[:seqlen_k].T.astype(np.float64)) * scale
    if causal:
        qi = q0 + np.arange(q.shape[0])[:, None]
        s = np.where(np.arange(seqlen_k)[None, :] <= qi, s, -np.inf)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    lse = np.log(p.sum(axis=1)) + s.max(axis=1)
    return (p / p.sum(axis=1, keepdims=True)) @ v[:seqlen_k].astype(np.float64), lse


@pytest.mark.parametrize("dtype,causal,seqlen_k,q0", [("bf16", False, 200, 0), ("bf16", True, 256, 64),
                                                      ("f16", True, 150, 96), ("bf16", False, 64, 0)])
def test_wave_forward_matches_attention(dtype, causal, seqlen_k, q0):
    rng = np.random.default_rng(5)
    q = rnd(rng, (32, 128), dtype)
    k = rnd(rng, (seqlen_k, 128), dtype)
    v = rnd(rng, (seqlen_k, 128), dtype)
    scale = 1.0 / np.sqrt(128)
    o, lse = L.wave_forward(q, k, v, dtype=dtype, scale=scale, causal=causal, q0=q0, seqlen_k=seqlen_k)
    ref, ref_lse = _reference(q, k, v, scale, causal, q0, seqlen_k)
    # Rounding the model performs: Q·scale·log2e to bf16 (rel 2^-9 per element, |S·log2e| ≲ 6 here
    # -> ≲ 0.01 absolute in the exponent), P to bf16 (2^-9 relative), O to bf16 (2^-9 relative).
    # |O| ≲ 1, so 2e-2 absolute bounds all three; a layout error is O(1).
    tol = 2e-2 if dtype == "bf16" else 5e-3
    np.testing.assert_allclose(o, ref, atol=tol, rtol=tol)
    np.testing.assert_allclose(lse, ref_lse, atol=tol, rtol=0)


# ---- fp8 (kernels/fa_fwd_fp8.py) ----------------------------------------------------------------
FP8_GEOMS = list(L.FP8_GEOMETRY.values())
FP8_IDS = [f"fp8_d{g.d_qk}" for g in FP8_GEOMS]


@pytest.mark.parametrize("g", FP8_GEOMS, ids=FP8_IDS)
def test_fp8_dma_magic_and_coverage(g):
    test_dma_division_magic_is_exact_for_every_slot(g)
    test_dma_covers_every_row_and_column_of_a_tile(g)
    assert g.lds_bytes <= 160 * 1024 and (g.k_swizzle or (g.k_stride // 4) % 8 == 4)


def _tr_b8(lds, addr):
    """ds_read_b64_tr_b8, notes §3.1 with E = 8: every lane reads 8 bytes; in block g,
    OUT[16g + j][r] = IN[16g + 2r + j//8][j % 8] (written out here, independently of the emulator)."""
    inp = np.stack([lds[a:a + 8] for a in addr])
    out = np.zeros((64, 8), np.uint8)
    for lane in range(64):
        g, j = lane // 16, lane % 16
        for r in range(8):
            out[lane, r] = inp[16 * g + 2 * r + j // 8, j % 8]
    return out


@pytest.mark.parametrize("g", FP8_GEOMS, ids=FP8_IDS)
def test_fp8_p_and_v_operands_agree_on_the_key_order(g):
    """P·V's B operand (P after pack_p: packed Sᵀ accumulators + permlane32 swap) and A operand (V by
    four tr_b8 reads) must put the same key at each k = 32*(lane//32) + byte of the f8f6f4 MFMA
    (A[i][k] byte k%32 of lane i + 32*(k//32), B[k][j] byte k%32 of lane j + 32*(k//32))."""
    rng = np.random.default_rng()
    # P: accumulator r of key block kb holds key s_key(lane, r, kb); give each (lane, key) its key id
    acc_key = np.array([[L.s_key(lane, r % 16, r // 16) for r in range(32)] for lane in range(64)])
    packed = np.zeros((64, 8, 4), np.int64)                   # regs X[0:7], 4 bytes each
    for kb in range(2):
        for m in range(4):
            for e in range(4):
                packed[:, 4 * kb + m, e] = acc_key[:, 16 * kb + 4 * m + e]
    for i in range(4):                                        # v_permlane32_swap X[i] (hi) <-> X[4+i] (lo)
        hi, lo = packed[32:, i].copy(), packed[:32, 4 + i].copy()
        packed[32:, i], packed[:32, 4 + i] = lo, hi
    p_key = packed.reshape(64, 32)                            # byte v of the lane's 32 = reg v//4, byte v%4
    for lane in range(64):
        assert list(p_key[lane]) == [32 * (lane // 32) + L.p_key_fp8(v) for v in range(32)]
    # V: a random fp8 tile in LDS (row stride v_stride; swizzled: as the DMA chunks deposit it) read
    # by the four tr_b8 of each d block
    vt = rng.integers(0, 256, (64, g.d_v), dtype=np.uint8)
    lds = _tile_in_lds(g, vt)
    sw = g.v_swizzle
    for db in range(g.d_v // 32):
        a_op = np.concatenate([_tr_b8(lds, L.v_read_addr_fp8(LANES, g.v_stride, db, sw)
                                      + L.v_read_imm_fp8(db, t, g.v_stride, sw)) for t in range(4)], axis=1)
        for lane in range(64):
            assert np.array_equal(a_op[lane], vt[p_key[lane], 32 * db + lane % 32])


def _tile_in_lds(g, tile, tensor="v"):
    """LDS bytes of a K or V tile [64 keys, d]: padded rows, or (swizzled) what the DMA writes: lane l
    of chunk c puts global row/16-byte column dma_slot_swizzled(l, c) at LDS 1024c + 16l."""
    stride, swz = (g.k_stride, g.k_swizzle) if tensor == "k" else (g.v_stride, g.v_swizzle)
    lds = np.zeros(64 * stride + 64, np.uint8)
    if not swz:
        for key in range(64):
            lds[key * stride:key * stride + tile.shape[1]] = tile[key]
        return lds
    for c in range(64 * stride // L.DMA_CHUNK):
        row, col = L.dma_slot_swizzled(LANES, c, tensor)
        for lane in range(64):
            a = L.DMA_CHUNK * c + 16 * lane
            lds[a:a + 16] = tile[row[lane], 16 * col[lane]:16 * col[lane] + 16]
    return lds


@pytest.mark.parametrize("tensor", ["k", "v"])
def test_fp8_swizzled_dma_is_a_permutation_of_the_tile(tensor):
    """hd128 fp8 K and V: one DMA per wave (8 chunks of 8 unpadded rows), every (row, 16-byte column) once."""
    g = L.FP8_HD128
    assert g.k_swizzle and g.v_swizzle
    assert (g.k_stride, g.k_chunks, g.k_dma, g.v_stride, g.v_chunks, g.v_dma) == (128, 8, 1, 128, 8, 1)
    cells = [(int(r), int(c)) for ch in range(8) for r, c in zip(*L.dma_slot_swizzled(LANES, ch, tensor))]
    assert sorted(cells) == [(r, c) for r in range(64) for c in range(8)]
    # the swizzle moves 16-byte slots within a row only: the lane's LDS byte (the DMA writes chunk ch,
    # lane l at DMA_CHUNK*ch + 16*l) lies in the unpadded row of the cell it carries
    stride = g.k_stride if tensor == "k" else g.v_stride
    assert all(r == (L.DMA_CHUNK * ch + 16 * lane) // stride for ch in range(8)
               for lane, r in enumerate(L.dma_slot_swizzled(LANES, ch, tensor)[0]))


def test_fp8_swizzled_k_reads_get_the_mfma_operand_and_are_conflict_free():
    """K as the f8f6f4 A operand (lane reads row lane%32 + 32kb, bytes 64kk + 32*(lane//32) + 16*part,
    16 each) out of the DMA-swizzled tile; each b128 read serves 16 lanes per phase conflict-free."""
    g = L.FP8_HD128
    kt = np.random.default_rng().integers(0, 256, (64, g.d_qk), dtype=np.uint8)
    lds = _tile_in_lds(g, kt, "k")
    for kb in range(2):
        for kk in range(g.k_steps):
            for part in range(2):
                addrs = L.k_read_addr_fp8_swizzled(LANES, kk, part, g.k_stride) + \
                    L.k_read_imm_fp8(kb, kk, part, g.k_stride, True)
                got = np.stack([lds[a:a + 16] for a in addrs])
                want = np.stack([kt[32 * kb + lane % 32, 64 * kk + 32 * (lane // 32) + 16 * part:][:16]
                                 for lane in LANES])
                assert np.array_equal(got, want)
                assert [_bank_conflicts(addrs[16 * grp:16 * grp + 16], 16) for grp in range(4)] == [1] * 4


@pytest.mark.parametrize("g", FP8_GEOMS, ids=FP8_IDS)
def test_fp8_v_tr_reads_conflicts(g):
    """ds_read_b64_tr_b8 serves 32 lanes (256 bytes) together: the swizzled hd128 V is conflict-free;
    the padded hd256 V (272-byte rows) two-way, as any 16-byte-multiple stride (fa_layouts.v_chunk_xor_fp8)."""
    want = 1 if g.v_swizzle else 2
    for db in range(g.d_v // 32):
        for t in range(4):
            addrs = L.v_read_addr_fp8(LANES, g.v_stride, db, g.v_swizzle) + \
                L.v_read_imm_fp8(db, t, g.v_stride, g.v_swizzle)
            assert [_bank_conflicts(addrs[32 * h:32 * h + 32], 8) for h in range(2)] == [want, want]


def test_no_padded_v_stride_avoids_the_tr_b8_conflict():
    """Why hd128 swizzles: every row stride of 128 + 16k bytes (k = 0..15) has a two-way conflict."""
    for stride in range(128, 384, 16):
        addrs = L.v_read_addr_fp8(LANES, stride) + L.v_read_imm_fp8(0, 0, stride)
        assert _bank_conflicts(addrs[:32], 8) >= 2, stride


@pytest.mark.parametrize("g", [g for g in FP8_GEOMS if not g.k_swizzle])
def test_fp8_k_reads_are_conflict_free(g):
    for kk in range(g.k_steps):
        for part in range(2):
            addrs = L.k_read_addr_fp8(LANES, g.k_stride) + L.k_read_imm_fp8(0, kk, part, g.k_stride)
            for grp in range(4):
                assert _bank_conflicts(addrs[16 * grp:16 * grp + 16], 16) == 1
