"""Row softmax, one 256-wide float32 row per workgroup of one wave: a worked example of DPP and
permlane reductions (docs/modifiers.md walks through it).

Each lane loads 4 consecutive values (global_load_dwordx4), reduces them in-lane, then the wave
reduces across its 64 lanes in five steps, each halving the distance, so that every lane ends up
with the row's maximum (and later the row's sum):

    quad_perm:[1,0,3,2]   lane i combines with lane i^1            (DPP, within 4 lanes)
    quad_perm:[2,3,0,1]   lane i combines with lane i^2            (DPP, within 4 lanes)
    row_half_mirror       lane i with lane 7-i of its 8            (DPP: the other quad)
    row_mirror            lane i with lane 15-i of its 16          (DPP: the other 8)
    v_permlane16_swap     row 1 <-> row 0, row 3 <-> row 2          (across 16-lane rows)
    v_permlane32_swap     lanes 32..63 <-> lanes 0..31              (across the two halves)

softmax(x) = exp(x - max) / sum(exp(x - max)); exp(y) is computed as v_exp_f32(y * log2(e))
(v_exp_f32 is 2^x). Wait states: a DPP source written by the VALU just before needs 2 (s_nop 1),
a permlane source likewise, a v_exp/v_rcp result read by the next VALU needs 1 (s_nop 0); the
checker verifies each, and the build fails if one is missing.
"""
from __future__ import annotations

from flyasm import Kernel, s, v

COLS = 256
LOG2E = 1.4426950408889634

# registers: v0 lane id, v1 byte offset, X = v[4:7] the lane's 4 values, M max, S sum, T1/T2 scratch
X, M, S, T1, T2, R = v[4:7], v[8], v[9], v[10], v[11], v[12]
MAX, ADD = "v_max_f32", "v_add_f32"


def reduce_wave(k: Kernel, op: str, acc) -> None:
    """acc = op over all 64 lanes, in every lane."""
    for dpp in ({"quad_perm": [1, 0, 3, 2]}, {"quad_perm": [2, 3, 0, 1]}, {"row_half_mirror": True},
                {"row_mirror": True}):
        k.s_nop(1)                                   # acc was just written by a VALU: 2 wait states
        k.instr(op, acc, acc, acc, row_mask=0xF, bank_mask=0xF, **dpp)
    for swap in ("v_permlane16_swap_b32", "v_permlane32_swap_b32"):
        k.v_mov_b32(T1, acc)
        k.v_mov_b32(T2, acc)
        k.s_nop(1)                                   # VALU wrote the permlane's operands
        k.instr(swap, T1, T2)                        # writes both: T1 gets T2's rows and vice versa
        k.instr(op, acc, T1, T2)


def build(name: str = "row_softmax_f32") -> Kernel:
    k = Kernel(name, block=64)
    out, x = k.arg("out", "ptr"), k.arg("x", "ptr")
    with k.region("load"):
        k.s_load_dwordx2(s[4:5], k.kernarg_ptr, out.offset)
        k.s_load_dwordx2(s[6:7], k.kernarg_ptr, x.offset)
        k.s_lshl_b32(s[8], k.workgroup_id(), 10)      # row * 256 floats * 4 bytes
        k.v_lshlrev_b32(v[1], 4, k.workitem_id)       # lane * 4 floats * 4 bytes
        k.s_waitcnt(lgkmcnt=0)
        for base in (s[4:5], s[6:7]):
            k.s_add_u32(base[0], base[0], s[8])
            k.s_addc_u32(base[1], base[1], 0)
        k.global_load_dwordx4(X, v[1], s[6:7])
        k.s_waitcnt(vmcnt=0)
    with k.region("max"):
        k.v_max3_f32(M, X[0], X[1], X[2])
        k.v_max_f32(M, M, X[3])
        reduce_wave(k, MAX, M)
    with k.region("exp"):
        for i in range(4):
            k.v_sub_f32(X[i], X[i], M)
            k.v_mul_f32(X[i], LOG2E, X[i])
            k.v_exp_f32(X[i], X[i])
        k.s_nop(0)                                    # v_exp result read by a VALU: 1 wait state
        k.v_add_f32(S, X[0], X[1])
        k.v_add_f32(S, S, X[2])
        k.v_add_f32(S, S, X[3])
        reduce_wave(k, ADD, S)
    with k.region("normalise"):
        k.v_rcp_f32(R, S)
        k.s_nop(0)                                    # v_rcp result read by a VALU: 1 wait state
        for i in range(4):
            k.v_mul_f32(X[i], X[i], R)
        k.global_store_dwordx4(v[1], X, s[4:5])
        k.s_endpgm()
    return k


def reference(x):
    import torch
    return torch.softmax(x.float(), dim=-1)
