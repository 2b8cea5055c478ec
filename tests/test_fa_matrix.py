"""Attention correctness matrix in the strict emulator: the cells the other tests do not cover
(f16 causal, batch 2, MHA, >= 4 KV iterations plus the epilogue, lengths not multiples of 256).

Tolerance (derived in tests/test_fa_fwd.py): P and O are rounded to bf16 (f16), so the absolute
error of O is bounded by a few units of 2^-8 (2^-11) of |O| ≤ max|V|; atol = rtol = 1e-2 (bf16),
2.5e-3 (f16). Relative error is reported against max|O| of the reference."""
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kernels"))
import fa_fwd  # noqa: E402

TOL = {torch.bfloat16: 1e-2, torch.float16: 2.5e-3}
CASES = [  # (dtype, causal, batch, heads, kv_heads, seqlen_q, seqlen_k)
    (torch.float16, True, 2, 2, 1, 300, 300),     # f16 causal GQA, batch 2, 5 KV tiles, ragged
    (torch.bfloat16, False, 2, 2, 2, 260, 320),   # bf16 MHA, batch 2, 5 KV tiles, ragged q
]


@pytest.mark.parametrize("dtype,causal,b,hq,hkv,sq,sk", CASES)
def test_matrix(dtype, causal, b, hq, hkv, sq, sk):
    g = torch.Generator().manual_seed(hash((sq, sk, causal)) & 0xFFFF)
    q, k, v = (torch.randn(b, h, s, 128, generator=g).to(dtype) for h, s in ((hq, sq), (hkv, sk), (hkv, sk)))
    out, lse = fa_fwd.run(q, k, v, causal=causal)
    ref, ref_lse = fa_fwd.reference(q, k, v, causal=causal)
    assert torch.isfinite(out).all() and torch.isfinite(lse).all()     # the outputs were NaN-poisoned
    err = (out.float() - ref).abs().max().item()
    rel = err / ref.abs().max().item()
    print(f"\n{dtype} causal={causal} B={b} H={hq}/{hkv} S={sq}x{sk}: max|dO|={err:.2e} rel={rel:.2e} "
          f"max|dLSE|={(lse - ref_lse).abs().max().item():.2e}")
    torch.testing.assert_close(out.float(), ref, atol=TOL[dtype], rtol=TOL[dtype])
    torch.testing.assert_close(lse, ref_lse, atol=1e-4, rtol=0)
