"""Emulator semantic coverage: which emulated mnemonics are exercised by a formula test.

Runs the formula test files (tests that compare emulator results against formulas written in the
test, or a byte model) under pytest with FLYASM_EMU_COVERAGE set; tests/emu_snippet.py records the
mnemonics each snippet() executed per calling test file. Every mnemonic in SEMANTICS is then listed
with the files that ran it, and the coverage is printed per family.

Caveat: a mnemonic counts when a formula test file executed it; a few are set-up instructions
(e.g. `s_mov_b64 exec, ...`) whose result the test checks only indirectly.
Hazard/race/tracker tests (test_emu_fidelity, test_emu_trackers, test_emu_async) are not formula
tests and are not counted.

    python tools/emu_coverage.py [--list] [--missing] [--from FILE]
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FORMULA_TESTS = ["test_emu_valu.py", "test_emu_salu.py", "test_emu_lds.py", "test_emu_buffer.py",
                 "test_emu_convert.py", "test_emu_ops.py", "test_emu_mfma_layouts.py", "test_emu_vopc.py",
                 "test_emu_more.py", "test_emu_memory_more.py", "test_emu_corpus_ops.py",
                 "test_emu_mfma_f8f6f4.py", "test_emu_modes.py",
                 "test_emu_ds_wrap.py"]


def family(name: str) -> str:
    if name.startswith(("v_cmp_", "v_cmpx_")):
        return "VOPC"
    if name.startswith("v_mfma"):
        return "MFMA"
    if name.startswith("v_pk_"):
        return "VALU packed"
    if name.startswith("v_cvt"):
        return "VALU convert"
    if name.startswith("v_"):
        return "VALU"
    if name.startswith("s_load") or name.startswith("s_dcache") or name.startswith("s_buffer"):
        return "SMEM"
    if name.startswith(("s_cbranch", "s_branch", "s_setpc", "s_swappc", "s_getpc", "s_endpgm", "s_nop",
                        "s_waitcnt", "s_barrier", "s_sleep", "s_setprio", "s_icache", "s_ttrace", "s_sethalt",
                        "s_set_gpr")):
        return "SOPP/control"
    if name.startswith("s_"):
        return "SALU"
    if name.startswith("ds_"):
        return "LDS"
    if name.startswith(("buffer_", "global_")):
        return "VMEM"
    return "other"


def emulated() -> list[str]:
    sys.path.insert(0, str(ROOT))
    import flyasm.emu.ops_memory  # noqa: F401
    import flyasm.emu.ops_mfma  # noqa: F401
    import flyasm.emu.ops_modes  # noqa: F401
    import flyasm.emu.ops_mx  # noqa: F401
    import flyasm.emu.ops_scalar  # noqa: F401
    import flyasm.emu.ops_vector  # noqa: F401
    from flyasm.emu.machine import SEMANTICS
    return sorted(SEMANTICS)


def canonical(name: str) -> str:
    from flyasm.isa import tables
    try:
        return tables.lookup(name).info.get("canonical", name)
    except Exception:
        return name


def collect(files: list[str]) -> dict[str, set[str]]:
    with tempfile.TemporaryDirectory() as td:
        out = os.path.join(td, "cov.jsonl")
        env = dict(os.environ, FLYASM_EMU_COVERAGE=out)
        paths = [str(ROOT / "tests" / f) for f in files if (ROOT / "tests" / f).exists()]
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *paths],
                           cwd=ROOT, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            print(r.stdout[-3000:], file=sys.stderr)
            print("warning: formula tests failed; coverage counts what ran", file=sys.stderr)
        return load(out)


def load(path: str) -> dict[str, set[str]]:
    by = collections.defaultdict(set)
    if os.path.exists(path):
        for line in open(path):
            rec = json.loads(line)
            if rec["file"] in FORMULA_TESTS:
                for n in rec["mnemonics"]:
                    by[canonical(n)].add(rec["file"])
    return by


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", action="store_true", help="every emulated mnemonic with its test files")
    ap.add_argument("--missing", action="store_true", help="emulated mnemonics no formula test runs")
    ap.add_argument("--from", dest="src", help="read a FLYASM_EMU_COVERAGE file instead of running pytest")
    a = ap.parse_args(argv)
    names = emulated()
    by = load(a.src) if a.src else collect(FORMULA_TESTS)
    fam = collections.defaultdict(lambda: [0, 0])
    for n in names:
        fam[family(n)][1] += 1
        fam[family(n)][0] += bool(by.get(n))
    if a.list:
        for n in names:
            print(f"{n:36s} {', '.join(sorted(by.get(n, ()))) or '-'}")
    if a.missing:
        print("not covered:", " ".join(n for n in names if not by.get(n)))
    print(f"{'family':16s} {'tested':>7s} {'emulated':>9s}")
    for f, (t, e) in sorted(fam.items()):
        print(f"{f:16s} {t:7d} {e:9d}  {100 * t / e:5.1f}%")
    t = sum(v[0] for v in fam.values())
    print(f"{'total':16s} {t:7d} {len(names):9d}  {100 * t / len(names):5.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
