"""Sweep grid of kernels/gemm_bf16.py (both layouts, both output types).

    flyasm sweep benchmarks/sweep_gemm_bf16.py -o out/gemm --top 3

Predictions are for C[4096, 4096] = A[4096, 4096]·B (workload()); verify() runs a variant in the strict
emulator at M=96 (a partial 64-row tile), N=64, K=128 against gemm_bf16.reference() with fresh random
inputs and a NaN-poisoned C (inside gemm_bf16.run).
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "kernels"
sys.path[:0] = [str(ROOT), str(KERNELS)]      # this checkout's flyasm, then the kernels
import gemm_bf16  # noqa: E402

SOURCES = [KERNELS]
VARIANTS = [dict(layout="nn", out_dtype="f32"), dict(layout="nn", out_dtype="bf16"), dict(layout="nt", out_dtype="f32")]
SIZE = 4096

build = gemm_bf16.build


def workload(**_):
    return {"flops": 2.0 * SIZE ** 3, "label": f"M=N=K={SIZE}"}


def verify(kernel, seed, layout="nn", out_dtype="f32"):
    """Bound from tests/test_kernels.py: bf16 products are exact in fp32, only the summation order
    differs, |C - ref| <= 2K·2^-24·(|A|·|B|); bf16 C adds one rounding, 2^-8·|ref|."""
    import torch
    g = torch.Generator().manual_seed(seed)
    M, N, K = (96, 64, 128) if layout == "nn" else (64, 64, 128)      # nt takes multiples of 32 only
    a = torch.randn(M, K, generator=g).bfloat16()
    b = torch.randn(K, N, generator=g).bfloat16() if layout == "nn" else torch.randn(N, K, generator=g).bfloat16()
    c = gemm_bf16.run(a, b, kernel=kernel, layout=layout, **({"out_dtype": out_dtype} if layout == "nn" else {}))
    ref = gemm_bf16.reference(a, b, layout=layout)
    mag = a.float().abs() @ (b.float().abs() if layout == "nn" else b.float().abs().T)
    bound = 2 * K * 2.0 ** -24 * mag + (2.0 ** -8 * ref.abs() if out_dtype == "bf16" else 0)
    err = (c.float() - ref).abs()
    return {"ok": bool(torch.all(err <= bound)), "max_err": float(err.nan_to_num(float("inf")).max()),
            "tol": float(bound.max()), "shape": f"M{M} N{N} K{K}"}
