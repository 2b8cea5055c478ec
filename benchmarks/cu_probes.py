"""The compute unit's issue rules, as the timing model prices them and, on an AMD GPU, as measured.

    python3 benchmarks/cu_probes.py [--pattern NAME ...] [--iters 64,256] [--clock-grid 512] [--clock-iters N]
                                    [--rounds N] [--launch-repeats N] [--md PATH] [--json PATH]

Issue 20's last within-run ratio (flydsl#629-b) misses because the model prices FlyDSL's generic
kernel, a VALU-bound loop full of compare -> s_nop -> v_cndmask idioms, 15-23% slow; every account of
the hardware that would explain it (VALU dual issue, a separate TRANS pipe, 1-cycle wait states,
faster transcendentals, MFMA -> VALU issue rules) changes the price of a single instruction pattern.
This measures those patterns one at a time (kernels/cu_probe.py: a loop of one pattern timed with
the shader clock inside the kernel).

For each pattern and workgroup size (4 waves: one a SIMD; 8: two a SIMD, if the waves of a workgroup
go to the SIMDs round-robin, as the model assumes), one workgroup on one CU:
- model: the CU model's rule for one unit (its docstring, flyasm.perf.cu);
- flyasm perf: what the model prices, per unit and wave: the difference of two predicted launches
  (--iters rounds each) over the units between them, so set-up and stores cancel;
- alternatives: what each tested hypothesis says instead;
- measured (AMD GPU only): the same difference of s_memtime ticks, median over the waves, and the
  clock the pattern ran at (s_memtime ticks over s_memrealtime ticks, times the wall-clock rate).

The chase patterns time a dependent load in a buffer that fits the L2, the Infinity Cache, or
neither: the model prices every read of them at one fitted latency (params.vmem_latency).

The clock table runs the MFMA and the VALU pattern on 1 and on --clock-grid workgroups (every CU
busy) for --clock-iters rounds, long enough to reach the sustained clock: the model takes the clock
from the fraction of CUs busy alone (params.clock_mhz); a power limit that depends on what the CUs
do would show as different clocks for the two patterns. A long launch of the MFMA pattern (--rounds
workgroups a slot) gives the clock by when its waves began: the model has one clock a launch. The
dispatch table times a launch that runs
no round (hipEvents, as benchmarks/silicon.py) against the model's launch overhead. Without an AMD
GPU the script prints the model's columns, says why nothing was measured, and exits 0.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "kernels")]

import cu_probe as CP  # noqa: E402

from flyasm.perf import params as P  # noqa: E402
from flyasm.perf.model import predict  # noqa: E402
from flyasm.run import hip  # noqa: E402

MODEL_CHAIN_BYTES = 1 << 20     # the chase buffer the model's launches record (the emulator holds it)
GROUPS = 4                      # start-time groups of the long launch's clock table


def predicted_cycles(k, co: bytes, iters: int, words: np.ndarray, params=None) -> int:
    """Cycles of one workgroup of probe k (built as co) running `iters` rounds, as flyasm perf prices it."""
    out = np.zeros((k.threads // 64) * CP.RECORD, np.uint32)
    return predict(co, 1, k.threads, lambda at: CP.kernarg(k, at["out"], iters, at["chain"]),
                   {"out": out, "chain": words}, dram_bytes=0, params=params).cycles


def per_unit(c_lo: float, c_hi: float, iters: tuple) -> float:
    return (c_hi - c_lo) / ((iters[1] - iters[0]) * CP.UNROLL)


def model_price(name: str, waves: int, iters: tuple = (2, 6), params=None) -> float:
    """flyasm perf's cycles a unit for one wave of the probe (the model's price of a round is exact
    after one round, so two short launches give it)."""
    k = CP.build(name, waves)
    co = k.build().co
    nbytes = min(CP.PATTERNS[name].chain_bytes, MODEL_CHAIN_BYTES)
    words = CP.chain(nbytes) if nbytes else np.zeros(CP.LINE // 4, np.uint32)
    lo, hi = (predicted_cycles(k, co, n, words, params) for n in iters)
    return per_unit(lo, hi, iters)


def measure(name: str, waves: int, iters: tuple, run, khz: float, chain_bytes: int | None = None
            ) -> tuple[float, float]:
    """(shader-clock ticks a unit, median over the waves; the clock in MHz the pattern ran at) from two
    launches of one workgroup. run(kernel, iters, chain_words) -> records (cu_probe.run on the GPU);
    khz: the rate of s_memrealtime's counter; chain_bytes: the chase buffer's size (default the
    pattern's). A wave whose check value is wrong stops the run."""
    k = CP.build(name, waves)
    nbytes = CP.PATTERNS[name].chain_bytes if chain_bytes is None else chain_bytes
    words = CP.chain(nbytes) if nbytes else None
    got = [run(k, n, words) for n in iters]
    expect = CP.expected_bits(name, iters[1] * CP.UNROLL, words)
    bad = np.nonzero(got[1]["check"] != expect)[0]
    if len(bad):
        raise RuntimeError(f"{name}: wave {int(bad[0])} checks {got[1]['check'][bad[0]]}, expected {expect}")
    ticks = per_unit(got[0]["ticks"].astype(np.float64), got[1]["ticks"].astype(np.float64), iters)
    return float(np.median(ticks)), clock_mhz(got[1], khz)


def clock_mhz(rec: dict, khz: float) -> float:
    """The clock s_memtime ran at: its ticks over s_memrealtime's, times the real-time counter's rate."""
    return float(np.median(rec["ticks"] / np.maximum(rec["realtime"], 1))) * khz / 1e3


def clock_by_start(rec: dict, khz: float, groups: int) -> list[tuple[float, float]]:
    """(start, MHz) for `groups` groups of a launch's waves, ordered by when their timed loops began:
    each group's median start in microseconds after the first wave's, and the median clock it ran at
    (clock_mhz). A clock that falls as a long launch heats or draws power shows as a falling column."""
    order = np.argsort(rec["start"], kind="stable")
    t0 = int(rec["start"][order[0]])
    out = []
    for idx in np.array_split(order, groups):
        part = {k: v[idx] for k, v in rec.items()}
        start = float(np.median(part["start"].astype(np.float64) - t0)) / khz * 1e3
        out.append((start, clock_mhz(part, khz)))
    return out


def launch_us(rt, grid: int, repeats: int) -> float:
    """Median device microseconds of a probe launch that runs no round (hipEvents around each launch,
    benchmarks/silicon.py's time_events): what one dispatch of `grid` workgroups costs by itself."""
    from silicon import time_events
    k = CP.build("valu_dep", 8)
    co = k.build().co
    fn = rt.get_function(rt.load_module(co), k.name)
    out = rt.malloc(grid * 8 * CP.RECORD * 4)
    chain = rt.malloc(CP.LINE)
    try:
        return float(np.median(time_events(rt, fn, (grid, 1, 1), k.threads, CP.kernarg(k, out, 0, chain),
                                           rt.stream(), 10, repeats))) * 1e6
    finally:
        rt.free(out)
        rt.free(chain)


def predicted_launch_us(grid: int) -> float:
    """flyasm perf's microseconds for the same launch (its launch overhead and the little work)."""
    k = CP.build("valu_dep", 8)
    out = np.zeros(grid * 8 * CP.RECORD, np.uint32)
    return predict(k.build().co, grid, k.threads, lambda at: CP.kernarg(k, at["out"], 0, at["chain"]),
                   {"out": out, "chain": np.zeros(CP.LINE // 4, np.uint32)}, dram_bytes=0).us


def table(rows: list[dict]) -> str:
    lines = ["| pattern | unit | the model's rule, one wave a SIMD | flyasm perf, 1 / 2 waves a SIMD "
             "| alternatives (one wave a SIMD unless they say) | measured, 1 / 2 waves a SIMD | clock MHz |", "|" + "---|" * 7]
    for r in rows:
        pat = CP.PATTERNS[r["pattern"]]
        alts = "; ".join(f"{k}: {v:g}" for k, v in pat.alternatives.items()) or "-"
        perf = " / ".join(f"{x:.2f}" for x in r["perf"])
        meas = " / ".join(f"{x:.2f}" for x, _ in r["measured"]) if "measured" in r else "-"
        mhz = " / ".join(f"{m:.0f}" for _, m in r["measured"]) if "measured" in r else "-"
        lines.append(f"| {r['pattern']} | {pat.unit} | {pat.cycles:g}: {pat.why} | {perf} | {alts} | {meas} | {mhz} |")
    return "\n".join(lines)


def main(argv=None, runtime=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pattern", action="append", choices=sorted(CP.PATTERNS), help="default: all")
    ap.add_argument("--iters", default="64,256", help="the two round counts whose difference is timed")
    ap.add_argument("--clock-grid", type=int, default=512, help="workgroups of the clock table (AMD GPU only)")
    ap.add_argument("--clock-iters", type=int, default=200000, help="rounds of the clock table's launches")
    ap.add_argument("--rounds", type=int, default=8, help="workgroups a clock-grid slot in the long launch")
    ap.add_argument("--launch-repeats", type=int, default=200, help="launches timed for the dispatch table")
    ap.add_argument("--md", type=Path, help="also write the tables here")
    ap.add_argument("--json", type=Path, help="also write the numbers here (model and measured, per pattern)")
    a = ap.parse_args(argv)
    try:
        iters = tuple(int(x) for x in a.iters.split(","))
    except ValueError:
        ap.error("--iters is two round counts, e.g. 64,256")
    if len(iters) != 2 or not 0 < iters[0] < iters[1]:
        ap.error("--iters is two round counts, the first smaller, e.g. 64,256")
    names = a.pattern or list(CP.PATTERNS)
    rows = [dict(pattern=n, perf=[model_price(n, w) for w in CP.WAVES]) for n in names]
    ok, why = (True, "") if runtime else hip.available()
    rt = runtime or (hip.HipRuntime() if ok else None)
    if rt is not None:
        khz = rt.wall_clock_khz()

        def on_gpu(k, n, words=None, grid=1):
            return CP.run(k, n, grid=grid, backend="hip", runtime=rt, chain_words=words)
        for r in rows:
            r["measured"] = [measure(r["pattern"], w, iters, on_gpu, khz) for w in CP.WAVES]
    out = ["## One CU, one pattern", "",
           f"Cycles a unit for one wave; flyasm perf's include the loop's 3 scalar instructions a round "
           f"({4 * 3 / CP.UNROLL:g} cycles a unit at one wave a SIMD).", "", table(rows), ""]
    p = P.load()
    clocks, dispatch = [], []
    out += ["## The clock each pattern runs at", "",
            "The model's clock depends only on the fraction of CUs a launch keeps busy (params.clock_mhz); a "
            "power limit that depends on what the CUs do would show as different clocks for the two patterns.", "",
            "| pattern | workgroups (8 waves) | the model's MHz | measured MHz |", "|---|---|---|---|"]
    for name in ("mfma", "valu_indep"):
        for grid in (1, a.clock_grid):
            mhz = clock_mhz(on_gpu(CP.build(name, 8), a.clock_iters, grid=grid), khz) if rt is not None else None
            model_mhz = p.clock_mhz(min(1.0, grid / p.n_cu))
            clocks.append(dict(pattern=name, workgroups=grid, model_mhz=model_mhz, measured_mhz=mhz))
            out.append(f"| {name} | {grid} | {model_mhz:.0f} | {'-' if mhz is None else f'{mhz:.0f}'} |")
    over = []
    out += ["", "## The clock over one long launch", "",
            f"The MFMA pattern on {a.rounds} x {a.clock_grid} workgroups (several rounds a CU); its waves in "
            f"{GROUPS} groups by when they began. The model's clock is one number for the launch.", "",
            "| waves begun (group) | median start, us | the model's MHz | measured MHz |", "|---|---|---|---|"]
    if rt is not None:
        over = clock_by_start(on_gpu(CP.build("mfma", 8), max(1, a.clock_iters // a.rounds),
                                     grid=a.rounds * a.clock_grid), khz, GROUPS)
    for g in range(GROUPS):
        start, mhz = (f"{over[g][0]:.0f}", f"{over[g][1]:.0f}") if over else ("-", "-")
        out.append(f"| {g + 1} of {GROUPS} | {start} | {p.clock_mhz(1.0):.0f} | {mhz} |")
    out += ["", "## One dispatch by itself", "",
            "A probe launch that runs no round: the model's launch overhead (params.launch_us, fitted on "
            "measured rows of both authors) against hipEvent device time.", "",
            "| workgroups (8 waves) | flyasm perf us | measured us (median of --launch-repeats) |", "|---|---|---|"]
    for grid in (1, a.clock_grid):
        meas = launch_us(rt, grid, a.launch_repeats) if rt is not None else None
        model_us = predicted_launch_us(grid)
        dispatch.append(dict(workgroups=grid, model_us=model_us, measured_us=meas))
        out.append(f"| {grid} | {model_us:.2f} | {'-' if meas is None else f'{meas:.2f}'} |")
    if rt is None:
        out += ["", f"Not measured: {why}"]
    text = "\n".join(out)
    print(text)
    if a.md:
        a.md.write_text(text + "\n")
    if a.json:
        patterns = [dict(pattern=r["pattern"], unit=CP.PATTERNS[r["pattern"]].unit, waves=list(CP.WAVES),
                         rule=CP.PATTERNS[r["pattern"]].cycles, model=r["perf"],
                         alternatives=CP.PATTERNS[r["pattern"]].alternatives,
                         measured=[m for m, _ in r["measured"]] if "measured" in r else None,
                         mhz=[c for _, c in r["measured"]] if "measured" in r else None) for r in rows]
        a.json.write_text(json.dumps(dict(measured=rt is not None, reason=why or None, iters=list(iters),
                                          patterns=patterns, clocks=clocks, dispatch=dispatch,
                                          clock_by_start=[dict(start_us=t, mhz=m) for t, m in over]),
                                     indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
