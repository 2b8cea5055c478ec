"""Property: builders.make -> text -> llvm-mc -> bytes -> llvm-objdump -> parse gives the same key.

One instance per table entry that LLVM accepts, per hypothesis example, with random registers (in
range, aligned as the table says), inline constants, literals and modifiers from each entry's
probed set. All instances go through ONE llvm-mc -show-encoding call (which lines LLVM accepts),
ONE llvm-mc -filetype=obj and ONE llvm-objdump -d call. Deterministic (derandomize=True).

Normalisations (what LLVM legitimately canonicalises; each is applied to both sides):
- modifiers whose value is the encoding default are dropped (offset:0, cbsz:0, abid:0, blgp:0,
  op_sel/neg all zero), as llvm-objdump never prints them;
- 16-bit immediates compare modulo 2**16 (llvm prints simm16 fields unsigned or signed by opcode);
- s_waitcnt compares the encoded simm16 (llvm omits counters at their maximum);
- integer operations get integer inline constants only (llvm prints a float constant given to an
  integer op as its bit pattern, 1.0 -> 0x3c00, which is the same encoding).
Entries left out, and why: branches (a label needs a definition; label text is covered by kernel
tests), instructions whose slots carry hwreg/sendmsg text (llvm expands defaults), ds_swizzle_b32
and s_set_gpr_idx_on (offsets printed as swizzle()/gpr_idx() macros), `nt` on buffer_inv/buffer_wbl2
(accepted and dropped by llvm-mc).
"""
from __future__ import annotations

import functools
import random
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flyasm.asm import mcbatch
from flyasm.errors import FlyasmError
from flyasm.isa import builders, tables
from flyasm.isa.operands import INLINE_FLOATS, Imm, Reg, Special, Waitcnt
from flyasm.isa.syntax import parse_instruction

VALU_FAMS = {"VOP1", "VOP2", "VOPC", "VOP3", "VOP3P", "VOP3PX2"}
# llvm-objdump prints these immediates as macros (swizzle(...), gpr_idx(...)) that flyasm keeps as text.
MACRO_PRINTED = {"ds_swizzle_b32", "s_set_gpr_idx_on", "s_set_gpr_idx_mode"}
# Cache-control ops where llvm-mc accepts `nt` and drops it from the encoding.
NT_DROPPED = {"buffer_inv", "buffer_wbl2"}
DEFAULTS = {"offset": 0, "cbsz": 0, "abid": 0, "blgp": 0}


def _toolchain_or_skip():
    from flyasm.asm.toolchain import find_toolchain
    from flyasm.errors import ToolchainError
    try:
        return find_toolchain()
    except ToolchainError as e:
        pytest.skip(f"no gfx950 LLVM toolchain: {e.message}")


@functools.lru_cache(maxsize=None)
def entries() -> list[str]:
    out = []
    for mn in tables.all_mnemonics():
        info = tables.lookup(mn).info
        if "unsupported" in info or info["unit"] == "BRANCH":
            continue
        kinds = {k for s in info["operands"] for k in s["kinds"]}
        if kinds & {"label", "hwreg", "sendmsg"} or mn in MACRO_PRINTED:
            continue
        out.append(mn)
    return out


def random_reg(rng, file: str, width: int) -> Reg:
    align = (2 if width >= 2 else 1) if file in "va" else (1 if width == 1 else 2 if width == 2 else 4)
    top = {"v": 255, "a": 255, "s": 101}[file] - width + 1
    return Reg(file, rng.randrange(0, top // align + 1) * align, width)


def random_modifiers(rng, mn: str, info: dict) -> dict:
    fam, probed = info["family"], set(info.get("modifiers", ()))
    coin = lambda: rng.random() < 0.5  # noqa: E731
    mods: dict = {}
    if fam in ("MUBUF", "MTBUF"):
        if "offset" in probed and coin():
            mods["offset"] = rng.randint(1, 4095)
        for f in ("sc0", "sc1", "nt"):
            if f in probed and coin() and not (f == "sc0" and info.get("mem") == "atomic") \
                    and not (f == "nt" and mn in NT_DROPPED):
                mods[f] = True
        if "offen" in probed and coin():
            mods["offen"] = True
    elif fam in ("FLAT", "FLAT_GLBL", "FLAT_SCRATCH"):
        if "offset" in probed and coin():
            mods["offset"] = rng.choice([x for x in (rng.randint(1, 4095), rng.randint(-4096, -1))
                                         if fam != "FLAT" or x > 0])
        for f in ("sc1", "nt"):
            if f in probed and coin():
                mods[f] = True
    elif fam == "DS":
        if "offset0" in probed and coin():
            mods["offset0"], mods["offset1"] = rng.randint(1, 255), rng.randint(1, 255)
        elif "offset" in probed and "offset0" not in probed and coin():
            mods["offset"] = rng.randint(1, 65535)
    elif info["unit"] == "MFMA" and mn.startswith("v_mfma"):
        if "f8f6f4" in mn:
            for m in ("cbsz", "blgp"):
                if m in probed:
                    mods[m] = rng.randint(0, 4)
        else:
            if "cbsz" in probed and coin():
                mods["cbsz"] = rng.randint(1, 4)
                if "abid" in probed:
                    mods["abid"] = rng.randint(0, (1 << mods["cbsz"]) - 1)
            if "blgp" in probed and coin():
                mods["blgp"] = rng.randint(1, 7)
    elif fam == "VOP3" and "clamp" in probed and coin():
        mods["clamp"] = True
    return mods


def random_instance(rng, mn: str):
    lk = tables.lookup(mn)
    info = lk.info
    mods = random_modifiers(rng, mn, info)
    slots = tables.slots(info, mods, lk.suffix, None)
    fam = info["family"]
    lit_used = False
    scalar_used = False  # gfx9 VALU: at most one SGPR/literal/constant-bus read per instruction
    ops = []
    for s in slots:
        kinds = list(s["kinds"])
        w = s.get("dwords") or 1
        if (s.get("off_ok") and s["name"] == "vaddr" and not mods.get("offen")) or s["name"] == "saddr":
            ops.append(Special("off"))
            continue
        is_src = "w" not in s.get("access", "r")
        if fam in VALU_FAMS and is_src and scalar_used:
            kinds = [k for k in kinds if k in ("vgpr", "agpr", "iconst")] or kinds
        if fam in VALU_FAMS and "vgpr" in kinds and rng.random() < 0.75:
            kinds = ["vgpr"]  # mostly VGPRs: keeps LLVM's constant-bus and literal rules satisfied
        kind = rng.choice(kinds)
        if kind in ("vgpr", "agpr", "sgpr"):
            op = random_reg(rng, kind[0], w)
        elif kind == "iconst" and fam == "SMEM":
            op = Imm(rng.randint(0, 64))  # s_buffer_* offsets are unsigned
        elif kind == "iconst":
            floats = [0.5, -0.5, 1.0, -1.0, 2.0, -2.0, 4.0, -4.0]
            is_float = any(t in mn for t in ("_f16", "_f32", "_f64", "_bf16"))
            op = Imm(rng.choice(floats)) if is_float and w == 1 and rng.random() < 0.3 else Imm(rng.randint(-16, 64))
        elif kind == "literal":
            if lit_used or (fam == "VOPC" and ops and isinstance(ops[0], Reg)):
                op = Imm(rng.randint(-16, 64))  # one literal per instruction; none in VOP3-encoded VOPC
            else:
                op = Imm(rng.randint(65, 0x7FFF))
                lit_used = True
        elif kind == "m0":
            op = Special("m0")
        elif kind in ("vcc", "exec"):
            op = Special(kind if w == 2 else kind + "_lo")
        elif kind == "waitcnt":
            op = Waitcnt(rng.randint(0, 62), None, rng.randint(0, 14))
        elif kind in ("imm16", "simm8"):
            lo, hi = builders.IMM_RANGES.get(mn, (0, 0x7FFF if kind == "imm16" else 0x7F))[:2]
            op = Imm(rng.randint(lo, hi))
        else:
            op = Imm(0)
        if fam in VALU_FAMS and is_src and kind in ("sgpr", "literal", "m0", "vcc", "exec"):
            scalar_used = True
        ops.append(op)
    if fam in ("VOP2", "VOPC") and lit_used:
        # a literal needs the 32-bit encoding, whose second source is a VGPR
        src_idx = [i for i, sl in enumerate(slots) if sl["name"].startswith(("src", "vsrc"))]
        if len(src_idx) > 1 and not (isinstance(ops[src_idx[1]], Reg) and ops[src_idx[1]].file == "v"):
            ops[src_idx[1]] = random_reg(rng, "v", slots[src_idx[1]].get("dwords") or 1)
    if mn.startswith("v_mfma") and len(ops) >= 4 and isinstance(ops[3], Reg):
        d, c = ops[0], ops[3]  # C and D share one ACC_CD bit and may not partially overlap
        c = Reg(d.file, c.index, c.count) if c.file != d.file else c
        ops[3] = d if (c.overlaps(d) and c.count == d.count) else c
        if ops[3].overlaps(d) and ops[3] != d:
            ops[3] = d
    return mn, tuple(ops), mods


def normal_key(inst) -> tuple:
    name, ops, mods = inst.key()
    mods = tuple((k, v) for k, v in mods if DEFAULTS.get(k, object()) != v
                 and not (isinstance(v, tuple) and not any(v)))
    out = []
    for op, slot in zip(inst.operands, inst.slots):
        if isinstance(op, Waitcnt):
            out.append(f"waitcnt:{op.simm16}")
        elif isinstance(op, Imm) and set(slot["kinds"]) & {"imm16", "simm8"} and isinstance(op.value, int):
            out.append(f"imm16:{op.value & 0xFFFF}")
        elif isinstance(op, Imm):
            # a literal-only slot (v_fmamk_f32 K) prints even 1.0 as hex: compare f32 bit patterns
            bits = struct.unpack("<I", struct.pack("<f", op.value))[0] if isinstance(op.value, float) else op.value
            out.append(f"n:{bits & 0xFFFFFFFF}")
        else:
            out.append(str(op))
    return name, tuple(out), mods


@settings(max_examples=4, derandomize=True, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(st.integers(0, 2**32 - 1))
def test_builders_round_trip_through_llvm(seed):
    """Hypothesis picks the seed; one random instance per table entry is drawn from it."""
    _toolchain_or_skip()
    rng = random.Random(seed)
    built, problems = [], []
    for mn in entries():
        mn_, ops, mods = random_instance(rng, mn)
        try:
            built.append(builders.make(mn_, *ops, **mods))
        except FlyasmError as e:
            problems.append(f"builders reject generated {mn} {ops} {mods}: {e.message}")
    texts = [i.text() for i in built]
    enc = mcbatch.encode(texts)
    accepted = [(inst, t) for inst, t, e in zip(built, texts, enc) if e.bytes is not None]
    rejected = [(t, e.error) for t, e in zip(texts, enc) if e.bytes is None]
    back = mcbatch.objdump([t for _, t in accepted])
    quirks = []
    for (inst, t), b in zip(accepted, back):
        if "Invalid register" in b:
            # llvm-mc accepts a constant where the operand class is VReg_64_Align2 (e.g.
            # v_cvt_scalef32_sr_pk_fp4_f32 v1, -11, v2, v3), and its disassembler cannot print it
            # back: an LLVM asm/disasm mismatch, recorded rather than compared.
            quirks.append(t)
            continue
        try:
            parsed = parse_instruction(b)
        except FlyasmError as e:
            problems.append(f"'{t}' -> objdump '{b}' does not parse: {e.message}")
            continue
        if normal_key(parsed) != normal_key(inst):
            problems.append(f"'{t}' -> objdump '{b}': {normal_key(inst)} != {normal_key(parsed)}")
    print(f"{len(built)} built, {len(accepted)} accepted by llvm-mc, {len(rejected)} rejected, "
          f"{len(quirks)} LLVM disassembler quirks, {len(problems)} problems")
    assert len(quirks) <= 0.01 * len(accepted), quirks
    # LLVM may reject a few random combinations our checks do not model (documented above); most
    # must pass, or the property is vacuous.
    assert len(accepted) >= 0.9 * len(built), rejected[:15]
    assert not problems, "\n".join(problems[:25])
