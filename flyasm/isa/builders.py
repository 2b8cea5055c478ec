"""Typed instruction builders, generated from the tables: one callable per mnemonic.

`make(mnemonic, *operands, **modifiers)` checks operand kind, register width, alignment, immediate
and modifier ranges against isa_tables/gfx950.json and returns an Instruction. Kernel exposes the
same as methods (`k.v_mfma_f32_32x32x16_bf16(...)`).
"""
from __future__ import annotations

from ..errors import OperandError, SourceLoc, UnknownInstructionError, user_location
from . import tables
from .instruction import Instruction
from .operands import Expr, Imm, Label, Mod, Reg, Special, Waitcnt, as_operand

# Modifier families by encoding (names as llvm-mc spells them).
DPP_MODS = {"quad_perm", "row_shl", "row_shr", "row_ror", "wave_shl", "wave_rol", "wave_shr", "wave_ror",
            "row_mirror", "row_half_mirror", "row_bcast", "row_mask", "bank_mask", "bound_ctrl", "fi"}
SDWA_MODS = {"dst_sel", "dst_unused", "src0_sel", "src1_sel"}
VOP3_MODS = {"clamp", "mul", "div", "op_sel"}
VOP3P_MODS = {"op_sel", "op_sel_hi", "neg_lo", "neg_hi", "clamp"}
MFMA_MODS = {"cbsz", "abid", "blgp", "neg_lo", "neg_hi", "op_sel", "op_sel_hi"}
MEM_MODS = {
    "MUBUF": {"offen", "idxen", "offset", "sc0", "sc1", "nt", "lds"},
    "MTBUF": {"offen", "idxen", "offset", "sc0", "sc1", "nt", "format"},
    "FLAT": {"offset", "sc0", "sc1", "nt"},
    "FLAT_GLBL": {"offset", "sc0", "sc1", "nt"},
    "FLAT_SCRATCH": {"offset", "sc0", "sc1", "nt"},
    "DS": {"offset", "offset0", "offset1", "gds"},
    "SMEM": {"glc", "offset"},
}
# Inclusive ranges of integer modifiers (CDNA4 ISA ch.13 field widths; llvm-mc agrees).
RANGES = {
    ("MUBUF", "offset"): (0, 4095), ("MTBUF", "offset"): (0, 4095),
    ("DS", "offset"): (0, 65535), ("DS", "offset0"): (0, 255), ("DS", "offset1"): (0, 255),
    ("FLAT", "offset"): (0, 4095), ("FLAT_GLBL", "offset"): (-4096, 4095), ("FLAT_SCRATCH", "offset"): (-4096, 4095),
    ("*", "cbsz"): (0, 7), ("*", "abid"): (0, 15), ("*", "blgp"): (0, 7),
    ("*", "row_mask"): (0, 15), ("*", "bank_mask"): (0, 15), ("*", "row_shl"): (1, 15),
    ("*", "row_shr"): (1, 15), ("*", "row_ror"): (1, 15), ("*", "bound_ctrl"): (0, 1), ("*", "fi"): (0, 1),
    ("*", "mul"): (2, 4), ("*", "div"): (2, 2), ("*", "bitop3"): (0, 255),
}
# Immediate operands with a narrower range than simm16 (mnemonic -> (lo, hi, why)).
IMM_RANGES = {
    "s_nop": (0, 15, "s_nop N waits N+1 states, N 0..15 on gfx950"),
    "s_setprio": (0, 3, "wave priority is 0..3"),
    "s_sleep": (0, 127, "s_sleep takes 0..127"),
    "s_set_gpr_idx_mode": (0, 15, "s_set_gpr_idx_mode takes a 4-bit mode mask"),
    "s_set_gpr_idx_on": (0, 15, "s_set_gpr_idx_on takes a 4-bit mode mask"),
}
# Integer modifiers whose 0 is the encoding default (llvm-objdump omits them): dropped at build time
# so that IR -> .co -> IR gives back the same modifiers. Not for f8f6f4 MFMAs, where cbsz/blgp name
# the A/B formats and LLVM prints them even when 0.
ZERO_DEFAULTS = {"offset", "offset0", "offset1", "cbsz", "abid", "blgp"}
_IMM_KINDS = {"imm16", "simm8", "label", "hwreg", "sendmsg", "waitcnt"}


def _allowed_modifiers(info: dict, suffix: str) -> set[str]:
    fam, probed = info["family"], set(info.get("modifiers", ()))
    allowed: set[str] = set()
    if fam in ("VOP1", "VOP2", "VOPC"):
        if "clamp" in probed:
            allowed.add("clamp")
        if "omod" in probed:
            allowed |= {"mul", "div"}
        if "op_sel" in probed:
            allowed.add("op_sel")
        if suffix != "_e32":
            allowed |= probed & {"bound_ctrl", "fi"}  # VOP3-encoded DPP bits (v_permlane*_swap)
        if "dpp" in probed and suffix in ("", "_dpp"):
            allowed |= DPP_MODS
        if "sdwa" in probed and suffix in ("", "_sdwa"):
            allowed |= SDWA_MODS | {"clamp"}
    elif fam == "VOP3":
        allowed |= {m for m in ("clamp", "op_sel", "bitop3") if m in probed}
        if "omod" in probed:
            allowed |= {"mul", "div"}
    elif fam in ("VOP3P", "VOP3PX2"):
        allowed |= (MFMA_MODS if info["unit"] == "MFMA" else VOP3P_MODS) | (probed & VOP3P_MODS)
        allowed |= probed & MFMA_MODS
    else:
        allowed |= MEM_MODS.get(fam, set())
    return allowed


def _range_check(fam: str, name: str, value, mnemonic: str) -> None:
    r = RANGES.get((fam, name)) or RANGES.get(("*", name))
    if r and isinstance(value, int) and not (r[0] <= value <= r[1]):
        raise OperandError(f"{mnemonic} {name}:{value} is out of range ({r[0]}..{r[1]})")


# The order llvm-mc prints modifiers in; its parser insists on some of it (MUBUF `offen` before
# `offset:`), so builders always emit this order whatever order the keywords came in.
MOD_ORDER = ["offen", "idxen", "offset", "offset0", "offset1", "format", "glc", "sc0", "sc1", "nt", "lds", "gds",
             "op_sel", "op_sel_hi", "neg_lo", "neg_hi", "bitop3", "clamp", "mul", "div", "cbsz", "abid", "blgp",
             "dst_sel", "dst_unused", "src0_sel", "src1_sel", "quad_perm", "row_shl", "row_shr", "row_ror",
             "wave_shl", "wave_rol", "wave_shr", "wave_ror", "row_mirror", "row_half_mirror", "row_bcast",
             "row_mask", "bank_mask", "bound_ctrl", "fi"]
_MOD_RANK = {m: i for i, m in enumerate(MOD_ORDER)}


def _normalise_modifiers(mnemonic: str, info: dict, suffix: str, kw: dict) -> dict:
    kw = dict(sorted(kw.items(), key=lambda kv: _MOD_RANK.get(kv[0], len(MOD_ORDER))))
    allowed = _allowed_modifiers(info, suffix)
    mods: dict = {}
    for k, val in kw.items():
        if val is False or val is None:
            continue
        if k in ZERO_DEFAULTS and val == 0 and k in allowed and not (k in ("cbsz", "blgp") and "f8f6f4" in mnemonic):
            continue  # the encoding's default: LLVM prints nothing, so the IR keeps nothing either
        if k not in allowed:
            hint = f" (it takes: {', '.join(sorted(allowed))})" if allowed else " (it takes none)"
            raise OperandError(f"{mnemonic} has no modifier '{k}'{hint}")
        if isinstance(val, tuple):
            val = list(val)
        if val is True and k not in ("offen", "idxen", "lds", "sc0", "sc1", "nt", "glc", "clamp", "gds",
                                     "row_mirror", "row_half_mirror"):
            raise OperandError(f"{mnemonic} modifier '{k}' needs a value, e.g. {k}=1")
        _range_check(info["family"], k, val, mnemonic)
        if isinstance(val, list) and k in ("op_sel", "op_sel_hi", "neg_lo", "neg_hi", "quad_perm"):
            lim = 3 if k == "quad_perm" else 1
            if any(not isinstance(x, int) or not (0 <= x <= lim) for x in val):
                raise OperandError(f"{mnemonic} {k}:{val} takes values 0..{lim}")
        mods[k] = val
    _check_hidden_bits(mnemonic, info, mods)
    return mods


def _check_hidden_bits(mnemonic: str, info: dict, mods: dict) -> None:
    """The third op_sel/op_sel_hi bits of a scale MFMA (bits 13/14 of its ld_scale prefix) are
    real encoding bits, but llvm-mc (LLVM 22) drops them from text without a word (isa/hidden_bits.py):
    refuse them rather than build something else than what was asked for."""
    if info["family"] != "VOP3PX2":
        return
    for k in ("op_sel", "op_sel_hi"):
        val = mods.get(k)
        if isinstance(val, list) and len(val) > 2 and any(val[2:]):
            raise OperandError(f"{mnemonic} {k}:[{','.join(map(str, val))}] sets the third bit, which llvm-mc silently drops from "
                               f"text; write this instruction with k.raw(words, text) to keep it")


def _check_reg(mn: str, slot: dict, r: Reg, pos: int) -> None:
    kinds = slot["kinds"]
    if r.kind not in kinds:
        raise OperandError(f"{mn} operand {pos} ({slot['name']}) takes {_kinds_text(kinds)}, not {r}")
    w = slot.get("dwords")
    if w and r.count != w:
        eg = f"{r.file}[{r.index}:{r.index + w - 1}]" if w > 1 else f"{r.file}{r.index}"
        raise OperandError(f"{mn} operand {pos} ({slot['name']}) is {w} register{'s' if w > 1 else ''} wide "
                           f"(e.g. {eg}), not {r}")
    if r.file in ("v", "a") and r.count >= 2 and r.index % 2 and mn != "ds_read_b96_tr_b6":
        raise OperandError(f"{mn} operand {pos} ({slot['name']}) {r} must start at an even register "
                           f"(gfx950 aligns 64-bit and wider VGPR/AGPR tuples)")
    if r.file == "s" and r.count >= 2:
        align = 2 if r.count == 2 else 4
        if r.index % align:
            raise OperandError(f"{mn} operand {pos} ({slot['name']}) {r} must start at a multiple of {align}")


def _kinds_text(kinds) -> str:
    names = {"vgpr": "VGPRs", "agpr": "AGPRs", "sgpr": "SGPRs", "iconst": "inline constants",
             "literal": "literals", "m0": "m0", "vcc": "vcc", "exec": "exec", "label": "a label",
             "imm16": "a 16-bit immediate", "simm8": "an 8-bit immediate", "hwreg": "hwreg(...)",
             "sendmsg": "sendmsg(...)", "waitcnt": "a wait count", "scc": "scc", "lds_direct": "lds_direct"}
    return ", ".join(names.get(k, k) for k in kinds) or "no operand here"


def _scalar_source(sp: Special, slot: dict) -> bool:
    """Trap-handler SGPRs and the src_* constants read like SGPRs in scalar-source slots."""
    n = sp.name
    readable = n.startswith(("ttmp", "src_")) or n in ("vccz", "execz", "scc", "flat_scratch_lo", "flat_scratch_hi",
                                                        "xnack_mask_lo", "xnack_mask_hi")
    return readable and "w" not in slot.get("access", "r")


def _check_operand(mn: str, slot: dict, op, pos: int):
    kinds = slot["kinds"]
    base = op.base if isinstance(op, Mod) else op
    if isinstance(op, Mod) and (op.neg or op.abs):
        if isinstance(base, Reg) and base.file == "v" and not set(kinds) & {"vgpr"}:
            raise OperandError(f"{mn} operand {pos} ({slot['name']}) cannot take -/|| modifiers")
    if isinstance(base, Reg):
        _check_reg(mn, slot, base, pos)
    elif isinstance(base, Special):
        k = base.kind
        if k == "off":
            if not (slot.get("off_ok") or slot["name"] == "saddr"):
                raise OperandError(f"{mn} operand {pos} ({slot['name']}) cannot be 'off'")
        elif k not in kinds and not ("sgpr" in kinds and (k in ("vcc", "exec", "m0") or _scalar_source(base, slot))):
            raise OperandError(f"{mn} operand {pos} ({slot['name']}) takes {_kinds_text(kinds)}, not {base}")
    elif isinstance(base, Imm):
        if set(kinds) & _IMM_KINDS:
            if isinstance(base.value, float) or not (-32768 <= base.value <= 65535):
                raise OperandError(f"{mn} operand {pos} ({slot['name']}) is a 16-bit immediate; "
                                   f"{base.value} does not fit")
        lo_hi = IMM_RANGES.get(mn)
        if lo_hi and (set(kinds) & _IMM_KINDS or list(kinds) == ["iconst"]) and isinstance(base.value, int) \
                and not (lo_hi[0] <= base.value <= lo_hi[1]):
            # also immediate-only iconst slots (s_set_gpr_idx_on's mode mask)
            raise OperandError(f"{mn} {base.value} is out of range: {lo_hi[2]}")
        if set(kinds) & _IMM_KINDS:
            pass
        elif base.kind not in kinds:
            if base.kind == "literal" and "iconst" in kinds:
                raise OperandError(f"{mn} operand {pos} ({slot['name']}) takes only inline constants "
                                   f"(-16..64, ±0.5, ±1.0, ±2.0, ±4.0, 1/(2π)); {base.value} needs a register")
            raise OperandError(f"{mn} operand {pos} ({slot['name']}) takes {_kinds_text(kinds)}, not {base.value}")
    elif isinstance(base, Label):
        if "label" not in kinds:
            raise OperandError(f"{mn} operand {pos} ({slot['name']}) takes {_kinds_text(kinds)}, not the "
                               f"label '{base.name}' (unknown register or label name?)")
    elif isinstance(base, Waitcnt):
        if "waitcnt" not in kinds:
            raise OperandError(f"{mn} operand {pos} takes no wait count")
    elif isinstance(base, Expr):
        pass  # hwreg(...), sendmsg(...): llvm-mc checks these
    return op


def _scalar_value(op, slot: dict) -> str | None:
    """The scalar value a VALU source reads over the constant bus (SGPR, VCC, EXEC, M0, trap
    SGPRs, src_* / scc values, a literal), or None (VGPR, AGPR, inline constant, off)."""
    base = op.base if isinstance(op, Mod) else op
    if isinstance(base, Reg):
        return str(base) if base.file == "s" else None
    if isinstance(base, Special):
        # llvm-mc counts src_shared_base and src_scc too, not only SGPRs
        return base.name if base.kind in ("vcc", "exec", "m0") or _scalar_source(base, {}) else None
    if isinstance(base, Imm) and not base.inline and not set(slot["kinds"]) & _IMM_KINDS:
        return "a literal"
    return None


def _check_constant_bus(mn: str, info: dict, ops: tuple, slots: list) -> None:
    """gfx950 VALU instructions read at most one scalar value (LLVM AMDGPUAsmParser::
    getConstantBusLimit: 1 before GFX10; validateConstantBusLimitations counts each distinct SGPR,
    the literal and an implicit VCC/M0 read once). v_writelane_b32's M0 lane select is exempt,
    as llvm-mc accepts `v_writelane_b32 v1, s13, m0` (LLVM test MC/AMDGPU/writelane_m0.s)."""
    used: list[str] = []
    for op, sl in zip(ops, slots):
        if "r" not in sl.get("access", "r") or sl["name"] in ("vdst", "sdst"):
            continue
        val = _scalar_value(op, sl)
        if val is None or (mn == "v_writelane_b32" and sl["name"] == "src1" and val == "m0"):
            continue
        if val not in used:
            used.append(val)
    for r in info.get("implicit_reads", ()):
        if r in ("vcc", "m0") and r not in used:
            used.append(f"{r} (implicit)")
    if len(used) > 1:
        raise OperandError(f"{mn} reads {len(used)} scalar values ({', '.join(used)}), but a gfx950 VALU "
                           f"instruction reads at most one SGPR, VCC, EXEC, M0 or literal (the constant bus); "
                           f"move all but one into VGPRs")


def _check_instruction_rules(mn: str, info: dict, ops: tuple, slots: list) -> None:
    """Rules that involve more than one operand (llvm-mc enforces each; messages say why)."""
    fam = info["family"]
    lits = {b.value for b, sl in zip((o.base if isinstance(o, Mod) else o for o in ops), slots)
            if isinstance(b, Imm) and not b.inline and not set(sl["kinds"]) & _IMM_KINDS}
    if len(lits) > 1:
        raise OperandError(f"{mn} has {len(lits)} different literals; an instruction holds one 32-bit literal")
    if fam == "VOPC" and lits and ops and isinstance(ops[0], Reg):
        raise OperandError(f"{mn} writing {ops[0]} uses the VOP3 encoding, which takes no literal on gfx950 "
                           f"(write vcc, or put the constant in a register)")
    if fam in ("VOP2", "VOPC") and lits:
        srcs = [o for o, sl in zip(ops, slots) if sl["name"].startswith(("src", "vsrc"))]
        src1 = srcs[1] if len(srcs) > 1 else None
        if src1 is not None and not (isinstance(src1, Reg) and src1.file == "v"):
            raise OperandError(f"{mn} with a literal needs a VGPR as its second source (the 32-bit encoding); "
                               f"{src1} there selects the VOP3 encoding, which takes no literal on gfx950")
    if info.get("unit") in ("VALU", "TRANS", "MFMA"):
        _check_constant_bus(mn, info, ops, slots)
    if fam == "SMEM" and mn.startswith("s_buffer_") and any(isinstance(o, Imm) and o.value < 0 for o in ops):
        raise OperandError(f"{mn} takes an unsigned 20-bit offset")
    if info.get("unit") == "MFMA" and mn.startswith(("v_mfma", "v_smfmac")) and len(ops) >= 4:
        d, c = ops[0], ops[3]
        if isinstance(d, Reg) and isinstance(c, Reg) and mn.startswith("v_mfma"):
            if d.file != c.file:
                raise OperandError(f"{mn} C ({c}) and D ({d}) must both be VGPRs or both AGPRs (one ACC_CD bit)")
            if d.overlaps(c) and d != c and d.count > 4:
                raise OperandError(f"{mn} C ({c}) partially overlaps D ({d}); use the same registers or disjoint ones")


def make(mnemonic: str, *args, loc: SourceLoc | None = None, **kw) -> Instruction:
    """Build and check one instruction. Errors name the caller's file:line."""
    loc = loc or user_location()
    try:
        lk = tables.lookup(mnemonic)
    except UnknownInstructionError as e:
        raise UnknownInstructionError(e.message, loc) from None
    info = lk.info
    if "unsupported" in info:
        raise UnknownInstructionError(f"{mnemonic} is listed for gfx950 but LLVM rejects it "
                                      f"({info['unsupported']})", loc)
    try:
        if any(k in kw for k in ("vmcnt", "lgkmcnt", "expcnt")):
            if mnemonic != "s_waitcnt":
                raise OperandError(f"{mnemonic} takes no wait counts; use s_waitcnt(vmcnt=…, lgkmcnt=…)")
            if args:
                raise OperandError("s_waitcnt takes either counters by name or one operand, not both")
            args = (Waitcnt(kw.pop("vmcnt", None), kw.pop("expcnt", None), kw.pop("lgkmcnt", None)),)
        mods = _normalise_modifiers(mnemonic, info, lk.suffix, kw)
        args = tuple(as_operand(x) for x in args)
        slots = tables.slots(info, mods, lk.suffix, args)
        if len(args) != len(slots):
            names = ", ".join(s["name"] for s in slots) or "none"
            raise OperandError(f"{mnemonic} takes {len(slots)} operand{'s' if len(slots) != 1 else ''} "
                               f"({names}), got {len(args)}")
        ops = tuple(_check_operand(mnemonic, slot, as_operand(x), i + 1) for i, (x, slot) in enumerate(zip(args, slots)))
        _check_instruction_rules(mnemonic, info, ops, slots)
    except OperandError as e:
        raise OperandError(e.message, loc) from None
    return Instruction(mnemonic, ops, mods, loc)
