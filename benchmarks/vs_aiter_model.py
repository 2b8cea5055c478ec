"""Attention forward, aiter's kernels, FlyDSL's and ours, through the timing model (`flyasm perf`).

    python3 benchmarks/vs_aiter_model.py [--table CSV] [--flydsl-table CSV] [--plot PNG] [--limit N]

For every measured shape of aiter's published MI355X table (../shared/aiter/measured/
fmha_v3_fwd_mi355x.csv) and of FlyDSL's (../shared/flydsl/measured/flydsl_fwd_mi355x.csv, which
measures aiter's kernel in the same runs): what was measured, and aiter's, FlyDSL's and ours
(kernels/fa_fwd.py build(aiter_args=True), the default split ping-pong) predicted, same mask as the
row (causal rows have Sq == Sk, where aiter's bottom-right and FlyDSL's top-left masks coincide).
Then the benchmark shapes (#12: batch 16, 64 heads, seqlen 8192; and batch 1, 64 heads, seqlen
16384), and a plot (default benchmarks/results/attention_model.png): TFLOPS against seqlen,
measured points and predicted lines of the three at batch 16 / 64 heads.
FlyDSL's builds for head counts it does not ship (GQA) come from benchmarks/flydsl_build.py; a shape
whose build is not here prints '-' and says why once. Uses the constants in flyasm/perf/params.json
(fit them with benchmarks/model_accuracy.py --write-params). FLOPs: 4·B·H·Sq·Sk·D, halved when
causal (both authors' convention for d = dv = 128).
Our kernel is recorded at batch 1, one head, seqlen 1024 and its loop scaled per sampled tile
(causal: tile t of n runs t+1 key tiles, so the factor depends on the tile's relative position).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import aiter_launch as AL  # noqa: E402
import flydsl_launch as FL  # noqa: E402
import measured  # noqa: E402
import sweep_fa_fwd  # noqa: E402  (perf_launch: the launch the CU model prices ours on)
from flyasm.perf import params as P  # noqa: E402
from flyasm.perf.model import predict, reprice  # noqa: E402

# the benchmark shapes: #12 (batch 16, 64 heads, seqlen 8192) and FlyDSL's run #919-a shape
BENCH = [dict(batch=16, nhead_q=64, nhead_k=64, seqlen=8192), dict(batch=1, nhead_q=64, nhead_k=64, seqlen=16384)]
WHO = ("aiter", "flydsl", "ours")
_OURS: dict = {}


def ours_kernel(causal: bool):
    if causal not in _OURS:
        from kernels import fa_fwd
        k = fa_fwd.build("bf16", causal, 1, 1, aiter_args=True)
        _OURS[causal] = (k, k.build().co)            # checked: a kernel with findings is not priced
    return _OURS[causal]


def predict_launch(L: dict, p):
    """perf.predict of a launch as the launchers (aiter_launch / flydsl_launch .row_launch) describe it."""
    return predict(L["co"], L["grid"], L["block"], L["kernarg"], L["buffers"], kernel=L["kernel"],
                   trace_grid=L["trace_grid"], loop_scale=L["loop_scale"], dram_bytes=L["dram_bytes"],
                   flops=L["flops"], params=p, tile_axis=L.get("tile_axis", 0), wg_map=L.get("wg_map"),
                   probe=L.get("probe"))


def shape_row(mask, b, hq, hk, s) -> dict:
    return dict(kernelName="", co_name=None, dtype="bf16", hdim_q=128, hdim_v=128, mask=mask, mode=0, batch=b,
                nhead_q=hq, nhead_k=hk, seqlen_q=s, seqlen_k=s)


def predict_aiter(idx, mask, b, hq, hk, s, p):
    row = dict(shape_row(mask, b, hq, hk, s), co_name="fwd_hd128_bf16_causal.co" if mask else "fwd_hd128_bf16.co")
    return predict_launch(AL.row_launch("fmha", row, idx), p)


def predict_flydsl(idx, mask, b, hq, hk, s, p):
    """FlyDSL's kernel as its dispatch picks the build (causal: its top-left mask, = aiter's at Sq == Sk)."""
    return predict_launch(FL.row_launch(shape_row(mask, b, hq, hk, s), idx), p)


def predict_ours(causal, b, hq, hk, s, p):
    k, co = ours_kernel(causal)
    flops = 2.0 * b * hq * s * s * 256 * (0.5 if causal else 1.0)
    return sweep_fa_fwd.predict_placed(k, co, causal, b, hq, s, flops, heads_k=hk, params=p)


_MISSING: dict = {}


def predict_all(idx, mask, b, hq, hk, s, p) -> dict:
    """{author: Prediction or None} at one shape; a FlyDSL build that is not here is None (said once)."""
    out = {"aiter": predict_aiter(idx, mask, b, hq, hk, s, p), "ours": predict_ours(bool(mask), b, hq, hk, s, p)}
    try:
        out["flydsl"] = predict_flydsl(idx, mask, b, hq, hk, s, p)
    except FL.FlydslLaunchError as e:
        out["flydsl"] = None
        if str(e) not in _MISSING:
            _MISSING[str(e)] = 1
            print(f"  note: {e}", file=sys.stderr)
    return out


def _tf(pr) -> str:
    return f"{pr.tflops:7.0f}" if pr is not None else f"{'-':>7}"


def _ratio(a, b) -> str:
    return f"{a.tflops / b.tflops:6.2f}" if a is not None and b is not None else f"{'-':>6}"


HEADER = (f"{'mask':>4} {'b':>2} {'hq/hk':>6} {'seqlen':>6} | {'measured':>15} {'us err':>6} | "
          f"{'aiter':>7} {'flydsl':>7} {'ours':>7} | {'fly/aiter':>9} {'ours/aiter':>10}   (TFLOPS)")


def line(mask, b, hq, hk, s, pr: dict, who=None, meas=None, us=None) -> str:
    """One shape: measured TFLOPS of `who` (if any) and its prediction error, then the three predicted; the error is (predicted - measured) / measured time."""
    err = f"{(pr[who].us - us) / us:+6.0%}" if who and pr.get(who) is not None else f"{'':>6}"
    m = f"{who} {meas:>8.0f}" if who else f"{'':>15}"
    return (f"{mask:>4} {b:>2} {hq:>3}/{hk:<2} {s:>6} | {m:>15} {err} | {_tf(pr['aiter'])} {_tf(pr['flydsl'])} "
            f"{_tf(pr['ours'])} | {_ratio(pr['flydsl'], pr['aiter']):>9} {_ratio(pr['ours'], pr['aiter']):>10}")


def levels_line(pr: dict) -> str:
    """Where each author's shared reads (K and V) are served, by the placement model (perf.placement)."""
    cells = [f"{w} " + "/".join(f"{x:.0%}" for x in pr[w].levels) for w in WHO
             if pr.get(w) is not None and pr[w].levels is not None]
    return "     shared bytes from L2/MALL/HBM again/HBM first: " + ("; ".join(cells) or "(not placed)")


def main(argv=None) -> int:
    import pandas as pd
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--table", default=str(AL.SHARED / "measured" / "fmha_v3_fwd_mi355x.csv"))
    ap.add_argument("--flydsl-table", default=str(FL.SHARED / "measured" / "flydsl_fwd_mi355x.csv"))
    ap.add_argument("--plot", default=str(ROOT / "benchmarks" / "results" / "attention_model.png"))
    ap.add_argument("--limit", type=int, default=0, help="first N rows of each table only (smoke runs)")
    ap.add_argument("--seqlens", default="1024,4096,8192,10240", help="seqlens of the predicted lines")
    a = ap.parse_args(argv)
    p = P.load()
    idx = measured.co_index()
    t0 = time.time()
    tables = [(a.table, "aiter")] + ([(a.flydsl_table, None)] if Path(a.flydsl_table).exists() else [])
    meas_points = []
    for path, default_who in tables:
        df = pd.read_csv(path)
        if a.limit:
            df = df.head(a.limit)
        print(f"\n{Path(path).name}: measured (author, TFLOPS) and predicted")
        print(HEADER)
        for _, r in df.iterrows():
            mask, b, hq, hk, s = int(r["mask"]), int(r["batch"]), int(r["nhead_q"]), int(r["nhead_k"]), int(r["seqlen_q"])
            who = r["author"] if "author" in r and isinstance(r["author"], str) else default_who
            pr = predict_all(idx, mask, b, hq, hk, s, p)
            if who == "flydsl" and isinstance(r.get("co_name"), str):     # the build the row measured
                pr["flydsl"] = predict_launch(FL.row_launch(r.to_dict(), idx), p)
            elif "run" in r:        # an aiter row of a FlyDSL run: FlyDSL as that run's kernel state ran it
                try:
                    pr["flydsl"] = predict_launch(FL.row_launch({**r.to_dict(), "co_name": None}, idx), p)
                except FL.FlydslLaunchError as e:
                    pr["flydsl"] = None
                    print(f"  note: {e}", file=sys.stderr)
            print(line(mask, b, hq, hk, s, pr, who, r["tflops"], r["us"]) + (f"   run {r['run']}" if "run" in r else ""))
            meas_points.append((who, mask, s, r["tflops"]))
    print("constants: " + ", ".join(f"{n}={getattr(p, n):.3g}" for n in P.FITTED + P.FITTED_SIMULATED))
    lines: dict = {}
    report_of: dict = {}
    seqlens = [int(x) for x in a.seqlens.split(",")]
    for B in BENCH:
        print(f"\nbatch {B['batch']}, {B['nhead_q']} heads, seqlen {B['seqlen']}, d 128 (TFLOPS, predicted)")
        print(HEADER)
        for mask in (0, 2):
            pr = predict_all(idx, mask, B["batch"], B["nhead_q"], B["nhead_k"], B["seqlen"], p)
            print(line(mask, B["batch"], B["nhead_q"], B["nhead_k"], B["seqlen"], pr))
            print(levels_line(pr))
            report_of[(B["batch"], mask)] = pr["ours"]
    b0 = BENCH[0]
    for mask in (0, 2):
        for s in seqlens:
            pr = predict_all(idx, mask, b0["batch"], b0["nhead_q"], b0["nhead_k"], s, p)
            for who in WHO:
                if pr[who] is not None:
                    lines.setdefault((mask, who), []).append((s, pr[who].tflops))
    print(f"({time.time() - t0:.0f} s)")
    from flyasm.perf.report import format_prediction
    print(f"\nours, non-causal, at the #12 shape (steady-state loop, builder lines from .loc):")
    print(format_prediction(report_of[(b0["batch"], 0)], p, top=12))
    plot(meas_points, lines, a.plot)
    print(f"wrote {a.plot}")
    return 0


def plot(points, lines, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    style = {"aiter": "k", "flydsl": "tab:orange", "ours": "tab:blue"}
    for ax, mask in zip(axes, (0, 2)):
        for who in WHO:
            pts = [(s, t) for w, m, s, t in points if w == who and bool(m) == bool(mask)]
            if pts:
                xs, ys = zip(*pts)
                ax.scatter(xs, ys, s=14, c=style[who], marker="x" if who == "flydsl" else "o",
                           label=f"{who} measured (all batch/head configs)")
        for (mk, who), pts in sorted(lines.items()):
            if mk == mask:
                xs, ys = zip(*pts)
                ax.plot(xs, ys, marker="o", ms=3, c=style[who], label=f"{who} predicted (b16, h64)")
        ax.set_title("causal" if mask else "non-causal")
        ax.set_xlabel("seqlen")
        ax.set_xscale("log", base=2)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("TFLOPS (MI355X)")
    axes[0].legend(fontsize=7)
    fig.suptitle("attention forward d128 bf16: flyasm perf model vs measured MI355X times (aiter, FlyDSL)")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
