"""The shipped attention set: a drop-in for aiter's gfx950 fmha_v3_fwd kernels.

    flyasm build-set kernels/fa_fwd_set.py -o out/fa    # .co files + fmha_fwd.csv (+ sidecar)
    ../shared/aiter/client/drop_in.sh out/fa lookup    # aiter's own codegen + lookup accept it

One kernel per aiter key (dtype, hdim_q, hdim_v, mask, mode): every kernel takes aiter's
656-byte argument struct and grid (kernels/fa_fwd.py build(aiter_args=True)), so GQA ratio, head
counts, strides and lengths are run-time values. Keys: bf16 head dim 128, and bf16 Q/K head
dim 192 with V head dim 128 (4 waves, 128-row Q tiles: aiter's 256-thread launch), and fp8bf16
head dim 128 and 256 (fp8 Q/K/V with descale pointers, bf16 O: kernels/fa_fwd_fp8.py). mask 0 = none,
2 = causal bottom-right (CK's mask 2, aiter's only causal key on gfx950); mode 0 = batch, 1 =
group (varlen). The extra rows
aiter never asks for (its lookup matches dtype and mask exactly) serve flyasm.attention: f16, and
mask 1 = causal top-left (torch's is_causal when seqlen_q != seqlen_k).

The CSV holds aiter's ten columns only: aiter's codegen pastes every column into C++ and types it
from the first row of its union with the gfx942 manifest, so our build parameters (JSON) and
workgroup size live in the sidecar fmha_fwd.flyasm.json that flyasm.dispatch.Dispatcher reads.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fa_fwd  # noqa: E402
import fa_fwd_fp8  # noqa: E402

MANIFEST = "fmha_fwd.csv"                 # the name aiter's codegen globs for (hsa/<arch>/fmha_v3_fwd/)
MANIFEST_COLUMNS = ("dtype", "hdim_q", "hdim_v", "mask", "mode", "bf16_cvt", "ts_qo", "ts_kv", "knl_name",
                    "co_name")            # aiter's gfx950 fmha_fwd.csv header, in its order

HD128_KEYS = [dict(dtype="bf16", causal=c, group=g, aiter_args=True) for c in (False, True) for g in (False, True)]
# Q/K head dim 192, V head dim 128: aiter launches these with 256 threads (4 waves, ts_qo 128)
HD192_KEYS = [dict(p, head_dim=192) for p in HD128_KEYS]
# fp8 Q/K/V with descales, bf16 O (aiter's fp8bf16; kernels/fa_fwd_fp8.py): head dim 128 and 256
# (Q/K/V/O), 8 waves, ts_qo 256
FP8_KEYS = [dict(p, dtype=fa_fwd_fp8.DTYPE) for p in HD128_KEYS] + \
    [dict(p, dtype=fa_fwd_fp8.DTYPE, head_dim=256) for p in HD128_KEYS]
KEYS = HD128_KEYS + HD192_KEYS + FP8_KEYS
VARIANTS = KEYS + [dict(p, dtype="f16") for p in HD128_KEYS] + \
    [dict(dtype=d, causal=True, align="top_left", aiter_args=True) for d in ("bf16", "f16")]
# A quick subset for tests (tests/test_dispatch.py).
SMALL = [HD128_KEYS[0], HD128_KEYS[2], dict(dtype="bf16", causal=True, align="top_left", aiter_args=True),
         dict(HD128_KEYS[0], dtype="f16"), HD192_KEYS[0], FP8_KEYS[0]]


def build(**params):
    if params.get("dtype") == fa_fwd_fp8.DTYPE:
        return fa_fwd_fp8.build(params.get("causal", False), params.get("group", False), params.get("head_dim", 128))
    return fa_fwd.build(**params)


def mask_code(causal=False, align=None, **_):
    if not causal:
        return 0
    return 1 if align == "top_left" else 2


def manifest_row(dtype, causal=False, group=False, align=None, head_dim=128, **params):
    if dtype == fa_fwd_fp8.DTYPE:
        k = fa_fwd_fp8.kernel_name(causal, group, head_dim)
    else:
        k = fa_fwd.build_name(dtype=dtype, causal=causal, group=group, align=align, aiter_args=True, head_dim=head_dim)
    g = (fa_fwd.L.FP8_GEOMETRY if dtype == fa_fwd_fp8.DTYPE else fa_fwd.L.GEOMETRY)[head_dim]
    # ts_qo: aiter's grid is ceil(seqlen_q / ts_qo) [/ 2] workgroups, one Q tile of block_q rows each
    return dict(dtype=dtype, hdim_q=g.d_qk, hdim_v=g.d_v, mask=mask_code(causal, align),
                mode=int(bool(group)), bf16_cvt=0, ts_qo=g.block_q, ts_kv=fa_fwd.L.BLOCK_K, knl_name=k,
                co_name=f"{k}.co")
