"""kernels/fa_fwd_fp8.py directly (aiter's arguments packed in Python, flyasm.dispatch.aiter_fwd_values):
the fp8bf16 variants check clean, and per-(batch, head) descales (aiter's s_descale_*_Bs / _Hs, which
drop_in.sh pack always leaves 0) reach the right heads. The drop-in cases (aiter's own packing) are in
tests/test_drop_in.py; the error bound is conftest.fp8_attention_bound."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
from conftest import fp8_attention_bound

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kernels"))
import fa_fwd_fp8  # noqa: E402

from flyasm.check import check_kernel  # noqa: E402


@pytest.mark.slow          # the LDS analysis takes minutes on a loaded machine; test_drop_in's set build checks too
@pytest.mark.parametrize("hd", [128, 256])
def test_variants_check_clean_and_fit_aiters_launch(hd):
    k = fa_fwd_fp8.build(causal=True, group=True, head_dim=hd)
    assert check_kernel(k) == []
    assert k.threads == 512                                     # aiter's bdx for fp8 (mha_fwd.cu)
    u = k.usage()
    assert u["vgpr"] + u["agpr"] <= 256, u                       # two waves share a SIMD: 256 registers each


def test_per_head_descales_reach_their_heads():
    g = torch.Generator().manual_seed(11)
    b, hq, hkv, sq, sk, d = 2, 2, 1, 70, 100, 128
    f8 = torch.float8_e4m3fn
    q8, k8, v8 = ((2 * torch.randn(b, h, s_, d, generator=g)).to(f8) for h, s_ in ((hq, sq), (hkv, sk), (hkv, sk)))
    # distinct per (batch, head); a kernel reading one slot for all gives O(1) errors
    ds = tuple(0.4 + 1.5 * torch.rand(b, h, generator=g) for h in (hq, hkv, hkv))
    out, lse = fa_fwd_fp8.run(q8, k8, v8, ds)
    # the reference's own dequantisation (not the kernel module's helper): x = x8 * d[batch, head]
    q, k, v = (x8.float() * d[:, :, None, None] for x8, d in zip((q8, k8, v8), ds))
    k, v = k.repeat_interleave(hq // hkv, 1), v.repeat_interleave(hq // hkv, 1)
    sc = (q @ k.transpose(-1, -2)) / math.sqrt(d)
    ref = torch.softmax(sc, -1) @ v
    do = (out.float() - ref).abs()
    assert (do <= fp8_attention_bound(sc, v, ref)).all(), float(do.max())
    torch.testing.assert_close(lse, torch.logsumexp(sc, -1), atol=1e-4, rtol=0)


# Head dim 128 runs fa_fwd's split loop with mask_loop: a step copy without mask code until the first
# step whose next Sᵀ needs the mask, then the masked copy, entered mid-step at either parity. Causal
# bottom-right with Sq=70, Sk=330 (DIAG 260): waves 0 and 1 enter the masked copy at step 3 (odd),
# wave 2 at step 4 (even), after 3-4 steps of the hot copy. "growing": scores rise along the keys
# (K drifts toward Q's direction), so the lazy max moves by more than its threshold and the O/l
# rescale branch runs; the test prints by how much the row max moved past the first tile.
@pytest.mark.parametrize("causal,growing", [(True, True), pytest.param(False, False, marks=pytest.mark.slow)])
def test_hd128_hot_and_masked_loop_copies(causal, growing):
    g = torch.Generator().manual_seed(5 + causal)
    sq, sk, d = 70, 330, 128
    q, k, v = (2 * torch.randn(1, 1, n, d, generator=g) for n in (sq, sk, sk))
    if growing:
        u = torch.full((d,), 0.25)
        q = 0.3 * q + 4 * u
        k = 0.3 * k + torch.linspace(0, 6, sk)[None, None, :, None] * u
    f8 = torch.float8_e4m3fn
    q8, k8, v8 = (t.to(f8) for t in (q, k, v))
    ds = (0.8, 1.3, 0.7)
    out, lse = fa_fwd_fp8.run(q8, k8, v8, ds, causal=causal)
    qd, kd, vd = q8.float() * ds[0], k8.float() * ds[1], v8.float() * ds[2]
    sc = (qd @ kd.transpose(-1, -2)) / math.sqrt(d)
    if causal:
        sc = sc.masked_fill(~torch.ones(sq, sk, dtype=torch.bool).tril(diagonal=sk - sq), float("-inf"))
    ref = torch.softmax(sc, -1) @ vd
    moved = float((sc.amax(-1) - sc[..., :64].amax(-1)).max()) * math.log2(math.e)
    print(f"row max moved by up to {moved:.1f} log2 units past the first key tile")
    if growing:
        assert moved > 2 * fa_fwd_fp8.F.LAZY_THRESHOLD, moved       # the lazy threshold is passed
    do = (out.float() - ref).abs()
    assert (do <= fp8_attention_bound(sc, vd, ref)).all(), float(do.max())
    torch.testing.assert_close(lse, torch.logsumexp(sc, -1), atol=1e-4, rtol=0)
