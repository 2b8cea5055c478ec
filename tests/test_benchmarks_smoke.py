"""The benchmarks start and exit 0 on a tiny configuration (their numbers are not asserted here)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

KERNEL = '''
from flyasm import Kernel, s, v
VARIANTS = [dict(scale=2.0), dict(scale=3.0)]
def build(scale=2.0):
    k = Kernel(f"scale_{int(scale)}", block=64)
    out, x = k.arg("out", "ptr"), k.arg("x", "ptr")
    k.s_load_dwordx2(s[4:5], k.kernarg_ptr, out.offset)
    k.s_load_dwordx2(s[6:7], k.kernarg_ptr, x.offset)
    k.v_lshlrev_b32(v[1], 2, k.workitem_id)
    k.s_waitcnt(lgkmcnt=0)
    k.global_load_dword(v[2], v[1], s[6:7])
    k.s_waitcnt(vmcnt=0)
    k.v_mul_f32(v[2], scale, v[2])
    k.global_store_dword(v[1], v[2], s[4:5])
    k.s_endpgm()
    return k
'''


def _run(args, timeout=300):
    r = subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT, timeout=timeout)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_build_time_smoke(tmp_path):
    (tmp_path / "scale.py").write_text(KERNEL)
    js = tmp_path / "bt.json"
    out = _run(["benchmarks/build_time.py", str(tmp_path / "scale.py"), "--synthetic", "60", "--repeat", "1",
                "--json", str(js)])
    assert "py/llvm" in out and "synthetic_60" in out and "scale_3" in out
    data = json.loads(js.read_text())
    assert [r["variant"] for r in data["rows"]] == ["scale(scale=2.0)", "scale(scale=3.0)", "synthetic(60)"]
    for r in data["rows"]:
        assert r["findings"] == 0 and r["llvm_mc_s"] > 0 and r["ld_lld_s"] > 0
        assert r["ratio_python_over_llvm"] == r["flyasm_python_s"] / r["llvm_s"]


def test_corpus_smoke(tmp_path):
    """benchmarks/corpus.py on a tiny tree: a family of one good object, a family with a broken one
    (its error sentence is a row; the run still exits 0)."""
    import importlib.util

    from flyasm.lift.verify import assemble_kernel
    spec = importlib.util.spec_from_file_location("bench_scale_kernel", tmp_path / "scale.py")
    (tmp_path / "scale.py").write_text(KERNEL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    tree = tmp_path / "tree"
    (tree / "good").mkdir(parents=True)
    (tree / "bad").mkdir()
    (tree / "good" / "scale.co").write_bytes(assemble_kernel(mod.build()))
    (tree / "bad" / "junk.co").write_bytes(b"\x7fELF not really")
    js = tmp_path / "corpus.json"
    out = _run(["benchmarks/corpus.py", str(tree), "--jobs", "2", "--json", str(js), "--repeat", "1"])
    assert "== good: 1 objects, 1 kernels" in out and "== bad: 1 objects, 0 kernels" in out
    assert "FAIL read       junk.co:" in out and "slowest check" in out
    rows = {Path(r["path"]).name: r for r in json.loads(js.read_text())["rows"]}
    assert all(rows["scale.co"]["ok"][t] for t in ("read", "disasm", "lift", "check", "stats", "emu-decode"))
    assert not rows["junk.co"]["ok"]["read"] and "ELF" in rows["junk.co"]["error"]["read"]
    # the commands' CPU table: one run each on the one good kernel, which is then the slowest
    cli = {t["tool"]: t for t in rows["scale.co"]["cli"]}
    assert sorted(cli) == ["check", "disasm", "info", "lift", "stats"]
    assert all(t["exit"] in (0, 1) and 0 < t["cpu_s"] < 60 for t in cli.values())
    table = out[out.index("flyasm commands, CPU seconds"):]
    for tool in cli:
        line = next(x for x in table.splitlines() if x.split()[:1] == [tool])
        assert line.split()[1] == "1" and line.rstrip().endswith("good/scale.co") and "FAILED" not in line


def test_short_rows_smoke():
    """benchmarks/short_rows.py on FlyDSL's table: its four short causal rows (two runs of FlyDSL beside
    aiter), each broken down, and the two runs' ratios. A perfect balance is never longer than the
    dispatch's makespan. For a grid of equal work in whole rounds (aiter's pairs) it differs only by
    what the HBM queue makes rounds differ (a lockstep first round waits longer for its loads than a
    later one): within 5%."""
    import re

    table = ROOT.parent / "shared" / "flydsl" / "measured"
    if not table.exists():
        pytest.skip("../shared/flydsl/measured is absent (FlyDSL's measured table)")
    out = _run(["benchmarks/short_rows.py", str(table), "--max-seqlen", "512"])
    spans = [(int(a), float(b)) for a, b in re.findall(r"makespan (\d+) cycles, perfect balance (\d+)", out)]
    assert len(spans) == 4 and all(b <= a for a, b in spans)
    aiter = [s for s, line in zip(spans, re.findall(r"^(\w+) \S+ B\d+", out, re.M)) if line == "aiter"]
    assert len(aiter) == 2 and all(0.95 * a <= b for a, b in aiter)
    assert len(re.findall(r"^run flydsl#629-[ab]: flydsl over aiter speed ratio measured", out, re.M)) == 2


def test_short_rows_bad_set_value_is_one_sentence():
    """A --set value that is not a number ends in argparse's one-line error (exit 2), not a traceback."""
    r = subprocess.run([sys.executable, "benchmarks/short_rows.py", "no-such-table", "--set", "wg_jitter=abc"],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1].endswith("--set wg_jitter=abc: 'abc' is not a number for wg_jitter")


@pytest.mark.parametrize("script", ["benchmarks/model_accuracy.py", "benchmarks/short_rows.py"])
@pytest.mark.parametrize("what", ["missing", "not-csv", "not-a-table"])
def test_bad_table_path_is_one_sentence(tmp_path, script, what):
    """A table argument that is missing, not a CSV, or a CSV of no known kind ends in one sentence naming
    the path (argparse's error, exit 2), not a traceback."""
    path = tmp_path / "t.csv"
    if what == "not-csv":
        path.write_bytes(b"\x00\xff\xfe not text")
    elif what == "not-a-table":
        path.write_text("a,b\n1,2\n")
    r = subprocess.run([sys.executable, script, str(path)] + (["--no-fit"] if "accuracy" in script else []),
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    last = r.stderr.strip().splitlines()[-1]
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert last.startswith(f"{Path(script).name}: error: {path}: ")
    assert {"missing": "no such measured table", "not-csv": "not a CSV table",
            "not-a-table": "not a measured table"}[what] in last


def test_drain_makespan_hand_worked():
    """short_rows.drain_makespan (the tail-drain experiment) on cases worked by hand. One XCD, one CU of
    two slots, a workgroup twice as fast alone (alone = d / 2):
    * [10, 20]: both run shared to 10; the second has 10 of shared work left, alone at rate 2: ends 15;
    * [10, 10, 10]: the first two end at 10 together; the third starts then, alone: ends 15;
    * [10, 10, 10] with alone = d: no speed-up, in-order slots: 20.
    Two CUs of one slot each never share: in-order, [10, 30, 10, 10] ends at 30 (CU 0 runs 10, 10, 10)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from short_rows import drain_makespan
    import numpy as np
    d = np.array([10.0, 20.0])
    assert drain_makespan(d, d / 2, 1, 1, 2) == pytest.approx(15.0)
    d = np.array([10.0, 10.0, 10.0])
    assert drain_makespan(d, d / 2, 1, 1, 2) == pytest.approx(15.0)
    assert drain_makespan(d, d, 1, 1, 2) == pytest.approx(20.0)
    d = np.array([10.0, 30.0, 10.0, 10.0])
    assert drain_makespan(d, d / 2, 1, 2, 1) == pytest.approx(30.0)
