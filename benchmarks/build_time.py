"""Build time per kernel variant: flyasm's Python work (emit + .s text + static check) against the
bare LLVM work (llvm-mc + ld.lld on the same .s), as a ratio measured in one run.

    python benchmarks/build_time.py [KERNEL.py[:GRID] ...] [--synthetic N,N] [--repeat R] [--json PATH]

Default kernels: every kernels/*.py with a build() (its VARIANTS grid when it has one, else the
defaults); with none, synthetic MFMA/VALU streams of the --synthetic sizes. The build cache is never
consulted: llvm-mc and ld.lld are run directly on a temporary copy of the text. Each phase is
timed --repeat times and the median is reported. JSON goes to benchmarks/build_time.json unless
--json says where.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from flyasm import Kernel, a, s, v  # noqa: E402
from flyasm.asm.toolchain import find_toolchain  # noqa: E402
from flyasm.asm.writer import render  # noqa: E402
from flyasm.check import check_kernel  # noqa: E402
from flyasm.dispatch import load_grid, load_module  # noqa: E402


def synthetic(n: int) -> Kernel:
    """n instructions shaped like an attention inner loop: one MFMA per four VALU and one SALU,
    rotating over four accumulators (hazard-free, so the checker passes it)."""
    k = Kernel(f"synthetic_{n}", block=256)
    out = k.arg("out", "ptr")
    k.s_load_dwordx2(s[4:5], k.kernarg_ptr, out.offset)
    k.s_waitcnt(lgkmcnt=0)
    i = 0
    while i < n:
        acc = (i // 5) % 4
        k.v_mfma_f32_32x32x16_bf16(a[16 * acc:16 * acc + 15], v[2:5], v[6:9], a[16 * acc:16 * acc + 15])
        for j in range(4):
            r = 10 + (i + j) % 32
            k.v_fma_f32(v[r], v[r], 0.5, v[1])
        k.s_add_u32(s[6 + i % 8], s[6 + i % 8], 1)
        i += 6
    k.global_store_dword(v[1], v[10], s[4:5])
    k.s_endpgm()
    return k


def discover() -> list[str]:
    return sorted(str(p) for p in (ROOT / "kernels").glob("*.py") if "def build(" in p.read_text())


def variants(specs: list[str], sizes: list[int]) -> list[tuple[str, callable]]:
    """(label, zero-argument builder) for every variant."""
    out = []
    for spec in specs:
        path, _, grid = spec.partition(":")
        mod = load_module(path)
        if grid or hasattr(mod, "VARIANTS"):
            _, _, grid_params = load_grid(spec)
        else:
            grid_params = [{}]
        for p in grid_params:
            label = Path(path).stem + ("(" + ",".join(f"{k}={val}" for k, val in p.items()) + ")" if p else "")
            out.append((label, lambda mod=mod, p=p: mod.build(**p)))
    for n in sizes:
        out.append((f"synthetic({n})", lambda n=n: synthetic(n)))
    return out


def _run(cmd: list[str]) -> float:
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    dt = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"{Path(cmd[0]).name} failed: {r.stderr.strip()[:300]}")
    return dt


def measure(label: str, make, repeat: int, tc, td: Path) -> dict:
    t = {"emit": [], "render": [], "check": [], "llvm_mc": [], "ld_lld": []}
    for _ in range(repeat):
        t0 = time.perf_counter()
        k = make()
        t1 = time.perf_counter()
        text, _ = render(k)
        t2 = time.perf_counter()
        findings = len(check_kernel(k))      # timed whether or not the kernel is clean yet
        t3 = time.perf_counter()
        t["emit"].append(t1 - t0)
        t["render"].append(t2 - t1)
        t["check"].append(t3 - t2)
        src, obj, co = td / f"{k.name}.s", td / f"{k.name}.o", td / f"{k.name}.co"
        src.write_text(text)
        t["llvm_mc"].append(_run([str(tc.mc), "-triple=amdgcn-amd-amdhsa", "-mcpu=gfx950",
                                  f"--amdhsa-code-object-version={k.code_object}", "-filetype=obj",
                                  str(src), "-o", str(obj)]))
        t["ld_lld"].append(_run([str(tc.lld), "-shared", "--no-undefined", str(obj), "-o", str(co)]))
    med = {key: statistics.median(vals) for key, vals in t.items()}
    py = med["emit"] + med["render"] + med["check"]
    llvm = med["llvm_mc"] + med["ld_lld"]
    return {"variant": label, "kernel": k.name, "instructions": len(k.stream), "findings": findings, "repeat": repeat,
            **{f"{key}_s": val for key, val in med.items()},
            "flyasm_python_s": py, "llvm_s": llvm, "ratio_python_over_llvm": py / llvm}


def table(rows: list[dict]) -> str:
    head = (f"{'kernel':<36} {'insts':>6} {'finds':>5} {'emit ms':>8} {'text ms':>8} {'check ms':>9} {'python ms':>10} "
            f"{'mc ms':>7} {'lld ms':>7} {'llvm ms':>8} {'py/llvm':>8}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['kernel'][:36]:<36} {r['instructions']:>6} {r['findings']:>5} {1e3 * r['emit_s']:>8.1f} "
                     f"{1e3 * r['render_s']:>8.1f} {1e3 * r['check_s']:>9.1f} {1e3 * r['flyasm_python_s']:>10.1f} "
                     f"{1e3 * r['llvm_mc_s']:>7.1f} {1e3 * r['ld_lld_s']:>7.1f} {1e3 * r['llvm_s']:>8.1f} "
                     f"{r['ratio_python_over_llvm']:>8.2f}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kernels", nargs="*", metavar="KERNEL.py[:GRID]")
    ap.add_argument("--synthetic", default=None, help="comma-separated synthetic sizes (instructions)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", default=str(Path(__file__).with_suffix(".json")))
    args = ap.parse_args(argv)
    specs = args.kernels or discover()
    if args.synthetic is not None:
        sizes = [int(x) for x in args.synthetic.split(",") if x]
    else:
        sizes = [] if specs else [1000, 4000, 16000]
    tc = find_toolchain()
    rows = []
    with tempfile.TemporaryDirectory(prefix="flyasm-bt-") as td:
        for label, make in variants(specs, sizes):
            make()                          # warm-up: tables, imports, the toolchain's page cache
            rows.append(measure(label, make, args.repeat, tc, Path(td)))
    print(f"LLVM {tc.version}; median of {args.repeat}; python = emit + text + check; llvm = llvm-mc + ld.lld")
    print(table(rows))
    py = sum(r["flyasm_python_s"] for r in rows)
    llvm = sum(r["llvm_s"] for r in rows)
    print(f"all variants: python {py * 1e3:.1f} ms, llvm {llvm * 1e3:.1f} ms, ratio {py / llvm:.2f}")
    Path(args.json).write_text(json.dumps({"toolchain": str(tc.version), "rows": rows,
                                           "total": {"flyasm_python_s": py, "llvm_s": llvm,
                                                     "ratio_python_over_llvm": py / llvm}}, indent=2) + "\n")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
