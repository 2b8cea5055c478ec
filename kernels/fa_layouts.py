"""Fragment model of the flagship attention kernel (kernels/fa_fwd.py), in numpy.

Everything the kernel does to move data is written here once, as lane maps taken from
`reference/gfx950_isa_notes.md`, and the builder takes its address formulas from this module:

  * §2   v_mfma_f32_32x32x16_{bf16,f16}: A[i][k] lane = i + 32*(k//8), vgpr (k%8)//2, half k%2;
         B[k][j] the same with j; D[i][j] vgpr 4*(i//8) + i%4, lane j + 32*((i//4)%2).
  * §3.1 ds_read_b64_tr_b16: per 16-lane block, OUT[16g+j][r] = IN[16g+4r+j//4][j%4].
  * §3.2 v_permlane32_swap_b32 vdst, src0: src0[lane] <-> vdst[lane+32] for lane < 32.
  * §3.3 buffer_load_dwordx4 ... offen lds: lane L deposits 16 bytes at M0 + offset + 16*L.
  * §3.5 v_cvt_pk_bf16_f32 d, s0, s1: RNE, s0 -> low half.

The tests (tests/test_fa_layouts.py) push random Q/K/V through this model -- global memory ->
LDS with padding -> ds_read_b128 / ds_read_b64_tr_b16 -> MFMA operands -> online softmax with
permlane exchanges -> P packing -> P.V -> output rows -- and compare with plain numpy.

Orientation (why Sᵀ and Oᵀ): with Sᵀ = K·Qᵀ (A = K, B = Qᵀ) the 32x32 output puts ONE query per
lane (j = lane % 32) and 16 keys of a 32-key block in its 16 accumulators; the other 16 keys of
that block sit in lane ± 32. So a row max / row sum is a reduction inside the lane plus one
permlane32 exchange. Oᵀ = Vᵀ·Pᵀ then needs Pᵀ as the B operand (lane = q + 32*(key//8)), which
is the Sᵀ output after swapping the middle 4-key groups between lane halves.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# ---- tile geometry ----------------------------------------------------------------------------
# LDS on gfx950: 64 banks x 4 bytes (notes §1.3).  Padding per tensor, in bytes per row:
#  K: ds_read_b128, the 16 lanes served together read rows r..r+15 at the same column.  A row
#     stride of 4*odd dwords (272 B = 68 dw for d 128, 400 B = 100 dw for d 192: one 16-byte slot
#     of padding) puts rows r..r+15 at 16 disjoint 4-bank groups.
#  V: ds_read_b64_tr_b16, lanes 0..31 read 4 rows x 64 contiguous bytes (32 d values).  Row
#     stride 320 B = 80 dwords puts the 4 rows at banks 0, 16, 32, 48: four disjoint 16-bank runs.
BLOCK_K = 64                  # keys per K/V step
ROWS_PER_WAVE = 32            # one 32x32 MFMA column block: one query per lane (x2 lane halves)
DMA_CHUNK = 64 * 16           # one buffer_load_dwordx4 ... lds writes 1 KiB contiguous LDS
# Division by the row stride in 16-byte slots, as the kernel does it (v_mul_u32_u24 + shift);
# exact for every slot index of a tile (tested exhaustively).
DIV_MAGIC = {9: (7282, 16), 17: (3856, 16), 20: (3277, 16), 25: (2622, 16)}


@dataclass(frozen=True)
class Geometry:
    """One head-dim variant: Q/K head dim d_qk, V/O head dim 128, `waves` waves of 32 query rows.
    d 128: 8 waves (aiter launches 512 threads); d 192: 4 waves (aiter's 256-thread launch)."""
    d_qk: int = 128
    waves: int = 8
    d_v: int = 128
    k_stages: int = 2                    # K LDS buffers (K_{j+k_stages} is DMA'd while step j reads K_{j+1})
    v_stages: int = 2                    # V LDS buffers (V_{j+v_stages-1} is DMA'd while step j reads V_j)
    elem = 2                             # bytes per Q/K/V element
    mfma_k = 16                          # d (or keys) per MFMA k-step
    k_swizzle = v_swizzle = False        # fp8 only (Fp8Geometry): K / V rows unpadded, XOR-swizzled

    @property
    def block_q(self) -> int:            # rows of Q per workgroup (aiter's ts_qo)
        return ROWS_PER_WAVE * self.waves

    @property
    def k_stride(self) -> int:
        return self.elem * self.d_qk + 16

    @property
    def v_stride(self) -> int:
        return 320

    @property
    def k_cols(self) -> int:             # 16-byte columns of a K row (real data)
        return self.elem * self.d_qk // 16

    @property
    def v_cols(self) -> int:
        return self.elem * self.d_v // 16

    @property
    def k_slots(self) -> int:            # 16-byte slots of a padded K row in LDS
        return self.k_stride // 16

    @property
    def v_slots(self) -> int:
        return self.v_stride // 16

    @property
    def k_chunks(self) -> int:
        return BLOCK_K * self.k_stride // DMA_CHUNK

    @property
    def v_chunks(self) -> int:
        return BLOCK_K * self.v_stride // DMA_CHUNK

    @property
    def k_dma(self) -> int:              # DMA instructions per wave per K tile (uniform vmcnt)
        return -(-self.k_chunks // self.waves)

    @property
    def v_dma(self) -> int:
        return -(-self.v_chunks // self.waves)

    @property
    def k_steps(self) -> int:            # MFMA k-steps over d_qk
        return self.d_qk // self.mfma_k

    @property
    def lds_k(self) -> tuple:            # K buffers
        return tuple(BLOCK_K * self.k_stride * b for b in range(self.k_stages))

    @property
    def lds_v(self) -> tuple:            # V buffers
        t = self.k_stages * BLOCK_K * self.k_stride
        return tuple(t + BLOCK_K * self.v_stride * b for b in range(self.v_stages))

    @property
    def lds_dump(self) -> int:           # 1 KiB per wave for DMA instructions with no chunk
        return BLOCK_K * (self.k_stages * self.k_stride + self.v_stages * self.v_stride)

    @property
    def lds_bytes(self) -> int:
        return self.lds_dump + self.waves * DMA_CHUNK


HD128 = Geometry(128, 8)
# d 192: one wave per SIMD and half hd128's Q rows per K/V byte, so K's DMAs run four tiles deep
# (K_{j+4} is DMA'd in step j: two steps of latency; 147 KiB of LDS with V's two buffers)
HD192 = Geometry(192, 4, k_stages=4, v_stages=2)
GEOMETRY = {128: HD128, 192: HD192}


@dataclass(frozen=True)
class Fp8Geometry(Geometry):
    """fp8 Q/K/V (one byte per element; kernels/fa_fwd_fp8.py): rows of d bytes plus one 16-byte
    padding slot (36 dwords = 4*odd for d 128: conflict-free ds_read_b128 as for bf16), and MFMA
    k-steps of 64 (v_mfma_f32_32x32x64_f8f6f4). fp8 hd256 rows are bf16 hd128's bytes."""
    elem = 1
    mfma_k = 64
    k_swizzle: bool = False              # K rows of d_qk bytes, 16-byte slots swizzled (k_slot_xor_fp8), not padded
    v_swizzle: bool = False              # V rows of d_v bytes, 32-byte chunks swizzled (v_chunk_xor_fp8), not padded

    @property
    def k_stride(self) -> int:
        return self.d_qk + (0 if self.k_swizzle else 16)

    @property
    def v_stride(self) -> int:
        return self.d_v + (0 if self.v_swizzle else 16)


# hd128 V: ds_read_b64_tr_b8 has two-way bank conflicts at every 16-byte-multiple row stride
# (v_chunk_xor_fp8), so its rows are 128 bytes with the 32-byte chunks XOR-swizzled: conflict-free,
# and 8 DMA chunks per tile (one per wave) instead of 9; K likewise (k_slot_xor_fp8), so each wave
# issues one K and one V DMA per step and none is a dump
FP8_HD128 = Fp8Geometry(128, 8, 128, k_swizzle=True, v_swizzle=True)
FP8_HD256 = Fp8Geometry(256, 8, 256)
FP8_GEOMETRY = {128: FP8_HD128, 256: FP8_HD256}
for _g in list(GEOMETRY.values()) + list(FP8_GEOMETRY.values()):
    assert _g.k_swizzle or (_g.k_stride // 4) % 8 == 4 and _g.k_slots in DIV_MAGIC
    assert BLOCK_K * _g.k_stride % DMA_CHUNK == 0 and (_g.v_slots in DIV_MAGIC or _g.v_swizzle)

# The d-128 geometry under its historical names.
HEAD_DIM = HD128.d_qk
WAVES = HD128.waves
BLOCK_Q = HD128.block_q
ROW_BYTES = HEAD_DIM * 2      # one bf16/f16 row of K or V
K_STRIDE, V_STRIDE = HD128.k_stride, HD128.v_stride
K_TILE = BLOCK_K * K_STRIDE   # 17408 B = 17 DMA chunks
V_TILE = BLOCK_K * V_STRIDE   # 20480 B = 20 DMA chunks
K_CHUNKS, V_CHUNKS = HD128.k_chunks, HD128.v_chunks
DMA_PER_WAVE = 3              # ceil(20 / 8); a wave past the last chunk writes its dump slot
assert DMA_PER_WAVE == HD128.k_dma == HD128.v_dma
LDS_K, LDS_V = HD128.lds_k, HD128.lds_v
LDS_DUMP = HD128.lds_dump
LDS_BYTES = HD128.lds_bytes   # 83968 B
K_SLOTS, V_SLOTS = HD128.k_slots, HD128.v_slots          # 17, 20


def dma_chunk(wave: int, i: int, nchunks: int, waves: int = WAVES) -> int:
    """Chunk of the tile that DMA instruction i of a wave loads from global memory (clamped)."""
    return min(wave + waves * i, nchunks - 1)


def dma_m0(wave: int, i: int, nchunks: int, buf_base: int, g: Geometry = HD128) -> int:
    """LDS destination (M0) of DMA instruction i of a wave.  Every wave issues k_dma / v_dma
    instructions so vmcnt stays uniform; a wave past the last chunk writes its own 1 KiB dump
    slot instead (two waves writing the same LDS bytes without a barrier would be a race)."""
    c = wave + g.waves * i
    return buf_base + DMA_CHUNK * c if c < nchunks else g.lds_dump + DMA_CHUNK * wave


def dma_slot(lane, chunk: int, slots_per_row: int, cols: int = 16):
    """(row, 16-byte column) of global K/V that lane writes in a chunk; padding slots re-read a real
    column of the same row (never read back from LDS): column & 15 when a row has 16 columns,
    else the last column."""
    t = 64 * chunk + np.asarray(lane)
    magic, shift = DIV_MAGIC[slots_per_row]
    row = (t * magic) >> shift
    cs = t - row * slots_per_row
    return row, (cs & 15) if cols == 16 else np.minimum(cs, cols - 1)


# A lane offset past every buffer's range (offset + soffset >= num_records while soffset, a tile's
# offset, is below num_records): the lane fetches nothing and its LDS-DMA writes zeros. The kernel
# gives it to padding slots and to a wave's dump DMAs (dma_m0).
OUT_OF_RANGE = 0xFFFFFFF0


def dma_voffset(lane, chunk: int, slots_per_row: int, row_stride_bytes: int, cols: int = 16):
    """Per-lane global byte offset (relative to the tile's first row) of a K/V DMA instruction;
    OUT_OF_RANGE for padding slots (never read back from LDS)."""
    row, col16 = dma_slot(lane, chunk, slots_per_row, cols)
    pad = (64 * chunk + np.asarray(lane)) % slots_per_row >= cols
    return np.where(pad, OUT_OF_RANGE, row * row_stride_bytes + 16 * col16)


# ---- per-lane address formulas used by the builder --------------------------------------------
def q_voffset(lane, q0: int, q_row_stride: int):
    """Q as the B operand of Sᵀ = K·Qᵀ (MFMA kk covers d = 16kk..16kk+15): lane holds q = lane%32,
    d = 16kk + 8*(lane//32) + 0..7 -> one dwordx4 per kk at this offset + imm 32*kk."""
    lane = np.asarray(lane)
    return (q0 + lane % 32) * q_row_stride + 16 * (lane // 32)


def q_imm(kk: int) -> int:
    return 32 * kk


def load_q_regs(qg, q0: int, q_row_stride: int, k_steps: int = 8):
    """Q's B operands (q_voffset / q_imm) as the head-dim-128 kernel loads them: per pair of k-steps
    2m, 2m+1 two dwordx4 as O is stored (o_voffset + o_imm(m), set s = rows 16s..16s+15: 16 rows of
    64 contiguous bytes each, half q_voffset's 32 lines), then permlane16_swap(set 0 reg e, set 1 reg e)
    (pack_o's last swap, its own inverse): set 0 becomes k-step 2m, set 1 k-step 2m+1."""
    lanes = np.arange(64)
    regs = []
    for m in range(k_steps // 2):
        sets = [[qg[o:o + 16].view(np.uint32) for o in o_voffset(lanes, q0 + 16 * st, q_row_stride) + o_imm(m)]
                for st in range(2)]
        sets = [np.stack(x) for x in sets]
        for e in range(4):
            sets[0][:, e], sets[1][:, e] = permlane16_swap(sets[0][:, e], sets[1][:, e])
        regs += sets
    return regs


def k_read_addr(lane, k_stride: int = K_STRIDE):
    """K as the A operand: A[i=key][k=d] lane = key + 32*(d//8): ds_read_b128 of row key%32 at
    d = 16kk + 8*(lane//32); + k_read_imm(kb, kk) + buffer base."""
    lane = np.asarray(lane)
    return (lane % 32) * k_stride + 16 * (lane // 32)


def k_read_imm(kb: int, kk: int, k_stride: int = K_STRIDE) -> int:
    return 32 * kb * k_stride + 32 * kk


def p_key(k):
    """Key (within the 16 of a P·V MFMA step) at position k of the MFMA's k dimension: the order in
    which the packed Sᵀ accumulators hold them (pack_p), so P needs no lane exchange; Vᵀ is read in
    the same order. Lane half h = k // 8 holds the Sᵀ keys 4h + 0..3 and 8 + 4h + 0..3 (s_key)."""
    k = np.asarray(k)
    return 4 * (k // 8) + 8 * ((k % 8) // 4) + k % 4


def v_read_addr(lane):
    """V as the A operand of Oᵀ = Vᵀ·Pᵀ: A[i=d][k] lane = d + 32*(k//8), vgpr (k%8)//2, key p_key(k).
    ds_read_b64_tr_b16 (§3.1): in 16-lane block g the output lane j gets column j of the 4 rows read
    by lanes 4r..4r+3 (4 b16 each).  So reader lane 16g + 4r + c reads row 4*(g//2) + r, columns
    16*(g%2) + 4c .. +3; output lane 16g + j then holds d = 16*(g%2) + j, keys 4*(g//2) + 0..3
    (k%8 = 0..3 of lane half g//2: p_key)."""
    lane = np.asarray(lane)
    g, r, c = lane // 16, (lane % 16) // 4, lane % 4
    return (4 * (g // 2) + r) * V_STRIDE + (16 * (g % 2) + 4 * c) * 2


def v_read_imm(db: int, kk: int, t: int) -> int:
    """Fragment (d block db, keys 16kk..16kk+15); t = 0 loads k%8 = 0..3 (vgprs 0-1), t = 1 k%8 = 4..7
    (vgprs 2-3), which p_key puts 8 keys further."""
    return (16 * kk + 8 * t) * V_STRIDE + 64 * db


def o_voffset(lane, q0: int, o_row_stride: int):
    """After pack_o, register set s of d block db holds in lane 8 consecutive d of query
    q0 + 16s + lane%16: d = 32db + 16*((lane//16)%2) + 8*(lane//32) + 0..7 -> dwordx4 at this offset
    + o_imm(db) + 16s rows (the kernel's soffset): one store covers 64 contiguous bytes of 16 rows."""
    lane = np.asarray(lane)
    return (q0 + lane % 16) * o_row_stride + 32 * ((lane // 16) % 2) + 16 * (lane // 32)


def o_imm(db: int) -> int:
    return 64 * db


def s_key(lane, r: int, kb: int):
    """Key (within the 64-key tile) of Sᵀ accumulator r of block kb in a lane (§2 D inverse)."""
    lane = np.asarray(lane)
    return 32 * kb + 8 * (r // 4) + 4 * (lane // 32) + r % 4


def mask_const(r: int, kb: int) -> int:
    """Key offset of accumulator r in block kb without the lane-half term (an inline constant)."""
    return 32 * kb + 8 * (r // 4) + r % 4


# ---- fp8 (kernels/fa_fwd_fp8.py): v_mfma_f32_32x32x64_f8f6f4 ------------------------------------
# §2 with K_L = 32: A[i][k] is byte k % 32 of lane i + 32*(k//32), B[k][j] of lane j + 32*(k//32).
def k_read_addr_fp8(lane, k_stride: int):
    """K (A of Sᵀ = K·Qᵀ, 64 d per MFMA): lane reads row lane%32, bytes 32*(lane//32) + 0..31 of
    the step: two ds_read_b128 at this + k_read_imm_fp8."""
    lane = np.asarray(lane)
    return (lane % 32) * k_stride + 32 * (lane // 32)


def k_read_imm_fp8(kb: int, kk: int, part: int, k_stride: int, swizzle: bool = False) -> int:
    return 32 * kb * k_stride + (0 if swizzle else 64 * kk + 16 * part)


def k_slot_xor_fp8(row):
    """Swizzled fp8 K (Fp8Geometry.k_swizzle, 128-byte rows): global 16-byte column c of row `row`
    sits at LDS slot c ^ ((row >> 1) & 7).  A ds_read_b128 serves 16 lanes together, rows r0..r0+15
    at one column; at 128-byte rows the 8 even (and the 8 odd) rows collided on one 4-bank group;
    their bits 1-3 are distinct, so now they use 8 distinct slots."""
    return (np.asarray(row) >> 1) & 7


def k_read_addr_fp8_swizzled(lane, kk: int, part: int, k_stride: int = 128):
    """Swizzled K read base for (kk, part): row lane%32 (+ 32 kb, which keeps bits 1-3: an immediate),
    global column 4kk + 2*(lane//32) + part at slot column ^ k_slot_xor_fp8(row); the column's bits
    are disjoint, so the (kk, part) bits XOR in separately: one base per (kk, part)."""
    lane = np.asarray(lane)
    row = lane % 32
    return row * k_stride + 16 * ((4 * kk + 2 * (lane // 32) + part) ^ k_slot_xor_fp8(row))


def p_key_fp8(v: int) -> int:
    """Key (within a lane half's 32) of byte v (0..31) of the P operand after pack_p: packed Sᵀ
    accumulators 4m+e of key block h land in regs m (lane half 0's keys 8m+e) and 4+m (half 1's
    keys 8m+4+e) once permlane32 swaps the blocks: lane half h then holds keys 32h + p_key_fp8(v)."""
    return 8 * ((v // 4) % 4) + 4 * (v // 16) + v % 4


V_TR_ROWS_FP8 = tuple(p_key_fp8(8 * t) for t in range(4))       # (0, 16, 4, 20): row offset of read t


def v_chunk_xor_fp8(row):
    """Swizzled fp8 V (Fp8Geometry.v_swizzle, 128-byte rows): global 32-byte chunk c of row `row` sits
    at LDS chunk c ^ v_chunk_xor_fp8(row) = c ^ (row bit 1 | row bit 3 << 1).  One 256-byte phase of
    a tr_b8 read is one chunk of the 8 rows b + {0..3, 8..11} (v_read_addr_fp8); at 128-byte rows
    row r's chunk c covers the 8 banks 32*(r%2) + 8c.., so the 4 even (and the 4 odd) rows collided
    on one chunk; rows b, b+2, b+8, b+10 have distinct bits 1 and 3, so now they use distinct chunks."""
    row = np.asarray(row)
    return ((row >> 1) & 1) | (((row >> 3) & 1) << 1)


# read t adds V_TR_ROWS_FP8[t] to the row without touching bits 1 and 3 (the lane rows p_key_fp8(r)
# have bits 2 and 4 clear, so no carry): the swizzle is a per-lane term, the row offset an immediate
assert all(t & 0b1010 == 0 for t in V_TR_ROWS_FP8) and all(p_key_fp8(r) & 0b10100 == 0 for r in range(8))


def v_read_addr_fp8(lane, v_stride: int, db: int = 0, swizzle: bool = False):
    """V (A of Oᵀ = Vᵀ·Pᵀ, 64 keys per MFMA) by ds_read_b64_tr_b8 (§3.1, E = 8): in 16-lane block g,
    output lane j gets byte j%8 of reader lane 2r + j//8 for r = 0..7.  Reader lane 16g + 2r + c
    reads row 32*(g//2) + p_key_fp8(r), bytes 16*(g%2) + 8c: output lane l then holds d = l%32 and
    keys 32*(l//32) + p_key_fp8(8t + r) for read t (+ v_read_imm_fp8).  Swizzled: d block db's chunk
    moves with the row (v_chunk_xor_fp8), so each d block has its own per-lane base."""
    lane = np.asarray(lane)
    g, r, c = lane // 16, (lane % 16) // 2, lane % 2
    row = 32 * (g // 2) + p_key_fp8(r)
    chunk = (db ^ v_chunk_xor_fp8(row)) if swizzle else 0
    return row * v_stride + 32 * chunk + 16 * (g % 2) + 8 * c


def v_read_imm_fp8(db: int, t: int, v_stride: int, swizzle: bool = False) -> int:
    return V_TR_ROWS_FP8[t] * v_stride + (0 if swizzle else 32 * db)


def slot_xor_fp8(tensor: str, row):
    """16-byte slot XOR of a row of the swizzled fp8 K or V tile."""
    return k_slot_xor_fp8(row) if tensor == "k" else 2 * v_chunk_xor_fp8(row)


def dma_slot_swizzled(lane, chunk: int, tensor: str = "v", slots_per_row: int = 8):
    """(row, 16-byte column) of global K/V that lane writes in a chunk of the swizzled fp8 layout:
    LDS slot s of row r holds global column s ^ slot_xor_fp8(tensor, r) (an XOR is its own inverse)."""
    t = 64 * chunk + np.asarray(lane)
    row = t // slots_per_row
    return row, (t % slots_per_row) ^ slot_xor_fp8(tensor, row)


# ---- number formats ---------------------------------------------------------------------------
def f32_to_b16(x, dtype: str):
    """Round float32 to bf16/f16 bits (RNE), as v_cvt_pk_{bf16,f16}_f32."""
    x = np.asarray(x, np.float32)
    if dtype == "f16":
        return x.astype(np.float16).view(np.uint16)
    u = x.view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(x)
    return np.where(nan, np.uint16(0x7FC0), r)


def b16_to_f32(h, dtype: str):
    h = np.asarray(h, np.uint16)
    if dtype == "f16":
        return h.view(np.float16).astype(np.float32)
    return (h.astype(np.uint32) << 16).view(np.float32)


def pack(lo, hi):
    return np.asarray(lo, np.uint32) | (np.asarray(hi, np.uint32) << 16)


def unpack(w):
    w = np.asarray(w, np.uint32)
    return (w & 0xFFFF).astype(np.uint16), (w >> 16).astype(np.uint16)


# ---- instruction models (one wave: arrays indexed [lane, register]) ---------------------------
def mfma_ab_decode(regs, dtype: str, operand: str):
    """4 VGPRs x 64 lanes -> A[32][16] (operand 'A') or B[16][32] ('B') as float32."""
    m = np.zeros((32, 16), np.float32)
    for lane in range(64):
        for vv in range(4):
            lo, hi = unpack(regs[lane, vv])
            for h, val in ((0, lo), (1, hi)):
                m[lane % 32, 8 * (lane // 32) + 2 * vv + h] = b16_to_f32(val, dtype)
    return m if operand == "A" else m.T


def mfma_ab_encode(mat, dtype: str, operand: str):
    """A[32][16] or B[16][32] (float32, representable) -> 4 VGPRs x 64 lanes."""
    m = np.asarray(mat, np.float32) if operand == "A" else np.asarray(mat, np.float32).T
    bits = f32_to_b16(m, dtype)
    regs = np.zeros((64, 4), np.uint32)
    for lane in range(64):
        for vv in range(4):
            k = 8 * (lane // 32) + 2 * vv
            regs[lane, vv] = pack(bits[lane % 32, k], bits[lane % 32, k + 1])
    return regs


def mfma_d_decode(acc):
    """16 accumulators x 64 lanes -> D[32][32] (§2: i = 8(r//4) + 4(l//32) + r%4, j = l%32)."""
    d = np.zeros((32, 32), np.float32)
    for lane in range(64):
        for r in range(16):
            d[8 * (r // 4) + 4 * (lane // 32) + r % 4, lane % 32] = acc[lane, r]
    return d


def mfma_d_encode(d):
    acc = np.zeros((64, 16), np.float32)
    for lane in range(64):
        for r in range(16):
            acc[lane, r] = d[8 * (r // 4) + 4 * (lane // 32) + r % 4, lane % 32]
    return acc


def mfma_32x32x16(a_regs, b_regs, c_acc, dtype: str):
    a = mfma_ab_decode(a_regs, dtype, "A").astype(np.float64)
    b = mfma_ab_decode(b_regs, dtype, "B").astype(np.float64)
    return mfma_d_encode((mfma_d_decode(c_acc).astype(np.float64) + a @ b).astype(np.float32))


def ds_read_b128(lds: np.ndarray, addr):
    out = np.zeros((64, 4), np.uint32)
    for lane in range(64):
        out[lane] = lds[addr[lane]:addr[lane] + 16].view(np.uint32)
    return out


def ds_read_b64_tr_b16(lds: np.ndarray, addr):
    """§3.1 model: every lane reads 4 b16 at its address; block g, OUT[16g+j][r] = IN[16g+4r+j//4][j%4]."""
    inp = np.stack([lds[addr[lane]:addr[lane] + 8].view(np.uint16) for lane in range(64)])
    out = np.zeros((64, 4), np.uint16)
    for g in range(4):
        for j in range(16):
            for r in range(4):
                out[16 * g + j, r] = inp[16 * g + 4 * r + j // 4, j % 4]
    return np.stack([pack(out[:, 0], out[:, 1]), pack(out[:, 2], out[:, 3])], axis=1)


def permlane32_swap(vdst, src0):
    """§3.2: for lane < 32, src0[lane] <-> vdst[lane + 32]; returns the new (vdst, src0)."""
    vdst, src0 = np.array(vdst), np.array(src0)
    tmp = src0[:32].copy()
    src0[:32] = vdst[32:]
    vdst[32:] = tmp
    return vdst, src0


def permlane16_swap(vdst, src0):
    """§3.2: in each lane half, src0 lanes 0..15 <-> vdst lanes 16..31; returns the new (vdst, src0)."""
    vdst, src0 = np.array(vdst), np.array(src0)
    for h in (0, 32):
        tmp = src0[h:h + 16].copy()
        src0[h:h + 16] = vdst[h + 16:h + 32]
        vdst[h + 16:h + 32] = tmp
    return vdst, src0


def dma_x4(lds: np.ndarray, m0: int, glob: np.ndarray, voffset, num_records: int):
    """buffer_load_dwordx4 v, rsrc, 0 offen lds (§3.3): lane L copies 16 global bytes at voffset[L]
    (zero when out of range) to LDS m0 + 16 L."""
    for lane in range(64):
        o = int(voffset[lane])
        data = glob[o:o + 16] if o + 16 <= num_records else np.zeros(16, np.uint8)
        lds[m0 + 16 * lane: m0 + 16 * lane + 16] = data


# ---- the data movement of one wave, end to end ------------------------------------------------
def pack_p(s_acc, dtype: str):
    """Sᵀ accumulators (2 blocks x 16 f32) -> Pᵀ B operands for 4 MFMAs (keys 16kk..16kk+15).

    In place as the kernel does it: regs 8kk..8kk+3 become cvt_pk(8kk+0,1), (2,3), (4,5), (6,7),
    nothing more: the MFMA's k order is the accumulators' key order (p_key), and V is read in it."""
    regs = np.zeros((64, 16), np.uint32)
    for kk in range(4):
        src = s_acc[:, 8 * kk: 8 * kk + 8]
        p = [pack(f32_to_b16(src[:, 2 * e], dtype), f32_to_b16(src[:, 2 * e + 1], dtype)) for e in range(4)]
        regs[:, 4 * kk: 4 * kk + 4] = np.stack(p, axis=1)
    return regs


def pack_o(o_acc, dtype: str):
    """Oᵀ accumulators of one d block (16 f32) -> 2 sets of 4 VGPRs (o_voffset): per c (accumulators
    8c..8c+7) cvt_pk, then permlane32_swap(r0, r2), (r1, r3): lane holds 8 consecutive d of query lane%32,
    d = 16c + 8*(lane//32) + 0..7; then permlane16_swap(set 0 reg e, set 1 reg e) trades set 0's rows
    16-31 for set 1's rows 0-15, so set s holds rows 16s..16s+15 (§3.2)."""
    sets = []
    for c in range(2):
        src = o_acc[:, 8 * c: 8 * c + 8]
        p = [pack(f32_to_b16(src[:, 2 * e], dtype), f32_to_b16(src[:, 2 * e + 1], dtype)) for e in range(4)]
        p[0], p[2] = permlane32_swap(p[0], p[2])
        p[1], p[3] = permlane32_swap(p[1], p[3])
        sets.append(p)
    for e in range(4):
        sets[0][e], sets[1][e] = permlane16_swap(sets[0][e], sets[1][e])
    return [np.stack(p, axis=1) for p in sets]


def wave_forward(q, k, v, *, dtype="bf16", scale=None, causal=False, q0=0, seqlen_k=None,
                 lazy_threshold=8.0):
    """One wave's forward pass through the fragment model.

    q: [32, 128] rows q0..q0+31 (the wave's query rows); k, v: [Sk_pad, 128] float32 holding
    representable bf16/f16 values; rows >= seqlen_k are treated as out of range.  Returns
    (O [32, 128] float32 after output rounding, lse [32]) exactly as the kernel's data movement
    produces them, with numpy doing the arithmetic."""
    seqlen_k = k.shape[0] if seqlen_k is None else seqlen_k
    scale = 1.0 / np.sqrt(HEAD_DIM) if scale is None else scale
    c = np.float32(scale * np.log2(np.e))
    lanes = np.arange(64)
    q_stride, kv_stride = ROW_BYTES, ROW_BYTES
    # Q: global bytes -> B operands (in-flight scaling by scale*log2e, rounded back to bf16/f16).
    qg = f32_to_b16(q, dtype).view(np.uint8).reshape(-1)
    qregs = []
    for regs in load_q_regs(qg, 0, q_stride):
        lo, hi = unpack(regs)
        lo = f32_to_b16(b16_to_f32(lo, dtype) * c, dtype)
        hi = f32_to_b16(b16_to_f32(hi, dtype) * c, dtype)
        qregs.append(pack(lo, hi))
    ntiles = -(-seqlen_k // BLOCK_K)
    kg = f32_to_b16(np.pad(k, ((0, ntiles * BLOCK_K - k.shape[0]), (0, 0))), dtype).view(np.uint8).reshape(-1)
    vg = f32_to_b16(np.pad(v, ((0, ntiles * BLOCK_K - v.shape[0]), (0, 0))), dtype).view(np.uint8).reshape(-1)
    lds = np.zeros(LDS_BYTES, np.uint8)
    o_acc = np.zeros((4, 64, 16), np.float32)
    m_used = np.full(64, -np.inf, np.float32)
    l_part = np.zeros(64, np.float32)
    neg_inf = np.float32(-np.inf)
    for j in range(ntiles):
        kbase = BLOCK_K * j
        tile_off = kbase * kv_stride
        nrec = seqlen_k * kv_stride
        for w in range(WAVES):       # every wave's DMA share of the tile
            for i in range(DMA_PER_WAVE):
                ck, cv = dma_chunk(w, i, K_CHUNKS), dma_chunk(w, i, V_CHUNKS)
                dma_x4(lds, dma_m0(w, i, K_CHUNKS, LDS_K[j % 2]), kg,
                       tile_off + dma_voffset(lanes, ck, K_SLOTS, kv_stride), nrec)
                dma_x4(lds, dma_m0(w, i, V_CHUNKS, LDS_V[j % 2]), vg,
                       tile_off + dma_voffset(lanes, cv, V_SLOTS, kv_stride), nrec)
        # Sᵀ = K·Qᵀ: 2 key blocks x 8 MFMAs over d.
        s_acc = np.zeros((64, 32), np.float32)
        for kb in range(2):
            acc = np.zeros((64, 16), np.float32)
            for kk in range(8):
                a = ds_read_b128(lds, LDS_K[j % 2] + k_read_addr(lanes) + k_read_imm(kb, kk))
                acc = mfma_32x32x16(a, qregs[kk], acc, dtype)
            s_acc[:, 16 * kb: 16 * kb + 16] = acc
        # mask: key < seqlen_k and (causal) key <= q, by one compare per accumulator against a
        # per-lane limit t = min(seqlen_k - kbase, q + 1 - kbase) - 4*(lane//32).
        qrow = q0 + lanes % 32
        t = np.minimum(seqlen_k - kbase, (qrow + 1 - kbase) if causal else 1 << 30) - 4 * (lanes // 32)
        for kb in range(2):
            for r in range(16):
                col = 16 * kb + r
                s_acc[:, col] = np.where(mask_const(r, kb) < t, s_acc[:, col], neg_inf)
        # row max: inside the lane, then one permlane32 exchange.
        mt = s_acc.max(axis=1)
        a_, b_ = permlane32_swap(mt, mt.copy())
        mt = np.maximum(a_, b_)
        # lazy rescale: keep the stale max unless some lane grew by more than the threshold.
        if np.any(mt - m_used > lazy_threshold):
            m_new = np.maximum(m_used, mt)
        else:
            m_new = m_used
        corr = np.exp2(m_used - m_new).astype(np.float32)
        o_acc *= corr[None, :, None]
        l_part *= corr
        m_used = m_new
        p = np.exp2(s_acc - m_used[:, None]).astype(np.float32)
        l_part += p.sum(axis=1, dtype=np.float32)
        pregs = pack_p(p, dtype)
        # Oᵀ += Vᵀ·Pᵀ: 4 d blocks x 4 key chunks.
        for kk in range(4):
            for db in range(4):
                a = np.concatenate([ds_read_b64_tr_b16(lds, LDS_V[j % 2] + v_read_addr(lanes) + v_read_imm(db, kk, t_))
                                    for t_ in range(2)], axis=1)
                o_acc[db] = mfma_32x32x16(a, pregs[:, 4 * kk: 4 * kk + 4], o_acc[db], dtype)
    # epilogue: l over both lane halves, normalise, pack, swap, store rows.
    a_, b_ = permlane32_swap(l_part, l_part.copy())
    l_full = a_ + b_
    inv = (1.0 / l_full).astype(np.float32)
    out = np.zeros(32 * ROW_BYTES, np.uint8)
    for db in range(4):
        for st, regs in enumerate(pack_o(o_acc[db] * inv[:, None], dtype)):
            offs = o_voffset(lanes, 16 * st, ROW_BYTES) + o_imm(db)
            for lane in range(64):
                out[offs[lane]: offs[lane] + 16] = regs[lane].view(np.uint8)
    o = b16_to_f32(out.view(np.uint16).reshape(32, HEAD_DIM), dtype)
    lse = ((m_used + np.log2(l_full)) * np.float32(np.log(2.0)))[:32]
    return o, lse
