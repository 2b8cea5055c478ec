"""kernels/fa_bwd.py, the dQ/dK/dV kernel of aiter's backward pipeline: aiter's host code resolves every
hd128 key of its gfx950 manifest to it, and the whole call (our pre kernel, this kernel, our post kernel)
matches torch autograd in the strict emulator.

The set is kernels/fa_bwd_set.py, built once. Each case runs one call through the backward harness
(benchmarks/aiter_launch.run_bwd_call: aiter's own host code packs the three launches, kernarg bytes,
grids and the zero-filled dq workspace, with the bytes aiter leaves unset holding a pattern; outputs
start as NaN) and compares dQ, dK, dV (summed over each GQA group) and dK, dV per query head with the
float64 autograd of SDPA, within the per-element bounds tests/attn_bwd_ref.py derives from the roundings
of aiter's pipeline (P and dS rounded to the MFMA type, D from the rounded O, the outputs, and for
atomic16 the running dQ sum rounded at each of the ceil(S_k/256) key tiles' adds).

Default run: one case per feature (mask 0/1/2, atomic32 0/1, batch/group, GQA 1/2/4, bf16/fp16), small
shapes, ragged lengths, S_q != S_k for both causal alignments; @slow: every one of the 24 keys, GQA 8.
"""
from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from attn_bwd_ref import bounds, grads
from conftest import drop_in_missing

REPO = Path(__file__).resolve().parents[1]
DROP_IN_BWD = REPO.parent / "shared" / "aiter" / "client" / "drop_in_bwd.sh"
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "kernels"))
import aiter_launch as AL  # noqa: E402
import fa_bwd  # noqa: E402

WHY = drop_in_missing(DROP_IN_BWD)
pytestmark = [pytest.mark.skipif(WHY is not None, reason=WHY or ""), pytest.mark.xdist_group("fa_bwd_set")]
DT = {"bf16": torch.bfloat16, "fp16": torch.float16}
NAMES = ("dq", "dk", "dv", "dk_heads", "dv_heads")


@pytest.fixture(scope="module")
def kset(tmp_path_factory):
    from flyasm.dispatch import build_set
    out = tmp_path_factory.mktemp("fa_bwd_set")
    build_set(str(REPO / "kernels" / "fa_bwd_set.py"), out, jobs=2, progress=False)    # checked builds
    return out


def test_lookup_resolves_every_hd128_key_to_our_kernels(kset):
    r = subprocess.run(["bash", str(DROP_IN_BWD), str(kset), "lookup"], capture_output=True, text=True, timeout=600)
    lines = [ln for ln in r.stdout.splitlines() if "hdim 128/128" in ln]
    assert len(lines) == 2 * 3 * 2 * 2 * 2, r.stdout + r.stderr            # dtype mask a32 mode x 2 seqlens
    for ln in lines:
        key = dict(zip(ln.split()[3::2], ln.split()[4::2]))                  # mask, atomic32, bf16_cvt, mode
        want = fa_bwd.build_name(ln.split()[0], int(key["mask"]), int(key["atomic32"]), int(key["mode"][0]))
        assert f"dqdkdv {want} fmha_v3_bwd/{want}.co" in ln, ln
    assert "missing" not in r.stdout and "has no symbol" not in r.stdout


def run(kset, dtype, mask, atomic32, seqs, hq, hk, group, seed, ref_mask=None, main=None):
    """One call through the harness; {name: (max |err|, max |err| / bound, max |reference|)} against the
    reference for ref_mask (default: the call's mask); seqs = [(S_q, S_k)] (batch mode: one entry, its
    batch `len` times when given as a list of equal pairs); main: a variant of the key's dq/dk/dv
    kernel (fa_bwd.build with levers) run in its place."""
    g = torch.Generator().manual_seed(seed)
    dt = DT[dtype]
    scale = 1.0 / math.sqrt(128)
    rnd = lambda *shape: torch.randn(*shape, generator=g).to(dt)    # noqa: E731
    if group:
        tq, tk = sum(a for a, _ in seqs), sum(b for _, b in seqs)
        q, do, k, v = rnd(tq, hq, 128), rnd(tq, hq, 128), rnd(tk, hk, 128), rnd(tk, hk, 128)
        starts = [torch.tensor([0] + [sum(x[i] for x in seqs[:j + 1]) for j in range(len(seqs))], dtype=torch.int32)
                  for i in (0, 1)]
        rows = [(slice(int(starts[0][j]), int(starts[0][j + 1])), slice(int(starts[1][j]), int(starts[1][j + 1])))
                for j in range(len(seqs))]
        pick = lambda t, j, a: t[rows[j][a]]                        # noqa: E731
    else:
        (sq, sk), b = seqs[0], len(seqs)
        q, do, k, v = rnd(b, sq, hq, 128), rnd(b, sq, hq, 128), rnd(b, sk, hk, 128), rnd(b, sk, hk, 128)
        starts = [None, None]
        pick = lambda t, j, a: t[j]                                 # noqa: E731
    refs = [grads(pick(q, j, 0), pick(k, j, 1), pick(v, j, 1), pick(do, j, 0), scale, mask) for j in range(len(seqs))]
    if group:
        o = torch.cat([r["o"] for r in refs]).to(dt)
        lse = torch.cat([r["lse"] for r in refs], -1).float()
    else:
        o = torch.stack([r["o"] for r in refs]).to(dt)
        lse = torch.stack([r["lse"] for r in refs]).float()
    res = AL.run_bwd_call(kset, q, k, v, o, do, lse, mask_type=mask, atomic32=int(atomic32), scale=scale,
                          seqstart_q=starts[0], seqstart_k=starts[1], main=main)
    ran = res["launches"][1].knl_name
    assert ran == (main.name if main else fa_bwd.build_name(dtype, mask, atomic32, group)), ran
    out = {}
    for j, (a, b_) in enumerate(seqs):
        ref = refs[j] if ref_mask is None else grads(pick(q, j, 0), pick(k, j, 1), pick(v, j, 1), pick(do, j, 0),
                                                     scale, ref_mask)
        bd = bounds(pick(q, j, 0), pick(k, j, 1), pick(v, j, 1), pick(o, j, 0), pick(do, j, 0),
                    lse[..., rows[j][0]] if group else lse[j], ref, scale, None if atomic32 else -(-b_ // 256))
        for n in NAMES:
            got = pick(res[n], j, 0 if n == "dq" else 1).double()
            assert not torch.isnan(got).any(), f"{n}: NaN (unwritten, or a NaN in the math)"
            err = (got - ref[n]).abs()
            prev = out.get(n, (0.0, 0.0, 0.0))
            out[n] = (max(prev[0], float(err.max())), max(prev[1], float((err / bd[n]).max())),
                      max(prev[2], float(ref[n].abs().max())))
    return out


def check(res, label=""):
    print(f"\n{label}: " + ", ".join(f"{n} max|err| {e:.2e} ({r:.2f} of its bound; max|{n}| {m:.2f})"
                                      for n, (e, r, m) in res.items()))
    for n, (err, ratio, mag) in res.items():
        assert mag > 1e-2, f"{n}: the reference is ~0, the comparison would prove nothing"
        assert ratio <= 1.0, f"{n}: max |err| {err:.3g} exceeds its bound ({ratio:.2f}x; max |{n}| {mag:.3g})"


def test_bf16_no_mask_a32_batch2_gqa2_ragged(kset):
    check(run(kset, "bf16", 0, True, [(200, 300)] * 2, hq=4, hk=2, group=False, seed=1), "bf16 mask0 a32 batch")


def test_fp16_bottom_right_a16_gqa4_rows_that_see_no_key(kset):
    """S_q > S_k bottom-right: queries 0..99 see no key (LSE -inf: zero gradients, no NaN). The same
    outputs against the top-left reference are far out of bounds: the comparison sees the diagonal."""
    seqs = [(300, 200)]
    check(run(kset, "fp16", 2, False, seqs, hq=4, hk=1, group=False, seed=2), "fp16 mask2 a16 batch")
    wrong = run(kset, "fp16", 2, False, seqs, hq=4, hk=1, group=False, seed=2, ref_mask=1)
    assert max(r for _, r, _ in wrong.values()) > 10


def test_bf16_top_left_a32_group_three_sequences(kset):
    check(run(kset, "bf16", 1, True, [(100, 300), (37, 20), (260, 257)], hq=2, hk=2, group=True, seed=3),
          "bf16 mask1 a32 group")


def test_xcd_map_remapped_causal_launch(kset):
    """build(xcd_map=True): aiter's causal grid, ceil(3 tiles / 2) x 8 heads = 16 workgroups, each
    computing the item fa_grid.xcd_item gives (not the identity here); key tiles past the queries are
    empty (dK = dV = 0). Every item computed once: outputs start as NaN, a repeated item doubles dQ."""
    import numpy as np
    from fa_grid import xcd_item
    z, y, x = np.indices((1, 8, 2)).reshape(3, -1)
    tx, ty, _ = xcd_item((2, 8, 1), x, y, z)
    assert (tx != x).any() and (ty != y).any()
    kern = fa_bwd.build("bf16", 1, False, False, xcd_map=True)
    check(run(kset, "bf16", 1, False, [(150, 520)], hq=8, hk=2, group=False, seed=11, main=kern),
          "bf16 mask1 a16 xcd_map")
    # which item one workgroup computes: the dq/dk/dv launch alone, workgroup (1, 0) only; its dV rows
    # (P and dO only: D, which the pre kernel did not write, is not needed) are the only ones written
    g = torch.Generator().manual_seed(5)
    q, do, o = (torch.randn(1, 150, 8, 128, generator=g).to(torch.bfloat16) for _ in range(3))
    k, v = (torch.randn(1, 520, 2, 128, generator=g).to(torch.bfloat16) for _ in range(2))
    lse = torch.randn(1, 8, 150, generator=g).abs() + 5
    res = AL.run_bwd_call(kset, q, k, v, o, do, lse, mask_type=1, atomic32=0, main=kern, stages=("dqdkdv",),
                          workgroups=[(1, 0, 0)])
    written = ~torch.isnan(res["dv_heads"][0].float()).all(-1)                   # [key, head]
    item_x, item_y, _ = (int(t[0]) for t in xcd_item((2, 8, 1), [1], [0], [0]))
    want = torch.zeros(520, 8, dtype=torch.bool)
    for tile in (item_x, 2 - item_x):                                            # aiter's pair: x, n-1-x
        want[256 * tile:256 * tile + 256, item_y] = True
    assert (item_x, item_y) != (1, 0) and torch.equal(written, want)


def test_slot0_nothing_under_the_mfmas(kset):
    """build(slot=0): the softmax, dS, DMAs and atomics between the MFMAs, not under them (the sweep's
    baseline for what the interleave gains): the same results."""
    kern = fa_bwd.build("bf16", 0, True, False, slot=0)
    check(run(kset, "bf16", 0, True, [(100, 300)], hq=2, hk=1, group=False, seed=12, main=kern), "bf16 mask0 a32 slot0")


KEYS = [(d, m, a, g) for d in ("bf16", "fp16") for m in (0, 1, 2) for a in (True, False) for g in (False, True)]


@pytest.mark.slow
@pytest.mark.parametrize("dtype,mask,atomic32,group", KEYS,
                         ids=[f"{d}-mask{m}-{'a32' if a else 'a16'}-{'group' if g else 'batch'}" for d, m, a, g in KEYS])
def test_every_key(kset, dtype, mask, atomic32, group):
    if group:
        check(run(kset, dtype, mask, atomic32, [(130, 290), (300, 64), (1, 1), (257, 520)], hq=4, hk=2, group=True,
                  seed=mask), f"{dtype} mask{mask} {'a32' if atomic32 else 'a16'} group")
    else:
        seqs = [(520, 190) if mask == 2 else (190, 520)] * 2
        check(run(kset, dtype, mask, atomic32, seqs, hq=2, hk=1, group=False, seed=mask),
              f"{dtype} mask{mask} {'a32' if atomic32 else 'a16'} batch")


@pytest.mark.slow
@pytest.mark.parametrize("mask", [1, 2])
def test_gqa8_long_rows(kset, mask):
    check(run(kset, "bf16", mask, False, [(600, 800)], hq=8, hk=1, group=False, seed=7), f"bf16 mask{mask} a16 gqa8")
