"""The attention-backward pre kernel (kernels/fa_bwd_odo.py) and post kernels (kernels/fa_bwd_post.py),
on the exact bytes aiter's host code packs for them, in the strict emulator.

The set here is kernels/fa_bwd_set.py's pre/post kernels with aiter's own gfx950 dQ/dK/dV manifest
beside them (aiter's .co files from ../shared linked in), so aiter's host resolves every call to our
pre and post kernels and packs their kernargs (benchmarks/aiter_launch.py run_bwd_call):
  * pre and post alone, around a workspace the test fills with random values: D = rowsum(dO∘O)
    against float64 within D_v·2^-24·Σ|dO∘O| (products of two bf16/fp16 are exact in fp32; each
    fp32 add rounds once), and dQ bit-exact: the workspace element rounded to q's dtype by torch
    (round to nearest even) for a32, copied for a16; read at aiter's workspace strides, rows per
    aiter's layout (a32 group: the packed [nhead, total_q] rows; a16: rows of each sequence).
    Outputs start as NaN; unset kernarg bytes hold a pattern.
  * the whole pipeline with aiter's own a32 dQ/dK/dV kernel between ours, against torch autograd
    (bounds: tests/attn_bwd_ref.py).
"""
from __future__ import annotations

import itertools
import math
import os
import sys
from pathlib import Path

import pytest
import torch
from attn_bwd_ref import bounds, grads
from conftest import drop_in_missing

REPO = Path(__file__).resolve().parents[1]
CLIENT = REPO.parent / "shared" / "aiter" / "client"
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "kernels"))
import aiter_launch as AL  # noqa: E402
import fa_bwd_odo  # noqa: E402

WHY = drop_in_missing(CLIENT / "drop_in_bwd.sh")
pytestmark = [pytest.mark.skipif(WHY is not None, reason=WHY or ""), pytest.mark.xdist_group("fa_bwd_prepost")]
DT = {"bf16": torch.bfloat16, "fp16": torch.float16}
E32 = 2.0 ** -24


@pytest.fixture(scope="module")
def kset(tmp_path_factory):
    """Our pre/post kernels + aiter's dQ/dK/dV manifest (and the aiter kernels ../shared has)."""
    from flyasm.dispatch import build_set
    out = tmp_path_factory.mktemp("fa_bwd_prepost")
    build_set(str(REPO / "kernels" / "fa_bwd_set.py") + ":PRE_POST", out, jobs=2, progress=False)
    (out / "fmha_bwd_dqdkdv.csv").write_bytes(
        (CLIENT / "aiter_src/hsa/gfx950/fmha_v3_bwd/fmha_bwd_dqdkdv.csv").read_bytes())
    (out / "fmha_bwd_dqdkdv.flyasm.json").unlink()
    for co in AL.BWD_SET.glob("*.co"):
        os.symlink(co, out / co.name)
    return out


def make(dtype, layout, b, hq, hk, lq, lk, d, g):
    """q, k, v, o, do (random, in dtype), lse (random fp32), seqstarts; layouts: bshd (contiguous
    [B, S, H, D]), bhsd ([B, H, S, D] storage seen through aiter's strides), group ([T, H, D])."""
    dt = DT[dtype]
    rnd = lambda *sh: torch.randn(*sh, generator=g).to(dt)      # noqa: E731
    if layout == "group":
        tq, tk = sum(lq), sum(lk)
        q, o, do = rnd(tq, hq, d), rnd(tq, hq, d), rnd(tq, hq, d)
        k, v = rnd(tk, hk, d), rnd(tk, hk, d)
        lse = torch.randn(hq, tq, generator=g)
        starts = [torch.tensor([0, *itertools.accumulate(x)], dtype=torch.int32) for x in (lq, lk)]
        return q, k, v, o, do, lse, starts
    sq, sk = lq[0], lk[0]
    if layout == "bhsd":
        t = lambda s, h: rnd(b, h, s, d).transpose(1, 2)        # noqa: E731
    else:
        t = lambda s, h: rnd(b, s, h, d)                        # noqa: E731
    return t(sq, hq), t(sk, hk), t(sk, hk), t(sq, hq), t(sq, hq), torch.randn(b, hq, sq, generator=g), [None, None]


CASES = {
    # name: (dtype, head_dim, atomic32, layout, batch, hq, hk, q lengths, k lengths)
    "bf16_a32_bhsd_gqa3": ("bf16", 128, 1, "bhsd", 2, 3, 1, [200], [150]),
    "fp16_a16_bshd": ("fp16", 128, 0, "bshd", 1, 2, 2, [130], [64]),
    "bf16_a16_group3": ("bf16", 128, 0, "group", 3, 2, 1, [100, 300, 37], [70, 260, 129]),
    "fp16_a32_group3": ("fp16", 128, 1, "group", 3, 1, 1, [129, 64, 200], [40, 300, 10]),
    "bf16_hd64_a32_group3": ("bf16", 64, 1, "group", 3, 2, 2, [17, 250, 128], [30, 30, 30]),
    "fp16_hd64_a32_bhsd": ("fp16", 64, 1, "bhsd", 1, 4, 2, [300], [90]),
    # padded head dims: aiter sends hdim 96 to the hd128 kernels (head_dim = 96: 12 of 16 lanes a row)
    "bf16_hd96_a32_bshd": ("bf16", 96, 1, "bshd", 1, 2, 1, [150], [70]),
    "fp16_hd96_a16_group3": ("fp16", 96, 0, "group", 3, 2, 2, [33, 140, 64], [10, 20, 30]),
}
SLOW = {"fp16_a32_group3", "fp16_hd64_a32_bhsd", "fp16_hd96_a16_group3"}


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.slow) if c in SLOW else c for c in CASES])
def test_pre_and_post_on_aiters_bytes(kset, case):
    dtype, d, a32, layout, b, hq, hk, lq, lk = CASES[case]
    g = torch.Generator().manual_seed(sum(map(ord, case)))
    q, k, v, o, do, lse, (sq_starts, sk_starts) = make(dtype, layout, b, hq, hk, lq, lk, d, g)
    kw = dict(mask_type=0, atomic32=a32, seqstart_q=sq_starts, seqstart_k=sk_starts)
    plan = AL.run_bwd_call(kset, q, k, v, o, do, lse, stages=(), **kw)        # aiter's workspace: its size
    ws = plan["pack"]["workspace"]
    wdt = torch.float32 if a32 else DT[dtype]
    workspace = (3 * torch.randn(ws["bytes"] // ws["element_size"], generator=g)).to(wdt)
    res = AL.run_bwd_call(kset, q, k, v, o, do, lse, stages=("pre", "post"), workspace=workspace.clone(), **kw)
    names = [ln.knl_name for ln in res["launches"]]
    padded = 64 if d <= 64 else 128
    assert names[0] == fa_bwd_odo.kernel_name(dtype, padded, layout == "group")
    assert names[2].startswith(f"fa_bwd_hd{padded}_dq_{'convert_' + dtype if a32 else 'shuffle'}")
    # D: every row of every sequence, at lse's layout
    want = (o.double() * do.double()).sum(-1)                  # [B, S, H] or [T, H]
    bound = d * E32 * (o.double() * do.double()).abs().sum(-1) * 1.01 + 1e-30
    got = res["d"].transpose(-1, -2).double()                  # lse layout [B, H, S] / [H, T] -> rows first
    assert not torch.isnan(got).any(), "D rows left unwritten"
    worst_d = float(((got - want).abs() / bound).max())
    assert worst_d <= 1.0, f"D off by {worst_d:.2f} x its bound"
    # dQ: the workspace element at aiter's strides, per sequence row
    st, hs, bs = ws["stride"], ws["nhead_stride"], ws["batch_stride"]
    dq = res["dq"]
    assert not torch.isnan(dq.float()).any(), "dQ rows left unwritten"
    seqs = range(b) if layout != "group" else range(len(lq))
    for i in seqs:
        n = lq[i] if layout == "group" else lq[0]
        first = int(sq_starts[i]) if layout == "group" else 0
        ws_row0 = first if a32 else 0                          # a32 group: packed rows; a16: per sequence
        rows = torch.arange(n)
        for h in range(hq):
            idx = i * bs + h * hs + (ws_row0 + rows)[:, None] * st + torch.arange(d)[None]
            exp = workspace[idx].to(DT[dtype])
            got_dq = dq[first:first + n, h] if layout == "group" else dq[i, :, h]
            assert torch.equal(got_dq.view(torch.int16), exp.view(torch.int16)), f"dQ of sequence {i} head {h}"
    print(f"\n{case}: {' -> '.join(n for n in names if n.startswith('fa_'))}: D worst err/bound {worst_d:.2f}, "
          f"dQ bit-exact")


@pytest.mark.parametrize("mask", [0, pytest.param(1, marks=pytest.mark.slow)])
def test_our_pre_and_post_around_aiters_a32_kernel_match_autograd(kset, mask):
    g = torch.Generator().manual_seed(11 + mask)
    b, hq, hk, sq, sk = 1, 2, 1, 200, 300
    q, k, v = (torch.randn(b, s, h, 128, generator=g).bfloat16() for s, h in ((sq, hq), (sk, hk), (sk, hk)))
    do = torch.randn(b, sq, hq, 128, generator=g).bfloat16()
    scale = 1 / math.sqrt(128)
    ref = grads(q[0], k[0], v[0], do[0], scale, mask)
    o, lse = ref["o"][None].bfloat16(), ref["lse"][None].float()
    res = AL.run_bwd_call(kset, q, k, v, o, do, lse, mask_type=mask, atomic32=1, scale=scale, hazards="report",
                          races="report", check_inflight="land")
    names = [ln.knl_name for ln in res["launches"]]
    assert names[0].startswith("fa_bwd_odo") and names[1].startswith("_ZN5aiter") and names[2].startswith("fa_bwd")
    bd = bounds(q[0], k[0], v[0], o[0], do[0], lse[0], ref, scale, None)
    for n in ("dq", "dk", "dv", "d"):
        err = (res[n][0].double() - ref[n]).abs()
        assert float((err / bd[n]).max()) <= 1.0, n


def test_python_packing_is_aiters_host_code(kset):
    """flyasm.aiter_bwd.pack (flyasm.attention's backward) == aiter's host code (fmha_bwd_pack): the
    same kernels, grids, workspace and kernarg bytes (but for the bytes aiter leaves unset), over
    dtypes, masks, a16/a32, batch/group, head dims, GQA, strides and lengths."""
    import random

    from flyasm import aiter_bwd
    rng = random.Random(7)
    n = 0
    for dt, a32, mt, grp, hd in itertools.product(["bf16", "fp16"], [0, 1], [0, 1, 2], [0, 1], [128, 64]):
        if hd == 64 and not a32:
            continue                     # aiter's hd64 a16 keys are batch mode and aligned shapes only
        call = dict(dtype=dt, hdim_q=hd, hdim_v=hd, batch=3, nhead_q=4, nhead_k=2, seqlen_q=rng.randint(50, 900),
                    seqlen_k=rng.randint(50, 900), mask_type=mt, atomic32=a32, group=grp, scale=0.07, stride_q=1000,
                    nhead_stride_lsed=777, batch_stride_dk=rng.randint(1, 9) * 10 ** 6, workspace=0xB000,
                    **{p: 0x1000 * (i + 1) for i, p in enumerate(("q", "k", "v", "o", "do", "lse", "d", "dq", "dk",
                                                                   "dv"))})
        if grp:
            call.update(seqstart_q=0xC000, seqstart_k=0xD000, max_seqlen_q=300, max_seqlen_k=400)
        theirs, ours = AL.fmha_bwd_pack(kset, **call), aiter_bwd.pack(kset, **call)
        assert theirs["workspace"] == ours["workspace"], call
        for t, o in zip(theirs["launches"], ours["launches"], strict=True):
            assert (t.stage, t.knl_name, t.grid, t.block, t.co) == (o.stage, o.knl_name, o.grid, o.block, o.co)
            diff = [i for i in range(len(t.kernarg)) if t.kernarg[i] != o.kernarg[i] and i not in t.unset]
            assert not diff, (call, t.stage, aiter_bwd.decode(t.stage, t.kernarg), aiter_bwd.decode(o.stage, o.kernarg))
        n += 1
    assert n == 36                       # 2 dtypes x (12 a32 + 6 a16 keys)
