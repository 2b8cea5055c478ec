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


@pytest.mark.xdist_group("fa_bwd_prepost_only")
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
