"""Static-checker findings per rule and severity, per family (directory), over a tree of code objects.

    python benchmarks/check_findings.py [DIR] [--json PATH] [--jobs N] [--by-rule] [--errors-only]
    python benchmarks/check_findings.py [DIR] --from-json PATH [--by-rule] [--errors-only]

DIR defaults to ../shared/aiter/gfx950. Every kernel of every `.co` below DIR is checked in verify
mode with its workgroup size from the metadata; a family is the first directory under DIR. Prints
one table (family x rule/severity, or with --by-rule rule/severity x family) and the total; a
kernel that cannot be read or checked is counted as an error with its one-sentence reason.
--errors-only keeps the definite findings (severity "error"); --from-json re-prints the rows a
previous --json run saved instead of checking again.
"""
from __future__ import annotations

import argparse
import collections
import json
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from flyasm.codeobj.reader import read_code_object  # noqa: E402
from flyasm.errors import FlyasmError  # noqa: E402
from flyasm.report.program import as_program  # noqa: E402

DEFAULT = ROOT.parent / "shared" / "aiter" / "gfx950"


def check_file(path: str) -> list[dict]:
    """One row per kernel: counts per 'rule/severity', or the error that stopped it."""
    rows = []
    try:
        co = read_code_object(Path(path))
        names = [k.name for k in co.kernels]
    except FlyasmError as e:
        return [{"file": path, "kernel": None, "error": str(e).splitlines()[0]}]
    for name in names:
        try:
            prog = as_program(co, name)
            found = prog.check()
            counts = collections.Counter(f"{f.rule}/{f.severity}" for f in found)
            rows.append({"file": path, "kernel": name, "instructions": len(prog.stream), "counts": dict(counts)})
        except FlyasmError as e:
            rows.append({"file": path, "kernel": name, "error": str(e).splitlines()[0]})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", nargs="?", default=str(DEFAULT))
    ap.add_argument("--json", default=None)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--from-json", default=None)
    ap.add_argument("--by-rule", action="store_true")
    ap.add_argument("--errors-only", action="store_true")
    a = ap.parse_args(argv)
    top = Path(a.dir)
    if a.from_json:
        rows = json.loads(Path(a.from_json).read_text())
    else:
        files = sorted(str(p) for p in top.rglob("*.co"))
        if not files:
            print(f"no .co files under {top}")
            return 1
        with ProcessPoolExecutor(a.jobs) as ex:
            rows = [r for rs in ex.map(check_file, files) for r in rs]
    fam = collections.defaultdict(collections.Counter)
    kernels = collections.Counter()
    for r in rows:
        rel = Path(r["file"]).relative_to(top)
        f = rel.parts[0] if len(rel.parts) > 1 else "(top)"
        kernels[f] += 1
        if "error" in r:
            fam[f]["(read/check error)"] += 1
        else:
            fam[f].update({k: v for k, v in r["counts"].items() if not a.errors_only or k.endswith("/error")})
    cols = sorted({c for v in fam.values() for c in v})
    total = collections.Counter()
    for v in fam.values():
        total.update(v)
    if a.by_rule:
        fams = sorted(kernels)
        w = max([len(c) for c in cols] + [14])
        print(f"{'rule/severity':<{w}} " + " ".join(f"{f:>{max(len(f), 5)}}" for f in fams) + "  TOTAL")
        print(f"{'kernels':<{w}} " + " ".join(f"{kernels[f]:>{max(len(f), 5)}}" for f in fams)
              + f"  {sum(kernels.values()):>5}")
        for c in cols:
            print(f"{c:<{w}} " + " ".join(f"{fam[f].get(c, 0):>{max(len(f), 5)}}" for f in fams) + f"  {total[c]:>5}")
    else:
        print(f"{'family':<20} {'kernels':>7}  " + "  ".join(cols))
        for f in sorted(fam):
            print(f"{f:<20} {kernels[f]:>7}  " + "  ".join(f"{fam[f].get(c, 0):>{len(c)}}" for c in cols))
        print(f"{'TOTAL':<20} {sum(kernels.values()):>7}  " + "  ".join(f"{total.get(c, 0):>{len(c)}}" for c in cols))
    for r in rows:
        if "error" in r:
            print(f"error: {r['file']} {r['kernel']}: {r['error']}")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
