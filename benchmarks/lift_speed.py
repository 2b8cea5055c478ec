"""Lift speed on big code objects: `flyasm lift` of a synthetic ~30,000-instruction kernel (an
unrolled MFMA / ds_read / VALU stream in several loops), then building the lifted files back.

    python benchmarks/lift_speed.py [--instructions N] [--repeat R] [--json PATH]

Phases, each timed --repeat times (median reported): lift (llvm-objdump, llvm-mc encoding check,
plan inference, Python text), write, and build (import the lifted files and call build()), and
the byte comparison of the rebuilt code object with the original (done once, must be exact).
JSON goes to benchmarks/lift_speed.json unless --json says where.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from flyasm import Kernel, a, s, v  # noqa: E402
from flyasm.isa.operands import Waitcnt  # noqa: E402


def synthetic_kernel(instructions: int = 30000, loops: int = 6) -> Kernel:
    """About `instructions` instructions: a prologue, then `loops` counted loops whose bodies are
    unrolled units of 4 ds_read_b128, a wait, and 8 MFMA 32x32x16 bf16 into AGPR accumulators,
    each followed by VALU work (exp, fma, packing) on other registers."""
    k = Kernel(f"synthetic_lift_{instructions}", block=256, lds=65536)
    out = k.arg("out", "ptr")
    n = k.arg("n", "i32")
    k.s_load_dwordx2(s[4:5], k.kernarg_ptr, out.offset)
    k.s_load_dword(s[6], k.kernarg_ptr, n.offset)
    k.v_lshlrev_b32(v[1], 4, v[0])
    k.s_waitcnt(lgkmcnt=0)
    unit = 4 + 1 + 8 * 4            # instructions per unrolled unit
    units = max(1, (instructions - 10 - 4 * loops) // unit)
    per_loop = max(1, units // loops)
    for lp in range(loops):
        k.s_mov_b32(s[8], 2)
        k.label(f"loop{lp}")
        with k.region(f"loop{lp}"):
            for u in range(per_loop):
                base = 192 + 16 * (u % 4)
                for j in range(4):
                    k.ds_read_b128(v[base + 4 * j:base + 4 * j + 3], v[1], offset=(64 * j + 1024 * (u % 8)) % 65536)
                k.s_waitcnt(Waitcnt(lgkmcnt=0))
                for m in range(8):
                    acc = 16 * ((u + m) % 8)
                    k.v_mfma_f32_32x32x16_bf16(a[acc:acc + 15], v[base:base + 3], v[base + 4:base + 7],
                                               a[acc:acc + 15])
                    r = 32 + (m * 3 + u) % 64
                    k.v_exp_f32(v[r], v[r + 1])
                    k.v_fma_f32(v[r + 2], v[r], 0.5, v[r + 2])
                    k.v_cvt_pk_bf16_f32(v[r + 3], v[r], v[r + 2])
            k.s_sub_u32(s[8], s[8], 1)
            k.s_cmp_eq_u32(s[8], 0)
            k.s_cbranch_scc0(f"loop{lp}")
    k.s_nop(15)
    k.s_nop(15)
    k.global_store_dword(v[1], v[32], s[4:5])
    k.s_endpgm()
    return k


def _median(fn, repeat):
    times, result = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), result


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instructions", type=int, default=30000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", default=str(ROOT / "benchmarks" / "lift_speed.json"))
    args = ap.parse_args(argv)

    from flyasm.codeobj.reader import read_code_object
    from flyasm.lift import lift
    from flyasm.lift.verify import assemble_kernel, differences, load_kernel

    k = synthetic_kernel(args.instructions)
    with tempfile.TemporaryDirectory(prefix="flyasm-lift-bench-") as td:
        co_path = Path(td) / "big.co"
        co_path.write_bytes(assemble_kernel(k))
        orig = read_code_object(co_path)
        t_lift, res = _median(lambda: lift(co_path, stem="big_kernel"), args.repeat)
        out = Path(td) / "big_kernel.py"
        t_write, paths = _median(lambda: res.write(out), args.repeat)
        t_build, kk = _median(lambda: load_kernel(out), args.repeat)
        back = read_code_object(assemble_kernel(kk))
        diffs = differences(orig, back)
        lines = [len(p.read_text().splitlines()) for p in paths]
    report = {
        "instructions": res.instructions, "raw_words": res.raw, "functions": res.functions,
        "files": len(paths), "largest_file_lines": max(lines), "plan_regions": len(res.plan),
        "lift_s": round(t_lift, 3), "write_s": round(t_write, 3), "build_lifted_s": round(t_build, 3),
        "byte_exact": not diffs, "differences": diffs, "repeat": args.repeat,
    }
    print(f"lift of {res.instructions} instructions: {t_lift:.2f} s (median of {args.repeat}); write {t_write:.2f} s; "
          f"build() of the lifted files {t_build:.2f} s")
    print(f"{len(paths)} files, {res.functions} functions, largest file {max(lines)} lines, "
          f"{len(res.plan)} named register regions, {res.raw} raw words; byte-exact: {not diffs}")
    Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return report


if __name__ == "__main__":
    main()
