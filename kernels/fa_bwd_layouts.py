"""LDS geometry and lane maps of the attention backward kernel (kernels/fa_bwd.py), in numpy.

The kernel's address formulas come from here; tests/test_fa_bwd_layouts.py pushes random tiles
through them (global memory -> LDS-DMA -> swizzled LDS -> ds_read_b128 / ds_read_b64_tr_b16 -> MFMA
operands) and checks the operands against kernels/fa_layouts' MFMA encodings, and prices every read
with the timing model's bank-conflict count (flyasm.perf.trace.lds_cycles).

One workgroup = 4 waves = a 256-key tile (aiter's ts for head dim 128); wave w owns keys
64w..64w+63. Q and dO stream through LDS in 32-row steps. Orientation: S = Q·Kᵀ and dP = dO·Vᵀ put
ONE key per lane (MFMA D[i=q][j=key], j = lane % 32), so their accumulators pack in place into the B
operands of dVᵀ += dOᵀ·P and dKᵀ += Qᵀ·dS (pack_b: cvt pairs, no lane exchange: the MFMAs contract
in K_ORDER, and dOᵀ, Qᵀ are read in it): the stationary accumulators dKᵀ, dVᵀ [d x key] need no
transpose. dQ needs dS with the
keys as the contraction index, so dS goes through LDS as [key][q] and comes back by transposing
reads; each wave computes the dQ columns of its own 32-d block over all 256 keys.

LDS rows of K, Q and dO (row = one key or query, 256 bytes of head dim 128) are read two ways:
  * ds_read_b128 (S and dP operands): 16 lanes per LDS cycle read rows r..r+15 at one 16-byte slot;
  * ds_read_b64_tr_b16 (the Kᵀ, Qᵀ, dOᵀ operands): 32 lanes per cycle read 4 rows x 64 bytes.
No padded stride serves both (a b128 read wants a row stride of 4*odd dwords, a tr read one of
16*odd), so rows are 320 bytes (80 dwords: the 4 rows of a tr read fall on banks 0, 16, 32, 48) and
the 16-byte slots of row r are XOR-swizzled by SLOT_XOR(r) = (r >> 2) & 3 on their two low bits:
the 16 rows of a b128 read then hit 16 distinct 4-bank groups, and a tr read's 4 rows keep their
16-bank runs (the XOR permutes slots inside a 64-byte run). dS rows are 64 bytes (32 queries),
swizzled the same way, so the b128 writes of packed dS are conflict-free and the tr reads read 256
contiguous bytes.
"""
from __future__ import annotations

import numpy as np

try:
    from . import fa_layouts as FL
except ImportError:                      # loaded as a top-level module (tests put kernels/ on the path)
    import fa_layouts as FL

HEAD_DIM = 128
WAVES = 4
BLOCK_KV = 256                  # keys per workgroup (aiter's ts_kv for hd128)
KEYS_PER_WAVE = 64
BLOCK_Q = 32                    # query rows per loop step
ROW = 320                       # bytes per LDS row of K, Q, dO (256 data + 64 padding)
SLOTS = ROW // 16               # 20 sixteen-byte slots per row, 16 of data
DS_ROW = 64                     # bytes per dS row (one key, 32 queries)
DMA_CHUNK = FL.DMA_CHUNK        # a buffer_load_dwordx4 ... lds writes 1 KiB of consecutive LDS

# ---- the LDS map (bytes) ----------------------------------------------------------------------
DS_BUF = (0, BLOCK_KV * DS_ROW)                    # dS [key][q], two buffers (steps alternate)
QD_BUF = (32768, 32768 + 2 * BLOCK_Q * ROW)        # Q rows then dO rows of one step, two buffers
DO_OFF = BLOCK_Q * ROW                             # dO after Q inside a QD buffer
ST_BASE = QD_BUF[1] + 2 * BLOCK_Q * ROW            # LSE / D per wave and buffer: 512 B each
ST_SLOT = 512
D_OFF = 256                                        # D after LSE inside a wave's slot
K_BASE = ST_BASE + 2 * WAVES * ST_SLOT             # the workgroup's 256 K rows
LDS_BYTES = K_BASE + BLOCK_KV * ROW
assert LDS_BYTES <= 160 * 1024 and DS_BUF[1] + BLOCK_KV * DS_ROW <= QD_BUF[0]

QD_CHUNKS = 2 * BLOCK_Q * ROW // DMA_CHUNK         # 20: Q chunks 0..9, dO chunks 10..19
QD_DMA = QD_CHUNKS // WAVES                        # 5 per wave per step, chunk w + 4i
K_CHUNKS = BLOCK_KV * ROW // DMA_CHUNK             # 80
K_DMA = K_CHUNKS // WAVES                          # 20 per wave per K tile
Q_CHUNKS = BLOCK_Q * ROW // DMA_CHUNK              # 10
assert QD_CHUNKS % WAVES == 0 and K_CHUNKS % WAVES == 0 and BLOCK_Q * ROW % DMA_CHUNK == 0
DIV20 = FL.DIV_MAGIC[SLOTS]                        # slot index // 20 by multiply-shift (tested exhaustively)


def slot_xor(row):
    """The swizzle of an LDS row: its 16-byte slot s holds global column s ^ slot_xor(row) (and the
    other way round: an XOR is its own inverse)."""
    return (np.asarray(row) >> 2) & 3


# ---- LDS-DMA: which global 16 bytes each lane fetches ----------------------------------------
# A lane offset past every buffer's range (fa_layouts.OUT_OF_RANGE: with the step's offset in soffset
# the lane fetches nothing and its LDS-DMA writes zeros): the padding slots'.
OUT_OF_RANGE = FL.OUT_OF_RANGE
assert OUT_OF_RANGE == 0xFFFFFFF0                   # -16: an inline constant of v_cndmask_b32


def dma_slot(lane, chunk: int):
    """(row, global 16-byte column, is padding) of the slot lane writes in chunk `chunk` of a
    320-byte-row tile: LDS slot s of row r holds column s ^ slot_xor(r); slots 16..19 are padding."""
    t = 64 * chunk + np.asarray(lane)
    magic, shift = DIV20
    row = (t * magic) >> shift
    ps = t - row * SLOTS
    return row, (ps ^ slot_xor(row)) & 15, ps >= 16


def dma_voffset(lane, chunk: int, row_stride: int):
    row, col, pad = dma_slot(lane, chunk)
    return np.where(pad, OUT_OF_RANGE, row * row_stride + 16 * col)


def qd_chunk(wave: int, i: int) -> tuple[str, int]:
    """(tensor, chunk within it) of Q/dO DMA instruction i of a wave: chunk wave + 4i of the 20."""
    c = wave + WAVES * i
    return ("q", c) if c < Q_CHUNKS else ("do", c - Q_CHUNKS)


# ---- per-lane read / write addresses: base(lane) + an immediate per instruction ---------------
def _half(lane):
    return np.asarray(lane) // 32


def b128_base(lane, parity: int, row0: int = 0):
    """ds_read_b128 of row row0 + lane%32 at logical slot 2kk + lane//32 (MFMA k-step kk of the head
    dim): the lane's address for even (parity 0) or odd kk; add b128_imm(kk) (+ 32-row blocks)."""
    lane = np.asarray(lane)
    row = row0 + lane % 32
    return row * ROW + 16 * ((2 * parity + _half(lane)) ^ slot_xor(row))


def b128_imm(kk: int, rows: int = 0) -> int:
    """kk's 64-byte group of slots (the XOR only touches a slot's two low bits) plus `rows` rows
    (a multiple of 16: the swizzle repeats every 16 rows)."""
    assert rows % 16 == 0
    return 64 * (kk // 2) + rows * ROW


# The contraction order of the gradient MFMAs: packing P and dS is a cvt of accumulator pairs and
# nothing more (no lane exchange), so MFMA k-index k of a 16-row k-step contracts over row K_ORDER[k]
# of it (B[k][j]: lane half k // 8, register (k % 8) // 2; the accumulators' rows 8m + 4h + e, notes
# §2), and every operand read along that index reads its rows in this order.
K_ORDER = tuple(8 * (v // 2) + 4 * h + 2 * (v % 2) + b for h in range(2) for v in range(4) for b in range(2))


def tr_base(lane, t: int, row_stride: int = ROW, packed_cols: bool = False):
    """ds_read_b64_tr_b16 read t (0 or 1) of an MFMA operand with the contraction index along rows:
    reader lane 16g + 4r + c reads row 4(g//2) + 8t + r (K_ORDER: output lane half h = g//2 gets rows
    8t + 4h + 0..3 as its k = 8h + 4t + 0..3) at columns 16(g%2) + 4c..+3 of a 32-column block: the
    lane's address; add tr_imm(block, kk). packed_cols: the row's 32 columns are stored in pack_b's
    order (dS [key][q]: 16-byte slot 2kq + h holds queries 16kq + 4h + 0..3, then 16kq + 8 + 4h + 0..3),
    so column group 4c sits in slot 2(g%2) + c%2, half c//2. The swizzle bit of row bit 3 is t's, so
    each t has its own base."""
    lane = np.asarray(lane)
    g, r, c = lane // 16, (lane % 16) // 4, lane % 4
    row = 4 * (g // 2) + 8 * t + r
    slot, half = (2 * (g % 2) + c % 2, c // 2) if packed_cols else (2 * (g % 2) + c // 2, c % 2)
    return row * row_stride + 16 * (slot ^ slot_xor(row)) + 8 * half


def tr_imm(block: int, kk: int, row_stride: int = ROW) -> int:
    """32-column block `block` (4 slots = 64 bytes; 0 for dS's single block) and 16-row k-step kk."""
    return 64 * block + 16 * kk * row_stride


def ds_write_base(lane, kq: int):
    """ds_write_b128 of packed dS (pack_b: lane half h holds queries 16kq + 4h + 0..3 and
    16kq + 8 + 4h + 0..3 of the lane's key): row = key (lane % 32; the wave's and key block's rows are
    immediates), logical slot 2kq + h; add ds_write_imm."""
    lane = np.asarray(lane)
    key = lane % 32
    return key * DS_ROW + 16 * ((2 * kq + _half(lane)) ^ slot_xor(key))


def ds_write_imm(wave: int, kb: int) -> int:
    return (64 * wave + 32 * kb) * DS_ROW


def st_base(lane, wave: int):
    """ds_read_b128 of 4 LSE (or D) values, queries 8g + 4h .. +3 of the step (g = accumulator group,
    h = lane half: MFMA D rows of one 32x32 tile), from the wave's slot; add st_imm."""
    return ST_BASE + ST_SLOT * wave + 16 * _half(lane)


def st_imm(buf: int, g: int, d: bool) -> int:
    return WAVES * ST_SLOT * buf + 32 * g + (D_OFF if d else 0)


def pack_b(acc, dtype: str):
    """The kernel's packing (fa_bwd gen_pack) of one 32x32 tile's 16 accumulators (MFMA D[i=q][j=key],
    [64 lanes, 16] f32) into the B operands of its two 16-query k-steps ([64, 8] u32: regs 4kq..4kq+3):
    reg e of kq = cvt_pk of accumulators 8kq+2e, 8kq+2e+1; B[k][j] then holds query 16kq + K_ORDER[k]."""
    regs = np.zeros((64, 8), np.uint32)
    for kq in range(2):
        src = acc[:, 8 * kq:8 * kq + 8]
        regs[:, 4 * kq:4 * kq + 4] = np.stack(
            [FL.pack(FL.f32_to_b16(src[:, 2 * e], dtype), FL.f32_to_b16(src[:, 2 * e + 1], dtype)) for e in range(4)], axis=1)
    return regs


# ---- a numpy model of the data movement (for the tests) -------------------------------------
def lds_tile(mat_bytes: np.ndarray, rows: int, row_stride_g: int, chunks: int, base: int = 0, lds=None):
    """LDS image after the DMA chunks of a tile: mat_bytes is the global tile (rows x row_stride_g
    bytes, rows beyond the tile read as zero)."""
    lds = np.zeros(LDS_BYTES, np.uint8) if lds is None else lds
    lanes = np.arange(64)
    for c in range(chunks):
        off = dma_voffset(lanes, c, row_stride_g)
        for lane in range(64):
            o = int(off[lane])
            data = mat_bytes[o:o + 16] if o + 16 <= mat_bytes.size else np.zeros(16, np.uint8)   # range check
            lds[base + DMA_CHUNK * c + 16 * lane: base + DMA_CHUNK * c + 16 * lane + 16] = data
    return lds
