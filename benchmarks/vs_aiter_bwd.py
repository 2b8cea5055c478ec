"""Attention backward, ours against aiter's whole pipeline on the timing model (`flyasm perf`).

    python3 benchmarks/vs_aiter_bwd.py [--set DIR] [--shape B,HQ,HK,S ...] [--measured CSV] [--no-measured]
                                       [--masks 0,1] [--atomics 0,1] [--stalls]

Every row is one call as aiter's own host code launches it (benchmarks/aiter_bwd_launch.row_call:
pre = odo, main = dq/dk/dv, post = dq_shuffle for a16 / dq_convert for a32; recorded at batch 1, one
head, seqlen <= 1024, the dq/dk/dv loop scaled), for aiter's set (../shared/aiter/gfx950/fmha_v3_bwd)
and ours (kernels/fa_bwd_set.py, built into the cache unless --set), both priced by one model in one
run: each launch simulated as model_accuracy prices the measured backward rows (its simulate_row,
the same cache key), its time max(compute at its clock, compulsory DRAM) + one launch overhead
(perf.calibrate.predict_us with the shipped constants). TFLOPS = 2 B Hq Sq Sk (3 d + 2 d), halved
when causal (mask 1, top-left, as aiter's measured rows). `ours/aiter` is aiter's call time over
ours; `main` the same for the dq/dk/dv launch alone.

Tables: (1) the shapes (default: aiter's figure shape, batch 8, 64/8 heads, seqlen 8192, and batch
16, 64 heads, 8192), a16/a32 x no mask/causal, each launch's time; (2) every measured row of
../shared/aiter/measured_bwd/fmha_v3_bwd_mi355x.csv: aiter's measured time beside its prediction and
the error, ours predicted, the ratio; (3) a summary per mode: ratio ranges, aiter's prediction error.
--stalls prints our main kernel's stall table (steady-state loop, builder lines) at the first shape.
Simulations are cached by content (~/.cache/flyasm/perf_rows_vs_aiter_bwd.json): a rerun on the
same sources and model only re-prices.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import aiter_bwd_launch as BL  # noqa: E402
import aiter_launch as AL  # noqa: E402
from flyasm.perf import calibrate as C  # noqa: E402
from flyasm.perf import params as P  # noqa: E402
from flyasm.perf.capture import CACHE  # noqa: E402
from model_accuracy import load_rows_cache, save_rows_cache, simulate_row  # noqa: E402

SHAPES = ((8, 64, 8, 8192), (16, 64, 64, 8192))
MEASURED = AL.SHARED / "measured_bwd" / "fmha_v3_bwd_mi355x.csv"
ROWS_CACHE = CACHE.parent / "perf_rows_vs_aiter_bwd.json"


def row_of(b, hq, hk, s, mask, a32) -> dict:
    return dict(dtype="bf16", hdim_q=128, hdim_v=128, mask=mask, atomic32=a32, bf16_cvt=1, mode=0, batch=b,
                nhead_q=hq, nhead_k=hk, seqlen_q=s, seqlen_k=s)


class Pricer:
    """Each launch of a call (aiter's set or ours) -> microseconds, simulations cached by content."""

    def __init__(self, p: P.Params):
        self.p = p
        self.cache = load_rows_cache(ROWS_CACHE)

    def call(self, row: dict, set_dir=None) -> tuple[list, float]:
        """([(stage, kernel, us)] of each launch, the call's FLOPs)."""
        call = BL.row_call(row, set_dir=set_dir)
        out = []
        for L in call["launches"]:
            cycles, active = simulate_row(L, self.p, self.cache)
            us = C.predict_us([C.Row(L["kernel"], "", cycles, L["dram_bytes"], 1.0, active=active)], self.p)[0]
            out.append((L["stage"], L["kernel"], float(us)))
        return out, call["flops"]

    def save(self):
        save_rows_cache(self.cache, ROWS_CACHE)


def total(parts) -> float:
    return sum(us for _, _, us in parts)


def main_us(parts) -> float:
    return next(us for stage, _, us in parts if stage == "dqdkdv")


def label(b, hq, hk, s) -> str:
    return f"b{b} h{hq}/{hk} s{s}"


def shape_table(pr: Pricer, ours_set, shapes, masks, atomics) -> None:
    print(f"{'shape':<18} {'mask':>4} {'dq':>3} | {'aiter pre/main/post us':>26} {'TFLOPS':>7} | "
          f"{'ours pre/main/post us':>26} {'TFLOPS':>7} | {'ours/aiter':>10} {'main':>6}")
    for (b, hq, hk, s) in shapes:
        for mask in masks:
            for a32 in atomics:
                row = row_of(b, hq, hk, s, mask, a32)
                theirs, flops = pr.call(row)
                ours, _ = pr.call(row, ours_set)
                tu, ou = total(theirs), total(ours)
                fmt = lambda parts: "/".join(f"{us:.0f}" for _, _, us in parts)    # noqa: E731
                print(f"{label(b, hq, hk, s):<18} {mask:>4} {'a32' if a32 else 'a16':>3} | {fmt(theirs):>26} "
                      f"{flops / tu / 1e6:7.0f} | {fmt(ours):>26} {flops / ou / 1e6:7.0f} | {tu / ou:10.2f} "
                      f"{main_us(theirs) / main_us(ours):6.2f}", flush=True)
        pr.save()


def measured_table(pr: Pricer, ours_set, csv: Path) -> list[dict]:
    """One line per measured row; returns the rows with their numbers (for the summary)."""
    import pandas as pd
    df = pd.read_csv(csv)
    df = df[(df["gfx"] == "gfx950") & (df["cu_num"] == 256)]
    print(f"{'shape':<18} {'mask':>4} {'dq':>3} | {'aiter meas us':>13} {'pred us':>9} {'err':>7} | "
          f"{'ours pred us':>12} | {'ours/aiter':>10} {'main':>6} | {'TFLOPS: aiter meas':>18} {'ours pred':>9}")
    out = []
    for _, r in df.iterrows():
        row = r.to_dict()
        theirs, flops = pr.call(row)
        ours, _ = pr.call(row, ours_set)
        tu, ou, meas = total(theirs), total(ours), float(row["us"])
        rec = dict(shape=label(row["batch"], row["nhead_q"], row["nhead_k"], row["seqlen_q"]), s=int(row["seqlen_q"]),
                   mask=int(row["mask"]), a32=int(row["atomic32"]), meas=meas, aiter=tu, ours=ou, ratio=tu / ou,
                   main=main_us(theirs) / main_us(ours), err=tu / meas - 1, flops=flops)
        out.append(rec)
        print(f"{rec['shape']:<18} {rec['mask']:>4} {'a32' if rec['a32'] else 'a16':>3} | {meas:13.1f} {tu:9.1f} "
              f"{rec['err']:+7.1%} | {ou:12.1f} | {rec['ratio']:10.2f} {rec['main']:6.2f} | "
              f"{flops / meas / 1e6:18.0f} {flops / ou / 1e6:9.0f}", flush=True)
        pr.save()
    return out


def summary(rows: list[dict]) -> None:
    print(f"{'mode':<16} {'seqlen':>8} {'rows':>5} | {'ours/aiter min':>14} {'median':>7} {'max':>6} | "
          f"{'aiter |err| median':>18} {'p90':>6}")
    for a32 in (0, 1):
        for mask in (0, 1):
            for lo, name in ((0, "all"), (4096, ">= 4096")):
                sel = [r for r in rows if r["a32"] == a32 and r["mask"] == mask and r["s"] >= lo]
                if not sel:
                    continue
                rat = np.array([r["ratio"] for r in sel])
                err = np.abs([r["err"] for r in sel])
                mode = f"{'a32' if a32 else 'a16'} {'causal' if mask else 'no mask'}"
                print(f"{mode:<16} {name:>8} {len(sel):>5} | {rat.min():14.2f} {np.median(rat):7.2f} {rat.max():6.2f} | "
                      f"{np.median(err):18.1%} {np.percentile(err, 90):6.1%}")
    err = np.abs([r["err"] for r in rows])
    print(f"aiter's prediction error over all {len(rows)} rows: median {np.median(err):.1%}, "
          f"p90 {np.percentile(err, 90):.1%}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--set", help="our backward set (default: kernels/fa_bwd_set.py, built into the cache)")
    ap.add_argument("--shape", action="append", default=[], help="B,HQ,HK,S (repeatable)")
    ap.add_argument("--measured", default=str(MEASURED), help="aiter's measured backward table")
    ap.add_argument("--no-measured", action="store_true", help="the shapes' table only")
    ap.add_argument("--stalls", action="store_true")
    ap.add_argument("--masks", default="0,1")
    ap.add_argument("--atomics", default="0,1", help="atomic32 values (0 = a16)")
    a = ap.parse_args(argv)
    if a.set:
        ours_set = Path(a.set)
    else:
        from flyasm.dispatch import _attention_bwd_set_dir
        ours_set = _attention_bwd_set_dir()
    shapes = [tuple(int(x) for x in sh.split(",")) for sh in a.shape] or SHAPES
    masks, atomics = ([int(x) for x in v.split(",")] for v in (a.masks, a.atomics))
    p = P.load()
    pr = Pricer(p)
    t0 = time.time()
    print("== ours vs aiter, whole call (pre/main/post)\n")
    shape_table(pr, ours_set, shapes, masks, atomics)
    csv = Path(a.measured)
    if not a.no_measured:
        if not csv.is_file():
            print(f"\n(no measured table at {csv}: the measured shapes are skipped)")
        else:
            print(f"\n== every measured shape ({csv.name}): aiter measured, its prediction, ours predicted\n")
            rows = measured_table(pr, ours_set, csv)
            print("\n== summary over the measured shapes (ours/aiter: predicted call times)\n")
            summary(rows)
    print(f"\n({time.time() - t0:.0f} s; constants: " + ", ".join(f"{n}={getattr(p, n):.3g}" for n in P.FITTED) + ")")
    if a.stalls:
        from flyasm.perf.model import predict
        from flyasm.perf.report import format_prediction
        b, hq, hk, s = shapes[0]
        row = row_of(b, hq, hk, s, masks[0], atomics[0])
        call = BL.row_call(row, set_dir=ours_set)
        L = next(x for x in call["launches"] if x["stage"] == "dqdkdv")
        pred = predict(L["co"], L["grid"], L["block"], L["kernarg"], L["buffers"], kernel=L["kernel"],
                       trace_grid=L["trace_grid"], loop_scale=L["loop_scale"], dram_bytes=L["dram_bytes"],
                       flops=call["flops"], params=p)
        print(f"\nours, main kernel {L['kernel']} at {label(b, hq, hk, s)} (steady-state loop):")
        print(format_prediction(pred, p, top=15))
    return 0


if __name__ == "__main__":
    sys.exit(main())
