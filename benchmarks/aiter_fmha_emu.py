"""aiter's shipped attention forward kernels in the emulator against torch, with aiter's own packing.

    python benchmarks/aiter_fmha_emu.py [--shape plain|causal|B,HQ,HK,SQ,SK,causal ...] [--no-report]

For each shape: aiter's host code (../shared/aiter/client/drop_in.sh pack) gives the kernel, grid
and kernarg bytes; the emulator runs them in report mode (hazards="report", races="report") on fresh
random bf16 inputs; the answer is compared with torch SDPA in float32 (the reference, bounds and
driver are tests/test_emu_aiter_fmha.py's). Prints max|dO| and max|dLSE| with their derived bounds,
the emulator's CPU seconds (process time: the machine is shared, wall time is not a measure of the
emulator) and wall seconds, wave-instructions, and the distinct-violation report.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]       # flyasm from this checkout; the test's driver and bounds

import test_emu_aiter_fmha as fa  # noqa: E402


def _shape(text: str) -> fa.Shape:
    if text == "plain":
        return fa.PLAIN
    if text == "causal":
        return fa.CAUSAL
    b, hq, hk, sq, sk, c = text.split(",")
    return fa.Shape(int(b), int(hq), int(hk), int(sq), int(sk), c in ("1", "causal", "true", "True"))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", action="append", default=None,
                    help="plain, causal or B,HQ,HK,SQ,SK,causal|plain (repeatable; default: plain and causal)")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--no-report", action="store_true", help="print only the rule counts, not every row")
    a = ap.parse_args(argv)
    why = fa._why_not()
    if why:
        sys.exit(f"aiter_fmha_emu: {why}")
    for text in a.shape or ["plain", "causal"]:
        sh = _shape(text)
        t0 = time.perf_counter()
        err, res, cpu, p = fa.run_case(sh, seed=a.seed)
        wall = time.perf_counter() - t0
        ok = "ok" if err["o_ok"] and err["lse_ok"] else "OUT OF BOUND"
        print(f"{sh}: {p['knl_name']} grid {tuple(p['grid'])} x 512, {res.wave_instructions} wave-instructions; "
              f"emulator {cpu:.1f} s CPU ({wall:.1f} s wall incl. aiter's packing)")
        print(f"  max|dO| {err['dO']:.3g} (bound {err['o_tol']:.3g})  max|dLSE| {err['dLSE']:.3g} "
              f"(bound {err['lse_tol']:.3g})  {ok}")
        rep = res.report
        print("  rules: " + ", ".join(f"{r} x{n}" for r, n in sorted(rep.rules().items())))
        if not a.no_report:
            print("  " + rep.text().replace("\n", "\n  "))


if __name__ == "__main__":
    main()
