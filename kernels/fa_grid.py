"""Workgroup -> work mapping shared by the attention kernels (kernels/fa_fwd.py, kernels/fa_bwd.py): the
tile a workgroup takes under aiter's causal pairing and the loop over its two tiles, the XCD map
(whole heads per XCD), a wave-uniform integer division (the GQA K/V head of a query head at run
time), the tile count, and aiter's addressing: a group-mode sequence's bounds, where a (batch, head)'s LSE rows start."""
from __future__ import annotations


def tile_count(k, n, rows, block, pairs=False):
    """n = ceil(rows / block) tiles (block a power of two); pairs: halved rounding up, the workgroups
    along x of aiter's causal grid (tg_div = 2: one per tile pair)."""
    k.s_add_u32(n, rows, block - 1)
    k.s_lshr_b32(n, n, block.bit_length() - 1)
    if pairs:
        k.s_add_u32(n, n, 1)
        k.s_lshr_b32(n, n, 1)


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


def xcd_remap(k, x, y, tiles, heads, t, vt, end_label):
    """Batch mode, grid (X tiles or tile pairs in SGPR `tiles`, `heads`, batch): the hardware dispatches
    workgroups in order (x fastest) round-robin over the 8 XCDs, so workgroup L = x + X*y of a batch
    runs on XCD L % 8. Remapped, it computes work item (L % 8) * (X*heads / 8) + L // 8 (tile
    fastest): x, y become that item's tile and head. Each XCD gets a contiguous eighth of the items
    (whole heads when 8 divides the head count), and the ~32 workgroups an XCD runs at a time are one
    head's tiles, reading that head's shared streams in step (its L2 holds them once, not once per
    XCD). When 8 does not divide X*heads the map is the identity (a jump to end_label, emitted here).
    xcd_item is the same map for the timing model. t: three scratch SGPRs, vt: two scratch VGPRs."""
    k.s_mul_i32(t[0], tiles, heads)                                 # workgroups of a batch
    k.s_and_b32(t[1], t[0], 7)
    k.s_cbranch_scc1(k.L(end_label))
    k.s_mul_i32(t[1], tiles, y)
    k.s_add_u32(t[1], t[1], x)                                      # L
    k.s_lshr_b32(t[0], t[0], 3)
    k.s_and_b32(t[2], t[1], 7)
    k.s_mul_i32(t[2], t[2], t[0])
    k.s_lshr_b32(t[1], t[1], 3)
    k.s_add_u32(t[1], t[1], t[2])                                   # work item
    divmod_uniform(k, y, x, t[1], tiles, vt, (t[0], t[2]))          # head, tile
    k.label(end_label)


def xcd_item(grid, x, y, z):
    """The work item (tile or tile pair, head, batch) workgroup (x, y, z) computes in a kernel that
    runs xcd_remap, for grid (X, heads, batch); arrays in, arrays out (perf.predict's wg_map)."""
    import numpy as np
    X, H = int(grid[0]), int(grid[1])
    x, y, z = (np.asarray(a) for a in (x, y, z))
    if (X * H) % 8:
        return x, y, z
    lin = x + X * y
    item = (lin % 8) * (X * H // 8) + lin // 8
    return item % X, item // X, z


def xcd_remap_group(k, head, tile, tiles, heads, t, vt, end_label):
    """Group mode, aiter's grid (heads, batch, Z tiles or tile pairs in SGPR `tiles`): workgroup L = x +
    heads*(y + batch*z) runs on XCD L % 8, which is x % 8 for any batch count when 8 divides `heads`, so
    XCD c gets the heads x = c (mod 8) of every batch, tile-slowest: unmapped, the ~32 workgroups an XCD
    runs at a time are 32 different (batch, head) streams, and a head's next tile comes heads*batch
    workgroups later, after the MALL has dropped its K and V. Remapped within each batch (the batch
    count is not an argument): u = x // 8 and z make m = u + (heads/8)*z, and the workgroup computes tile
    m % Z of head (x % 8)*(heads/8) + m // Z, so consecutive workgroups on an XCD are one head's
    consecutive tiles reading its K and V in step, and an XCD's heads are a contiguous eighth (GQA's
    query heads of one K/V head together, as batch mode's map). Same XCD, a bijection of each batch's
    (x, z); the identity when heads % 8 (a jump to end_label, emitted here). xcd_item_group is the same map for the timing model.
    t: three scratch SGPRs, vt: two scratch VGPRs."""
    k.s_and_b32(t[0], heads, 7)
    k.s_cbranch_scc1(k.L(end_label))
    k.s_lshr_b32(t[1], heads, 3)
    k.s_mul_i32(t[1], t[1], tile)
    k.s_lshr_b32(t[0], head, 3)
    k.s_add_u32(t[1], t[1], t[0])                                   # m
    k.s_and_b32(t[2], head, 7)                                      # the XCD
    k.s_lshr_b32(t[0], heads, 3)
    k.s_mul_i32(t[2], t[2], t[0])                                   # its first head
    divmod_uniform(k, head, tile, t[1], tiles, vt, (t[0], t[1]))    # m is read before the scratch is
    k.s_add_u32(head, head, t[2])
    k.label(end_label)


def xcd_item_group(grid, x, y, z):
    """The work item (head, batch, tile or tile pair) workgroup (x, y, z) computes in a kernel that runs
    xcd_remap_group, for aiter's group-mode grid (heads, batch, Z); arrays in, arrays out (perf.predict's
    wg_map)."""
    import numpy as np
    H, Z = int(grid[0]), int(grid[2])
    x, y, z = (np.asarray(a) for a in (x, y, z))
    if H % 8:
        return x, y, z
    m = x // 8 + (H // 8) * z
    return (x % 8) * (H // 8) + m // Z, y, m % Z


def pass_loop(k, pass_, passes, body, end_label=True, drain=False):
    """body() once, or twice under aiter's causal pairing (passes 2; pass_ the SGPR counting 0, 1):
    body's select_tile jumps to .Lpass_end (emitted when end_label) for a tile it does not take. The
    second pass reuses LDS and registers, after a barrier every wave reaches past its last LDS read
    (drain: and its memory loads landed, for a kernel whose next pass's DMAs could overtake them)."""
    if passes > 1:
        k.s_mov_b32(pass_, 0)
        k.label(".Lpass")
    body()
    if end_label or passes > 1:
        k.label(".Lpass_end")
    if passes > 1:
        k.s_add_u32(pass_, pass_, 1)
        k.s_cmp_lt_u32(pass_, 2)
        k.s_cbranch_scc0(k.L(".Lend"))
        if drain:
            k.s_waitcnt(vmcnt=0)
        k.s_barrier()
        k.s_branch(k.L(".Lpass"))
        k.label(".Lend")


def lse_terms(k, group, batch, head, qstart, nhead_q, head_stride, t):
    """The terms (a, b) of sum a*b, the byte offset of a (batch, head)'s float32 LSE rows in aiter's
    layout: batch mode [B, Hq, Sq] with head stride head_stride (bytes) and batch stride nhead_q *
    head_stride (aiter passes none); group mode [Hq, total_q] from the sequence's physical first row
    qstart. t: a scratch SGPR the terms use."""
    if group:
        k.s_lshl_b32(t, qstart, 2)
        return [(head, head_stride), (t, 1)]
    k.s_mul_i32(t, batch, nhead_q)
    k.s_add_u32(t, t, head)
    return [(t, head_stride)]


def sequence_bounds(k, batch, seqs, pads, starts, lengths, pairs, t):
    """Group mode (aiter's varlen arguments): for q then k, lengths = seq[b+1] - seq[b] from the
    cumulative starts seqs (pointers), starts = pad[b], the physical first row, from the padded starts
    pads (pointer SGPR pairs, overwritten by seqs where null: aiter passes the same array or null when
    unpadded). pairs: an SGPR pair each for seq[b], seq[b+1]; t: a scratch SGPR."""
    with k.region("sequence", expect={"smem": 4}):
        k.s_lshl_b32(t, batch, 2)
        for pair, seq in zip(pairs, seqs):
            k.s_load_dwordx2(pair, seq, t)
        for pad, seq in zip(pads, seqs):
            k.s_cmp_lg_u64(pad, 0)
            k.s_cselect_b64(pad, pad, seq)
        for start, pad in zip(starts, pads):
            k.s_load_dword(start, pad, t)
        k.s_waitcnt(lgkmcnt=0)
        for length, pair in zip(lengths, pairs):
            k.s_sub_u32(length, pair[1], pair[0])
