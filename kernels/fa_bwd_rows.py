"""Row tiles of one (batch, head) slice: the prologue the attention-backward pre and post kernels share
(kernels/fa_bwd_odo.py, kernels/fa_bwd_post.py).

aiter launches both on a grid (row tiles, query heads, batch), 256 threads, in batch and group mode
alike (flyasm/aiter_bwd.py). A workgroup owns rows [tile * tile_rows, (tile + 1) * tile_rows) of its
sequence:
  * batch mode: the sequence is batch b, `seqlen_q` rows, starting at row 0 of b's slice;
  * group mode: sequence b's rows are ptr_qseq[b] .. ptr_qseq[b+1] (lengths; aiter passes the
    cumulative logical lengths there when it has them) and start at physical row ptr_qseq_padded[b]
    of the packed [total, H, D] tensors; a workgroup whose tile starts past the sequence ends at once.
Every tensor is then a V# whose base is this tile's first row and whose num_records covers the rows
left in the sequence (rows_left * row stride bytes), so rows past the end read 0 and their stores
are dropped by the buffer range check: no per-row masks.
"""
from __future__ import annotations

from flyasm import s, v

RSRC_WORD3 = 0x00020000        # gfx9 V# word 3: raw buffer, 32-bit data format (kernels/fa_fwd.py)

# SGPRs every row-tile kernel uses (the kernel's plan declares them as regions)
SYS = s[0:4]                   # kernarg pointer, workgroup ids x (row tile), y (head), z (batch)
TILE_ROW, ROWS_LEFT, FIRST, T0, T1 = (s[i] for i in range(5, 10))
SEQ = s[10:11]                 # group mode: ptr_qseq[b], ptr_qseq[b+1]
ROW_SGPRS = s[5:11]


class RowTiles:
    """Loads the kernel's arguments and works out this workgroup's rows; then `rsrc` makes V#s.

    k: the Kernel (arguments already declared, aiter layout); sgpr: {argument: SGPR(s)} for the
    arguments to load; group: group mode; tile_rows: rows per workgroup."""

    def __init__(self, k, args: dict, sgpr: dict, group: bool, tile_rows: int):
        self.k, self.args, self.sgpr, self.group, self.tile_rows = k, args, sgpr, group, tile_rows
        self.tile, self.head, self.batch = (k.workgroup_id(a) for a in "xyz")

    def load_args(self):
        k = self.k
        names = list(self.sgpr)
        for i in range(0, len(names), 12):        # a bounded number of SMEM loads per wait
            for n in names[i:i + 12]:
                load = k.s_load_dwordx2 if self.args[n].type == "ptr" else k.s_load_dword
                load(self.sgpr[n], k.kernarg_ptr, self.args[n].offset)
            k.s_waitcnt(lgkmcnt=0)

    def rows(self, seqlen, end_label: str):
        """TILE_ROW = first row of the tile in its sequence, ROWS_LEFT = rows from there to the end
        of the sequence (> 0, else jump to end_label), FIRST = the sequence's first physical row."""
        k = self.k
        k.s_mul_i32(TILE_ROW, self.tile, self.tile_rows)
        if self.group:
            qseq, qpad = self.sgpr["ptr_qseq"], self.sgpr["ptr_qseq_padded"]
            k.s_lshl_b32(T0, self.batch, 2)
            k.s_load_dwordx2(SEQ, qseq, T0)                      # qseq[b], qseq[b+1]
            k.s_cmp_lg_u64(qpad, 0)                             # no padded starts: the same array
            k.s_cselect_b64(qpad, qpad, qseq)
            k.s_load_dword(FIRST, qpad, T0)
            k.s_waitcnt(lgkmcnt=0)
            k.s_sub_u32(ROWS_LEFT, SEQ[1], SEQ[0])
        else:
            k.s_mov_b32(ROWS_LEFT, seqlen)
            k.s_mov_b32(FIRST, 0)
        k.s_sub_i32(ROWS_LEFT, ROWS_LEFT, TILE_ROW)
        k.s_cmp_le_i32(ROWS_LEFT, 0)
        k.s_cbranch_scc1(k.L(end_label))

    def rsrc(self, dst, ptr, head_stride, batch_stride, row_stride, first_row=None, rows=None):
        """dst = V# of ptr + batch * batch_stride + head * head_stride + first_row * row_stride
        (64-bit SALU arithmetic; first_row defaults to the tile's physical row FIRST + TILE_ROW),
        num_records = rows (default ROWS_LEFT) * row_stride bytes."""
        k = self.k
        lo, hi = dst[0], dst[1]
        if first_row is None:
            k.s_add_u32(T1, FIRST, TILE_ROW)
            first_row = T1
        k.s_mov_b32(lo, ptr[0])
        k.s_mov_b32(hi, ptr[1])
        for a_, b_ in ((self.batch, batch_stride), (self.head, head_stride), (first_row, row_stride)):
            if b_ is None:
                continue
            k.s_mul_i32(dst[2], a_, b_)
            k.s_mul_hi_u32(dst[3], a_, b_)
            k.s_add_u32(lo, lo, dst[2])
            k.s_addc_u32(hi, hi, dst[3])
        k.s_and_b32(hi, hi, 0xFFFF)                 # stride 0: raw buffer, range check in bytes
        k.s_mul_i32(dst[2], ROWS_LEFT if rows is None else rows, row_stride)
        k.s_mov_b32(dst[3], RSRC_WORD3)

    def lane_rows(self, wave, lane, col, row, lanes: int, rows_per_wave: int):
        """A wave streams rows_per_wave rows, `lanes` 16-byte lanes to a row: wave = the wave's first
        row in the tile (SGPR), lane = lane id, col = lane % lanes (the lane's 16-byte column), row =
        wave + lane / lanes (the lane's row in the wave's first load)."""
        k = self.k
        k.v_readfirstlane_b32(wave, v[0])
        k.s_lshr_b32(wave, wave, 6)
        k.s_mul_i32(wave, wave, rows_per_wave)
        k.v_and_b32(lane, 63, v[0])
        k.v_and_b32(col, lanes - 1, lane)
        k.v_lshrrev_b32(row, lanes.bit_length() - 1, lane)
        k.v_add_u32(row, wave, row)
