"""The checker's definite hazard findings on aiter's shipped kernels are ones LLVM's own hazard
recogniser fixes: for one finding of each rule that fires there, the producer and consumer
instructions are written as MIR, `llc -run-pass=post-RA-hazard-rec` (gfx950) runs on them, and llc
must put exactly the wait states our finding asks for right before the consumer.

On fmha the whole producer..consumer window is written out. For the rules that fire in the other
families the window holds instructions this file cannot write as MIR, so the probe is the real
producer, `s_nop`s worth the finding's distance (llc counts them as it counts any instruction,
SIInstrInfo::getNumWaitStates) and the real consumer: llc's total before the consumer must equal
what our rule needs. One pair shows a rule that was a false alarm (now fixed): v_accvgpr_read is
VOP3P-encoded but has no op_sel operand, so it is no dst-sel forwarding producer."""
from __future__ import annotations

from pathlib import Path

import pytest

from flyasm.isa.operands import Imm, Reg, Special

try:
    from tests.oracles import hazard_probes as hp
    from tests.oracles.aiter_findings import checked, first_probes
except ImportError:  # pytest's default rootdir-less import mode puts tests/ on sys.path
    from oracles import hazard_probes as hp
    from oracles.aiter_findings import checked, first_probes

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "aiter" / "gfx950"
FMHA = SHARED / "fmha_v3_fwd" / "fwd_hd128_bf16.co"
LLC = hp.find_tool("llc")
pytestmark = [pytest.mark.skipif(not FMHA.exists(), reason=f"{FMHA} is absent (../shared is not here)"),
              pytest.mark.skipif(LLC is None, reason="llc (LLVM 22) is not installed")]
RULES = ("valu_sgpr_valu_read", "salu_m0", "valu_write_permlane")
EX = "implicit $exec"
MX = "implicit $mode, implicit $exec"
# LLVM's MachineInstr names of the MFMAs these pairs use (SIInstrInfo / VOP3PInstructions.td)
MFMA_MIR = {"v_mfma_f32_16x16x32_fp8_fp8": "V_MFMA_F32_16X16X32_FP8_FP8",
            "v_mfma_f32_16x16x16_bf16": "V_MFMA_F32_16X16X16BF16_1K",
            "v_mfma_f32_32x32x16_bf16": "V_MFMA_F32_32X32X16_BF16"}


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
    if n.startswith("v_cmp_") and n.endswith(("_i32", "_u32")) and ins.suffix == "_e64":   # no source modifiers
        return f"{r[0]} = {n.upper()}_e64 {r[1]}, {r[2]}, {EX}"
    if n == "v_cndmask_b32" and ins.suffix == "_e64":
        return f"{r[0]} = V_CNDMASK_B32_e64 0, {r[1]}, 0, {r[2]}, {r[3]}, {EX}"
    if n in ("s_mov_b32", "s_add_u32"):
        return f"{r[0]} = {n.upper()} {', '.join(r[1:])}" + (", implicit-def $scc" if n == "s_add_u32" else "")
    if n.startswith("v_permlane") and n.endswith("_swap_b32"):
        return f"{r[0]}, {r[1]} = {n.upper()}_e32 {r[0]}, {r[1]}, {EX}"
    if n == "v_accvgpr_read_b32":
        return f"{r[0]} = V_ACCVGPR_READ_B32_e64 {r[1]}, {EX}"
    if n == "s_load_dword":
        return f"{r[0]} = S_LOAD_DWORD_IMM {r[1]}, {r[2]}, 0"
    if n.startswith("buffer_load_dword") and ins.is_lds_dma and ins.modifiers.get("offen"):
        off = ins.modifiers.get("offset", 0)
        return f"{n.upper()}_LDS_OFFEN {r[0]}, {r[1]}, {r[2]}, {off}, 0, 0, {EX}, implicit $m0"
    mods = ins.modifiers
    if ins.is_dpp and set(mods) <= {"quad_perm", "row_newbcast", "row_mask", "bank_mask"}:
        ctrl = (sum(x << 2 * k for k, x in enumerate(mods["quad_perm"])) if "quad_perm" in mods
                else 0x150 + mods["row_newbcast"] if "row_newbcast" in mods else None)
        dpp = f"{ctrl}, {mods.get('row_mask', 15)}, {mods.get('bank_mask', 15)}, 0"
        base = n.removesuffix("_dpp").upper()
        if ctrl is not None and len(r) == 2:
            return f"{r[0]} = {base}_dpp {r[0]}, {r[1]}, {dpp}, {EX}"
        if ctrl is not None and len(r) == 3:
            return f"{r[0]} = {base}_dpp {r[0]}, 0, {r[1]}, 0, {r[2]}, {dpp}, {MX}"
        return None
    if mods:                                          # (the LDS DMA above is the one form with modifiers)
        return None
    if ins.family == "VOP2" and len(r) == 3:
        return f"{r[0]} = {n.upper()}_e32 {r[1]}, {r[2]}, {MX}"
    if n in ("v_pk_mul_f32", "v_pk_add_f32"):          # default op_sel_hi: src modifiers 8
        return f"{r[0]} = {n.upper()} 8, {r[1]}, 8, {r[2]}, 0, 0, 0, 0, 0, {MX}"
    if n == "v_fma_f32":
        return f"{r[0]} = V_FMA_F32_e64 0, {r[1]}, 0, {r[2]}, 0, {r[3]}, 0, 0, {MX}"
    if n in MFMA_MIR:
        cd = "_vgprcd_e64" if ops[0].file == "v" else "_e64"
        return f"{r[0]} = {MFMA_MIR[n]}{cd} {r[1]}, {r[2]}, {r[3]}, 0, 0, 0, {MX}"
    return None


@pytest.fixture(scope="module")
def findings():
    return checked(FMHA)


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


# (rule, sample object): one definite finding of the rule there, judged by llc
PAIRS = [
    ("dst_sel_forwarding", "i8gemm/I8gemm_bf16_perTokenI8_BpreShuffle_128x128.co"),       # v_pk_mul_f32 -> v_fma_f32
    ("dst_sel_forwarding", "pa/pa_bf16_perblockFp8_blk256_1tg_4w_qlen48_msk1_ps.co"),     # v_pk_add_f32 -> v_pk_add_f32
    ("valu_vgpr_dpp", "fmha_v3_bwd/bwd_hd64_bf16_causal_a32_rtz_pssk.co"),                # v_mov_b32_dpp -> v_mov_b32_dpp
    ("valu_vgpr_dpp", "pa/pa_bf16_perblockFp8_blk256_1tg_4w_qlen48_msk1_ps.co"),          # v_pk_mul_f32 -> DPP row_newbcast
    ("valu_write_mfma_read", "fmha_v3_bwd/bwd_hd128_bf16_a16_psskddv.co"),               # v_permlane16_swap -> MFMA
    ("xdl_write_valu_read", "fmoe_2stages/fmoe_stage1_bf16_pertokenFp8_blockscale_g1u1_112x128_pf2.co"),
    ("xdl_write_valu_write", "fmha_v3_bwd/bwd_hd192_bf16_causal_a32_rtz_psskddv.co"),    # MFMA -> DPP WAW
    ("soft_clause", "fmoe/gelu/fmoe_bf16_pertokenInt8_g1u1_tkw1_gelu_1tg_ps_32x320.co"),  # s_load reusing its base
]


@pytest.fixture(scope="module")
def sample_findings():
    cache = {}

    def get(rel):
        if rel not in cache:
            path = SHARED / rel
            if not path.exists():
                pytest.skip(f"{path} is absent (../shared is not here)")
            cache[rel] = checked(path)
        return cache[rel]
    return get


def pair_probe(items, f, name) -> hp.Probe | None:
    """The finding's producer and consumer with s_nops worth its distance between them."""
    p, c = items[f.producer.index], items[f.consumer.index]
    mp, mc = to_mir(p), to_mir(c)
    if mp is None or mc is None or f.found > 16:
        return None
    fill = [hp.Ins(f"s_nop {f.found - 1}", f"S_NOP {f.found - 1}")] if f.found else []
    body = [hp.Ins(p.text(), mp)] + fill + [hp.Ins(c.text(), mc), hp.Ins("s_endpgm", "S_ENDPGM 0")]
    return hp.Probe(name, f.rule, (p.text(), c.text(), "s_endpgm"), hp.mir_function(name, body),
                    consumer=1, clean=False)


@pytest.mark.slow       # checks one sample kernel per pair (seconds each) and runs llc
def test_llc_fixes_one_real_pair_per_rule_in_every_family(sample_findings, tmp_path):
    probes, asked = first_probes(PAIRS, sample_findings, pair_probe, "aiter_pair")
    got = hp.llc_instructions(probes, LLC, cache_dir=tmp_path)
    for probe in probes:
        f = asked[probe.name]
        llc = got[probe.name]
        assert len(llc) == 3, (probe.asm, llc)
        assert f.needed > f.found
        assert llc[1][1] == f.needed, (f.rule, probe.asm, llc, f.message)


@pytest.mark.slow
def test_accvgpr_read_is_no_dst_sel_producer(sample_findings, tmp_path):
    """mla's `v_accvgpr_read_b32 v36, a144` then `v_mul_f32_e32 v36, v21, v36` (1,232 of the
    sample's dst_sel_forwarding findings were this shape): llc inserts nothing, and neither
    does the checker any more."""
    rel = "mla/mla_a8w8_qh32_qseqlen4_gqaratio32_msk0.co"
    items, found = sample_findings(rel)
    pairs = [(i, i + 1) for i in range(len(items) - 1)
             if not isinstance(items[i], str) and not isinstance(items[i + 1], str)
             and items[i].name == "v_accvgpr_read_b32" and items[i + 1].name == "v_mul_f32"
             and items[i].operands[0] in items[i + 1].operands[1:]]
    assert pairs, f"no v_accvgpr_read_b32 -> v_mul_f32 pair in {rel}"
    i, j = pairs[0]
    assert not [f for f in found if f.consumer.index == j and f.rule == "dst_sel_forwarding"]
    mir = [to_mir(items[i]), to_mir(items[j]), "S_ENDPGM 0"]
    assert None not in mir, mir
    body = [hp.Ins(t, m) for t, m in zip((items[i].text(), items[j].text(), "s_endpgm"), mir)]
    probe = hp.Probe("aiter_accvgpr_read_dst_sel", "dst_sel_forwarding", tuple(b.asm for b in body),
                     hp.mir_function("aiter_accvgpr_read_dst_sel", body), consumer=1, clean=False)
    llc = hp.llc_instructions([probe], LLC, cache_dir=tmp_path)[probe.name]
    assert [ws for _, ws in llc] == [0, 0, 0], llc
