"""The lane maps of kernels/fa_bwd.py (kernels/fa_bwd_layouts.py) against the MFMA operand encodings.

Random bf16 tiles go through the DMA map into a swizzled LDS image, and every read the kernel makes
(ds_read_b128 and ds_read_b64_tr_b16 at base + immediate) must give exactly the MFMA operand of the
intended sub-matrix (kernels/fa_layouts' encodings of notes §2): a wrong lane map moves values, so
the comparisons are exact. The bank-conflict cost of each read comes from the timing model's own
count (flyasm.perf.trace.lds_cycles): a b128 read of 64 lanes takes 4 LDS cycles at best (16 lanes
per cycle), an 8-byte one 2.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from flyasm.perf.trace import lds_cycles  # noqa: E402
from kernels import fa_bwd_layouts as B  # noqa: E402
from kernels import fa_layouts as FL  # noqa: E402

LANES = np.arange(64)


def rnd_bf16(rng, shape):
    return FL.f32_to_b16(rng.standard_normal(shape).astype(np.float32), "bf16")


def cycles(addr, nbytes):
    return int(lds_cycles(np.asarray(addr, np.int64)[None, :], np.ones((1, 64), bool), nbytes)[0])


def test_division_by_20_is_exact_for_every_slot():
    t = np.arange(B.K_CHUNKS * 64)
    magic, shift = B.DIV20
    assert np.array_equal((t * magic) >> shift, t // B.SLOTS)


@pytest.mark.parametrize("rows,chunks", [(B.BLOCK_KV, B.K_CHUNKS), (B.BLOCK_Q, B.Q_CHUNKS)])
def test_dma_writes_every_data_slot_once_with_its_swizzled_column(rows, chunks):
    seen = {}
    for c in range(chunks):
        row, col, pad = B.dma_slot(LANES, c)
        off = B.dma_voffset(LANES, c, 512)
        for lane in range(64):
            ps = (64 * c + lane) % B.SLOTS
            assert int(row[lane]) == (64 * c + lane) // B.SLOTS and bool(pad[lane]) == (ps >= 16)
            if ps < 16:
                seen[(int(row[lane]), int(col[lane]))] = ps
                assert ps == int(col[lane]) ^ int(B.slot_xor(row[lane]))
            else:                                        # padding fetches nothing
                assert off[lane] == B.OUT_OF_RANGE
    assert len(seen) == rows * 16


def test_qd_chunks_split_uniformly_over_the_waves():
    got = sorted(B.qd_chunk(w, i) for w in range(B.WAVES) for i in range(B.QD_DMA))
    assert got == sorted([("q", c) for c in range(B.Q_CHUNKS)] + [("do", c) for c in range(B.Q_CHUNKS)])


def _tile_lds(rng, rows, base):
    """A random [rows, 128] bf16 tile (global row stride 512 B: a padded tensor) DMA'd to LDS at base."""
    mat = rnd_bf16(rng, (rows, 256))                       # 256 b16 per global row: 128 data + padding
    lds = B.lds_tile(mat.view(np.uint8).reshape(-1), rows, 512, rows * B.ROW // B.DMA_CHUNK, base)
    return mat[:, :128], lds


def test_b128_reads_give_s_operands_and_are_conflict_free():
    rng = np.random.default_rng(3)
    q, lds = _tile_lds(rng, B.BLOCK_Q, B.QD_BUF[1])
    kt, lds_k = _tile_lds(rng, B.BLOCK_KV, B.K_BASE)
    for kk in range(8):
        a = FL.ds_read_b128(lds, B.QD_BUF[1] + B.b128_base(LANES, kk % 2) + B.b128_imm(kk))
        qf = FL.b16_to_f32(q[:, 16 * kk:16 * kk + 16], "bf16")          # A[i=q][k=d]
        assert np.array_equal(a, FL.mfma_ab_encode(qf, "bf16", "A"))
        for w in range(B.WAVES):
            for kb in range(2):
                row0 = 64 * w + 32 * kb
                addr = B.K_BASE + B.b128_base(LANES, kk % 2, 64 * w) + B.b128_imm(kk, 32 * kb)
                b = FL.ds_read_b128(lds_k, addr)
                kf = FL.b16_to_f32(kt[row0:row0 + 32, 16 * kk:16 * kk + 16], "bf16")   # B[k=d][j=key]
                assert np.array_equal(b, FL.mfma_ab_encode(kf.T, "bf16", "B"))
                assert cycles(addr, 16) == 4
        assert cycles(B.b128_base(LANES, kk % 2) + B.b128_imm(kk), 16) == 4


def _tr_operand(lds, base_of_t, imm):
    return np.concatenate([FL.ds_read_b64_tr_b16(lds, base_of_t(t) + imm) for t in range(2)], axis=1)


def test_tr_reads_give_transposed_operands_and_are_conflict_free():
    rng = np.random.default_rng(4)
    dout, lds = _tile_lds(rng, B.BLOCK_Q, B.QD_BUF[0] + B.DO_OFF)
    for kq in range(2):
        for db in range(4):
            imm = B.QD_BUF[0] + B.DO_OFF + B.tr_imm(db, kq)
            got = _tr_operand(lds, lambda t: B.tr_base(LANES, t), imm)
            # A[i=d][k]: dOᵀ, d block db, query 16kq + K_ORDER[k]
            want = FL.b16_to_f32(dout[[16 * kq + r for r in B.K_ORDER], 32 * db:32 * db + 32], "bf16").T
            assert np.array_equal(got, FL.mfma_ab_encode(want, "bf16", "A"))
            for t in range(2):
                assert cycles(B.tr_base(LANES, t) + imm, 8) == 2
    k, lds = _tile_lds(rng, B.BLOCK_KV, B.K_BASE)
    for w in range(B.WAVES):                          # dQ's K operand: B[k=key][j=d], d block = the wave's
        for kk in range(16):
            got = _tr_operand(lds, lambda t: B.K_BASE + B.tr_base(LANES, t), B.tr_imm(w, kk))
            want = FL.b16_to_f32(k[[16 * kk + r for r in B.K_ORDER], 32 * w:32 * w + 32], "bf16")
            assert np.array_equal(got, FL.mfma_ab_encode(want, "bf16", "B"))


def test_ds_goes_through_lds_from_packed_b_operands_to_the_dq_operand():
    """dS accumulators (D[i=q][j=key] of each wave's two key blocks) -> pack_b -> b128 writes ->
    tr reads (packed_cols) = A[i=q][k] of dQ = dS·K over all 256 keys, keys in K_ORDER (K's operand is
    read in the same order); the writes are conflict-free."""
    rng = np.random.default_rng(5)
    ds = FL.b16_to_f32(rnd_bf16(rng, (B.BLOCK_Q, B.BLOCK_KV)), "bf16")     # [q, key]
    lds = np.zeros(B.LDS_BYTES, np.uint8)
    buf = B.DS_BUF[1]
    for w in range(B.WAVES):
        for kb in range(2):
            keys = slice(64 * w + 32 * kb, 64 * w + 32 * kb + 32)
            packed = B.pack_b(FL.mfma_d_encode(ds[:, keys]), "bf16")         # regs 4kq..4kq+3
            for kq in range(2):
                addr = buf + B.ds_write_base(LANES, kq) + B.ds_write_imm(w, kb)
                regs = packed[:, 4 * kq:4 * kq + 4]
                for lane in range(64):
                    lds[addr[lane]:addr[lane] + 16] = regs[lane].view(np.uint8)
                assert cycles(addr, 16) == 4
    for kk in range(16):
        base = lambda t: buf + B.tr_base(LANES, t, B.DS_ROW, packed_cols=True)      # noqa: E731
        got = _tr_operand(lds, base, B.tr_imm(0, kk, B.DS_ROW))
        want = ds[:, [16 * kk + r for r in B.K_ORDER]]                       # A[i=q][k]: key 16kk + K_ORDER[k]
        assert np.array_equal(got, FL.mfma_ab_encode(want, "bf16", "A"))
        for t in range(2):
            assert cycles(base(t) + B.tr_imm(0, kk, B.DS_ROW), 8) == 2


def test_packing_gives_the_b_operands_of_the_query_k_steps():
    """pack_b of a tile's accumulators = the MFMA B operand B[k][j=key] with k over queries in K_ORDER."""
    rng = np.random.default_rng(6)
    t = FL.b16_to_f32(rnd_bf16(rng, (32, 32)), "bf16")                       # [q, key], representable
    regs = B.pack_b(FL.mfma_d_encode(t), "bf16")
    assert sorted(B.K_ORDER) == list(range(16))
    for kq in range(2):
        want = t[[16 * kq + r for r in B.K_ORDER]]
        assert np.array_equal(regs[:, 4 * kq:4 * kq + 4], FL.mfma_ab_encode(want, "bf16", "B"))


def test_lse_reads_match_the_accumulator_rows():
    """ST slot of a wave: 64 floats by one buffer_load_dword ... lds (lane l -> query l % 32); the
    b128 read of group g gives accumulator 4g + e the value of its query 8g + 4h + e."""
    vals = np.arange(32, dtype=np.float32) * 1.5 - 7.0
    for w in range(B.WAVES):
        for buf in range(2):
            lds = np.zeros(B.LDS_BYTES, np.uint8)
            slot = B.ST_BASE + B.WAVES * B.ST_SLOT * buf + B.ST_SLOT * w
            lds[slot:slot + 256] = np.tile(vals, 2).view(np.uint8)
            for g in range(4):
                got = FL.ds_read_b128(lds, B.st_base(LANES, w) + B.st_imm(buf, g, False)).view(np.float32)
                for r in range(4):
                    q = 8 * g + 4 * (LANES // 32) + r
                    assert np.array_equal(got[:, r], vals[q])
