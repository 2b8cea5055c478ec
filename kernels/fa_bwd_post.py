"""Attention backward, post kernels: the dQ accumulator -> dQ, in aiter's convention.

    k = build("convert", dtype="bf16", head_dim=128, group=False)   # a32: fp32 workspace -> dQ
    k = build("shuffle", head_dim=128, group=False)                 # a16: workspace in q's dtype -> dQ

aiter's host code (flyasm/aiter_bwd.py POST_ARGS, 192-byte kernargs) launches one of them after the
dQ/dK/dV kernel, on a grid (ceil(max_seqlen_q / 64), nhead_q, batch) of 256-thread workgroups:
  * dq_convert (atomic32 = 1, one kernel per dtype): the workspace is float32 [batch, nhead_q,
    seqlen_q, hdim_q] (group mode: [nhead_q, total_q, hdim_q], batch stride 0, rows at the
    sequence's physical start); each element is rounded to q's dtype (round to nearest even).
  * dq_shuffle (atomic32 = 0): the workspace is in q's dtype, [batch, nhead_q, ceil16(max_seqlen_q),
    head dim] with rows counted from each sequence's start in both modes, elements in natural
    row-major order (the team's layout for our a16 dQ/dK/dV kernels; aiter's own a16 kernels keep
    16-row blocks of MFMA fragments there instead). A copy: one kernel serves bf16 and fp16, as
    aiter's manifest has only bf16 dq_shuffle rows and its lookup uses them for fp16 too.
dQ is written with the dq strides (Hs_dq, BAs_dq, Seqs_dq; group mode rows at the physical start), its
`head_dim` (hdim_q) columns only: aiter sends padded head dims (e.g. 96) to the hd128 kernels.

One workgroup = 4 waves = 64 rows, 16 per wave. A dQ row (D elements of 2 bytes) is
`LANES_PER_ROW` lanes of 16 bytes, so one store moves `64 / LANES_PER_ROW` rows; a lane reads the
same 8 elements of the workspace: 32 bytes (two dwordx4) for fp32, 16 for the a16 copy.

    load      every input row of the wave's share in flight at once
    convert   per output dword: v_cvt_pk_bf16_f32 / v_cvt_pk_f16_f32 of two fp32 (convert only)
    store     buffer_store_dwordx4, rows past the sequence end dropped by the range check
"""
from __future__ import annotations

import sys
from pathlib import Path

from flyasm import Kernel, exec_, s, v, vcc
from flyasm.aiter_bwd import POST_ARGS
from flyasm.plan import RegisterPlan

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fa_bwd_rows as R  # noqa: E402

TILE_ROWS = 64                  # rows per workgroup (aiter's post-kernel ts)
WAVES = 4
HEAD_DIMS = (64, 128)
DTYPES = ("bf16", "fp16")
KINDS = ("convert", "shuffle")
CVT = {"bf16": "v_cvt_pk_bf16_f32", "fp16": "v_cvt_pk_f16_f32"}

# ---- the register plan (inclusive ranges) --------------------------------------------------------
#  region      registers     holds
#  ids         v[0:3]        workitem id, lane, column (lane % LANES_PER_ROW), temp
#  voff        v[4:5]        per-lane byte offsets into the workspace and dQ
#  acc         v[8:39]       the lane's workspace elements: LOADS x 8 fp32 (convert) / 4 dwords (copy)
#  out         v[40:55]      LOADS x 4 dwords of dQ (convert; the copy stores acc itself)
#  sys, rows   s[0:11]       kernarg pointer, workgroup ids; tile rows and sequence bounds (fa_bwd_rows)
#  args        s[12:29]      kernel arguments
#  rsrc        s[32:39]      V#s of the workspace and dQ
#  misc        s[40:42]      wave, row steps of one store (workspace, dQ)
PLAN = dict(regions={
    "ids": v[0:3], "voff": v[4:5], "acc": v[8:39], "out": v[40:55],
    "sys": R.SYS, "rows": R.ROW_SGPRS, "args": s[12:29], "rsrc": s[32:39], "misc": s[40:42]}, strict=True)
LANE, COL, VT = v[1], v[2], v[3]
VOFF_ACC, VOFF_DQ = v[4], v[5]
VT_COL = VOFF_DQ                 # the lane's first column, before VOFF_DQ is set
RS_ACC, RS_DQ = s[32:35], s[36:39]
WAVE, STEP_ACC, STEP_DQ = s[40], s[41], s[42]
ARG_SGPR = {"ptr_dq_acc": s[12:13], "ptr_dq": s[14:15], "Hs_dq_acc": s[16], "BAs_dq_acc": s[17],
            "Seqs_dq_acc": s[18], "Hs_dq": s[19], "BAs_dq": s[20], "Seqs_dq": s[21], "seqlen_q": s[22],
            "head_dim": s[23]}
GROUP_SGPR = {"ptr_qseq": s[24:25], "ptr_qseq_padded": s[26:27]}


def geometry(head_dim: int) -> tuple[int, int, int]:
    """(lanes per dQ row, rows per store instruction, stores per wave) for head_dim."""
    lanes = head_dim * 2 // 16
    rows = 64 // lanes
    return lanes, rows, TILE_ROWS // WAVES // rows


def kernel_name(kind="convert", dtype="bf16", head_dim=128, group=False) -> str:
    what = f"dq_convert_{dtype}" if kind == "convert" else "dq_shuffle"
    return f"fa_bwd_hd{head_dim}_{what}" + ("_group" if group else "")


def build(kind: str = "convert", dtype: str = "bf16", head_dim: int = 128, group: bool = False) -> Kernel:
    if kind not in KINDS:
        raise ValueError(f"kind is one of {KINDS}, not {kind!r}")
    if dtype not in DTYPES:
        raise ValueError(f"dtype is one of {DTYPES}, not {dtype!r}")
    if head_dim not in HEAD_DIMS:
        raise ValueError(f"head_dim is one of {HEAD_DIMS}, not {head_dim!r}")
    convert = kind == "convert"
    lanes, rpl, stores = geometry(head_dim)
    name = kernel_name(kind, dtype, head_dim, group)
    plan = RegisterPlan(name, **PLAN)
    k = Kernel(name, block=64 * WAVES, plan=plan, arg_layout="aiter", workgroup_ids="xyz")
    args = {n: k.arg(n, t) for n, t in POST_ARGS}
    rt = R.RowTiles(k, args, dict(ARG_SGPR, **(GROUP_SGPR if group else {})), group, TILE_ROWS)
    ACC, OUT = plan.acc, plan.out
    A = ARG_SGPR
    per_store = 2 if convert else 1                              # workspace dwordx4 per dQ dwordx4

    with k.region("prologue"):
        rt.load_args()
        rt.rows(A["seqlen_q"], "end")
        # a32 in group mode: rows of the packed [nhead, total_q] workspace; a16: rows of b's slice
        ws_row = None if convert else R.TILE_ROW
        rt.rsrc(RS_ACC, A["ptr_dq_acc"], A["Hs_dq_acc"], A["BAs_dq_acc"], A["Seqs_dq_acc"], first_row=ws_row)
        rt.rsrc(RS_DQ, A["ptr_dq"], A["Hs_dq"], A["BAs_dq"], A["Seqs_dq"])
        rt.lane_rows(WAVE, LANE, COL, VT, lanes, TILE_ROWS // WAVES)   # VT: the lane's row
        # only the lanes whose 8 columns are dQ's run on (padded head dims: no columns past head_dim)
        k.v_lshlrev_b32(VT_COL, 3, COL)
        k.v_cmp_gt_u32(vcc, A["head_dim"], VT_COL)
        k.s_and_b64(exec_, exec_, vcc)
        k.v_mul_lo_u32(VOFF_DQ, VT, A["Seqs_dq"])
        k.v_mul_lo_u32(VOFF_ACC, VT, A["Seqs_dq_acc"])
        k.v_lshlrev_b32(VT, 4, COL)                               # 8 elements of 2 bytes
        k.v_add_u32(VOFF_DQ, VOFF_DQ, VT)
        if convert:
            k.v_lshlrev_b32(VT, 5, COL)                           # ... of 4 bytes in the workspace
        k.v_add_u32(VOFF_ACC, VOFF_ACC, VT)
        k.s_mul_i32(STEP_ACC, A["Seqs_dq_acc"], rpl)
        k.s_mul_i32(STEP_DQ, A["Seqs_dq"], rpl)

    with k.region("load", expect={"vmem_load": per_store * stores}):
        for i in range(stores):
            for h in range(per_store):
                r = 4 * (per_store * i + h)
                k.buffer_load_dwordx4(ACC[r:r + 3], VOFF_ACC, RS_ACC, 0, offen=True, offset=16 * h)
            if i + 1 < stores:
                k.v_add_u32(VOFF_ACC, STEP_ACC, VOFF_ACC)

    with k.region("store", expect={"vmem_store": stores, "waitcnt": stores}):
        for i in range(stores):
            # this row group's loads have landed (the i stores issued since count too: vmcnt is in order)
            k.s_waitcnt(vmcnt=per_store * (stores - 1 - i) + i)
            if convert:
                src = OUT[4 * i:4 * i + 3]
                for w in range(4):
                    k.instr(CVT[dtype], OUT[4 * i + w], ACC[8 * i + 2 * w], ACC[8 * i + 2 * w + 1])
            else:
                src = ACC[4 * i:4 * i + 3]
            k.buffer_store_dwordx4(src, VOFF_DQ, RS_DQ, 0, offen=True)
            if i + 1 < stores:
                k.v_add_u32(VOFF_DQ, STEP_DQ, VOFF_DQ)
    k.label("end")
    k.s_endpgm()
    return k
