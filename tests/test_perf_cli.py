"""`flyasm perf` and the model's benchmark scripts on small inputs."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
