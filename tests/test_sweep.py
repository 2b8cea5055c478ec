"""flyasm sweep: build, check, rank by the static model, verify the best in the emulator, cache by content.

The grid is a small kernel (out = x * scale, plus a loop of `mfmas` bf16 MFMAs with `fillers` VALU ops
between them) so a sweep takes seconds. Its variants differ in what the sweep must tell apart:
a slower schedule (VALU fillers between the MFMAs), a variant with a missing s_waitcnt (static-check
findings), and a variant whose kernel multiplies by the wrong constant (verification fails).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from flyasm.sweep import CLOCK_HZ, SIMDS, run_sweep

ROOT = Path(__file__).resolve().parents[1]

GRID_FILE = '''
import json
from pathlib import Path
import numpy as np
from flyasm import Kernel, s, v

def GRID():
    return json.loads((Path(__file__).parent / "grid.json").read_text())

def build(scale=2.0, mfmas=4, fillers=0, broken=False, wrong=False):
    name = f"sw_{int(scale)}_{mfmas}_{fillers}" + ("_broken" if broken else "") + ("_wrong" if wrong else "")
    k = Kernel(name, block=64)
    out, x = k.arg("out", "ptr"), k.arg("x", "ptr")
    k.s_load_dwordx2(s[4:5], k.kernarg_ptr, out.offset)
    k.s_load_dwordx2(s[6:7], k.kernarg_ptr, x.offset)
    k.v_lshlrev_b32(v[1], 2, k.workitem_id)
    for r in range(32, 40):
        k.v_mov_b32(v[r], 0)
    for r in range(64, 80):
        k.v_mov_b32(v[r], 0)
    k.s_mov_b32(s[10], 3)
    k.s_nop(1)                          # VALU write -> MFMA read needs 2 wait states
    k.label("loop")
    for i in range(mfmas):
        k.v_mfma_f32_32x32x16_bf16(v[64:79], v[32:35], v[36:39], v[64:79])
        for _ in range(fillers):
            k.v_add_u32(v[2], 1, v[2])
    k.s_sub_u32(s[10], s[10], 1)
    k.s_cmp_lg_u32(s[10], 0)
    k.s_cbranch_scc1("loop")
    k.s_waitcnt(lgkmcnt=0)
    k.global_load_dword(v[2], v[1], s[6:7])
    if not broken:
        k.s_waitcnt(vmcnt=0)
    k.v_mul_f32(v[2], scale + (1.0 if wrong else 0.0), v[2])
    k.global_store_dword(v[1], v[2], s[4:5])
    k.s_endpgm()
    return k

def workload(**params):
    return {"flops": 1e12, "label": "1 TFLOP"}

def verify(kernel, seed, scale=2.0, **params):
    from flyasm.run import launch
    x = np.random.default_rng(seed).standard_normal(64).astype(np.float32) + 0.5
    out = np.full(64, np.nan, np.float32)                       # poisoned
    launch(kernel, 1, 64, out, x)
    want = x * np.float32(scale)                                # one IEEE multiply: exact
    return {"ok": bool(np.array_equal(out, want)), "max_err": float(np.nan_to_num(np.abs(out - want), nan=np.inf).max()),
            "tol": 0.0, "shape": "64"}
'''

BASE_GRID = [dict(scale=2.0), dict(scale=2.0, fillers=12), dict(scale=3.0, mfmas=2, fillers=12, broken=True),
             dict(scale=5.0, wrong=True)]


def _grid(tmp_path, grid=BASE_GRID) -> str:
    (tmp_path / "sw.py").write_text(GRID_FILE)
    (tmp_path / "grid.json").write_text(json.dumps(grid))
    return str(tmp_path / "sw.py:GRID")


def _expected_flops_per_cycle(params) -> float:
    """Independent of flyasm.sweep: the model's loop cycles, and 2·32·32·16 FLOPs per MFMA."""
    sys.path.insert(0, str(ROOT))
    from flyasm.dispatch import load_module
    from flyasm.report.model import model
    mod = load_module(params.pop("_path"))
    d = model(mod.build(**params))
    (sp,) = d["spans"]
    return sp["mfma_count"] * 2 * 32 * 32 * 16 / sp["cycles"]


def test_sweep_ranks_checks_verifies_and_caches(tmp_path):
    spec = _grid(tmp_path)
    cache, out = tmp_path / "cache", tmp_path / "out"
    res = run_sweep(spec, out, top=2, jobs=2, cache=cache, progress=False)
    by = {r.name: r for r in res.rows}
    assert res.built == 4 and res.verified_runs == 2
    fast, slow, broken, wrong = (by["sw_2_4_0"], by["sw_2_4_12"], by["sw_3_2_12_broken"], by["sw_5_4_0_wrong"])
    # the broken variant has findings: listed, failing the check, ranked last, never verified
    assert broken.findings > 0 and not broken.check_ok and res.rows[-1] is broken and broken.verified == "not-run"
    assert fast.findings == slow.findings == wrong.findings == 0
    # fillers between the MFMAs make the loop slower in the model: ranked after the plain schedule
    for r in (fast, slow):
        want = _expected_flops_per_cycle(dict(r.params, _path=spec.split(":")[0]))
        assert r.prediction["flops_per_cycle"] == pytest.approx(want, rel=1e-12)
        assert r.prediction["pred_us"] == pytest.approx(1e12 / (want * SIMDS * CLOCK_HZ) * 1e6, rel=1e-12)
    assert slow.prediction["pred_us"] > fast.prediction["pred_us"]
    # fast and wrong tie in the model (same loop); the best two are verified: one right, one wrong
    assert [r.name for r in res.rows[:2]] == ["sw_2_4_0", "sw_5_4_0_wrong"]
    assert fast.verified == "yes" and fast.verify["max_err"] == 0.0
    assert wrong.verified == "no" and wrong.verify["max_err"] > 0
    assert slow.verified == "not-run"
    assert fast.default and not slow.default and not wrong.default        # build()'s defaults
    assert (fast.vgpr, fast.agpr, fast.lds) == (80, 0, 0) and fast.sgpr >= 11     # v79, s10 are the highest
    assert fast.instructions == 3 + 8 + 16 + 2 + 4 + 3 + 6
    table = res.csv_path.read_text().splitlines()
    assert table[0].startswith("rank,scale,fillers,mfmas,broken,wrong,default,name,co,instructions,vgpr,agpr,sgpr")
    assert len(table) == 5 and f",{broken.findings} findings," in table[4]
    assert (out / "sw_2_4_0.co").is_file()

    # a rerun builds and verifies nothing
    again = run_sweep(spec, out, top=2, jobs=2, cache=cache, progress=False)
    assert again.built == 0 and again.verified_runs == 0
    assert [(r.name, r.verified, r.prediction) for r in again.rows] == [(r.name, r.verified, r.prediction)
                                                                         for r in res.rows]
    # a new grid entry is the only build (the grid lives in grid.json, not in the hashed sources)
    # (mfmas=4 spelled out: the same kernel name as entry 0, so each gets its own .co file)
    (tmp_path / "grid.json").write_text(json.dumps(BASE_GRID + [dict(scale=2.0, mfmas=4)]))
    third = run_sweep(spec, tmp_path / "out3", top=0, jobs=1, cache=cache, progress=False)
    assert third.built == 1 and len(third.rows) == 5
    assert (tmp_path / "out3" / "sw_2_4_0_v0.co").read_bytes() == (tmp_path / "out3" / "sw_2_4_0_v4.co").read_bytes()
    # an edit of the builder's sources rebuilds (one variant left in the grid, to keep this short)
    (tmp_path / "grid.json").write_text(json.dumps(BASE_GRID[:1]))
    assert run_sweep(spec, None, top=0, jobs=1, cache=cache, progress=False).built == 0
    (tmp_path / "sw.py").write_text(GRID_FILE + "\n# edited\n")
    assert run_sweep(spec, None, top=0, jobs=1, cache=cache, progress=False).built == 1


def test_sweep_cli_table_and_errors(tmp_path):
    spec = _grid(tmp_path, BASE_GRID[:2])
    cmd = [sys.executable, "-m", "flyasm.cli", "sweep", spec, "--top", "1", "-j", "1", "--cache",
           str(tmp_path / "c"), "-o", str(tmp_path / "o"), "--no-progress", "--seed", "7"]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split()[:4] == ["rank", "scale", "fillers", "default"]
    assert lines[1].split()[0] == "1" and "sw_2_4_0" in lines[1] and " yes " in lines[1]
    assert "not-run" in lines[2] and "2 variants (2 built, 0 from the cache; 1 emulator" in r.stdout
    assert (tmp_path / "o" / "sweep_sw_GRID.csv").is_file()
    bad = subprocess.run([sys.executable, "-m", "flyasm.cli", "sweep", str(tmp_path / "nope.py")],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert bad.returncode == 2 and "does not exist" in bad.stderr and "Traceback" not in bad.stderr


PERF_WORKLOAD = '''

def workload(**params):
    import struct
    launch = {"grid": 1, "block": 64, "buffers": {"out": 256, "x": 256},
              "kernarg": lambda a: struct.pack("<Q8xQ", a["out"], a["x"])}   # args at 0 and 16
    return {"flops": 1e12, "label": "1 TFLOP", "launch": launch}
'''


def test_perf_ranker(tmp_path):
    """--model perf prices each variant on the CU model with the launch workload() gives: the ranking
    follows the model's time (12 VALU ops between the MFMAs outlast the 32-cycle MFMA: slower), a
    variant with findings ranks last, and a grid without a launch is a one-sentence error per row."""
    (tmp_path / "sw.py").write_text(GRID_FILE + PERF_WORKLOAD)
    (tmp_path / "grid.json").write_text(json.dumps(BASE_GRID[:3]))
    res = run_sweep(f"{tmp_path / 'sw.py'}:GRID", None, top=1, jobs=1, model="perf", cache=tmp_path / "c",
                    progress=False)
    names = [r.name for r in res.rows]
    assert names == ["sw_2_4_0", "sw_2_4_12", "sw_3_2_12_broken"]
    fast, slow = res.rows[0].prediction, res.rows[1].prediction
    assert fast["pred_us"] < slow["pred_us"] and 0 < fast["mfma_util"] <= 1
    # the same prediction straight from the model (independent of the sweep's plumbing)
    import struct

    from flyasm.dispatch import load_module
    from flyasm.perf import predict
    k = load_module(str(tmp_path / "sw.py")).build(scale=2.0)
    p = predict(k.build(check=False).co, 1, 64, lambda a: struct.pack("<Q8xQ", a["out"], a["x"]),
                {"out": 256, "x": 256}, kernel=k.name, flops=1e12)
    assert fast["pred_us"] == pytest.approx(p.us) and fast["pred_tflops"] == pytest.approx(1e12 / p.us / 1e6)
    # a launch with the probe of its real launch is priced as perf.predict prices a probed one
    (tmp_path / "probed.py").write_text(GRID_FILE + PERF_WORKLOAD.replace(
        '"launch": launch}', '"launch": dict(launch, probe={"kernarg": launch["kernarg"], "buffers": launch["buffers"]})}'))
    res = run_sweep(f"{tmp_path / 'probed.py'}:GRID", None, top=0, jobs=1, model="perf", cache=tmp_path / "c3",
                    progress=False)
    kern = lambda a: struct.pack("<Q8xQ", a["out"], a["x"])  # noqa: E731
    p2 = predict(k.build(check=False).co, 1, 64, kern, {"out": 256, "x": 256}, kernel=k.name, flops=1e12,
                 probe={"kernarg": kern, "buffers": {"out": 256, "x": 256}})
    assert res.rows[0].name == "sw_2_4_0" and res.rows[0].prediction["pred_us"] == pytest.approx(p2.us)
    # ... and it reaches perf.predict: a probe without the x buffer its kernarg needs fails every row
    (tmp_path / "badprobe.py").write_text(GRID_FILE + PERF_WORKLOAD.replace(
        '"launch": launch}', '"launch": dict(launch, probe={"kernarg": launch["kernarg"], "buffers": {"out": 256}})}'))
    res = run_sweep(f"{tmp_path / 'badprobe.py'}:GRID", None, top=0, jobs=1, model="perf", cache=tmp_path / "c4",
                    progress=False)
    assert all("KeyError" in (r.error or "") and not r.prediction for r in res.rows)
    (tmp_path / "nolaunch.py").write_text(GRID_FILE)             # workload() without a launch
    res = run_sweep(f"{tmp_path / 'nolaunch.py'}:GRID", None, top=0, jobs=1, model="perf", cache=tmp_path / "c2",
                    progress=False)
    assert all("no 'launch'" in r.error for r in res.rows)


def test_sweep_on_local_ray(tmp_path):
    ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'flyasm[ray]')")
    spec = _grid(tmp_path, BASE_GRID[:2])
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}})
    except Exception as e:            # no shared memory, no ports, ...: say why
        pytest.skip(f"ray cannot start here: {e}")
    try:
        res = run_sweep(spec, None, top=0, ray_address="local", cache=tmp_path / "ray", progress=False)
    finally:
        ray.shutdown()
    local = run_sweep(spec, None, top=0, jobs=1, cache=tmp_path / "local", progress=False)
    assert res.built == 2
    assert [(r.name, r.instructions, r.findings, r.prediction) for r in res.rows] == \
        [(r.name, r.instructions, r.findings, r.prediction) for r in local.rows]
