"""Scalar semantics: SOP1/SOP2/SOPK/SOPC/SOPP and SMEM (CDNA4 ISA ch.4-5, pseudocode per opcode)."""
from __future__ import annotations

import numpy as np

from ..isa.operands import Imm, Waitcnt
from .machine import (BAR, DONE, S_EXEC, semantic, not_emulated, s_index, ssrc, where)
from .memory import EmuError

U64 = np.uint64
M32 = U64(0xFFFFFFFF)
M64 = U64(0xFFFFFFFFFFFFFFFF)


def i32(x):
    return (x & M32).astype(np.uint32).view(np.int32).astype(np.int64)


def i64(x):
    return x.view(np.int64)


# ---- SOP2 / SOPC / SOP1: (width, fn(a, b, scc) -> (result uint64, scc or None)) -------------------
def _sh(b, n):
    return b & U64(31 if n == 1 else 63)


SOP2 = {
    "s_add_u32": (1, lambda a, b, c: (a + b, (a + b) >> U64(32))),
    "s_sub_u32": (1, lambda a, b, c: ((a - b) & M32, a < b)),
    "s_addc_u32": (1, lambda a, b, c: (a + b + c, (a + b + c) >> U64(32))),
    "s_subb_u32": (1, lambda a, b, c: ((a - b - c) & M32, a < b + c)),
    "s_add_i32": (1, lambda a, b, c: (a + b, _ovf(i32(a), i32(b), i32(a) + i32(b)))),
    "s_sub_i32": (1, lambda a, b, c: (a - b, _ovf(i32(a), -i32(b), i32(a) - i32(b)))),
    "s_mul_i32": (1, lambda a, b, c: ((i32(a) * i32(b)).astype(np.uint64), None)),
    "s_mul_hi_u32": (1, lambda a, b, c: ((a * b) >> U64(32), None)),
    "s_mul_hi_i32": (1, lambda a, b, c: (((i32(a) * i32(b)) >> 32).astype(np.uint64), None)),
    "s_min_i32": (1, lambda a, b, c: (np.where(i32(a) < i32(b), a, b), i32(a) < i32(b))),
    "s_min_u32": (1, lambda a, b, c: (np.minimum(a, b), a < b)),
    "s_max_i32": (1, lambda a, b, c: (np.where(i32(a) > i32(b), a, b), i32(a) > i32(b))),
    "s_max_u32": (1, lambda a, b, c: (np.maximum(a, b), a > b)),
    "s_cselect_b32": (1, lambda a, b, c: (np.where(c != 0, a, b), None)),
    "s_cselect_b64": (2, lambda a, b, c: (np.where(c != 0, a, b), None)),
    "s_lshl_b32": (1, lambda a, b, c: _nz((a << _sh(b, 1)) & M32)),
    "s_lshr_b32": (1, lambda a, b, c: _nz(a >> _sh(b, 1))),
    "s_ashr_i32": (1, lambda a, b, c: _nz((i32(a) >> _sh(b, 1).astype(np.int64)).astype(np.uint64) & M32)),
    "s_lshl_b64": (2, lambda a, b, c: _nz(a << _sh(b, 2))),
    "s_lshr_b64": (2, lambda a, b, c: _nz(a >> _sh(b, 2))),
    "s_ashr_i64": (2, lambda a, b, c: _nz((i64(a) >> _sh(b, 2).astype(np.int64)).view(np.uint64))),
    "s_bfm_b32": (1, lambda a, b, c: ((((U64(1) << (a & U64(31))) - U64(1)) << (b & U64(31))) & M32, None)),
    # 64-bit mask from two 32-bit sources: ((1 << S0[5:0]) - 1) << S1[5:0]
    "s_bfm_b64": (2, lambda a, b, c: (((U64(1) << (a & U64(63))) - U64(1)) << (b & U64(63)), None)),
    "s_bfe_u32": (1, lambda a, b, c: _nz(_bfe(a, b))),
    "s_bfe_i32": (1, lambda a, b, c: _nz(_bfe_s(a, b))),
    "s_lshl1_add_u32": (1, lambda a, b, c: ((a << U64(1)) + b, ((a << U64(1)) + b) >> U64(32) != 0)),
    "s_lshl2_add_u32": (1, lambda a, b, c: ((a << U64(2)) + b, ((a << U64(2)) + b) >> U64(32) != 0)),
    "s_lshl3_add_u32": (1, lambda a, b, c: ((a << U64(3)) + b, ((a << U64(3)) + b) >> U64(32) != 0)),
    "s_lshl4_add_u32": (1, lambda a, b, c: ((a << U64(4)) + b, ((a << U64(4)) + b) >> U64(32) != 0)),
    "s_absdiff_i32": (1, lambda a, b, c: _nz(np.abs(i32(a) - i32(b)).astype(np.uint64) & M32)),
}
for _w, _m in ((1, "b32"), (2, "b64")):
    _mask = M32 if _w == 1 else M64
    SOP2.update({
        f"s_and_{_m}": (_w, lambda a, b, c: _nz(a & b)),
        f"s_or_{_m}": (_w, lambda a, b, c: _nz(a | b)),
        f"s_xor_{_m}": (_w, lambda a, b, c: _nz(a ^ b)),
        f"s_andn2_{_m}": (_w, lambda a, b, c, k=_mask: _nz(a & ~b & k)),
        f"s_orn2_{_m}": (_w, lambda a, b, c, k=_mask: _nz((a | ~b) & k)),
        f"s_nand_{_m}": (_w, lambda a, b, c, k=_mask: _nz(~(a & b) & k)),
        f"s_nor_{_m}": (_w, lambda a, b, c, k=_mask: _nz(~(a | b) & k)),
        f"s_xnor_{_m}": (_w, lambda a, b, c, k=_mask: _nz(~(a ^ b) & k)),
    })


NARROW_SRC = {"s_lshl_b64", "s_lshr_b64", "s_ashr_i64", "s_bfm_b64"}    # 64-bit result, 32-bit S1


def _nz(r):
    return r, r != 0


def _ovf(a, b, r):
    # signed overflow: operands of equal sign, result of the other sign
    return ((a >= 0) == (b >= 0)) & ((r >= 0) != (a >= 0)) | (r > 0x7FFFFFFF) | (r < -0x80000000)


def _bfe(a, b):
    off, width = b & U64(31), (b >> U64(16)) & U64(0x7F)
    return (a >> off) & ((U64(1) << np.minimum(width, U64(32))) - U64(1))


def _bfe_s(a, b):
    width = ((b >> U64(16)) & U64(0x7F)).astype(np.int64)
    v = _bfe(a, b).astype(np.int64)
    sign = np.where(width > 0, (v >> np.maximum(width - 1, 0)) & 1, 0)
    v = np.where(sign == 1, v - (np.int64(1) << np.minimum(width, 62)), v)
    return v.astype(np.uint64) & M32


def _result(m, w, d, r, width):
    m.swrite(w, d, r & (M32 if width == 1 else M64), width)


@semantic(*SOP2)
def c_sop2(inst, ctx):
    width, fn = SOP2[inst.name]
    wb = 1 if inst.name.endswith(("_b64_b32",)) else width
    dst, a, b = inst.operands
    ga = ssrc(a, 1 if inst.name == "s_bfm_b64" else width)
    gb = ssrc(b, 1 if inst.name in NARROW_SRC else wb)
    d = s_index(dst)
    writes_scc = "scc" in (inst.info.get("implicit_writes") or ())

    def run(m, w):
        r, scc = fn(ga(m, w), gb(m, w), m.scc(w).astype(np.uint64))
        if writes_scc and scc is not None:
            m.set_scc(w, scc)
        _result(m, w, d, r, width)
    return run


SOPC = {"eq": np.equal, "lg": np.not_equal, "gt": np.greater, "ge": np.greater_equal, "lt": np.less,
        "le": np.less_equal}


@semantic(*[f"s_cmp_{o}_{t}" for o in SOPC for t in ("i32", "u32")], "s_cmp_eq_u64", "s_cmp_lg_u64",
          *[f"s_cmpk_{o}_{t}" for o in SOPC for t in ("i32", "u32")])
def c_sopc(inst, ctx):
    _, _, op, t = inst.name.split("_")
    cmp = SOPC[op]
    n = 2 if t == "u64" else 1
    a, b = inst.operands
    ga = ssrc(a, n)
    if inst.name.startswith("s_cmpk"):
        v = b.value & 0xFFFF
        v = v - 0x10000 if (t == "i32" and v & 0x8000) else v
        gb = lambda m, w, v=v: np.full(m.nw(w), np.uint64(v & 0xFFFFFFFF), np.uint64)
    else:
        gb = ssrc(b, n)
    conv = i32 if t == "i32" else (lambda x: x)
    return lambda m, w: m.set_scc(w, cmp(conv(ga(m, w)), conv(gb(m, w))))


@semantic("s_bitcmp0_b32", "s_bitcmp1_b32", "s_bitcmp0_b64", "s_bitcmp1_b64")
def c_bitcmp(inst, ctx):
    n = 2 if inst.name.endswith("64") else 1
    want = U64(1 if "bitcmp1" in inst.name else 0)
    ga, gb = ssrc(inst.operands[0], n), ssrc(inst.operands[1])
    return lambda m, w: m.set_scc(w, ((ga(m, w) >> (gb(m, w) & U64(63 if n == 2 else 31))) & U64(1)) == want)


def _ff1(x, bits):
    x = x & (M32 if bits == 32 else M64)
    low = x & (~x + U64(1))   # lowest set bit
    r = np.where(x == 0, -1, np.log2(np.maximum(low, U64(1)).astype(np.float64)).astype(np.int64))
    return r.astype(np.uint64) & M32


def _flbit(x, bits):
    x = x & (M32 if bits == 32 else M64)
    hi = np.floor(np.log2(np.maximum(x, U64(1)).astype(np.float64))).astype(np.int64)
    # log2 of a float64 may round up for 64-bit values near a power of two; correct it
    hi = np.where((hi > 0) & ((x >> np.maximum(hi, 0).astype(np.uint64)) == 0), hi - 1, hi)
    return (np.where(x == 0, -1, bits - 1 - hi)).astype(np.uint64) & M32


SOP1 = {  # name: (src width, dst width, fn(a, scc) -> (r, scc or None))
    "s_mov_b32": (1, 1, lambda a, c: (a, None)),
    "s_mov_b64": (2, 2, lambda a, c: (a, None)),
    "s_cmov_b32": (1, 1, None),
    "s_cmov_b64": (2, 2, None),
    "s_not_b32": (1, 1, lambda a, c: _nz(~a & M32)),
    "s_not_b64": (2, 2, lambda a, c: _nz(~a & M64)),
    "s_brev_b32": (1, 1, lambda a, c: (_brev32(a), None)),
    "s_bcnt1_i32_b32": (1, 1, lambda a, c: _nz(np.bitwise_count(a & M32).astype(np.uint64))),
    "s_bcnt1_i32_b64": (2, 1, lambda a, c: _nz(np.bitwise_count(a).astype(np.uint64))),
    "s_bcnt0_i32_b32": (1, 1, lambda a, c: _nz(U64(32) - np.bitwise_count(a & M32).astype(np.uint64))),
    "s_ff1_i32_b32": (1, 1, lambda a, c: (_ff1(a, 32), None)),
    "s_ff1_i32_b64": (2, 1, lambda a, c: (_ff1(a, 64), None)),
    "s_ff0_i32_b32": (1, 1, lambda a, c: (_ff1(~a & M32, 32), None)),
    "s_flbit_i32_b32": (1, 1, lambda a, c: (_flbit(a, 32), None)),
    "s_flbit_i32_b64": (2, 1, lambda a, c: (_flbit(a, 64), None)),
    "s_sext_i32_i8": (1, 1, lambda a, c: (((a & U64(0xFF)) ^ U64(0x80)) - U64(0x80) & M32, None)),
    "s_sext_i32_i16": (1, 1, lambda a, c: (((a & U64(0xFFFF)) ^ U64(0x8000)) - U64(0x8000) & M32, None)),
    "s_abs_i32": (1, 1, lambda a, c: _nz(np.abs(i32(a)).astype(np.uint64) & M32)),
    "s_bitset0_b32": (1, 1, None), "s_bitset1_b32": (1, 1, None),
}


def _brev32(a):
    x = (a & M32).astype(np.uint32)
    b = np.unpackbits(x.view(np.uint8).reshape(-1, 4), axis=1, bitorder="little")[:, ::-1]
    return np.packbits(b, axis=1, bitorder="little").view(np.uint32).reshape(-1).astype(np.uint64)


@semantic(*SOP1)
def c_sop1(inst, ctx):
    sw, dw, fn = SOP1[inst.name]
    dst, a = inst.operands
    ga = ssrc(a, sw)
    d = s_index(dst)
    if inst.name.startswith("s_cmov"):
        def run(m, w):
            keep = m.sread(w, d, dw)
            m.swrite(w, d, np.where(m.scc(w) != 0, ga(m, w), keep), dw)
        return run
    if inst.name.startswith("s_bitset"):
        val = U64(1 if "bitset1" in inst.name else 0)

        def run(m, w):
            cur, bit = m.sread(w, d), ga(m, w) & U64(31)
            m.swrite(w, d, (cur & ~(U64(1) << bit) & M32) | (val << bit))
        return run
    writes_scc = "scc" in (inst.info.get("implicit_writes") or ())

    def run(m, w):
        r, scc = fn(ga(m, w), m.scc(w))
        if writes_scc and scc is not None:
            m.set_scc(w, scc)
        m.swrite(w, d, r & (M32 if dw == 1 else M64), dw)
    return run


SAVEEXEC = {  # new exec from (s0, exec); saved = old exec (CDNA4 ISA SOP1 *_SAVEEXEC)
    "and": lambda s, e: s & e, "or": lambda s, e: s | e, "xor": lambda s, e: s ^ e,
    "andn2": lambda s, e: s & ~e, "orn2": lambda s, e: (s | ~e) & M64, "nand": lambda s, e: ~(s & e) & M64,
    "nor": lambda s, e: ~(s | e) & M64, "xnor": lambda s, e: ~(s ^ e) & M64,
}


@semantic(*[f"s_{k}_saveexec_b64" for k in SAVEEXEC])
def c_saveexec(inst, ctx):
    fn = SAVEEXEC[inst.name[2:].split("_saveexec")[0]]
    dst, a = inst.operands
    ga, d = ssrc(a, 2), s_index(dst)

    def run(m, w):
        s0, e = ga(m, w), m.sread(w, S_EXEC, 2)
        new = fn(s0, e)
        m.swrite(w, d, e, 2)
        m.swrite(w, S_EXEC, new, 2)
        m.set_scc(w, new != 0)
    return run


@semantic("s_movk_i32", "s_cmovk_i32", "s_addk_i32", "s_mulk_i32")
def c_sopk(inst, ctx):
    dst, k = inst.operands
    v = k.value & 0xFFFF
    v = v - 0x10000 if v & 0x8000 else v
    d = s_index(dst)
    kind = inst.name[2:-4]

    def run(m, w):
        n = m.nw(w)
        if kind == "movk":
            m.swrite(w, d, np.full(n, v, np.int64))
        elif kind == "cmovk":
            m.swrite(w, d, np.where(m.scc(w) != 0, v, i32(m.sread(w, d))))
        elif kind == "addk":
            a = i32(m.sread(w, d))
            r = a + v
            m.set_scc(w, (r > 0x7FFFFFFF) | (r < -0x80000000))
            m.swrite(w, d, r & 0xFFFFFFFF)
        else:
            m.swrite(w, d, (i32(m.sread(w, d)) * v) & 0xFFFFFFFF)
    return run


# ---- program control ------------------------------------------------------------------------
@semantic("s_getpc_b64")
def c_getpc(inst, ctx):
    d = s_index(inst.operands[0])
    nxt = ctx.program.insts[ctx.index].pc + 4     # address of the next instruction (relative to entry)
    from .memory import BASE
    code_base = BASE - (1 << 40)                  # the code segment's fake address
    return lambda m, w: m.swrite(w, d, np.full(m.nw(w), code_base + nxt, np.uint64), 2)


def _pc_to_index(m, inst, addr):
    from .memory import BASE
    rel = addr.astype(np.int64) - (BASE - (1 << 40))
    by_pc = m.program.__dict__.setdefault("_by_pc", {x.pc: i for i, x in enumerate(m.program.insts)})
    out = []
    for a in rel.tolist():
        if a not in by_pc:
            raise EmuError(f"{where(inst)} jumps to 0x{a:x}, which is not an instruction of the kernel")
        out.append(by_pc[a])
    return np.array(out, np.int64)


@semantic("s_setpc_b64", "s_swappc_b64")
def c_setpc(inst, ctx):
    swap = inst.name == "s_swappc_b64"
    src = inst.operands[1] if swap else inst.operands[0]
    gs = ssrc(src, 2)
    getpc = c_getpc(inst, ctx) if swap else None

    def run(m, w):
        tgt = _pc_to_index(m, inst, gs(m, w))
        if swap:
            getpc(m, w)
        m.pc[w] = tgt
        m.group_all = False
        return True
    return run


BRANCH_COND = {
    "s_branch": None,
    "s_cbranch_scc0": lambda m, w: m.scc(w) == 0,
    "s_cbranch_scc1": lambda m, w: m.scc(w) != 0,
    "s_cbranch_vccz": lambda m, w: (m.S[w, 106] | m.S[w, 107]) == 0,
    "s_cbranch_vccnz": lambda m, w: (m.S[w, 106] | m.S[w, 107]) != 0,
    "s_cbranch_execz": lambda m, w: (m.S[w, S_EXEC] | m.S[w, S_EXEC + 1]) == 0,
    "s_cbranch_execnz": lambda m, w: (m.S[w, S_EXEC] | m.S[w, S_EXEC + 1]) != 0,
}


@semantic(*BRANCH_COND)
def c_branch(inst, ctx):
    cond = BRANCH_COND[inst.name]
    tgt = ctx.target
    if tgt is None:
        raise not_emulated(inst, "branch target unknown")
    here = ctx.index

    def run(m, w):
        if cond is None:
            m.pc[w] = tgt
            return True
        c = cond(m, w)
        m.pc[w] = np.where(c, tgt, here + 1)
        if m.group_all and c.any() and not c.all():
            m.group_all = False
        return True
    return run


@semantic("s_waitcnt")
def c_waitcnt(inst, ctx):
    op = inst.operands[0] if inst.operands else Waitcnt()
    if isinstance(op, Imm):
        op = Waitcnt.from_simm16(op.value)
    vm, lg = op.vmcnt, op.lgkmcnt

    def run(m, w):
        if m.n_pending:
            m.wait(w, vm=vm, lgkm=lg)
    return run


@semantic("s_waitcnt_vmcnt", "s_waitcnt_lgkmcnt")
def c_waitcnt_sep(inst, ctx):
    ops = inst.operands
    if len(ops) != 2 or not isinstance(ops[1], Imm) or str(ops[0]) != "null" and not (
            hasattr(ops[0], "file") or str(ops[0]) in ("null",)):
        raise not_emulated(inst)
    gs = ssrc(ops[0]) if str(ops[0]) != "null" else (lambda m, w: np.zeros(m.nw(w), np.uint64))
    k = ops[1].value
    key = "vm" if "vmcnt" in inst.name else "lgkm"

    def run(m, w):
        n = int((gs(m, w) + np.uint64(k)).min())
        m.wait(w, **{key: n})
    return run


@semantic("s_barrier")
def c_barrier(inst, ctx):
    def run(m, w):
        m.status[w] = BAR
        m.group_all = False
        m.release_barriers()
        return True
    return run


@semantic("s_endpgm")
def c_endpgm(inst, ctx):
    def run(m, w):
        if m.n_pending:
            m.drain(w)       # stores complete even if the program never waits for them
        m.status[w] = DONE
        m.group_all = False
        m.release_barriers()
        return True
    return run


@semantic("s_nop", "s_sleep", "s_setprio", "s_sethalt_disabled", "s_ttracedata", "s_icache_inv", "s_dcache_wb",
          "s_dcache_inv")
def c_nop(inst, ctx):
    return lambda m, w: None


# ---- SMEM ---------------------------------------------------------------------------------------
def smem_address(inst):
    """fn(m, w) -> byte address [k] (uint64) of an SMEM access: SBASE + SOFFSET (an SGPR, or a 21-bit
    signed immediate), dword aligned (CDNA4 ISA ch.5: the two low bits are ignored)."""
    _, base, off = inst.operands[:3]
    gbase = ssrc(base, 2)
    goff = ssrc(off)
    if isinstance(off, Imm):
        offv = off.value & 0x1FFFFF
        offv -= (offv & 0x100000) << 1          # 21-bit signed immediate offset
        goff = lambda m, w: np.full(m.nw(w), offv, np.int64)

    def addr(m, w):
        a = (gbase(m, w).astype(np.int64) + goff(m, w).astype(np.int64)) & ~3
        return a.astype(np.uint64)
    return addr


@semantic("s_load_dword", "s_load_dwordx2", "s_load_dwordx4", "s_load_dwordx8", "s_load_dwordx16")
def c_s_load(inst, ctx):
    n = inst.slots[0]["dwords"]
    d = s_index(inst.operands[0])
    address = smem_address(inst)
    cols = np.arange(d, d + n)

    def run(m, w):
        addr = address(m, w)
        off_ = m.mem.offsets(addr, 4 * n, lambda: where(inst))
        data = m.mem.arena[off_[:, None] + np.arange(4 * n)].view(np.uint32).reshape(-1, n).copy()
        waves = m.ids(w).copy()

        def land(m2, sel):
            m2.S[np.ix_(waves[sel], cols)] = data[sel]
            if cols[0] <= S_EXEC + 1 and cols[-1] >= S_EXEC:
                m2.refresh_exec(waves[sel])
        m.issue(w, inst, "lgkm", land, sregs=cols, smem=True)
    return run


@semantic("s_memtime", "s_memrealtime")
def c_s_memtime(inst, ctx):
    """SDATA[64] = a time stamp (CDNA4 ISA ch.5: s_memtime the shader clock counter, s_memrealtime the
    fixed-frequency real-time counter). The emulator has no clock: both return how many wave-instructions
    the machine had executed at issue, which only ever grows. Like an SMEM load, it lands at the wait."""
    d = s_index(inst.operands[0])
    cols = np.array([d, d + 1])

    def run(m, w):
        t = int(m.wave_instructions)
        waves = m.ids(w).copy()

        def land(m2, sel):
            m2.S[np.ix_(waves[sel], cols)] = np.array([t & 0xFFFFFFFF, t >> 32], np.uint32)
        m.issue(w, inst, "lgkm", land, sregs=cols, smem=True)
    return run


@semantic("s_store_dword", "s_store_dwordx2", "s_store_dwordx4")
def c_s_store(inst, ctx):
    """MEM[addr] = SDATA (CDNA4 ISA ch.5). Written at issue, like the vector stores; lgkm counts it."""
    n = inst.slots[0]["dwords"]
    d = s_index(inst.operands[0])
    address = smem_address(inst)

    def run(m, w):
        off_ = m.mem.offsets(address(m, w), 4 * n, lambda: where(inst))
        words = m.mem.arena.view(np.uint32)
        words[(off_ >> 2)[:, None] + np.arange(n)] = m.S[w, d:d + n]
        m.issue(w, inst, "lgkm", None, smem=True)
    return run


# SMEM atomics on one dword: new MEM value from (old, data) (CDNA4 ISA ch.5 / the VMEM atomic table)
S_ATOMIC = {
    "s_atomic_swap": lambda old, v: v,
    "s_atomic_add": lambda old, v: (old + v) & 0xFFFFFFFF,
    "s_atomic_sub": lambda old, v: (old - v) & 0xFFFFFFFF,
    "s_atomic_inc": lambda old, v: 0 if old >= v else old + 1,
    "s_atomic_dec": lambda old, v: v if old == 0 or old > v else old - 1,
}


@semantic(*S_ATOMIC)
def c_s_atomic(inst, ctx):
    """Waves apply the operation one after another (ascending wave id); with glc the pre-op value
    lands in SDATA at the lgkm wait."""
    fn = S_ATOMIC[inst.name]
    d = s_index(inst.operands[0])
    address = smem_address(inst)
    ret = bool(inst.modifiers.get("glc"))

    def run(m, w):
        off_ = m.mem.offsets(address(m, w), 4, lambda: where(inst))
        words = m.mem.arena.view(np.uint32)
        data = m.S[w, d].astype(np.int64)
        old = np.empty(len(off_), np.uint32)
        for j, (i, v) in enumerate(zip((off_ >> 2).tolist(), data.tolist())):
            old[j] = words[i]
            words[i] = fn(int(old[j]), v)
        if not ret:
            m.issue(w, inst, "lgkm", None, smem=True)
            return
        waves = m.ids(w).copy()

        def land(m2, sel):
            m2.S[waves[sel], d] = old[sel]
        m.issue(w, inst, "lgkm", land, sregs=np.array([d]), smem=True)
    return run
