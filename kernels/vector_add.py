"""vector_add: out[i] = x[i] + y[i] (f32 or f16), 256 threads per workgroup, buffer loads/stores.

    k = build(n_per_block=4096, dtype="f32")
    out = run(x, y)                       # x, y: 1-D torch tensors of the same dtype and length n

Bounds come from the buffer resources (V# = pointer + num_records), not from EXEC masks:
  * body: every lane moves whole 16-byte vectors (buffer_load_dwordx4), `n_per_block / 256 /
    (16 / element size)` of them; the V#s say num_records = 16 * (n // per_vec) bytes, so vectors
    past the last whole one read 0 and their stores are dropped (CDNA4 ISA §9.1.8 range checking);
    no access is ever partly in range, so the result does not depend on how silicon treats one.
  * tail: the n % per_vec elements after the last whole vector; only the workgroup holding them
    runs it (uniform branch), with num_records raised to n * size and one element per lane, so
    lanes past n are again dropped by the range check.
"""
from __future__ import annotations

from flyasm import Kernel, s, v
from flyasm.plan import RegisterPlan

BLOCK = 256
RSRC_WORD3 = 0x00020000   # gfx9 V# word 3: raw buffer, 32-bit data format (same value as kernels/fa_fwd.py)
MAX_VECS = 4              # 16-byte vectors per lane per workgroup (registers the plan reserves)
DTYPES = {"f32": 4, "f16": 2}

# ---- the register plan (inclusive ranges) --------------------------------------------------------
#  region      registers    holds
#  tid         v0           workitem id
#  voff        v[1:4]       byte offset of each of this lane's vectors (same for x, y, out)
#  xv          v[8:23]      x vectors (4 VGPRs each), then x + y in place
#  yv          v[24:39]     y vectors
#  tail        v[40:42]     tail: byte offset, x element, y element
#  kernarg/wg  s[0:2]       kernarg pointer, workgroup id x
#  args        s[4:10]      out, x, y pointers, n
#  sizes       s[11:15]     whole-vector bytes, n bytes, workgroup byte base, tail byte base, temp
#  rsrc_*      s[16:27]     V#s of out, x, y
PLAN = dict(regions={
    "tid": v[0:0], "voff": v[1:4], "xv": v[8:23], "yv": v[24:39], "tail": v[40:42],
    "kernarg": s[0:1], "wg": s[2:2], "out_ptr": s[4:5], "x_ptr": s[6:7], "y_ptr": s[8:9], "n": s[10:10],
    "sizes": s[11:15], "rsrc_out": s[16:19], "rsrc_x": s[20:23], "rsrc_y": s[24:27]}, strict=True)
VEC_BYTES, N_BYTES, WG_BASE, TAIL_BASE, TMP = (s[i] for i in range(11, 16))
T_OFF, T_X, T_Y = v[40], v[41], v[42]


def reference(x, y):
    return x + y


def _per_block(n_per_block: int, dtype: str) -> int:
    """16-byte vectors per lane; n_per_block must fill 1..MAX_VECS of them per lane exactly."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype is one of {sorted(DTYPES)}, not {dtype!r}")
    per_pass = BLOCK * 16 // DTYPES[dtype]            # elements one dwordx4 per lane covers
    vecs, rem = divmod(n_per_block, per_pass)
    if rem or not 1 <= vecs <= MAX_VECS:
        raise ValueError(f"n_per_block for {dtype} is a multiple of {per_pass} up to {MAX_VECS * per_pass}, "
                         f"not {n_per_block}")
    return vecs


def build(n_per_block: int = 4096, dtype: str = "f32") -> Kernel:
    vecs = _per_block(n_per_block, dtype)
    esz = DTYPES[dtype]
    plan = RegisterPlan(f"vector_add_{dtype}_{n_per_block}", **PLAN)
    k = Kernel(f"vector_add_{dtype}_{n_per_block}", block=BLOCK, plan=plan, arg_layout="natural")
    out, x, y, n = k.arg("out", "ptr"), k.arg("x", "ptr"), k.arg("y", "ptr"), k.arg("n", "u32")
    P = plan
    add = k.v_add_f32 if dtype == "f32" else k.v_pk_add_f16

    with k.region("args", expect={"smem": 4, "waitcnt": 1}):
        k.s_load_dwordx2(P.out_ptr, k.kernarg_ptr, out.offset)
        k.s_load_dwordx2(P.x_ptr, k.kernarg_ptr, x.offset)
        k.s_load_dwordx2(P.y_ptr, k.kernarg_ptr, y.offset)
        k.s_load_dword(P.n, k.kernarg_ptr, n.offset)
        k.s_waitcnt(lgkmcnt=0)   # SMEM returns out of order: only lgkmcnt(0) covers them
    with k.region("rsrc"):
        k.s_lshl_b32(N_BYTES, P.n, esz.bit_length() - 1)      # n * size
        k.s_and_b32(VEC_BYTES, N_BYTES, ~15 & 0xFFFFFFFF)     # whole 16-byte vectors only
        for rs, ptr in ((P.rsrc_out, P.out_ptr), (P.rsrc_x, P.x_ptr), (P.rsrc_y, P.y_ptr)):
            k.s_mov_b32(rs[0], ptr[0])
            k.s_and_b32(rs[1], ptr[1], 0xFFFF)              # base[47:32]; stride 0: bytes are records
            k.s_mov_b32(rs[2], VEC_BYTES)
            k.s_mov_b32(rs[3], RSRC_WORD3)
    with k.region("offsets", expect={"valu": 1 + vecs}):
        # lane vector u of this workgroup: byte wg*bytes_per_block + u*4096 + tid*16 (coalesced)
        k.s_mul_i32(WG_BASE, k.workgroup_id("x"), n_per_block * esz)
        k.v_lshlrev_b32(T_OFF, 4, k.workitem_id)
        k.v_add_u32(P.voff[0], WG_BASE, T_OFF)
        for u in range(1, vecs):
            k.s_add_u32(TMP, WG_BASE, u * BLOCK * 16)
            k.v_add_u32(P.voff[u], TMP, T_OFF)
    with k.region("body", expect={"vmem_load": 2 * vecs, "vmem_store": vecs, "waitcnt": vecs}):
        for u in range(vecs):
            k.buffer_load_dwordx4(P.xv[4 * u:4 * u + 3], P.voff[u], P.rsrc_x, 0, offen=True)
            k.buffer_load_dwordx4(P.yv[4 * u:4 * u + 3], P.voff[u], P.rsrc_y, 0, offen=True)
        for u in range(vecs):
            k.s_waitcnt(vmcnt=2 * (vecs - 1 - u))           # x_u and y_u landed; later vectors fly
            for e in range(4):
                add(P.xv[4 * u + e], P.xv[4 * u + e], P.yv[4 * u + e])
            k.buffer_store_dwordx4(P.xv[4 * u:4 * u + 3], P.voff[u], P.rsrc_out, 0, offen=True)
    # tail: only when n % per_vec != 0 and its first element lies in this workgroup's range
    with k.region("tail", expect={"vmem_load": 2, "vmem_store": 1}):
        k.s_cmp_eq_u32(VEC_BYTES, N_BYTES)
        k.s_cbranch_scc1(k.L("done"))
        k.s_sub_u32(TMP, VEC_BYTES, WG_BASE)
        k.s_cmp_lt_u32(TMP, n_per_block * esz)              # unsigned: also false for earlier workgroups
        k.s_cbranch_scc0(k.L("done"))
        for rs in (P.rsrc_out, P.rsrc_x, P.rsrc_y):
            k.s_mov_b32(rs[2], N_BYTES)                      # now every element up to n is in range
        k.v_lshlrev_b32(T_OFF, esz.bit_length() - 1, k.workitem_id)
        k.v_add_u32(T_OFF, VEC_BYTES, T_OFF)                 # lanes past n: out of range, dropped
        if dtype == "f32":
            k.buffer_load_dword(T_X, T_OFF, P.rsrc_x, 0, offen=True)
            k.buffer_load_dword(T_Y, T_OFF, P.rsrc_y, 0, offen=True)
            k.s_waitcnt(vmcnt=0)
            k.v_add_f32(T_X, T_X, T_Y)
            k.buffer_store_dword(T_X, T_OFF, P.rsrc_out, 0, offen=True)
        else:
            k.buffer_load_ushort(T_X, T_OFF, P.rsrc_x, 0, offen=True)
            k.buffer_load_ushort(T_Y, T_OFF, P.rsrc_y, 0, offen=True)
            k.s_waitcnt(vmcnt=0)
            k.v_add_f16(T_X, T_X, T_Y)
            k.buffer_store_short(T_X, T_OFF, P.rsrc_out, 0, offen=True)
    k.label("done")
    k.s_endpgm()
    return k


def grid(n: int, n_per_block: int = 4096) -> tuple[int, int, int]:
    """Workgroups (HIP gridDim) covering n elements."""
    return (max(1, -(-n // n_per_block)), 1, 1)


def run(x, y, backend: str = "emu", n_per_block: int = 4096, kernel: Kernel | None = None, seed=None):
    """out = x + y through the kernel; x, y 1-D contiguous float32/float16 tensors of equal length.
    The output starts as NaN (poisoned), so an element the kernel misses shows."""
    import torch
    from flyasm.run import launch
    dtype = {torch.float32: "f32", torch.float16: "f16"}[x.dtype]
    if x.shape != y.shape or x.dim() != 1 or x.dtype != y.dtype:
        raise ValueError("x and y are 1-D tensors of the same length and dtype")
    n = x.numel()
    if not 1 <= n < (1 << 32) // DTYPES[dtype]:
        raise ValueError(f"n = {n} must be ≥ 1 and its byte size below 2^32 (num_records is 32-bit)")
    kern = kernel or build(n_per_block, dtype)
    out = torch.full_like(x, float("nan"))
    launch(kern, grid(n, n_per_block), BLOCK, out, x.contiguous(), y.contiguous(), n, backend=backend, seed=seed)
    return out
