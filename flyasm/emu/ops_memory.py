"""Memory semantics: DS (LDS), MUBUF buffer, GLOBAL, LDS-DMA, atomics (CDNA4 ISA ch.9-11, notes §3).

Loads read memory at issue and land in registers when a wait retires them (Machine.issue);
stores write at issue and are counted on vmcnt/lgkmcnt like silicon. LDS-DMA writes LDS at
retirement and marks the bytes busy until then.
"""
from __future__ import annotations

import re

import numpy as np

from ..isa.operands import Reg, Special
from .machine import LANES, S_M0, not_emulated, r_index, s_index, semantic, ssrc, vsrc, where
from .memory import EmuError

U32 = np.uint32


def _dst_rows(op, n):
    r = r_index(op)
    return np.arange(r, r + n)


def _land_v(rows, data, mask, waves):
    """land(m, sel): write data [k, n, 64] under mask [k, 64] to rows of waves[sel]."""
    r0, r1 = int(rows[0]), int(rows[-1]) + 1
    contiguous = r1 - r0 == len(rows)

    def land(m, sel):
        ws = waves[sel]
        if not contiguous:
            cur = m.R[ws[:, None], rows[None, :]]
            m.R[ws[:, None], rows[None, :]] = np.where(mask[sel][:, None, :], data[sel], cur)
            return
        everyone = sel.all()
        # all waves in order (ids are sorted and unique): a plain slice, no fancy indexing
        wi = slice(None) if everyone and len(ws) == m.W else ws
        mk = mask if everyone else mask[sel]
        dt = data if everyone else data[sel]
        if mk.all():
            m.R[wi, r0:r1] = dt
        else:
            m.R[wi, r0:r1] = np.where(mk[:, None, :], dt, m.R[wi, r0:r1])
    return land


def gather(arena, off, nbytes):
    """Bytes [k, 64, nbytes] -> dwords [k, n, 64]."""
    nd = nbytes // 4
    if nd in (1, 2, 4) and nbytes == 4 * nd and not (off & (nbytes - 1)).any():
        # aligned to the access size: rows of an [n, nd] dword view, one take (no index per dword)
        rows = arena[:arena.size // nbytes * nbytes].view(U32).reshape(-1, nd)
        return rows.take(off >> (nbytes.bit_length() - 1), axis=0).transpose(0, 2, 1)
    if nbytes % 4 == 0 and arena.size % 4 == 0 and not (off & 3).any():     # aligned: gather dwords
        return arena.view(U32)[(off >> 2)[..., None] + np.arange(nbytes // 4)].transpose(0, 2, 1)
    b = arena[off[..., None] + np.arange(nbytes)]
    return np.ascontiguousarray(b).view(U32).transpose(0, 2, 1)


# ---- DS -------------------------------------------------------------------------------------------
DS_READ = {"ds_read_b32": 1, "ds_read_b64": 2, "ds_read_b96": 3, "ds_read_b128": 4}
DS_WRITE = {"ds_write_b32": 1, "ds_write_b64": 2, "ds_write_b96": 3, "ds_write_b128": 4}
DS_SUB = {"ds_read_u8": (1, False), "ds_read_i8": (1, True), "ds_read_u16": (2, False), "ds_read_i16": (2, True)}
DS_WSUB = {"ds_write_b8": 1, "ds_write_b16": 2}


def lds_align(name: str, nbytes: int) -> int:
    """Alignment the strict (aligned-mode) DS rule requires: the data size (b96 -> 16, as LLVM's
    aligned-mode lowering assumes; read2/write2 per element), 8 for ds_read_b64_tr_* (ISA 11.4)."""
    if "_tr_" in name:
        return 8
    return 16 if nbytes == 12 else nbytes


def _lds_addr(m, w, inst, gaddr, offset, nbytes, align=1):
    """Flat LDS byte indices [k, 64] for this access; out of the workgroup's LDS is an error, and so
    is a misaligned address in strict mode (aligned DS mode; strict="unaligned" relaxes all but tr)."""
    a = (gaddr(m, w).astype(np.int64) + offset) & 0xFFFFFFFF     # the DS adder is 32 bits: VGPR + offset wraps
    ex = m.execm[w]
    every = ex.all()
    if align > 1 and m.strict and (not m.unaligned_lds or "_tr_" in inst.name):
        mis = (a & (align - 1) != 0) if align & (align - 1) == 0 else (a % align != 0)
        if not every:
            mis &= ex
        if mis.any():
            bad = int(a[mis][0])
            raise EmuError(f"{where(inst)}: LDS address {bad} is not {align}-byte aligned ({inst.name} needs "
                           f"{align}-byte alignment in aligned DS mode; emu option strict='unaligned' allows it)")
    if a.max() + nbytes > m.lds_size and ((a + nbytes > m.lds_size) & ex).any():
        bad = int(a[(a + nbytes > m.lds_size) & ex][0])
        raise EmuError(f"{where(inst)}: LDS access of {nbytes} bytes at {bad} is beyond the workgroup's "
                       f"{m.lds_size} bytes of LDS")
    if not every:
        a = np.where(ex, a, 0)
    return a + (m.wg_of[m.ids(w)] * m.lds_size)[:, None]


@semantic(*DS_READ, *DS_SUB, "ds_read2_b32", "ds_read2_b64", "ds_read2st64_b32", "ds_read2st64_b64",
          "ds_read_b64_tr_b16", "ds_read_b64_tr_b8", "ds_read_b64_tr_b4")
def c_ds_read(inst, ctx):
    name = inst.name
    dst, addr = inst.operands[:2]
    ga = vsrc(addr)
    mods = inst.modifiers
    if name.startswith("ds_read2"):
        esz = 8 if name.endswith("b64") else 4
        scale = esz * (64 if "st64" in name else 1)
        parts = [(mods.get("offset0", 0) * scale, esz), (mods.get("offset1", 0) * scale, esz)]
    elif name in DS_SUB:
        parts = [(mods.get("offset", 0), DS_SUB[name][0])]
    elif "_tr_" in name:
        parts = [(mods.get("offset", 0), 8)]
    else:
        parts = [(mods.get("offset", 0), 4 * DS_READ[name])]
    ndw = sum(max(p[1], 4) for p in parts) // 4
    rows = _dst_rows(dst, ndw)
    tr_bits = int(name.rsplit("_b", 1)[1]) if "_tr_" in name else None

    def run(m, w):
        ex = m.execm[w]
        chunks = []
        for off, nb in parts:
            flat = _lds_addr(m, w, inst, ga, off, nb, lds_align(name, nb))
            if m.n_lds_busy:                          # byte indices only while an LDS-DMA is in flight
                m.check_lds(inst, (flat[..., None] + np.arange(nb))[ex])
            if m.races is not None:
                m.races.access_range(inst, m.ids(w), flat, nb, ex, False)
            if nb >= 4:
                chunks.append(gather(m.LDS, flat, nb))                      # dwords when aligned
                continue
            b = m.LDS[flat[..., None] + np.arange(nb)]
            if nb < 4:
                v = b[..., 0].astype(np.int64) if nb == 1 else b.copy().view(np.uint16)[..., 0].astype(np.int64)
                if DS_SUB[name][1]:
                    v = (v ^ (1 << (8 * nb - 1))) - (1 << (8 * nb - 1))
                chunks.append((v & 0xFFFFFFFF).astype(U32)[:, None, :])
            else:
                chunks.append(np.ascontiguousarray(b).view(U32).transpose(0, 2, 1))
        data = chunks[0] if len(chunks) == 1 else np.concatenate(chunks, axis=1)
        if tr_bits is not None:
            if not ex.all():
                raise EmuError(f"{where(inst)}: EXEC must be all ones for {name} (CDNA4 ISA 11.4)")
            data = transpose_read(data, tr_bits)
        waves = m.ids(w).copy()
        m.issue(w, inst, "lgkm", _land_v(rows, data, ex.copy(), waves), rregs=rows)
    return run


def transpose_read(data, bits):
    """ds_read_b64_tr_b{16,8,4} lane shuffle within each 16-lane block (notes §3.1; b8/b4 inferred)."""
    k = data.shape[0]
    e = 64 // bits                       # elements per lane
    c = 16 // e                          # lanes per row
    x = np.ascontiguousarray(data.transpose(0, 2, 1)).view(np.uint64)[..., 0]   # [k, 64] 64-bit
    shifts = (np.arange(e) * bits).astype(np.uint64)
    elems = (x[..., None] >> shifts) & np.uint64((1 << bits) - 1)     # IN[k, lane, e]
    j = np.arange(16)
    out = np.zeros((k, 64), np.uint64)
    for blk in range(4):
        for r in range(e):
            src_lane = 16 * blk + r * c + j // e
            out[:, 16 * blk + j] |= elems[:, src_lane, j % e] << np.uint64(r * bits)
    return np.ascontiguousarray(out[..., None]).view(U32).transpose(0, 2, 1)


@semantic(*DS_WRITE, *DS_WSUB, "ds_write2_b32", "ds_write2_b64", "ds_write2st64_b32", "ds_write2st64_b64")
def c_ds_write(inst, ctx):
    name = inst.name
    addr = inst.operands[0]
    datas = inst.operands[1:]
    ga = vsrc(addr)
    mods = inst.modifiers
    if name.startswith("ds_write2"):
        esz = 8 if name.endswith("b64") else 4
        scale = esz * (64 if "st64" in name else 1)
        parts = [(mods.get("offset0", 0) * scale, esz, datas[0]), (mods.get("offset1", 0) * scale, esz, datas[1])]
    elif name in DS_WSUB:
        parts = [(mods.get("offset", 0), DS_WSUB[name], datas[0])]
    else:
        parts = [(mods.get("offset", 0), 4 * DS_WRITE[name], datas[0])]
    parts = [(o, nb, r_index(d)) for o, nb, d in parts]

    def run(m, w):
        ex = m.execm[w]
        for off, nb, row in parts:
            flat = _lds_addr(m, w, inst, ga, off, nb, lds_align(name, nb))
            nd = max(nb // 4, 1)
            vals = m.R[w, row:row + nd]                                  # [k, nd, 64]
            b = np.ascontiguousarray(vals.transpose(0, 2, 1)).view(np.uint8)[..., :nb]   # [k, 64, nb]
            idx = flat[..., None] + np.arange(nb)
            if m.n_lds_busy:
                m.check_lds(inst, idx[ex])
            if m.races is not None:
                m.races.access(inst, m.ids(w), idx, ex, True, b)
            if nb % 4 == 0 and m.LDS.size % 4 == 0 and not (flat & 3).any():   # aligned: scatter dwords
                m.LDS.view(U32)[((flat >> 2)[..., None] + np.arange(nb // 4))[ex]] = vals.transpose(0, 2, 1)[ex]
            else:
                m.LDS[idx[ex]] = b[ex]      # lanes in order: the highest active lane wins a conflict
        m.issue(w, inst, "lgkm", None)
    return run


@semantic("ds_bpermute_b32", "ds_permute_b32")
def c_ds_permute(inst, ctx):
    dst, addr, data = inst.operands
    ga, gd = vsrc(addr), vsrc(data)
    off = inst.modifiers.get("offset", 0)
    rows = _dst_rows(dst, 1)
    back = inst.name == "ds_bpermute_b32"

    def run(m, w):
        ex = m.execm[w]
        k = ex.shape[0]
        lane = ((ga(m, w).astype(np.int64) + off) >> 2) & 63
        src = np.broadcast_to(gd(m, w), (k, 64))
        rk = np.arange(k)[:, None]
        if back:   # dst[l] = src[lane[l]]; an inactive source lane reads 0 (assumed)
            out = np.where(ex[rk, lane], src[rk, lane], 0).astype(U32)
        else:      # dst[lane[l]] = src[l] for active l (higher lanes win)
            out = np.zeros((k, 64), U32)
            for L in range(64):
                sel = ex[:, L]
                out[np.nonzero(sel)[0], lane[sel, L]] = src[sel, L]
        m.issue(w, inst, "lgkm", _land_v(rows, out[:, None, :], ex.copy(), m.ids(w).copy()), rregs=rows)
    return run


def swizzle_lanes(offset) -> np.ndarray:
    """Source lane per lane for ds_swizzle_b32 (CDNA4 ISA: bitmask mode and quad-permute mode)."""
    if isinstance(offset, str):
        mm = re.match(r"swizzle\((\w+)((?:,\s*[^,)]+)*)\)", offset)
        if not mm:
            raise EmuError(f"not emulated: ds_swizzle offset {offset}")
        kind = mm.group(1)
        args = [a.strip().strip('"') for a in mm.group(2).split(",")[1:]]
        L = np.arange(64)
        if kind == "QUAD_PERM":
            q = [int(x) for x in args]
            return 4 * (L // 4) + np.array(q)[L % 4]
        if kind == "SWAP":
            return L ^ int(args[0])
        if kind == "REVERSE":
            return L ^ (int(args[0]) - 1)
        if kind == "BROADCAST":
            size, lane = int(args[0]), int(args[1])
            return (L & ~(size - 1)) | lane
        if kind == "BITMASK_PERM":
            p = args[0]
            and_m = sum(1 << (4 - i) for i, ch in enumerate(p) if ch in "01") ^ 0x1F
            and_m = sum(1 << (4 - i) for i, ch in enumerate(p) if ch == "p")
            or_m = sum(1 << (4 - i) for i, ch in enumerate(p) if ch == "1")
            xor_m = sum(1 << (4 - i) for i, ch in enumerate(p) if ch == "i")
            offset = and_m | (or_m << 5) | (xor_m << 10)
        else:
            raise EmuError(f"not emulated: ds_swizzle {kind}")
    L = np.arange(64)
    if offset & 0x8000:
        q = [(offset >> (2 * i)) & 3 for i in range(4)]
        return 4 * (L // 4) + np.array(q)[L % 4]
    and_m, or_m, xor_m = offset & 0x1F, (offset >> 5) & 0x1F, (offset >> 10) & 0x1F
    return (L & ~31) | ((((L & 31) & and_m) | or_m) ^ xor_m)


@semantic("ds_swizzle_b32")
def c_ds_swizzle(inst, ctx):
    dst, addr = inst.operands
    g = vsrc(addr)
    src = swizzle_lanes(inst.modifiers.get("offset", 0))
    rows = _dst_rows(dst, 1)

    def run(m, w):
        ex = m.execm[w]
        v = np.broadcast_to(g(m, w), ex.shape)
        out = np.where(ex[:, src], v[:, src], 0).astype(U32)
        m.issue(w, inst, "lgkm", _land_v(rows, out[:, None, :], ex.copy(), m.ids(w).copy()), rregs=rows)
    return run


# ---- buffers ------------------------------------------------------------------------------------
def vsharp(S, cols):
    """V# words -> (base, stride, num_records) for each wave (CDNA4 ISA 9.1.5 buffer resource)."""
    w0, w1, w2 = (S[:, cols[i]].astype(np.uint64) for i in range(3))
    base = w0 | ((w1 & np.uint64(0xFFFF)) << np.uint64(32))
    stride = (w1 >> np.uint64(16)) & np.uint64(0x3FFF)
    return base, stride, w2


BUF_LOAD = {"buffer_load_dword": 4, "buffer_load_dwordx2": 8, "buffer_load_dwordx3": 12, "buffer_load_dwordx4": 16,
            "buffer_load_ubyte": 1, "buffer_load_sbyte": 1, "buffer_load_ushort": 2, "buffer_load_sshort": 2}
BUF_STORE = {"buffer_store_dword": 4, "buffer_store_dwordx2": 8, "buffer_store_dwordx3": 12,
             "buffer_store_dwordx4": 16, "buffer_store_byte": 1, "buffer_store_short": 2}
GLB_LOAD = {"global_load_dword": 4, "global_load_dwordx2": 8, "global_load_dwordx3": 12, "global_load_dwordx4": 16,
            "global_load_ubyte": 1, "global_load_sbyte": 1, "global_load_ushort": 2, "global_load_sshort": 2}
GLB_STORE = {"global_store_dword": 4, "global_store_dwordx2": 8, "global_store_dwordx3": 12,
             "global_store_dwordx4": 16, "global_store_byte": 1, "global_store_short": 2}
GLB_LDS = {"global_load_lds_dword": 4, "global_load_lds_dwordx3": 12, "global_load_lds_dwordx4": 16,
           "global_load_lds_ubyte": 1, "global_load_lds_ushort": 2}
# D16 loads: (bytes, sign-extend to 16 bits, high half); the other half of the VGPR is kept (CDNA4 ISA
# MUBUF/FLAT *_D16 and *_D16_HI: "data is written to the low/high 16 bits, the other 16 bits unchanged")
D16 = {f"{p}_load_{t}_d16{h}": (n, sg, h == "_hi") for p in ("buffer", "global")
       for t, n, sg in (("ubyte", 1, False), ("sbyte", 1, True), ("short", 2, False)) for h in ("", "_hi")}
ATOMIC = {"buffer_atomic_add_f32": "f32", "global_atomic_add_f32": "f32", "buffer_atomic_pk_add_f16": "f16",
          "global_atomic_pk_add_f16": "f16", "buffer_atomic_pk_add_bf16": "bf16", "global_atomic_pk_add_bf16": "bf16",
          "buffer_atomic_add": "u32", "global_atomic_add": "u32"}


def buffer_address(inst):
    """fn(m, w, nbytes) -> (addr uint64 [k,64], in_range bool [k,64], or [k,64,ndw] when the dwords of
    one lane disagree) per CDNA4 ISA 9.1.8 (notes §3.3).

    Range check (GFX9/CDNA "Range Checking"): a raw access (no idxen, or stride 0) is out of range
    when offset + index*stride >= num_records - soffset, i.e. when its byte offset from the V# base
    (soffset included) reaches num_records, and "load/store-dword-x{2,3,4} range-check per
    component" (each dword on its own). A structured access (idxen with a non-zero stride) counts
    num_records in records: it is out of range when index >= num_records, the whole lane at once
    (on GFX9+ "IDXEN matters for interpretation of buffer sizes": LLVM AMDGPU.td, D44401; aiter's
    gfx950 attention-backward kernels size their idxen dK/dV/dQ buffers as bytes / stride records,
    and gem5's Vega model, which applies the byte rule here, would drop their stores).
    Out-of-range loads return 0, out-of-range stores are dropped. Swizzled buffers are not emulated."""
    mods = inst.modifiers
    vaddr, srsrc, soff = (inst.operand(n) for n in ("vaddr", "srsrc", "soffset"))
    cols = [s_index(srsrc) + i for i in range(4)]
    offen, idxen = bool(mods.get("offen")), bool(mods.get("idxen"))
    inst_off = mods.get("offset", 0)
    gv = vsrc(vaddr, "u32", 1) if isinstance(vaddr, Reg) else None
    gv2 = (lambda m, w, r=r_index(vaddr): m.R[w, r + 1]) if (offen and idxen) else None
    gs = ssrc(soff)

    def fn(m, w, nbytes):
        base, stride, nrec = vsharp(m.S[w], cols)
        if (m.S[w, cols[3]] & U32(1 << 23)).any():
            raise EmuError(f"not emulated: swizzled buffer (V# word3 bit 23 SWIZZLE_ENABLE) in {where(inst)}")
        k = m.nw(w)
        off = np.full((k, 64), inst_off, np.int64)
        idx = np.zeros((k, 64), np.int64)
        if idxen:
            idx = idx + np.broadcast_to(gv(m, w), (k, 64)).astype(np.int64)
            if offen:
                off = off + gv2(m, w).astype(np.int64)
        elif offen:
            off = off + np.broadcast_to(gv(m, w), (k, 64)).astype(np.int64)
        st = stride.astype(np.int64)[:, None]
        nr = nrec.astype(np.int64)[:, None]
        rel = gs(m, w).astype(np.int64)[:, None] + idx * st + off          # bytes from the V# base
        ndw = nbytes // 4 if nbytes % 4 == 0 else 1
        if idxen and (st != 0).any():
            ok = np.where(st != 0, idx < nr, rel < nr)
            if ndw > 1 and not (st != 0).all():
                ok = np.where((st != 0)[..., None], ok[..., None], rel[..., None] + 4 * np.arange(ndw) < nr[..., None])
        elif ndw == 1:
            ok = rel < nr
        else:
            okc = rel[..., None] + 4 * np.arange(ndw) < nr[..., None]
            allc = okc.all(-1)
            ok = allc if (allc == okc.any(-1)).all() else okc
        addr = base.astype(np.int64)[:, None] + rel
        return addr.astype(np.uint64), ok
    return fn


def _per_dword(m, inst, addr, okc, ex, nbytes, store_vals=None):
    """Loads/stores whose dwords are range-checked one by one (some lanes partly in range)."""
    ndw = nbytes // 4
    out = np.zeros((addr.shape[0], ndw, 64), U32)
    for c in range(ndw):
        act = ex & okc[..., c]
        if not act.any():
            continue
        off = m.mem.offsets(addr[act] + np.uint64(4 * c), 4, lambda: where(inst))
        b = m.mem.arena[off[:, None] + np.arange(4)]
        if store_vals is None:
            col = np.zeros(addr.shape, U32)
            col[act] = np.ascontiguousarray(b).view(U32)[:, 0]
            out[:, c] = col
        else:
            m.mem.arena[off[:, None] + np.arange(4)] = np.ascontiguousarray(store_vals[:, c][act]).view(np.uint8) \
                .reshape(-1, 4)
    return out


def global_address(inst):
    addr, saddr = inst.operand("addr"), inst.operand("saddr")
    off = inst.modifiers.get("offset", 0)
    if isinstance(saddr, Special) and saddr.name == "off" or saddr is None:
        g = vsrc(addr, "b64", 2)
        return lambda m, w, nbytes: ((g(m, w).astype(np.int64) + off).astype(np.uint64), None)
    gs, gv = ssrc(saddr, 2), vsrc(addr, "u32")
    return lambda m, w, nbytes: ((gs(m, w).astype(np.int64)[:, None] + gv(m, w).astype(np.int64) + off)
                                 .astype(np.uint64), None)


def _read_lanes(m, inst, addr, ok, ex, nbytes):
    """Gather nbytes per active in-range lane; returns dwords [k, ceil(n/4), 64] (zeros elsewhere)."""
    if ok is not None and ok.ndim == 3:
        return _per_dword(m, inst, addr, ok, ex, nbytes), ex & ok.any(-1)
    act = ex if ok is None else ex & ok
    if act.all():
        off = m.mem.offsets(addr, nbytes, lambda: where(inst))
        if nbytes % 4 == 0 and not (off & 3).any():                          # aligned: gather dwords
            return m.mem.arena.view(U32)[(off >> 2)[..., None] + np.arange(nbytes // 4)].transpose(0, 2, 1), act
    else:
        safe = np.where(act, addr, 0)
        off = np.zeros(addr.shape, np.int64)
        off[act] = m.mem.offsets(safe[act], nbytes, lambda: where(inst))
    nb4 = max(4, nbytes)
    b = m.mem.arena[off[..., None] + np.arange(nb4)] if nbytes >= 4 else \
        np.concatenate([m.mem.arena[off[..., None] + np.arange(nbytes)],
                        np.zeros(off.shape + (4 - nbytes,), np.uint8)], axis=-1)
    b = np.where(act[..., None], b, 0).astype(np.uint8)
    return np.ascontiguousarray(b).view(U32).transpose(0, 2, 1), act


def _signext(data, name, nbytes):
    if name.endswith(("sbyte", "sshort")):
        bits = 8 * nbytes
        v = data.astype(np.int64)
        return (((v ^ (1 << (bits - 1))) - (1 << (bits - 1))) & 0xFFFFFFFF).astype(U32)
    return data


def _mem_load_d16(inst, addr_fn):
    nbytes, signed, hi = D16[inst.name]
    row = r_index(inst.operand("vdata") or inst.operand("vdst"))
    bits = 8 * nbytes

    def run(m, w):
        ex = m.execm[w]
        addr, ok = addr_fn(m, w, nbytes)
        data, _ = _read_lanes(m, inst, addr, ok, ex, nbytes)
        v = data[:, 0].astype(np.int64)
        if signed:
            v = (v ^ (1 << (bits - 1))) - (1 << (bits - 1))
        half = (v & 0xFFFF).astype(U32) << U32(16 if hi else 0)
        keep = U32(0x0000FFFF if hi else 0xFFFF0000)
        waves, mask = m.ids(w).copy(), ex.copy()

        def land(m2, sel):
            ws = waves[sel]
            cur = m2.R[ws, row]
            m2.R[ws, row] = np.where(mask[sel], (cur & keep) | half[sel], cur)
        m.issue(w, inst, "vm", land, rregs=np.array([row]))
    return run


def _mem_load(inst, addr_fn, nbytes, lds_dma):
    name = inst.name
    ndw = max(1, nbytes // 4)
    if not lds_dma:
        dst = inst.operand("vdata") or inst.operand("vdst")
        rows = _dst_rows(dst, ndw)
    inst_off = inst.modifiers.get("offset", 0)

    def run(m, w):
        ex = m.execm[w]
        addr, ok = addr_fn(m, w, nbytes)
        data, act = _read_lanes(m, inst, addr, ok, ex, nbytes)
        data = _signext(data, name, nbytes)
        waves = m.ids(w).copy()
        if not lds_dma:
            m.issue(w, inst, "vm", _land_v(rows, data, ex.copy(), waves), rregs=rows)
            return
        # LDS-DMA: lane L writes at M0 + inst_offset + L*size (notes §3.3); lanes beyond LDS are dropped
        step = 16 if nbytes > 4 else 4
        base = (m.S[w, S_M0].astype(np.int64) & 0x3FFFF)[:, None] + inst_off + LANES[None, :] * step
        inside = ex & (base + nbytes <= m.lds_size)
        if m.strict and (ex & ~inside).any():
            bad = int(base[ex & ~inside][0])
            raise EmuError(f"{where(inst)}: LDS-DMA writes {nbytes} bytes at LDS offset {bad}, beyond the "
                           f"workgroup's {m.lds_size} bytes (silicon drops such lanes, ISA 3.11; emu option "
                           f"strict=False allows it)")
        flat = base + (m.wg_of[waves] * m.lds_size)[:, None]
        bytes_ = np.ascontiguousarray(data.transpose(0, 2, 1)).view(np.uint8)[..., :nbytes]
        if m.races is not None:
            m.races.access(inst, waves, flat[..., None] + np.arange(nbytes), inside, True, bytes_)
        pos, lane = np.nonzero(inside)
        idx = flat[pos, lane][:, None] + np.arange(nbytes)
        vals = bytes_[pos, lane]
        pos_b = np.repeat(pos, nbytes)

        def land(m2, sel):
            take = sel[pos]
            m2.LDS[idx[take]] = vals[take]
        m.issue(w, inst, "vm", land, lds=(pos_b, idx.reshape(-1)))
    return run


def _mem_store(inst, addr_fn, nbytes):
    data_op = inst.operand("vdata") or inst.operand("data")
    row = r_index(data_op)
    ndw = max(1, nbytes // 4)

    def run(m, w):
        ex = m.execm[w]
        addr, ok = addr_fn(m, w, nbytes)
        vals = m.R[w, row:row + ndw]
        if ok is not None and ok.ndim == 3:
            _per_dword(m, inst, addr, ok, ex, nbytes, vals)
            m.issue(w, inst, "vm", None)
            return
        act = ex if ok is None else ex & ok
        off = m.mem.offsets(addr[act], nbytes, lambda: where(inst))
        if nbytes % 4 == 0 and not (off & 3).any():                          # aligned: scatter dwords
            m.mem.arena.view(U32)[(off >> 2)[:, None] + np.arange(nbytes // 4)] = vals.transpose(0, 2, 1)[act]
        else:
            b = np.ascontiguousarray(vals.transpose(0, 2, 1)).view(np.uint8)[..., :nbytes]
            m.mem.arena[off[:, None] + np.arange(nbytes)] = b[act]
        m.issue(w, inst, "vm", None)
    return run


def _mem_atomic(inst, addr_fn, typ):
    data_op = inst.operand("vdata") or inst.operand("data")
    row = r_index(data_op)
    ret = bool(inst.modifiers.get("sc0")) and (inst.operand("vdst") is not None or "buffer" in inst.name)
    ret_op = inst.operand("vdst") or (data_op if "buffer" in inst.name else None)

    def run(m, w):
        ex = m.execm[w]
        addr, ok = addr_fn(m, w, 4)
        act = ex if ok is None else ex & ok
        if (addr[act] & np.uint64(3)).any():
            raise EmuError(f"{where(inst)}: misaligned atomic address")
        off = m.mem.offsets(addr[act], 4, lambda: where(inst))
        src = m.R[w, row][act]
        old_all = np.zeros(ex.shape, U32)
        words = m.mem.arena.view(U32)
        wi = off // 4
        old = np.empty(len(wi), U32)
        # lanes in order, so several lanes hitting one address all accumulate
        for j, (i, v) in enumerate(zip(wi.tolist(), src.tolist())):
            cur = int(words[i])
            old[j] = cur
            words[i] = atomic_op(typ, cur, v)
        old_all[act] = old
        if ret:
            rows = _dst_rows(ret_op, 1)
            # out-of-range lanes return 0, like loads (ISA range checking)
            m.issue(w, inst, "vm", _land_v(rows, old_all[:, None, :], ex.copy(), m.ids(w).copy()), rregs=rows)
        else:
            m.issue(w, inst, "vm", None)
    return run


CMPSWAP = {"buffer_atomic_cmpswap": 1, "global_atomic_cmpswap": 1, "buffer_atomic_cmpswap_x2": 2,
           "global_atomic_cmpswap_x2": 2}


def _mem_cmpswap(inst, addr_fn, n):
    """tmp = MEM; MEM = (tmp == DATA[n:2n]) ? DATA[0:n] : tmp; RETURN = tmp (sc0); n dwords, lanes in
    order (CDNA4 ISA FLAT/MUBUF ATOMIC_CMPSWAP{,_X2}: data holds {src, cmp})."""
    data_op = inst.operand("vdata") or inst.operand("data")
    row = r_index(data_op)
    ret_op = inst.operand("vdst") or (data_op if "buffer" in inst.name else None)
    ret = bool(inst.modifiers.get("sc0")) and ret_op is not None
    dt = U32 if n == 1 else np.uint64

    def run(m, w):
        ex = m.execm[w]
        addr, ok = addr_fn(m, w, 4 * n)
        act = ex if ok is None else ex & ok
        if ok is not None and ok.ndim == 3:
            raise not_emulated(inst, "partly out-of-range lanes")
        if (addr[act] & np.uint64(4 * n - 1)).any():
            raise EmuError(f"{where(inst)}: misaligned atomic address")
        off = m.mem.offsets(addr[act], 4 * n, lambda: where(inst))
        words = m.mem.arena.view(dt)
        vals = np.ascontiguousarray(m.R[w, row:row + 2 * n].transpose(0, 2, 1))[act]      # [a, 2n] dwords
        src, cmp = vals[:, :n].copy().view(dt)[:, 0], vals[:, n:].copy().view(dt)[:, 0]
        old = np.empty(len(off), dt)
        for j, (i, sv, cv) in enumerate(zip((off // (4 * n)).tolist(), src.tolist(), cmp.tolist())):
            cur = int(words[i])
            old[j] = cur
            if cur == cv:
                words[i] = sv
        if not ret:
            m.issue(w, inst, "vm", None)
            return
        out = np.zeros(ex.shape + (n,), U32)
        out[act] = old.view(U32).reshape(-1, n)
        rows = _dst_rows(ret_op, n)
        m.issue(w, inst, "vm", _land_v(rows, out.transpose(0, 2, 1), ex.copy(), m.ids(w).copy()), rregs=rows)
    return run


def atomic_op(typ, cur, v):
    if typ == "u32":
        return (cur + v) & 0xFFFFFFFF
    if typ == "f32":
        return int((np.uint32(cur).view(np.float32) + np.uint32(v).view(np.float32)).astype(np.float32).view(U32))
    out = 0
    for h in (0, 16):
        a, b = (cur >> h) & 0xFFFF, (v >> h) & 0xFFFF
        if typ == "f16":
            r = int((np.uint16(a).view(np.float16) + np.uint16(b).view(np.float16)).view(np.uint16))
        else:
            from .machine import f32_to_bf16_rne
            s = np.uint32(a << 16).view(np.float32) + np.uint32(b << 16).view(np.float32)
            r = int(f32_to_bf16_rne(np.array([s], np.float32))[0])
        out |= r << h
    return out


@semantic(*BUF_LOAD, *BUF_STORE, *GLB_LOAD, *GLB_STORE, *GLB_LDS, *ATOMIC, *D16, *CMPSWAP)
def c_vmem(inst, ctx):
    name = inst.name
    is_buf = name.startswith("buffer_")
    if inst.modifiers.get("tfe") or inst.modifiers.get("lwe") or inst.modifiers.get("addr64"):
        raise not_emulated(inst, "tfe/lwe/addr64")
    addr_fn = buffer_address(inst) if is_buf else global_address(inst)
    if name in ATOMIC:
        return _mem_atomic(inst, addr_fn, ATOMIC[name])
    if name in D16:
        return _mem_load_d16(inst, addr_fn)
    if name in CMPSWAP:
        return _mem_cmpswap(inst, addr_fn, CMPSWAP[name])
    if name in BUF_STORE or name in GLB_STORE:
        return _mem_store(inst, addr_fn, (BUF_STORE | GLB_STORE)[name])
    if name in GLB_LDS:
        return _mem_load(inst, addr_fn, GLB_LDS[name], True)
    return _mem_load(inst, addr_fn, (BUF_LOAD | GLB_LOAD)[name], bool(inst.modifiers.get("lds")))
