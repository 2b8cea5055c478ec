"""Instruction reference generated from the tables: `doc(mnemonic)` is the docstring of
`k.<mnemonic>` and what `flyasm doc MNEMONIC` prints.

Each entry gives the operands in order (name, kinds, width, read/write), the modifiers the
builder accepts with their ranges and Python spelling, the encoding(s), one line of semantics
and an example written both as the Python call and as the assembly it gives. The semantics line
comes from OPERATIONS (by mnemonic stem, in the ISA guide's D/S0/S1/S2 notation) or, failing
that, from the unit and memory facts of the table.
"""
from __future__ import annotations

import functools
import inspect
import re
import textwrap

from . import tables
from .builders import DPP_MODS, IMM_RANGES, RANGES, SDWA_MODS, _allowed_modifiers
from .operands import Expr, Imm, Label, Mod, Reg, Special, Waitcnt

# One line per operation stem (the word after the unit prefix), per lane for vector ops.
OPERATIONS = {
    "add": "D = S0 + S1", "sub": "D = S0 - S1", "subrev": "D = S1 - S0", "mul": "D = S0 * S1",
    "mul_hi": "D = high half of S0 * S1", "mul_lo": "D = low half of S0 * S1",
    "fma": "D = S0 * S1 + S2 (one rounding)", "fmac": "D = S0 * S1 + D (one rounding)",
    "mad": "D = S0 * S1 + S2", "mac": "D = S0 * S1 + D", "max": "D = max(S0, S1)", "min": "D = min(S0, S1)",
    "max3": "D = max(S0, S1, S2)", "min3": "D = min(S0, S1, S2)", "med3": "D = median(S0, S1, S2)",
    "maximum3": "D = max(S0, S1, S2), NaN-propagating", "minimum3": "D = min(S0, S1, S2), NaN-propagating",
    "and": "D = S0 & S1", "or": "D = S0 | S1", "xor": "D = S0 ^ S1", "not": "D = ~S0",
    "andn2": "D = S0 & ~S1", "orn2": "D = S0 | ~S1", "nand": "D = ~(S0 & S1)", "nor": "D = ~(S0 | S1)",
    "xnor": "D = ~(S0 ^ S1)", "or3": "D = S0 | S1 | S2", "add3": "D = S0 + S1 + S2",
    "lshl": "D = S0 << S1", "lshr": "D = S0 >> S1 (logical)", "ashr": "D = S0 >> S1 (arithmetic)",
    "lshlrev": "D = S1 << S0", "lshrrev": "D = S1 >> S0 (logical)", "ashrrev": "D = S1 >> S0 (arithmetic)",
    "lshl_add": "D = (S0 << S1) + S2", "add_lshl": "D = (S0 + S1) << S2", "lshl_or": "D = (S0 << S1) | S2",
    "and_or": "D = (S0 & S1) | S2", "xad": "D = (S0 ^ S1) + S2",
    "mov": "D = S0", "movk": "D = sign-extended 16-bit constant", "cndmask": "D = VCC/mask lane bit ? S1 : S0",
    "cselect": "D = SCC ? S0 : S1", "cmov": "D = SCC ? S0 : D", "mov_b64": "D = S0 (64-bit)",
    "cvt": "D = S0 converted to the destination format (round to nearest even)",
    "exp": "D = 2^S0", "log": "D = log2(S0)", "rcp": "D = 1 / S0 (approximate)", "rsq": "D = 1 / sqrt(S0) (approximate)",
    "sqrt": "D = sqrt(S0)", "sin": "D = sin(S0 * 2π)", "cos": "D = cos(S0 * 2π)",
    "floor": "D = floor(S0)", "ceil": "D = ceil(S0)", "trunc": "D = trunc(S0)", "rndne": "D = round half to even(S0)",
    "fract": "D = S0 - floor(S0)", "ldexp": "D = S0 * 2^S1", "frexp": "D = mantissa or exponent of S0",
    "cmp": "D (lane mask, VCC by default) = compare(S0, S1) per lane", "cmpx": "EXEC = D = compare(S0, S1) per lane",
    "cmpk": "SCC = compare(S0, 16-bit constant)",
    "bfe": "D = bit field of S0 at offset S1, width S2", "bfi": "D = (S0 & S1) | (~S0 & S2)",
    "bfm": "D = mask of S0 bits at offset S1", "bcnt": "D = population count of S0 (+ S1)",
    "bcnt1": "D = number of 1 bits of S0", "bcnt0": "D = number of 0 bits of S0",
    "ff1": "D = index of the lowest 1 bit of S0", "ff0": "D = index of the lowest 0 bit of S0",
    "flbit": "D = index of the highest set bit of S0", "ffbh": "D = index of the highest set bit of S0",
    "ffbl": "D = index of the lowest set bit of S0", "brev": "D = S0 with bits reversed",
    "bfrev": "D = S0 with bits reversed", "perm": "D = bytes of {S0, S1} selected by S2",
    "alignbit": "D = ({S0, S1} >> S2[4:0])[31:0]", "alignbyte": "D = ({S0, S1} >> 8*S2[1:0])[31:0]",
    "pk_add": "D.lo, D.hi = S0.lo + S1.lo, S0.hi + S1.hi", "pk_mul": "D.lo, D.hi = S0.lo * S1.lo, S0.hi * S1.hi",
    "pk_fma": "D.lo, D.hi = S0 * S1 + S2 per half", "pk_mov": "D = two 32-bit halves picked from S0 and S1",
    "pk_max": "D = max(S0, S1) per half", "pk_min": "D = min(S0, S1) per half",
    "pack": "D = {S1[15:0], S0[15:0]}", "dot2": "D = S0.a*S1.a + S0.b*S1.b + S2",
    "dot2c": "D = S0.a*S1.a + S0.b*S1.b + D", "dot4": "D = 4-element dot(S0, S1) + S2",
    "dot8": "D = 8-element dot(S0, S1) + S2",
    "readlane": "D (SGPR) = S0 in lane S1", "readfirstlane": "D (SGPR) = S0 in the first active lane",
    "writelane": "D in lane S1 = S0 (an SGPR or constant)", "mbcnt": "D = number of set mask bits below this lane + S1",
    "permlane16_swap": "swap the upper 16 lanes of each 32-lane half of vdst with the lower 16 of src0",
    "permlane32_swap": "swap lanes 32..63 of vdst with lanes 0..31 of src0",
    "accvgpr_read": "D (VGPR) = S0 (AGPR)", "accvgpr_write": "D (AGPR) = S0", "accvgpr_mov": "D (AGPR) = S0 (AGPR)",
    "swap": "exchange vdst and src0", "nop": "wait N+1 cycles (wait states) without issuing",
    "waitcnt": "wait until the named counters are at or below their values",
    "barrier": "wait until every wave of the workgroup reaches it", "endpgm": "end the wave",
    "branch": "jump to the label", "cbranch": "jump to the label when the condition holds",
    "setprio": "set the wave's issue priority (0..3)", "sleep": "sleep about 64*N cycles",
    "getpc": "D = address of the next instruction", "setpc": "jump to S0", "swappc": "D = next address; jump to S0",
    "getreg": "D = hardware register field", "setreg": "hardware register field = S0",
    "sendmsg": "send a message to the host/SPI", "lshl1_add": "D = (S0 << 1) + S1",
    "lshl2_add": "D = (S0 << 2) + S1", "lshl3_add": "D = (S0 << 3) + S1", "lshl4_add": "D = (S0 << 4) + S1",
    "addk": "D = D + 16-bit constant", "mulk": "D = D * 16-bit constant", "abs": "D = |S0|",
    "absdiff": "D = |S0 - S1|", "sext": "D = sign-extended S0", "addc": "D = S0 + S1 + carry",
    "subb": "D = S0 - S1 - borrow", "subbrev": "D = S1 - S0 - borrow", "div_fmas": "D = S0 * S1 + S2, scaled by VCC",
    "div_scale": "D = S0 scaled for division", "div_fixup": "D = division result fixed up for special cases",
    "bitop3": "D = any 3-input bitwise function of S0, S1, S2 (truth table in bitop3)",
    "prng": "D = next pseudo-random number from S0", "sat": "D = saturated S0",
}
_MEM_VERB = {"load": "loads {w} per lane from {space} into vdata/vdst",
             "store": "stores {w} per lane from vdata to {space}",
             "atomic": "atomically updates {space} with vdata ({w} per lane)"}
_SPACE = {"MUBUF": "a buffer (V# in srsrc)", "MTBUF": "a typed buffer (V# in srsrc)", "FLAT": "a flat address",
          "FLAT_GLBL": "global memory", "FLAT_SCRATCH": "scratch", "DS": "LDS", "SMEM": "memory, scalar"}
_KIND = {"vgpr": "v", "agpr": "a", "sgpr": "s", "iconst": "inline const", "literal": "literal", "m0": "m0",
         "vcc": "vcc", "exec": "exec", "label": "label", "imm16": "imm16", "simm8": "simm8", "hwreg": "hwreg(...)",
         "sendmsg": "sendmsg(...)", "waitcnt": "waitcnt", "scc": "scc", "lds_direct": "lds_direct"}
_FLAG_MODS = {"offen", "idxen", "lds", "sc0", "sc1", "nt", "glc", "clamp", "gds", "row_mirror", "row_half_mirror"}
_LIST_MODS = {"op_sel": "[0|1, ...] one per source (+ dst)", "op_sel_hi": "[0|1, ...] one per source",
              "neg_lo": "[0|1, ...] one per source", "neg_hi": "[0|1, ...] one per source",
              "quad_perm": "[a, b, c, d], each 0..3: lane i of each 4 reads lane q[i]"}
_MOD_TEXT = {"dst_sel": "'DWORD'|'WORD_0'|'WORD_1'|'BYTE_0'..'BYTE_3'", "dst_unused": "'UNUSED_PAD'|'UNUSED_SEXT'|"
             "'UNUSED_PRESERVE'", "src0_sel": "like dst_sel", "src1_sel": "like dst_sel",
             "format": "buffer data/num format", "offset": "byte offset"}
_FIXED = {"row_bcast": "15 or 31", "wave_shl": "1", "wave_rol": "1", "wave_shr": "1", "wave_ror": "1",
          "mul": "2 or 4 (output modifier)", "div": "2 (output modifier)"}
# Notes for instructions whose Python spelling differs from the assembly.
NOTES = {"s_waitcnt": "Python: k.s_waitcnt(vmcnt=0..63, lgkmcnt=0..15); a counter left out is not waited on.",
         "s_nop": "s_nop N waits N+1 wait states; the checker counts them for hazards."}


def semantics(name: str, info: dict) -> str:
    """One line: what the instruction computes (per lane for vector instructions)."""
    if info.get("unit") == "MFMA":
        shp = info.get("shape")
        dims = "x".join(map(str, shp)) if shp else "?"
        what = "sparse " if name.startswith("v_smfmac") else ""
        return (f"D = A·B + C on a {dims} {what}tile per block across the wave ({info.get('passes', '?')} passes, "
                f"{info.get('mfma_kind', '')})").replace(", )", ")")
    mem = info.get("mem")
    if mem in _MEM_VERB:
        data = next((o for o in info["operands"] if o["name"] in ("vdata", "vdst", "sdata", "sdst")), None)
        w = f"{data['dwords']} dword{'s' if data['dwords'] > 1 else ''}" if data and data.get("dwords") else "data"
        line = _MEM_VERB[mem].format(w=w, space=_SPACE.get(info["family"], "memory"))
        if "_tr_" in name:
            line += ", transposed across lanes"
        return line + (f" (counted by {info['counter']}cnt)" if info.get("counter") in ("vm", "lgkm") else "")
    parts = name.split("_")[1:]
    for n in range(len(parts), 0, -1):          # the longest known stem wins: pk_add before add
        stem = "_".join(parts[:n])
        for cand in (stem, re.sub(r"_(?:[bfiu]\d+|e32|e64)$", "", stem)):
            if cand in OPERATIONS:
                return OPERATIONS[cand] + _types(parts)
    return f"{info.get('unit', '?')} instruction ({info['family']})"


def _types(parts) -> str:
    ts = [p for p in parts if re.fullmatch(r"[bfiu]\d+|bf16|pk", p)]
    return f"  [{', '.join(ts)}]" if ts else ""


def _operand_line(i: int, o: dict) -> str:
    kinds = "/".join(_KIND.get(k, k) for k in o["kinds"])
    w = o.get("dwords")
    width = f", {w} dword{'s' if w > 1 else ''}" if w else ""
    acc = {"r": "read", "w": "written", "rw": "read and written"}.get(o.get("access", "r"), o.get("access"))
    extra = ", or off" if o.get("off_ok") else ""
    return f"  {i}. {o['name']}: {kinds}{extra}{width} ({acc})"


def _modifier_line(fam: str, m: str) -> str:
    if m in _FLAG_MODS:
        spell = f"{m}=True"
    elif m in _FIXED:
        spell = f"{m}={_FIXED[m]}"
    elif m in _LIST_MODS:
        spell = f"{m}={_LIST_MODS[m]}"
    else:
        r = RANGES.get((fam, m)) or RANGES.get(("*", m))
        spell = f"{m}={r[0]}..{r[1]}" if r else f"{m}=<{_MOD_TEXT.get(m, 'value')}>"
        if m in _MOD_TEXT and r:
            spell += f" ({_MOD_TEXT[m]})"
    return spell


def encodings(info: dict) -> list[str]:
    fam, probed = info["family"], set(info.get("modifiers", ()))
    out = [f"{fam} ({info.get('bytes', '?')} bytes, opcode {info.get('opcode', '?')})"]
    if fam in ("VOP1", "VOP2", "VOPC") and "e64" in probed:
        out.append("VOP3 (_e64: 8 bytes; chosen for SGPR/modifier forms)")
    if "dpp" in probed:
        out.append("DPP (_dpp: lane shuffles of src0)")
    if "sdwa" in probed:
        out.append("SDWA (_sdwa: byte/word selects)")
    return out


def _py(op) -> str:
    if isinstance(op, Mod):
        t = _py(op.base)
        if op.sext:
            t = f"sext({t})"
        if op.abs:
            t = f"abs({t})"
        return f"-{t}" if op.neg else t
    if isinstance(op, Reg):
        return f"{op.file}[{op.index}]" if op.count == 1 else f"{op.file}[{op.index}:{op.index + op.count - 1}]"
    if isinstance(op, Special):
        return {"exec": "exec_", "vcc": "vcc", "m0": "m0", "off": "off", "scc": "scc"}.get(op.name, repr(op.name))
    if isinstance(op, Imm):
        return repr(op.value)
    if isinstance(op, Label):
        return repr(op.name)
    if isinstance(op, Expr):
        return f"Expr({op.text!r})"
    return repr(op)


def python_call(ins, var: str = "k") -> str:
    """The builder call that makes `ins`: k.v_add_f32(v[0], v[16], v[32])."""
    args = [_py(o) for o in ins.operands if not isinstance(o, Waitcnt)]
    for o in ins.operands:
        if isinstance(o, Waitcnt):
            args += [f"{n}={getattr(o, n)}" for n in ("vmcnt", "expcnt", "lgkmcnt") if getattr(o, n) is not None]
    args += [f"{k}={v!r}" for k, v in ins.modifiers.items()]
    return f"{var}.{ins.mnemonic}({', '.join(args)})"


@functools.lru_cache(maxsize=None)
def example(mnemonic: str) -> tuple[str, str] | None:
    """(Python call, assembly) of the table's example for `mnemonic` (None when it has none)."""
    from .syntax import parse_instruction
    info = tables.lookup(mnemonic).info
    text = info.get("example")
    if not text or "unsupported" in info:
        return None
    ins = parse_instruction(text)
    return python_call(ins), ins.text()


@functools.lru_cache(maxsize=None)
def doc(mnemonic: str) -> str:
    """The reference entry of one instruction."""
    lk = tables.lookup(mnemonic)
    info, name = lk.info, lk.key
    out = [f"{name}: {semantics(name, info)}", ""]
    if "unsupported" in info:
        out += [f"Not usable on gfx950: {info['unsupported']}.", ""]
    ops = info.get("operands", [])
    out.append("Operands, in order (kinds: v VGPR, a AGPR, s SGPR; width in dwords):" if ops else "Operands: none")
    out += [_operand_line(i + 1, o) for i, o in enumerate(ops)]
    if name in IMM_RANGES:
        out.append(f"  immediate range {IMM_RANGES[name][0]}..{IMM_RANGES[name][1]}: {IMM_RANGES[name][2]}")
    fam = info["family"]
    mods = sorted(_allowed_modifiers(info, ""))
    probed = set(info.get("modifiers", ()))
    if mods:
        out += ["", "Modifiers (keyword arguments):"]
        for title, group in (("DPP", DPP_MODS), ("SDWA", SDWA_MODS), ("", None)):
            these = [m for m in mods if (m in group if group else m not in DPP_MODS | SDWA_MODS)]
            if these:
                head = f"  {title} (see docs/modifiers.md): " if title else "  "
                out.append(textwrap.fill(head + ", ".join(_modifier_line(fam, m) for m in these), 100,
                                         subsequent_indent="      "))
    if probed & {"neg", "abs"}:
        out.append("  sources: -x negates, abs(x) takes |x| (VOP3 input modifiers), where the slot allows")
    out += ["", "Encoding: " + "; ".join(encodings(info))]
    if info.get("counter"):
        out.append(f"Wait counter: {info['counter'].replace('_smem', ' (SMEM, out of order: wait for 0)')}")
    if name in NOTES:
        out.append(NOTES[name])
    ex = example(name)
    if ex:
        out += ["", "Example:", f"  {ex[0]}", f"  # {ex[1]}"]
    return "\n".join(out)


@functools.lru_cache(maxsize=None)
def signature(mnemonic: str) -> inspect.Signature:
    """(vdst, src0, vsrc1, *, clamp=None, ...): operand names positional, modifiers keyword-only."""
    lk = tables.lookup(mnemonic)
    P = inspect.Parameter
    params, names = [], set()
    for o in lk.info.get("operands", []):
        n, i = o["name"], 2
        while n in names:                    # v_addc_co_u32 names vcc twice (carry out, carry in)
            n, i = f"{o['name']}_{i}", i + 1
        names.add(n)
        params.append(P(n, P.POSITIONAL_ONLY))
    mods = sorted(_allowed_modifiers(lk.info, lk.suffix))
    if mnemonic == "s_waitcnt":
        params = [P("simm16", P.POSITIONAL_ONLY, default=None)]
        mods = ["vmcnt", "expcnt", "lgkmcnt"]
    params += [P(m, P.KEYWORD_ONLY, default=None) for m in mods if m not in names]
    return inspect.Signature(params)
