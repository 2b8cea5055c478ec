"""Workgroup -> work mapping shared by the attention kernels (kernels/fa_fwd.py, kernels/fa_bwd.py): the
tile a workgroup takes under aiter's causal pairing, and a wave-uniform integer division (the GQA
K/V head of a query head at run time)."""
from __future__ import annotations


def select_tile(k, tile, n, w, pass_, t, end_label, check_single=True):
    """tile = the tile of this pass, or a jump to end_label. One pass (pass_ None): tile w (when
    check_single, a jump unless w < n: the grid covers the longest sequence). aiter's causal pairing
    (tg_div = 2, grid ceil(n/2); pass_ the SGPR counting 0, 1): tile w, then tile n-1-w, the second
    only when n-1-w > w (the triangle's long and short tiles together). t: two scratch SGPRs."""
    if pass_ is None:
        k.s_mov_b32(tile, w)
        if check_single:
            k.s_cmp_ge_u32(tile, n)
            k.s_cbranch_scc1(k.L(end_label))
        return
    k.s_sub_u32(tile, n, 1)
    k.s_sub_u32(tile, tile, w)                           # tail tile n-1-w
    k.s_lshl_b32(t[1], w, 1)
    k.s_add_u32(t[0], t[1], 1)
    k.s_cmp_eq_u32(pass_, 0)
    k.s_cselect_b32(tile, w, tile)
    k.s_cselect_b32(t[0], t[1], t[0])                    # pass 0: valid iff 2w < n; pass 1: 2w+1 < n
    k.s_cmp_ge_u32(t[0], n)
    k.s_cbranch_scc1(k.L(end_label))


def divmod_uniform(k, quot, rem, num, den, vt, t):
    """quot, rem = divmod(num, den) of wave-uniform values below 2^24 (den > 0): the float quotient
    (exact to +-1), then one integer correction each way; vt: two scratch VGPRs, t: two SGPRs."""
    k.v_cvt_f32_u32(vt[0], den)
    k.v_rcp_f32(vt[0], vt[0])
    k.v_cvt_f32_u32(vt[1], num)
    k.v_mul_f32(vt[1], vt[1], vt[0])
    k.v_cvt_u32_f32(vt[1], vt[1])
    k.s_nop(0)                                                      # VALU write -> readfirstlane
    k.v_readfirstlane_b32(quot, vt[1])
    k.s_mul_i32(rem, quot, den)
    k.s_sub_u32(rem, num, rem)                                      # in [-den, 2 den)
    for cmp, step in ((k.s_cmp_lt_i32, -1), (k.s_cmp_ge_i32, 1)):
        k.s_add_i32(t[0], quot, step)
        (k.s_add_i32 if step < 0 else k.s_sub_i32)(t[1], rem, den)
        cmp(rem, 0 if step < 0 else den)
        k.s_cselect_b32(quot, t[0], quot)
        k.s_cselect_b32(rem, t[1], rem)
