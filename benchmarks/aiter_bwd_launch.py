"""aiter's attention backward for the timing model: a measured row of
../shared/aiter/measured_bwd/fmha_v3_bwd_mi355x.csv -> the launches of the call, each in the shape of
aiter_launch.row_launch (what perf.predict needs).

A row's time is the whole call that `drop_in_bwd.sh pack` prints: the pre kernel (odo: D =
rowsum(dO*O)), the dq/dk/dv kernel and the post kernel (dq_shuffle for a16, dq_convert for a32), one
dispatch each. The launches, grids and kernarg bytes are aiter's own (aiter_launch.fmha_bwd_pack: its
host code, built once). Each launch is recorded as the forward's are: batch 1, one head (GQA ratio
1: the dq/dk/dv kernel runs per query head, the ratio only indexes K/V), seqlen min(S, 1024); the
samples along grid x stand for the real grid's x at the same relative position.
  * odo: grid (ceil(Sq/128), Hq, B), 128 rows of O and dO per workgroup, no loop: scale 1.
  * dq/dk/dv: grid (ceil(Sk/256), Hq, B); a workgroup keeps its 256 keys and loops over the queries:
    scale Sq / S0q. Causal launches half the x tiles ((gdx+1)/2): a workgroup takes key tile j and
    its mirror gdx-1-j, whose query loops total about Sq + 256 rows whatever j (as the forward's
    paired causal tiles): scale (Sq/256 + 1) / (S0q/256 + 1).
  * dq_shuffle / dq_convert: grid (ceil(Sq/64), Hq, B), 64 rows per workgroup, no loop: scale 1.
FLOPs (the table's convention): 2 B Hq Sq Sk (3 d_q + 2 d_v), halved when causal.
"""
from __future__ import annotations

import numpy as np

import aiter_launch as AL

from flyasm.perf.capture import HOST_BASE

TRACE_SEQLEN = 1024
TILE_K = 256              # dq/dk/dv key tile of hd128 (drop_in_bwd's README: ts 256)


def _call(row: dict, B: int, Hq: int, Hk: int, Sq: int, Sk: int, set_dir=None, **ptrs) -> dict:
    return AL.fmha_bwd_pack(set_dir or AL.BWD_SET, dtype=row.get("dtype") or "bf16", hdim_q=int(row["hdim_q"]),
                            hdim_v=int(row["hdim_v"]),
                            batch=B, nhead_q=Hq, nhead_k=Hk, seqlen_q=Sq, seqlen_k=Sk, mask_type=int(row["mask"]),
                            atomic32=int(row["atomic32"]), bf16_cvt=int(row.get("bf16_cvt") or 0),
                            group=int(row.get("mode") or 0), **ptrs)


def row_call(row: dict, idx: dict | None = None, set_dir=None) -> dict:
    """{"launches": [perf.predict inputs per launch, in order], "flops", "group", "shape" (the row's
    problem without its accumulation mode: a16 and a32 of one shape share it)} for one measured
    backward row (batch mode), launched from aiter's set (../shared) or set_dir (ours: the same host
    code, packing and grids over that set's manifests). Raises LookupError when aiter would launch
    nothing for it."""
    if int(row.get("mode") or 0):
        raise LookupError("group-mode backward rows are not priced yet (the recorded call is batch mode)")
    B, Hq, Hk = int(row["batch"]), int(row["nhead_q"]), int(row["nhead_k"])
    Sq, Sk, dq, dv = int(row["seqlen_q"]), int(row["seqlen_k"]), int(row["hdim_q"]), int(row["hdim_v"])
    causal = int(row["mask"]) != 0
    esz = 2
    S0q, S0k = min(Sq, TRACE_SEQLEN), min(Sk, TRACE_SEQLEN)
    full = _call(row, B, Hq, Hk, Sq, Sk, set_dir)
    small = _call(row, 1, 1, 1, S0q, S0k, set_dir, workspace=HOST_BASE)
    ws = small["workspace"]
    bufs: dict = {n: S0q * dq * esz for n in ("q", "o", "do", "dq")}
    bufs.update({n: S0k * d * esz for n, d in (("k", dq), ("v", dv), ("dk", dq), ("dv", dv))})
    bufs.update(lse=S0q * 4, d=S0q * 4)
    if ws:                       # aiter zero-fills the dq accumulator
        bufs["workspace"] = np.zeros(ws["bytes"], np.uint8)

    # which buffers each launch points at (a launch refuses buffers none of its pointers names)
    probe = {n: (k + 1) << 32 for k, n in enumerate(bufs)}
    uses = [{n for n, a in probe.items() if a in ln.pointers().values()}
            for ln in _call(row, 1, 1, 1, S0q, S0k, set_dir, **probe)["launches"]]

    def kernarg(i):
        return lambda a: _call(row, 1, 1, 1, S0q, S0k, set_dir, **a)["launches"][i].kernarg
    acc = (4 if int(row["atomic32"]) else esz) * B * Hq * Sq * dq        # dq accumulator, at least once
    dram = {"pre": B * Hq * Sq * (2 * dv * esz + 4),
            "dqdkdv": B * (Hq * Sq * (dq + dv) * esz + Hk * Sk * (dq + dv) * esz + 8 * Hq * Sq
                           + Hq * Sk * (dq + dv) * esz) + acc,
            "post": acc + B * Hq * Sq * dq * esz}
    if causal:
        loop = (Sq / TILE_K + 1) / (S0q / TILE_K + 1)
    else:
        loop = Sq / S0q
    launches = []
    for i, (ln, ls) in enumerate(zip(full["launches"], small["launches"])):
        if (ln.stage, ln.knl_name) != (ls.stage, ls.knl_name):
            raise LookupError(f"aiter launches {ls.knl_name} at the recorded size but {ln.knl_name} at the row's")
        launches.append(dict(co=ln.co.read_bytes(), kernel=ln.knl_name, grid=ln.grid, block=ln.block[0],
                             trace_grid=ls.grid, kernarg=kernarg(i), buffers={n: bufs[n] for n in bufs if n in uses[i]},
                             loop_scale=loop if ln.stage == "dqdkdv" else 1.0, dram_bytes=dram[ln.stage],
                             stage=ln.stage))
    flops = 2.0 * B * Hq * Sq * Sk * (3 * dq + 2 * dv) * (0.5 if causal else 1.0)
    shape = f"bwd b{B} h{Hq}/{Hk} s{Sq}/{Sk} d{dq}/{dv} mask{int(row['mask'])} {row.get('dtype') or 'bf16'}"
    return dict(launches=launches, flops=flops, group=f"s{Sq}", shape=shape)
