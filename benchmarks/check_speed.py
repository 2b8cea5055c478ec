"""Static-checker time on code objects: disassembly (llvm-objdump + parse) and `check_program`
(hazards, wait counters, LDS address analysis) timed apart, per kernel.

    python benchmarks/check_speed.py [FILE.co ...] [--repeat R] [--json PATH]

Default: the largest fmha forward kernels of ../shared/aiter/gfx950 when that directory exists.
Each check is run --repeat times on a fresh read of the program (no cached instruction facts
carried over) and the minimum CPU time (time.process_time) is reported with the median wall time:
on a shared machine the CPU time is the steadier number. The goal is < 1 s of checker time for a
3,000-instruction kernel.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from flyasm.report.program import as_program  # noqa: E402

SHARED = ROOT.parent / "shared" / "aiter" / "gfx950"
DEFAULT = ["fmha_v3_fwd/fwd_hd128_bf16.co", "fmha_v3_fwd/fwd_hd128_bf16_causal.co"]


def measure(path: str, repeat: int) -> dict:
    cpu_read, cpu_check, wall_check = [], [], []
    for _ in range(repeat):
        c0, w0 = time.process_time(), time.perf_counter()
        prog = as_program(path)
        items = prog.items()
        c1, w1 = time.process_time(), time.perf_counter()
        findings = prog.check(items=items)
        c2, w2 = time.process_time(), time.perf_counter()
        cpu_read.append(c1 - c0)
        cpu_check.append(c2 - c1)
        wall_check.append(w2 - w1)
    return {"file": path, "instructions": len(prog.stream), "findings": len(findings),
            "read_cpu_s": min(cpu_read), "check_cpu_s": min(cpu_check),
            "check_wall_median_s": statistics.median(wall_check)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    files = a.files or [str(SHARED / f) for f in DEFAULT if (SHARED / f).exists()]
    if not files:
        print("no code objects given and ../shared/aiter is absent")
        return 1
    rows = [measure(f, a.repeat) for f in files]
    print(f"{'kernel':<44} {'insts':>6} {'read cpu s':>11} {'check cpu s':>12} {'check wall s':>13} findings")
    for r in rows:
        print(f"{Path(r['file']).name:<44} {r['instructions']:>6} {r['read_cpu_s']:>11.2f} "
              f"{r['check_cpu_s']:>12.2f} {r['check_wall_median_s']:>13.2f} {r['findings']}")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
