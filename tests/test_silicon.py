"""benchmarks/silicon.py: the clean "no GPU" exit here, and with a fake libamdhip64 (tests/test_hip_backend.py's
FakeHipDevice: device memory and hipEvents; plus a fake kernel that computes attention for (batch 0, head 0) from the
kernarg bytes it is given) the launch sequence, aiter's kernarg bytes with the real device pointers (bf16,
fp8 descales, group seqstarts), grids, event timing and the correctness column.

Our set here is a manifest written from kernels/fa_fwd_set.py's own rows with placeholder code objects: the
fake device runs no code, and building the real set takes minutes (tests/test_drop_in.py builds and runs it)."""
from __future__ import annotations

import json
import math
import statistics
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import drop_in_missing
from flyasm.run import hip

ROOT = Path(__file__).resolve().parents[1]
SHARED_AITER = ROOT.parent / "shared" / "aiter"
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT / "kernels"), str(Path(__file__).resolve().parent)]
import fa_fwd  # noqa: E402
import silicon  # noqa: E402
from test_hip_backend import FakeHipDevice  # noqa: E402

_why = drop_in_missing(SHARED_AITER / "client" / "drop_in.sh")
pytestmark = pytest.mark.skipif(_why is not None, reason=_why or "")
FIELDS = [n for n, _ in fa_fwd.AITER_ARGS]          # aiter's struct: one 16-byte slot per field
DESCALE_FIELDS = ("q_descale", "k_descale", "v_descale")


def _field(ka: bytes, name: str):
    kind = dict(fa_fwd.AITER_ARGS)[name]
    return struct.unpack_from({"ptr": "<Q", "u32": "<I", "f32": "<f"}[kind], ka, 16 * FIELDS.index(name))[0]


@pytest.fixture(scope="module")
def our_set(tmp_path_factory):
    """Our manifest (fa_fwd_set's rows for every aiter key, as build-set writes it), placeholder objects."""
    import fa_fwd_set
    from flyasm.dispatch import manifest_text
    d = tmp_path_factory.mktemp("fa_set")
    rows = [fa_fwd_set.manifest_row(**p) for p in fa_fwd_set.KEYS]
    (d / "fmha_fwd.csv").write_text(manifest_text(rows, fa_fwd_set.MANIFEST_COLUMNS))
    for r in rows:
        (d / r["co_name"]).write_bytes(b"\x7fELF placeholder: the fake device runs no code")
    return d


def test_no_gpu_prints_predictions_and_exits_0(tmp_path, our_set):
    ok, why = hip.available()
    if ok:
        pytest.skip("an AMD GPU is present: the no-GPU path does not run")
    js = tmp_path / "si.json"
    r = subprocess.run([sys.executable, "benchmarks/silicon.py", "--set", str(our_set), "--model", "static",
                        "--shape", "2,8,4,512", "--key", "bf16,128,128,0,0", "--key", "fp8bf16,256,256,2,1",
                        "--json", str(js)], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"silicon: no AMD GPU here ({why}); nothing measured." in r.stdout
    data = json.loads(js.read_text())
    assert data["measured"] is False and data["reason"] == why and data["model"] == "static"
    rows = {(tuple(x["key"]), x["kernel"]): x for x in data["rows"]}
    assert len(rows) == 4
    theirs = rows[(("bf16", 128, 128, 0, 0), "aiter")]
    # FLOPs: Q·Kᵀ and P·V, 2·B·HQ·S²·(hdim_q + hdim_v); TFLOPS is FLOPs over the predicted time
    assert theirs["flops"] == 2 * 2 * 8 * 512 * 512 * 256
    assert theirs["pred_us"] > 0 and theirs["pred_tflops"] == pytest.approx(theirs["flops"] / theirs["pred_us"] / 1e6)
    assert "meas_us" not in theirs and theirs["grid"] == [2, 8, 2] and theirs["block"] == 512
    # a placeholder object cannot be modelled: the row says so, the table goes on
    placeholder = rows[(("bf16", 128, 128, 0, 0), "ours")]
    assert "pred_us" not in placeholder and "not a readable ELF code object" in placeholder["pred_error"]
    absent = rows[(("fp8bf16", 256, 256, 2, 1), "aiter")]
    assert absent["why"] == f"fwd_hd256_fp8_causal_group.co is not in {silicon.AITER_DIR}"
    ours = rows[(("fp8bf16", 256, 256, 2, 1), "ours")]
    assert ours["grid"] == [8, 2, 1] and ours["flops"] == 2 * 2 * 8 * 512 * 512 * 512 / 2
    assert "| fp8bf16 256/256 causal group | aiter | fwd_hd256_fp8_causal_group.co |" in r.stdout


@pytest.mark.slow
def test_perf_model_is_the_default_prediction(tmp_path, our_set):
    """The predicted columns are fa_keys_model.price's (flyasm perf on aiter's packed launch)."""
    import fa_keys_model
    js = tmp_path / "perf.json"
    r = subprocess.run([sys.executable, "benchmarks/silicon.py", "--set", str(our_set), "--shape", "1,8,8,1024",
                        "--key", "bf16,128,128,0,0", "--json", str(js)], capture_output=True, text=True, cwd=ROOT,
                       timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = {x["kernel"]: x for x in json.loads(js.read_text())["rows"]}
    mrow = fa_keys_model.manifest(silicon.AITER_DIR)[("bf16", 128, 128, 0, 0)]
    want = fa_keys_model.price(str(silicon.AITER_DIR), mrow, (1, 8, 8, 1024))
    assert rows["aiter"]["pred_us"] == pytest.approx(want["us"], rel=1e-9) and want["us"] > 0
    assert rows["aiter"]["pred_tflops"] == pytest.approx(rows["aiter"]["flops"] / want["us"] / 1e6)


class FakeDevice(FakeHipDevice):
    """FakeHipDevice (device memory, hipEvents on a fake clock that each launch advances) with a
    'kernel' that writes O of (batch 0, head 0) -- computed here from the kernarg bytes: pointers,
    strides, scale, descales, seqstarts -- right, wrong or not at all."""

    def __init__(self, o_mode="right"):
        super().__init__()
        self.o_mode = o_mode
        self.launches = []

    def hipModuleLaunchKernel(self, *a):
        rc = super().hipModuleLaunchKernel(*a)
        ms = 1.0 + (len(self.launches) * 7 % 5) / 4          # device time of this launch, varied
        self.clock += ms
        ka = self.launched["kernarg"]        # what each pointer argument points to, at launch time
        mem = {_field(ka, n): bytes(self.dev[_field(ka, n)][:12]) for n, t in fa_fwd.AITER_ARGS
               if t == "ptr" and _field(ka, n) in self.dev}
        self.launches.append(dict(self.launched, fn_name=self.fn_name, ms=ms, mem=mem))
        if self.o_mode != "none":
            self.attention_b0h0(self.launched["kernarg"], b"causal" in self.fn_name)
        return rc

    def _rows(self, ptr, first, n, stride, d, fp8):
        raw = b"".join(self.read(ptr + (first + i) * stride, d * (1 if fp8 else 2)) for i in range(n))
        return torch.frombuffer(bytearray(raw), dtype=torch.float8_e4m3fn if fp8 else torch.bfloat16).double() \
            .reshape(n, d)

    def attention_b0h0(self, ka, causal):
        f = lambda n: _field(ka, n)             # noqa: E731
        fp8 = f("q_descale") != 0
        dq, dv = f("qk_head_dim"), f("v_head_dim")
        if f("qseq"):                            # group mode: sequence 0's rows from the seqstart arrays
            q0, q1 = struct.unpack("<2i", self.read(f("qseq"), 8))
            k0, k1 = struct.unpack("<2i", self.read(f("kseq"), 8))
        else:
            q0, q1, k0, k1 = 0, f("seqlen_q"), 0, f("seqlen_k")
        ds = [struct.unpack("<f", self.read(f(n), 4))[0] if fp8 else 1.0 for n in DESCALE_FIELDS]
        q = self._rows(f("q"), q0, q1 - q0, f("q_ss"), dq, fp8) * ds[0]
        k = self._rows(f("k"), k0, k1 - k0, f("k_ss"), dq, fp8) * ds[1]
        v = self._rows(f("v"), k0, k1 - k0, f("v_ss"), dv, fp8) * ds[2]
        s = q @ k.T * f("scale")
        if causal:                               # bottom-right: query i sees keys j <= i + Sk - Sq
            i, j = torch.arange(q.shape[0])[:, None], torch.arange(k.shape[0])[None, :]
            s = s.masked_fill(j > i + k.shape[0] - q.shape[0], float("-inf"))
        o = torch.softmax(s, -1) @ v
        if self.o_mode == "wrong":
            o[-1, 0] += 0.5                      # the last row is always checked
        raw = o.to(torch.bfloat16).view(torch.int16).numpy().tobytes()
        for i in range(o.shape[0]):
            buf, off = self._at(f("o") + (q0 + i) * f("o_ss"), 2 * dv)
            buf[off:off + 2 * dv] = raw[i * 2 * dv:(i + 1) * 2 * dv]


KEYS = ["bf16,128,128,0,0", "bf16,128,128,2,1", "fp8bf16,128,128,0,0"]
B, HQ, HK, S, W, R = 2, 4, 2, 300, 2, 3


def _run(our_set, tmp_path, fake, keys):
    js = tmp_path / "fake.json"
    argv = ["--set", str(our_set), "--shape", f"{B},{HQ},{HK},{S}", "--warmup", str(W), "--repeats", str(R),
            "--model", "none", "--json", str(js)]
    assert silicon.main(argv + [x for k in keys for x in ("--key", k)], runtime=hip.HipRuntime(lib=fake)) == 0
    return json.loads(js.read_text())["rows"]


def test_fake_device_launches_every_kind_of_key(tmp_path, capsys, our_set):
    fake = FakeDevice()
    rows = _run(our_set, tmp_path, fake, KEYS)
    assert "hipEvent device time, median of 3 launches after 2 warm-up" in capsys.readouterr().out
    ran = [r for r in rows if "meas_us" in r]
    # ours for the three keys; aiter's bf16 and fp8 (the sample has no group object: listed with why)
    assert [(tuple(r["key"]), r["kernel"]) for r in ran] == [
        (("bf16", 128, 128, 0, 0), "ours"), (("bf16", 128, 128, 0, 0), "aiter"), (("bf16", 128, 128, 2, 1), "ours"),
        (("fp8bf16", 128, 128, 0, 0), "ours"), (("fp8bf16", 128, 128, 0, 0), "aiter")]
    assert next(r for r in rows if r["key"] == ["bf16", 128, 128, 2, 1] and r["kernel"] == "aiter")["why"] \
        .startswith("fwd_hd128_bf16_causal_group.co is not in")
    # per kernel: O poisoned, W warm-up launches, R x (record, launch, record), one wait, R elapsed times
    seq = [c for c in fake.calls if c.startswith(("hipModuleLaunch", "hipEvent", "hipMemset"))]
    one = ["hipMemset"] + ["hipModuleLaunchKernel"] * W + ["hipEventCreate"] * 2 * R \
        + ["hipEventRecord", "hipModuleLaunchKernel", "hipEventRecord"] * R + ["hipEventSynchronize"] \
        + ["hipEventElapsedTime"] * R + ["hipEventDestroy"] * 2 * R
    assert seq == one * len(ran) and not fake.stamps
    assert fake.calls.count("hipModuleLoadData") == len(ran)        # five distinct kernels, each loaded once
    launches = [fake.launches[i * (W + R):(i + 1) * (W + R)] for i in range(len(ran))]
    for r, ls in zip(ran, launches):
        # median/min/max of the event times: the timed launches' device times
        ms = [la["ms"] for la in ls[W:]]
        assert r["meas_us"] == pytest.approx(statistics.median(ms) * 1e3, rel=1e-6)
        assert (r["meas_min_us"], r["meas_max_us"]) == pytest.approx((min(ms) * 1e3, max(ms) * 1e3), rel=1e-6)
        assert r["meas_tflops"] == pytest.approx(r["flops"] / (r["meas_us"] * 1e6))
        # the fake kernel's O (from the bytes it was given) agrees with the harness's float64 reference
        assert r["ok"] is True and r["max_err"] < 0.02 and r["checked_rows"][0] == 0 and r["checked_rows"][-1] == S - 1
        assert len({la["kernarg"] for la in ls}) == 1 and all(la["block"] == (512, 1, 1) for la in ls)
    names = [ls[0]["fn_name"] for ls in launches]
    assert names == [b"fa_fwd_hd128_bf16", b"_ZN5aiter19fmha_fwd_hd128_bf16E", b"fa_fwd_hd128_bf16_causal_group",
                     b"fa_fwd_hd128_fp8bf16", b"_ZN5aiter24fmha_fwd_hd128_fp8_gfx950E"]
    alloc = dict(fake.allocated)
    assert not fake.dev, "every device buffer is freed"
    tiles = math.ceil(S / 256)
    for i, ls in enumerate(launches):
        la, ka = ls[0], ls[0]["kernarg"]
        fp8, group = i >= 3, i == 2
        es = 1 if fp8 else 2
        for n in ("q", "k", "v", "o", "lse"):   # real device pointers, at aiter's offsets
            assert _field(ka, n) in alloc
        assert alloc[_field(ka, "q")] == B * S * HQ * 128 * es and alloc[_field(ka, "o")] == B * S * HQ * 128 * 2
        assert (_field(ka, "seqlen_q"), _field(ka, "seqlen_k"), _field(ka, "gqa")) == (S, S, HQ // HK)
        assert (_field(ka, "q_ss"), _field(ka, "q_hs")) == (HQ * 128 * es, 128 * es)
        assert _field(ka, "scale") == pytest.approx(1 / math.sqrt(128), rel=1e-7)
        if group:       # grid (heads, batch, tiles), causal pairs tiles; packed sequences and seqstarts
            assert la["grid"] == (HQ, B, math.ceil(tiles / 2))
            assert (_field(ka, "q_bs"), _field(ka, "o_bs"), _field(ka, "lse_hs")) == (0, 0, 4 * B * S)
            for n in ("qseq", "kseq"):
                assert struct.unpack("<3i", la["mem"][_field(ka, n)][:12]) == (0, S, 2 * S)
        else:
            assert la["grid"] == (tiles, HQ, B) and _field(ka, "qseq") == 0
            assert (_field(ka, "q_bs"), _field(ka, "lse_hs")) == (S * HQ * 128 * es, 4 * S)
        if fp8:         # descale pointers at aiter's offsets, to one f32 each, not 1
            got = [struct.unpack("<f", la["mem"][_field(ka, n)][:4])[0] for n in DESCALE_FIELDS]
            assert got == list(silicon.DESCALES.values()) and 1.0 not in got
        else:
            assert _field(ka, "q_descale") == 0


@pytest.mark.parametrize("o_mode", ["wrong", "none"])
def test_a_wrong_or_unwritten_o_is_flagged(tmp_path, our_set, o_mode):
    fake = FakeDevice(o_mode)
    rows = _run(our_set, tmp_path, fake, ["bf16,128,128,0,0"])
    for r in rows:
        assert r["ok"] is False and r["err_over_bound"] > 1
        assert r["max_err"] == (pytest.approx(0.5, abs=0.02) if o_mode == "wrong" else float("inf"))


def test_error_bound_against_rounded_p():
    """error_bound covers a kernel that rounds P to bf16 / E4M3 (RNE, torch's casts) before P·V and
    stores O in bf16, on random scores of a wide range; and stays below the 0.5 error the fake's
    wrong O carries, so that error is always flagged."""
    g = torch.Generator().manual_seed(5)
    for fp8, fmt in ((False, torch.bfloat16), (True, torch.float8_e4m3fn)):
        s = torch.randn(16, 300, generator=g, dtype=torch.float64) * 3
        v = torch.randn(300, 64, generator=g, dtype=torch.float64)
        p = torch.exp(s - s.amax(1, keepdim=True))
        o_ref = p @ v / p.sum(1, keepdim=True)
        o = (p.to(fmt).double() @ v / p.sum(1, keepdim=True)).to(torch.bfloat16).double()
        bound = silicon.error_bound(p.numpy(), v.numpy(), o_ref.numpy(), fp8)
        err = (o - o_ref).abs().numpy()
        assert (err <= bound).all() and (bound < 0.5).all()
        assert err.max() > 0.02 * bound.max()              # the rounding is there: not a vacuous comparison


def test_host_code_failure_is_one_sentence(monkeypatch, capsys, our_set):
    def broken(*a, **k):
        raise subprocess.CalledProcessError(1, ["host"], stderr=b"codegen.py: No module named 'pandas'\n")
    monkeypatch.setattr(silicon.AL, "fmha_pack", broken)
    assert silicon.main(["--set", str(our_set), "--model", "none", "--key", "bf16,128,128,0,0"],
                        runtime=hip.HipRuntime(lib=FakeDevice())) == 1
    assert capsys.readouterr().out.strip() == ("silicon: aiter's host code (client/drop_in.sh's codegen + host.cpp) "
                                               "could not run: codegen.py: No module named 'pandas'")
