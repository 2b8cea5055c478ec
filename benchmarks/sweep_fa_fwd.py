"""Sweep grid of the flagship attention forward (kernels/fa_fwd.py), and the script that writes its table.

    flyasm sweep benchmarks/sweep_fa_fwd.py:LEVERS -o out/sweep --top 3     # any grid below
    python benchmarks/sweep_fa_fwd.py [--top 10] [--jobs 2] [--model static|perf [--placed]]  # regenerates sweep_fa_fwd.md

Grids (keyword parameters of fa_fwd.build(); aiter's calling convention, bf16, 64 query/kv heads):
  LEVERS         lazy_rescale x setprio x q_prescale x stagger of the old loop (split=False), causal
                 and not (32 variants; the static model's grid)
  LEVERS_NOMASK  / LEVERS_CAUSAL: the same, one mask each
  ONE_OFF_NOMASK / ONE_OFF_CAUSAL: the default and each lever changed alone (the perf model's grid:
                 each variant is an emulator run plus a CU simulation, ~1 min)
  SMALL          2 variants for a quick look
The predictions are for the issue's shape, batch 16, 64 heads, seqlen 8192, head dim 128
(workload(); with --model perf the CU timing model prices launch(), a recording at seqlen 1024 with
the main loop scaled, as benchmarks/vs_aiter_model.py does); verify() runs a variant in the strict
emulator at a small shape against fa_fwd.reference() with fresh random inputs.
"""
from __future__ import annotations

import sys
from itertools import product
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "kernels"
sys.path[:0] = [str(ROOT), str(KERNELS)]      # this checkout's flyasm, then the kernels
import fa_fwd  # noqa: E402

SOURCES = [KERNELS]                    # what the variants are built from (the sweep cache key)
SHAPE = dict(batch=16, heads=64, seqlen=8192, head_dim=128)
BASE = dict(dtype="bf16", num_heads=64, num_kv_heads=64, aiter_args=True)
LEVER_NAMES = ("lazy_rescale", "setprio", "q_prescale", "stagger")


def _levers(causal_values):
    return [dict(BASE, causal=c, split=False, **dict(zip(LEVER_NAMES, bits)))
            for c in causal_values for bits in product((True, False), repeat=len(LEVER_NAMES))]


# each lever of the default (split softmax + ping-pong schedule) changed alone; split=False is the
# loop of earlier sessions (stagger exists for it only)
ONE_OFF = [{}, dict(pingpong=False), dict(split=False), dict(split=False, stagger=True), dict(lazy_rescale=False),
           dict(setprio=False), dict(q_prescale=True), dict(xcd_map=False)]
ONE_OFF_NOMASK = [dict(BASE, causal=False, **d) for d in ONE_OFF]
ONE_OFF_CAUSAL = [dict(BASE, causal=True, **d) for d in ONE_OFF]


LEVERS = _levers((False, True))
LEVERS_NOMASK = _levers((False,))
LEVERS_CAUSAL = _levers((True,))
SMALL = [dict(BASE, causal=False), dict(BASE, causal=False, stagger=True)]

build = fa_fwd.build                   # its keyword defaults mark the default row of the table


def workload(causal=False, dtype="bf16", **_):
    """FLOPs = 4·B·H·S²·D (Q·Kᵀ and P·V), halved when causal (aiter's convention); the launch the
    perf model prices."""
    b, h, s, d = SHAPE["batch"], SHAPE["heads"], SHAPE["seqlen"], SHAPE["head_dim"]
    f = 4.0 * b * h * s * s * d
    return {"flops": f / 2 if causal else f, "label": f"{dtype} B{b} H{h} S{s} D{d}{' causal' if causal else ''}",
            "launch": lambda kern: perf_launch(kern, causal, b, h, s)}


TRACE_SEQLEN = 1024      # the recorded problem: one (batch, head) at this seqlen, its main loop scaled


def perf_launch(kern, causal, batch, heads, seqlen, heads_k=None, probe=False):
    """flyasm.perf.predict() arguments of an aiter-convention fa_fwd kernel at [batch, heads, seqlen, 128]
    (heads_k K/V heads, default heads): recorded at one head and TRACE_SEQLEN, the key loop scaled to
    seqlen (causal: aiter's paired grid, workgroup w runs Q tiles w and n-1-w, n+1 key tiles per
    pair); compulsory DRAM traffic = Q, K, V, O once and the LSE; a build(xcd_map=True) kernel's
    wg_map (fa_grid.xcd_item). benchmarks/vs_aiter_model.py prices ours with it too, with probe=True:
    the real launch for perf.footprint, so the placement model places our shared reads and the HBM
    queue takes what HBM serves; so does placed_prediction (--placed). workload() gives the sweep's
    perf ranker (flyasm/perf/sweep.py) no probe, so the sweep prices every read at vmem_latency (what
    placement charges ours at the benchmark shapes too, where HBM serves none of our shared reads
    again) and stores at their CU's share of HBM, without the queue (benchmarks/sweep_fa_fwd.md has
    both prices)."""
    from flyasm.dispatch import aiter_grid
    from flyasm.run.args import pack_args, specs_from_kernel
    s0 = min(seqlen, TRACE_SEQLEN)
    row = 128 * 2                                  # bytes of one row of [B, S, H=1, 128] 16-bit data
    vals = {"scale": 1 / 128 ** 0.5, "seqlen_q": s0, "seqlen_k": s0, "q_ss": row, "q_ts": 256 * row, "q_hs": row,
            "q_bs": s0 * row, "gqa": 1, "k_ss": row, "k_hs": row, "k_bs": s0 * row, "opt": 0, "has_lse": 1,
            "qk_head_dim": 128, "v_head_dim": 128, "q_head_num": 1, "v_ss": row, "v_hs": row, "v_bs": s0 * row,
            "o_ss": row, "o_hs": row, "o_bs": s0 * row, "lse_hs": 4 * s0}
    bufs = {"q": s0 * row, "k": s0 * row, "v": s0 * row, "o": s0 * row, "lse": s0 * 4}
    specs = specs_from_kernel(kern)

    def kernarg(addrs):
        v = dict(vals, **addrs)
        return pack_args(specs, [v.get(a.name, 0) for a in kern.args], None, kern.kernarg_size)
    n0, nt = -(-s0 // 256), -(-seqlen // 256)
    scale = (nt + 1) / (n0 + 1) if causal else seqlen / s0
    hk = heads if heads_k is None else heads_k
    dram = 2 * batch * seqlen * row * (heads + hk) + 4 * batch * heads * seqlen
    # the real launch, [batch, seqlen, heads, 128] (aiter's BSHD), for the placement model's probe
    full = {"seqlen_q": seqlen, "seqlen_k": seqlen, "q_ss": heads * row, "q_ts": 256 * heads * row, "q_hs": row,
            "q_bs": seqlen * heads * row, "k_ss": hk * row, "k_hs": row, "k_bs": seqlen * hk * row,
            "v_ss": hk * row, "v_hs": row, "v_bs": seqlen * hk * row, "o_ss": heads * row, "o_hs": row,
            "o_bs": seqlen * heads * row, "lse_hs": 4 * seqlen, "gqa": heads // hk, "q_head_num": heads}

    def full_kernarg(addrs):
        return kernarg(dict(full, **addrs))
    full_bufs = {"q": batch * seqlen * heads * row, "k": batch * seqlen * hk * row, "v": batch * seqlen * hk * row,
                 "o": batch * seqlen * heads * row, "lse": 4 * batch * heads * seqlen}
    return {"grid": aiter_grid(seqlen, heads, batch, 256, causal), "block": 512, "kernarg": kernarg,
            "buffers": bufs, "trace_grid": aiter_grid(s0, 1, 1, 256, causal), "loop_scale": scale, "dram_bytes": dram,
            **({"probe": {"kernarg": full_kernarg, "buffers": full_bufs}} if probe else {}),
            **({"wg_map": kern.wg_map} if getattr(kern, "wg_map", None) else {})}


# Verification shape: one (batch, head); seqlens not multiples of the 256-row Q tile or of the 64-key
# step, so masking of partial tiles runs, and 3 key steps so the loop's odd remainder runs.
VERIFY_SQ, VERIFY_SK = 160, 176
# Tolerances derived in tests/test_fa_fwd.py: bf16 O within atol = rtol = 1e-2 (P and O rounded to
# bf16), f16 4x tighter; LSE atol 1e-4 (1e-2 / 2.5e-3 with q_prescale, which rounds Q·scale once).
TOL = {"bf16": 1e-2, "f16": 2.5e-3}


def verify(kernel, seed, dtype="bf16", causal=False, num_heads=64, num_kv_heads=64, aiter_args=True,
           q_prescale=False, stagger=False, align=None, **_):
    """The variant in the emulator at Sq=VERIFY_SQ, Sk=VERIFY_SK against fa_fwd.reference(), with the
    kernel's causal diagonal (build()'s default: bottom-right with aiter_args; Sq != Sk here, so the
    two alignments differ)."""
    align = fa_fwd.default_align(aiter_args, align)
    import torch
    g = torch.Generator().manual_seed(seed)
    tdt = {"bf16": torch.bfloat16, "f16": torch.float16}[dtype]
    gqa = num_heads // num_kv_heads
    q = torch.randn(1, gqa, VERIFY_SQ, 128, generator=g).to(tdt)
    k, v = (torch.randn(1, 1, VERIFY_SK, 128, generator=g).to(tdt) for _ in range(2))
    out, lse = fa_fwd.run(q, k, v, causal=causal, kernel=kernel, aiter_args=aiter_args, q_prescale=q_prescale,
                          stagger=stagger, align=align)   # out and lse start as NaN (poisoned) inside run()
    ref, ref_lse = fa_fwd.reference(q, k, v, causal=causal, align=align)
    tol = TOL[dtype]
    lse_tol = tol if q_prescale else 1e-4
    err = (out.float() - ref).abs()
    lerr = (lse - ref_lse).abs()
    ok = bool(torch.all(err <= tol + tol * ref.abs()) and torch.all(lerr <= lse_tol))   # NaN compares False
    return {"ok": ok, "max_err": float(err.nan_to_num(float("inf")).max()), "tol": tol,
            "lse_err": float(lerr.nan_to_num(float("inf")).max()), "lse_tol": lse_tol,
            "shape": f"B1 Hq{gqa} Hkv1 Sq{VERIFY_SQ} Sk{VERIFY_SK}"}


# ---- the table in benchmarks/ -------------------------------------------------------------------
def _lever(params: dict, base: dict) -> str:
    """The levers a variant changes from the default (the grid's mask aside), as k=v."""
    diff = ", ".join(f"{k}={v}" for k, v in params.items() if base.get(k) != v and k != "causal")
    return diff or ", ".join(f"{k}={v}" for k, v in params.items() if k not in base)


def _lever_gains(rows) -> list[str]:
    """What each lever gains: predicted TFLOPS of the default over the variant with that lever changed."""
    base = next((r for r in rows if r.default), None)
    if base is None or not base.prediction.get("pred_tflops"):
        return []
    out = ["", "What each lever gains (predicted TFLOPS, default / variant with only that lever changed):", ""]
    for r in rows:
        t = r.prediction.get("pred_tflops")
        if r.default or not t:
            continue
        out.append(f"- {_lever(r.params, base.params)}: {t:.1f} TFLOPS; the default is {base.prediction['pred_tflops'] / t - 1:+.1%} faster")
    return out


def placed_prediction(params: dict):
    """perf.predict of a variant as benchmarks/vs_aiter_model.py prices ours: with the probe of the real
    launch, so the placement model places its shared reads and the HBM queue (perf.hbm) takes what HBM
    serves. The sweep's own price (workload(), no probe) has every read wait vmem_latency and stores
    wait for their CU's share of HBM instead."""
    k = build(**params)
    return predict_placed(k, k.build(check=False).co, params.get("causal", False), SHAPE["batch"], SHAPE["heads"],
                          SHAPE["seqlen"], workload(**params)["flops"])


def predict_placed(k, co: bytes, causal: bool, batch: int, heads: int, seqlen: int, flops: float,
                   heads_k=None, params=None):
    """perf.predict of fa_fwd kernel k (built as co) at [batch, heads, seqlen, 128] with the probe of the
    real launch (perf_launch(probe=True)); params: the model's constants (default params.json)."""
    from flyasm.perf.model import predict
    return predict(co, kernel=k.name, flops=flops, params=params, locs=[i.loc for i in k.stream],
                   **perf_launch(k, causal, batch, heads, seqlen, heads_k=heads_k, probe=True))


def _placed_table(rows) -> list[str]:
    """The clean rows again, priced with the probe (placed_prediction), and the default's gain over each."""
    base = next(r for r in rows if r.default)
    pred = {r.index: placed_prediction(r.params) for r in rows if r.check_ok}
    t0 = pred[base.index].tflops
    out = ["", "With the probe (placed_prediction: placement and the HBM queue, as vs_aiter_model.py prices ours):",
           "", "| lever changed | pred_us | pred_tflops | shared bytes from L2 / MALL / HBM again / HBM first "
           "| the default is faster by |", "|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: -pred[r.index].tflops if r.index in pred else 0.0):
        p = pred.get(r.index)
        if p is None:
            out.append(f"| {_lever(r.params, base.params) or '*'} | - | - | - | (check failed: not priced) |")
            continue
        lv = " / ".join(f"{x:.0%}" for x in p.levels) if p.levels is not None else "(not placed)"
        out.append(f"| {_lever(r.params, base.params) or '*'} | {p.us:.1f} | {p.tflops:.1f} | {lv} | {t0 / p.tflops - 1:+.1%} |")
    return out


def main(argv=None) -> int:
    import argparse

    from flyasm.sweep import run_sweep, table_rows
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top", type=int, default=10, help="rows shown (and verified in the emulator) per mask")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--model", default="static")
    ap.add_argument("--out", default=str(Path(__file__).with_suffix(".md")))
    ap.add_argument("--grid", action="append", help="these grids only (default: the model's two)")
    ap.add_argument("--placed", action="store_true", help="ONE_OFF grids, perf model: price the rows again with "
                    "the probe (placement and HBM queue; about a minute a row)")
    args = ap.parse_args(argv)
    import subprocess
    rev = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True,
                         text=True).stdout.strip() or "unknown"
    parts = [f"# fa_fwd lever sweep ({args.model} model: a prediction, not a measurement)", "",
             f"Sources at {rev}; every shown row that checks clean was verified in the strict emulator "
             f"(fresh random inputs, fa_fwd.reference, tolerances of tests/test_fa_fwd.py) at "
             f"Sq={VERIFY_SQ}, Sk={VERIFY_SK}.", "",
             f"Regenerate: `python benchmarks/sweep_fa_fwd.py --top {args.top} --jobs {args.jobs} "
             f"--model {args.model}{' --placed' if args.placed else ''}` (cached by content: a rerun only "
             f"builds what changed).", ""]
    ap_grids = ("ONE_OFF_NOMASK", "ONE_OFF_CAUSAL") if args.model == "perf" else ("LEVERS_NOMASK", "LEVERS_CAUSAL")
    for grid in args.grid or ap_grids:
        res = run_sweep(f"{__file__}:{grid}", None, top=args.top, jobs=args.jobs, model=args.model)
        shown = res.rows[:args.top] + [r for r in res.rows[args.top:] if r.default]
        head, body = table_rows(shown)
        body = [b for b in body]
        ranks = [res.rows.index(r) + 1 for r in shown]
        for b, n in zip(body, ranks):
            b[0] = str(n)
        keep = [i for i, h in enumerate(head) if h not in ("dtype", "num_heads", "num_kv_heads", "aiter_args")]
        parts += [f"## {grid}: {res.rows[0].workload or grid} ({len(res.rows)} variants; * = build() defaults)", "",
                  "| " + " | ".join(head[i] for i in keep) + " |", "|" + "---|" * len(keep)]
        parts += ["| " + " | ".join(b[i] for i in keep) + " |" for b in body]
        n0 = len(parts)
        parts += _lever_gains(res.rows) if grid.startswith("ONE_OFF") else []
        parts += _placed_table(res.rows) if args.placed and grid.startswith("ONE_OFF") and args.model == "perf" else []
        parts += ["", "Model assumptions:"] + [f"- {a}" for a in res.assumptions] + [""]
        print("\n".join(parts[n0 - len(body) - 4:]))
    Path(args.out).write_text("\n".join(parts))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
