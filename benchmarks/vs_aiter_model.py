"""Attention forward, aiter's kernels and ours, through the timing model (`flyasm perf`).

    python3 benchmarks/vs_aiter_model.py [--table CSV] [--plot PNG] [--limit N]

For every measured shape of aiter's published MI355X table (../shared/aiter/measured/
fmha_v3_fwd_mi355x.csv): aiter measured, aiter predicted, ours predicted (kernels/fa_fwd.py
build(aiter_args=True), default and stagger=True; same mask as the row) and ours/aiter. Then the
#12 benchmark shape (batch 16, 64 heads, seqlen 8192, d 128, causal and not), and a plot
(default benchmarks/results/attention_model.png): TFLOPS against seqlen, measured points and
predicted lines for aiter's two kernels and ours at batch 16 / 64 heads. Uses the constants in
flyasm/perf/params.json (fit them with benchmarks/model_accuracy.py --write-params).
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
import sweep_fa_fwd  # noqa: E402  (perf_launch: the launch the CU model prices ours on)
from flyasm.perf import params as P  # noqa: E402
from flyasm.perf.model import predict, reprice  # noqa: E402

BENCH = dict(batch=16, nhead_q=64, nhead_k=64, seqlen=8192)
_OURS: dict = {}


def ours_kernel(causal: bool, stagger: bool):
    key = (causal, stagger)
    if key not in _OURS:
        from kernels import fa_fwd
        k = fa_fwd.build("bf16", causal, 1, 1, aiter_args=True, stagger=stagger)
        _OURS[key] = (k, k.build().co)            # checked: a kernel with findings is not priced
    return _OURS[key]


def predict_aiter(idx, mask, b, hq, hk, s, p):
    row = dict(co_name="fwd_hd128_bf16_causal.co" if mask else "fwd_hd128_bf16.co", kernelName="", dtype="bf16",
               hdim_q=128, hdim_v=128, mask=mask, batch=b, nhead_q=hq, nhead_k=hk, seqlen_q=s, seqlen_k=s)
    L = AL.row_launch("fmha", row, idx)
    return predict(L["co"], L["grid"], L["block"], L["kernarg"], L["buffers"], kernel=L["kernel"],
                   trace_grid=L["trace_grid"], loop_scale=L["loop_scale"], dram_bytes=L["dram_bytes"],
                   flops=L["flops"], params=p)


def predict_ours(causal, stagger, b, hq, hk, s, p):
    k, co = ours_kernel(causal, stagger)
    flops = 2.0 * b * hq * s * s * 256 * (0.5 if causal else 1.0)
    return predict(co, kernel=k.name, flops=flops, params=p, locs=[i.loc for i in k.stream],
                   **sweep_fa_fwd.perf_launch(k, causal, b, hq, s, heads_k=hk))


def main(argv=None) -> int:
    import pandas as pd
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--table", default=str(AL.SHARED / "measured" / "fmha_v3_fwd_mi355x.csv"))
    ap.add_argument("--plot", default=str(ROOT / "benchmarks" / "results" / "attention_model.png"))
    ap.add_argument("--limit", type=int, default=0, help="first N rows only (smoke runs)")
    ap.add_argument("--seqlens", default="1024,4096,8192,10240", help="seqlens of the predicted lines")
    a = ap.parse_args(argv)
    p = P.load()
    idx = AL.co_index([AL.SHARED / "gfx950"])
    df = pd.read_csv(a.table)
    if a.limit:
        df = df.head(a.limit)
    t0 = time.time()
    print(f"{'mask':>4} {'b':>2} {'hq/hk':>6} {'seqlen':>6} | {'aiter meas':>10} {'aiter pred':>10} {'err':>6} | "
          f"{'ours':>7} {'stagger':>7} {'ours/aiter':>10}   (TFLOPS)")
    done = []
    for _, r in df.iterrows():
        mask, b, hq, hk, s = int(r["mask"]), int(r["batch"]), int(r["nhead_q"]), int(r["nhead_k"]), int(r["seqlen_q"])
        done.append((r, predict_aiter(idx, mask, b, hq, hk, s, p), predict_ours(bool(mask), False, b, hq, hk, s, p),
                     predict_ours(bool(mask), True, b, hq, hk, s, p)))
    p = P.load()        # the simulations do not depend on the fitted constants: price with the newest
    for r, pa, po, ps in done:
        pa, po, ps = (reprice(x, p) for x in (pa, po, ps))
        print(f"{int(r['mask']):>4} {int(r['batch']):>2} {int(r['nhead_q']):>3}/{int(r['nhead_k']):<2} {int(r['seqlen_q']):>6} | "
              f"{r['tflops']:>10.0f} {pa.tflops:>10.0f} {(pa.us - r['us']) / r['us']:>+6.0%} | {po.tflops:>7.0f} "
              f"{ps.tflops:>7.0f} {po.tflops / pa.tflops:>10.2f}")
    B = BENCH
    print(f"constants: " + ", ".join(f"{n}={getattr(p, n):.3g}" for n in P.FITTED))
    print(f"\n#12 benchmark shape: batch {B['batch']}, {B['nhead_q']} heads, seqlen {B['seqlen']}, d 128 (TFLOPS, predicted)")
    lines: dict = {}
    report_of: dict = {}
    seqlens = [int(x) for x in a.seqlens.split(",")]
    for mask in (0, 2):
        for s in seqlens:
            args = (B["batch"], B["nhead_q"], B["nhead_k"], s, p)
            pa, po, ps = (reprice(x, P.load()) for x in (predict_aiter(idx, mask, *args),
                                                         predict_ours(bool(mask), False, *args),
                                                         predict_ours(bool(mask), True, *args)))
            for who, pr in (("aiter", pa), ("ours", po), ("ours stagger", ps)):
                lines.setdefault((mask, who), []).append((s, pr.tflops))
            if s == B["seqlen"]:
                report_of[(mask, "ours")] = po
                print(f"  {'causal' if mask else 'non-causal':<11} aiter {pa.tflops:7.0f}   ours {po.tflops:7.0f}   "
                      f"ours stagger {ps.tflops:7.0f}   ours/aiter {po.tflops / pa.tflops:.2f}, "
                      f"stagger/aiter {ps.tflops / pa.tflops:.2f}")
    print(f"({time.time() - t0:.0f} s)")
    if (0, "ours") in report_of:
        from flyasm.perf.report import format_prediction
        print("\nours, non-causal, at the #12 shape (steady-state loop, builder lines from .loc):")
        print(format_prediction(report_of[(0, "ours")], p, top=12))
    plot(df, lines, a.plot)
    print(f"wrote {a.plot}")
    return 0


def plot(df, lines, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, mask in zip(axes, (0, 2)):
        m = df[df["mask"] == mask]
        ax.scatter(m["seqlen_q"], m["tflops"], s=14, c="k", label="aiter measured (all batch/head configs)")
        for (mk, who), pts in sorted(lines.items()):
            if mk == mask:
                xs, ys = zip(*pts)
                ax.plot(xs, ys, marker="o", ms=3, label=f"{who} predicted (b16, h64)")
        ax.set_title("causal" if mask else "non-causal")
        ax.set_xlabel("seqlen")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("TFLOPS (MI355X)")
    axes[0].legend(fontsize=7)
    fig.suptitle("attention forward d128 bf16: flyasm perf model vs aiter's published MI355X times")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
