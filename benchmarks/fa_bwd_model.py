"""Attention backward, aiter's pipeline and ours, through the timing model (`flyasm perf`).

    python3 benchmarks/fa_bwd_model.py [--set DIR] [--shape B,HQ,HK,S ...] [--stalls]

Per shape, atomic16 and atomic32, no mask and causal (aiter's measured rows use mask 1, top-left):
the predicted time of each launch of the call (pre = odo, main = dq/dk/dv, post = dq_shuffle /
dq_convert) for aiter's set (../shared/aiter/gfx950/fmha_v3_bwd) and ours (kernels/fa_bwd_set.py,
built into the cache unless --set), both packed and launched by aiter's own host code
(aiter_bwd_launch.row_call: recorded at batch 1, one head, seqlen <= 1024, the dq/dk/dv loop scaled),
the whole call's TFLOPS (2 B Hq Sq Sk (3 d + 2 d), halved when causal) and ours / aiter. The ratios
are what counts: both sides are priced by one model in one run. --stalls prints our main kernel's
stall table (steady-state loop, builder lines) at the first shape.
Default shapes: aiter's figure shape (batch 8, 64/8 heads, seqlen 8192) and batch 16, 64 heads, 8192.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import aiter_bwd_launch as BL  # noqa: E402
from flyasm.perf import params as P  # noqa: E402
from flyasm.perf.model import predict  # noqa: E402

SHAPES = ((8, 64, 8, 8192), (16, 64, 64, 8192))


def price_call(row: dict, set_dir=None, p=None) -> list:
    """[(stage, kernel, Prediction)] of each launch of the call (set_dir None: aiter's set)."""
    call = BL.row_call(row, set_dir=set_dir)
    out = []
    for L in call["launches"]:
        pr = predict(L["co"], L["grid"], L["block"], L["kernarg"], L["buffers"], kernel=L["kernel"],
                     trace_grid=L["trace_grid"], loop_scale=L["loop_scale"], dram_bytes=L["dram_bytes"],
                     flops=call["flops"], params=p)
        out.append((L["stage"], L["kernel"], pr))
    return out, call["flops"]


def row_of(b, hq, hk, s, mask, a32) -> dict:
    return dict(dtype="bf16", hdim_q=128, hdim_v=128, mask=mask, atomic32=a32, bf16_cvt=1, mode=0, batch=b,
                nhead_q=hq, nhead_k=hk, seqlen_q=s, seqlen_k=s)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--set", help="our backward set (default: kernels/fa_bwd_set.py, built into the cache)")
    ap.add_argument("--shape", action="append", default=[], help="B,HQ,HK,S (repeatable)")
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
    p = P.load()
    t0 = time.time()
    print(f"{'shape':<18} {'mask':>4} {'dq':>3} | {'aiter pre/main/post us':>26} {'TFLOPS':>7} | "
          f"{'ours pre/main/post us':>26} {'TFLOPS':>7} | {'ours/aiter':>10} {'main':>6}")
    first_ours = None
    for (b, hq, hk, s) in shapes:
        for mask in (int(x) for x in a.masks.split(",")):
            for a32 in (int(x) for x in a.atomics.split(",")):
                row = row_of(b, hq, hk, s, mask, a32)
                theirs, flops = price_call(row, None, p)
                ours, _ = price_call(row, ours_set, p)
                if first_ours is None:
                    first_ours = ours
                tu, ou = sum(x[2].us for x in theirs), sum(x[2].us for x in ours)
                main_t = next(x[2].us for x in theirs if x[0] == "dqdkdv")
                main_o = next(x[2].us for x in ours if x[0] == "dqdkdv")
                fmt = lambda parts: "/".join(f"{x[2].us:.0f}" for x in parts)    # noqa: E731
                print(f"b{b} h{hq}/{hk} s{s:<6} {mask:>4} {'a32' if a32 else 'a16':>3} | {fmt(theirs):>26} "
                      f"{flops / tu / 1e6:7.0f} | {fmt(ours):>26} {flops / ou / 1e6:7.0f} | {tu / ou:10.2f} "
                      f"{main_t / main_o:6.2f}", flush=True)
    print(f"({time.time() - t0:.0f} s; constants: " + ", ".join(f"{n}={getattr(p, n):.3g}" for n in P.FITTED) + ")")
    if a.stalls and first_ours:
        from flyasm.perf.report import format_prediction
        main = next(x for x in first_ours if x[0] == "dqdkdv")
        print(f"\nours, main kernel {main[1]} at the first shape (steady-state loop):")
        print(format_prediction(main[2], p, top=15))
    return 0


if __name__ == "__main__":
    sys.exit(main())
