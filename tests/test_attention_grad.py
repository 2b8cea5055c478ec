"""flyasm.attention is differentiable: its backward (flyasm.dispatch.attention_backward) runs the
attention-backward set (kernels/fa_bwd_set.py: pre, dQ/dK/dV, post, packed as aiter's host code packs
them: flyasm.aiter_bwd.pack) in the emulator, and bad input gets one sentence.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import flyasm
from flyasm.dispatch import DispatchError, attention_backward, build_set

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.xdist_group("attention_grad_sets")     # one worker builds the module's sets


@pytest.fixture(scope="module")
def prepost_set(tmp_path_factory):
    """The set's pre and post kernels only (no dQ/dK/dV kernel: the lookup of one fails)."""
    out = tmp_path_factory.mktemp("fa_bwd_prepost_only")
    build_set(f"{REPO / 'kernels' / 'fa_bwd_set.py'}:PRE_POST", out, jobs=2, progress=False)
    return out


def _args(B=1, Hq=2, Hk=1, Sq=40, Sk=70, D=128, dtype=torch.bfloat16):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(B, h, s, D, generator=g).to(dtype) for h, s in ((Hq, Sq), (Hk, Sk), (Hk, Sk)))
    out, dout = torch.randn(B, Hq, Sq, D, generator=g).to(dtype), torch.randn(B, Hq, Sq, D, generator=g).to(dtype)
    return q, k, v, out, torch.randn(B, Hq, Sq, generator=g), dout


def test_bad_input_is_one_sentence(prepost_set):
    q, k, v, out, lse, dout = _args()
    cases = [
        (dict(q=q.float()), "takes bf16 or f16 q, k, v, out, dout of one dtype, not float32, bfloat16"),
        (dict(lse=lse.double()), "lse is float32"),
        (dict(q=q.transpose(2, 3).contiguous().transpose(2, 3)), r"q has strides \(10240, 5120, 1, 40\); .*unit "
         r"stride .* \(pass q.contiguous\(\)\)"),
        (dict(k=torch.randn(1, 3, 70, 128).bfloat16(), v=torch.randn(1, 3, 70, 128).bfloat16()),
         r"query heads \(2\) must be a multiple of key/value heads \(3\)"),
        (dict(dout=dout[:, :, :20]), "shapes do not agree"),
        (dict(causal="diagonal"), "causal is False, True, 'top_left' or 'bottom_right'"),
    ]
    for bad, msg in cases:
        kw = dict(q=q, k=k, v=v, out=out, lse=lse, dout=dout, causal=False, kernels=prepost_set)
        kw.update(bad)
        with pytest.raises(DispatchError, match=msg) as ei:
            attention_backward(**kw)
        assert "\n" not in str(ei.value)
    # a head dim the set has no dQ/dK/dV kernel for (64: pre and post exist, the main kernel does not)
    q64, k64, v64, out64, lse64, dout64 = _args(D=64)
    with pytest.raises(DispatchError, match="the backward set has no dQ/dK/dV kernel for bf16 hdim 64/64 mask 0 "
                                            "atomic32 1 batch mode"):
        attention_backward(q64, k64, v64, out64, lse64, dout64, kernels=prepost_set)


def test_fp8_attention_is_not_differentiable():
    q = torch.randn(1, 1, 16, 128).to(torch.float8_e4m3fn)
    with pytest.raises(DispatchError, match="fp8 attention is forward only"):
        flyasm.attention(q, q, torch.randn(1, 1, 16, 128).requires_grad_())


@pytest.fixture(scope="module")
def sets(tmp_path_factory):
    """(forward set, backward set): fa_fwd_set.py:SMALL and fa_bwd_set.py:SMALL."""
    fwd, bwd = tmp_path_factory.mktemp("fa_fwd_small"), tmp_path_factory.mktemp("fa_bwd_small")
    build_set(f"{REPO / 'kernels' / 'fa_fwd_set.py'}:SMALL", fwd, jobs=2, progress=False)
    build_set(f"{REPO / 'kernels' / 'fa_bwd_set.py'}:SMALL", bwd, jobs=2, progress=False)
    return fwd, bwd


GRAD_CASES = {
    # name: (dtype, causal, hq, hkv, sq, sk); the backward set's default accumulation: a32 for
    # sk > 256, a16 (in q's dtype) below
    "bf16_top_left_gqa2_a32": (torch.bfloat16, True, 2, 1, 60, 300),
    "f16_a16": (torch.float16, False, 1, 1, 70, 100),
}


@pytest.mark.parametrize("backend", ["emu", "hip"])
@pytest.mark.parametrize("case", [c if c == "bf16_top_left_gqa2_a32" else pytest.param(c, marks=pytest.mark.slow)
                                  for c in GRAD_CASES])
def test_gradients_match_sdpa(sets, case, backend):
    """loss = Σ out ∘ dO backpropagated through flyasm.attention (our forward, then our backward, in the
    emulator, or on an AMD GPU through the HIP backend where there is one) against torch.autograd.grad
    of SDPA in float64, per element within tests/attn_bwd_ref's bounds, widened by the forward's own
    error in O and LSE (tests/test_emu_aiter_fmha.py's O bound: 2u(P|V| + |O|) + u|O| + S_k·e·P|V|;
    LSE 64e(|LSE| + ln S_k))."""
    from attn_bwd_ref import E32, U, bounds, grads
    if backend == "hip":
        from flyasm.run import hip
        ok, why = hip.available()
        if not ok:
            pytest.skip(f"no AMD GPU here: {why}")
    dtype, causal, hq, hk, sq, sk = GRAD_CASES[case]
    fwd, bwd = sets
    g = torch.Generator().manual_seed(sum(map(ord, case)))
    q, k, v = (torch.randn(1, h, s, 128, generator=g).to(dtype).requires_grad_() for h, s in ((hq, sq), (hk, sk),
                                                                                              (hk, sk)))
    dout = torch.randn(1, hq, sq, 128, generator=g).to(dtype)
    out = flyasm.attention(q, k, v, causal=causal, kernels=fwd, bwd_kernels=bwd, backend=backend)
    assert out.requires_grad and out.grad_fn is not None
    torch.autograd.backward(out, dout)
    scale = 1 / 128 ** 0.5
    t = lambda x: x.detach()[0].transpose(0, 1)                 # noqa: E731  [1, H, S, D] -> [S, H, D]
    ref = grads(t(q), t(k), t(v), t(dout), scale, 1 if causal else 0)
    u = U[dtype]
    pv = (ref["p"] @ t(v).double().abs().transpose(0, 1).repeat_interleave(hq // hk, 0)).transpose(0, 1)
    o_abs = ref["o"].abs()
    o_err = 2 * u * (pv + o_abs) + u * o_abs + sk * E32 * pv
    lse_err = 64 * E32 * (ref["lse"].abs() + torch.log(torch.tensor(float(sk))))
    bd = bounds(t(q), t(k), t(v), t(out), t(dout), ref["lse"].float(), ref, scale, None if sk > 256 else 1,
                o_err=o_err, lse_err=lse_err)
    for name, got in (("dq", q.grad), ("dk", k.grad), ("dv", v.grad)):
        assert got.shape == (q if name == "dq" else k).shape and got.dtype == dtype
        err = (t(got).double() - ref[name]).abs()
        print(f"{case} {name}: max err {float(err.max()):.2e}, worst err/bound {float((err / bd[name]).max()):.2f}")
        assert float((err / bd[name]).max()) <= 1.0, name


# ---- the HIP backend: the same three launches through flyasm.run.launch's ctypes path ------------
def test_backward_launches_through_the_hip_library(sets):
    """With a fake libamdhip64 holding device memory (tests/test_hip_backend.py): three launches with
    the packed grids and kernarg sizes, each pointer moved onto a device buffer that holds the host
    tensor's bytes (the dq workspace zero-filled), results copied back, every buffer freed."""
    import struct

    from test_hip_backend import FakeHip, FakeHipMem

    from flyasm import aiter_bwd
    from flyasm.run import hip

    class Recording(FakeHipMem):
        def __init__(self):
            super().__init__((0, 0, 0, 0))
            self.seen = []

        def hipModuleLaunchKernel(self, *a):
            rc = FakeHip.hipModuleLaunchKernel(self, *a)
            self.seen.append(dict(self.launched, dev={p: bytes(b) for p, b in self.dev.items()}))
            return rc

    fake = Recording()
    rt = hip.HipRuntime(lib=fake)
    q, k, v, out, lse, dout = _args(Hq=2, Hk=1, Sq=40, Sk=300)
    bwd = sets[1]
    res = aiter_bwd.backward(lambda **c: aiter_bwd.pack(bwd, **c), *(t.transpose(1, 2) for t in (q, k, v, out, dout)),
                             lse, mask_type=1, atomic32=1, backend="hip", runtime=rt)
    assert [(s["grid"], s["block"], len(s["kernarg"])) for s in fake.seen] == \
        [(ln.grid, ln.block, len(ln.kernarg)) for ln in res["launches"]] and len(fake.seen) == 3
    assert [len(s["kernarg"]) for s in fake.seen] == [256, 704, 192]
    main = fake.seen[1]
    fields = aiter_bwd.decode("dqdkdv", main["kernarg"])
    host = {"ptr_q": q.transpose(1, 2), "ptr_k": k.transpose(1, 2), "ptr_lse": lse}
    for name, t in host.items():                                  # the device buffer holds the tensor
        ptr = fields[name]
        base = max(b for b in main["dev"] if b <= ptr)
        off = ptr - base
        assert main["dev"][base][off:off + 64] == t.contiguous().view(torch.uint8).flatten()[:64].numpy().tobytes()
    ws = res["pack"]["workspace"]
    acc = main["dev"][fields["ptr_dq"]]
    assert len(acc) >= ws["bytes"] and not any(acc[:ws["bytes"]])      # zero-filled workspace
    assert fake.dev == {} and struct.unpack_from("<Q", main["kernarg"], 0)[0] == fields["ptr_dq"]
    assert torch.isnan(res["dq"].float()).all()      # the fake ran nothing: dq is the poisoned copy-back
