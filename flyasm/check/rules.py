"""The gfx950 hazard table as data (reference notes §4.2, rows 1-31).

Each `Rule` names a producer predicate, a consumer predicate, which consumer registers are
compared (`operands`), how the producer relates to them (`relation`) and the wait states
needed (an int or a function of producer/consumer, pass-dependent for MFMA).

Rules that share a `group` share one backward search, as LLVM's GCNHazardRecognizer does:
the *nearest* producer that matches any rule of the group decides, and the first rule of the
group (in table order) that matches it gives the distance. E.g. an MFMA accumulating into the
exact tuple of the previous MFMA (row 4, 0 wait states) hides an older MFMA that wrote it.
Wait-state counts with 0 are real entries: they end a search without a finding.

Bound: each predicate looks at one instruction, O(operands); hazards.py asks them once per
distinct instruction text.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from ..isa.instruction import Instruction
from ..isa.operands import Reg, Special, operand_reg_set

VEC = ("v", "a")
SALU_FAMILIES = {"SOP1", "SOP2", "SOPC", "SOPK", "SOPP"}


# ---- instruction classes -------------------------------------------------------------------
def is_mfma(i: Instruction) -> bool:
    return i.unit == "MFMA"


def is_valu(i: Instruction) -> bool:
    # LLVM's SIInstrInfo::isVALU includes MFMA, TRANS, permlane, v_accvgpr_*, readlane.
    return i.unit in ("VALU", "TRANS", "MFMA")


def is_legacy_valu(i: Instruction) -> bool:
    return is_valu(i) and not is_mfma(i)


def is_xdl(i: Instruction) -> bool:
    return is_mfma(i) and i.info.get("mfma_kind") == "xdl"


def is_dgemm(i: Instruction) -> bool:
    return is_mfma(i) and i.info.get("mfma_kind") == "dgemm"


def is_smfma(i: Instruction) -> bool:   # f32 MFMA: neither XDL nor DGEMM
    return is_mfma(i) and i.info.get("mfma_kind") == "sgemm"


def is_dot(i: Instruction) -> bool:
    return bool(i.info.get("dot"))


def is_trans(i: Instruction) -> bool:
    return i.unit == "TRANS" or bool(i.info.get("trans"))


def is_vmem(i: Instruction) -> bool:
    return i.unit in ("VMEM", "FLAT")


def is_mem(i: Instruction) -> bool:
    return i.unit in ("VMEM", "FLAT", "DS")


def is_salu(i: Instruction) -> bool:
    return i.family in SALU_FAMILIES


def is_setreg(i: Instruction) -> bool:
    return i.name in ("s_setreg_b32", "s_setreg_imm32_b32")


def is_vcmpx(i: Instruction) -> bool:
    # isVCmpXWritesExec: any VALU compare that writes EXEC (v_cmpx_*, or v_cmp_* with exec as sdst)
    return i.name.startswith("v_cmp") and ("spec", "exec") in i.writes


def is_smfmac(i: Instruction) -> bool:
    return i.name.startswith("v_smfmac")


def is_permlane_swap(i: Instruction) -> bool:
    return i.name in ("v_permlane16_swap_b32", "v_permlane32_swap_b32")


def reads_m0_hazardously(i: Instruction) -> bool:
    """checkReadM0Hazards consumers on GFX9: s_movrel*, ds_*_addtid, s_sendmsg*/ttracedata, GDS, LDS DMA."""
    return (i.name.startswith("s_movrel") or i.name in ("ds_write_addtid_b32", "ds_read_addtid_b32")
            or i.name in ("s_sendmsg", "s_sendmsghalt", "s_ttracedata")
            or (i.unit == "DS" and bool(i.modifiers.get("gds"))) or i.is_lds_dma)


def hwreg_id(i: Instruction) -> str | None:
    for op in i.operands:
        m = re.match(r"hwreg\(\s*([A-Za-z_0-9]+)", str(op))
        if m:
            return m.group(1)
    return None


_FP8_DST_SEL = re.compile(r"^v_cvt_(scalef32_)?(sr_)?(pk_)?(fp8|bf8)_")
_FP4_SR = re.compile(r"^v_cvt_scalef32_sr_pk_fp4_")


def forwarded_dst(i: Instruction) -> frozenset:
    """Registers of a VALU result that needs dst-sel forwarding (row 15, getDstSelForwardingOperand)."""
    if not is_valu(i) or is_mfma(i) or not i.operands:
        return frozenset()
    vdst = _slot_regs(i, "vdst")
    sel = i.modifiers.get("dst_sel")
    if i.is_sdwa and sel is not None and sel != "DWORD":
        return vdst
    if (i.family == "VOP3P" and "op_sel" in i.info.get("modifiers", ())
            and ("op_sel_hi" not in i.modifiers or i.modifiers["op_sel_hi"][0])):
        # LLVM reads the VOP3P src0 op_sel_hi bit (set by default) as the VOP3 DST_OP_SEL bit, so
        # v_pk_* / v_dot2* count as forwarding producers: conservative, and what llc inserts.
        # Only opcodes with an op_sel operand (AMDGPU::hasNamedOperand): v_accvgpr_read/write are
        # VOP3P-encoded without one, and llc inserts nothing after them.
        return vdst
    op_sel = i.modifiers.get("op_sel")
    if op_sel:
        nsrc = sum(1 for s in i.slots if s["name"].startswith("src"))
        if len(op_sel) > nsrc and op_sel[nsrc]:
            return vdst
        if _FP8_DST_SEL.match(i.name) and len(op_sel) > 2 and op_sel[2]:
            return vdst
    if _FP4_SR.match(i.name):
        return vdst
    return frozenset()


def store_data(i: Instruction) -> frozenset:
    """Data VGPRs of a store wider than 64 bits that a VALU may not overwrite for 2 wait states
    (row 27; LLVM createsVALUHazard: MUBUF/MTBUF only without an SGPR soffset, FLAT always)."""
    if i.info.get("mem") not in ("store", "atomic"):
        return frozenset()
    if i.family in ("MUBUF", "MTBUF"):
        data = i.operand("vdata")
        soff = i.operand("soffset")
        if data is None or isinstance(soff, (Reg, Special)):
            return frozenset()
    elif i.family in ("FLAT", "FLAT_GLBL", "FLAT_SCRATCH"):
        data = i.operand("data") if i.operand("data") is not None else i.operand("vdata")
        if data is None:
            return frozenset()
    else:
        return frozenset()
    regs = operand_reg_set(data)
    return regs if len(regs) > 2 else frozenset()


# ---- operand selectors: the consumer registers a rule compares ------------------------------
def _slot_regs(i: Instruction, name: str) -> frozenset:
    op = i.operand(name)
    return operand_reg_set(op) if op is not None else frozenset()


def _explicit(i: Instruction, want: str):
    """(slot name, regs) for each explicit register operand whose access contains `want`."""
    for name, acc, regs in i.operand_access:
        if regs and want in acc:
            yield name, regs


def sel_uses(i):
    return list(_explicit(i, "r"))


def sel_vec_uses(i):
    return [(n, r) for n, r in _explicit(i, "r") if all(k in VEC for k, _ in r)]


def sel_defs(i):
    return list(_explicit(i, "w"))


def sel_vec_defs(i):
    return [(n, r) for n, r in _explicit(i, "w") if all(k in VEC for k, _ in r)]


def sel_all_uses(i):
    regs = frozenset().union(*(r for _, r in _explicit(i, "r")))
    return [("uses", regs)] if regs else []


def sel_all_regs(i):
    return [("all", i.reads | i.writes)]


def sel_mfma_uses(i):
    """MFMA sources as LLVM tells them apart: SrcC is the accumulator (src2; for SMFMAC the tuple
    read through vdst, whose src2 is the sparsity index and counts as SrcA/B, as llc shows)."""
    srcc = "vdst" if is_smfmac(i) else "src2"
    out = []
    for n, r in _explicit(i, "r"):
        if all(k in VEC for k, _ in r):
            out.append(("srcc" if n == srcc else "srcab", r))
    return out


def sel_sgpr_uses(i):
    out = [(n, r) for n, r in _explicit(i, "r") if all(k == "s" or r == {("spec", "vcc")} for k, _ in r)]
    if ("spec", "vcc") in i.reads and not any(r == {("spec", "vcc")} for _, r in out):
        out.append(("vcc", frozenset({("spec", "vcc")})))
    return out


def sel_scalar_uses(i):
    """checkVMEMHazards: every non-vector register the VMEM instruction uses, implicit ones too."""
    out = [(n, r) for n, r in _explicit(i, "r") if not any(k in VEC for k, _ in r)]
    for sp in ("exec", "m0", "vcc"):
        if ("spec", sp) in i.reads and not any(("spec", sp) in r for _, r in out):
            out.append((sp, frozenset({("spec", sp)})))
    return out


def _one(name):
    return lambda i: [(name, frozenset({("spec", name)}))]


def sel_src0(i):
    r = _slot_regs(i, "src0")
    return [("src0", r)] if r else []


def sel_lane_select(i):
    r = _slot_regs(i, "src1")
    return [("src1", r)] if r and all(k == "s" for k, _ in r) else []


def sel_dpp_uses(i):
    """DPP reads its vdst too (the 'old' value kept in disabled lanes)."""
    out = sel_vec_uses(i)
    d = _slot_regs(i, "vdst")
    if d and all(k in VEC for k, _ in d) and not any(r == d for _, r in out):
        out.append(("vdst", d))
    return out


def sel_none(i):
    return [("", frozenset())]


SELECTORS: dict[str, Callable] = {
    "uses": sel_uses, "vec_uses": sel_vec_uses, "defs": sel_defs, "vec_defs": sel_vec_defs,
    "all_uses": sel_all_uses, "all_regs": sel_all_regs, "mfma_uses": sel_mfma_uses,
    "sgpr_uses": sel_sgpr_uses, "scalar_uses": sel_scalar_uses, "exec": _one("exec"), "vcc": _one("vcc"),
    "m0": _one("m0"), "src0": sel_src0, "dpp_uses": sel_dpp_uses, "lane_select": sel_lane_select, "none": sel_none,
}


# ---- relations: how a producer touches the selected registers ----------------------------
def mfma_dst(p: Instruction) -> frozenset:
    return operand_reg_set(p.operands[0]) if p.operands else frozenset()


def srcc_regs(p: Instruction) -> frozenset:
    return _slot_regs(p, "vdst" if is_smfmac(p) else "src2")


# the producer registers each relation compares with the consumer's (None: any producer matches)
RELATION_REGS: dict[str, Callable[[Instruction], frozenset | None]] = {
    "writes": lambda p: p.writes, "dst": mfma_dst, "srcc": srcc_regs, "store_data": store_data,
    "fwd_dst": forwarded_dst, "any": lambda p: None,
}
RELATIONS: dict[str, Callable[[Instruction, frozenset], bool]] = {
    k: (lambda f: lambda p, r: (lambda x: x is None or bool(x & r))(f(p)))(f) for k, f in RELATION_REGS.items()}


# ---- distances ----------------------------------------------------------------------------
def np_(i: Instruction) -> int:
    return i.passes or 0


def xdl_read(p, c, tag, regs):      # rows 1-3: NP+3+(NP!=2) on gfx950: 5/8/12/20
    n = np_(p)
    return n + 3 + (n != 2)


def smfma_read(p, c, tag, regs):    # row 7: NP+2
    return np_(p) + 2


def full_tuple(p, c, tag, regs):    # row 4: SrcC is exactly the producer's D tuple
    return regs == mfma_dst(p)


@dataclass(frozen=True)
class Rule:
    id: str
    row: int | None
    title: str
    group: str
    consumer: Callable[[Instruction], bool]
    operands: str
    producer: Callable[[Instruction], bool]
    relation: str
    waits: int | Callable
    when: Callable | None = None      # extra condition on (producer, consumer, operand tag, regs)
    strict_only: bool = False
    source: str = ""                  # the LLVM function (or ISA table) the rule follows

    def need(self, p, c, tag, regs) -> int:
        return self.waits(p, c, tag, regs) if callable(self.waits) else self.waits

    def applies(self, p, c, tag, regs) -> bool:
        return (self.producer(p) and RELATIONS[self.relation](p, regs)
                and (self.when is None or self.when(p, c, tag, regs)))


def _tag(*tags):
    return lambda p, c, tag, regs: tag in tags


def _and(*fs):
    return lambda p, c, tag, regs: all(f(p, c, tag, regs) for f in fs)


def _c(pred):
    return lambda p, c, tag, regs: pred(c)


def _p(pred):
    return lambda p, c, tag, regs: pred(p)


def _not(f):
    return lambda p, c, tag, regs: not f(p, c, tag, regs)


def _f64_4x4(i):
    return is_dgemm(i) and "4x4x4" in i.name


def _f64_16x16(i):
    return is_dgemm(i) and "16x16x4" in i.name


def _non_mfma_vector(c):
    return (is_valu(c) or is_mem(c)) and not is_mfma(c)


_CONSUMER_MFMA, _ANY = is_mfma, (lambda i: True)
_WAR = {2: 1, 4: 3, 8: 7, 16: 15}

RULES: list[Rule] = [
    # ---- MFMA consumers (checkMAIHazards90A) ---------------------------------------------------
    Rule("valu_exec_mfma", 10, "VALU writes EXEC -> MFMA", "mfma_exec", _CONSUMER_MFMA, "exec",
         is_legacy_valu, "writes", 4, source="checkMAIHazards90A VALUWritesExecWaitStates"),
    Rule("valu_write_mfma_read", 9, "VALU (not DOT) writes VGPR -> MFMA reads it", "mfma_valu", _CONSUMER_MFMA,
         "mfma_uses", lambda p: is_legacy_valu(p) and not is_dot(p), "writes", 2,
         source="checkMAIHazards90A LegacyVALUNotDotWritesVGPRWaitStates"),
    # one search: the nearest MFMA whose D overlaps the operand decides
    Rule("dgemm4_same_srcc", 11, "f64 4x4x4 MFMA writes D -> the same f64 4x4x4 reads it as SrcC", "mfma_mfma",
         _CONSUMER_MFMA, "mfma_uses", _f64_4x4, "dst", 4,
         when=_and(_tag("srcc"), full_tuple, _c(_f64_4x4)), source="DMFMA4x4WritesVGPRFullSrcCWaitStates"),
    Rule("mfma2_same_srcc", 4, "2-pass MFMA writes D -> MFMA reads exactly that tuple as SrcC", "mfma_mfma",
         _CONSUMER_MFMA, "mfma_uses", lambda p: np_(p) == 2, "dst", 2, when=_and(_tag("srcc"), full_tuple),
         source="GFX940_SMFMA4x4WritesVGPRFullSrcCWaitStates"),
    Rule("xdl_write_same_srcc", 4, "MFMA writes D -> MFMA accumulates into exactly that tuple (SrcC)", "mfma_mfma",
         _CONSUMER_MFMA, "mfma_uses", is_mfma, "dst", 0, when=_and(_tag("srcc"), full_tuple),
         source="checkMAIHazards90A FullReg"),
    Rule("dgemm16_write_srcc", 11, "f64 16x16x4 MFMA writes D -> non-XDL MFMA reads overlapping SrcC", "mfma_mfma",
         _CONSUMER_MFMA, "mfma_uses", _f64_16x16, "dst",
         lambda p, c, t, r: 0 if is_xdl(c) else 17, when=_tag("srcc"),
         source="GFX950_DMFMA16x16WritesVGPROverlappedSrcCWaitStates"),
    Rule("dgemm4_write_srcc", 11, "f64 4x4x4 MFMA writes D -> non-XDL MFMA reads overlapping SrcC", "mfma_mfma",
         _CONSUMER_MFMA, "mfma_uses", _f64_4x4, "dst",
         lambda p, c, t, r: 0 if is_xdl(c) else 4, when=_tag("srcc"),
         source="DMFMA4x4WritesVGPROverlappedSrcCWaitStates"),
    Rule("smfma_write_xdl_srcc", 7, "f32 MFMA writes D -> XDL MFMA reads it as SrcC (no wait on gfx940+)",
         "mfma_mfma", _CONSUMER_MFMA, "mfma_uses", lambda p: is_mfma(p) and not is_xdl(p), "dst", 0,
         when=_and(_tag("srcc"), _c(is_xdl)), source="checkMAIHazards90A (isXDL(MI) && !isXDL(MI1))"),
    Rule("xdl_write_overlap_srcc", 5, "XDL MFMA writes D -> XDL MFMA reads overlapping (not identical) SrcC",
         "mfma_mfma", _CONSUMER_MFMA, "mfma_uses", is_xdl, "dst", lambda p, c, t, r: np_(p) + 2,
         when=_and(_tag("srcc"), _c(is_xdl)),
         source="GFX940_XDL_N_PassWritesVGPROverlappedXDLOrSMFMASrcCWaitStates"),
    Rule("xdl_write_sgemm_dgemm_srcc", 6, "XDL MFMA writes D -> f32/f64 MFMA reads overlapping SrcC", "mfma_mfma",
         _CONSUMER_MFMA, "mfma_uses", is_xdl, "dst", lambda p, c, t, r: np_(p) + 1 + (np_(p) != 2),
         when=_tag("srcc"), source="GFX940_XDL_N_PassWritesVGPROverlappedSGEMMDGEMMSrcCWaitStates"),
    Rule("smfma_write_overlap_srcc", 7, "f32 MFMA writes D -> MFMA reads overlapping SrcC", "mfma_mfma",
         _CONSUMER_MFMA, "mfma_uses", is_mfma, "dst", lambda p, c, t, r: np_(p), when=_tag("srcc"),
         source="GFX940_SMFMA_N_PassWritesVGPROverlappedSMFMASrcCWaitStates"),
    Rule("dgemm_write_srcab", 11, "f64 MFMA writes D -> MFMA reads it as SrcA/SrcB", "mfma_mfma", _CONSUMER_MFMA,
         "mfma_uses", is_dgemm, "dst", lambda p, c, t, r: 6 if _f64_4x4(p) else 19, when=_tag("srcab"),
         source="GFX950_DMFMA16x16WritesVGPROverlappedMFMASrcABWaitStates"),
    Rule("xdl_write_srcab", 3, "XDL MFMA writes D -> MFMA reads it as SrcA/SrcB", "mfma_mfma", _CONSUMER_MFMA,
         "mfma_uses", is_xdl, "dst", xdl_read, when=_tag("srcab"),
         source="GFX940_XDL_N_PassWritesVGPROverlappedSrcABWaitStates"),
    Rule("smfma_write_srcab", 7, "f32 MFMA writes D -> MFMA reads it as SrcA/SrcB", "mfma_mfma", _CONSUMER_MFMA,
         "mfma_uses", is_mfma, "dst", smfma_read, when=_tag("srcab"),
         source="GFX940_SMFMA_N_PassWritesVGPROverlappedSrcABWaitStates"),

    # ---- VALU / memory consumers of MFMA and DOT results (checkMAIVALUHazards) -------------------
    Rule("dot_write_same_srcc", 28, "DOT writes -> the same DOT opcode reads it as SrcC", "dot_use",
         _non_mfma_vector, "uses", is_dot, "dst", 0, when=lambda p, c, t, r: p.name == c.name and t in ("src2", "vdst"),
         source="checkMAIVALUHazards DotWriteSameDotReadSrcAB"),
    Rule("dot_write_read", 28, "DOT writes -> VALU/memory reads it", "dot_use", _non_mfma_vector, "uses", is_dot,
         "dst", 3, source="checkMAIVALUHazards DotWriteDifferentVALURead / DotWriteSameDotReadSrcAB"),
    Rule("dgemm_write_mem_read", 11, "f64 MFMA writes D -> VMEM/DS reads it", "mfma_use", _non_mfma_vector, "uses",
         is_dgemm, "dst", lambda p, c, t, r: 9 if _f64_4x4(p) else 18, when=_c(is_mem),
         source="DMFMA16x16WriteVgprMemExpReadWaitStates"),
    Rule("dgemm_write_valu_read", 11, "f64 MFMA writes D -> VALU reads it", "mfma_use", _non_mfma_vector, "uses",
         is_dgemm, "dst", lambda p, c, t, r: 6 if _f64_4x4(p) else 19,
         source="GFX950_DMFMA16x16WriteVgprVALUReadWaitStates"),
    Rule("xdl_write_mem_read", 2, "XDL MFMA writes D -> VMEM/DS reads it (address or data)", "mfma_use",
         _non_mfma_vector, "uses", is_xdl, "dst", xdl_read, when=_c(is_mem),
         source="GFX940_XDL_N_PassWriteVgprVALUMemExpReadWaitStates"),
    Rule("xdl_write_valu_read", 1, "XDL MFMA writes D -> VALU reads it", "mfma_use", _non_mfma_vector, "uses",
         is_xdl, "dst", xdl_read, source="GFX940_XDL_N_PassWriteVgprVALUMemExpReadWaitStates"),
    Rule("smfma_write_read", 7, "f32 MFMA writes D -> VALU/memory reads it", "mfma_use", _non_mfma_vector, "uses",
         is_mfma, "dst", smfma_read, source="GFX940_SMFMA_N_PassWriteVgprVALUMemExpReadWaitStates"),
    Rule("dgemm_fma64", 29, "f64 MFMA -> v_fma_f64 / v_fmac_f64", "fma64",
         lambda c: c.name in ("v_fma_f64", "v_fmac_f64"), "none", is_dgemm, "any", 2,
         source="checkMAIVALUHazards DMFMAToFMA64WaitStates"),
    Rule("dot_write_same_write", 28, "DOT writes -> the same DOT opcode writes it", "dot_def", _non_mfma_vector,
         "defs", is_dot, "dst", 0, when=lambda p, c, t, r: p.name == c.name, source="checkMAIVALUHazards"),
    Rule("dot_write_write", 28, "DOT writes -> another VALU/load writes it", "dot_def", _non_mfma_vector, "defs",
         is_dot, "dst", 3, source="checkMAIVALUHazards DotWriteDifferentVALUWrite"),
    Rule("dgemm_write_write", 11, "f64 MFMA writes D -> VALU/load writes it (WAW)", "mfma_def", _non_mfma_vector,
         "defs", is_dgemm, "dst", lambda p, c, t, r: 6 if _f64_4x4(p) else 11,
         source="DMFMA16x16WriteVgprVALUWriteWaitStates"),
    Rule("xdl_write_mem_write", 2, "XDL MFMA writes D -> VMEM/DS load overwrites it (WAW)", "mfma_def",
         _non_mfma_vector, "defs", is_xdl, "dst", xdl_read, when=_c(is_mem),
         source="GFX940_XDL_N_PassWriteVgprVALUWawWaitStates"),
    Rule("xdl_write_valu_write", 1, "XDL MFMA writes D -> VALU writes it (WAW)", "mfma_def", _non_mfma_vector,
         "defs", is_xdl, "dst", xdl_read, source="GFX940_XDL_N_PassWriteVgprVALUWawWaitStates"),
    Rule("smfma_write_write", 7, "f32 MFMA writes D -> VALU/load writes it (WAW)", "mfma_def", _non_mfma_vector,
         "defs", is_mfma, "dst", smfma_read, source="GFX940_SMFMA_N_PassWriteVgprVALUWawWaitStates"),
    Rule("mfma_srcc_war", 8, "XDL MFMA reads SrcC -> VALU/load overwrites it (WAR)", "srcc_war", _non_mfma_vector,
         "defs", is_xdl, "srcc", lambda p, c, t, r: _WAR.get(np_(p), 15),
         source="checkMAIVALUHazards IsSMFMAReadAsCFn (XDL only on gfx940+)"),

    # ---- VALU consumers (checkVALUHazards, checkRWLaneHazards, checkDPPHazards, ...) ------------
    Rule("trans_valu_read", 14, "TRANS op writes VGPR -> non-TRANS VALU reads it", "trans",
         lambda c: is_valu(c) and not is_trans(c), "all_uses", is_trans,
         "writes", 1, source="checkVALUHazards hasTransForwardingHazard"),
    Rule("dst_sel_forwarding", 15, "VALU writes part of a VGPR (SDWA dst_sel, op_sel dst-hi, fp8/fp4 byte) -> "
         "VALU touches it", "dst_sel", is_valu, "all_regs", lambda p: True, "fwd_dst", 1,
         source="checkVALUHazards getDstSelForwardingOperand"),
    Rule("valu_sgpr_valu_read", 16, "VALU writes SGPR/VCC -> VALU reads it", "valu_sgpr", is_valu, "sgpr_uses",
         is_valu, "writes", 2, source="checkVALUHazards VALUWriteSGPRVALUReadWaitstates"),
    Rule("valu_vgpr_readlane", 19, "VALU writes VGPR -> v_readlane/v_readfirstlane reads it", "readlane_src",
         lambda c: c.name in ("v_readlane_b32", "v_readfirstlane_b32"), "src0", is_valu, "writes", 1,
         source="checkVALUHazards VALUWriteVGPRReadlaneRead"),
    Rule("valu_exec_rwlane", 18, "VALU writes EXEC -> v_readlane/v_readfirstlane/v_writelane", "rwlane_exec",
         lambda c: c.name in ("v_readlane_b32", "v_readfirstlane_b32", "v_writelane_b32"), "exec", is_valu,
         "writes", 4, source="checkVALUHazards VALUWriteEXECRWLane"),
    Rule("store_data_overwrite", 27, "store wider than 64 bits -> VALU overwrites its data VGPRs", "store_data",
         is_valu, "vec_defs", lambda p: bool(store_data(p)), "store_data", 2,
         source="checkVALUHazardsHelper / createsVALUHazard (gfx940+: 2)"),
    Rule("valu_sgpr_lane_select", 17, "VALU writes SGPR -> v_readlane/v_writelane lane select", "lane_select",
         lambda c: c.name in ("v_readlane_b32", "v_writelane_b32"), "lane_select", is_valu, "writes", 4,
         source="checkRWLaneHazards"),
    Rule("valu_sgpr_vmem", 20, "VALU writes SGPR/EXEC -> VMEM reads it", "vmem_sgpr", is_vmem, "scalar_uses",
         is_valu, "writes", 5, source="checkVMEMHazards VmemSgprWaitStates"),
    Rule("valu_vgpr_dpp", 21, "instruction writes VGPR -> DPP reads it", "dpp_vgpr", lambda c: c.is_dpp,
         "dpp_uses", lambda p: True, "writes", 2, source="checkDPPHazards DppVgprWaitStates"),
    Rule("valu_exec_dpp", 22, "VALU writes EXEC -> DPP", "dpp_exec", lambda c: c.is_dpp, "exec", is_valu,
         "writes", 5, source="checkDPPHazards DppExecWaitStates"),
    Rule("valu_vcc_div_fmas", 23, "VALU writes VCC -> v_div_fmas", "div_fmas",
         lambda c: c.name in ("v_div_fmas_f32", "v_div_fmas_f64"), "vcc", is_valu, "writes", 4,
         source="checkDivFMasHazards"),
    Rule("salu_m0", 24, "SALU writes M0 -> LDS DMA / s_movrel / ds_*_addtid / s_sendmsg", "m0",
         reads_m0_hazardously, "m0", is_salu, "writes", 1, source="checkReadM0Hazards"),
    Rule("setreg", 25, "s_setreg -> s_getreg / s_setreg of the same hwreg", "setreg",
         lambda c: c.name == "s_getreg_b32" or is_setreg(c), "none", is_setreg, "any", 2,
         when=lambda p, c, t, r: hwreg_id(p) == hwreg_id(c), source="checkGetRegHazards / checkSetRegHazards"),
    Rule("valu_write_permlane", 12, "VALU writes VGPR -> v_permlane16/32_swap reads it", "permlane_vgpr",
         is_permlane_swap, "vec_uses", is_valu, "writes", 2, source="checkPermlaneHazards VALUWritesVDstWaitStates"),
    Rule("vcmpx_permlane", 13, "V_CMPX writes EXEC -> v_permlane*_swap", "permlane_exec", is_permlane_swap, "none",
         is_vcmpx, "any", 4, source="checkPermlaneHazards VCmpXWritesExecWaitStates"),

    # ---- strict mode only: ISA text rows LLVM does not implement for gfx950 ---------------------
    Rule("setreg_rfe", 26, "s_setreg TRAPSTS -> s_rfe", "rfe", lambda c: c.name == "s_rfe_b64", "none",
         lambda p: is_setreg(p) and hwreg_id(p) == "HW_REG_TRAPSTS", "any", 1,
         source="checkRFEHazards (llc 22 applies it on gfx950)"),
    Rule("valu_vccz_execz", 30, "VALU writes VCC/EXEC -> VALU reads VCCZ/EXECZ as data", "vccz",
         lambda c: is_valu(c) and any(str(o).lstrip("-|") in ("src_vccz", "src_execz", "vccz", "execz")
                                      for o in c.operands), "none",
         lambda p: is_valu(p) and bool(p.writes & {("spec", "vcc"), ("spec", "exec")}), "any", 5,
         strict_only=True, source="ISA Table 11"),
    Rule("setreg_mode_vector", 31, "s_setreg MODE -> any vector instruction", "setreg_mode",
         lambda c: is_valu(c) or is_mem(c), "none", lambda p: is_setreg(p) and hwreg_id(p) == "HW_REG_MODE",
         "any", 2, strict_only=True, source="ISA Table 11 (vskip)"),
]

RULES_BY_ID = {r.id: r for r in RULES}
MAX_WAITS = 20   # the largest distance in the table (16-pass XDL, rows 1-3); no LLVM limit of 19 here
