"""Per-wave modes that change how later vector instructions execute.

* S_SETVSKIP S0, S1: VSKIP = S0[S1[4:0]]. While VSKIP is set, the wave issues no vector
  instruction (VOP*, DS, buffer/global/flat, MIMG, EXP): they are skipped (Vega/CDNA ISA, SOPC).
* S_SET_GPR_IDX_ON S0, mode: MODE.gpr_idx_en = 1, M0[7:0] = S0[7:0], M0[15:12] = mode;
  S_SET_GPR_IDX_OFF clears gpr_idx_en; S_SET_GPR_IDX_IDX sets M0[7:0], S_SET_GPR_IDX_MODE M0[15:12].
  While enabled, a VALU instruction's VGPR operands are offset by M0[7:0]: SRC0 when M0[12],
  SRC1 M0[13], SRC2 M0[14], VDST M0[15] (the gpr_idx(SRC0,SRC1,SRC2,DST) bits of LLVM's syntax).

The machine calls wrap() (machine.WRAPPERS) on every compiled instruction; only the vector
instructions of programs that contain these mode instructions are wrapped, so other kernels pay
nothing. The indexed form of an instruction is compiled once per (index, mode) and cached.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..isa.operands import Expr, Imm, Mod, Reg
from .machine import S_M0, WRAPPERS, semantic, ssrc, where
from .memory import EmuError

VECTOR = ("v_", "ds_", "buffer_", "global_", "flat_", "scratch_", "image_", "tbuffer_", "exp")
GPR_IDX = ("s_set_gpr_idx_on", "s_set_gpr_idx_off", "s_set_gpr_idx_idx", "s_set_gpr_idx_mode")
SLOT_BIT = {"src0": 0, "vsrc0": 0, "src1": 1, "vsrc1": 1, "src2": 2, "vsrc2": 2, "vdst": 3}
MODE_BIT = {"SRC0": 0, "SRC1": 1, "SRC2": 2, "DST": 3}


def _uses(program, names) -> bool:
    key = "_uses_" + names[0]
    got = program.__dict__.get(key)
    if got is None:
        got = program.__dict__[key] = any(i.name in names for i in program.insts)
    return got


def _mode_bits(op) -> int:
    if isinstance(op, Imm):
        return op.value & 0xF
    if isinstance(op, Expr) and op.text.startswith("gpr_idx(") and op.text.endswith(")"):
        names = [x.strip() for x in op.text[len("gpr_idx("):-1].split(",") if x.strip()]
        if all(n in MODE_BIT for n in names):
            return sum(1 << MODE_BIT[n] for n in names)
    raise EmuError(f"not emulated: gpr_idx mode operand {op}")


def indexed(inst, idx: int, mode: int):
    """The instruction with the VGPR operands of the slots enabled in mode moved up by idx."""
    ops = list(inst.operands)
    for n, slot in enumerate(s.get("name") for s in inst.slots):
        bit = SLOT_BIT.get(slot)
        if bit is None or not (mode >> bit) & 1 or n >= len(ops):
            continue
        op = ops[n]
        base = op.base if isinstance(op, Mod) else op
        if isinstance(base, Reg) and base.file == "v":
            moved = Reg("v", base.index + idx, base.count)
            ops[n] = dataclasses.replace(op, base=moved) if isinstance(op, Mod) else moved
    return dataclasses.replace(inst, operands=tuple(ops))


def wrap(program, inst, fn, ctx):
    skip = inst.name.startswith(VECTOR) and _uses(program, ("s_setvskip",))
    gidx = inst.name.startswith("v_") and _uses(program, GPR_IDX)
    if not (skip or gidx):
        return fn
    from .machine import SEMANTICS
    variants = {}

    def run(m, w):
        ids = m.ids(w)
        go = ~m.vskip[ids] if skip else np.ones(len(ids), bool)
        on = m.gpr_idx_en[ids] & go if gidx else np.zeros(len(ids), bool)
        if go.all() and not on.any():
            return fn(m, w)
        plain = ids[go & ~on]
        if plain.size:
            fn(m, plain)
        if on.any():
            m0 = m.S[ids[on], S_M0].astype(np.int64)
            for key in np.unique(m0 & 0xF0FF):
                idx, mode = int(key) & 0xFF, (int(key) >> 12) & 0xF
                var = variants.get((idx, mode))
                if var is None:
                    try:
                        vi = indexed(inst, idx, mode)
                    except Exception as e:   # an index past v511: the operand cannot exist
                        raise EmuError(f"{where(inst)}: gpr_idx index {idx} moves an operand out of the "
                                       f"VGPR file ({e})") from None
                    if any(isinstance(o, Reg) and o.file == "v" and o.last >= m.R.shape[1] for o in vi.operands):
                        raise EmuError(f"{where(inst)}: gpr_idx index {idx} addresses a VGPR the kernel "
                                       f"does not have")
                    var = variants[(idx, mode)] = SEMANTICS[inst.name](vi, ctx)
                var(m, ids[on][(m0 & 0xF0FF) == key])
        return None
    return run


WRAPPERS.append(wrap)


@semantic("s_setvskip")
def c_setvskip(inst, ctx):
    ga, gb = ssrc(inst.operands[0]), ssrc(inst.operands[1])

    def run(m, w):
        m.vskip[m.ids(w)] = ((ga(m, w) >> (gb(m, w) & np.uint64(31))) & np.uint64(1)).astype(bool)
    return run


@semantic(*GPR_IDX)
def c_gpr_idx(inst, ctx):
    name = inst.name

    def set_m0(m, w, keep, bits):
        m0 = m.S[w, S_M0].astype(np.uint64)
        m.S[w, S_M0] = ((m0 & np.uint64(keep)) | bits).astype(np.uint32)

    if name == "s_set_gpr_idx_off":
        def off(m, w):
            m.gpr_idx_en[m.ids(w)] = False
        return off
    if name == "s_set_gpr_idx_mode":
        mode = np.uint64(_mode_bits(inst.operands[0]) << 12)
        return lambda m, w: set_m0(m, w, 0xFFFF0FFF, mode)
    g = ssrc(inst.operands[0])
    if name == "s_set_gpr_idx_idx":
        return lambda m, w: set_m0(m, w, 0xFFFFFF00, g(m, w) & np.uint64(0xFF))
    mode = np.uint64(_mode_bits(inst.operands[1]) << 12)

    def on(m, w):
        set_m0(m, w, 0xFFFF0F00, (g(m, w) & np.uint64(0xFF)) | mode)
        m.gpr_idx_en[m.ids(w)] = True
    return on
