"""Every flyasm tool over a directory tree of code objects: what works, what the checker finds,
and how long each tool takes per kernel, one table per family (family = the subdirectory).

    python benchmarks/corpus.py DIR [--jobs N] [--no-lift] [--json PATH] [--repeat N] [--no-cli]

Tools, per object: read (ELF, descriptors, metadata), disasm (disassemble -> .s -> llvm-mc/ld.lld
gives back the same .text, descriptors, metadata and st_size), lift (lift -> the Kernel it builds
-> the same bytes; per kernel), check (per kernel: findings by rule and severity), stats (per
kernel), emu-decode (the emulator's decoder, per kernel). One object's failure is a row with its
error sentence, never a crash of the run. Objects run in a process pool (--jobs, default: CPU
count). Times are wall seconds inside the worker, divided by the object's kernel count.

Then the commands as a user runs them, each a fresh process: `flyasm check`, `stats` and `lift`
per kernel (--kernel), `info` and `disasm` per object. Their time is CPU seconds, user + system,
of the process and the LLVM tools it runs (os.wait4's rusage), the least of --repeat runs
(default 2: a shared machine only ever adds time). One table: p50, p99 and max per command, the
slowest object (and kernel) and the budget (2 s each, lift 10 s); a run over budget is marked.
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
# the commands a user runs, and the CPU seconds each may take on one kernel (issue 22)
CLI_BUDGET = {"check": 2.0, "stats": 2.0, "info": 2.0, "disasm": 2.0, "lift": 10.0}
PER_KERNEL = ("check", "stats", "lift")


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


def cpu_seconds(args: list[str], cwd: str) -> tuple[float, int]:
    """(user + system CPU seconds, exit code) of one command and the processes it waits for."""
    import subprocess
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen(args, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return ru.ru_utime + ru.ru_stime, proc.returncode


def time_cli(path: str, kernels: list[str], repeat: int, do_lift: bool = True) -> list[dict]:
    """CPU seconds of each flyasm command on one object (least of `repeat` runs): one entry per
    (command, kernel); exit codes 0 and 1 (findings) are runs that finished."""
    import tempfile
    out = []
    path = os.path.abspath(path)                       # the commands run in a scratch directory
    with tempfile.TemporaryDirectory(prefix="flyasm-corpus-") as td:
        runs = [("info", None, ["info", path]), ("disasm", None, ["disasm", path, "-o", f"{td}/out.s"])]
        for k in kernels:
            runs += [("check", k, ["check", path, "--kernel", k]), ("stats", k, ["stats", path, "--kernel", k])]
            if do_lift:
                runs.append(("lift", k, ["lift", path, "--kernel", k, "-o", f"{td}/lifted_kernel.py"]))
        for tool, k, args in runs:
            best, code = None, None
            for _ in range(max(1, repeat)):
                s, code = cpu_seconds([sys.executable, "-m", "flyasm", *args], td)
                best = s if best is None else min(best, s)
            out.append({"tool": tool, "kernel": k, "cpu_s": best, "exit": code})
    return out


def percentile(xs: list[float], q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation between the closest ranks."""
    xs = sorted(xs)
    if not xs:
        return float("nan")
    at = (len(xs) - 1) * q / 100
    lo = int(at)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (at - lo)


def format_cli_table(rows: list[dict], root: Path, repeat: int) -> str:
    by_tool: dict[str, list[tuple[float, str, int]]] = defaultdict(list)
    for r in rows:
        for t in r.get("cli", []):
            who = str(Path(r["path"]).relative_to(root)) + (f" [{t['kernel']}]" if t["kernel"] and
                                                              len(r["kernels"]) > 1 else "")
            by_tool[t["tool"]].append((t["cpu_s"], who, t["exit"]))
    out = [f"flyasm commands, CPU seconds per run (user + system, with the LLVM tools they run; least of "
           f"{repeat} run{'s' if repeat != 1 else ''})",
           f"  {'command':<8} {'runs':>5} {'p50':>7} {'p99':>7} {'max':>7} {'budget':>7}  slowest"]
    for tool in CLI_BUDGET:
        xs = by_tool.get(tool)
        if not xs:
            continue
        secs = [x[0] for x in xs]
        worst = max(xs)
        over = sum(s > CLI_BUDGET[tool] for s in secs)
        failed = [w for _, w, code in xs if code not in (0, 1)]
        out.append(f"  {tool:<8} {len(xs):>5} {percentile(secs, 50):>7.2f} {percentile(secs, 99):>7.2f} "
                   f"{worst[0]:>7.2f} {CLI_BUDGET[tool]:>7.1f}  {worst[1]}"
                   + (f"  OVER BUDGET: {over} run(s)" if over else "")
                   + (f"  FAILED: {', '.join(failed[:3])}" if failed else ""))
    return "\n".join(out)


def family_of(path: Path, root: Path) -> str:
    rel = path.relative_to(root)
    return rel.parts[0] if len(rel.parts) > 1 else "."


def run_and_time(path: str, do_lift: bool, repeat: int) -> dict:
    """run_object, then (repeat > 0) the commands' CPU times."""
    row = run_object(path, do_lift)
    if repeat > 0 and row["ok"].get("read"):
        row["cli"] = time_cli(path, row["kernels"], repeat, do_lift)
    return row


def run(root: Path, jobs: int, do_lift: bool, progress=None, repeat: int = 0) -> list[dict]:
    paths = sorted(root.rglob("*.co"))
    rows = []
    if jobs <= 1:
        for p in paths:
            rows.append(run_and_time(str(p), do_lift, repeat))
            if progress:
                progress(rows[-1])
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futs = {pool.submit(run_and_time, str(p), do_lift, repeat): p for p in paths}
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
    ap.add_argument("--repeat", type=int, default=2, help="runs of each command for its CPU time (the least counts)")
    ap.add_argument("--no-cli", action="store_true", help="skip timing the commands")
    a = ap.parse_args(argv)
    if not a.dir.is_dir():
        print(f"error: {a.dir} is not a directory", file=sys.stderr)
        return 2
    tools = [t for t in TOOLS if t != "lift" or not a.no_lift]
    t0 = time.perf_counter()
    repeat = 0 if a.no_cli else max(1, a.repeat)
    rows = run(a.dir, max(1, a.jobs), not a.no_lift, repeat=repeat)
    wall = time.perf_counter() - t0
    if not rows:
        print(f"no .co files under {a.dir}")
        return 0
    fams = summarise(rows, tools)
    print(format_tables(fams, tools))
    total = len(rows)
    print(f"{total} objects, {sum(len(r['kernels']) for r in rows)} kernels, {wall:.1f} s wall with {a.jobs} job(s); "
          + ", ".join(f"{t} {sum(bool(r['ok'].get(t)) for r in rows)}/{total}" for t in tools))
    if repeat:
        load = os.getloadavg()
        print(f"\n{format_cli_table(rows, a.dir, repeat)}\n  (load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on "
              f"{os.cpu_count()} CPUs at the end)")
    if a.json:
        a.json.write_text(json.dumps({"rows": rows, "wall_s": wall, "jobs": a.jobs}, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
