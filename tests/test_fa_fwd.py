"""kernels/fa_fwd.py: every variant builds; the kernel runs in the CPU emulator against torch.

Tolerances from the arithmetic (bf16: 8-bit mantissa, unit roundoff u = 2^-9 = 0.00195):
  * only with q_prescale=True: Q·scale·log2e is rounded to bf16 once (|δ| ≤ u per element): with
    D = 128 random-normal inputs the exponent S·scale·log2e moves by ~1e-3 (std), i.e. P by ~0.1 %
    relative -- but proportionally more for large scores, so the large-score test
    (test_lazy_rescale_taken_and_skipped) runs the default path (scale applied in v_fma_f32);
  * P is rounded to bf16 before P·V (u relative per element; errors average over the keys);
  * O is rounded to bf16 at the end (u relative, |O| < 1 here -> ≤ 0.002 absolute);
  * the emulator's v_exp_f32 / v_rcp_f32 / MFMA fp32 accumulation add ~1e-6.
The sum is below 1e-2 absolute; we assert atol = rtol = 1e-2 for bf16 (the same bound the numpy
fragment model meets) and 4x tighter for f16 (3 more mantissa bits).
LSE has no output rounding; with q_prescale it carries the Q-scaling error of the dominant scores: per
score σ ≈ u/√3 · scale·log2e · √(Σ_d (q_d k_d)²) ≈ 1.6e-3 (log2 units) = 1.1e-3 (ln units); the max
over ~10^3 rows is ≈ 3.5σ ≈ 4e-3, so LSE gets atol 1e-2 (≈ 9σ) for bf16, 2.5e-3 for f16; without
q_prescale LSE sees no input rounding beyond the inputs themselves: atol 1e-4.
A wrong layout, mask or rescale gives O(0.1..1) errors.
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kernels"))
import fa_fwd  # noqa: E402
import fa_grid  # noqa: E402

TOL = {torch.bfloat16: 1e-2, torch.float16: 2.5e-3}


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("aiter_args", [False, True])
def test_variants_build(tmp_path, dtype, causal, aiter_args):
    k = fa_fwd.build(dtype=dtype, causal=causal, num_heads=8, num_kv_heads=2, aiter_args=aiter_args)
    res = k.build(tmp_path)                     # runs the static checker: zero findings or CheckError
    assert res.co_path.exists()
    from flyasm.check import check_kernel
    assert check_kernel(k) == []
    d = k.descriptor()
    assert d["arch_vgprs"] == 256 and d["group_segment_fixed_size"] >= fa_fwd.L.LDS_BYTES
    if aiter_args:                              # aiter's fmha_fwd_v3_args: 41 fields in 16-byte slots
        off = {a.name: a.offset for a in k.args}
        assert (off["o"], off["q"], off["lse"], off["scale"], off["seqlen_q"], off["gqa"], off["k_ss"],
                off["has_lse"], off["seqlen_k"], off["v_ss"], off["o_ss"], off["o_bs"], off["qseq"], off["kseq"],
                off["lse_hs"], off["qseq_pad"], off["v_descale"], off["dv_hs"]) == \
            (0, 16, 64, 80, 96, 176, 192, 256, 272, 336, 384, 416, 432, 448, 464, 480, 544, 640)
        assert k.kernarg_size == 656


def _inputs(b, hq, hkv, sq, sk, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    mk = lambda *s: torch.randn(*s, generator=g).to(dtype)  # noqa: E731
    return mk(b, hq, sq, 128), mk(b, hkv, sk, 128), mk(b, hkv, sk, 128)


def _check(q, k, v, causal, scale=None, aiter_args=False, q_prescale=False, align="top_left"):
    out, lse = fa_fwd.run(q, k, v, causal=causal, scale=scale, aiter_args=aiter_args, q_prescale=q_prescale,
                          align=align)
    ref, ref_lse = fa_fwd.reference(q, k, v, causal=causal, scale=scale, align=align)
    tol = TOL[q.dtype]
    assert not torch.isnan(out).any() and not torch.isnan(lse).any()
    err = (out.float() - ref).abs().max().item()
    torch.testing.assert_close(out.float(), ref, atol=tol, rtol=tol)
    # default path: no rounding of S at all -> only fp32 sums and 1-ULP exp2/log2 (~1e-5 absolute)
    torch.testing.assert_close(lse, ref_lse, atol=tol if q_prescale else 1e-4, rtol=0)
    return err


@pytest.mark.parametrize("causal,q_prescale", [
    (False, False), (True, True),
    # the mixed two (~30 s each) run under `make test-all`: each option is covered by the two above
    pytest.param(True, False, marks=pytest.mark.slow), pytest.param(False, True, marks=pytest.mark.slow)])
def test_gqa_ragged_bf16(causal, q_prescale):
    # 8 query heads over 2 KV heads, seq 320 = one full 256-row tile + 64 rows; keys 200 (not x64)
    q, k, v = _inputs(1, 8, 2, 320, 200 if not causal else 320, torch.bfloat16, seed=11)
    _check(q, k, v, causal, q_prescale=q_prescale)


def test_batch2_f16_scale():
    q, k, v = _inputs(2, 2, 1, 256, 130, torch.float16, seed=12)
    _check(q, k, v, False, scale=0.05)


@pytest.mark.slow
@pytest.mark.parametrize("causal", [False, True])
def test_bigger_bf16(causal):
    q, k, v = _inputs(2, 4, 4, 700, 700, torch.bfloat16, seed=13)
    _check(q, k, v, causal)


def test_aiter_argument_layout_runs():
    # aiter's struct and grid, causal bottom-right (aiter's mask 2) with seqlen_q > seqlen_k: the
    # first 160 queries see no key (O = 0), GQA 2 read from s_gqa
    q, k, v = _inputs(1, 2, 1, 256, 96, torch.bfloat16, seed=14)
    out, lse = fa_fwd.run(q, k, v, causal=True, aiter_args=True)
    ref, ref_lse = fa_fwd.reference(q, k, v, causal=True, align="bottom_right")
    torch.testing.assert_close(out.float(), ref, atol=TOL[q.dtype], rtol=TOL[q.dtype])
    assert (out[:, :, :160] == 0).all() and torch.isneginf(lse[:, :, :160]).all()
    torch.testing.assert_close(lse[:, :, 160:], ref_lse[:, :, 160:], atol=1e-4, rtol=0)


def test_natural_bottom_right_causal():
    q, k, v = _inputs(1, 1, 1, 100, 180, torch.bfloat16, seed=16)
    _check(q, k, v, True, align="bottom_right")


def test_lazy_rescale_taken_and_skipped():
    # Keys of later tiles score far higher (x4 per 64 keys): the running max jumps by >> 2^8 at
    # tiles 1..3 of some rows (O must be rescaled) while other tiles stay below the threshold.
    q, k, v = _inputs(1, 1, 1, 256, 256, torch.bfloat16, seed=15)
    ramp = torch.tensor([1.0, 4.0, 1.0, 8.0]).repeat_interleave(64)[None, None, :, None]
    k = (k.float() * ramp).to(torch.bfloat16)
    q = (q.float() * 2).to(torch.bfloat16)
    scores = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(128) * 1.4426950408889634
    tile_max = scores.reshape(256, 4, 64).amax(-1)[0] if scores.dim() == 3 else scores[0, 0].reshape(256, 4, 64).amax(-1)
    grows = (tile_max[:, 1:] - torch.cummax(tile_max, 1).values[:, :-1]) > 8
    assert grows.any() and (~grows).any()      # both paths of the lazy rescale are exercised
    _check(q, k, v, False)


# ---- head dim 192 (Q/K) with V/O head dim 128: aiter's hd192/hd128 keys ---------------------------
@pytest.mark.parametrize("causal,group", [(False, False), (True, True)])
def test_hd192_variants_build(tmp_path, causal, group):
    k = fa_fwd.build(aiter_args=True, causal=causal, group=group, head_dim=192)
    assert k.build(tmp_path).co_path.exists()
    from flyasm.check import check_kernel
    assert check_kernel(k) == []
    d = k.descriptor()
    # 4 waves (aiter launches hd192 with 256 threads): Q's 48 registers live in AGPRs
    assert k.block[0] == 256 and d["arch_vgprs"] == 256 and d["agprs"] == 48
    assert d["group_segment_fixed_size"] >= fa_fwd.L.HD192.lds_bytes and k.kernarg_size == 656
    with pytest.raises(ValueError, match="head dim 128 only"):
        fa_fwd.build(head_dim=192, stagger=True)
    with pytest.raises(ValueError, match="128 or 192"):
        fa_fwd.build(head_dim=256)


def test_hd192_gqa_ragged_aiter_args():
    # d 192 Q/K, d 128 V; GQA 2; 150 queries = one full 128-row tile + 22 rows; 100 keys (not x64).
    # Same arithmetic as the d-128 tolerances (module docstring): S sums 192 products in fp32 (exact
    # bf16 products, fp32 sums: ~1e-6 relative), so O stays within 1e-2 and LSE within 1e-4.
    g = torch.Generator().manual_seed(21)
    mk = lambda *s: torch.randn(*s, generator=g).bfloat16()  # noqa: E731
    q, k, v = mk(1, 2, 150, 192), mk(1, 1, 100, 192), mk(1, 1, 100, 128)
    out, lse = fa_fwd.run(q, k, v, aiter_args=True, scale=0.8 / math.sqrt(192))
    ref, ref_lse = fa_fwd.reference(q, k, v, scale=0.8 / math.sqrt(192))
    assert out.shape == (1, 2, 150, 128) and not torch.isnan(out).any()
    torch.testing.assert_close(out.float(), ref, atol=TOL[q.dtype], rtol=TOL[q.dtype])
    torch.testing.assert_close(lse, ref_lse, atol=1e-4, rtol=0)


def test_xcd_map_gives_each_xcd_whole_heads():
    # workgroup L of a batch runs on XCD L % 8 (dispatch order, x fastest): with the map an XCD's
    # items are whole heads, and every item is computed once
    for X, H in ((32, 64), (16, 64), (3, 8), (5, 3)):
        z, y, x = np.indices((2, H, X)).reshape(3, -1)
        tx, ty, tz = fa_grid.xcd_item((X, H, 2), x, y, z)
        assert len(set(zip(tx, ty, tz))) == len(x) and tx.max() < X and ty.max() < H
        if X * H % 8 == 0:
            xcd = (x + X * y) % 8
            for c in range(8):
                heads = ty[(xcd == c) & (z == 0)]
                assert np.bincount(heads, minlength=H)[np.unique(heads)].min() == X     # whole heads only
        else:
            assert (tx == x).all() and (ty == y).all()


def test_group_xcd_map_runs_a_heads_tiles_together():
    # aiter's group grid (heads, batch, Z): workgroup L = x + H*(y + B*z) runs on XCD L % 8 = x % 8 (8 | H).
    # The map keeps each workgroup's batch, computes every item once, gives each XCD a contiguous eighth
    # of the heads, and the workgroups an XCD receives in a row are one head's consecutive tiles
    # (unmapped: all different heads)
    for H, B, Z in ((64, 16, 32), (16, 3, 5), (8, 2, 1), (128, 2, 4), (12, 2, 3)):
        z, y, x = np.indices((Z, B, H)).reshape(3, -1)           # dispatch order, x fastest
        hx, by, tz = fa_grid.xcd_item_group((H, B, Z), x, y, z)
        assert len(set(zip(hx, by, tz))) == len(x) and hx.max() < H and tz.max() < Z and (by == y).all()
        if H % 8:
            assert (hx == x).all() and (tz == z).all()
            continue
        assert (hx // (H // 8) == x % 8).all()                  # XCD c (= x % 8) computes heads c*H/8 ...
        xcd = (x + H * (y + B * z)) % 8
        n = H // 8                                              # an XCD's workgroups of one batch and tile
        for c in range(8):
            heads, tiles = hx[xcd == c], tz[xcd == c]
            for i in range(0, len(heads), n):                   # unmapped: n different heads
                h, t = heads[i:i + n], tiles[i:i + n]
                assert len(set(h)) <= -(-n // Z) + 1            # mapped: a run of a head's tiles (n > Z: whole heads)
                for one in set(h):
                    assert (np.diff(t[h == one]) == 1).all()    # consecutive tiles
                if Z % n == 0:
                    assert len(set(h)) == 1


def test_xcd_map_matches_torch():
    # aiter's causal launch (tile pairs): 3 tiles -> 2 pairs x 4 heads = 8 workgroups a batch, remapped
    q, k, v = _inputs(2, 4, 2, 600, 600, torch.bfloat16, seed=13)
    kern = fa_fwd.build("bf16", True, 4, 2, aiter_args=True, xcd_map=True)
    out, lse = fa_fwd.run(q, k, v, causal=True, kernel=kern, aiter_args=True)
    ref, ref_lse = fa_fwd.reference(q, k, v, causal=True, align="bottom_right")
    torch.testing.assert_close(out.float(), ref, atol=TOL[q.dtype], rtol=TOL[q.dtype])
    torch.testing.assert_close(lse, ref_lse, atol=1e-4, rtol=0)
