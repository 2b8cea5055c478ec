"""gemm_bf16: C[M, N] (f32) = A[M, K] (bf16) @ B[N, K]^T (bf16), one 32x32 tile per workgroup.

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

from flyasm.isa.operands import s, v
from flyasm.kernel import Kernel
from flyasm.plan import RegisterPlan

TILE = 32
KSTEP = 16
RSRC_WORD3 = 0x00020000    # gfx9 V# word 3: raw buffer, 32-bit data format
LDS_B = TILE * KSTEP * 2   # B tile follows the A tile in LDS (1024 bytes each)
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


def reference(a, b):
    """torch reference: float32 C = A @ B^T with A [M, K], B [N, K] in bf16."""
    return a.float() @ b.float().T


def build(**_params) -> Kernel:
    P = make_plan()
    k = Kernel("gemm_bf16", block=64, lds=2 * LDS_B, workgroup_ids="xy", plan=P)
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
        k.ds_write_b128(P.ldsw, P.b_stage, offset=LDS_B)
        k.s_waitcnt(lgkmcnt=0)
        k.ds_read_b128(P.a_frag, P.ldsr)
        k.ds_read_b128(P.b_frag, P.ldsr, offset=LDS_B)
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


def grid(m: int, n: int) -> tuple[int, int, int]:
    return (n // TILE, m // TILE, 1)


def run(a, b, backend="emu", kernel=None):
    """C = A @ B^T for A [M, K], B [N, K] bf16 (M, N multiples of 32, K of 16); C starts poisoned."""
    import torch
    from flyasm.run import launch
    (m, kd), (n, kd2) = a.shape, b.shape
    if kd != kd2 or m % TILE or n % TILE or kd % KSTEP:
        raise ValueError(f"gemm_bf16 takes A [M, K], B [N, K] with M, N % 32 == 0 and K % 16 == 0; got {a.shape}, {b.shape}")
    c = torch.full((m, n), float("nan"), dtype=torch.float32)
    kern = kernel or build()
    launch(kern.build(), grid(m, n), 64, c, a.contiguous(), b.contiguous(), m, n, kd, backend=backend,
           kernel=kern.name)
    return c
