"""The shipped attention set: every kernels/fa_fwd.py variant aiter-style dispatch needs.

    flyasm build-set kernels/fa_fwd_set.py -o out/fa    # .co files + fa_fwd_set.csv

Rows follow aiter's fmha_fwd.csv columns: mask 0 = none, 1 = causal top-left (torch's
is_causal; fa_fwd's diagonal is query i sees keys 0..i), mode 0 = batch, ts_qo/ts_kv = the
256-row Q tile and 64-key K/V step of fa_fwd. The kernel depends on the head counts only through
their ratio, so the `gqa` column (num_heads // num_kv_heads) is what a call is matched on.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fa_fwd  # noqa: E402

GQA = (1, 2, 4, 8)
VARIANTS = [dict(dtype=d, causal=c, num_heads=8, num_kv_heads=8 // g, aiter_args=True)
            for d in ("bf16", "f16") for c in (False, True) for g in GQA]
# Kernel-argument layout used by flyasm.attention (fa_fwd's natural packing) -- same grid otherwise.
NATURAL = [dict(p, aiter_args=False) for p in VARIANTS]
# Three natural-argument variants for quick tests (tests/test_dispatch.py).
SMALL = [dict(dtype="bf16", causal=False, num_heads=2, num_kv_heads=1, aiter_args=False),
         dict(dtype="bf16", causal=True, num_heads=1, num_kv_heads=1, aiter_args=False),
         dict(dtype="f16", causal=False, num_heads=1, num_kv_heads=1, aiter_args=False)]


def build(**params):
    return fa_fwd.build(**params)


def manifest_row(dtype, causal, num_heads, num_kv_heads, aiter_args=False, **_):
    return dict(dtype=dtype, hdim_q=fa_fwd.L.HEAD_DIM, hdim_v=fa_fwd.L.HEAD_DIM, mask=1 if causal else 0,
                mode=0, ts_qo=fa_fwd.L.BLOCK_Q, ts_kv=fa_fwd.L.BLOCK_K, gqa=num_heads // num_kv_heads,
                args="aiter" if aiter_args else "natural")
