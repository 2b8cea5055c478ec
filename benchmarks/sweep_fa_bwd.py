"""Sweep grid of the attention backward's dQ/dK/dV kernel (kernels/fa_bwd.py): its schedule levers.

    flyasm sweep benchmarks/sweep_fa_bwd.py:ONE_OFF_NOMASK --model perf -o out/sweep_bwd --top 3

Grids (keyword parameters of fa_bwd.build(); bf16, atomic16, batch mode):
  ONE_OFF_NOMASK / ONE_OFF_CAUSAL  the default and each lever changed alone (no mask / causal top-left)
  ATOMICS                          atomic32 and atomic16, no mask (dQ's accumulation: fp32 or bf16 atomics)
The levers only reorder instructions (fa_bwd's docstring): AHEAD (MFMAs the LDS operands are read
ahead), WAIT_SPAN, DMA_SPREAD, STATS_SPREAD, REREAD_DV, DQ_EVERY, BARRIER_EARLY, NEXT_EARLY, NEXT_K,
FEED_FIT, FEED_CARRY, and fold_scale (numerics: scale folded into P).
workload(): aiter's figure shape (batch 8, 64/8 heads, seqlen 8192, head dim 128), the dq/dk/dv launch
aiter's host code packs for it (benchmarks/aiter_bwd_launch.row_call: recorded at batch 1, one head,
seqlen 1024, the query loop scaled; the bytes and grid do not depend on which kernel runs); FLOPs of the
whole call (2 B Hq S^2 (3 d + 2 d), halved when causal). verify(): the variant as the dq/dk/dv stage
of one call through the backward harness (our pre and post kernels) at a small ragged GQA shape,
against torch autograd within tests/attn_bwd_ref.py's bounds.
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "kernels"
sys.path[:0] = [str(ROOT), str(KERNELS), str(ROOT / "benchmarks"), str(ROOT / "tests")]
import fa_bwd  # noqa: E402

SOURCES = [KERNELS]
SHAPE = dict(batch=8, nhead_q=64, nhead_k=8, seqlen=8192)
BASE = dict(dtype="bf16", atomic32=False, group=False)
ONE_OFF = [{}, dict(ahead=3), dict(ahead=5), dict(wait_span=1), dict(wait_span=3), dict(dma_spread=4),
           dict(stats_spread=0), dict(reread_dv=False), dict(barrier_early=3), dict(next_early=4), dict(next_k=1),
           dict(feed_fit=True), dict(feed_carry=12)]
ONE_OFF_NOMASK = [dict(BASE, mask=0, **d) for d in ONE_OFF]
ONE_OFF_CAUSAL = [dict(BASE, mask=1, **d) for d in ONE_OFF]
ATOMICS = [dict(BASE, mask=0, atomic32=a) for a in (True, False)]
VARIANTS = ONE_OFF_NOMASK

build = fa_bwd.build


def _row(mask, atomic32):
    b, hq, hk, s = (SHAPE[n] for n in ("batch", "nhead_q", "nhead_k", "seqlen"))
    return dict(dtype="bf16", hdim_q=128, hdim_v=128, mask=mask, atomic32=int(atomic32), bf16_cvt=1, mode=0,
                batch=b, nhead_q=hq, nhead_k=hk, seqlen_q=s, seqlen_k=s)


def workload(mask=0, atomic32=False, dtype="bf16", **_):
    import aiter_bwd_launch as BL
    call = BL.row_call(_row(mask, atomic32))
    main = next(ln for ln in call["launches"] if ln["stage"] == "dqdkdv")
    spec = {k: main[k] for k in ("grid", "block", "kernarg", "buffers", "trace_grid", "loop_scale", "dram_bytes")}
    b, hq, s = SHAPE["batch"], SHAPE["nhead_q"], SHAPE["seqlen"]
    return {"flops": call["flops"], "launch": spec,
            "label": f"{dtype} B{b} H{hq}/{SHAPE['nhead_k']} S{s} D128 {'a32' if atomic32 else 'a16'}"
                     f"{' causal' if mask else ''}"}


def verify(kernel, seed, mask=0, atomic32=False, group=False, dtype="bf16", **_):
    """One call (batch 1, 4/2 heads, Sq 200, Sk 300) with the variant as the dq/dk/dv stage."""
    import dataclasses
    import math
    import tempfile

    import aiter_launch as AL
    import torch
    from attn_bwd_ref import bounds, grads
    from flyasm.dispatch import _attention_bwd_set_dir
    set_dir = _attention_bwd_set_dir()
    tmp = Path(tempfile.mkdtemp(prefix="sweep_fa_bwd_"))
    co = kernel.build(tmp).co_path

    def pack(**call):
        p = AL.fmha_bwd_pack(set_dir, **call)
        p["launches"] = [dataclasses.replace(ln, co=Path(co), knl_name=kernel.name) if ln.stage == "dqdkdv" else ln
                         for ln in p["launches"]]
        return p
    from flyasm.aiter_bwd import backward
    g = torch.Generator().manual_seed(seed)
    dt = {"bf16": torch.bfloat16, "fp16": torch.float16, "f16": torch.float16}[dtype]
    sq, sk, hq, hk = 200, 300, 4, 2
    q, do = (torch.randn(1, sq, hq, 128, generator=g).to(dt) for _ in range(2))
    k, v = (torch.randn(1, sk, hk, 128, generator=g).to(dt) for _ in range(2))
    scale = 1 / math.sqrt(128)
    ref = grads(q[0], k[0], v[0], do[0], scale, mask)
    o, lse = ref["o"][None].to(dt), ref["lse"][None].float()
    res = backward(pack, q, k, v, o, do, lse, mask_type=mask, atomic32=int(atomic32), scale=scale)
    bd = bounds(q[0], k[0], v[0], o[0], do[0], lse[0], ref, scale, None if atomic32 else -(-sk // 256))
    worst, err = 0.0, 0.0
    for n in ("dq", "dk", "dv"):
        e = (res[n][0].double() - ref[n]).abs().nan_to_num(float("inf"))
        err, worst = max(err, float(e.max())), max(worst, float((e / bd[n]).max()))
    return {"ok": worst <= 1.0, "max_err": err, "tol": "attn_bwd_ref bounds", "worst_err_over_bound": worst,
            "shape": f"B1 Hq{hq} Hkv{hk} Sq{sq} Sk{sk}"}
