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

Group mode (mode 1): B sequences of Sq queries and Sk keys each (what aiter's op_tests benchmark means
by a group row; the table cannot say more: varlen lengths have no column). aiter's host gets the
totals B*Sq, B*Sk and max_seqlen Sq, Sk, picks each stage's `_group` kernel and launches the same
grids as batch mode (z = B sequences); the group kernels find their sequence through ptr_qseq /
ptr_kseq, so the recorded call passes its one sequence's starts [0, S0], and the real call its B+1.
../shared's sample holds only bwd_hd128_dq_shuffle_group.co of aiter's group kernels; a group kernel
no code object directory holds (--co-dir may add aiter's whole hsa/gfx950/fmha_v3_bwd) is priced as
aiter's batch-mode launch of that stage, and the call says so ("priced", which model_accuracy prints):
in aiter e4048607a535 each hd128 bf16 group kernel is its batch kernel with instructions changed only
in its prologue (llvm-objdump, labels normalised: dq/dk/dv 33-35 removed and 44-47 added, all within
the first 310 of 5000-6000 lines; odo, dq_convert, dq_shuffle 4-10 removed and 17-21 added within
their first 80): load the sequence's start and length, offset by the start instead of the batch
stride, exit when the workgroup's tile lies past the sequence's end. The loops are the same code.
Priced with aiter's own group kernels instead (--co-dir), b4 h32/8 s1024/s4096 a16/a32 with and
without causal came out within 0.1% of the stand-ins' call (odo +1.9%, dq_convert +2.0%, dq/dk/dv
+0.1% in cycles).

Placement: with placement=True every launch, batch or group, carries the real call (its buffers, the
group starts among them) as its probe, and perf.model places its reads in L2/MALL/HBM, as it does
for the forward's rows. Off by default: the backward's shipped calibration has none (model_accuracy.md,
"what the model still ignores"), and it moves the short memory-bound launches far (b4 h32/8 s1024:
odo 11903 -> 34879 cycles, dq_convert 19628 -> 51824), so a group row probed beside an unprobed
batch row of the same work would differ by the placement, not by its mode.
"""
from __future__ import annotations

import numpy as np

import aiter_launch as AL

from flyasm.perf.capture import HOST_BASE

TRACE_SEQLEN = 1024
TILE_K = 256              # dq/dk/dv key tile of hd128 (drop_in_bwd's README: ts 256)


def _call(row: dict, B: int, Hq: int, Hk: int, Sq: int, Sk: int, set_dir=None, mode=None, **ptrs) -> dict:
    """aiter's launches for the row's call at this size (mode: the row's unless given). Group mode is B
    sequences of Sq queries and Sk keys each, as aiter's op_tests benchmark runs a group row: the host
    gets the totals B*Sq, B*Sk as seqlen_q/k and Sq, Sk as max_seqlen_q/k (drop_in_bwd.sh pack)."""
    group = int(row.get("mode") or 0) if mode is None else mode
    sizes = dict(seqlen_q=B * Sq, seqlen_k=B * Sk, max_seqlen_q=Sq, max_seqlen_k=Sk) if group else \
        dict(seqlen_q=Sq, seqlen_k=Sk)
    return AL.fmha_bwd_pack(set_dir or AL.BWD_SET, dtype=row.get("dtype") or "bf16", hdim_q=int(row["hdim_q"]),
                            hdim_v=int(row["hdim_v"]), batch=B, nhead_q=Hq, nhead_k=Hk, mask_type=int(row["mask"]),
                            atomic32=int(row["atomic32"]), bf16_cvt=int(row.get("bf16_cvt") or 0), group=group,
                            **sizes, **ptrs)


def _buffers(group: int, B: int, Hq: int, Hk: int, Sq: int, Sk: int, dq: int, dv: int, esz: int = 2) -> dict:
    """A call's tensors as byte counts, named as drop_in_bwd.sh pack names their pointers: q, o, do, dq
    [B Sq, Hq, d], k, v [B Sk, Hk, d], dk, dv per query head, lse and d [B, Hq, Sq] f32 (group mode: the
    same bytes as [T, H, d] and [Hq, T]), and in group mode the sequence starts the kernels read."""
    bufs: dict = {n: B * Sq * Hq * dq * esz for n in ("q", "o", "do", "dq")}
    bufs.update({n: B * Sk * h * d * esz for n, h, d in (("k", Hk, dq), ("v", Hk, dv), ("dk", Hq, dq), ("dv", Hq, dv))})
    bufs.update(lse=B * Hq * Sq * 4, d=B * Hq * Sq * 4)
    if group:
        bufs.update(AL.seqstarts(B, Sq, Sk))
    return bufs


def _code_object(ln, idx: dict | None):
    """The code object holding launch ln's kernel: the set's own file, else one an index names
    (measured.co_index: ../shared and --co-dir), else None."""
    if ln.co.exists():
        return ln.co
    hit = (idx or {}).get(ln.knl_name)
    return hit[0] if hit is not None else None


def _launches(row: dict, group: int, idx: dict | None, set_dir, placement: bool) -> list[dict]:
    """perf.predict's inputs for each launch of the row's call in batch (group 0) or group mode (1),
    recorded at batch 1, one head, seqlen min(S, TRACE_SEQLEN); "co" is None where no code object
    holds the kernel aiter launches. Group mode: the recorded call's buffers hold its one sequence's
    starts. placement: each launch carries the real call as its probe (group mode: its B+1 starts,
    which the group kernels address by)."""
    B, Hq, Hk = int(row["batch"]), int(row["nhead_q"]), int(row["nhead_k"])
    Sq, Sk, dq, dv = int(row["seqlen_q"]), int(row["seqlen_k"]), int(row["hdim_q"]), int(row["hdim_v"])
    esz = 2
    S0q, S0k = min(Sq, TRACE_SEQLEN), min(Sk, TRACE_SEQLEN)
    full = _call(row, B, Hq, Hk, Sq, Sk, set_dir, group)
    small = _call(row, 1, 1, 1, S0q, S0k, set_dir, group, workspace=HOST_BASE)
    ws = small["workspace"]
    bufs = _buffers(group, 1, 1, 1, S0q, S0k, dq, dv, esz)
    if ws:                       # aiter zero-fills the dq accumulator
        bufs["workspace"] = np.zeros(ws["bytes"], np.uint8)
    probe_bufs = _buffers(group, B, Hq, Hk, Sq, Sk, dq, dv, esz)
    if full["workspace"]:
        probe_bufs["workspace"] = full["workspace"]["bytes"]

    # which buffers each launch points at (a launch refuses buffers none of its pointers names)
    tag = {n: (k + 1) << 32 for k, n in enumerate(bufs)}
    uses = [{n for n, a in tag.items() if a in ln.pointers().values()}
            for ln in _call(row, 1, 1, 1, S0q, S0k, set_dir, group, **tag)["launches"]]

    def kernarg(i, *size):
        return lambda a: _call(row, *size, set_dir, group, **a)["launches"][i].kernarg
    acc = (4 if int(row["atomic32"]) else esz) * B * Hq * Sq * dq        # dq accumulator, at least once
    dram = {"pre": B * Hq * Sq * (2 * dv * esz + 4),
            "dqdkdv": B * (Hq * Sq * (dq + dv) * esz + Hk * Sk * (dq + dv) * esz + 8 * Hq * Sq
                           + Hq * Sk * (dq + dv) * esz) + acc,
            "post": acc + B * Hq * Sq * dq * esz}
    if int(row["mask"]):
        loop = (Sq / TILE_K + 1) / (S0q / TILE_K + 1)
    else:
        loop = Sq / S0q
    out = []
    for i, (ln, ls) in enumerate(zip(full["launches"], small["launches"])):
        if (ln.stage, ln.knl_name) != (ls.stage, ls.knl_name):
            raise LookupError(f"aiter launches {ls.knl_name} at the recorded size but {ln.knl_name} at the row's")
        co = _code_object(ln, idx)
        L = dict(co=co, co_name=ln.co.name, kernel=ln.knl_name, grid=ln.grid, block=ln.block[0], trace_grid=ls.grid,
                 kernarg=kernarg(i, 1, 1, 1, S0q, S0k), buffers={n: bufs[n] for n in bufs if n in uses[i]},
                 loop_scale=loop if ln.stage == "dqdkdv" else 1.0, dram_bytes=dram[ln.stage], stage=ln.stage)
        if placement:
            L["probe"] = {"kernarg": kernarg(i, B, Hq, Hk, Sq, Sk),
                          "buffers": {n: probe_bufs[n] for n in probe_bufs if n in uses[i]}}
        out.append(L)
    return out


def row_call(row: dict, idx: dict | None = None, set_dir=None, placement: bool = False) -> dict:
    """{"launches": [perf.predict inputs per launch, in order], "flops", "group", "shape" (the row's
    problem without its accumulation or batch/group mode: a16 and a32, batch and group rows of one
    shape share it, so a held-out half never holds a row whose twin trained the other)} for one measured
    backward row, batch or group mode, launched from aiter's set (../shared) or set_dir (ours: the same
    host code, packing and grids over that set's manifests); a kernel not in the set is looked up in idx
    (measured.co_index: --co-dir). A group-mode kernel found nowhere is priced as the batch-mode call's
    launch of the same stage (module docstring: why that stands in), and the call says so ("priced").
    placement: each launch carries its real launch as its probe (module docstring). Raises LookupError
    when aiter would launch nothing for the row, or a kernel it launches is nowhere."""
    group = int(row.get("mode") or 0)
    launches = _launches(row, group, idx, set_dir, placement)
    notes = []
    if group and any(L["co"] is None for L in launches):
        batch = _launches(row, 0, idx, set_dir, placement)
        for i, L in enumerate(launches):
            if L["co"] is None and i < len(batch) and batch[i]["co"] is not None and batch[i]["stage"] == L["stage"]:
                notes.append(f"{batch[i]['co_name']} for {L['co_name']}")
                launches[i] = batch[i]
    for L in launches:
        if L["co"] is None:
            raise LookupError(f"aiter launches {L['kernel']} from {L['co_name']}, which no code object directory "
                              f"holds (give aiter's hsa/gfx950/fmha_v3_bwd with --co-dir)")
        L["co"] = L["co"].read_bytes()
    if notes:            # model_accuracy prints it beside the row
        launches[0].update(build="group mode with batch kernels",
                           priced=f"aiter's group-mode call, batch kernels standing in: {'; '.join(notes)}")
    B, Hq, Hk = int(row["batch"]), int(row["nhead_q"]), int(row["nhead_k"])
    Sq, Sk, dq, dv = int(row["seqlen_q"]), int(row["seqlen_k"]), int(row["hdim_q"]), int(row["hdim_v"])
    causal = int(row["mask"]) != 0
    flops = 2.0 * B * Hq * Sq * Sk * (3 * dq + 2 * dv) * (0.5 if causal else 1.0)
    shape = f"bwd b{B} h{Hq}/{Hk} s{Sq}/{Sk} d{dq}/{dv} mask{int(row['mask'])} {row.get('dtype') or 'bf16'}"
    return dict(launches=launches, flops=flops, group=f"s{Sq}", shape=shape)
