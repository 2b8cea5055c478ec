"""Sweep grids of the attention backward's dQ/dK/dV kernel (kernels/fa_bwd.py), and the script that
writes benchmarks/sweep_fa_bwd.md.

    flyasm sweep benchmarks/sweep_fa_bwd.py:ONE_OFF_A16 --model perf -o out/sweep_bwd --top 3   # any grid
    python3 benchmarks/sweep_fa_bwd.py [--top 3] [--jobs 1] [--grid NAME ...]                 # the table

Grids (keyword parameters of fa_bwd.build(); bf16, batch mode): the default and each lever changed
alone (one-off), for each mode of aiter's call:
  ONE_OFF_A16 / ONE_OFF_A16_CAUSAL / ONE_OFF_A32 / ONE_OFF_A32_CAUSAL   (atomic16 / atomic32 dQ,
                                                                       no mask / causal top-left)
The levers (fa_bwd's docstring): the schedule's AHEAD (MFMAs the LDS operands are read ahead),
WAIT_SPAN, DMA_SPREAD, STATS_SPREAD, REREAD_DV, DQ_EVERY, BARRIER_EARLY, NEXT_EARLY, NEXT_K, FEED_FIT,
FEED_CARRY, SLOT (issue cycles the shadow gets under each MFMA; 0: the softmax, dS, DMAs and atomics
between the MFMAs instead of under them), XCD_MAP (each XCD runs whole heads), and fold_scale
(numerics: the softmax scale folded into P). A value is in a grid when the kernel builds with it.
workload(): aiter's figure shape (batch 8, 64/8 heads, seqlen 8192, head dim 128), the dq/dk/dv
launch aiter's host code packs for it (benchmarks/aiter_bwd_launch.row_call: recorded at batch 1, one
head, seqlen 1024, the query loop scaled; the bytes and grid do not depend on which kernel runs);
FLOPs of the whole call (2 B Hq S^2 (3 d + 2 d), halved when causal). verify(): the variant as the
dq/dk/dv stage of one call through the backward harness (our pre and post kernels) at a small ragged
GQA shape, against torch autograd within tests/attn_bwd_ref.py's bounds.
The table: each variant's main-kernel time, its gain over the default, the whole call's time (our pre
and post kernels priced by benchmarks/vs_aiter_bwd.py's Pricer) and ours / aiter's whole call.
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
BASE = dict(dtype="bf16", group=False)
MODES = {"A16": dict(mask=0, atomic32=False), "A16_CAUSAL": dict(mask=1, atomic32=False),
         "A32": dict(mask=0, atomic32=True), "A32_CAUSAL": dict(mask=1, atomic32=True)}
# each lever moved one step each way from its default where the kernel builds (next_early 0 leaves no
# hook for the next step's reads; slot below ~24 starves the shadow of the step's VALU)
ONE_OFF = [{}, dict(ahead=3), dict(ahead=5), dict(wait_span=1), dict(wait_span=3), dict(dma_spread=1),
           dict(dma_spread=4), dict(stats_spread=0), dict(stats_spread=2), dict(reread_dv=False), dict(dq_every=1),
           dict(dq_every=3), dict(barrier_early=0), dict(barrier_early=3), dict(next_early=2), dict(next_k=1),
           dict(next_k=3), dict(feed_fit=True), dict(feed_carry=12), dict(slot=0), dict(slot=24), dict(slot=32),
           dict(fold_scale=False), dict(xcd_map=True)]
ONE_OFF_A16 = [dict(BASE, **MODES["A16"], **d) for d in ONE_OFF]
ONE_OFF_A16_CAUSAL = [dict(BASE, **MODES["A16_CAUSAL"], **d) for d in ONE_OFF]
ONE_OFF_A32 = [dict(BASE, **MODES["A32"], **d) for d in ONE_OFF]
ONE_OFF_A32_CAUSAL = [dict(BASE, **MODES["A32_CAUSAL"], **d) for d in ONE_OFF]
GRIDS = tuple(f"ONE_OFF_{m}" for m in MODES)
VARIANTS = ONE_OFF_A16

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

    def launch(kern):
        return {**spec, **({"wg_map": kern.wg_map} if getattr(kern, "wg_map", None) else {})}
    return {"flops": call["flops"], "launch": launch,
            "label": f"{dtype} B{b} H{hq}/{SHAPE['nhead_k']} S{s} D128 {'a32' if atomic32 else 'a16'}"
                     f"{' causal' if mask else ''}"}


def verify(kernel, seed, mask=0, atomic32=False, group=False, dtype="bf16", **_):
    """One call (batch 1, 4/2 heads, Sq 200, Sk 300) with the variant as the dq/dk/dv stage."""
    import math

    import aiter_launch as AL
    import torch
    from attn_bwd_ref import bounds, grads
    from flyasm.dispatch import _attention_bwd_set_dir
    g = torch.Generator().manual_seed(seed)
    dt = {"bf16": torch.bfloat16, "fp16": torch.float16, "f16": torch.float16}[dtype]
    sq, sk, hq, hk = 200, 300, 4, 2
    q, do = (torch.randn(1, sq, hq, 128, generator=g).to(dt) for _ in range(2))
    k, v = (torch.randn(1, sk, hk, 128, generator=g).to(dt) for _ in range(2))
    scale = 1 / math.sqrt(128)
    ref = grads(q[0], k[0], v[0], do[0], scale, mask)
    o, lse = ref["o"][None].to(dt), ref["lse"][None].float()
    res = AL.run_bwd_call(_attention_bwd_set_dir(), q, k, v, o, do, lse, main=kernel, mask_type=mask,
                          atomic32=int(atomic32), scale=scale)
    bd = bounds(q[0], k[0], v[0], o[0], do[0], lse[0], ref, scale, None if atomic32 else -(-sk // 256))
    worst, err = 0.0, 0.0
    for n in ("dq", "dk", "dv"):
        e = (res[n][0].double() - ref[n]).abs().nan_to_num(float("inf"))
        err, worst = max(err, float(e.max())), max(worst, float((e / bd[n]).max()))
    return {"ok": worst <= 1.0, "max_err": err, "tol": "attn_bwd_ref bounds", "worst_err_over_bound": worst,
            "shape": f"B1 Hq{hq} Hkv{hk} Sq{sq} Sk{sk}"}


# ---- the table in benchmarks/ -------------------------------------------------------------------
def lever_of(params: dict) -> str:
    """The lever a one-off variant changes ('default' for none)."""
    diff = {k: v for k, v in params.items() if k not in BASE and k not in ("mask", "atomic32")}
    return ", ".join(f"{k}={v}" for k, v in diff.items()) or "default"


def call_terms(mode: str) -> dict:
    """Our pre + post kernels and aiter's whole call at the figure shape (vs_aiter_bwd's pricing), µs."""
    import vs_aiter_bwd as VS
    from flyasm.dispatch import _attention_bwd_set_dir
    from flyasm.perf import params as P
    pr = VS.Pricer(P.load())
    row = _row(**MODES[mode])
    ours, _ = pr.call(row, _attention_bwd_set_dir())
    theirs, _ = pr.call(row)
    pr.save()
    return {"rest": VS.total(ours) - VS.main_us(ours), "aiter": VS.total(theirs), "aiter_main": VS.main_us(theirs)}


def grid_section(grid: str, res, terms: dict, top: int) -> tuple[list[str], dict]:
    """Markdown lines of one grid's table and {lever: its main-kernel time / the default's − 1}."""
    base = next((r for r in res.rows if lever_of(r.params) == "default"), None)   # (build() takes **levers:
    # flyasm.sweep cannot tell the defaults from its signature)
    b_us = base.prediction.get("pred_us") if base else None
    lines = [f"### {grid}: {res.rows[0].workload} ({len(res.rows)} variants)", "",
             f"aiter: main kernel {terms['aiter_main']:.0f} µs, whole call {terms['aiter']:.0f} µs; our pre + post "
             f"{terms['rest']:.0f} µs.", "",
             "| rank | lever | main µs | vs default | MFMA busy | call µs | ours/aiter call | check | verified "
             "| max err / bound |", "|---|---|---|---|---|---|---|---|---|---|"]
    gains = {}
    for n, r in enumerate(res.rows, 1):
        us = r.prediction.get("pred_us")
        lever = lever_of(r.params)
        check = "ok" if r.check_ok else (f"error: {r.error}" if r.error else f"{r.findings} findings")
        if us and b_us:
            gains[lever] = us / b_us - 1
        v = r.verify
        worst = v.get("worst_err_over_bound")
        lines.append(
            f"| {n} | {lever} | {us:.0f} | {us / b_us - 1:+.2%} | "
            f"{100 * r.prediction['mfma_util']:.1f}% | {us + terms['rest']:.0f} | {terms['aiter'] / (us + terms['rest']):.3f} | "
            f"{check} | {r.verified} | {'' if worst is None else f'{worst:.2f}'} |" if us else
            f"| {n} | {lever} | | | | | | {check} | {r.verified} | |")
    return lines + [""], gains


def main(argv=None) -> int:
    import argparse
    import subprocess

    from flyasm.sweep import run_sweep
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top", type=int, default=3, help="best variants verified in the emulator per grid")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out", default=str(Path(__file__).with_suffix(".md")))
    ap.add_argument("--grid", action="append", help="these grids only (default: all four)")
    args = ap.parse_args(argv)
    rev = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True,
                         text=True).stdout.strip() or "unknown"
    grids = args.grid or list(GRIDS)
    sections, gains, best = [], {}, {}
    for grid in grids:
        res = run_sweep(f"{__file__}:{grid}", None, top=args.top, jobs=args.jobs, model="perf")
        mode = grid.removeprefix("ONE_OFF_")
        lines, gains[mode] = grid_section(grid, res, call_terms(mode), args.top)
        sections += lines
        ok = [r for r in res.rows if r.verified == "yes"]
        best[mode] = lever_of(ok[0].params) if ok else "(none verified)"
        print("\n".join(lines), flush=True)
    levers = sorted({lv for g in gains.values() for lv in g} - {"default"},
                    key=lambda lv: min(g.get(lv, 1.0) for g in gains.values()))
    rank = ["| lever | " + " | ".join(gains) + " |", "|---|" + "---|" * len(gains)]
    rank += [f"| {lv} | " + " | ".join(f"{g[lv]:+.2%}" if lv in g else "" for g in gains.values()) + " |"
             for lv in levers]
    text = [f"# fa_bwd lever sweep (perf model: a prediction, not a measurement)", "",
            f"Sources at {rev}. Regenerate: `python3 benchmarks/sweep_fa_bwd.py --top {args.top} --jobs {args.jobs}`"
            f" (cached by content: a rerun only builds what changed).", "",
            "## Each lever moved alone (main-kernel time: variant / default − 1; negative = the variant is faster)",
            "", "Ranked by the best of its modes.", ""]
    text += rank + ["", "Best verified variant per grid: " + "; ".join(f"{m}: {b}" for m, b in best.items()), "",
                    "## The grids", ""] + sections
    Path(args.out).write_text("\n".join(text) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
