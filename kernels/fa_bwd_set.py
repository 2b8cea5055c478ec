"""The attention-backward set: a drop-in for aiter's gfx950 fmha_v3_bwd kernels.

    flyasm build-set kernels/fa_bwd_set.py -o out/fa_bwd     # .co files + aiter's four manifests
    ../shared/aiter/client/drop_in_bwd.sh out/fa_bwd lookup  # aiter's own codegen + lookup accept it

aiter's host code runs up to three kernels per call (flyasm/aiter_bwd.py) and looks each up in its
own manifest; every row here names its manifest (the `manifest` cell build_set routes on):
  fmha_bwd_odo.csv         pre kernel, D = rowsum(dO∘O)      kernels/fa_bwd_odo.py    keyed dtype, hdim_v, mode
  fmha_bwd_dqdkdv.csv      dQ/dK/dV kernel                   kernels/fa_bwd.py        keyed dtype, hdims, mask,
                                                                                      atomic32, mode (+ pssk, pddv)
  fmha_bwd_dq_convert.csv  a32 post: fp32 workspace -> dQ    kernels/fa_bwd_post.py   keyed dtype, hdim_q, mode
  fmha_bwd_dq_shuffle.csv  a16 post: workspace -> dQ         kernels/fa_bwd_post.py   keyed hdim_q, mode (any dtype)
aiter's host matches dtype, head dims and mode exactly; `ts` is the rows one workgroup covers (the
host's grid is ceil(max_seqlen / ts)); bf16_cvt 3 = any rounding mode; pssk/pddv 0 (the pre and
post rows aiter has). Every kernel has its own symbol (aiter keys tables and caches by name).

The CSVs hold aiter's thirteen columns only (its codegen pastes every column into C++); the build
parameters and workgroup sizes live in each manifest's sidecar (*.flyasm.json, flyasm.dispatch).
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fa_bwd  # noqa: E402
import fa_bwd_odo  # noqa: E402
import fa_bwd_post  # noqa: E402

ODO, DQDKDV, DQ_CONVERT, DQ_SHUFFLE = ("fmha_bwd_odo.csv", "fmha_bwd_dqdkdv.csv", "fmha_bwd_dq_convert.csv",
                                       "fmha_bwd_dq_shuffle.csv")
MANIFESTS = (ODO, DQDKDV, DQ_CONVERT, DQ_SHUFFLE)
MANIFEST_COLUMNS = ("dtype", "hdim_q", "hdim_v", "mask", "atomic32", "pssk", "pddv", "mode", "bf16_cvt", "ts_qo",
                    "ts", "knl_name", "co_name")     # aiter's gfx950 fmha_bwd_*.csv header, in its order
DTYPES = ("bf16", "fp16")
MODES = (False, True)                                # batch, group

PRE = [dict(stage="pre", dtype=d, head_dim=h, group=g) for d in DTYPES for h in (128, 64) for g in MODES]
CONVERT = [dict(stage="post", kind="convert", dtype=d, head_dim=h, group=g) for d in DTYPES for h in (128, 64)
           for g in MODES]
# a16 has a post kernel for hd128 only: aiter's hd64 a16 kernels write dQ themselves
SHUFFLE = [dict(stage="post", kind="shuffle", dtype="bf16", head_dim=128, group=g) for g in MODES]
PRE_POST = PRE + CONVERT + SHUFFLE
# the dQ/dK/dV kernel: every hd128 key of aiter's gfx950 manifest (dtype x mask x atomic32 x mode)
MAIN = [dict(stage="main", dtype=d, mask=m, atomic32=a, group=g) for d in DTYPES for m in (0, 1, 2)
        for a in (True, False) for g in MODES]
VARIANTS = PRE_POST + MAIN
# A quick subset for tests (tests/test_attention_grad.py, tests/test_examples.py): bf16 top-left causal
# a32, fp16 a16, bf16 bottom-right causal a16 (causal with Sq == Sk), and the batch-mode pre and post
# kernels they need
SMALL = [dict(stage="main", dtype="bf16", mask=1, atomic32=True, group=False),
         dict(stage="main", dtype="fp16", mask=0, atomic32=False, group=False),
         dict(stage="main", dtype="bf16", mask=2, atomic32=False, group=False)] + \
    [p for p in PRE_POST if not p["group"] and p["head_dim"] == 128]


def build(stage, **params):
    if stage == "pre":
        return fa_bwd_odo.build(params["dtype"], params["head_dim"], params["group"])
    if stage == "post":
        return fa_bwd_post.build(params["kind"], params["dtype"], params["head_dim"], params["group"])
    if stage == "main":
        return fa_bwd.build(params["dtype"], params["mask"], params["atomic32"], params["group"])
    raise ValueError(f"stage is pre, main or post, not {stage!r}")


def manifest_row(stage, dtype, group, head_dim=128, kind=None, mask=0, atomic32=True):
    if stage == "main":
        # pssk 1: any lengths. pddv 0: fa_bwd takes head dim 128 exactly; with pddv 1 aiter's host would
        # send it padded head dims (hdim 96 ..) too, and its dQ atomics would land past the workspace.
        # (The pre and post kernels take padded head dims: tests/test_fa_bwd_prepost.py.)
        name = fa_bwd.build_name(dtype, mask, atomic32, group)
        return dict(dtype=dtype, hdim_q=128, hdim_v=128, mask=mask, atomic32=int(atomic32), pssk=1, pddv=0,
                    mode=int(group), bf16_cvt=3, ts_qo=fa_bwd.L.BLOCK_Q, ts=fa_bwd.L.BLOCK_KV, knl_name=name,
                    co_name=f"{name}.co", manifest=DQDKDV)
    if stage == "pre":
        name, manifest, ts = fa_bwd_odo.kernel_name(dtype, head_dim, group), ODO, fa_bwd_odo.TILE_ROWS
    else:
        name = fa_bwd_post.kernel_name(kind, dtype, head_dim, group)
        manifest, ts = (DQ_CONVERT if kind == "convert" else DQ_SHUFFLE), fa_bwd_post.TILE_ROWS
    return dict(dtype=dtype, hdim_q=head_dim, hdim_v=head_dim, mask=0, atomic32=0, pssk=0, pddv=0, mode=int(group),
                bf16_cvt=3, ts_qo=0, ts=ts, knl_name=name, co_name=f"{name}.co", manifest=manifest)
