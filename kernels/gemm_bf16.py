"""GEMM on v_mfma_f32_32x32x16_bf16 for gfx950: bf16 in, fp32 accumulate. Two layouts:

    build(layout="nn", out_dtype="f32"|"bf16")  C = A·B,  A [M, K], B [K, N] row-major: 64x64 tile,
                                                4 waves, LDS-DMA double buffering, transposing LDS reads
    build(layout="nt")                          C = A·Bᵀ, A [M, K], B [N, K] row-major: 32x32 tile, one
                                                wave, buffer_load -> ds_write -> ds_read (the minimal one)
    c = run(a, b, layout=...);  reference(a, b, layout=...);  grid(M, N, layout=...)

"nn" is the default (the 4-wave LDS-DMA kernel); "nt" is the simple single-wave kernel.

==== layout "nn" ==================================================================================

One workgroup = 256 threads = 4 waves = a 64x64 tile of C; wave w owns the 32x32 sub-tile
(rows 32*(w//2), columns 32*(w%2)), one v_mfma_f32_32x32x16_bf16 accumulator (16 VGPRs).
Why 4 waves on 64x64 rather than one wave on 32x32: each 32-row slice of A and each 32-column
slice of B is used by two waves, so staging through LDS halves the global traffic, and the
workgroup's DMAs are spread over 4 waves (2 A + 2 B instructions per wave per K step).

The MFMA computes the transposed tile, Cᵀ = Bᵀ·Aᵀ (MFMA operand A = B tile, operand B = A tile):
then the D layout (notes §2: vgpr 4*(i//8) + i%4, lane j + 32*((i//4)%2), i = column n, j = row m)
puts 4 consecutive columns of one C row in 4 consecutive VGPRs, and every lane stores with
buffer_store_dwordx4 (f32) or _dwordx2 (bf16) instead of 16 single dwords.

Pipeline of K step t (64 values of k; LDS buffer p = t % 2, 16 KiB each, A then B, no padding):

    s_waitcnt vmcnt(0), s_barrier     tile t landed (every wave's DMAs), step t-1's reads done
    dma       4 buffer_load_dwordx4 … lds: tile t+1 -> buffer 1-p (skipped on the last step)
    mfma      12 ds_read (per 16 k: 1 ds_read_b128 of A, 2 ds_read_b64_tr_b16 of B)
              4 MFMA C += over 16 k each, each after the lgkmcnt that covers its operands

so the DMA of the next tile flies under this tile's reads and MFMAs (double buffering, one
barrier per step). B is row-major [K, N] (k strided), and the MFMA operand wants 8 consecutive k
per lane: ds_read_b64_tr_b16 transposes 4x4 blocks of 16-bit values on the way out of LDS
(notes §3.1), two instructions per operand (k 0..3 | 8..11, then 4..7 | 12..15).

Supported: K a multiple of 64 (≥ 64); any M (rows past M read 0 through A's num_records and
their stores are dropped through C's); N a multiple of 64; leading dimensions lda ≥ K, ldb ≥ N,
ldc ≥ N, multiples of 8 elements (16-byte aligned DMA rows), byte sizes of A, B, C below 2^32.

==== layout "nt" ==================================================================================
gemm_bf16: C[M, N] (f32) = A[M, K] (bf16) @ B[N, K]^T (bf16), one 32x32 tile per workgroup.

One wave per workgroup; grid (N/32, M/32). Each K step of 16:
  buffer_load_dwordx4 (A and B rows, 16 bytes per lane)  -> s_waitcnt vmcnt(0)
  ds_write_b128 (row-major [32][16] tiles in LDS)         -> s_waitcnt lgkmcnt(0)
  ds_read_b128  (MFMA fragments, notes §2)               -> s_waitcnt lgkmcnt(0)
  v_mfma_f32_32x32x16_bf16 acc += A_frag · B_frag
Fragment layout (notes §2, CDNA4 ISA §7.1.4): lane l holds A[i = l % 32][k = 8*(l // 32) + 0..7]
(8 consecutive bf16 = one ds_read_b128), and the same for B[k][j] with j = l % 32. Since B is
stored [N][K], its rows are the MFMA's B columns, so both tiles use the same LDS addressing.
Output: D register r of lane l is C[i][j] with j = l % 32, i = 8*(r // 4) + 4*(l // 32) + r % 4.
Requires M, N multiples of 32 and K a multiple of 16 (buffer num_records bound every access).
"""
from __future__ import annotations

from flyasm import Kernel, m0, s, v
from flyasm.plan import RegisterPlan

RSRC_WORD3 = 0x00020000        # raw buffer, 32-bit data format (gfx9 V# word 3, as kernels/fa_fwd.py)
TM = TN = 64                   # workgroup tile of C
TK = 64                        # k per step
WAVES = 4
ROW_BYTES = TK * 2             # one LDS row of an A tile (64 k) or a B tile (64 n), no padding
TILE_BYTES = 64 * ROW_BYTES    # 8 KiB
A_LDS = (0, 2 * TILE_BYTES)    # buffer p: A at 16 KiB * p, B right after it
B_LDS = (TILE_BYTES, 3 * TILE_BYTES)
BUF_STRIDE = 2 * TILE_BYTES    # buffer 1 = buffer 0 + 16 KiB: one read base, the buffer in the immediate
LDS_BYTES = 4 * TILE_BYTES     # 32 KiB: 5 workgroups per CU by LDS (160 KiB)
DMA_PER_WAVE = 2               # per tensor: 8 chunks of 1 KiB (8 rows) per tile / 4 waves

# ---- the register plan (inclusive ranges) --------------------------------------------------------
#  region      registers      holds
#  ids         v[0:1]         workitem id (v0), lane id
#  dma_voff    v[2:6]         per-lane global byte offsets of this wave's 2 A and 2 B DMA chunks
#                             (of tile 0), DMA address scratch
#  lds_addr    v[7:8]         per-lane LDS read bases in buffer 0: A (ds_read_b128), B (tr_b16)
#  c_voff      v[9]           per-lane byte offset of this lane's C row segment
#  tmp         v[10:15]       prologue scratch
#  acc         v[16:31]       Cᵀ accumulator of the wave's 32x32 tile (f32; packed to bf16 in place)
#  frag        v[32:63]       per 16 k: MFMA operand A = B tile (4 VGPRs), operand B = A tile (4 VGPRs)
#  sys         s[0:3]         kernarg pointer, workgroup id x (N tile), y (M tile)
#  wave        s[4]           wave id in the workgroup
#  args        s[8:19]        c, a, b pointers, M, N, K, lda, ldb, ldc
#  rsrc        s[20:31]       V#s of A, B, C
#  loop        s[32:38]       steps, step, A tile offset, B tile offset, B step bytes, temps
#  dma_m0      s[40:47]       M0 of every DMA: (A, B) x buffer x chunk
PLAN_REGIONS = {
    "ids": v[0:1], "dma_voff": v[2:6], "lds_addr": v[7:8], "c_voff": v[9:9], "tmp": v[10:15],
    "acc": v[16:31], "frag": v[32:63],
    "sys": s[0:3], "wave": s[4:4], "args": s[8:19], "rsrc": s[20:31], "loop": s[32:38], "dma_m0": s[40:47],
}
LANE = v[1]
A_DMA, B_DMA, DMA_TMP = (v[2], v[3]), (v[4], v[5]), v[6]
A_ADDR, B_ADDR = v[7], v[8]
C_VOFF = v[9]
TMP = v[10:15]
ACC = v[16:31]
FRAG = v[32:63]

WAVE = s[4]
ARG_SGPR = {"c": s[8:9], "a": s[10:11], "b": s[12:13], "M": s[14], "N": s[15], "K": s[16],
            "lda": s[17], "ldb": s[18], "ldc": s[19]}
RS_A, RS_B, RS_C = s[20:23], s[24:27], s[28:31]
STEPS, STEP, A_OFF, B_OFF, B_STEP, ST0, ST1 = (s[i] for i in range(32, 39))
DMA_M0 = s[40:47]
ARGS = [("c", "ptr"), ("a", "ptr"), ("b", "ptr"), ("M", "u32"), ("N", "u32"), ("K", "u32"),
        ("lda", "u32"), ("ldb", "u32"), ("ldc", "u32")]


def _reference_nn(a, b):
    """torch float32 reference: A [M, K] · B [K, N] with the bf16 inputs taken exactly."""
    return a.float() @ b.float()


def m0_of(tensor: str, buf: int, i: int):
    return DMA_M0[4 * (tensor == "b") + 2 * buf + i]


class _Builder:
    def __init__(self, out_dtype: str):
        if out_dtype not in ("f32", "bf16"):
            raise ValueError(f"out_dtype is 'f32' or 'bf16', not {out_dtype!r}")
        self.out_dtype = out_dtype
        name = f"gemm_bf16_nn_{out_dtype}out"
        self.plan = RegisterPlan(name, regions=PLAN_REGIONS, strict=True)
        self.k = Kernel(name, block=WAVES * 64, lds=LDS_BYTES, arg_layout="natural", workgroup_ids="xy",
                        plan=self.plan)
        self.args = {n: self.k.arg(n, t) for n, t in ARGS}

    def rsrc(self, dst, ptr, rows, row_elems, esz):
        """dst = V#(ptr, num_records = rows * row_elems * esz bytes): past the end reads 0, drops stores."""
        k = self.k
        k.s_mul_i32(dst[2], rows, row_elems)
        k.s_lshl_b32(dst[2], dst[2], esz.bit_length() - 1)
        k.s_mov_b32(dst[0], ptr[0])
        k.s_and_b32(dst[1], ptr[1], 0xFFFF)              # base[47:32], stride 0: raw bytes
        k.s_mov_b32(dst[3], RSRC_WORD3)

    # ---- prologue -----------------------------------------------------------------------------
    def prologue(self):
        k, A = self.k, ARG_SGPR
        with k.region("args", expect={"smem": len(A), "waitcnt": 1}):
            for n, reg in A.items():
                (k.s_load_dwordx2 if self.args[n].type == "ptr" else k.s_load_dword)(reg, k.kernarg_ptr,
                                                                                     self.args[n].offset)
            k.s_waitcnt(lgkmcnt=0)                        # SMEM may return out of order
        with k.region("setup"):
            wg_n, wg_m = k.workgroup_id("x"), k.workgroup_id("y")
            k.v_readfirstlane_b32(WAVE, v[0])
            k.s_lshr_b32(WAVE, WAVE, 6)                   # wave = tid / 64, uniform
            k.v_and_b32(LANE, 63, v[0])
            self.rsrc(RS_A, A["a"], A["M"], A["lda"], 2)
            self.rsrc(RS_B, A["b"], A["K"], A["ldb"], 2)
            self.rsrc(RS_C, A["c"], A["M"], A["ldc"], 4 if self.out_dtype == "f32" else 2)
            k.s_lshr_b32(STEPS, A["K"], 6)                # K / 64 steps (runtime trip count)
            k.s_lshl_b32(B_STEP, A["ldb"], 7)             # 64 rows of B in bytes
            # M0 of each DMA: buffer base + 1 KiB * chunk, chunk = wave + 4*i
            k.s_lshl_b32(ST0, WAVE, 10)
            for t, bases in (("a", A_LDS), ("b", B_LDS)):
                for buf in range(2):
                    for i in range(DMA_PER_WAVE):
                        k.s_add_u32(m0_of(t, buf, i), ST0, bases[buf] + 4096 * i)
            # DMA chunk rows: row = 8*chunk + lane/8 = 8*wave + 32*i + lane/8, 16 bytes at (lane%8)*16
            k.s_lshl_b32(ST0, WAVE, 3)
            k.v_lshrrev_b32(TMP[0], 3, LANE)
            k.v_add_u32(TMP[0], ST0, TMP[0])              # row of chunk i=0 inside the tile
            k.v_and_b32(TMP[1], 7, LANE)
            k.v_lshlrev_b32(TMP[1], 4, TMP[1])            # byte column
            k.s_lshl_b32(ST1, A["lda"], 1)                # lda bytes
            k.s_lshl_b32(ST0, wg_m, 6)                    # first row of the M tile
            k.v_add_u32(TMP[2], ST0, TMP[0])
            for i in range(DMA_PER_WAVE):                 # A[m0 + row][k = (lane%8)*8 ..]
                k.v_add_u32(TMP[3], 32 * i, TMP[2])
                k.v_mul_lo_u32(A_DMA[i], TMP[3], ST1)
                k.v_add_u32(A_DMA[i], A_DMA[i], TMP[1])
            k.s_lshl_b32(ST1, A["ldb"], 1)                # ldb bytes
            k.s_lshl_b32(ST0, wg_n, 7)                    # n0 * 2 bytes
            for i in range(DMA_PER_WAVE):                 # B[k = row][n0 + (lane%8)*8 ..]
                k.v_add_u32(TMP[3], 32 * i, TMP[0])
                k.v_mul_lo_u32(B_DMA[i], TMP[3], ST1)
                k.v_add3_u32(B_DMA[i], B_DMA[i], TMP[1], ST0)
            # LDS read bases (buffer 0).  A (operand B, ds_read_b128): row wm*32 + lane%32,
            # k = 8*(lane/32) -> byte 16*(lane/32); the 16-k step kk is the immediate 32*kk.
            k.s_lshr_b32(ST0, WAVE, 1)                    # wm
            k.s_lshl_b32(ST0, ST0, 5 + 7)                 # wm*32 rows * 128 bytes
            k.v_and_b32(TMP[0], 31, LANE)
            k.v_lshlrev_b32(TMP[0], 7, TMP[0])
            k.v_lshrrev_b32(TMP[1], 5, LANE)
            k.v_lshlrev_b32(TMP[1], 4, TMP[1])
            k.v_add3_u32(A_ADDR, ST0, TMP[0], TMP[1])
            # B (operand A, ds_read_b64_tr_b16, notes §3.1): in 16-lane block g the lanes 4r..4r+3
            # read row k = 8*(g//2) + r, columns nw + 16*(g%2) + 4*(lane%4) .. +3; lane j of the block
            # then holds column nw + 16*(g%2) + j for k = 8*(g//2) + 0..3 (lane/32 picks k 0-7 | 8-15).
            k.v_lshrrev_b32(TMP[0], 5, LANE)
            k.v_lshlrev_b32(TMP[0], 3, TMP[0])            # 8*(lane/32)
            k.v_bfe_u32(TMP[1], LANE, 2, 2)               # r
            k.v_add_u32(TMP[0], TMP[0], TMP[1])
            k.v_lshlrev_b32(TMP[0], 7, TMP[0])            # row * 128
            k.v_and_b32(TMP[1], 16, LANE)                 # 16*(g%2)
            k.v_and_b32(TMP[2], 3, LANE)
            k.v_lshl_add_u32(TMP[1], TMP[2], 2, TMP[1])   # + 4*(lane%4)
            k.v_lshlrev_b32(TMP[1], 1, TMP[1])            # columns -> bytes
            k.s_and_b32(ST0, WAVE, 1)                     # wn
            k.s_lshl_b32(ST0, ST0, 6)                     # wn*32 columns * 2 bytes
            k.s_add_u32(ST0, ST0, B_LDS[0])
            k.v_add3_u32(B_ADDR, ST0, TMP[0], TMP[1])
            # C: row m0 + wm*32 + lane%32, columns n0 + wn*32 + 4*(lane/32) + 8q (q = VGPR group)
            k.s_lshr_b32(ST0, WAVE, 1)
            k.s_lshl_b32(ST0, ST0, 5)
            k.s_lshl_b32(ST1, wg_m, 6)
            k.s_add_u32(ST0, ST0, ST1)
            k.v_and_b32(TMP[0], 31, LANE)
            k.v_add_u32(TMP[0], ST0, TMP[0])
            k.v_mul_lo_u32(C_VOFF, TMP[0], A["ldc"])      # row * ldc (elements)
            k.s_and_b32(ST0, WAVE, 1)
            k.s_lshl_b32(ST0, ST0, 5)
            k.s_lshl_b32(ST1, wg_n, 6)
            k.s_add_u32(ST0, ST0, ST1)
            k.v_lshrrev_b32(TMP[1], 5, LANE)
            k.v_lshl_add_u32(TMP[1], TMP[1], 2, ST0)      # column
            k.v_add_u32(C_VOFF, C_VOFF, TMP[1])
            k.v_lshlrev_b32(C_VOFF, 2 if self.out_dtype == "f32" else 1, C_VOFF)
        with k.region("zero_acc", expect={"valu": 16}):
            for i in range(16):
                k.v_mov_b32(ACC[i], 0)
        with k.region("dma_first", expect={"lds_dma": 4}):
            k.s_mov_b32(A_OFF, 0)
            k.s_mov_b32(B_OFF, 0)
            self.dma(0)
        k.s_mov_b32(STEP, 0)

    # ---- clusters -----------------------------------------------------------------------------
    def dma(self, buf):
        """This wave's 2 A and 2 B chunks of the tile at (A_OFF, B_OFF) -> LDS buffer buf."""
        k = self.k
        for t, rs, voffs, off in (("a", RS_A, A_DMA, A_OFF), ("b", RS_B, B_DMA, B_OFF)):
            for i in range(DMA_PER_WAVE):
                k.s_mov_b32(m0, m0_of(t, buf, i))
                k.v_add_u32(DMA_TMP, off, voffs[i])      # also the 1 wait state SALU m0 -> LDS-DMA needs
                k.buffer_load_dwordx4(DMA_TMP, rs, 0, offen=True, lds=True).lds_buffer = f"{t}{buf}"

    def mfma_cluster(self, buf):
        """Cᵀ += Bᵀ·Aᵀ over 64 k from LDS buffer buf: 12 reads issued up front, 4 MFMAs each after
        the lgkmcnt that covers its own 3 reads (LDS reads return in order)."""
        k = self.k
        base = buf * BUF_STRIDE
        for kk in range(4):
            fa, fb = FRAG[8 * kk:8 * kk + 3], FRAG[8 * kk + 4:8 * kk + 7]
            for h in range(2):                            # k 0..3|8..11, then 4..7|12..15
                k.ds_read_b64_tr_b16(fa[2 * h:2 * h + 1], B_ADDR,
                                     offset=base + (16 * kk + 4 * h) * ROW_BYTES).lds_buffer = f"b{buf}"
            k.ds_read_b128(fb, A_ADDR, offset=base + 32 * kk).lds_buffer = f"a{buf}"
        for kk in range(4):
            k.s_waitcnt(lgkmcnt=3 * (3 - kk))
            k.v_mfma_f32_32x32x16_bf16(ACC, FRAG[8 * kk:8 * kk + 3], FRAG[8 * kk + 4:8 * kk + 7], ACC)

    def step(self, p):
        """One 64-k step reading LDS buffer p while the next tile flies into buffer 1-p."""
        k = self.k
        with k.region(f"step{p}"):
            k.s_waitcnt(vmcnt=0)                          # this wave's DMAs of tile t
            k.s_barrier()                                 # every wave's; and step t-1's reads are done
            k.s_add_u32(STEP, STEP, 1)
            k.s_cmp_ge_u32(STEP, STEPS)
            k.s_cbranch_scc1(k.L(f"no_dma{p}"))           # last step: nothing left to prefetch
            with k.region("dma", expect={"lds_dma": 4, "salu": (6, 6)}):
                k.s_add_u32(A_OFF, A_OFF, ROW_BYTES)      # next 64 k of A: 128 bytes along the row
                k.s_add_u32(B_OFF, B_OFF, B_STEP)         # next 64 rows of B
                self.dma(1 - p)
            k.label(f"no_dma{p}")
            with k.region("mfma", expect={"mfma": 4, "ds_read": 12, "waitcnt": 4}):
                self.mfma_cluster(p)
            k.s_cmp_lt_u32(STEP, STEPS)

    def epilogue(self):
        k = self.k
        with k.region("store_c", expect={"vmem_store": 4}):
            k.s_nop(7)                                    # last MFMA -> VMEM/VALU read of its D:
            k.s_nop(3)                                    # 12 wait states (8-pass XDL, notes §4.2)
            for q in range(4):                            # VGPRs 4q..4q+3 = columns 8q + 4*(lane/32) + 0..3
                regs = ACC[4 * q:4 * q + 3]
                if self.out_dtype == "f32":
                    k.buffer_store_dwordx4(regs, C_VOFF, RS_C, 0, offen=True, offset=32 * q)
                else:
                    k.v_cvt_pk_bf16_f32(regs[0], regs[0], regs[1])
                    k.v_cvt_pk_bf16_f32(regs[1], regs[2], regs[3])
                    k.buffer_store_dwordx2(regs[0:1], C_VOFF, RS_C, 0, offen=True, offset=16 * q)
        k.s_endpgm()

    def build(self):
        k = self.k
        self.prologue()
        k.label("loop")
        self.step(0)
        k.s_cbranch_scc0(k.L("tail"))
        self.step(1)
        k.s_cbranch_scc1(k.L("loop"))
        k.label("tail")
        self.epilogue()
        return k


def _build_nn(out_dtype: str = "f32") -> Kernel:
    """The GEMM kernel; M, N, K and the leading dimensions are runtime arguments (see the docstring)."""
    return _Builder(out_dtype).build()


def _grid_nn(M: int, N: int) -> tuple[int, int, int]:
    return (-(-N // TN), -(-M // TM), 1)


def check_shapes(M, N, K, lda, ldb, ldc, out_bytes):
    if K < TK or K % TK:
        raise ValueError(f"K = {K} must be a positive multiple of {TK}")
    if N % TN:
        raise ValueError(f"N = {N} must be a multiple of {TN}")
    if M < 1:
        raise ValueError("M must be ≥ 1")
    if lda < K or ldb < N or ldc < N or lda % 8 or ldb % 8 or ldc % 8:
        raise ValueError("leading dimensions must cover their rows and be multiples of 8 elements")
    if max(M * lda * 2, K * ldb * 2, M * ldc * out_bytes) >= 1 << 32:
        raise ValueError("A, B and C must each be smaller than 4 GiB (32-bit num_records)")


def _run_nn(a, b, out_dtype: str = "f32", backend: str = "emu", kernel: Kernel | None = None, seed=None):
    """C = A·B through the kernel; a [M, K], b [K, N] bf16 (row-major views with unit column stride).
    C starts as NaN (poisoned) so a missed element shows."""
    import torch
    from flyasm.run import launch
    if a.dtype != torch.bfloat16 or b.dtype != torch.bfloat16:
        raise ValueError("a and b must be bfloat16")
    if a.stride(-1) != 1 or b.stride(-1) != 1:
        a, b = a.contiguous(), b.contiguous()
    M, K = a.shape
    K2, N = b.shape
    if K2 != K:
        raise ValueError(f"inner dimensions differ: {a.shape} x {b.shape}")
    c = torch.full((M, N), float("nan"), dtype=torch.float32 if out_dtype == "f32" else torch.bfloat16)
    check_shapes(M, N, K, a.stride(0), b.stride(0), c.stride(0), c.element_size())
    kern = kernel or _build_nn(out_dtype)
    launch(kern, _grid_nn(M, N), WAVES * 64, c, a, b, M, N, K, a.stride(0), b.stride(0), c.stride(0),
           backend=backend, seed=seed)
    return c


# ==== layout "nt" ================================================================================
TILE = 32
KSTEP = 16
NT_LDS_B = TILE * KSTEP * 2   # B tile follows the A tile in LDS (1024 bytes each)
MFMA_TO_READ_NOP = 11      # s_nop 11 = 12 wait states: 8-pass XDL MFMA -> VMEM reads D (notes §4.2)


def make_plan() -> RegisterPlan:
    return RegisterPlan("gemm_bf16", regions={
        # VGPRs                                 # what they hold
        "tid": v[0:0],                          # workitem id x (0..63)
        "lane": v[1:1], "half": v[2:2],         # l % 32, l // 32
        "aoff": v[3:3], "boff": v[4:4],         # global byte offsets of this lane's A/B row chunk
        "coff": v[5:5],                         # global byte offset of C[i0][j]
        "ldsw": v[6:6], "ldsr": v[7:7],         # LDS write (l*16) / fragment read address
        "tmp": v[8:9],
        "a_stage": v[12:15], "b_stage": v[16:19],   # global -> LDS staging
        "a_frag": v[20:23], "b_frag": v[24:27],     # MFMA A/B operands (8 bf16 each)
        "acc": v[32:47],                            # 32x32 f32 accumulator (16 per lane)
        # SGPRs
        "kernarg": s[0:1], "wg": s[2:3],
        "c_ptr": s[4:5], "a_ptr": s[6:7], "b_ptr": s[8:9], "dims": s[10:12],   # M, N, K
        "koff": s[13:13], "iters": s[14:14], "row0": s[15:15], "col0": s[16:16],
        "rec": s[17:17], "soff": s[18:18],
        "rsrc_c": s[20:23], "rsrc_a": s[24:27], "rsrc_b": s[28:31],
    }, strict=True)


def _reference_nt(a, b):
    """torch reference: float32 C = A @ B^T with A [M, K], B [N, K] in bf16."""
    return a.float() @ b.float().T


def _build_nt() -> Kernel:
    P = make_plan()
    k = Kernel("gemm_bf16", block=64, lds=2 * NT_LDS_B, workgroup_ids="xy", plan=P)
    c_arg, a_arg, b_arg = k.arg("c", "ptr"), k.arg("a", "ptr"), k.arg("b", "ptr")
    m_arg, n_arg, k_arg = k.arg("M", "i32"), k.arg("N", "i32"), k.arg("K", "i32")
    M, N, K = P.dims[0], P.dims[1], P.dims[2]

    with k.region("args", expect={"smem": 6, "waitcnt": 1}):
        k.s_load_dwordx2(P.c_ptr, k.kernarg_ptr, c_arg.offset)
        k.s_load_dwordx2(P.a_ptr, k.kernarg_ptr, a_arg.offset)
        k.s_load_dwordx2(P.b_ptr, k.kernarg_ptr, b_arg.offset)
        k.s_load_dword(M, k.kernarg_ptr, m_arg.offset)
        k.s_load_dword(N, k.kernarg_ptr, n_arg.offset)
        k.s_load_dword(K, k.kernarg_ptr, k_arg.offset)
        k.s_waitcnt(lgkmcnt=0)

    with k.region("rsrc"):
        for rs, ptr, rows, elem in ((P.rsrc_a, P.a_ptr, M, 2), (P.rsrc_b, P.b_ptr, N, 2), (P.rsrc_c, P.c_ptr, N, 4)):
            cols = K if elem == 2 else M
            k.s_mul_i32(P.rec, rows, cols)                 # elements; bounds every access
            k.s_lshl_b32(P.rec, P.rec, elem.bit_length() - 1)
            k.s_mov_b32(rs[0], ptr[0])
            k.s_and_b32(rs[1], ptr[1], 0xFFFF)
            k.s_mov_b32(rs[2], P.rec)
            k.s_mov_b32(rs[3], RSRC_WORD3)

    with k.region("addresses"):
        k.s_lshl_b32(P.row0, k.workgroup_id("y"), 5)       # tile_m * 32
        k.s_lshl_b32(P.col0, k.workgroup_id("x"), 5)       # tile_n * 32
        k.v_and_b32(P.lane, 31, P.tid)
        k.v_lshrrev_b32(P.half, 5, P.tid)
        # global loads: lane l copies row l // 2, k-chunk (l % 2) * 8 of the tile (32 contiguous bytes per row)
        k.v_and_b32(P.tmp[0], 1, P.tid)
        k.v_lshlrev_b32(P.tmp[0], 3, P.tmp[0])
        k.v_lshrrev_b32(P.tmp[1], 1, P.tid)
        for off, first in ((P.aoff, P.row0), (P.boff, P.col0)):
            k.v_add_u32(off, first, P.tmp[1])
            k.v_mul_lo_u32(off, off, K)
            k.v_add_u32(off, off, P.tmp[0])
            k.v_lshlrev_b32(off, 1, off)                    # bf16 -> bytes
        # LDS: lane l writes bytes [16l, 16l+16) (row-major [32][16] tile); fragments read row l % 32,
        # k-chunk l // 32
        k.v_lshlrev_b32(P.ldsw, 4, P.tid)
        k.v_lshlrev_b32(P.ldsr, 5, P.lane)
        k.v_lshlrev_b32(P.tmp[0], 4, P.half)
        k.v_add_u32(P.ldsr, P.ldsr, P.tmp[0])
        # C: row row0 + 4*(l // 32), column col0 + l % 32 (register r adds 8*(r//4) + r%4 rows)
        k.v_lshlrev_b32(P.coff, 2, P.half)
        k.v_add_u32(P.coff, P.row0, P.coff)
        k.v_mul_lo_u32(P.coff, P.coff, N)
        k.v_add_u32(P.coff, P.col0, P.coff)
        k.v_add_u32(P.coff, P.coff, P.lane)
        k.v_lshlrev_b32(P.coff, 2, P.coff)

    with k.region("init", expect={"valu": 16}):
        for r in P.acc:
            k.v_mov_b32(r, 0)
        k.s_mov_b32(P.koff, 0)
        k.s_lshr_b32(P.iters, K, 4)                         # runtime trip count K / 16
        k.s_cmp_eq_u32(P.iters, 0)
        k.s_cbranch_scc1("k_done")

    k.label("k_loop")
    with k.region("k_loop", expect={"vmem_load": 2, "ds_write": 2, "ds_read": 2, "mfma": 1, "waitcnt": 3}):
        k.buffer_load_dwordx4(P.a_stage, P.aoff, P.rsrc_a, P.koff, offen=True)
        k.buffer_load_dwordx4(P.b_stage, P.boff, P.rsrc_b, P.koff, offen=True)
        k.s_waitcnt(vmcnt=0)
        k.ds_write_b128(P.ldsw, P.a_stage)
        k.ds_write_b128(P.ldsw, P.b_stage, offset=NT_LDS_B)
        k.s_waitcnt(lgkmcnt=0)
        k.ds_read_b128(P.a_frag, P.ldsr)
        k.ds_read_b128(P.b_frag, P.ldsr, offset=NT_LDS_B)
        k.s_waitcnt(lgkmcnt=0)
        k.v_mfma_f32_32x32x16_bf16(P.acc, P.a_frag, P.b_frag, P.acc)
        k.s_add_u32(P.koff, P.koff, KSTEP * 2)              # next 16 columns of K, in bytes
        k.s_sub_u32(P.iters, P.iters, 1)
        k.s_cmp_lg_u32(P.iters, 0)
        k.s_cbranch_scc1("k_loop")
    k.label("k_done")

    with k.region("store", expect={"vmem_store": 16, "nop": 1}):
        k.s_nop(MFMA_TO_READ_NOP)                           # MFMA D -> buffer_store reads it: 12 wait states
        for r in range(16):
            rows = 8 * (r // 4) + r % 4
            k.s_mul_i32(P.soff, N, rows * 4)                 # row offset in bytes
            k.buffer_store_dword(P.acc[r], P.coff, P.rsrc_c, P.soff, offen=True)
    k.s_endpgm()
    return k


def _grid_nt(m: int, n: int) -> tuple[int, int, int]:
    return (n // TILE, m // TILE, 1)


def _run_nt(a, b, backend="emu", kernel=None):
    """C = A @ B^T for A [M, K], B [N, K] bf16 (M, N multiples of 32, K of 16); C starts poisoned."""
    import torch
    from flyasm.run import launch
    (m, kd), (n, kd2) = a.shape, b.shape
    if kd != kd2 or m % TILE or n % TILE or kd % KSTEP:
        raise ValueError(f"gemm_bf16 takes A [M, K], B [N, K] with M, N % 32 == 0 and K % 16 == 0; got {a.shape}, {b.shape}")
    c = torch.full((m, n), float("nan"), dtype=torch.float32)
    kern = kernel or _build_nt()
    launch(kern.build(), _grid_nt(m, n), 64, c, a.contiguous(), b.contiguous(), m, n, kd, backend=backend,
           kernel=kern.name)
    return c


# ---- one entry point per operation, both layouts -------------------------------------------------
LAYOUTS = ("nn", "nt")


def _layout(layout):
    if layout not in LAYOUTS:
        raise ValueError(f"layout is 'nn' (C = A·B, B [K, N]) or 'nt' (C = A·Bᵀ, B [N, K]), not {layout!r}")
    return layout


def build(layout: str = "nn", out_dtype: str = "f32") -> Kernel:
    """The GEMM kernel for `layout`; sizes are runtime arguments (limits in the module docstring)."""
    if _layout(layout) == "nn":
        return _build_nn(out_dtype)
    if out_dtype != "f32":
        raise ValueError("layout 'nt' writes float32 C only")
    return _build_nt()


def reference(a, b, layout: str = "nn"):
    """torch float32 reference of C for `layout` (bf16 inputs taken exactly)."""
    return _reference_nn(a, b) if _layout(layout) == "nn" else _reference_nt(a, b)


def grid(m: int, n: int, layout: str = "nn") -> tuple[int, int, int]:
    return _grid_nn(m, n) if _layout(layout) == "nn" else _grid_nt(m, n)


def run(a, b, backend="emu", kernel=None, layout: str = "nn", out_dtype: str = "f32", seed=None):
    """C for `layout` through the kernel in the emulator (or on 'hip'); C starts poisoned (NaN)."""
    if _layout(layout) == "nn":
        return _run_nn(a, b, out_dtype=out_dtype, backend=backend, kernel=kernel, seed=seed)
    if out_dtype != "f32" or seed is not None:
        raise ValueError("layout 'nt' takes neither out_dtype nor seed")
    return _run_nt(a, b, backend=backend, kernel=kernel)
