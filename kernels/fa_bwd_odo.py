"""Attention backward, pre kernel ("odo"): D = rowsum(dO ∘ O), float32, in aiter's convention.

    k = build(dtype="bf16", head_dim=128, group=False)

aiter's host code (flyasm/aiter_bwd.py ODO_ARGS, 256-byte kernargs) launches it on a grid
(ceil(max_seqlen_q / 128), nhead_q, batch) of 256-thread workgroups; D goes into `d`, laid out as
lse ([batch, nhead_q, seqlen_q] with the lse head/batch strides Hs_d, BAs_d; group mode [nhead_q,
total_q]), one float32 per row at row * Seqs_d. The kernel's head_dim is the padded D_v aiter keys it by
(64 or 128); the `head_dim` argument is hdim_q: below the kernel's, the columns past it are not part
of O (aiter's padded-head-dim calls, e.g. 96 on the hd128 kernel: the lanes past it add nothing);
above it (192 for aiter's hd192/128 calls of the hd128 kernel) O still has the kernel's D_v columns.

One workgroup = 4 waves = 128 rows, 32 per wave. A row of O (D_v elements of 2 bytes) is
`LANES_PER_ROW` lanes of 16 bytes, so one buffer_load_dwordx4 moves `64 / LANES_PER_ROW` rows:

    load      O, dO rows: LOADS x 2 buffer_load_dwordx4 (all in flight, then drained in order)
    multiply  per dword: unpack 2 + 2 halves to f32, v_pk_fma_f32 into a pair of partial sums
    reduce    partial pair -> one sum per lane, then across the row's lanes with DPP
              (quad_perm [1,0,3,2], [2,3,0,1], row_half_mirror, row_mirror for 16 lanes)
    store     the first lane of each row stores its row's D (exec = those lanes)

The reductions of the LOADS row groups run interleaved, so each DPP read is LOADS - 1 VALU
instructions after the write it depends on (the 2 wait states a DPP read needs are free).
Rows past the sequence end read 0 and their D stores are dropped (kernels/fa_bwd_rows.py).
"""
from __future__ import annotations

import sys
from pathlib import Path

from flyasm import Kernel, exec_, s, v, vcc
from flyasm.aiter_bwd import ODO_ARGS
from flyasm.isa.operands import Special
from flyasm.plan import RegisterPlan

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fa_bwd_rows as R  # noqa: E402

exec_lo, exec_hi = Special("exec_lo"), Special("exec_hi")
TILE_ROWS = 128                 # rows per workgroup (aiter's odo ts)
WAVES = 4
HEAD_DIMS = (64, 128)
DTYPES = ("bf16", "fp16")

# ---- the register plan (inclusive ranges) --------------------------------------------------------
#  region      registers     holds
#  ids         v[0:3]        workitem id, lane, column byte offset (16 * lane % LANES_PER_ROW), temp
#  voff        v[4:7]        per-lane row byte offsets of O, dO, D; temp
#  o, do       v[8:39],      LOADS x 4 dwords of O and of dO (8 loads at head dim 128)
#              v[40:71]
#  unpack      v[72:75]      one dword of O and of dO as two f32 each (pairs for v_pk_fma_f32)
#  acc         v[76:91]      LOADS partial-sum pairs, then LOADS row sums (the pair's low half)
#  sys, rows   s[0:11]       kernarg pointer, workgroup ids; tile rows and sequence bounds (fa_bwd_rows)
#  args        s[12:33]      kernel arguments
#  rsrc        s[36:47]      V#s of O, dO, D
#  misc        s[48:53]      wave, load row strides (rows per load x Seqs), saved exec
PLAN = dict(regions={
    "ids": v[0:3], "voff": v[4:7], "o": v[8:39], "do": v[40:71], "unpack": v[72:75], "acc": v[76:91],
    "sys": R.SYS, "rows": R.ROW_SGPRS, "args": s[12:33], "rsrc": s[36:47], "misc": s[48:53]}, strict=True)
LANE, COL, VT = v[1], v[2], v[3]
VOFF_O, VOFF_DO, VOFF_D = v[4], v[5], v[6]
UNPACK_O, UNPACK_DO = v[72:73], v[74:75]
RS_O, RS_DO, RS_D = s[36:39], s[40:43], s[44:47]
WAVE, STEP_O, STEP_DO, STEP_D = s[48], s[49], s[50], s[51]
SAVED_EXEC = s[52:53]
ARG_SGPR = {"ptr_o": s[12:13], "ptr_do": s[14:15], "ptr_d": s[16:17], "Hs_o": s[18], "BAs_o": s[19],
            "Seqs_o": s[20], "Hs_do": s[21], "BAs_do": s[22], "Seqs_do": s[23], "Hs_d": s[24], "BAs_d": s[25],
            "Seqs_d": s[26], "seqlen_q": s[27], "head_dim": s[32]}
GROUP_SGPR = {"ptr_qseq": s[28:29], "ptr_qseq_padded": s[30:31]}
# the DPP steps that sum a row's lanes: pairs, quads, halves of 8, halves of 16
REDUCE = ({"quad_perm": [1, 0, 3, 2]}, {"quad_perm": [2, 3, 0, 1]}, {"row_half_mirror": True},
          {"row_mirror": True})


def geometry(head_dim: int) -> tuple[int, int, int]:
    """(lanes per row, rows per load instruction, loads per wave) for D_v = head_dim."""
    lanes = head_dim * 2 // 16
    rows = 64 // lanes
    return lanes, rows, TILE_ROWS // WAVES // rows


def kernel_name(dtype="bf16", head_dim=128, group=False) -> str:
    return f"fa_bwd_odo_hd{head_dim}_{dtype}" + ("_group" if group else "")


def build(dtype: str = "bf16", head_dim: int = 128, group: bool = False) -> Kernel:
    if dtype not in DTYPES:
        raise ValueError(f"dtype is one of {DTYPES}, not {dtype!r}")
    if head_dim not in HEAD_DIMS:
        raise ValueError(f"head_dim is one of {HEAD_DIMS}, not {head_dim!r}")
    lanes, rpl, loads = geometry(head_dim)
    name = kernel_name(dtype, head_dim, group)
    plan = RegisterPlan(name, **PLAN)
    k = Kernel(name, block=64 * WAVES, plan=plan, arg_layout="aiter", workgroup_ids="xyz")
    args = {n: k.arg(n, t) for n, t in ODO_ARGS}
    rt = R.RowTiles(k, args, dict(ARG_SGPR, **(GROUP_SGPR if group else {})), group, TILE_ROWS)
    O, DO, ACC = plan.o, plan.do, plan.acc
    A = ARG_SGPR

    with k.region("prologue"):
        rt.load_args()
        rt.rows(A["seqlen_q"], "end")
        rt.rsrc(RS_O, A["ptr_o"], A["Hs_o"], A["BAs_o"], A["Seqs_o"])
        rt.rsrc(RS_DO, A["ptr_do"], A["Hs_do"], A["BAs_do"], A["Seqs_do"])
        rt.rsrc(RS_D, A["ptr_d"], A["Hs_d"], A["BAs_d"], A["Seqs_d"])
        rt.lane_rows(WAVE, LANE, COL, VT, lanes, TILE_ROWS // WAVES)   # VT: the lane's row
        # vcc: the lane's 8 columns are O's (padded head dims: columns >= head_dim add nothing)
        k.s_min_u32(A["head_dim"], A["head_dim"], head_dim)
        k.v_lshlrev_b32(COL, 3, COL)
        k.v_cmp_gt_u32(vcc, A["head_dim"], COL)
        k.v_lshlrev_b32(COL, 1, COL)                               # ... and its byte column
        k.v_mul_lo_u32(VOFF_O, VT, A["Seqs_o"])
        k.v_add_u32(VOFF_O, VOFF_O, COL)
        k.v_mul_lo_u32(VOFF_DO, VT, A["Seqs_do"])
        k.v_add_u32(VOFF_DO, VOFF_DO, COL)
        k.v_mul_lo_u32(VOFF_D, VT, A["Seqs_d"])
        for step, stride in ((STEP_O, A["Seqs_o"]), (STEP_DO, A["Seqs_do"]), (STEP_D, A["Seqs_d"])):
            k.s_mul_i32(step, stride, rpl)                       # bytes between the rows of two loads

    with k.region("load", expect={"vmem_load": 2 * loads}):
        k.s_and_saveexec_b64(SAVED_EXEC, vcc)                    # no reads past head_dim (past O's rows)
        for i in range(loads):
            k.buffer_load_dwordx4(O[4 * i:4 * i + 3], VOFF_O, RS_O, 0, offen=True)
            k.buffer_load_dwordx4(DO[4 * i:4 * i + 3], VOFF_DO, RS_DO, 0, offen=True)
            if i + 1 < loads:
                k.v_add_u32(VOFF_O, STEP_O, VOFF_O)
                k.v_add_u32(VOFF_DO, STEP_DO, VOFF_DO)
        k.s_mov_b64(exec_, SAVED_EXEC)

    with k.region("multiply", expect={"waitcnt": loads}):
        for i in range(loads):
            k.s_waitcnt(vmcnt=2 * (loads - 1 - i))                # O_i and dO_i have landed
            pair = ACC[2 * i:2 * i + 1]
            k.v_mov_b32(pair[0], 0)
            k.v_mov_b32(pair[1], 0)
            for w in range(4):
                unpack(k, dtype, UNPACK_O, O[4 * i + w])
                unpack(k, dtype, UNPACK_DO, DO[4 * i + w])
                k.v_pk_fma_f32(pair, UNPACK_O, UNPACK_DO, pair)
        for i in range(loads):
            k.v_add_f32(ACC[i], ACC[2 * i], ACC[2 * i + 1])       # row sums packed into acc[0:loads]
            k.v_cndmask_b32(ACC[i], 0, ACC[i], vcc)               # 0 from the lanes past head_dim (not loaded)

    steps = REDUCE[:lanes.bit_length() - 1]                      # log2(lanes per row) steps
    with k.region("reduce", expect={"valu": loads * len(steps)}):
        for dpp in steps:
            for i in range(loads):
                k.v_add_f32(ACC[i], ACC[i], ACC[i], row_mask=0xF, bank_mask=0xF, **dpp)

    with k.region("store", expect={"vmem_store": loads}):
        k.s_mov_b64(SAVED_EXEC, exec_)
        first = sum(1 << b for b in range(0, 32, lanes))         # the first lane of every row
        k.s_mov_b32(exec_lo, first)
        k.s_mov_b32(exec_hi, first)
        for i in range(loads):
            k.buffer_store_dword(ACC[i], VOFF_D, RS_D, 0, offen=True)
            if i + 1 < loads:
                k.v_add_u32(VOFF_D, STEP_D, VOFF_D)
        k.s_mov_b64(exec_, SAVED_EXEC)
    k.label("end")
    k.s_endpgm()
    return k


def unpack(k, dtype, dst, word):
    """dst[0], dst[1] = the low and high 16-bit halves of word as f32 (bf16: a shift and a mask)."""
    if dtype == "bf16":
        k.v_lshlrev_b32(dst[0], 16, word)
        k.v_and_b32(dst[1], 0xFFFF0000, word)
    else:
        k.v_cvt_f32_f16(dst[0], word)
        k.v_cvt_f32_f16(dst[1], word, src0_sel="WORD_1")


def reference(o, do):
    """D = rowsum(dO ∘ O) in float64 over the last axis."""
    return (o.double() * do.double()).sum(-1)
