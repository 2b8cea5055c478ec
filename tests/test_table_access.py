"""Which registers an instruction reads and writes, and which operand kinds it takes, against LLVM's
own view of the same instructions: `llvm-mc -show-inst` (the MC opcode and every MCOperand, tied
definitions included) and `llc -run-pass=post-RA-hazard-rec` (which sees the defs LLVM's
instruction descriptions declare). Fixed here: v_swap_b32 writes both operands; SMEM/MUBUF atomics
write their data operand only when they return (glc / sc0); v_writelane_b32's src0 takes an SGPR,
m0, vcc, exec or an inline constant; scale MFMAs refuse the op_sel bits llvm-mc drops."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from flyasm.asm import mcbatch
from flyasm.check import check_program, inserted_wait_states, program_from_lines
from flyasm.errors import OperandError
from flyasm.isa import builders, tables
from flyasm.isa.operands import Reg, Special
from flyasm.isa.syntax import parse_instruction

sys.path.insert(0, str(Path(__file__).resolve().parent))
from oracles.hazard_probes import (Ins, Probe, llc_wait_states, mc_instructions, mir_function,  # noqa: E402
                                   v, v_permlane_swap)


def _probe(name: str, lines, mir: str = "") -> Probe:
    return Probe(name=name, rule="valu_write_permlane", asm=tuple(lines), mir=mir)


def _regs(inst, which: str) -> set:
    return {r for r in getattr(inst, which) if r[0] in ("v", "s")}


# ---- v_swap_b32 ------------------------------------------------------------------------------
def test_v_swap_reads_and_writes_both_operands():
    inst = parse_instruction("v_swap_b32 v1, v2")
    assert _regs(inst, "reads") == {("v", 1), ("v", 2)}
    assert _regs(inst, "writes") == {("v", 1), ("v", 2)}
    # LLVM: V_SWAP_B32 has two defs tied to its two sources, so the MCInst holds 4 registers,
    # defs first: (vdst=v1, vdst1=v2, src0=v2, src1=v1).
    got = mc_instructions([_probe("swap", ["v_swap_b32 v1, v2"])])["swap"]
    assert len(got) == 1 and got[0].opcode.startswith("V_SWAP_B32")
    assert got[0].regs == ("VGPR1", "VGPR2", "VGPR2", "VGPR1")


def test_v_swap_src0_write_is_a_permlane_hazard_like_llc():
    """v_swap_b32 writes its src0 (v121): a permlane swap reading v121 right after needs the 2 wait
    states of checkPermlaneHazards. llc, given the same pair as MIR, inserts them too; with v121
    only read (the old table) flyasm inserted none."""
    swap = Ins("v_swap_b32 v122, v121", "$vgpr122, $vgpr121 = V_SWAP_B32 $vgpr121, $vgpr122, implicit $exec")
    items = [swap, v_permlane_swap(32, v(100), v(121))]
    name = "swap_src0_permlane"
    p = Probe(name=name, rule="valu_write_permlane", asm=tuple(i.asm for i in items),
              mir=mir_function(name, items))
    theirs = llc_wait_states([p])[name]
    mine = inserted_wait_states(program_from_lines(list(p.asm)))
    assert theirs == [0, 2]
    assert mine == theirs


# ---- atomics: the data operand is written only by the returning form --------------------------
def _atomic_cases():
    ins = tables.load()["instructions"]
    out = []
    for mn, e in ins.items():
        if e.get("mem") != "atomic" or e["family"] not in ("SMEM", "MUBUF") or "example" not in e:
            continue
        flag = "glc" if e["family"] == "SMEM" else "sc0"
        out += [(mn, e["example"], None), (mn, e["example"], flag)]
    return out


ATOMICS = _atomic_cases()


def test_atomic_data_written_only_when_returning():
    assert len({mn for mn, *_ in ATOMICS if mn.startswith("s_")}) >= 40      # s_atomic_*, s_buffer_atomic_*
    assert len({mn for mn, *_ in ATOMICS if mn.startswith("buffer_")}) >= 20
    lines = [ex + (f" {flag}" if flag else "") for _, ex, flag in ATOMICS]
    probes = [_probe(f"a{i}", [ln]) for i, ln in enumerate(lines)]
    mc = mc_instructions(probes)
    bad = []
    for p, (mn, _, flag), ln in zip(probes, ATOMICS, lines):
        (mi,) = mc[p.name]
        inst = parse_instruction(ln)
        data = inst.operands[0]
        assert isinstance(data, Reg)
        regs = {(data.file, data.index + k) for k in range(data.count)}
        # LLVM picks the *_RTN opcode (a def tied to the data operand) exactly when it returns.
        rtn = "_RTN" in mi.opcode
        if rtn != bool(flag):
            bad.append(f"{ln}: LLVM opcode {mi.opcode}")
        if not regs <= _regs(inst, "reads") or (regs <= _regs(inst, "writes")) != rtn:
            bad.append(f"{ln}: flyasm reads {sorted(_regs(inst, 'reads'))} writes {sorted(_regs(inst, 'writes'))}, "
                       f"LLVM {mi.opcode}")
    assert not bad, "\n".join(bad[:10])


@pytest.mark.parametrize("glc", [False, True])
def test_checker_waits_for_an_smem_atomic_only_when_it_returns(glc):
    p = program_from_lines([f"s_atomic_add s8, s[12:13], s16{' glc' if glc else ''}", "s_mov_b32 s9, s8",
                            "s_endpgm"])
    rules = [f.rule for f in check_program(p)]
    assert rules == (["lgkm_raw"] if glc else [])


# ---- v_writelane_b32: src0 is a scalar value -------------------------------------------------------
WRITELANE = ["v_writelane_b32 v16, s20, 0", "v_writelane_b32 v0, m0, 1", "v_writelane_b32 v0, s40, m0",
             "v_writelane_b32 v0, exec_lo, 1", "v_writelane_b32 v0, vcc_lo, 5", "v_writelane_b32 v0, 0.5, s16",
             "v_writelane_b32 v0, s16, s16"]


def test_writelane_src0_kinds_build_like_llvm_mc():
    mine = []
    for line in WRITELANE:
        inst = parse_instruction(line)
        built = builders.make(inst.mnemonic, *inst.operands, **inst.modifiers)   # refused before the fix
        mine.append(built.text())
        src0 = built.operands[1]
        assert isinstance(src0, (Reg, Special)) or "0.5" in line
    theirs = mcbatch.encode(WRITELANE)
    ours = mcbatch.encode(mine)
    for line, t, o in zip(WRITELANE, theirs, ours):
        assert t.bytes is not None, f"llvm-mc rejects {line}: {t.error}"
        assert o.bytes == t.bytes, line
    # What llvm-mc refuses in src0 our builder refuses too.
    for bad in ("v_writelane_b32 v0, v1, s16", "v_writelane_b32 v0, 0x12345, 1"):
        assert mcbatch.encode([bad])[0].bytes is None
        inst = parse_instruction(bad)
        with pytest.raises(OperandError, match="src0"):
            builders.make(inst.mnemonic, *inst.operands, **inst.modifiers)


# ---- scale MFMAs: the third op_sel / op_sel_hi bit cannot be written as text ------------------------
SCALE = "v_mfma_scale_f32_16x16x128_f8f6f4 v[0:3], v[16:23], v[32:39], v[48:51], v64, v96"


@pytest.mark.parametrize("mod", ["op_sel", "op_sel_hi"])
def test_scale_mfma_refuses_the_bit_llvm_mc_drops(mod, tmp_path):
    # llvm-mc's evidence: the third element changes nothing in the encoding.
    with_bit, without = mcbatch.encode([f"{SCALE} {mod}:[0,0,1]", f"{SCALE} {mod}:[0,0,0]"])
    assert with_bit.bytes == without.bytes
    inst = parse_instruction(SCALE)
    builders.make(inst.mnemonic, *inst.operands, **{mod: [1, 1, 0]})       # the first two bits are fine
    src = tmp_path / "user_kernel.py"
    src.write_text("from flyasm import Kernel, v\n"
                   "k = Kernel('x', block=64)\n"
                   f"k.v_mfma_scale_f32_16x16x128_f8f6f4(v[0:3], v[16:23], v[32:39], v[48:51], v[64], v[96], "
                   f"{mod}=[0, 0, 1])\n")
    code = compile(src.read_text(), str(src), "exec")
    with pytest.raises(OperandError) as ei:
        exec(code, {})
    msg = str(ei.value)
    assert msg.startswith(f"{src}:3: ") and "llvm-mc silently drops" in msg and "k.raw" in msg
    assert "\n" not in msg
