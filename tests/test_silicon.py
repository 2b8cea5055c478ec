"""benchmarks/silicon.py: the clean "no GPU" exit here, and with a fake libamdhip64 (tests/test_hip_backend.py's
FakeHip, plus device memory at offsets) the launch sequence, the kernel-argument bytes of ours and of aiter's
(from aiter's own host code, drop_in.sh pack), grids, warm-up/repeat counts and the poisoned read-back."""
from __future__ import annotations

import ctypes
import json
import math
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from flyasm.run import hip

ROOT = Path(__file__).resolve().parents[1]
SHARED_AITER = ROOT.parent / "shared" / "aiter"
sys.path[:0] = [str(ROOT / "benchmarks"), str(Path(__file__).resolve().parent)]
import silicon  # noqa: E402
from test_hip_backend import FakeHip  # noqa: E402


def _need_aiter():
    if not (SHARED_AITER / "gfx950" / "fmha_v3_fwd" / "fmha_fwd.csv").is_file():
        pytest.skip(f"{SHARED_AITER} is absent (aiter's code objects are read in place)")


def test_no_gpu_exit_prints_predictions(tmp_path):
    _need_aiter()
    ok, why = hip.available()
    if ok:
        pytest.skip("an AMD GPU is present: the no-GPU path does not run")
    js = tmp_path / "si.json"
    r = subprocess.run([sys.executable, "benchmarks/silicon.py", "--shapes", "1,8,512,128", "--causal", "no",
                        "--json", str(js)], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr
    assert f"silicon: no AMD GPU here ({why}); nothing measured." in r.stdout
    data = json.loads(js.read_text())
    assert data["measured"] is False and data["reason"] == why
    rows = {row["kernel"]: row for row in data["rows"]}
    ours, theirs = rows["ours"], rows["aiter fwd_hd128_bf16.co"]
    for row in (ours, theirs):          # predicted, not measured
        assert row["pred_us"] > 0 and "meas_us" not in row
        assert row["pred_tflops"] == pytest.approx(row["flops"] / row["pred_us"] / 1e6, rel=1e-9)
    assert ours["flops"] == 4 * 1 * 8 * 512 * 512 * 128
    assert rows["aiter fwd_hd128_bf16_group.co"]["why"].startswith("group mode")


class FakeDevice(FakeHip):
    """FakeHip plus device memory (copies at any offset inside an allocation) and every launch kept."""

    def __init__(self):
        super().__init__()
        self.dev, self.next, self.launches, self.allocated = {}, 0x7000_0000_0000, [], []

    def hipMalloc(self, p, nbytes):
        ctypes.cast(p, ctypes.POINTER(ctypes.c_void_p)).contents.value = self.next
        self.dev[self.next] = bytearray(nbytes)
        self.allocated.append(self.next)
        self.next += (nbytes + 0xFFFF) & ~0xFFFF
        return self._rec("hipMalloc")

    def hipFree(self, ptr):
        del self.dev[ptr.value]
        return self._rec("hipFree")

    def _at(self, addr, nbytes):
        base = max(b for b in self.dev if b <= addr)
        assert addr + nbytes <= base + len(self.dev[base]), "copy outside an allocation"
        return self.dev[base], addr - base

    def hipMemcpy(self, dst, src, nbytes, kind):
        if kind == hip.HIP_MEMCPY_H2D:
            buf, off = self._at(dst.value, nbytes)
            buf[off:off + nbytes] = ctypes.string_at(src.value, nbytes)
        else:
            buf, off = self._at(src.value, nbytes)
            ctypes.memmove(dst.value, bytes(buf[off:off + nbytes]), nbytes)
        return self._rec(f"hipMemcpy{kind}")

    def hipModuleLaunchKernel(self, *a):
        rc = super().hipModuleLaunchKernel(*a)
        self.launches.append(dict(self.launched, fn_name=self.fn_name))
        return rc


def _u32(ka, field):
    return struct.unpack_from("<I", ka, 16 * silicon.AITER_FIELDS.index(field))[0]


def _u64(ka, field):
    return struct.unpack_from("<Q", ka, 16 * silicon.AITER_FIELDS.index(field))[0]


def test_launch_sequence_with_fake_hip(tmp_path, capsys):
    _need_aiter()
    if shutil.which("clang++") is None and not list(Path("/usr/lib").glob("llvm-*/bin/clang++")):
        pytest.skip("drop_in.sh needs clang++ to compile aiter's host code")
    fake = FakeDevice()
    rt = hip.HipRuntime(lib=fake)
    B, H, S, D = 1, 8, 512, 128
    js = tmp_path / "fake.json"
    assert silicon.main(["--shapes", f"{B},{H},{S},{D}", "--causal", "no", "--warmup", "2", "--repeats", "3", "--model", "none",
                         "--json", str(js)], runtime=rt) == 0
    out = capsys.readouterr().out
    assert "median of 3 synchronised launches after 2 warm-up" in out     # predictions: test_no_gpu_exit...
    # per kernel: module load, function, 2 warm-up launches + sync, then 3 x (launch, sync)
    calls = [c for c in fake.calls if c in ("hipModuleLoadData", "hipModuleGetFunction", "hipModuleLaunchKernel",
                                            "hipStreamSynchronize")]
    one = ["hipModuleLoadData", "hipModuleGetFunction"] + ["hipModuleLaunchKernel"] * 2 + ["hipStreamSynchronize"] \
        + ["hipModuleLaunchKernel", "hipStreamSynchronize"] * 3
    assert calls == one * 2
    assert len(fake.launches) == 10
    ours, theirs = fake.launches[0], fake.launches[5]
    assert ours["fn_name"] == b"fa_fwd_hd128_bf16" and theirs["fn_name"] == b"_ZN5aiter19fmha_fwd_hd128_bf16E"
    assert all(la["block"] == (512, 1, 1) for la in fake.launches)
    assert ours["grid"] == (math.ceil(S / 256), H, B) and theirs["grid"] == (math.ceil(S / 256), H, B)
    # both read the same five device buffers, BSHD strides in bytes, at aiter's 16-byte slots
    allocs = fake.allocated                        # q, k, v, o, lse in allocation order
    assert len(allocs) == 5 and not fake.dev       # and all freed
    for ka in (ours["kernarg"], theirs["kernarg"]):
        assert [_u64(ka, f) for f in ("ptr_q", "ptr_k", "ptr_v", "ptr_o")] == allocs[:4]
        assert _u64(ka, "ptr_lse") == allocs[4]
        assert (_u32(ka, "s_seq_len"), _u32(ka, "s_kv_seq_len"), _u32(ka, "s_q_head_num")) == (S, S, H)
        assert (_u32(ka, "s_Seqs"), _u32(ka, "s_Hs"), _u32(ka, "s_Bs")) == (2 * H * D, 2 * D, 2 * S * H * D)
        assert struct.unpack_from("<f", ka, 16 * silicon.AITER_FIELDS.index("scalar"))[0] == \
            pytest.approx(1 / math.sqrt(D), rel=1e-7)
    # the fake device computes nothing: O stays poisoned (NaN) and the read-back says so
    rows = {r["kernel"]: r for r in json.loads(js.read_text())["rows"]}
    assert rows["ours"]["max_err"] == float("inf") and rows["aiter fwd_hd128_bf16.co"]["max_err"] == float("inf")
    assert rows["ours"]["meas_us"] > 0 and rows["ours"]["grid"] == [2, H, B]
