"""benchmarks/fa_keys_model.py: every aiter attention key priced on one launch that aiter's host code packs."""
from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import drop_in_missing

ROOT = Path(__file__).resolve().parents[1]
AITER = ROOT.parent / "shared" / "aiter"
FWD = AITER / "gfx950" / "fmha_v3_fwd"
sys.path.insert(0, str(ROOT / "benchmarks"))

_why = drop_in_missing(AITER / "client" / "drop_in.sh")
pytestmark = pytest.mark.skipif(_why is not None, reason=_why or "")


def _launch(dtype, hq_dim, hv_dim, mask, mode, co="fwd_hd128_fp8.co", b=2, hq=4, hk=2, s=600):
    import aiter_launch as AL
    from fa_keys_model import manifest
    key = (dtype, hq_dim, hv_dim, mask, mode)
    mrow = manifest(FWD)[key]
    row = dict(mrow, kernelName=mrow["knl_name"], batch=b, nhead_q=hq, nhead_k=hk, seqlen_q=s, seqlen_k=s)
    # the index maps the row's code object to a file: launch parameters come from the manifest and
    # aiter's host code, so a sample object stands in where aiter's own is not in the sample
    return AL.row_launch("fmha", row, {mrow["co_name"]: (FWD / co, mrow)})


@pytest.mark.parametrize("mode", [0, 1])
def test_fp8_launch_is_aiters(mode):
    L = _launch("fp8bf16", 128, 128, 0, mode)
    tiles = -(-600 // 256)
    # aiter's grid: batch mode (tiles, heads, batch), group mode (heads, batch, tiles) (client/README.md)
    assert L["grid"] == ((tiles, 4, 2) if mode == 0 else (4, 2, tiles)) and L["block"] == 512
    bufs = L["buffers"]
    for n in ("q", "k", "v"):               # E4M3 values of N(0, 1): finite, spread, not all zero
        x = torch.from_numpy(bufs[n].copy()).view(torch.float8_e4m3fn).float()
        assert torch.isfinite(x).all() and 0.8 < float(x.std()) < 1.2
    assert {"q_descale", "k_descale", "v_descale"} <= bufs.keys()
    assert ("seqstart_q" in bufs) == bool(mode) and ("seqstart_k" in bufs) == bool(mode)
    # every buffer's address is in the packed arguments (aiter's struct holds each pointer)
    addrs = {n: 0x7F0000000000 + 0x100000 * i for i, n in enumerate(bufs)}
    ka = L["kernarg"](addrs)
    ptrs = {struct.unpack_from("<Q", ka, o)[0] for o in range(0, len(ka) - 7, 8)}
    assert set(addrs.values()) <= ptrs, sorted(n for n, a in addrs.items() if a not in ptrs)
    if mode:
        assert list(bufs["seqstart_q"]) == [0, min(600, 1024)]


def test_launch_width_follows_aiters_rule():
    # aiter launches 256 threads for head dims 192/128 and 512 otherwise (csrc/cpp_itfs/mha_fwd.cu)
    assert _launch("bf16", 192, 128, 2, 0)["block"] == 256
    assert _launch("bf16", 128, 128, 2, 1)["block"] == 512
    L = _launch("bf16", 128, 128, 0, 0, co="fwd_hd128_bf16.co", b=1, hq=8, hk=8, s=1024)
    assert isinstance(L["buffers"]["q"], int)      # bf16: byte counts, filled by perf.capture
    # DRAM bytes: Q, K, V, O in bf16 and the f32 LSE, once
    assert L["dram_bytes"] == 2 * 1024 * 8 * 128 * 4 + 4 * 8 * 1024


@pytest.mark.slow
def test_keys_model_prices_ours_and_aiters(tmp_path):
    from flyasm.dispatch import build_set
    set_dir = tmp_path / "set"
    build_set(f"{ROOT / 'kernels' / 'fa_fwd_set.py'}:SMALL", set_dir, jobs=1, progress=False)
    js = tmp_path / "rows.json"
    r = subprocess.run([sys.executable, "benchmarks/fa_keys_model.py", "--set", str(set_dir), "--shape", "1,8,8,2048",
                        "--key", "fp8bf16,128,128,0,0", "--json", str(js)], cwd=ROOT, capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    import json
    (row,) = json.loads(js.read_text())["rows"]
    ours, aiter = row["ours"], row["aiter"]
    assert ours["co"] != aiter["co"] and ours["block"] == aiter["block"] == 512
    flops = 2.0 * 8 * 2048 * 2048 * 256
    for p in (ours, aiter):                    # a TFLOPS figure is the launch's FLOPs over its time
        assert p["us"] > 0 and p["tflops"] == pytest.approx(flops / p["us"] / 1e6)
        assert 0 < p["mfma_busy"] <= 1 and 0 < p["valu_busy"] <= 1
    assert "fp8bf16 | 128/128 | none | batch" in r.stdout
