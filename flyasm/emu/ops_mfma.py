"""MFMA semantics (CDNA4 ISA §7.1; register layouts notes §2, general formulas of ISA 7.1.4).

D = C + A·B per block. Floating-point shapes accumulate in float32 (DESIGN.md): the K products
of one output are summed by a float32 batched matmul (numpy's BLAS: its own order, possibly FMA),
then C is added in float32. bf16/f16 products are exact in float32 (8+8 / 11+11 significant bits);
the K-term float32 sum has an error of at most ~K·2^-24·Σ|a·b| (plus half an ulp for adding C), so
tests compare with that tolerance. fp8/bf8 products (4+4 / 3+3 bits) are exact too, but their
dynamic range is wider, so sums round more often. Not bit-exact to silicon: the hardware's internal
sum order/precision is undocumented (notes §6.5).

Integer shapes (i8) are exact: |a·b| <= 2^14 and K <= 128 keep every partial sum below 2^24, so
the float32 matmul of the integer values is exact (checked per shape at compile time); C is added
in int64 and the result wraps to 32 bits (two's complement), as the ISA's i32 accumulator does.
EXEC is ignored (forced to all ones).

Speed: one numpy call per batch of waves (operands gathered by reshape/transpose on the raw 16/8-bit
items, then converted once into a contiguous float32 [waves, blocks, M, K] array).
"""
from __future__ import annotations

import re

import numpy as np

from ..isa.operands import Imm, Reg
from .machine import LANES, base_of, imm_bits, not_emulated, r_index, semantic, where
from .memory import EmuError

_NAME = re.compile(r"^v_mfma_([fi]32)_(\d+)x(\d+)x(\d+)_?(bf16|f16|i8|fp8_fp8|fp8_bf8|bf8_fp8|bf8_bf8|bf16_1k)$")


def _fp8_table(exp_bits: int) -> np.ndarray:
    """OCP FP8 decode table: E4M3 (bias 7, no inf, S.1111.111 = NaN) or E5M2 (bias 15, IEEE-like)."""
    b = np.arange(256)
    man_bits = 7 - exp_bits
    bias = (1 << (exp_bits - 1)) - 1
    s, e, mt = b >> 7, (b >> man_bits) & ((1 << exp_bits) - 1), b & ((1 << man_bits) - 1)
    frac = mt / float(1 << man_bits)
    v = np.where(e == 0, frac * 2.0 ** (1 - bias), (1 + frac) * 2.0 ** (e - bias))
    emax = (1 << exp_bits) - 1
    if exp_bits == 4:
        v = np.where((e == emax) & (mt == 7), np.nan, v)
    else:
        v = np.where(e == emax, np.where(mt == 0, np.inf, np.nan), v)
    return np.where(s == 1, -v, v)


FP8 = {"fp8": _fp8_table(4), "bf8": _fp8_table(5)}
FP8_32 = {k: v.astype(np.float32) for k, v in FP8.items()}      # every fp8/bf8 value is exact in float32
F16_32 = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)  # exact
ITEM_DTYPE = {"bf16": np.uint16, "bf16_1k": np.uint16, "f16": np.float16, "i8": np.int8,
              "fp8": np.uint8, "bf8": np.uint8}


def raw_items(regs: np.ndarray, kind: str) -> np.ndarray:
    """Register data [k, nreg, 64] -> raw items [k, 64, K_L] (uint16 bf16 bits, float16, int8 or fp8
    bytes), little-endian: the layout permutation then moves 1-2 byte items, not floats."""
    return np.ascontiguousarray(regs.transpose(0, 2, 1)).view(ITEM_DTYPE[kind])


def items_f32(x: np.ndarray, kind: str) -> np.ndarray:
    """Raw items (any shape) -> float32 values, exact (int8 values too)."""
    if kind in ("bf16", "bf16_1k"):
        return (x.astype(np.uint32) << 16).view(np.float32)
    if kind == "f16":                          # table lookup: ~2x faster than numpy's half cast
        return F16_32.take(x.view(np.uint16))
    if kind == "i8":
        return x.astype(np.float32)
    return FP8_32[kind].take(x)


def layout(M, N, K, B=1):
    """Index arrays from the ISA 7.1.4 general formulas (notes §2):
    A[b,i,k] -> (lane, item), B[b,k,j] -> (lane, item), D[b,i,j] -> (reg, lane)."""
    KL = K // (64 // (M * B))
    b, i, k = np.meshgrid(np.arange(B), np.arange(M), np.arange(K), indexing="ij")
    a_lane, a_item = i + M * (b + B * (k // KL)), k % KL
    b2, k2, j2 = np.meshgrid(np.arange(B), np.arange(K), np.arange(N), indexing="ij")
    b_lane, b_item = j2 + N * (b2 + B * (k2 // KL)), k2 % KL
    H = 4
    BI = -(-64 // (N * M // H))
    MI = (64 // BI) // N
    G = M // (H * MI)
    b3, i3, j3 = np.meshgrid(np.arange(B), np.arange(M), np.arange(N), indexing="ij")
    d_reg = (i3 % H) + H * (i3 // (H * MI) + G * (b3 // BI))
    d_lane = j3 + N * ((i3 // H) % MI + MI * (b3 % BI))
    return (a_lane, a_item), (b_lane, b_item), (d_reg, d_lane)


def _permuter(src_shape, axes, out_shape, flat_index):
    """fn(x [k, ...]) -> x.reshape(k, *src_shape).transpose(axes).reshape(k, *out_shape), checked
    once against the flat gather index it must equal (x.reshape(k, -1)[:, flat_index]); when the
    reshape/transpose form does not match (an unusual shape), the checked gather is used instead."""
    idx = np.asarray(flat_index).reshape(-1)
    tr = (0,) + tuple(a + 1 for a in axes)
    src, out = tuple(int(v) for v in src_shape), tuple(int(v) for v in out_shape)
    probe = np.arange(int(np.prod(src)))[None]
    try:
        ok = np.array_equal(probe.reshape((1,) + src).transpose(tr).reshape(-1), probe.reshape(-1)[idx])
    except ValueError:
        ok = False
    if ok:
        return lambda x: x.reshape((x.shape[0],) + src).transpose(tr).reshape((x.shape[0],) + out)
    return lambda x: x.reshape(x.shape[0], -1).take(idx, axis=1).reshape((x.shape[0],) + out)


def fast_layout(M, N, K, B, nd):
    """The layout() gathers as reshape/transpose (numpy fancy indexing with two index arrays is ~10x
    slower): items [k, 64, K_L] -> A [k, B, M, K] and B [k, B, K, N]; raw C registers [k, nd, 64] ->
    [k, B, M, N]; and D [k, B, M, N] -> registers [k, nd, 64]. Each is checked against layout()."""
    (al, ai), (bl, bi), (dr, dl) = layout(M, N, K, B)
    KL = K // (64 // (M * B))
    KQ = K // KL
    H = 4
    BI = -(-64 // (N * M // H))
    MI = (64 // BI) // N
    G = max(M // (H * MI), 1)
    B0 = min(BI, B)
    B1 = max(B // B0, 1)
    take_a = _permuter((KQ, B, M, KL), (1, 2, 0, 3), (B, M, K), al * KL + ai)
    take_b = _permuter((KQ, B, N, KL), (1, 0, 3, 2), (B, K, N), bl * KL + bi)
    cidx = (dr * 64 + dl).reshape(-1)
    take_c = _permuter((B1, G, H, B0, MI, N), (0, 3, 1, 4, 2, 5), (B, M, N), cidx)
    if cidx.size == nd * 64 and np.unique(cidx).size == cidx.size:
        inv = np.empty(cidx.size, np.int64)
        inv[cidx] = np.arange(cidx.size)
        # the inverse of take_c: [b1, b0, i2, i1, i0, j] -> [b1, i2, i0, b0, i1, j]
        put_d = _permuter((B1, B0, G, MI, H, N), (0, 2, 4, 1, 3, 5), (nd, 64), inv)
    else:
        def put_d(x):
            res = np.empty((x.shape[0], nd, 64), x.dtype)
            res[:, dr, dl] = x
            return res
    return take_a, take_b, take_c, put_d


def operand_gather(M, N, K, B, na, kind, which):
    """Flat index of each A [B, M, K] (which="a") or B [B, K, N] (which="b") element among the raw
    items of the operand's na registers taken as one contiguous [na, 64, items-per-dword] block
    (register-major, then lane, then item within the dword, little-endian): one take per operand."""
    (al, ai), (bl, bi), _ = layout(M, N, K, B)
    lane, item = (al, ai) if which == "a" else (bl, bi)
    ipr = 4 // np.dtype(ITEM_DTYPE[kind]).itemsize
    return ((item // ipr) * (64 * ipr) + lane * ipr + item % ipr).reshape(-1).astype(np.intp)


def d_view(M, N, K, B, nd):
    """fn(regs [k, nd, 64]) -> a strided view of the registers shaped like the result reshaped to
    [k, B1, B0, G, MI, H, N] (element (b, i, j) of D = C + A·B is register d_reg, lane d_lane of
    layout()), so C is read and D written in place with no permuting copy; None when the shape
    does not factor that way (checked against layout() once)."""
    _, _, (dr, dl) = layout(M, N, K, B)
    H = 4
    BI = -(-64 // (N * M // H))
    MI = (64 // BI) // N
    G = max(M // (H * MI), 1)
    B0 = min(BI, B)
    B1 = max(B // B0, 1)
    if B1 * G * H != nd or B0 * MI * N != 64 or B1 * B0 != B or G * MI * H != M:
        return None, None

    def view(x):
        return x.reshape(x.shape[0], B1, G, H, B0, MI, N).transpose(0, 1, 4, 2, 5, 3, 6)
    probe = np.arange(nd * 64).reshape(1, nd, 64)
    if not np.array_equal(view(probe).reshape(-1), (dr * 64 + dl).reshape(-1)):
        return None, None
    return view, (B1, B0, G, MI, H, N)


def d_rows(M, N, K, B, nd):
    """Row order of A that makes the result land in register order: with A's rows permuted by the
    returned index (new row r holds row order[r]), P = A·B reshaped to [k, nd, 64] is D's registers
    (true when a block's outputs fill whole registers, i.e. no two blocks share a register); None
    otherwise. Checked against layout() for every (b, i, j)."""
    _, _, (dr, dl) = layout(M, N, K, B)
    pos = dr * 64 + dl - (np.arange(B) * M * N)[:, None, None]          # [B, M, N]
    if pos.size != nd * 64 or (pos[..., 0] % N).any():
        return None
    r = pos[..., 0] // N                                               # [B, M]
    if not (r == r[0]).all() or not np.array_equal(np.sort(r[0]), np.arange(M)):
        return None
    order = np.argsort(r[0])
    if not np.array_equal(pos[:, order, :], (np.arange(M)[:, None] * N + np.arange(N)).repeat(B, 0).reshape(B, M, N)
                          if B == 1 else np.broadcast_to(np.arange(M)[:, None] * N + np.arange(N), (B, M, N))):
        return None
    return order


def _names():
    from ..isa import tables
    out = []
    for n in tables.all_mnemonics():
        c = tables.lookup(n).info.get("canonical", n)
        if _NAME.match(c):
            out.append(c)
    return out


def mfma_lane_sources(inst, blocks):
    """Source lane of each lane's A and B registers under CBSZ/ABID and BLGP (notes §2, CDNA4 ISA
    7.1): A of lane l comes from lane (l % S) + S*ABID with S = 64 >> CBSZ; B from the BLGP
    pattern 0 identity, 1 l%32, 2 l%32+32, 3 (l+16)%64, 4..7 l%16 + 16*(BLGP-4). None = identity.
    Emulated for single-block shapes (the lane formula and the block-broadcast wording coincide
    only there)."""
    mods = inst.modifiers
    cbsz, abid, blgp = (int(mods.get(k, 0) or 0) for k in ("cbsz", "abid", "blgp"))
    if (cbsz or abid or blgp) and blocks != 1:
        raise not_emulated(inst, "cbsz/abid/blgp on a multi-block MFMA")
    pa = pb = None
    if cbsz or abid:
        if cbsz > 4 or abid >= (1 << cbsz):
            raise EmuError(f"{where(inst)}: abid:{abid} needs abid < 2**cbsz (cbsz:{cbsz}, at most 4)")
        S = 64 >> cbsz
        pa = (LANES % S) + S * abid
    if blgp:
        pb = [None, LANES % 32, LANES % 32 + 32, (LANES + 16) % 64][blgp] if blgp < 4 else \
            LANES % 16 + 16 * (blgp - 4)
    return pa, pb


def exec_check(m, w, inst):
    if m.strict and not m.execm[w].all():
        raise EmuError(f"{where(inst)}: EXEC is not all ones; MFMA ignores EXEC (CDNA4 ISA 7.1.2: forced to "
                       f"all ones), so masked lanes would still be computed and written (emu option "
                       f"strict=False runs it as silicon does)")


@semantic(*_names())
def c_mfma(inst, ctx):
    out_t, M, N, K, kind = _NAME.match(inst.name).groups()
    M, N, K = int(M), int(N), int(K)
    B = inst.info.get("blocks", 1) or 1
    pa, pb = mfma_lane_sources(inst, B)
    if kind == "bf16_1k":
        kind = "bf16"
    ka, kb = (kind.split("_") if "8_" in kind else (kind, kind))
    vdst, src0, src1, src2 = inst.operands
    nd = inst.slots[0]["dwords"]
    na = inst.slots[1]["dwords"]
    take_a, take_b, take_c, put_d = fast_layout(M, N, K, B, nd)
    d0, a0, b0 = r_index(vdst), r_index(base_of(src0)), r_index(base_of(src1))
    c_reg = base_of(src2)
    c0 = r_index(c_reg) if isinstance(c_reg, Reg) else None
    cconst = imm_bits(c_reg.value, "f32" if out_t == "f32" else "b32") if isinstance(c_reg, Imm) else None
    is_int = out_t == "i32"

    if is_int:
        # exactness of the float32 matmul for i8: every partial sum is below 2^24
        assert K * 128 * 128 < 2 ** 24, inst.name
        cint = np.int64(np.uint32(cconst).view(np.int32)) if cconst is not None else None
    else:
        cf = np.uint32(cconst).view(np.float32) if cconst is not None else None

    ia = operand_gather(M, N, K, B, na, ka, "a")
    ib = operand_gather(M, N, K, B, na, kb, "b")
    dv, p7 = d_view(M, N, K, B, nd)
    order = d_rows(M, N, K, B, nd) if not is_int else None
    if order is not None:       # A's rows in register order: D = P + C is a plain add of [k, nd, 64]
        ia = ia.reshape(B, M, K)[:, order, :].reshape(-1)
    scratch = {}

    def operand(m, w, r0, perm, idx, kind, shape, key):
        """Raw items of registers r0.. of waves w, permuted to shape by one take, as float32."""
        reg = m.R[w, r0:r0 + na]
        if perm is not None:
            reg = reg[:, :, perm]
        k = reg.shape[0]
        items = np.ascontiguousarray(reg).reshape(k, na * 64).view(ITEM_DTYPE[kind]).take(idx, axis=1)
        if kind != "bf16":
            return items_f32(items, kind).reshape((k,) + shape)
        buf = scratch.get(key)
        if buf is None or buf.shape[0] != k:
            # bf16 -> float32 is the 16 bits in the high half: the low halves stay zero
            buf = scratch[key] = np.zeros((k, idx.size, 2), np.uint16)
        buf[..., 1] = items
        return buf.view(np.float32).reshape((k,) + shape)

    def run(m, w):
        exec_check(m, w, inst)
        A = operand(m, w, a0, pa, ia, ka, (B, M, K), "a")          # [k, B, M, K] float32, contiguous
        Bm = operand(m, w, b0, pb, ib, kb, (B, K, N), "b")         # [k, B, K, N]
        with np.errstate(all="ignore"):
            P = np.matmul(A, Bm)                                 # [k, B, M, N] float32
            if order is not None:
                Pr = P.reshape(P.shape[0], nd, 64)
                if c0 is not None:
                    C = m.R[w, c0:c0 + nd].view(np.float32)
                    if isinstance(w, slice):
                        np.add(Pr, C, out=m.R[w, d0:d0 + nd].view(np.float32))
                        return
                    Pr += C
                else:
                    Pr += cf                     # also +0.0: (-0) + (+0) = +0 as D = C + A·B
                m.R[w, d0:d0 + nd] = Pr.view(np.uint32)
                return
            if not is_int and dv is not None:
                # D = P + C straight into the destination registers through strided views
                k = P.shape[0]
                whole = isinstance(w, slice)
                dst = m.R[w, d0:d0 + nd] if whole else np.empty((k, nd, 64), np.uint32)
                D = dv(dst).view(np.float32)
                P7 = P.reshape((k,) + p7)
                if c0 is not None:
                    np.add(P7, dv(m.R[w, c0:c0 + nd]).view(np.float32), out=D)
                else:
                    np.add(P7, cf, out=D)        # also +0.0: (-0) + (+0) = +0 as D = C + A·B
                if not whole:
                    m.R[w, d0:d0 + nd] = dst
                return
            if is_int:
                if c0 is not None:
                    C = take_c(m.R[w, c0:c0 + nd]).view(np.int32).astype(np.int64)
                else:
                    C = cint
                out = (P.astype(np.int64) + C).astype(np.uint32)          # 32-bit wrap
            else:
                if c0 is not None:
                    P += take_c(m.R[w, c0:c0 + nd]).view(np.float32)
                else:
                    P += cf                     # also +0.0: (-0) + (+0) = +0 as D = C + A·B
                out = P.view(np.uint32)
        m.R[w, d0:d0 + nd] = put_d(out)
    return run
