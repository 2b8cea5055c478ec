"""The checker's definite hazard findings on aiter's shipped fmha kernel are ones LLVM's own hazard
recogniser fixes: for one finding of each rule that fires there, the exact producer..consumer
instructions are written as MIR, `llc -run-pass=post-RA-hazard-rec` (gfx950) runs on them, and llc
must put exactly the wait states our finding asks for right before the consumer."""
from __future__ import annotations

from pathlib import Path

import pytest

from flyasm.check import check_program
from flyasm.isa.operands import Imm, Reg, Special
from flyasm.report.program import as_program

try:
    from tests.oracles import hazard_probes as hp
except ImportError:  # pytest's default rootdir-less import mode puts tests/ on sys.path
    from oracles import hazard_probes as hp

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "aiter" / "gfx950"
FMHA = SHARED / "fmha_v3_fwd" / "fwd_hd128_bf16.co"
LLC = hp.find_tool("llc")
pytestmark = [pytest.mark.skipif(not FMHA.exists(), reason=f"{FMHA} is absent (../shared is not here)"),
              pytest.mark.skipif(LLC is None, reason="llc (LLVM 22) is not installed")]
RULES = ("valu_sgpr_valu_read", "salu_m0", "valu_write_permlane")
EX = "implicit $exec"


def mir_reg(op) -> str:
    if isinstance(op, Special):
        return "$" + op.name
    if isinstance(op, Reg):
        kind = {"v": "vgpr", "s": "sgpr", "a": "agpr"}[op.file]
        return "$" + "_".join(f"{kind}{i}" for i in op.regs())
    if isinstance(op, Imm) and isinstance(op.value, int):
        return str(op.value)
    raise ValueError(op)


def to_mir(ins) -> str | None:
    """The MIR of the few opcodes these windows hold (operand order of LLVM's SIInstrInfo.td)."""
    n, ops = ins.name, ins.operands
    r = [mir_reg(o) for o in ops] if all(isinstance(o, (Reg, Special, Imm)) for o in ops) else None
    if r is None:
        return None
    if n.startswith("v_cmp_") and n.endswith("_f32") and ins.suffix == "_e64":
        return f"{r[0]} = {n.upper()}_e64 0, {r[1]}, 0, {r[2]}, 0, implicit $mode, {EX}"
    if n == "v_cndmask_b32" and ins.suffix == "_e64":
        return f"{r[0]} = V_CNDMASK_B32_e64 0, {r[1]}, 0, {r[2]}, {r[3]}, {EX}"
    if n in ("s_mov_b32", "s_add_u32"):
        return f"{r[0]} = {n.upper()} {', '.join(r[1:])}" + (", implicit-def $scc" if n == "s_add_u32" else "")
    if n.startswith("v_permlane") and n.endswith("_swap_b32"):
        return f"{r[0]}, {r[1]} = {n.upper()}_e32 {r[0]}, {r[1]}, {EX}"
    if n.startswith("buffer_load_dword") and ins.is_lds_dma and ins.modifiers.get("offen"):
        off = ins.modifiers.get("offset", 0)
        return f"{n.upper()}_LDS_OFFEN {r[0]}, {r[1]}, {r[2]}, {off}, 0, 0, {EX}, implicit $m0"
    return None


@pytest.fixture(scope="module")
def findings():
    prog = as_program(str(FMHA))
    return prog.items(), check_program(prog.items(), "verify", prog.threads)


def window_probe(items, f) -> hp.Probe | None:
    """The producer..consumer instructions of finding f as a probe, or None if not expressible."""
    lo, hi = f.producer.index, f.consumer.index
    window = items[lo:hi + 1]
    if lo >= hi or any(isinstance(x, str) for x in window):
        return None
    mir = [to_mir(x) for x in window]
    if None in mir:
        return None
    body = [hp.Ins(x.text(), m) for x, m in zip(window, mir)] + [hp.Ins("s_endpgm", "S_ENDPGM 0")]
    name = f"aiter_{f.rule}_{f.consumer.pc:x}"
    return hp.Probe(name, f.rule, tuple(i.asm for i in body), hp.mir_function(name, body),
                    consumer=hi - lo, clean=False)


@pytest.mark.slow       # checks a 2,600-instruction kernel and runs llc: minutes on a shared machine
def test_llc_inserts_the_nops_our_definite_findings_ask_for(findings, tmp_path):
    items, found = findings
    picked = {}
    for rule in RULES:
        mine = [f for f in found if f.rule == rule and f.severity == "error"]
        assert mine, f"no {rule} finding on {FMHA.name}"
        pairs = ((window_probe(items, f), f) for f in mine)
        picked[rule] = next(((p, f) for p, f in pairs if p is not None), None)
        assert picked[rule] is not None, f"none of the {len(mine)} {rule} windows could be written as MIR"
    got = hp.llc_instructions([p for p, _ in picked.values()], LLC, cache_dir=tmp_path)
    for rule, (probe, f) in picked.items():
        llc = got[probe.name]
        assert len(llc) == len(probe.asm), (rule, probe.asm, llc)       # aligned, one entry per instruction
        asked = f.needed - f.found
        assert asked > 0
        assert llc[probe.consumer][1] == asked, (rule, probe.asm, llc)
