"""Every flyasm tool over a directory tree of code objects: what works, what the checker finds,
and how long each tool takes per kernel, one table per family (family = the subdirectory).

    python benchmarks/corpus.py DIR [--jobs N] [--no-lift] [--json PATH]

Tools, per object: read (ELF, descriptors, metadata), disasm (disassemble -> .s -> llvm-mc/ld.lld
gives back the same .text, descriptors, metadata and st_size), lift (lift -> the Kernel it builds
-> the same bytes; per kernel), check (per kernel: findings by rule and severity), stats (per
kernel), emu-decode (the emulator's decoder, per kernel). One object's failure is a row with its
error sentence, never a crash of the run. Objects run in a process pool (--jobs, default: CPU
count). Times are wall seconds inside the worker, divided by the object's kernel count.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter, defaultdict
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TOOLS = ("read", "disasm", "lift", "check", "stats", "emu-decode")


def _sentence(e: BaseException) -> str:
    from flyasm.errors import FlyasmError
    if isinstance(e, FlyasmError):
        return str(e).splitlines()[0]
    return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]


def _severity(f) -> str:
    """The checker's severity field when its Finding has one, else its kind (hazard/waitcnt)."""
    sev = getattr(f, "severity", None)
    return str(sev) if sev is not None else f.kind


def run_object(path: str, do_lift: bool = True) -> dict:
    """One object through every tool; never raises."""
    from flyasm.asm.driver import assemble
    from flyasm.codeobj.disasm import disassemble, render_module, verify_encodings
    from flyasm.codeobj.reader import read_code_object
    from flyasm.emu.program import load_program
    from flyasm.lift import lift
    from flyasm.lift.verify import assemble_kernel, differences, kernel_differences
    from flyasm.report.program import as_program
    from flyasm.report.stats import stats

    row = {"path": path, "kernels": [], "instructions": 0, "ok": {}, "error": {}, "seconds": {}, "findings": {},
           "slowest": {}}

    def timed(tool, fn):
        t0 = time.perf_counter()
        try:
            out = fn()
            row["ok"].setdefault(tool, True)
            return out
        except Exception as e:  # noqa: BLE001 - a failing tool is a row, not a crash
            row["ok"][tool] = False
            row["error"].setdefault(tool, _sentence(e))
            return None
        finally:
            row["seconds"][tool] = row["seconds"].get(tool, 0.0) + time.perf_counter() - t0

    co = timed("read", lambda: read_code_object(path))
    if co is None:
        for t in TOOLS[1:]:
            row["ok"][t] = False
            row["error"][t] = "not read"
        return row
    row["kernels"] = [k.name for k in co.kernels]

    def round_trip():
        mod = disassemble(co)
        verify_encodings(mod)
        back = read_code_object(assemble(render_module(mod, co), co.code_object_version or 5, name="rt.s"))
        diffs = differences(co, back)
        if diffs:
            raise AssertionError("; ".join(diffs))
    timed("disasm", round_trip)

    whole = len(co.kernels) == 1 and len(co.functions) == 1
    for kc in co.kernels:
        prog = timed("check", lambda: as_program(co, kc.name))
        if prog is not None:
            row["instructions"] += len(prog.stream)
            found = timed("check", lambda: prog.check())
            for f in found or []:
                key = f"{f.rule}|{_severity(f)}"
                row["findings"][key] = row["findings"].get(key, 0) + 1
            timed("stats", lambda: stats(prog))
        else:
            row["ok"]["stats"] = False
            row["error"].setdefault("stats", "not decoded")
        timed("emu-decode", lambda: load_program(co.raw, kc.name))
        if do_lift:
            def lift_back(name=kc.name):
                res = lift(co, stem="lifted_kernel", kernel=name)
                back = read_code_object(assemble_kernel(res.kernel))
                diffs = differences(co, back) if whole else kernel_differences(co, back, name)
                if diffs:
                    raise AssertionError("; ".join(diffs))
            timed("lift", lift_back)
    n = max(1, len(co.kernels))
    row["seconds"] = {t: s / n for t, s in row["seconds"].items()}
    return row


def family_of(path: Path, root: Path) -> str:
    rel = path.relative_to(root)
    return rel.parts[0] if len(rel.parts) > 1 else "."


def run(root: Path, jobs: int, do_lift: bool, progress=None) -> list[dict]:
    paths = sorted(root.rglob("*.co"))
    rows = []
    if jobs <= 1:
        for p in paths:
            rows.append(run_object(str(p), do_lift))
            if progress:
                progress(rows[-1])
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futs = {pool.submit(run_object, str(p), do_lift): p for p in paths}
            for fut in as_completed(futs):
                try:
                    rows.append(fut.result())
                except Exception as e:  # noqa: BLE001 - a worker that died is a row too
                    rows.append({"path": str(futs[fut]), "kernels": [], "instructions": 0,
                                 "ok": {t: False for t in TOOLS}, "error": {"read": f"worker died: {_sentence(e)}"},
                                 "seconds": {}, "findings": {}})
                if progress:
                    progress(rows[-1])
    for r in rows:
        r["family"] = family_of(Path(r["path"]), root)
    return sorted(rows, key=lambda r: r["path"])


def summarise(rows: list[dict], tools) -> dict:
    fams: dict[str, dict] = {}
    for r in rows:
        f = fams.setdefault(r["family"], {"objects": 0, "kernels": 0, "instructions": 0, "ok": Counter(),
                                          "findings": Counter(), "seconds": defaultdict(list), "failures": []})
        f["objects"] += 1
        f["kernels"] += len(r["kernels"])
        f["instructions"] += r["instructions"]
        for t in tools:
            f["ok"][t] += bool(r["ok"].get(t))
            if t in r["seconds"]:
                f["seconds"][t].append((r["seconds"][t], Path(r["path"]).name))
            if not r["ok"].get(t) and r["error"].get(t) not in (None, "not read", "not decoded"):
                f["failures"].append((Path(r["path"]).name, t, r["error"][t]))
        f["findings"].update(r["findings"])
    return fams


def format_tables(fams: dict, tools) -> str:
    out = []
    for name in sorted(fams):
        f = fams[name]
        out.append(f"== {name}: {f['objects']} objects, {f['kernels']} kernels, {f['instructions']} instructions")
        out.append("  objects ok   " + "  ".join(f"{t:>10}" for t in tools))
        out.append("               " + "  ".join(f"{f['ok'][t]:>7}/{f['objects']:<2}" for t in tools))
        out.append("  s per kernel " + "  ".join(f"{_mean(f['seconds'][t]):>10.3f}" for t in tools))
        for t in tools:
            if f["seconds"][t]:
                s, who = max(f["seconds"][t])
                out.append(f"    slowest {t:<10} {s:8.3f} s  {who}")
        if f["findings"]:
            out.append("  findings (rule | severity: count)")
            for key, n in sorted(f["findings"].items(), key=lambda kv: (-kv[1], kv[0])):
                rule, sev = key.split("|")
                out.append(f"    {rule:<32} {sev:<10} {n:>6}")
        else:
            out.append("  findings: none")
        for obj, t, err in f["failures"]:
            out.append(f"  FAIL {t:<10} {obj}: {err}")
        out.append("")
    return "\n".join(out)


def _mean(xs) -> float:
    return sum(s for s, _ in xs) / len(xs) if xs else 0.0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes (default: CPU count)")
    ap.add_argument("--no-lift", action="store_true", help="skip lift (the slowest tool)")
    ap.add_argument("--json", type=Path, help="also write every row as JSON here")
    a = ap.parse_args(argv)
    if not a.dir.is_dir():
        print(f"error: {a.dir} is not a directory", file=sys.stderr)
        return 2
    tools = [t for t in TOOLS if t != "lift" or not a.no_lift]
    t0 = time.perf_counter()
    rows = run(a.dir, max(1, a.jobs), not a.no_lift)
    wall = time.perf_counter() - t0
    if not rows:
        print(f"no .co files under {a.dir}")
        return 0
    fams = summarise(rows, tools)
    print(format_tables(fams, tools))
    total = len(rows)
    print(f"{total} objects, {sum(len(r['kernels']) for r in rows)} kernels, {wall:.1f} s wall with {a.jobs} job(s); "
          + ", ".join(f"{t} {sum(bool(r['ok'].get(t)) for r in rows)}/{total}" for t in tools))
    if a.json:
        a.json.write_text(json.dumps({"rows": rows, "wall_s": wall, "jobs": a.jobs}, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
