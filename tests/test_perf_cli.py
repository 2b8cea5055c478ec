"""`flyasm perf` and the model's benchmark scripts on small inputs."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from flyasm.cli import main
from kernels import vector_add as va

ROOT = Path(__file__).resolve().parents[1]
AITER = ROOT.parent / "shared" / "aiter"


def test_perf_cli_prices_vector_add(tmp_path):
    co = tmp_path / "va.co"
    co.write_bytes(va.build(4096, "f32").build().co)
    n = 4096 * 600                                   # 600 workgroups: three rounds over 256 CUs
    r = CliRunner().invoke(main, ["perf", str(co), "--grid", "600", "--block", "256",
                                  "--arg", f"out=zeros:{n}xf32", "--arg", f"x=zeros:{n}xf32",
                                  "--arg", f"y=zeros:{n}xf32", "--arg", f"n={n}", "--flops", str(n)])
    assert r.exit_code == 0, r.output
    assert "predicted" in r.output and "us" in r.output and "stalls" in r.output
    assert "buffer_load_dwordx4" in r.output or "s_waitcnt" in r.output     # the stall table names instructions
    from flyasm.perf.params import FITTED, FITTED_SIMULATED
    fitted = next(line for line in r.output.splitlines() if line.startswith("fitted constants:"))
    assert all(f"{n}=" in fitted for n in FITTED + FITTED_SIMULATED), fitted   # every constant params.json holds


def test_perf_cli_bad_input_is_one_sentence(tmp_path):
    r = CliRunner().invoke(main, ["perf", str(tmp_path / "missing.co"), "--grid", "1", "--block", "64"])
    assert r.exit_code == 2 and "does not exist" in r.output and "Traceback" not in r.output


FP8_ROWS = """gfx,cu_num,M,N,K,libtype,kernelId,splitK,us,kernelName,tflops,bw,errRatio
gfx950,256,64,512,7168,asm,16,1,9.0,_ZN5aiter42fp8gemm_bf16_blockscale_BpreShuffle_64x128E,0,0,0
gfx950,256,128,512,7168,asm,16,1,10.0,_ZN5aiter42fp8gemm_bf16_blockscale_BpreShuffle_64x128E,0,0,0
gfx950,256,256,512,7168,asm,16,1,11.5,_ZN5aiter42fp8gemm_bf16_blockscale_BpreShuffle_64x128E,0,0,0
"""


@pytest.mark.skipif(not AITER.exists(), reason="../shared/aiter (aiter's code objects) is absent")
def test_model_accuracy_smoke(tmp_path):
    (tmp_path / "t.csv").write_text(FP8_ROWS)
    r = subprocess.run([sys.executable, "benchmarks/model_accuracy.py", str(tmp_path / "t.csv")], cwd=ROOT,
                       capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "median" in r.stdout and "spearman" in r.stdout and "fitted:" in r.stdout
    (tmp_path / "bad.csv").write_text(FP8_ROWS.replace("64x128E,0,0,0\ngfx950,256,128", "99x1E,0,0,0\ngfx950,256,128", 1))
    r = subprocess.run([sys.executable, "benchmarks/model_accuracy.py", str(tmp_path / "bad.csv")], cwd=ROOT,
                       capture_output=True, text=True, timeout=1200)
    assert r.returncode == 1 and "bad:0" in r.stderr and "cannot be predicted" in r.stderr


FLYDSL = ROOT.parent / "shared" / "flydsl"
MIXED = """kernelName,co_name,dtype,hdim_q,hdim_v,mask,mode,batch,nhead_q,nhead_k,seqlen_q,seqlen_k,us,tflops,author,run
_ZN5aiter26fmha_fwd_hd128_bf16_causalE,fwd_hd128_bf16_causal.co,bf16,128,128,2,0,8,64,64,256,256,35.12,244.6,aiter,r1
flash_attn_dualwave_swp_gfx950_kernel_0,fa_fwd_bf16_d128_causal_h64.co,bf16,128,128,1,0,8,64,64,256,256,38.45,223.4,flydsl,r1
flash_attn_dualwave_swp_gfx950_kernel_0,,bf16,128,128,1,0,4,64,64,256,256,20.0,210.0,flydsl,
"""


@pytest.mark.skipif(not (AITER.exists() and FLYDSL.exists()), reason="../shared (aiter's and FlyDSL's kernels) is absent")
def test_model_accuracy_mixed_authors_no_fit_and_keep_going(tmp_path):
    """One table with both authors: per-author scores, the run's FlyDSL/aiter speed ratio against the
    measured one (35.12 / 38.45 = 0.913), the shipped parameters used as they are; a row without a
    co_name takes the build FlyDSL's dispatch picks. A row whose code object does not exist stops the
    run naming it, or with --keep-going is listed after the others are scored."""
    import re

    from flyasm.perf import params as P
    (tmp_path / "mix.csv").write_text(MIXED)
    r = subprocess.run([sys.executable, "benchmarks/model_accuracy.py", str(tmp_path / "mix.csv"), "--no-fit"],
                       cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "fitted:" not in out and f"launch_us = {P.load().launch_us:.4g}" in out
    assert re.search(r"author aiter\s+1 ", out) and re.search(r"author flydsl\s+2 ", out)
    pair = next(line for line in out.splitlines() if line.startswith("r1 "))
    assert pair.index("flydsl fa_fwd_bf16_d128_causal_h64") < pair.index("aiter fwd_hd128_bf16_causal")
    assert f"{35.12 / 38.45:.3f}" in pair.split()
    bad = MIXED.replace("fa_fwd_bf16_d128_causal_h64.co", "fa_fwd_nope.co")
    (tmp_path / "bad.csv").write_text(bad)
    r = subprocess.run([sys.executable, "benchmarks/model_accuracy.py", str(tmp_path / "bad.csv"), "--no-fit"],
                       cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert r.returncode == 1 and "bad:1" in r.stderr and "fa_fwd_nope.co" in r.stderr and "median" not in r.stdout
    r = subprocess.run([sys.executable, "benchmarks/model_accuracy.py", str(tmp_path / "bad.csv"), "--no-fit",
                        "--keep-going"], cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert r.returncode == 1 and "1 row(s) could not be predicted" in r.stderr and "bad:1" in r.stderr
    assert re.search(r"author flydsl\s+1 ", r.stdout) and re.search(r"ALL\s+2 ", r.stdout)


BWD_HEADER = "gfx,cu_num,dtype,hdim_q,hdim_v,mask,atomic32,bf16_cvt,mode,batch,nhead_q,nhead_k,seqlen_q,seqlen_k,us,tflops,source\n"


def _bwd_rows(tmp_path, *lines):
    sys.path[:0] = [str(ROOT / "benchmarks")]
    import measured as MR
    (tmp_path / "bwd.csv").write_text(BWD_HEADER + "".join(line + "\n" for line in lines))
    return MR, MR.read_tables([tmp_path / "bwd.csv"])


@pytest.mark.skipif(not AITER.exists(), reason="../shared/aiter (aiter's backward kernels and host code) is absent")
def test_a_backward_row_is_its_whole_pipeline(tmp_path):
    """A measured backward row (a32, no mask, b2 h8/2 s4096) is the call aiter's host code makes: odo,
    dq/dk/dv, dq_convert, at the row's grids; recorded at batch 1, one head, seqlen 1024, the dq/dk/dv
    loop scaled x4; its predicted time is the three launches' sum (each with its launch overhead)."""
    from flyasm.perf import calibrate as C
    from flyasm.perf import params as P
    MR, entries = _bwd_rows(tmp_path, "gfx950,256,bf16,128,128,0,1,1,0,2,8,2,4096,4096,500.0,0,test")
    import aiter_launch as AL
    import model_accuracy as MA
    assert [k for _, k, _ in entries] == ["fmha_bwd"]
    call = MR.row_call("fmha_bwd", entries[0][2], MR.co_index())
    ls = call["launches"]
    assert [L["stage"] for L in ls] == ["pre", "dqdkdv", "post"]
    ref = AL.fmha_bwd_pack(dtype="bf16", hdim_q=128, hdim_v=128, batch=2, nhead_q=8, nhead_k=2, seqlen_q=4096,
                           seqlen_k=4096, mask_type=0, atomic32=1, bf16_cvt=1)["launches"]
    assert [(L["kernel"], L["grid"]) for L in ls] == [(r.knl_name, r.grid) for r in ref]
    assert [L["trace_grid"] for L in ls] == [(8, 1, 1), (4, 1, 1), (16, 1, 1)]
    assert [L["loop_scale"] for L in ls] == [1.0, 4.0, 1.0]
    assert call["flops"] == 2.0 * 2 * 8 * 4096 * 4096 * (5 * 128)
    base = P.load()
    rows, meta, failed = MA.simulate_all(entries, MR.co_index(), base, keep_going=False)
    assert not failed and len(rows[0].extra) == 2
    alone = sum(C.predict_us([C.Row("p", "t", c, d, 1.0, active=a)], base)[0]
                for c, d, a in [(rows[0].cycles, rows[0].dram_bytes, rows[0].active), *rows[0].extra])
    assert C.predict_us(rows, base)[0] == pytest.approx(alone)


@pytest.mark.slow
@pytest.mark.skipif(not AITER.exists(), reason="../shared/aiter (aiter's backward kernels and host code) is absent")
def test_causal_backward_pairs_key_tiles_into_equal_work():
    """What the causal dq/dk/dv loop scale assumes: aiter's causal kernel runs key tiles j and
    gdx-1-j in one workgroup, so every workgroup has about the same work (recorded at s1024: the two
    workgroups within 1%)."""
    sys.path[:0] = [str(ROOT / "benchmarks")]
    import aiter_bwd_launch as BL

    from flyasm.perf.model import predict
    row = dict(dtype="bf16", hdim_q=128, hdim_v=128, mask=1, atomic32=0, bf16_cvt=1, mode=0, batch=1, nhead_q=1,
               nhead_k=1, seqlen_q=1024, seqlen_k=1024)
    L = BL.row_call(row)["launches"][1]
    assert L["trace_grid"] == (2, 1, 1)
    p = predict(L["co"], L["trace_grid"], L["block"], L["kernarg"], L["buffers"], kernel=L["kernel"], dram_bytes=0)
    d = sorted(p.samples.values())
    assert d[-1] / d[0] < 1.01, p.samples


def test_fit_simulated_picks_the_point_the_rows_and_ratios_agree_with():
    """--fit-simulated's choice (no simulation here: two made-up points of 12 rows). Point 0's cycles
    are the truth the measured times come from (launch 3 us, derate 0.75); point 1 differs only on the
    'mapping on' row of each of the 3 runs (10% fewer cycles), as a placement constant would move it.
    Both the all-rows choice and a fold holding out one run's rows must pick point 0, and recover the
    post-simulation constants; point 1 mispredicts each run's on/off ratio (up to 1 / 0.9 - 1 = +11%,
    less the launch overhead's share)."""
    sys.path[:0] = [str(ROOT / "benchmarks")]
    import model_accuracy as MA
    from flyasm.perf import calibrate as C
    from flyasm.perf import params as P
    rng = np.random.default_rng(20)
    truth = P.Params().with_(launch_us=3.0, clock_derate=0.75)
    n = 12
    cycles = rng.uniform(5e3, 5e6, n)         # 3 us of launch is a good share of the short rows
    active = rng.uniform(0.3, 1.0, n)
    meta = [dict(author="flydsl", run=f"r{i // 2}" if i < 6 else "", flops=1e12, label=f"b{i % 2}", shape=f"s{i}")
            for i in range(n)]

    def rows_of(cyc):
        return [C.Row(f"row{i}", "t", cyc[i], 0.0, 1.0, "", active[i]) for i in range(n)]
    meas = C.predict_us(rows_of(cycles), truth)
    on = np.array([i < 6 and i % 2 == 1 for i in range(n)])
    points = []
    for k, cyc in enumerate([cycles, np.where(on, 0.9 * cycles, cycles)]):
        rows = rows_of(cyc)
        for r, m in zip(rows, meas):
            r.measured_us = float(m)
        points.append((P.Params().with_(wg_jitter=0.04 + 0.01 * k), rows))
    k, fitted = MA.choose(points, meta, range(n))
    assert k == 0 and fitted.launch_us == pytest.approx(3.0, abs=0.01)
    assert fitted.clock_derate == pytest.approx(0.75, abs=0.002)
    k, fitted, pred = MA.held_out(points, meta, [0, 1])
    assert k == 0 and pred[0] == pytest.approx(meas[0], rel=1e-3)
    errs = MA.ratio_errors(points[1][1], C.predict_us(points[1][1], truth), meta)
    assert len(errs) == 3 and all(0.02 < e < 1 / 0.9 - 1 for e in errs)


def test_rows_cache_keeps_what_another_run_wrote(tmp_path, monkeypatch):
    """Runs in several worktrees share the cache: saving merges entries written since it was read."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import json

    import model_accuracy as MA
    monkeypatch.setattr(MA, "ROWS_CACHE", tmp_path / "rows.json")
    (tmp_path / "rows.json").write_text(json.dumps({"other": [1], "same": [2]}))
    MA.save_rows_cache({"same": [3], "mine": [4]})
    assert json.loads((tmp_path / "rows.json").read_text()) == {"other": [1], "same": [3], "mine": [4]}


def test_row_cache_key_sees_the_probe_and_the_work_items():
    """A cached row is keyed by what decides its simulation: the recorded kernarg, the probed real launch
    (its kernarg and buffers) and the work item of every workgroup (wg_map's values, not its name)."""
    import numpy as np
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import model_accuracy as MA

    def ka(scale):
        return lambda a: b"".join(int(v).to_bytes(8, "little") for _, v in sorted(a.items())) + bytes([scale])

    def swap(g, x, y, z):
        return y, x, z

    def swap_too(g, x, y, z):          # another name, the same items
        return y, x, z

    def ident(g, x, y, z):
        return x, y, z
    base = dict(grid=(4, 4, 1), kernarg=ka(1), buffers={"q": 64, "k": 64},
                probe={"kernarg": ka(1), "buffers": {"q": 4096, "k": 4096, "s": np.arange(3, dtype=np.int32)}},
                wg_map=swap)
    key = MA.launch_content(base)
    assert MA.launch_content(dict(base)) == key
    assert MA.launch_content(dict(base, wg_map=swap_too)) == key
    for change in (dict(wg_map=ident), dict(wg_map=None), dict(kernarg=ka(2)), dict(buffers={"q": 64, "k": 128}),
                   dict(probe=dict(base["probe"], kernarg=ka(3))), dict(probe=None),
                   dict(probe=dict(base["probe"], buffers={**base["probe"]["buffers"], "s": np.arange(1, 4, dtype=np.int32)}))):
        assert MA.launch_content(dict(base, **change)) != key, change
