"""Offline oracle of LLVM's gfx950 hazard recogniser, as paired asm / MIR probes.

A :class:`Probe` is a short gfx950 instruction sequence written twice: as assembly text (what
flyasm's static hazard checker reads) and as a one-function MIR file (what
``llc -mtriple=amdgcn -mcpu=gfx950 -run-pass=post-RA-hazard-rec`` reads). :func:`llc_wait_states`
runs LLVM's hazard recogniser on the MIR side and returns, per asm instruction, the wait states
llc inserted right before it (``s_nop N`` = N+1). The checker's tests compare their own
"insert" mode with those numbers.

Conventions
-----------
* ``Probe.asm`` holds one item per line: instructions in llvm-mc syntax
  (``-triple=amdgcn-amd-amdhsa -mcpu=gfx950``) and label lines that end with ``:``
  (``.LBB0_1:``). Labels start basic blocks; label ``.LBB0_N`` is MIR block ``bb.N``.
  The asm never contains ``s_nop``.
* Wait-state lists are per *instruction*: label lines are skipped, so entry ``i`` belongs to the
  ``i``-th non-label line of ``Probe.asm``. Wait states that llc puts at the top of a block belong
  to the block's first instruction.
* ``Probe.note_ws`` is what the hazard table of the reference notes (``gfx950_isa_notes.md``
  §4.2, read literally) predicts before instruction ``Probe.consumer``; ``None`` when the table
  has no row for that producer/consumer pair. ``Probe.known_diff`` says why llc is known to
  disagree with that prediction. ``Probe.llvm_bound_bug`` marks the probes where LLVM's search
  limit of 19 wait states hides a 16-pass XDL hazard (notes §4.3): llc's number is too small there
  and a correct checker must *not* match it.
* ``Probe.clean``: only the consumer may need wait states (every other entry of the llc list is 0).

Run ``python tests/oracles/hazard_probes.py`` for counts per rule, llc's runtime and the
disagreements with the table.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence, Union

__all__ = [
    "Probe",
    "RULES",
    "HazardOracleError",
    "generate_probes",
    "llc_wait_states",
    "llc_instructions",
    "llc_version",
    "validate_asm",
    "mc_instructions",
    "asm_mir_mismatches",
    "table_disagreements",
    "instruction_lines",
    "find_tool",
    "default_cache_dir",
]


class HazardOracleError(RuntimeError):
    """llc or llvm-mc rejected a probe, or its output could not be aligned with the probe."""


@dataclass(frozen=True)
class Probe:
    name: str             # unique, a valid MIR function name, e.g. "xdl8_valu_raw_d3"
    rule: str             # key of RULES (hazard-table row + short rule name)
    asm: tuple[str, ...]  # gfx950 assembly lines (labels allowed as items ending with ':'), no s_nop
    mir: str              # a complete MIR file with the same instructions, one function named `name`
    llvm_bound_bug: bool = False   # LLVM's 19-wait-state search limit under-counts this probe (notes §4.3)
    note_ws: int | None = None     # wait states the notes' table predicts before `consumer` (None: no row)
    consumer: int = -1             # instruction index (labels excluded) that note_ws is about
    known_diff: str = ""           # why llc is known to differ from note_ws (a documented surprise)
    clean: bool = True             # only `consumer` can need wait states

    @property
    def row(self) -> int | None:
        return RULES[self.rule][0]

    @property
    def instructions(self) -> list[str]:
        return instruction_lines(self.asm)

    @property
    def consumer_index(self) -> int:
        n = len(self.instructions)
        return self.consumer % n


def instruction_lines(asm: Iterable[str]) -> list[str]:
    """The instruction lines of a probe's asm (label lines removed)."""
    return [line for line in asm if not line.rstrip().endswith(":")]


# Hazard-table rows (notes §4.2) and the extra rules llc showed; row None = no single row.
RULES: dict[str, tuple[int | None, str]] = {
    "xdl_write_valu_read": (1, "XDL MFMA writes VGPR/AGPR -> VALU reads it (RAW)"),
    "xdl_write_valu_write": (1, "XDL MFMA writes VGPR/AGPR -> VALU writes it (WAW)"),
    "xdl_write_mem_read": (2, "XDL MFMA writes VGPR -> VMEM/DS/FLAT reads it (address or store data)"),
    "xdl_write_mem_write": (2, "XDL MFMA writes VGPR -> VMEM/DS load overwrites it (LLVM: as VALU WAW)"),
    "xdl_write_srcab": (3, "XDL MFMA writes VGPR -> MFMA reads it as SrcA/SrcB"),
    "xdl_write_smfmac_index": (3, "XDL MFMA writes VGPR -> SMFMAC reads it as sparsity index"),
    "xdl_write_smfmac_acc": (4, "XDL MFMA writes VGPR -> SMFMAC accumulates into the same tuple"),
    "xdl_write_same_srcc": (4, "XDL MFMA writes VGPR -> MFMA reads exactly that tuple as SrcC"),
    "xdl_write_overlap_srcc": (5, "XDL MFMA writes VGPR -> XDL MFMA reads overlapping SrcC"),
    "xdl_write_sgemm_dgemm_srcc": (6, "XDL MFMA writes VGPR -> f32 (SGEMM) / f64 (DGEMM) MFMA reads SrcC"),
    "xdl_write_mfma_waw": (None, "XDL MFMA writes VGPR -> MFMA overwrites it without reading it"),
    "smfma_write_valu_read": (7, "f32 (non-XDL) MFMA writes -> VALU reads"),
    "smfma_write_valu_write": (7, "f32 (non-XDL) MFMA writes -> VALU writes"),
    "smfma_write_mem_read": (7, "f32 (non-XDL) MFMA writes -> VMEM/DS reads"),
    "smfma_write_srcab": (7, "f32 (non-XDL) MFMA writes -> MFMA SrcA/SrcB"),
    "smfma_write_overlap_srcc": (7, "f32 (non-XDL) MFMA writes -> f32 MFMA reads overlapping SrcC"),
    "smfma_write_same_srcc": (7, "f32 (non-XDL) MFMA writes -> MFMA reads the same tuple as SrcC"),
    "smfma_write_xdl_srcc": (7, "f32 (non-XDL) MFMA writes -> XDL MFMA reads it as SrcC"),
    "mfma_srcc_war": (8, "MFMA reads VGPR as SrcC -> VALU writes it (WAR)"),
    "mfma_srcc_war_mem": (8, "MFMA reads VGPR as SrcC -> VMEM/DS load writes it (WAR)"),
    "valu_write_mfma_read": (9, "VALU writes VGPR -> MFMA reads it"),
    "valu_exec_mfma": (10, "VALU writes EXEC -> MFMA"),
    "dgemm_write_valu_read": (11, "f64 MFMA writes -> VALU reads"),
    "dgemm_write_valu_write": (11, "f64 MFMA writes -> VALU writes"),
    "dgemm_write_mem_read": (11, "f64 MFMA writes -> VMEM/DS reads"),
    "dgemm_write_srcab": (11, "f64 MFMA writes -> MFMA SrcA/SrcB"),
    "dgemm_write_srcc": (11, "f64 MFMA writes -> MFMA SrcC"),
    "valu_write_permlane": (12, "VALU writes VGPR -> v_permlane16/32_swap reads it"),
    "vcmpx_permlane": (13, "V_CMPX writes EXEC -> v_permlane*_swap"),
    "trans_valu_read": (14, "TRANS op writes VGPR -> non-TRANS VALU reads it"),
    "dst_sel_forwarding": (15, "SDWA dst_sel / op_sel dst-hi / fp8-fp4 dst-byte VALU -> VALU touching that dst"),
    "valu_sgpr_valu_read": (16, "VALU writes SGPR/VCC -> VALU reads it"),
    "valu_sgpr_lane_select": (17, "VALU writes SGPR -> v_readlane/v_writelane lane select"),
    "valu_exec_rwlane": (18, "VALU writes EXEC -> v_readlane/v_readfirstlane/v_writelane"),
    "valu_vgpr_readlane": (19, "VALU writes VGPR -> v_readlane/v_readfirstlane reads it"),
    "valu_sgpr_vmem": (20, "VALU writes SGPR -> VMEM reads it (soffset, srsrc, saddr)"),
    "valu_exec_vmem": (20, "VALU writes EXEC -> VMEM (implicit EXEC read)"),
    "valu_vgpr_dpp": (21, "VALU writes VGPR -> DPP reads it"),
    "valu_exec_dpp": (22, "VALU writes EXEC -> DPP"),
    "valu_vcc_div_fmas": (23, "VALU writes VCC -> v_div_fmas"),
    "salu_m0": (24, "SALU writes M0 -> LDS DMA / s_movrel / ds_*_addtid / s_sendmsg"),
    "setreg": (25, "s_setreg -> s_getreg / s_setreg of the same hwreg"),
    "setreg_rfe": (26, "s_setreg TRAPSTS -> s_rfe"),
    "store_data_overwrite": (27, "wide VMEM/FLAT store -> VALU overwrites its data VGPRs"),
    "dot_write": (28, "DOT writes -> other VALU reads/writes, same DOT reads SrcA/B/C"),
    "dgemm_fma64": (29, "f64 MFMA -> v_fma_f64 / v_fmac_f64"),
    "filler_kinds": (1, "row 1 with SALU / mixed / s_waitcnt fillers: every instruction counts"),
    "multi_producer": (None, "two producers feed one consumer"),
    "cfg_fallthrough": (None, "hazard across a fallthrough into a labelled block"),
    "cfg_branch": (None, "hazard across a conditional or unconditional branch"),
    "cfg_loop": (None, "hazard across a loop back-edge"),
}


# --------------------------------------------------------------------------------------------
# Registers and operands
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Reg:
    kind: str  # "v", "a" or "s"
    lo: int
    n: int = 1

    @property
    def hi(self) -> int:
        return self.lo + self.n - 1

    @property
    def asm(self) -> str:
        return f"{self.kind}{self.lo}" if self.n == 1 else f"{self.kind}[{self.lo}:{self.hi}]"

    @property
    def mir(self) -> str:
        p = {"v": "vgpr", "a": "agpr", "s": "sgpr"}[self.kind]
        return "$" + "_".join(f"{p}{i}" for i in range(self.lo, self.lo + self.n))

    def __getitem__(self, i: int) -> "Reg":
        if not -self.n <= i < self.n:
            raise IndexError(i)
        return Reg(self.kind, self.lo + i % self.n)

    def part(self, off: int, n: int) -> "Reg":
        return Reg(self.kind, self.lo + off, n)


@dataclass(frozen=True)
class Special:
    name: str  # "vcc", "exec", "m0"

    @property
    def asm(self) -> str:
        return self.name

    @property
    def mir(self) -> str:
        return "$" + self.name


Operand = Union[Reg, Special, int]
VCC, EXEC, M0 = Special("vcc"), Special("exec"), Special("m0")


def v(lo: int, n: int = 1) -> Reg:
    return Reg("v", lo, n)


def a(lo: int, n: int = 1) -> Reg:
    return Reg("a", lo, n)


def s(lo: int, n: int = 1) -> Reg:
    return Reg("s", lo, n)


def _A(x: Operand) -> str:
    return str(x) if isinstance(x, int) else x.asm


def _M(x: Operand) -> str:
    return str(x) if isinstance(x, int) else x.mir


# --------------------------------------------------------------------------------------------
# Instructions: each builder returns the same instruction as asm text and as a MIR line
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Ins:
    asm: str
    mir: str


@dataclass(frozen=True)
class Label:
    n: int  # MIR block number

    @property
    def asm(self) -> str:
        return f".LBB0_{self.n}:"


Item = Union[Ins, Label]
_EX = "implicit $exec"
_MX = "implicit $mode, implicit $exec"


@dataclass(frozen=True)
class Mfma:
    key: str
    asm_op: str
    mir_op: str
    a: int        # SrcA VGPRs
    b: int        # SrcB VGPRs
    cd: int       # SrcC / vdst VGPRs
    passes: int   # notes §1.2
    kind: str     # "xdl", "smfma" (non-XDL f32), "dgemm", "smfmac", "scale"
    asm_mods: str = ""
    mir_imms: str = "0, 0, 0"   # cbsz, abid, blgp (f8f6f4: cbsz, blgp)


def _mf(*args, **kw) -> Mfma:
    return Mfma(*args, **kw)


MFMA: dict[str, Mfma] = {m.key: m for m in [
    # XDL, 2 passes
    _mf("4x4x4_16b_f16", "v_mfma_f32_4x4x4_16b_f16", "V_MFMA_F32_4X4X4F16", 2, 2, 4, 2, "xdl"),
    _mf("4x4x4_16b_bf16", "v_mfma_f32_4x4x4_16b_bf16", "V_MFMA_F32_4X4X4BF16_1K", 2, 2, 4, 2, "xdl"),
    _mf("4x4x4_16b_i8", "v_mfma_i32_4x4x4_16b_i8", "V_MFMA_I32_4X4X4I8", 1, 1, 4, 2, "xdl"),
    # XDL, 4 passes
    _mf("16x16x32_bf16", "v_mfma_f32_16x16x32_bf16", "V_MFMA_F32_16X16X32_BF16", 4, 4, 4, 4, "xdl"),
    _mf("16x16x32_f16", "v_mfma_f32_16x16x32_f16", "V_MFMA_F32_16X16X32_F16", 4, 4, 4, 4, "xdl"),
    _mf("16x16x64_i8", "v_mfma_i32_16x16x64_i8", "V_MFMA_I32_16X16X64_I8", 4, 4, 4, 4, "xdl"),
    _mf("16x16x16_f16", "v_mfma_f32_16x16x16_f16", "V_MFMA_F32_16X16X16F16", 2, 2, 4, 4, "xdl"),
    _mf("16x16x32_fp8_fp8", "v_mfma_f32_16x16x32_fp8_fp8", "V_MFMA_F32_16X16X32_FP8_FP8", 2, 2, 4, 4, "xdl"),
    _mf("16x16x128_f8f6f4_fp4", "v_mfma_f32_16x16x128_f8f6f4", "V_MFMA_F32_16X16X128_F8F6F4_f4_f4",
        4, 4, 4, 4, "xdl", " cbsz:4 blgp:4", "4, 4"),
    # XDL, 8 passes
    _mf("32x32x16_bf16", "v_mfma_f32_32x32x16_bf16", "V_MFMA_F32_32X32X16_BF16", 4, 4, 16, 8, "xdl"),
    _mf("32x32x16_f16", "v_mfma_f32_32x32x16_f16", "V_MFMA_F32_32X32X16_F16", 4, 4, 16, 8, "xdl"),
    _mf("32x32x32_i8", "v_mfma_i32_32x32x32_i8", "V_MFMA_I32_32X32X32_I8", 4, 4, 16, 8, "xdl"),
    _mf("32x32x8_f16", "v_mfma_f32_32x32x8_f16", "V_MFMA_F32_32X32X8F16", 2, 2, 16, 8, "xdl"),
    _mf("16x16x4_4b_f16", "v_mfma_f32_16x16x4_4b_f16", "V_MFMA_F32_16X16X4F16", 2, 2, 16, 8, "xdl"),
    _mf("16x16x128_f8f6f4_fp8", "v_mfma_f32_16x16x128_f8f6f4", "V_MFMA_F32_16X16X128_F8F6F4_f8_f8",
        8, 8, 4, 8, "xdl", "", "0, 0"),
    _mf("32x32x64_f8f6f4_fp6", "v_mfma_f32_32x32x64_f8f6f4", "V_MFMA_F32_32X32X64_F8F6F4_f6_f6",
        6, 6, 16, 8, "xdl", " cbsz:2 blgp:2", "2, 2"),
    _mf("scale_16x16x128_fp8", "v_mfma_scale_f32_16x16x128_f8f6f4",
        "V_MFMA_SCALE_F32_16X16X128_F8F6F4_f8_f8", 8, 8, 4, 8, "scale", "", "0, 0"),
    # XDL, 16 passes
    _mf("32x32x64_f8f6f4_fp8", "v_mfma_f32_32x32x64_f8f6f4", "V_MFMA_F32_32X32X64_F8F6F4_f8_f8",
        8, 8, 16, 16, "xdl", "", "0, 0"),
    _mf("32x32x4_2b_f16", "v_mfma_f32_32x32x4_2b_f16", "V_MFMA_F32_32X32X4F16", 2, 2, 32, 16, "xdl"),
    # non-XDL f32 ("SMFMA" / SGEMM)
    _mf("4x4x1_16b_f32", "v_mfma_f32_4x4x1_16b_f32", "V_MFMA_F32_4X4X1F32", 1, 1, 4, 2, "smfma"),
    _mf("16x16x4_f32", "v_mfma_f32_16x16x4_f32", "V_MFMA_F32_16X16X4F32", 1, 1, 4, 8, "smfma"),
    _mf("16x16x1_4b_f32", "v_mfma_f32_16x16x1_4b_f32", "V_MFMA_F32_16X16X1F32", 1, 1, 16, 8, "smfma"),
    _mf("32x32x2_f32", "v_mfma_f32_32x32x2_f32", "V_MFMA_F32_32X32X2F32", 1, 1, 16, 16, "smfma"),
    _mf("32x32x1_2b_f32", "v_mfma_f32_32x32x1_2b_f32", "V_MFMA_F32_32X32X1F32", 1, 1, 32, 16, "smfma"),
    # f64 (DGEMM)
    _mf("16x16x4_f64", "v_mfma_f64_16x16x4_f64", "V_MFMA_F64_16X16X4F64", 2, 2, 8, 16, "dgemm"),
    _mf("4x4x4_4b_f64", "v_mfma_f64_4x4x4_4b_f64", "V_MFMA_F64_4X4X4F64", 2, 2, 2, 4, "dgemm"),
    # sparse (SMFMAC): "c" operand = index VGPR, accumulator = vdst
    _mf("smfmac_16x16x64_bf16", "v_smfmac_f32_16x16x64_bf16", "V_SMFMAC_F32_16X16X64_BF16", 4, 8, 4, 4, "smfmac"),
    _mf("smfmac_32x32x32_bf16", "v_smfmac_f32_32x32x32_bf16", "V_SMFMAC_F32_32X32X32_BF16", 4, 8, 16, 8, "smfmac"),
]}

XDL_BY_PASSES = {2: "4x4x4_16b_f16", 4: "16x16x32_bf16", 8: "32x32x16_bf16", 16: "32x32x64_f8f6f4_fp8"}
SMFMA_BY_PASSES = {2: "4x4x1_16b_f32", 8: "16x16x4_f32", 16: "32x32x2_f32"}


def mfma(key: str, d: Reg, srca: Reg, srcb: Reg, c: Reg, scale: tuple[Reg, Reg] | None = None) -> Ins:
    """An MFMA; for SMFMAC ``c`` is the index VGPR and ``d`` is also the accumulator."""
    m = MFMA[key]
    assert (srca.n, srcb.n) == (m.a, m.b), (key, srca, srcb)
    if m.kind == "smfmac":
        assert d.n == m.cd and c.n == 1
        asm = f"{m.asm_op} {d.asm}, {srca.asm}, {srcb.asm}, {c.asm}"
        mir = (f"{d.mir} = {m.mir_op}_e64 {srca.mir}, {srcb.mir}, {c.mir}, 0, 0, {d.mir}, {_MX}")
        return Ins(asm, mir)
    assert d.n == m.cd and c.n == m.cd, (key, d, c)
    suffix = "_vgprcd_e64" if d.kind == "v" else "_e64"
    if m.kind == "scale":
        assert scale is not None
        asm = (f"{m.asm_op} {d.asm}, {srca.asm}, {srcb.asm}, {c.asm}, {scale[0].asm}, {scale[1].asm}")
        mir = (f"{d.mir} = {m.mir_op}{suffix} {srca.mir}, {srcb.mir}, {c.mir}, {m.mir_imms}, "
               f"{scale[0].mir}, {scale[1].mir}, 0, 0, {_MX}")
        return Ins(asm, mir)
    asm = f"{m.asm_op} {d.asm}, {srca.asm}, {srcb.asm}, {c.asm}{m.asm_mods}"
    mir = f"{d.mir} = {m.mir_op}{suffix} {srca.mir}, {srcb.mir}, {c.mir}, {m.mir_imms}, {_MX}"
    return Ins(asm, mir)


# ---- VALU

def v_mov(d: Reg, src: Operand) -> Ins:
    return Ins(f"v_mov_b32 {_A(d)}, {_A(src)}", f"{_M(d)} = V_MOV_B32_e32 {_M(src)}, {_EX}")


def vop2(op: str, d: Reg, s0: Operand, s1: Reg, mode: bool = True) -> Ins:
    """A VOP2 e32 op (src0 may be an SGPR or constant)."""
    return Ins(f"{op} {_A(d)}, {_A(s0)}, {_A(s1)}",
               f"{_M(d)} = {op.upper()}_e32 {_M(s0)}, {_M(s1)}, {_MX if mode else _EX}")


def v_add_f32(d: Reg, s0: Operand, s1: Reg) -> Ins:
    return vop2("v_add_f32", d, s0, s1)


def v_mul_f32_e64(d: Reg, s0: Operand, s1: Operand) -> Ins:
    return Ins(f"v_mul_f32_e64 {_A(d)}, {_A(s0)}, {_A(s1)}",
               f"{_M(d)} = V_MUL_F32_e64 0, {_M(s0)}, 0, {_M(s1)}, 0, 0, {_MX}")


def v_add_f64(d: Reg, s0: Reg, s1: Reg) -> Ins:
    return Ins(f"v_add_f64 {d.asm}, {s0.asm}, {s1.asm}",
               f"{d.mir} = V_ADD_F64_e64 0, {s0.mir}, 0, {s1.mir}, 0, 0, {_MX}")


def v_fma_f64(d: Reg, s0: Reg, s1: Reg, s2: Reg) -> Ins:
    return Ins(f"v_fma_f64 {d.asm}, {s0.asm}, {s1.asm}, {s2.asm}",
               f"{d.mir} = V_FMA_F64_e64 0, {s0.mir}, 0, {s1.mir}, 0, {s2.mir}, 0, 0, {_MX}")


def v_fmac_f64(d: Reg, s0: Reg, s1: Reg) -> Ins:
    return Ins(f"v_fmac_f64 {d.asm}, {s0.asm}, {s1.asm}",
               f"{d.mir} = V_FMAC_F64_e32 {s0.mir}, {s1.mir}, {d.mir}, {_MX}")


def v_pk_f32(op: str, d: Reg, s0: Reg, s1: Reg) -> Ins:
    """v_pk_add_f32 / v_pk_mul_f32 with default op_sel_hi."""
    return Ins(f"{op} {d.asm}, {s0.asm}, {s1.asm}",
               f"{d.mir} = {op.upper()} 8, {s0.mir}, 8, {s1.mir}, 0, 0, 0, 0, 0, {_MX}")


def v_pk_add_f16(d: Reg, s0: Reg, s1: Reg, op_sel_hi: bool = True) -> Ins:
    m = 8 if op_sel_hi else 0
    suffix = "" if op_sel_hi else " op_sel_hi:[0,0]"
    return Ins(f"v_pk_add_f16 {d.asm}, {s0.asm}, {s1.asm}{suffix}",
               f"{d.mir} = V_PK_ADD_F16 {m}, {s0.mir}, {m}, {s1.mir}, 0, 0, 0, 0, 0, {_MX}")


def v_fma_f16(d: Reg, s0: Reg, s1: Reg, s2: Reg, dst_hi: bool = False) -> Ins:
    m = 8 if dst_hi else 0
    suffix = " op_sel:[0,0,0,1]" if dst_hi else ""
    return Ins(f"v_fma_f16 {d.asm}, {s0.asm}, {s1.asm}, {s2.asm}{suffix}",
               f"{d.mir} = V_FMA_F16_gfx9_e64 {m}, {s0.mir}, 0, {s1.mir}, 0, {s2.mir}, 0, 0, {m}, {_MX}")


_SDWA_SEL = {"BYTE_0": 0, "BYTE_1": 1, "BYTE_2": 2, "BYTE_3": 3, "WORD_0": 4, "WORD_1": 5, "DWORD": 6}


def v_add_f16_sdwa(d: Reg, s0: Reg, s1: Reg, dst_sel: str) -> Ins:
    return Ins(f"v_add_f16_sdwa {d.asm}, {s0.asm}, {s1.asm} dst_sel:{dst_sel} dst_unused:UNUSED_PRESERVE "
               f"src0_sel:WORD_0 src1_sel:WORD_0",
               f"{d.mir} = V_ADD_F16_sdwa 0, {s0.mir}, 0, {s1.mir}, 0, 0, {_SDWA_SEL[dst_sel]}, 2, 4, 4, "
               f"{_MX}, implicit {d.mir}(tied-def 0)")


def v_mov_sdwa(d: Reg, s0: Reg, dst_sel: str) -> Ins:
    return Ins(f"v_mov_b32_sdwa {d.asm}, {s0.asm} dst_sel:{dst_sel} dst_unused:UNUSED_PRESERVE src0_sel:DWORD",
               f"{d.mir} = V_MOV_B32_sdwa 0, {s0.mir}, 0, {_SDWA_SEL[dst_sel]}, 2, 6, {_EX}, "
               f"implicit {d.mir}(tied-def 0)")


def v_cvt_scalef32_pk_fp8_f32(d: Reg, s0: Reg, s1: Reg, scale: Reg, dst_hi: bool) -> Ins:
    m = 8 if dst_hi else 0
    suffix = " op_sel:[0,0,0,1]" if dst_hi else ""
    return Ins(f"v_cvt_scalef32_pk_fp8_f32 {d.asm}, {s0.asm}, {s1.asm}, {scale.asm}{suffix}",
               f"{d.mir} = V_CVT_SCALEF32_PK_FP8_F32_e64 {m}, {s0.mir}, 0, {s1.mir}, 0, {scale.mir}, "
               f"{d.mir}, {m}, {_MX}")


def v_cvt_scalef32_sr_fp8_f32(d: Reg, s0: Reg, s1: Reg, scale: Reg, byte: int) -> Ins:
    """Stochastic-rounding fp8 convert writing byte `byte` (op_sel[2:3]) of d."""
    lo, hi = byte & 1, byte >> 1
    suffix = f" op_sel:[0,0,{lo},{hi}]" if byte else ""
    src0m, src2m = 8 * hi, 4 * lo
    return Ins(f"v_cvt_scalef32_sr_fp8_f32 {d.asm}, {s0.asm}, {s1.asm}, {scale.asm}{suffix}",
               f"{d.mir} = V_CVT_SCALEF32_SR_FP8_F32_e64 {src0m}, {s0.mir}, 0, {s1.mir}, {src2m}, {scale.mir}, "
               f"{d.mir}, {4 * lo + 8 * hi}, {_MX}")


def v_cvt_scalef32_sr_pk_fp4_f32(d: Reg, s0: Reg, s1: Reg, scale: Reg) -> Ins:
    return Ins(f"v_cvt_scalef32_sr_pk_fp4_f32 {d.asm}, {s0.asm}, {s1.asm}, {scale.asm}",
               f"{d.mir} = V_CVT_SCALEF32_SR_PK_FP4_F32_e64 0, {s0.mir}, 0, {s1.mir}, 0, {scale.mir}, "
               f"{d.mir}, 0, {_MX}")


def v_cvt_pk_bf16_f32(d: Reg, s0: Reg, s1: Reg) -> Ins:
    return Ins(f"v_cvt_pk_bf16_f32 {d.asm}, {s0.asm}, {s1.asm}",
               f"{d.mir} = V_CVT_PK_BF16_F32_e64 0, {s0.mir}, 0, {s1.mir}, 0, 0, {_MX}")


def v_cvt_f32_bf16(d: Reg, s0: Reg) -> Ins:
    return Ins(f"v_cvt_f32_bf16 {d.asm}, {s0.asm}", f"{d.mir} = V_CVT_F32_BF16_e32 {s0.mir}, {_MX}")


TRANS_OPS = ["v_exp_f32", "v_log_f32", "v_rcp_f32", "v_rsq_f32", "v_sqrt_f32", "v_sin_f32", "v_cos_f32",
             "v_rcp_iflag_f32", "v_exp_f16", "v_rcp_f64", "v_sqrt_f64"]


def vop1(op: str, d: Reg, s0: Reg) -> Ins:
    return Ins(f"{op} {d.asm}, {s0.asm}", f"{d.mir} = {op.upper()}_e32 {s0.mir}, {_MX}")


def v_accvgpr_read(d: Reg, src: Reg) -> Ins:
    return Ins(f"v_accvgpr_read_b32 {d.asm}, {src.asm}", f"{d.mir} = V_ACCVGPR_READ_B32_e64 {src.mir}, {_EX}")


def v_accvgpr_write(d: Reg, src: Reg) -> Ins:
    return Ins(f"v_accvgpr_write_b32 {d.asm}, {src.asm}", f"{d.mir} = V_ACCVGPR_WRITE_B32_e64 {src.mir}, {_EX}")


def v_readfirstlane(d: Reg, src: Reg) -> Ins:
    return Ins(f"v_readfirstlane_b32 {d.asm}, {src.asm}", f"{d.mir} = V_READFIRSTLANE_B32 {src.mir}, {_EX}")


def v_readlane(d: Reg, src: Reg, lane: Operand) -> Ins:
    return Ins(f"v_readlane_b32 {d.asm}, {src.asm}, {_A(lane)}", f"{d.mir} = V_READLANE_B32 {src.mir}, {_M(lane)}")


def v_writelane(d: Reg, val: Operand, lane: Operand) -> Ins:
    return Ins(f"v_writelane_b32 {d.asm}, {_A(val)}, {_A(lane)}",
               f"{d.mir} = V_WRITELANE_B32 {_M(val)}, {_M(lane)}, {d.mir}")


def v_cmpx_e32(s0: Reg, s1: Reg) -> Ins:
    """v_cmpx_eq_u32 vcc, ...: writes EXEC and VCC."""
    return Ins(f"v_cmpx_eq_u32 vcc, {s0.asm}, {s1.asm}",
               f"V_CMPX_EQ_U32_e32 {s0.mir}, {s1.mir}, implicit-def $exec, implicit-def $vcc, {_EX}")


def v_cmpx_e64(sd: Reg, s0: Reg, s1: Reg) -> Ins:
    return Ins(f"v_cmpx_eq_u32_e64 {sd.asm}, {s0.asm}, {s1.asm}",
               f"{sd.mir} = V_CMPX_EQ_U32_e64 {s0.mir}, {s1.mir}, implicit-def $exec, {_EX}")


def v_cmp_e32(s0: Reg, s1: Reg) -> Ins:
    return Ins(f"v_cmp_eq_u32 vcc, {s0.asm}, {s1.asm}",
               f"V_CMP_EQ_U32_e32 {s0.mir}, {s1.mir}, implicit-def $vcc, {_EX}")


def v_cmp_e64(sd: Reg | Special, s0: Reg, s1: Reg) -> Ins:
    return Ins(f"v_cmp_eq_u32_e64 {sd.asm}, {s0.asm}, {s1.asm}",
               f"{sd.mir} = V_CMP_EQ_U32_e64 {s0.mir}, {s1.mir}, {_EX}")


def v_cndmask_e32(d: Reg, s0: Reg, s1: Reg) -> Ins:
    return Ins(f"v_cndmask_b32 {d.asm}, {s0.asm}, {s1.asm}, vcc",
               f"{d.mir} = V_CNDMASK_B32_e32 {s0.mir}, {s1.mir}, implicit $vcc, {_EX}")


def v_cndmask_e64(d: Reg, s0: Reg, s1: Reg, mask: Reg) -> Ins:
    return Ins(f"v_cndmask_b32_e64 {d.asm}, {s0.asm}, {s1.asm}, {mask.asm}",
               f"{d.mir} = V_CNDMASK_B32_e64 0, {s0.mir}, 0, {s1.mir}, {mask.mir}, {_EX}")


def v_add_co_u32(d: Reg, s0: Reg, s1: Reg) -> Ins:
    return Ins(f"v_add_co_u32 {d.asm}, vcc, {s0.asm}, {s1.asm}",
               f"{d.mir} = V_ADD_CO_U32_e32 {s0.mir}, {s1.mir}, implicit-def $vcc, {_EX}")


def v_addc_co_u32(d: Reg, s0: Reg, s1: Reg) -> Ins:
    return Ins(f"v_addc_co_u32 {d.asm}, vcc, {s0.asm}, {s1.asm}, vcc",
               f"{d.mir} = V_ADDC_U32_e32 {s0.mir}, {s1.mir}, implicit-def $vcc, implicit $vcc, {_EX}")


def v_div_scale_f32(d: Reg, s0: Reg, s1: Reg) -> Ins:
    return Ins(f"v_div_scale_f32 {d.asm}, vcc, {s0.asm}, {s1.asm}, {s0.asm}",
               f"{d.mir}, $vcc = V_DIV_SCALE_F32_e64 0, {s0.mir}, 0, {s1.mir}, 0, {s0.mir}, 0, 0, {_MX}")


def v_div_fmas_f32(d: Reg, s0: Reg, s1: Reg, s2: Reg) -> Ins:
    return Ins(f"v_div_fmas_f32 {d.asm}, {s0.asm}, {s1.asm}, {s2.asm}",
               f"{d.mir} = V_DIV_FMAS_F32_e64 0, {s0.mir}, 0, {s1.mir}, 0, {s2.mir}, 0, 0, "
               f"implicit $mode, implicit $vcc, {_EX}")


def v_div_fmas_f64(d: Reg, s0: Reg, s1: Reg, s2: Reg) -> Ins:
    return Ins(f"v_div_fmas_f64 {d.asm}, {s0.asm}, {s1.asm}, {s2.asm}",
               f"{d.mir} = V_DIV_FMAS_F64_e64 0, {s0.mir}, 0, {s1.mir}, 0, {s2.mir}, 0, 0, "
               f"implicit $mode, implicit $vcc, {_EX}")


def v_mov_dpp(d: Reg, s0: Reg) -> Ins:
    return Ins(f"v_mov_b32_dpp {d.asm}, {s0.asm} quad_perm:[1,0,3,2] row_mask:0xf bank_mask:0xf",
               f"{d.mir} = V_MOV_B32_dpp {d.mir}, {s0.mir}, 177, 15, 15, 0, {_EX}")


def v_add_f32_dpp(d: Reg, s0: Reg, s1: Reg) -> Ins:
    return Ins(f"v_add_f32_dpp {d.asm}, {s0.asm}, {s1.asm} row_shl:1 row_mask:0xf bank_mask:0xf",
               f"{d.mir} = V_ADD_F32_dpp {d.mir}, 0, {s0.mir}, 0, {s1.mir}, 257, 15, 15, 0, {_MX}")


def v_permlane_swap(width: int, d: Reg, s0: Reg, e64: bool = False) -> Ins:
    op = f"v_permlane{width}_swap_b32"
    if e64:
        return Ins(f"{op}_e64 {d.asm}, {s0.asm}",
                   f"{d.mir}, {s0.mir} = {op.upper()}_e64 {d.mir}, {s0.mir}, 0, 0, {_EX}")
    return Ins(f"{op} {d.asm}, {s0.asm}", f"{d.mir}, {s0.mir} = {op.upper()}_e32 {d.mir}, {s0.mir}, {_EX}")


def v_dot2_f32_f16(d: Reg, s0: Reg, s1: Reg, s2: Reg, op: str = "v_dot2_f32_f16") -> Ins:
    return Ins(f"{op} {d.asm}, {s0.asm}, {s1.asm}, {s2.asm}",
               f"{d.mir} = {op.upper()} 8, {s0.mir}, 8, {s1.mir}, 8, {s2.mir}, 0, 0, 0, 0, 0, {_MX}")


def v_dot4_i32_i8(d: Reg, s0: Reg, s1: Reg, s2: Reg) -> Ins:
    return Ins(f"v_dot4_i32_i8 {d.asm}, {s0.asm}, {s1.asm}, {s2.asm}",
               f"{d.mir} = V_DOT4_I32_I8 0, {s0.mir}, 0, {s1.mir}, 0, {s2.mir}, 0, 0, 0, {_EX}")


def v_dot2c_f32_f16(d: Reg, s0: Reg, s1: Reg) -> Ins:
    return Ins(f"v_dot2c_f32_f16 {d.asm}, {s0.asm}, {s1.asm}",
               f"{d.mir} = V_DOT2C_F32_F16_e32 {s0.mir}, {s1.mir}, {d.mir}, {_MX}")


# ---- SALU / control

def s_mov_b32(d: Reg | Special, src: Operand) -> Ins:
    return Ins(f"s_mov_b32 {_A(d)}, {_A(src)}", f"{_M(d)} = S_MOV_B32 {_M(src)}")


def s_mov_b64(d: Reg | Special, src: Reg) -> Ins:
    return Ins(f"s_mov_b64 {_A(d)}, {src.asm}", f"{_M(d)} = S_MOV_B64 {src.mir}")


def s_movk_m0(imm: int) -> Ins:
    return Ins(f"s_movk_i32 m0, 0x{imm:x}", f"$m0 = S_MOVK_I32 {imm}")


HWREG = {"HW_REG_MODE": 1, "HW_REG_STATUS": 2, "HW_REG_TRAPSTS": 3}


def _hwreg(name: str, off: int, size: int) -> tuple[str, int]:
    return f"hwreg({name}, {off}, {size})", HWREG[name] | (off << 6) | ((size - 1) << 11)


def s_setreg(name: str, src: Reg, off: int = 0, size: int = 4) -> Ins:
    txt, imm = _hwreg(name, off, size)
    return Ins(f"s_setreg_b32 {txt}, {src.asm}", f"S_SETREG_B32 {src.mir}, {imm}, implicit-def $mode, implicit $mode")


def s_setreg_imm32(name: str, value: int, off: int = 0, size: int = 4) -> Ins:
    txt, imm = _hwreg(name, off, size)
    return Ins(f"s_setreg_imm32_b32 {txt}, 0x{value:x}",
               f"S_SETREG_IMM32_B32 {value}, {imm}, implicit-def $mode, implicit $mode")


def s_getreg(d: Reg, name: str, off: int = 0, size: int = 4) -> Ins:
    txt, imm = _hwreg(name, off, size)
    return Ins(f"s_getreg_b32 {d.asm}, {txt}", f"{d.mir} = S_GETREG_B32 {imm}, implicit $mode")


def s_cmp_eq(s0: Reg, s1: Reg) -> Ins:
    return Ins(f"s_cmp_eq_u32 {s0.asm}, {s1.asm}", f"S_CMP_EQ_U32 {s0.mir}, {s1.mir}, implicit-def $scc")


def s_cbranch_scc0(target: int) -> Ins:
    return Ins(f"s_cbranch_scc0 .LBB0_{target}", f"S_CBRANCH_SCC0 %bb.{target}, implicit $scc")


def s_branch(target: int) -> Ins:
    return Ins(f"s_branch .LBB0_{target}", f"S_BRANCH %bb.{target}")


def s_endpgm() -> Ins:
    return Ins("s_endpgm", "S_ENDPGM 0")


def s_waitcnt_vm0() -> Ins:
    return Ins("s_waitcnt vmcnt(0)", "S_WAITCNT 3952")


def s_movrels(d: Reg, src: Reg) -> Ins:
    return Ins(f"s_movrels_b32 {d.asm}, {src.asm}", f"{d.mir} = S_MOVRELS_B32 {src.mir}, implicit $m0")


def s_movreld(d: Reg, src: Reg) -> Ins:
    return Ins(f"s_movreld_b32 {d.asm}, {src.asm}", f"S_MOVRELD_B32 {d.mir}, {src.mir}, implicit $m0")


def s_sendmsg_interrupt() -> Ins:
    return Ins("s_sendmsg sendmsg(MSG_INTERRUPT)", "S_SENDMSG 1, implicit $exec, implicit $m0")


def s_rfe(src: Reg) -> Ins:
    return Ins(f"s_rfe_b64 {src.asm}", f"S_RFE_B64 {src.mir}")


# ---- memory

RSRC = s(4, 4)


def ds_write_b32(addr: Reg, data: Reg) -> Ins:
    return Ins(f"ds_write_b32 {addr.asm}, {data.asm}", f"DS_WRITE_B32_gfx9 {addr.mir}, {data.mir}, 0, 0, {_EX}")


def ds_write_b128(addr: Reg, data: Reg) -> Ins:
    return Ins(f"ds_write_b128 {addr.asm}, {data.asm}", f"DS_WRITE_B128_gfx9 {addr.mir}, {data.mir}, 0, 0, {_EX}")


def ds_read_b32(d: Reg, addr: Reg) -> Ins:
    return Ins(f"ds_read_b32 {d.asm}, {addr.asm}", f"{d.mir} = DS_READ_B32_gfx9 {addr.mir}, 0, 0, {_EX}")


def ds_write_addtid(data: Reg) -> Ins:
    return Ins(f"ds_write_addtid_b32 {data.asm}", f"DS_WRITE_ADDTID_B32 {data.mir}, 0, 0, implicit $m0, {_EX}")


def ds_read_addtid(d: Reg) -> Ins:
    return Ins(f"ds_read_addtid_b32 {d.asm}", f"{d.mir} = DS_READ_ADDTID_B32 0, 0, implicit $m0, {_EX}")


def buffer_load_lds(width: str, vaddr: Reg, rsrc: Reg = RSRC) -> Ins:
    """buffer_load_dword{,x4} vaddr, rsrc, 0 offen lds (LDS DMA; reads M0)."""
    op = f"buffer_load_{width}"
    return Ins(f"{op} {vaddr.asm}, {rsrc.asm}, 0 offen lds",
               f"{op.upper()}_LDS_OFFEN {vaddr.mir}, {rsrc.mir}, 0, 0, 0, 0, {_EX}, implicit $m0")


def global_load_lds_dword(addr: Reg, width: str = "dword") -> Ins:
    op = f"global_load_lds_{width}"
    return Ins(f"{op} {addr.asm}, off", f"{op.upper()} {addr.mir}, 0, 0, implicit $m0, {_EX}")


def buffer_load_dword_offset(d: Reg, rsrc: Reg, soff: Operand) -> Ins:
    return Ins(f"buffer_load_dword {d.asm}, off, {rsrc.asm}, {_A(soff)}",
               f"{d.mir} = BUFFER_LOAD_DWORD_OFFSET {rsrc.mir}, {_M(soff)}, 0, 0, 0, {_EX}")


def buffer_load_dword_offen(d: Reg, vaddr: Reg, rsrc: Reg = RSRC) -> Ins:
    return Ins(f"buffer_load_dword {d.asm}, {vaddr.asm}, {rsrc.asm}, 0 offen",
               f"{d.mir} = BUFFER_LOAD_DWORD_OFFEN {vaddr.mir}, {rsrc.mir}, 0, 0, 0, 0, {_EX}")


_DW = {1: "dword", 2: "dwordx2", 3: "dwordx3", 4: "dwordx4"}


def buffer_store(data: Reg, soff: Operand = 0, rsrc: Reg = RSRC) -> Ins:
    op = f"buffer_store_{_DW[data.n]}"
    return Ins(f"{op} {data.asm}, off, {rsrc.asm}, {_A(soff)}",
               f"{op.upper()}_OFFSET {data.mir}, {rsrc.mir}, {_M(soff)}, 0, 0, 0, {_EX}")


def buffer_store_offen(data: Reg, vaddr: Reg, rsrc: Reg = RSRC) -> Ins:
    op = f"buffer_store_{_DW[data.n]}"
    return Ins(f"{op} {data.asm}, {vaddr.asm}, {rsrc.asm}, 0 offen",
               f"{op.upper()}_OFFEN {data.mir}, {vaddr.mir}, {rsrc.mir}, 0, 0, 0, 0, {_EX}")


def buffer_atomic_cmpswap_x2(data: Reg, rsrc: Reg = RSRC) -> Ins:
    return Ins(f"buffer_atomic_cmpswap_x2 {data.asm}, off, {rsrc.asm}, 0",
               f"BUFFER_ATOMIC_CMPSWAP_X2_OFFSET {data.mir}, {rsrc.mir}, 0, 0, 0, {_EX}")


def global_store(addr: Reg, data: Reg) -> Ins:
    op = f"global_store_{_DW[data.n]}"
    return Ins(f"{op} {addr.asm}, {data.asm}, off", f"{op.upper()} {addr.mir}, {data.mir}, 0, 0, {_EX}")


def flat_store_dwordx4(addr: Reg, data: Reg) -> Ins:
    return Ins(f"flat_store_dwordx4 {addr.asm}, {data.asm}",
               f"FLAT_STORE_DWORDX4 {addr.mir}, {data.mir}, 0, 0, {_EX}, implicit $flat_scr")


def global_load_dword(d: Reg, addr: Reg) -> Ins:
    return Ins(f"global_load_dword {d.asm}, {addr.asm}, off", f"{d.mir} = GLOBAL_LOAD_DWORD {addr.mir}, 0, 0, {_EX}")


def global_load_dword_saddr(d: Reg, voff: Reg, saddr: Reg) -> Ins:
    return Ins(f"global_load_dword {d.asm}, {voff.asm}, {saddr.asm}",
               f"{d.mir} = GLOBAL_LOAD_DWORD_SADDR {saddr.mir}, {voff.mir}, 0, 0, {_EX}")


# --------------------------------------------------------------------------------------------
# Probe assembly (asm tuple + MIR function)
# --------------------------------------------------------------------------------------------

def _successors(i: int, block: list[str], nblocks: int) -> list[int]:
    nxt = [i + 1] if i + 1 < nblocks else []
    last = block[-1] if block else ""
    if m := re.match(r"S_BRANCH %bb\.(\d+)", last):
        return [int(m.group(1))]
    if m := re.match(r"S_CBRANCH_\w+ %bb\.(\d+)", last):
        t = int(m.group(1))
        return [t] + [n for n in nxt if n != t]
    if last.startswith("S_ENDPGM"):
        return []
    return nxt


def mir_function(name: str, items: Sequence[Item]) -> str:
    """A complete MIR file with one function made of `items` (labels start blocks)."""
    blocks: list[list[str]] = [[]]
    for it in items:
        if isinstance(it, Label):
            if it.n != len(blocks):
                raise ValueError(f"{name}: label {it.n} must be block number {len(blocks)}")
            blocks.append([])
        else:
            blocks[-1].append(it.mir)
    out = ["---", f"name:            {name}", "tracksRegLiveness: false", "body:             |"]
    for i, blk in enumerate(blocks):
        out.append(f"  bb.{i}:")
        succ = _successors(i, blk, len(blocks))
        if succ:
            out.append("    successors: " + ", ".join(f"%bb.{n}" for n in succ))
        out.extend("    " + line for line in blk)
        out.append("")
    out.append("...")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------------
# The notes' table (§4.2) as numbers, for note_ws
# --------------------------------------------------------------------------------------------

def xdl_valu(np_: int) -> int:           # rows 1-3
    return np_ + 3 + (np_ != 2)


def xdl_overlap_srcc(np_: int) -> int:   # row 5
    return np_ + 2


def xdl_sgemm_srcc(np_: int) -> int:     # row 6
    return np_ + 1 + (np_ != 2)


def war_need(np_: int) -> int:           # row 8
    return {2: 1, 4: 3, 8: 7, 16: 15}[np_]


BOUND = 19  # LLVM's MaxWaitStates in checkMAIHazards90A / checkMAIVALUHazards (notes §4.3)

DIFF_VOP3P = ("LLVM reads the VOP3P src0 op_sel_hi bit (set by default) as the VOP3 dst op_sel bit, so "
              "every v_pk_* / v_dot2* is a dst-forwarding producer (row 15): 1 wait state")
DIFF_ONE_PASS = ("LLVM inserts nops in one forward pass: at the loop header it does not yet see the nops it "
                 "later adds further down the loop body (over-count, safe)")


# --------------------------------------------------------------------------------------------
# Probe generation
# --------------------------------------------------------------------------------------------

# Register map used by the probes (fillers use registers nothing else touches):
#   v0..v31    producer D / SrcC          v32..v47  producer SrcA/SrcB
#   v48..v63   consumer SrcA/SrcB         v64..v95  consumer D
#   v100..v127 VALU results and scratch   v160..v199 filler dst, v200..v255 filler src
#   s[4:7] buffer resource, s8 soffset, s20..s31 scratch, s80..s89 filler dst, s90..s99 filler src
PA, PB = 32, 40
CA, CB, CD = 48, 56, 64


class _Gen:
    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.probes: list[Probe] = []
        self.names: set[str] = set()

    # ---- helpers
    def fill(self, n: int, kind: str = "v") -> list[Ins]:
        out = []
        for i in range(n):
            k = {"mix": "vs"[i % 2], "vw": "vw"[i % 2]}.get(kind, kind)
            if k == "v":
                out.append(v_mov(v(self.rng.randint(160, 199)), v(self.rng.randint(200, 255))))
            elif k == "s":
                out.append(s_mov_b32(s(self.rng.randint(80, 89)), s(self.rng.randint(90, 99))))
            elif k == "w":
                out.append(s_waitcnt_vm0())
            else:
                raise ValueError(kind)
        return out

    def dists(self, need: int, cap: int = 25) -> list[int]:
        base = {0, 1, need // 2, need - 2, need - 1, need, need + 1, self.rng.randint(0, min(cap, need + 4))}
        return sorted(d for d in base if 0 <= d <= cap)

    def add(self, name: str, rule: str, items: Sequence[Item], note_ws: int | None = None, *,
            consumer: int = -1, known_diff: str = "", bound_bug: bool = False, clean: bool = True) -> None:
        if rule not in RULES:
            raise KeyError(rule)
        asm = tuple(it.asm for it in items)
        if name in self.names:
            raise ValueError(f"two probes named {name}")
        self.names.add(name)
        self.probes.append(Probe(name=name, rule=rule, asm=asm, mir=mir_function(name, items),
                                 llvm_bound_bug=bound_bug, note_ws=note_ws, consumer=consumer,
                                 known_diff=known_diff, clean=clean))

    def pair(self, name: str, rule: str, producer: Ins, dist: int, consumer: Ins, need: int | None, *,
             kind: str = "v", known_diff: str = "", bound_bug: bool = False) -> None:
        """producer, `dist` independent fillers of `kind`, consumer; note_ws = max(0, need - dist).

        A 16-pass XDL need of 20 at distance 19 is flagged as LLVM's bound bug (notes §4.3)."""
        items = [producer, *self.fill(dist, kind), consumer]
        note = None if need is None else max(0, need - dist)
        self.add(name, rule, items, note, known_diff=known_diff,
                 bound_bug=bound_bug or (need is not None and need > BOUND and dist == BOUND))


def _mfma_regs(key: str, d_lo: int = 0, kind: str = "v") -> tuple[Reg, Reg, Reg]:
    m = MFMA[key]
    return Reg(kind, d_lo, m.cd), v(PA, m.a), v(PB, m.b)


def _producer(key: str, d_lo: int = 0, kind: str = "v") -> tuple[Ins, Reg]:
    """An MFMA `key` accumulating in place into kind[d_lo:...]; returns (instruction, D)."""
    d, pa_, pb_ = _mfma_regs(key, d_lo, kind)
    m = MFMA[key]
    if m.kind == "smfmac":
        return mfma(key, d, v(PA, m.a), v(PB, m.b), v(120)), d
    scale = (v(126), v(127)) if m.kind == "scale" else None
    return mfma(key, d, pa_, pb_, d, scale), d


def _consumer_mfma(key: str, *, srca: Reg | None = None, srcb: Reg | None = None, c: Reg | None = None,
                   d: Reg | None = None) -> Ins:
    m = MFMA[key]
    srca = srca or v(CA, m.a)
    srcb = srcb or v(CB, m.b)
    d = d or v(CD, m.cd)
    if m.kind == "smfmac":
        return mfma(key, d, srca, srcb, c or v(121))
    return mfma(key, d, srca, srcb, c or d, (v(124), v(125)) if m.kind == "scale" else None)


def _gen_xdl(g: _Gen) -> None:
    xdl_keys = [k for k, m in MFMA.items() if m.kind in ("xdl", "scale")]
    # ---- row 1: XDL writes -> VALU reads (distance sweeps on one shape per pass count)
    for np_, key in XDL_BY_PASSES.items():
        prod, D = _producer(key)
        need = xdl_valu(np_)
        for dist in g.dists(need):
            reg = D[(dist * 5) % D.n]
            g.pair(f"xdl{np_}_valu_raw_d{dist}", "xdl_write_valu_read", prod, dist,
                   v_add_f32(v(100), reg, v(121)), need)
        # overlap: first / last / middle register, disjoint neighbours
        for tag, reg, nd in (("lo", D[0], need), ("hi", D[-1], need), ("mid", D[D.n // 2], need),
                             ("below", v(D.lo + D.n), 0), ("far", v(121), 0)):
            g.pair(f"xdl{np_}_valu_raw_{tag}", "xdl_write_valu_read", prod, 0,
                   v_add_f32(v(100), v(122), reg), nd)
        # 64-bit read of the last pair, 64-bit read just past D
        g.pair(f"xdl{np_}_valu_raw_f64_in", "xdl_write_valu_read", prod, 1,
               v_add_f64(v(100, 2), D.part(D.n - 2, 2), v(122, 2)), need)
        g.pair(f"xdl{np_}_valu_raw_f64_out", "xdl_write_valu_read", prod, 1,
               v_add_f64(v(100, 2), v(D.n, 2), v(122, 2)), 0)
        # WAW sweep
        for dist in g.dists(need):
            g.pair(f"xdl{np_}_valu_waw_d{dist}", "xdl_write_valu_write", prod, dist,
                   v_mov(D[(dist * 3 + 1) % D.n], v(121)), need)
        g.pair(f"xdl{np_}_valu_waw_f64", "xdl_write_valu_write", prod, 2,
               v_add_f64(D.part(2, 2), v(120, 2), v(122, 2)), need)
        g.pair(f"xdl{np_}_valu_waw_disjoint", "xdl_write_valu_write", prod, 0, v_mov(v(D.n), v(121)), 0)

    # every other XDL shape: RAW at distance 0 and need-1, WAW at distance 0
    for key in xdl_keys:
        m = MFMA[key]
        if key in XDL_BY_PASSES.values():
            continue
        prod, D = _producer(key)
        need = xdl_valu(m.passes)
        for dist in (0, need - 1, need):
            g.pair(f"xdl{m.passes}_{key}_valu_raw_d{dist}", "xdl_write_valu_read", prod, dist,
                   v_add_f32(v(100), D[-1], v(121)), need)
        g.pair(f"xdl{m.passes}_{key}_valu_waw_d0", "xdl_write_valu_write", prod, 0, v_mov(D[0], v(121)), need)

    # other VALU consumers of an 8-pass and a 4-pass result
    for np_ in (4, 8):
        key = XDL_BY_PASSES[np_]
        prod, D = _producer(key)
        need = xdl_valu(np_)
        consumers = {
            "cvt_pk_bf16": v_cvt_pk_bf16_f32(v(100), D[0], D[1]),
            "permlane32_src": v_permlane_swap(32, v(120), D[2]),
            "permlane16_vdst": v_permlane_swap(16, D[3], v(120)),
            "pk_add_f32": v_pk_f32("v_pk_add_f32", v(100, 2), D.part(2, 2), v(122, 2)),
            "dpp_src": v_mov_dpp(v(100), D[1]),
            "exp": vop1("v_exp_f32", v(100), D[0]),
            "readlane": v_readlane(s(20), D[1], s(21)),
            "readfirstlane": v_readfirstlane(s(20), D[0]),
            "cndmask_e64": v_cndmask_e64(v(100), v(121), D[3], s(20, 2)),
            "sgpr_src0": v_add_f32(v(100), s(20), D[2]),
        }
        for cname, ins in consumers.items():
            for dist in (0, need - 2):
                g.pair(f"xdl{np_}_valu_raw_{cname}_d{dist}", "xdl_write_valu_read", prod, dist, ins, need)
    # AGPR results: v_accvgpr_read (RAW) and v_accvgpr_write (WAW)
    for np_ in (4, 8, 16):
        key = XDL_BY_PASSES[np_]
        prod, D = _producer(key, 0, "a")
        need = xdl_valu(np_)
        for dist in (0, need // 2, need - 1, need):
            g.pair(f"xdl{np_}_agpr_accvgpr_read_d{dist}", "xdl_write_valu_read", prod, dist,
                   v_accvgpr_read(v(100), D[dist % D.n]), need)
        g.pair(f"xdl{np_}_agpr_accvgpr_write_d1", "xdl_write_valu_write", prod, 1,
               v_accvgpr_write(D[1], v(121)), need)
        g.pair(f"xdl{np_}_agpr_accvgpr_read_disjoint", "xdl_write_valu_read", prod, 0,
               v_accvgpr_read(v(100), a(D.n)), 0)

    # ---- row 2: XDL writes -> memory reads it (data or address); loads overwriting it
    for np_, key in XDL_BY_PASSES.items():
        prod, D = _producer(key)
        need = xdl_valu(np_)
        for dist in g.dists(need):
            g.pair(f"xdl{np_}_ds_write_data_d{dist}", "xdl_write_mem_read", prod, dist,
                   ds_write_b32(v(121), D[(dist * 7) % D.n]), need)
        mem = {
            "ds_write_addr": ds_write_b32(D[1], v(121)),
            "ds_write_b128_data": ds_write_b128(v(121), D.part(0, 4)),
            "ds_write_b128_straddle": ds_write_b128(v(121), v(D.n - 2, 4)),
            "buffer_store_data": buffer_store_offen(D[2], v(121)),
            "buffer_store_vaddr": buffer_store_offen(v(121), D[2]),
            "buffer_store_x4_data": buffer_store(D.part(0, 4), s(8)),
            "buffer_load_vaddr": buffer_load_dword_offen(v(100), D[3]),
            "global_store_x4_data": global_store(v(120, 2), D.part(0, 4)),
            "global_store_addr": global_store(D.part(2, 2), v(121)),
            "global_load_addr": global_load_dword(v(100), D.part(0, 2)),
            "global_load_saddr_voff": global_load_dword_saddr(v(100), D[1], s(20, 2)),
            "lds_dma_vaddr": buffer_load_lds("dword", D[0]),
        }
        for cname, ins in mem.items():
            for dist in (0, need - 1):
                g.pair(f"xdl{np_}_{cname}_d{dist}", "xdl_write_mem_read", prod, dist, ins, need)
        g.pair(f"xdl{np_}_ds_write_data_disjoint", "xdl_write_mem_read", prod, 0, ds_write_b32(v(121), v(D.n)), 0)
        loads = {
            "ds_read": ds_read_b32(D[1], v(121)),
            "global_load": global_load_dword(D[2], v(120, 2)),
            "buffer_load": buffer_load_dword_offset(D[0], RSRC, s(8)),
        }
        for cname, ins in loads.items():
            for dist in (0, need - 1):
                g.pair(f"xdl{np_}_{cname}_waw_d{dist}", "xdl_write_mem_write", prod, dist, ins, None,
                       bound_bug=need > BOUND and dist == BOUND)

    # ---- row 3: XDL writes -> MFMA SrcA/SrcB
    srcab_cons = {2: "4x4x4_16b_f16", 4: "16x16x32_bf16", 8: "32x32x16_bf16", 16: "32x32x64_f8f6f4_fp8"}
    for np_, key in XDL_BY_PASSES.items():
        prod, D = _producer(key)
        need = xdl_valu(np_)
        ck = srcab_cons[np_]
        cm = MFMA[ck]
        for dist in g.dists(need):
            off = (dist * 2) % (D.n - cm.a + 1) // 2 * 2
            g.pair(f"xdl{np_}_srca_d{dist}", "xdl_write_srcab", prod, dist,
                   _consumer_mfma(ck, srca=D.part(off, cm.a)), need)
        for dist in (0, need - 1):
            g.pair(f"xdl{np_}_srcb_d{dist}", "xdl_write_srcab", prod, dist,
                   _consumer_mfma(ck, srcb=D.part(D.n - cm.b, cm.b)), need)
        g.pair(f"xdl{np_}_srca_disjoint", "xdl_write_srcab", prod, 0, _consumer_mfma(ck), 0)
        # the same result as SrcA of an f32 MFMA, of a DGEMM and of an SMFMAC
        g.pair(f"xdl{np_}_srca_sgemm_d0", "xdl_write_srcab", prod, 0,
               _consumer_mfma("16x16x4_f32", srca=D[1]), need)
        g.pair(f"xdl{np_}_srca_dgemm_d1", "xdl_write_srcab", prod, 1,
               _consumer_mfma("16x16x4_f64", srca=D.part(2, 2)), need)
        g.pair(f"xdl{np_}_srca_smfmac_d0", "xdl_write_srcab", prod, 0,
               _consumer_mfma("smfmac_16x16x64_bf16", srca=D.part(0, 4)), need)
    # SMFMAC: sparsity index and accumulator
    for np_ in (4, 8, 16):
        prod, D = _producer(XDL_BY_PASSES[np_])
        need = xdl_valu(np_)
        for dist in (0, 1, need - 3, need - 1):
            g.pair(f"xdl{np_}_smfmac_index_d{dist}", "xdl_write_smfmac_index", prod, dist,
                   _consumer_mfma("smfmac_16x16x64_bf16", c=D[3]), need)
    for np_, key, ck in ((4, "16x16x32_bf16", "smfmac_16x16x64_bf16"),
                         (8, "32x32x16_bf16", "smfmac_32x32x32_bf16")):
        prod, D = _producer(key)
        for dist in (0, 1, 4):
            g.pair(f"xdl{np_}_smfmac_acc_d{dist}", "xdl_write_smfmac_acc", prod, dist,
                   _consumer_mfma(ck, d=D), 0)
    prod, D = _producer("smfmac_16x16x64_bf16")
    for dist in (0, 3):
        g.pair(f"smfmac4_smfmac_acc_chain_d{dist}", "xdl_write_smfmac_acc", prod, dist,
               mfma("smfmac_16x16x64_bf16", D, v(CA, 4), v(CB, 8), v(121)), 0)

    # ---- row 4: same SrcC tuple (accumulation chains)
    for np_, key in XDL_BY_PASSES.items():
        prod, D = _producer(key)
        need = 2 if np_ == 2 else 0
        for dist in sorted({0, 1, need}):
            g.pair(f"xdl{np_}_same_srcc_chain_d{dist}", "xdl_write_same_srcc", prod, dist, prod, need)
        g.pair(f"xdl{np_}_same_srcc_newdst", "xdl_write_same_srcc", prod, 0,
               _consumer_mfma(key, c=D, d=v(CD, D.n)), need)
        aprod, AD = _producer(key, 0, "a")
        g.pair(f"xdl{np_}_same_srcc_agpr", "xdl_write_same_srcc", aprod, 0, aprod, need)
    for pk, ck in (("16x16x32_bf16", "16x16x32_f16"), ("32x32x16_bf16", "32x32x16_f16"),
                   ("32x32x16_bf16", "32x32x32_i8"), ("16x16x128_f8f6f4_fp8", "16x16x32_bf16"),
                   ("4x4x4_16b_f16", "4x4x4_16b_bf16"), ("32x32x64_f8f6f4_fp8", "32x32x16_bf16"),
                   ("scale_16x16x128_fp8", "scale_16x16x128_fp8")):
        prod, D = _producer(pk)
        need = 2 if MFMA[pk].passes == 2 else 0
        g.pair(f"xdl_same_srcc_{pk}_to_{ck}", "xdl_write_same_srcc", prod, 0,
               _consumer_mfma(ck, c=D, d=D), need)

    # ---- row 5: overlapping (not identical) SrcC, XDL consumer
    for np_, key in XDL_BY_PASSES.items():
        prod, D = _producer(key)
        need = xdl_overlap_srcc(np_)
        ck = key
        shift = 2 if D.n == 4 else 8
        for dist in g.dists(need):
            g.pair(f"xdl{np_}_overlap_srcc_d{dist}", "xdl_write_overlap_srcc", prod, dist,
                   _consumer_mfma(ck, c=v(shift, D.n)), need)
        g.pair(f"xdl{np_}_overlap_srcc_disjoint", "xdl_write_overlap_srcc", prod, 0,
               _consumer_mfma(ck, c=v(D.n, D.n)), 0)
        # a VALU write to another register of that SrcC in between does not hide the MFMA: LLVM's
        # search for the overlapping SrcC writer looks at MFMAs only (checkMAIHazards90A)
        g.add(f"xdl{np_}_overlap_srcc_valu_between", "xdl_write_overlap_srcc",
              [prod, v_mov(v(D.n), v(100)), _consumer_mfma(ck, c=v(shift, D.n))], need - 1)
    # containment both ways, different shapes
    for pk, ck, c in (("16x16x32_bf16", "32x32x16_bf16", v(0, 16)), ("32x32x16_bf16", "16x16x32_bf16", v(12, 4)),
                      ("4x4x4_16b_f16", "16x16x32_f16", v(2, 4)), ("32x32x64_f8f6f4_fp8", "16x16x32_bf16", v(4, 4)),
                      ("32x32x4_2b_f16", "32x32x16_bf16", v(16, 16)), ("16x16x64_i8", "16x16x64_i8", v(2, 4)),
                      ("16x16x128_f8f6f4_fp8", "16x16x32_bf16", v(2, 4)),
                      ("16x16x128_f8f6f4_fp4", "16x16x32_bf16", v(2, 4))):
        prod, D = _producer(pk)
        need = xdl_overlap_srcc(MFMA[pk].passes)
        for dist in (0, need - 1):
            g.pair(f"xdl_overlap_srcc_{pk}_to_{ck}_d{dist}", "xdl_write_overlap_srcc", prod, dist,
                   _consumer_mfma(ck, c=c), need)

    # ---- row 6: XDL writes -> SGEMM / DGEMM SrcC
    sg_cons = {2: ("4x4x1_16b_f32", v(2, 4)), 4: ("16x16x4_f32", v(2, 4)), 8: ("32x32x2_f32", v(8, 16)),
               16: ("32x32x2_f32", v(8, 16))}
    for np_, key in XDL_BY_PASSES.items():
        prod, D = _producer(key)
        need = xdl_sgemm_srcc(np_)
        ck, c = sg_cons[np_]
        for dist in g.dists(need):
            g.pair(f"xdl{np_}_sgemm_srcc_d{dist}", "xdl_write_sgemm_dgemm_srcc", prod, dist,
                   _consumer_mfma(ck, c=c), need)
        g.pair(f"xdl{np_}_dgemm_srcc_d0", "xdl_write_sgemm_dgemm_srcc", prod, 0,
               _consumer_mfma("16x16x4_f64", c=v(0, 8) if D.n == 4 else v(8, 8)), need)
        g.pair(f"xdl{np_}_dgemm_srcc_d{need - 1}", "xdl_write_sgemm_dgemm_srcc", prod, need - 1,
               _consumer_mfma("16x16x4_f64", c=v(0, 8) if D.n == 4 else v(8, 8)), need)
    for np_, key, ck in ((4, "16x16x32_bf16", "16x16x4_f32"), (8, "32x32x16_bf16", "32x32x2_f32"),
                         (2, "4x4x4_16b_f16", "4x4x1_16b_f32")):
        prod, D = _producer(key)
        g.pair(f"xdl{np_}_sgemm_same_srcc", "xdl_write_sgemm_dgemm_srcc", prod, 0,
               _consumer_mfma(ck, c=D), xdl_sgemm_srcc(np_),
               known_diff=("LLVM: an identical SrcC tuple is a full-register chain: 2 after a 2-pass MFMA"
                           if np_ == 2 else "LLVM: an identical SrcC tuple is a full-register chain (0)"))

    # ---- MFMA overwrites an MFMA result without reading it (no table row)
    for np_ in (4, 8, 16):
        key = XDL_BY_PASSES[np_]
        prod, D = _producer(key)
        g.pair(f"xdl{np_}_mfma_waw", "xdl_write_mfma_waw", prod, 0,
               _consumer_mfma(key, c=v(CD, D.n), d=D), None)


def _gen_smfma(g: _Gen) -> None:
    for np_, key in SMFMA_BY_PASSES.items():
        prod, D = _producer(key)
        need = np_ + 2
        for dist in g.dists(need):
            g.pair(f"smfma{np_}_valu_raw_d{dist}", "smfma_write_valu_read", prod, dist,
                   v_add_f32(v(100), D[(dist * 3) % D.n], v(121)), need)
        for dist in (0, need - 1):
            g.pair(f"smfma{np_}_valu_waw_d{dist}", "smfma_write_valu_write", prod, dist, v_mov(D[1], v(121)), need)
            g.pair(f"smfma{np_}_ds_write_data_d{dist}", "smfma_write_mem_read", prod, dist,
                   ds_write_b32(v(121), D[2]), need)
            g.pair(f"smfma{np_}_global_store_x4_d{dist}", "smfma_write_mem_read", prod, dist,
                   global_store(v(120, 2), D.part(0, 4)), need)
        g.pair(f"smfma{np_}_valu_raw_disjoint", "smfma_write_valu_read", prod, 0,
               v_add_f32(v(100), v(D.n), v(121)), 0)
        for dist in g.dists(need):
            g.pair(f"smfma{np_}_srca_d{dist}", "smfma_write_srcab", prod, dist,
                   _consumer_mfma(key, srca=D[dist % D.n]), need)
        g.pair(f"smfma{np_}_srcb_xdl_d0", "smfma_write_srcab", prod, 0,
               _consumer_mfma("16x16x32_bf16", srcb=D.part(0, 4)), need)
        # overlapping SrcC, f32 consumer
        ov = np_
        c = v(2, 4) if D.n == 4 else v(8, 16)
        for dist in g.dists(ov):
            g.pair(f"smfma{np_}_overlap_srcc_d{dist}", "smfma_write_overlap_srcc", prod, dist,
                   _consumer_mfma(key, c=c), ov)
        # same SrcC chain
        chain = 2 if np_ == 2 else 0
        for dist in sorted({0, chain}):
            g.pair(f"smfma{np_}_same_srcc_chain_d{dist}", "smfma_write_same_srcc", prod, dist, prod, chain)
        # XDL consumer reading an f32 MFMA result as SrcC (no table row)
        xk = {4: "16x16x32_bf16", 16: "32x32x16_bf16"}[D.n]
        g.pair(f"smfma{np_}_xdl_overlap_srcc", "smfma_write_xdl_srcc", prod, 0,
               _consumer_mfma(xk, c=v(2, 4) if D.n == 4 else v(8, 16)), None)
        g.pair(f"smfma{np_}_xdl_same_srcc", "smfma_write_xdl_srcc", prod, 0, _consumer_mfma(xk, c=D, d=D), None)
    # the other f32 shapes
    for key in ("16x16x1_4b_f32", "32x32x1_2b_f32"):
        m = MFMA[key]
        prod, D = _producer(key)
        need = m.passes + 2
        for dist in (0, need - 1, need):
            g.pair(f"smfma{m.passes}_{key}_valu_raw_d{dist}", "smfma_write_valu_read", prod, dist,
                   v_add_f32(v(100), D[-1], v(121)), need)
        g.pair(f"smfma{m.passes}_{key}_srca_d0", "smfma_write_srcab", prod, 0, _consumer_mfma(key, srca=D[5]), need)


def _gen_war(g: _Gen) -> None:
    for np_, key in XDL_BY_PASSES.items():
        m = MFMA[key]
        C = v(0, m.cd)
        prod = mfma(key, v(CD, m.cd), v(PA, m.a), v(PB, m.b), C)
        need = war_need(np_)
        for dist in g.dists(need):
            g.pair(f"xdl{np_}_srcc_war_d{dist}", "mfma_srcc_war", prod, dist,
                   v_mov(C[(dist * 5 + 2) % C.n], v(121)), need)
        g.pair(f"xdl{np_}_srcc_war_f64", "mfma_srcc_war", prod, 0, v_add_f64(C.part(2, 2), v(120, 2), v(122, 2)), need)
        g.pair(f"xdl{np_}_srca_war", "mfma_srcc_war", prod, 0, v_mov(v(PA + 1), v(121)), 0)
        g.pair(f"xdl{np_}_srcc_war_disjoint", "mfma_srcc_war", prod, 0, v_mov(v(C.n), v(121)), 0)
        for dist in sorted({0, need - 1}):
            g.pair(f"xdl{np_}_srcc_war_ds_read_d{dist}", "mfma_srcc_war_mem", prod, dist,
                   ds_read_b32(C[1], v(121)), None)
            g.pair(f"xdl{np_}_srcc_war_global_load_d{dist}", "mfma_srcc_war_mem", prod, dist,
                   global_load_dword(C[3], v(120, 2)), None)
    for np_, key in SMFMA_BY_PASSES.items():
        m = MFMA[key]
        C = v(0, m.cd)
        prod = mfma(key, v(CD, m.cd), v(PA), v(PB), C)
        for dist in (0, 1):
            g.pair(f"smfma{np_}_srcc_war_d{dist}", "mfma_srcc_war", prod, dist, v_mov(C[2], v(121)),
                   war_need(np_), known_diff="LLVM (gfx940+) applies the SrcC WAR rule to XDL MFMAs only"
                   if war_need(np_) > dist else "")
    m = MFMA["16x16x4_f64"]
    prod = mfma("16x16x4_f64", v(CD, 8), v(PA, 2), v(PB, 2), v(0, 8))
    g.pair("dgemm16_srcc_war_d0", "mfma_srcc_war", prod, 0, v_mov(v(3), v(121)), None)
    # SMFMAC reads its index as "SrcC"
    prod = mfma("smfmac_16x16x64_bf16", v(CD, 4), v(PA, 4), v(PB, 8), v(121))
    g.pair("smfmac4_index_war_d0", "mfma_srcc_war", prod, 0, v_mov(v(121), v(122)), None)


def _gen_valu_to_mfma(g: _Gen) -> None:
    producers = {
        "mov": lambda r: v_mov(r, v(121)),
        "add": lambda r: v_add_f32(r, v(121), v(122)),
        "exp": lambda r: vop1("v_exp_f32", r, v(121)),
        "cvt_pk_bf16": lambda r: v_cvt_pk_bf16_f32(r, v(121), v(122)),
        "pk_mul_f32": lambda r: v_pk_f32("v_pk_mul_f32", v(r.lo, 2), v(120, 2), v(122, 2)),
    }
    for pname, mk in producers.items():
        for dist in (0, 1, 2, 3):
            g.pair(f"valu_{pname}_mfma_srca_d{dist}", "valu_write_mfma_read", mk(v(CA + 2)), dist,
                   _consumer_mfma("32x32x16_bf16"), 2)
    consumers = {  # consumer, the register the VALU writes
        "srcb": (_consumer_mfma("32x32x16_bf16"), v(CB + 2)),
        "srcc": (_consumer_mfma("32x32x16_bf16", c=v(0, 16)), v(3)),
        "srcc_xdl4": (_consumer_mfma("16x16x32_bf16", c=v(0, 4)), v(3)),
        "sgemm_srca": (_consumer_mfma("16x16x4_f32", srca=v(CB + 2)), v(CB + 2)),
        "dgemm_srca": (_consumer_mfma("16x16x4_f64", srca=v(CB + 2, 2)), v(CB + 2)),
        "smfmac_index": (_consumer_mfma("smfmac_16x16x64_bf16", c=v(122)), v(122)),
        "fp8_16pass_srcb": (_consumer_mfma("32x32x64_f8f6f4_fp8"), v(CB + 2)),
    }
    for cname, (cons, reg) in consumers.items():
        for dist in (0, 1, 2):
            g.pair(f"valu_mov_mfma_{cname}_d{dist}", "valu_write_mfma_read", v_mov(reg, v(121)), dist, cons, 2)
    g.pair("valu_mov_mfma_disjoint", "valu_write_mfma_read", v_mov(v(CB + 4), v(121)), 0,
           _consumer_mfma("32x32x16_bf16"), 0)
    cons = mfma("32x32x16_bf16", a(0, 16), v(CA, 4), v(CB, 4), a(0, 16))
    for dist in (0, 1, 2):
        g.pair(f"accvgpr_write_mfma_srcc_d{dist}", "valu_write_mfma_read", v_accvgpr_write(a(5), v(121)), dist, cons, 2)
    g.pair("ds_read_mfma_srca", "valu_write_mfma_read", ds_read_b32(v(CA + 1), v(121)), 0,
           _consumer_mfma("32x32x16_bf16"), 0)
    for dist in (0, 1):
        g.pair(f"dot2_mfma_srca_d{dist}", "valu_write_mfma_read",
               v_dot2_f32_f16(v(CA + 1), v(121), v(122), v(123)), dist, _consumer_mfma("32x32x16_bf16"), 0,
               known_diff=DIFF_VOP3P if dist == 0 else "")

    # ---- row 10: VALU writes EXEC -> MFMA
    execs = {
        "vcmpx_e32": v_cmpx_e32(v(121), v(122)),
        "vcmpx_e64": v_cmpx_e64(s(20, 2), v(121), v(122)),
        "vcmp_e64_exec": v_cmp_e64(EXEC, v(121), v(122)),
    }
    for pname, prod in execs.items():
        for dist in (0, 1, 2, 3, 4, 5):
            if pname != "vcmpx_e32" and dist in (1, 2, 4):
                continue
            g.pair(f"{pname}_mfma_d{dist}", "valu_exec_mfma", prod, dist, _consumer_mfma("32x32x16_bf16"), 4)
    for cname, ck in (("sgemm", "16x16x4_f32"), ("dgemm", "16x16x4_f64"), ("smfmac", "smfmac_16x16x64_bf16"),
                      ("xdl2", "4x4x4_16b_f16")):
        g.pair(f"vcmpx_e32_mfma_{cname}_d1", "valu_exec_mfma", execs["vcmpx_e32"], 1, _consumer_mfma(ck), 4)
    g.pair("salu_exec_mfma", "valu_exec_mfma", s_mov_b64(EXEC, s(20, 2)), 0, _consumer_mfma("32x32x16_bf16"), 0)
    g.pair("vcmp_vcc_mfma", "valu_exec_mfma", v_cmp_e32(v(121), v(122)), 0, _consumer_mfma("32x32x16_bf16"), 0)


def _gen_dgemm(g: _Gen) -> None:
    prod, D = _producer("16x16x4_f64")
    for dist in g.dists(19):
        g.pair(f"dgemm16_valu_raw_d{dist}", "dgemm_write_valu_read", prod, dist,
               v_add_f32(v(100), D[(dist * 3) % 8], v(121)), 19)
    g.pair("dgemm16_valu_raw_f64", "dgemm_write_valu_read", prod, 4, v_add_f64(v(100, 2), D.part(2, 2), v(120, 2)), 19)
    for dist in (0, 10, 11, 12):
        g.pair(f"dgemm16_valu_waw_d{dist}", "dgemm_write_valu_write", prod, dist, v_mov(D[5], v(121)), None)
    for dist in g.dists(18):
        g.pair(f"dgemm16_ds_write_data_d{dist}", "dgemm_write_mem_read", prod, dist, ds_write_b32(v(121), D[1]), 18)
    for dist in (0, 17, 18):
        g.pair(f"dgemm16_global_store_x4_d{dist}", "dgemm_write_mem_read", prod, dist,
               global_store(v(120, 2), D.part(4, 4)), 18)
    for dist in (0, 10, 17, 18, 19, 20):
        g.pair(f"dgemm16_srca_dgemm_d{dist}", "dgemm_write_srcab", prod, dist,
               _consumer_mfma("16x16x4_f64", srca=D.part(2, 2)), 19)
    for dist in (0, 18):
        g.pair(f"dgemm16_srcb_xdl_d{dist}", "dgemm_write_srcab", prod, dist,
               _consumer_mfma("16x16x32_bf16", srcb=D.part(4, 4)), 19)
    for dist in (0, 16, 17):
        g.pair(f"dgemm16_overlap_srcc_d{dist}", "dgemm_write_srcc", prod, dist,
               _consumer_mfma("16x16x4_f64", c=v(4, 8)), None)
    g.pair("dgemm16_same_srcc_chain", "dgemm_write_srcc", prod, 0, prod, None)
    g.pair("dgemm16_xdl_overlap_srcc", "dgemm_write_srcc", prod, 0, _consumer_mfma("16x16x32_bf16", c=v(4, 4)), None)
    g.pair("dgemm16_valu_raw_disjoint", "dgemm_write_valu_read", prod, 0, v_add_f32(v(100), v(8), v(121)), 0)
    # 4x4x4 f64 (4 passes): the table has no numbers
    prod, D = _producer("4x4x4_4b_f64")
    for dist in (0, 3, 5, 6):
        g.pair(f"dgemm4_valu_raw_d{dist}", "dgemm_write_valu_read", prod, dist, v_add_f32(v(100), D[1], v(121)), None)
    for dist in (0, 5):
        g.pair(f"dgemm4_valu_waw_d{dist}", "dgemm_write_valu_write", prod, dist, v_mov(D[0], v(121)), None)
    for dist in (0, 8):
        g.pair(f"dgemm4_ds_write_data_d{dist}", "dgemm_write_mem_read", prod, dist, ds_write_b32(v(121), D[0]), None)
    for dist in (0, 5):
        g.pair(f"dgemm4_srca_d{dist}", "dgemm_write_srcab", prod, dist, _consumer_mfma("4x4x4_4b_f64", srca=D), None)
    for dist in (0, 3):
        g.pair(f"dgemm4_same_srcc_chain_d{dist}", "dgemm_write_srcc", prod, dist, prod, None)
    g.pair("dgemm4_overlap_srcc", "dgemm_write_srcc", prod, 0, _consumer_mfma("16x16x4_f64", c=v(0, 8)), None)
    # ---- row 29: DGEMM -> v_fma_f64 / v_fmac_f64 (no register dependence needed)
    for pk in ("16x16x4_f64", "4x4x4_4b_f64"):
        prod, _ = _producer(pk)
        for dist in (0, 1, 2):
            g.pair(f"dgemm_{pk}_fma_f64_d{dist}", "dgemm_fma64", prod, dist,
                   v_fma_f64(v(100, 2), v(120, 2), v(122, 2), v(124, 2)), 2)
        g.pair(f"dgemm_{pk}_fmac_f64_d0", "dgemm_fma64", prod, 0, v_fmac_f64(v(100, 2), v(120, 2), v(122, 2)), 2)
    prod, _ = _producer("16x16x4_f64")
    g.pair("dgemm_add_f64", "dgemm_fma64", prod, 0, v_add_f64(v(100, 2), v(120, 2), v(122, 2)), 0)
    prod, _ = _producer("32x32x16_bf16")
    g.pair("xdl_fma_f64", "dgemm_fma64", prod, 0, v_fma_f64(v(100, 2), v(120, 2), v(122, 2), v(124, 2)), 0)


def _gen_valu_rules(g: _Gen) -> None:
    # ---- row 12: VALU writes VGPR -> permlane swap reads it
    for w in (16, 32):
        for dist in (0, 1, 2, 3):
            g.pair(f"valu_permlane{w}_src0_d{dist}", "valu_write_permlane", v_mov(v(122), v(121)), dist,
                   v_permlane_swap(w, v(100), v(122)), 2)
        g.pair(f"valu_permlane{w}_vdst_d0", "valu_write_permlane", v_add_f32(v(100), v(121), v(123)), 0,
               v_permlane_swap(w, v(100), v(122)), 2)
        g.pair(f"valu_permlane{w}_e64_d1", "valu_write_permlane", v_mov(v(122), v(121)), 1,
               v_permlane_swap(w, v(100), v(122), e64=True), 2)
        g.pair(f"valu_permlane{w}_disjoint", "valu_write_permlane", v_mov(v(123), v(121)), 0,
               v_permlane_swap(w, v(100), v(122)), 0)
        g.pair(f"ds_read_permlane{w}", "valu_write_permlane", ds_read_b32(v(122), v(121)), 0,
               v_permlane_swap(w, v(100), v(122)), 0)
        g.pair(f"trans_permlane{w}", "valu_write_permlane", vop1("v_exp_f32", v(122), v(121)), 0,
               v_permlane_swap(w, v(100), v(122)), 2)
    # ---- row 13: V_CMPX -> permlane swap
    for w in (16, 32):
        for dist in (0, 1, 3, 4):
            g.pair(f"vcmpx_permlane{w}_d{dist}", "vcmpx_permlane", v_cmpx_e32(v(121), v(123)), dist,
                   v_permlane_swap(w, v(100), v(122)), 4)
        g.pair(f"vcmpx_e64_permlane{w}_d0", "vcmpx_permlane", v_cmpx_e64(s(20, 2), v(121), v(123)), 0,
               v_permlane_swap(w, v(100), v(122), e64=True), 4)
        g.pair(f"vcmp_exec_permlane{w}_d2", "vcmpx_permlane", v_cmp_e64(EXEC, v(121), v(123)), 2,
               v_permlane_swap(w, v(100), v(122)), 4)
        g.pair(f"salu_exec_permlane{w}", "vcmpx_permlane", s_mov_b64(EXEC, s(20, 2)), 0,
               v_permlane_swap(w, v(100), v(122)), 0)
        g.pair(f"vcmp_vcc_permlane{w}", "vcmpx_permlane", v_cmp_e32(v(121), v(123)), 0,
               v_permlane_swap(w, v(100), v(122)), 0)

    # ---- row 14: TRANS -> VALU read
    for op in TRANS_OPS:
        wide = op.endswith("f64")
        dst, src = (v(122, 2), v(124, 2)) if wide else (v(122), v(124))
        prod = vop1(op, dst, src)
        cons = (v_add_f64(v(100, 2), dst, v(120, 2)) if wide else v_add_f32(v(100), dst, v(121)))
        for dist in (0, 1):
            g.pair(f"trans_{op[2:]}_valu_raw_d{dist}", "trans_valu_read", prod, dist, cons, 1)
    prod = vop1("v_exp_f32", v(122), v(124))
    cons = {
        "trans_consumer": (vop1("v_exp_f32", v(100), v(122)), 0),
        "waw": (v_mov(v(122), v(121)), 0),
        "cvt_pk_bf16": (v_cvt_pk_bf16_f32(v(100), v(122), v(121)), 1),
        "sqrt_consumer": (vop1("v_sqrt_f32", v(100), v(122)), 0),
        "disjoint": (v_add_f32(v(100), v(123), v(121)), 0),
        "ds_write": (ds_write_b32(v(121), v(122)), None),
        "mfma_srca": (_consumer_mfma("16x16x4_f32", srca=v(122)), 2),
        "readfirstlane": (v_readfirstlane(s(20), v(122)), 1),
        "max_e32": (vop2("v_max_f32", v(100), v(121), v(122)), 1),
        "sgpr_mix": (v_mul_f32_e64(v(100), s(20), v(122)), 1),
    }
    for cname, (ins, need) in cons.items():
        g.pair(f"trans_exp_{cname}_d0", "trans_valu_read", prod, 0, ins, need)
    for pname, p in (("cvt_pk_bf16", v_cvt_pk_bf16_f32(v(122), v(124), v(125))),
                     ("cvt_f32_bf16", v_cvt_f32_bf16(v(122), v(124))), ("max", vop2("v_max_f32", v(122), v(124), v(125)))):
        g.pair(f"nontrans_{pname}_valu_raw_d0", "trans_valu_read", p, 0, v_mov(v(100), v(122)), 0)

    # ---- row 15: dst_sel / op_sel dst-hi forwarding
    P = v(122)
    prods = {
        "sdwa_word1": (v_add_f16_sdwa(P, v(124), v(125), "WORD_1"), 1),
        "sdwa_word0": (v_add_f16_sdwa(P, v(124), v(125), "WORD_0"), 1),
        "sdwa_dword": (v_add_f16_sdwa(P, v(124), v(125), "DWORD"), 0),
        "mov_sdwa_byte1": (v_mov_sdwa(P, v(124), "BYTE_1"), 1),
        "fma_f16_opsel_hi": (v_fma_f16(P, v(124), v(125), v(126), dst_hi=True), 1),
        "fma_f16_plain": (v_fma_f16(P, v(124), v(125), v(126)), 0),
        "pk_add_f16": (v_pk_add_f16(P, v(124), v(125)), 0),
        "pk_add_f16_opsel_hi0": (v_pk_add_f16(P, v(124), v(125), op_sel_hi=False), 0),
        "cvt_scalef32_pk_fp8_hi": (v_cvt_scalef32_pk_fp8_f32(P, v(124), v(125), v(126), True), 1),
        "cvt_scalef32_pk_fp8_lo": (v_cvt_scalef32_pk_fp8_f32(P, v(124), v(125), v(126), False), 0),
        "cvt_scalef32_sr_fp8_b3": (v_cvt_scalef32_sr_fp8_f32(P, v(124), v(125), v(126), 3), 1),
        "cvt_scalef32_sr_fp8_b1": (v_cvt_scalef32_sr_fp8_f32(P, v(124), v(125), v(126), 1), 1),
        "cvt_scalef32_sr_fp8_b2": (v_cvt_scalef32_sr_fp8_f32(P, v(124), v(125), v(126), 2), 1),
        "cvt_scalef32_sr_fp8_b0": (v_cvt_scalef32_sr_fp8_f32(P, v(124), v(125), v(126), 0), 0),
        "cvt_scalef32_sr_pk_fp4": (v_cvt_scalef32_sr_pk_fp4_f32(P, v(124, 2), v(126), v(127)), 1),
    }
    diff_pk = DIFF_VOP3P
    for pname, (prod, need) in prods.items():
        kd = diff_pk if pname == "pk_add_f16" else ""
        g.pair(f"dstsel_{pname}_raw_d0", "dst_sel_forwarding", prod, 0, v_add_f32(v(100), P, v(121)), need,
               known_diff=kd)
        if need:
            g.pair(f"dstsel_{pname}_raw_d1", "dst_sel_forwarding", prod, 1, v_add_f32(v(100), P, v(121)), 0)
            g.pair(f"dstsel_{pname}_waw_d0", "dst_sel_forwarding", prod, 0, v_mov(P, v(121)), need)
            g.pair(f"dstsel_{pname}_disjoint", "dst_sel_forwarding", prod, 0, v_add_f32(v(100), v(123), v(121)), 0)
    prod = v_add_f16_sdwa(P, v(124), v(125), "WORD_1")
    g.pair("dstsel_sdwa_word1_ds_write", "dst_sel_forwarding", prod, 0, ds_write_b32(v(121), P), None)
    g.pair("dstsel_sdwa_word1_mfma_srca", "dst_sel_forwarding", prod, 0, _consumer_mfma("16x16x4_f32", srca=P), 2)
    g.pair("dstsel_sdwa_word1_sdwa_consumer", "dst_sel_forwarding", prod, 0,
           v_add_f16_sdwa(P, v(121), v(123), "WORD_0"), 1)
    g.pair("dstsel_pk_add_f32", "dst_sel_forwarding", v_pk_f32("v_pk_add_f32", v(122, 2), v(124, 2), v(126, 2)), 0,
           v_add_f32(v(100), v(123), v(121)), 0, known_diff=diff_pk)

    # ---- row 16: VALU writes SGPR / VCC -> VALU reads it
    sprods = {
        "readfirstlane": v_readfirstlane(s(20), v(121)),
        "readlane": v_readlane(s(20), v(121), s(30)),
        "cmp_e64": v_cmp_e64(s(20, 2), v(121), v(122)),
        "cmpx_e64": v_cmpx_e64(s(20, 2), v(121), v(122)),
    }
    for pname, prod in sprods.items():
        for dist in (0, 1, 2):
            g.pair(f"valu_sgpr_{pname}_valu_src0_d{dist}", "valu_sgpr_valu_read", prod, dist,
                   v_add_f32(v(100), s(20), v(123)), 2)
    g.pair("valu_sgpr_src1_e64_d0", "valu_sgpr_valu_read", sprods["readfirstlane"], 0,
           v_mul_f32_e64(v(100), v(123), s(20)), 2)
    g.pair("valu_sgpr_pair_mask_d0", "valu_sgpr_valu_read", sprods["cmp_e64"], 0,
           v_cndmask_e64(v(100), v(121), v(123), s(20, 2)), 2)
    g.pair("valu_sgpr_pair_hi_d1", "valu_sgpr_valu_read", sprods["cmp_e64"], 1, v_add_f32(v(100), s(21), v(123)), 2)
    g.pair("valu_sgpr_disjoint", "valu_sgpr_valu_read", sprods["readfirstlane"], 0, v_add_f32(v(100), s(21), v(123)), 0)
    g.pair("salu_sgpr_valu_read", "valu_sgpr_valu_read", s_mov_b32(s(20), s(30)), 0, v_add_f32(v(100), s(20), v(123)), 0)
    vccp = {"cmp_e32": v_cmp_e32(v(121), v(122)), "add_co": v_add_co_u32(v(101), v(121), v(122)),
            "div_scale": v_div_scale_f32(v(101), v(121), v(122))}
    vccc = {"cndmask_e32": v_cndmask_e32(v(100), v(123), v(124)), "addc": v_addc_co_u32(v(100), v(123), v(124)),
            "cndmask_e64_vcc": Ins("v_cndmask_b32_e64 v100, v123, v124, vcc",
                                   "$vgpr100 = V_CNDMASK_B32_e64 0, $vgpr123, 0, $vgpr124, $vcc, implicit $exec")}
    for pname, prod in vccp.items():
        for cname, cons in vccc.items():
            for dist in ((0, 1) if pname == "cmp_e32" else (0,)):
                g.pair(f"valu_vcc_{pname}_{cname}_d{dist}", "valu_sgpr_valu_read", prod, dist, cons, 2)
    g.pair("salu_vcc_cndmask", "valu_sgpr_valu_read", s_mov_b64(VCC, s(20, 2)), 0, vccc["cndmask_e32"], 0)

    # ---- row 17: VALU writes SGPR -> lane select of v_readlane / v_writelane
    for pname in ("readfirstlane", "cmp_e64"):
        prod = sprods[pname]
        for dist in (0, 1, 2, 3, 4):
            g.pair(f"valu_sgpr_{pname}_readlane_sel_d{dist}", "valu_sgpr_lane_select", prod, dist,
                   v_readlane(s(22), v(123), s(20)), 4)
        for dist in (0, 3):
            g.pair(f"valu_sgpr_{pname}_writelane_sel_d{dist}", "valu_sgpr_lane_select", prod, dist,
                   v_writelane(v(100), 7, s(20)), 4)
    g.pair("salu_sgpr_readlane_sel", "valu_sgpr_lane_select", s_mov_b32(s(20), s(30)), 0,
           v_readlane(s(22), v(123), s(20)), 0)
    g.pair("valu_sgpr_writelane_data_d0", "valu_sgpr_valu_read", sprods["readfirstlane"], 0,
           v_writelane(v(100), s(20), M0), 2)

    # ---- row 18: VALU writes EXEC -> readlane / readfirstlane / writelane
    rw = {"readlane": v_readlane(s(22), v(123), s(30)), "readfirstlane": v_readfirstlane(s(22), v(123)),
          "writelane": v_writelane(v(100), 7, s(30))}
    for cname, cons in rw.items():
        for dist in (0, 1, 3, 4):
            g.pair(f"vcmpx_{cname}_d{dist}", "valu_exec_rwlane", v_cmpx_e32(v(121), v(122)), dist, cons, 4)
        g.pair(f"salu_exec_{cname}", "valu_exec_rwlane", s_mov_b64(EXEC, s(20, 2)), 0, cons, 0)
    g.pair("vcmp_exec_readlane_d2", "valu_exec_rwlane", v_cmp_e64(EXEC, v(121), v(122)), 2, rw["readlane"], 4)

    # ---- row 19: VALU writes VGPR -> readlane / readfirstlane reads it
    for cname, cons in (("readlane", v_readlane(s(22), v(123), s(30))), ("readfirstlane", v_readfirstlane(s(22), v(123)))):
        for dist in (0, 1):
            g.pair(f"valu_vgpr_{cname}_d{dist}", "valu_vgpr_readlane", v_mov(v(123), v(121)), dist, cons, 1)
        g.pair(f"valu_vgpr_{cname}_disjoint", "valu_vgpr_readlane", v_mov(v(124), v(121)), 0, cons, 0)
        g.pair(f"ds_read_vgpr_{cname}", "valu_vgpr_readlane", ds_read_b32(v(123), v(121)), 0, cons, 0)
    g.pair("valu_vgpr_writelane_vdst", "valu_vgpr_readlane", v_mov(v(100), v(121)), 0, v_writelane(v(100), 7, s(30)), None)

    # ---- row 20: VALU writes SGPR -> VMEM reads it
    vm = {
        "soffset": (v_readfirstlane(s(8), v(121)), buffer_load_dword_offset(v(100), RSRC, s(8))),
        "srsrc": (v_readfirstlane(s(5), v(121)), buffer_load_dword_offset(v(100), RSRC, s(8))),
        "saddr": (v_readfirstlane(s(20), v(121)), global_load_dword_saddr(v(100), v(123), s(20, 2))),
        "saddr_cmp": (v_cmp_e64(s(20, 2), v(121), v(122)), global_load_dword_saddr(v(100), v(123), s(20, 2))),
        "store_soffset": (v_readfirstlane(s(8), v(121)), buffer_store(v(124), s(8))),
        "lds_dma_srsrc": (v_readfirstlane(s(7), v(121)), buffer_load_lds("dword", v(123))),
    }
    for pname, (prod, cons) in vm.items():
        for dist in ((0, 1, 2, 3, 4, 5) if pname == "soffset" else (0, 4)):
            g.pair(f"valu_sgpr_vmem_{pname}_d{dist}", "valu_sgpr_vmem", prod, dist, cons, 5)
    g.pair("salu_sgpr_vmem_soffset", "valu_sgpr_vmem", s_mov_b32(s(8), s(30)), 0,
           buffer_load_dword_offset(v(100), RSRC, s(8)), 0)
    g.pair("valu_sgpr_vmem_disjoint", "valu_sgpr_vmem", v_readfirstlane(s(9), v(121)), 0,
           buffer_load_dword_offset(v(100), RSRC, s(8)), 0)
    g.pair("valu_sgpr_ds", "valu_sgpr_vmem", v_readfirstlane(s(20), v(121)), 0, ds_read_b32(v(100), v(123)), 0)
    for cname, cons in (("buffer_load", buffer_load_dword_offen(v(100), v(123))),
                        ("global_load", global_load_dword(v(100), v(120, 2))),
                        ("ds_read", ds_read_b32(v(100), v(123)))):
        for dist in (0, 4):
            g.pair(f"vcmpx_vmem_{cname}_d{dist}", "valu_exec_vmem", v_cmpx_e32(v(121), v(122)), dist, cons, None)

    # ---- row 21: VALU writes VGPR -> DPP reads it
    for dist in (0, 1, 2):
        g.pair(f"valu_dpp_mov_src_d{dist}", "valu_vgpr_dpp", v_mov(v(123), v(121)), dist, v_mov_dpp(v(100), v(123)), 2)
    g.pair("valu_dpp_add_src0_d0", "valu_vgpr_dpp", v_mov(v(123), v(121)), 0, v_add_f32_dpp(v(100), v(123), v(124)), 2)
    g.pair("valu_dpp_add_src1_d1", "valu_vgpr_dpp", v_mov(v(124), v(121)), 1, v_add_f32_dpp(v(100), v(123), v(124)), 2)
    g.pair("valu_dpp_old_d0", "valu_vgpr_dpp", v_mov(v(100), v(121)), 0, v_mov_dpp(v(100), v(123)), None)
    g.pair("valu_dpp_disjoint", "valu_vgpr_dpp", v_mov(v(125), v(121)), 0, v_mov_dpp(v(100), v(123)), 0)
    for dist in (0, 1):
        g.pair(f"ds_read_dpp_src_d{dist}", "valu_vgpr_dpp", ds_read_b32(v(123), v(121)), dist,
               v_mov_dpp(v(100), v(123)), 0, known_diff="LLVM counts any instruction that writes the DPP source")
    g.pair("global_load_dpp_src", "valu_vgpr_dpp", global_load_dword(v(123), v(120, 2)), 0,
           v_mov_dpp(v(100), v(123)), 0, known_diff="LLVM counts any instruction that writes the DPP source")
    # ---- row 22: VALU writes EXEC -> DPP
    for dist in (0, 1, 2, 4, 5):
        g.pair(f"vcmpx_dpp_d{dist}", "valu_exec_dpp", v_cmpx_e32(v(121), v(122)), dist, v_mov_dpp(v(100), v(123)), 5)
    g.pair("vcmp_exec_dpp_add_d3", "valu_exec_dpp", v_cmp_e64(EXEC, v(121), v(122)), 3,
           v_add_f32_dpp(v(100), v(123), v(124)), 5)
    g.pair("salu_exec_dpp", "valu_exec_dpp", s_mov_b64(EXEC, s(20, 2)), 0, v_mov_dpp(v(100), v(123)), 0)
    # ---- row 23: VALU writes VCC -> v_div_fmas
    for pname, prod in vccp.items():
        for dist in ((0, 1, 2, 3, 4) if pname == "cmp_e32" else (0, 2)):
            g.pair(f"valu_vcc_{pname}_div_fmas_d{dist}", "valu_vcc_div_fmas", prod, dist,
                   v_div_fmas_f32(v(100), v(123), v(124), v(125)), 4)
    g.pair("valu_vcc_div_fmas_f64_d1", "valu_vcc_div_fmas", vccp["cmp_e32"], 1,
           v_div_fmas_f64(v(100, 2), v(120, 2), v(122, 2), v(124, 2)), 4)
    g.pair("salu_vcc_div_fmas", "valu_vcc_div_fmas", s_mov_b64(VCC, s(20, 2)), 0,
           v_div_fmas_f32(v(100), v(123), v(124), v(125)), 0)
    g.pair("valu_sgpr_div_fmas", "valu_vcc_div_fmas", v_cmp_e64(s(20, 2), v(121), v(122)), 0,
           v_div_fmas_f32(v(100), v(123), v(124), v(125)), 0)

    # ---- row 28: DOT
    D = v(100)
    dots = {"dot2_f32_f16": v_dot2_f32_f16(D, v(121), v(122), v(123)),
            "dot2_f32_bf16": v_dot2_f32_f16(D, v(121), v(122), v(123), op="v_dot2_f32_bf16"),
            "dot4_i32_i8": v_dot4_i32_i8(D, v(121), v(122), v(123))}
    for pname, prod in dots.items():
        for dist in (0, 1, 2, 3):
            g.pair(f"{pname}_valu_raw_d{dist}", "dot_write", prod, dist, v_add_f32(v(101), D, v(124)), 3)
        g.pair(f"{pname}_valu_waw_d0", "dot_write", prod, 0, v_mov(D, v(124)), 3)
        g.pair(f"{pname}_ds_write_d1", "dot_write", prod, 1, ds_write_b32(v(124), D), 3)
        g.pair(f"{pname}_valu_disjoint", "dot_write", prod, 0, v_add_f32(v(101), v(102), v(124)), 0)
    prod = dots["dot2_f32_f16"]
    for dist in (0, 2):
        g.pair(f"dot2_same_srca_d{dist}", "dot_write", prod, dist, v_dot2_f32_f16(v(101), D, v(124), v(125)), 3)
    g.pair("dot2_same_srcb_d0", "dot_write", prod, 0, v_dot2_f32_f16(v(101), v(124), D, v(125)), 3)
    g.pair("dot2_same_srcc_d0", "dot_write", prod, 0, v_dot2_f32_f16(v(101), v(124), v(125), D), 0,
           known_diff=DIFF_VOP3P)
    g.pair("dot2_same_srcc_d1", "dot_write", prod, 1, v_dot2_f32_f16(v(101), v(124), v(125), D), 0)
    g.pair("dot2_same_waw_d0", "dot_write", prod, 0, v_dot2_f32_f16(D, v(124), v(125), v(126)), 0,
           known_diff=DIFF_VOP3P)
    g.pair("dot2_other_dot_srcc_d0", "dot_write", prod, 0,
           v_dot2_f32_f16(v(101), v(124), v(125), D, op="v_dot2_f32_bf16"), 3)
    pc = v_dot2c_f32_f16(D, v(121), v(122))
    g.pair("dot2c_chain_d0", "dot_write", pc, 0, v_dot2c_f32_f16(D, v(124), v(125)), 0)
    g.pair("dot2c_srca_d0", "dot_write", pc, 0, v_dot2c_f32_f16(v(101), D, v(125)), 3)
    g.pair("dot2c_valu_raw_d1", "dot_write", pc, 1, v_add_f32(v(101), D, v(124)), 3)


def _gen_scalar_mem(g: _Gen) -> None:
    # ---- row 24: SALU writes M0
    m0p = {"s_mov": s_mov_b32(M0, s(20)), "s_movk": s_movk_m0(0x100)}
    cons = {
        "buffer_load_lds": buffer_load_lds("dword", v(123)),
        "buffer_load_x4_lds": buffer_load_lds("dwordx4", v(123)),
        "global_load_lds": global_load_lds_dword(v(120, 2)),
        "global_load_lds_x4": global_load_lds_dword(v(120, 2), "dwordx4"),
        "s_movrels": s_movrels(s(22), s(23)),
        "s_movreld": s_movreld(s(22), s(23)),
        "ds_write_addtid": ds_write_addtid(v(123)),
        "ds_read_addtid": ds_read_addtid(v(100)),
        "s_sendmsg": s_sendmsg_interrupt(),
    }
    for pname, prod in m0p.items():
        for cname, c in cons.items():
            dists = (0, 1) if pname == "s_mov" else (0,)
            for dist in dists:
                g.pair(f"m0_{pname}_{cname}_d{dist}", "salu_m0", prod, dist, c, 1, kind="s")
    g.pair("m0_s_mov_buffer_load_lds_vfill_d1", "salu_m0", m0p["s_mov"], 1, cons["buffer_load_lds"], 0)
    g.pair("m0_s_mov_ds_read_b32", "salu_m0", m0p["s_mov"], 0, ds_read_b32(v(100), v(123)), 0)
    g.pair("m0_s_mov_salu_read", "salu_m0", m0p["s_mov"], 0, s_mov_b32(s(22), M0), 0)
    g.pair("m0_s_mov_writelane_sel", "salu_m0", m0p["s_mov"], 0, v_writelane(v(100), s(23), M0), 0)

    # ---- row 25: s_setreg -> s_getreg / s_setreg
    for kind in ("s", "v"):
        for dist in (0, 1, 2):
            g.pair(f"setreg_getreg_{kind}fill_d{dist}", "setreg", s_setreg("HW_REG_MODE", s(20)), dist,
                   s_getreg(s(22), "HW_REG_MODE"), 2, kind=kind)
    for dist in (0, 1):
        g.pair(f"setreg_setreg_d{dist}", "setreg", s_setreg("HW_REG_MODE", s(20)), dist,
               s_setreg("HW_REG_MODE", s(21)), 2, kind="s")
    g.pair("setreg_imm32_getreg_d0", "setreg", s_setreg_imm32("HW_REG_MODE", 3), 0, s_getreg(s(22), "HW_REG_MODE"), 2)
    g.pair("setreg_getreg_other_field", "setreg", s_setreg("HW_REG_MODE", s(20), 0, 4), 0,
           s_getreg(s(22), "HW_REG_MODE", 4, 4), None)
    g.pair("setreg_getreg_other_reg", "setreg", s_setreg("HW_REG_MODE", s(20)), 0,
           s_getreg(s(22), "HW_REG_TRAPSTS"), 0)
    g.pair("setreg_trapsts_getreg", "setreg", s_setreg("HW_REG_TRAPSTS", s(20)), 0,
           s_getreg(s(22), "HW_REG_TRAPSTS"), 2)
    # ---- row 26: s_setreg TRAPSTS -> s_rfe
    for dist in (0, 1):
        g.pair(f"setreg_trapsts_rfe_d{dist}", "setreg_rfe", s_setreg("HW_REG_TRAPSTS", s(20)), dist,
               s_rfe(s(22, 2)), 1 if dist == 0 else 0)

    # ---- row 27: wide store -> VALU overwrites the data VGPRs
    Dt = v(0, 4)
    stores = {
        "buffer_x4": (buffer_store(Dt, 0), 2),
        "buffer_x3": (buffer_store(v(0, 3), 0), 2),
        "buffer_x2": (buffer_store(v(0, 2), 0), 0),
        "buffer_x4_soffset_sgpr": (buffer_store(Dt, s(8)), 0),
        "buffer_x4_offen": (buffer_store_offen(Dt, v(121)), 2),
        "buffer_cmpswap_x2": (buffer_atomic_cmpswap_x2(Dt), 2),
        "global_x4": (global_store(v(120, 2), Dt), 2),
        "global_x3": (global_store(v(120, 2), v(0, 3)), 2),
        "global_x2": (global_store(v(120, 2), v(0, 2)), 0),
        "flat_x4": (flat_store_dwordx4(v(120, 2), Dt), 2),
    }
    for sname, (st, need) in stores.items():
        for dist in ((0, 1, 2) if sname in ("buffer_x4", "global_x4") else (0,)):
            g.pair(f"store_{sname}_valu_waw_d{dist}", "store_data_overwrite", st, dist, v_mov(v(1), v(125)), need)
    st = stores["global_x4"][0]
    g.pair("store_global_x4_f64_waw", "store_data_overwrite", st, 0, v_add_f64(v(2, 2), v(122, 2), v(124, 2)), 2)
    g.pair("store_global_x4_addr_waw", "store_data_overwrite", st, 0, v_mov(v(121), v(125)), 0)
    g.pair("store_global_x4_valu_read", "store_data_overwrite", st, 0, v_add_f32(v(100), v(1), v(125)), 0)
    g.pair("store_global_x4_ds_read_waw", "store_data_overwrite", st, 0, ds_read_b32(v(1), v(125)), None)
    g.pair("store_global_x4_mfma_waw", "store_data_overwrite", st, 0,
           mfma("16x16x32_bf16", Dt, v(CA, 4), v(CB, 4), v(CD, 4)), 2)
    g.pair("store_buffer_x4_disjoint", "store_data_overwrite", stores["buffer_x4"][0], 0, v_mov(v(4), v(125)), 0)


def _gen_fillers(g: _Gen) -> None:
    prod, D = _producer("32x32x16_bf16")
    for kind in ("s", "mix", "w", "vw"):
        for dist in (3, 6, 11, 12):
            g.pair(f"xdl8_valu_raw_{kind}fill_d{dist}", "filler_kinds", prod, dist, v_add_f32(v(100), D[4], v(121)),
                   12, kind=kind)
    prod, D = _producer("32x32x64_f8f6f4_fp8")
    for dist in (18, 19, 20):
        g.pair(f"xdl16_valu_raw_sfill_d{dist}", "filler_kinds", prod, dist, v_add_f32(v(100), D[4], v(121)),
               20, kind="s")
    prod = mfma("32x32x16_bf16", v(CD, 16), v(PA, 4), v(PB, 4), v(0, 16))
    for dist in (3, 6):
        g.pair(f"xdl8_srcc_war_sfill_d{dist}", "filler_kinds", prod, dist, v_mov(v(2), v(121)), 7, kind="s")


def _gen_multi(g: _Gen) -> None:
    p16, D16 = _producer("32x32x64_f8f6f4_fp8")
    p4 = mfma("16x16x32_bf16", v(16, 4), v(CA, 4), v(CB, 4), v(16, 4))
    for dist in (0, 3, 9, 14):
        items = [p16, p4, *g.fill(dist), v_add_f32(v(100), v(2), v(17))]
        g.add(f"multi_xdl16_xdl4_valu_d{dist}", "multi_producer", items, max(20 - 1 - dist, 8 - dist, 0))
    p8, D8 = _producer("32x32x16_bf16")
    # chain: the second MFMA is the most recent writer of the result
    for dist in (0, 5):
        items = [p8, *g.fill(dist), p8, v_add_f32(v(100), v(3), v(121))]
        g.add(f"multi_xdl8_chain_valu_d{dist}", "multi_producer", items, 12)
    # an MFMA chain followed by a VALU that reads the result of the first, overwritten by neither
    p8b = mfma("32x32x16_bf16", v(16, 16), v(CA, 4), v(CB, 4), v(16, 16))
    for dist in (0, 4, 10):
        items = [p8, p8b, *g.fill(dist), v_add_f32(v(100), v(5), v(121))]
        g.add(f"multi_xdl8_xdl8_first_valu_d{dist}", "multi_producer", items, max(0, 12 - 1 - dist))
        items = [p8, p8b, *g.fill(dist), v_add_f32(v(100), v(5), v(21))]
        g.add(f"multi_xdl8_xdl8_both_valu_d{dist}", "multi_producer", items, max(0, 12 - dist))
    # trans + VALU-SGPR feeding one VALU
    for dist in (0, 1):
        items = [v_readfirstlane(s(20), v(121)), vop1("v_exp_f32", v(122), v(123)), *g.fill(dist),
                 v_add_f32(v(100), s(20), v(122))]
        g.add(f"multi_sgpr_trans_valu_d{dist}", "multi_producer", items, max(2 - 1 - dist, 1 - dist, 0))
    # VALU writes SrcA while an XDL result is SrcB
    for dist in (0, 2, 6):
        items = [p8, v_mov(v(CA + 1), v(121)), *g.fill(dist), _consumer_mfma("32x32x16_bf16", srcb=v(4, 4))]
        g.add(f"multi_xdl8_valu_srcab_d{dist}", "multi_producer", items, max(12 - 1 - dist, 2 - dist, 0))
    # store data then an MFMA overwriting it then a VALU reading the MFMA result
    items = [global_store(v(120, 2), v(0, 4)), p8, v_add_f32(v(100), v(1), v(121))]
    g.add("multi_store_mfma_valu", "multi_producer", items, 12, clean=False)
    # permlane after both a v_cmpx and a VALU write
    for dist in (0, 2):
        items = [v_cmpx_e32(v(121), v(123)), v_mov(v(122), v(124)), *g.fill(dist), v_permlane_swap(32, v(100), v(122))]
        g.add(f"multi_vcmpx_valu_permlane_d{dist}", "multi_producer", items, max(4 - 1 - dist, 2 - dist, 0))


def _gen_cfg(g: _Gen) -> None:
    p8, D = _producer("32x32x16_bf16")
    cons = v_add_f32(v(100), D[6], v(121))
    # ---- fallthrough into a labelled block
    for k, m in ((0, 0), (3, 0), (0, 5), (4, 4), (6, 7), (2, 11)):
        items = [p8, *g.fill(k), Label(1), *g.fill(m), cons]
        g.add(f"cfg_fallthrough_xdl8_k{k}_m{m}", "cfg_fallthrough", items, max(0, 12 - k - m))
    p16, D16 = _producer("32x32x64_f8f6f4_fp8")
    for k, m in ((10, 8), (10, 9), (9, 11)):
        items = [p16, *g.fill(k), Label(1), *g.fill(m), v_add_f32(v(100), D16[0], v(121))]
        g.add(f"cfg_fallthrough_xdl16_k{k}_m{m}", "cfg_fallthrough", items, max(0, 20 - k - m),
              bound_bug=(k + m == BOUND))
    items = [vop1("v_exp_f32", v(122), v(124)), Label(1), v_add_f32(v(100), v(122), v(121))]
    g.add("cfg_fallthrough_trans", "cfg_fallthrough", items, 1)
    items = [s_mov_b32(M0, s(20)), Label(1), buffer_load_lds("dword", v(123))]
    g.add("cfg_fallthrough_m0", "cfg_fallthrough", items, 1)

    # ---- conditional branch: the short path wins
    for k, m in ((0, 0), (0, 6), (3, 2), (5, 20)):
        items = [p8, *g.fill(k), s_cmp_eq(s(30), s(31)), s_cbranch_scc0(2), Label(1), *g.fill(m), Label(2), cons]
        g.add(f"cfg_branch_xdl8_k{k}_m{m}", "cfg_branch", items, max(0, 12 - k - 2))
    # producer only on the fallthrough path
    for m in (0, 3, 12):
        items = [s_cmp_eq(s(30), s(31)), s_cbranch_scc0(2), Label(1), p8, *g.fill(m), Label(2), cons]
        g.add(f"cfg_branch_producer_on_fallthrough_m{m}", "cfg_branch", items, max(0, 12 - m))
    # producer on both paths at different distances
    items = [s_cmp_eq(s(30), s(31)), s_cbranch_scc0(2), Label(1), p8, *g.fill(6), s_branch(3), Label(2), p8,
             *g.fill(2), Label(3), cons]
    g.add("cfg_branch_diamond_xdl8", "cfg_branch", items, 12 - 2)
    # unconditional branch over a block without predecessors
    items = [p8, s_branch(2), Label(1), *g.fill(3), Label(2), cons]
    g.add("cfg_branch_skip_block_xdl8", "cfg_branch", items, 12 - 1)
    items = [v_cmpx_e32(v(121), v(122)), s_branch(2), Label(1), *g.fill(1), Label(2), v_permlane_swap(32, v(100), v(123))]
    g.add("cfg_branch_vcmpx_permlane", "cfg_branch", items, 4 - 1)

    # ---- loop back-edges
    for k in (0, 2, 5, 11):
        items = [v_mov(v(100), v(121)), Label(1), cons, *g.fill(3), p8, *g.fill(k), s_cbranch_scc0(1), Label(2),
                 s_endpgm()]
        g.add(f"cfg_loop_xdl8_raw_k{k}", "cfg_loop", items, max(0, 12 - k - 1), consumer=1)
    for k in (0, 4):
        items = [Label(1), v_mov(v(5), v(121)), *g.fill(2), mfma("32x32x16_bf16", v(CD, 16), v(PA, 4), v(PB, 4), v(0, 16)),
                 *g.fill(k), s_cmp_eq(s(30), s(31)), s_cbranch_scc0(1), Label(2), s_endpgm()]
        # the loop header is the first asm block (MIR: an empty bb.0 falls through into bb.1)
        g.add(f"cfg_loop_xdl8_war_k{k}", "cfg_loop", items, max(0, 7 - k - 2), consumer=0)
    # producer and consumer in the same iteration and across the back-edge
    for k in (3, 9):
        items = [Label(1), cons, p8, *g.fill(k), cons, s_cbranch_scc0(1), Label(2), s_endpgm()]
        g.add(f"cfg_loop_xdl8_both_k{k}", "cfg_loop", items, max(0, 12 - k), consumer=k + 2, clean=False)
        # the loop-top consumer: with the nops the second consumer needs, the back-edge distance is
        # k + (12 - k) + 2 >= 12; LLVM works in one forward pass and does not see those nops yet
        g.add(f"cfg_loop_xdl8_both_top_k{k}", "cfg_loop", items, 0, consumer=0, clean=False,
              known_diff=DIFF_ONE_PASS)
    # two-block loop body
    items = [Label(1), cons, *g.fill(2), s_branch(2), Label(2), p8, *g.fill(1), s_cbranch_scc0(1), Label(3),
             s_endpgm()]
    g.add("cfg_loop_two_blocks_xdl8", "cfg_loop", items, 12 - 2, consumer=0)
    # the hazard is covered by the loop body
    items = [Label(1), cons, p8, *g.fill(13), s_cbranch_scc0(1), Label(2), s_endpgm()]
    g.add("cfg_loop_xdl8_covered", "cfg_loop", items, 0, consumer=0)
    items = [Label(1), v_add_f32(v(100), v(122), v(121)), vop1("v_exp_f32", v(122), v(124)), s_cbranch_scc0(1),
             Label(2), s_endpgm()]
    g.add("cfg_loop_trans", "cfg_loop", items, 0, consumer=0)


def generate_probes(seed: int = 0) -> list[Probe]:
    """All probes, deterministic for a seed (the seed picks filler registers and some distances)."""
    g = _Gen(seed)
    _gen_xdl(g)
    _gen_smfma(g)
    _gen_war(g)
    _gen_valu_to_mfma(g)
    _gen_dgemm(g)
    _gen_valu_rules(g)
    _gen_scalar_mem(g)
    _gen_fillers(g)
    _gen_multi(g)
    _gen_cfg(g)
    return g.probes


# --------------------------------------------------------------------------------------------
# Running llc and llvm-mc
# --------------------------------------------------------------------------------------------

_LLVM_DIRS = ("/usr/lib/llvm-22/bin",)
LLC_ARGS = ("-mtriple=amdgcn", "-mcpu=gfx950", "-verify-machineinstrs", "-run-pass=post-RA-hazard-rec")
MC_ARGS = ("-triple=amdgcn-amd-amdhsa", "-mcpu=gfx950")


def find_tool(name: str) -> Path | None:
    """`llc` / `llvm-mc`: $FLYASM_LLC / $FLYASM_LLVM_MC, LLVM 22's bin dir, `name-22`, `name` on PATH."""
    env = os.environ.get("FLYASM_" + name.upper().replace("-", "_"))
    if env:
        return Path(env)
    for d in _LLVM_DIRS:
        p = Path(d) / name
        if p.is_file() and os.access(p, os.X_OK):
            return p
    for cand in (f"{name}-22", name):
        if w := shutil.which(cand):
            return Path(w)
    return None


def _tool(path: Path | str | None, name: str) -> Path:
    p = Path(path) if path else find_tool(name)
    if p is None:
        raise HazardOracleError(f"{name} not found (set $FLYASM_{name.upper().replace('-', '_')} or install LLVM 22)")
    return p


_VERSIONS: dict[str, str] = {}


def llc_version(llc: Path | str | None = None) -> str:
    llc = _tool(llc, "llc")
    if str(llc) not in _VERSIONS:
        out = subprocess.run([str(llc), "--version"], capture_output=True, text=True, check=True).stdout
        _VERSIONS[str(llc)] = out.strip()
    return _VERSIONS[str(llc)]


def default_cache_dir() -> Path:
    env = os.environ.get("FLYASM_ORACLE_CACHE")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / ".flyasm-cache" / "llc_hazard"


_OPCODE_RE = re.compile(r"^[A-Z][A-Za-z0-9_]*$")


def _opcode(line: str) -> str:
    for tok in re.split(r"[\s,]+", line.strip()):
        if _OPCODE_RE.match(tok):
            return tok
    raise HazardOracleError(f"no opcode in MIR line {line!r}")


def _mir_body_lines(text: str) -> dict[str, list[str]]:
    """function name -> instruction lines of its body, for one or many MIR documents."""
    out: dict[str, list[str]] = {}
    name, body = None, None
    for line in text.splitlines():
        if line.startswith("---"):
            name, body = None, None
            continue
        if line.startswith("..."):
            body = None
            continue
        if body is None:
            if m := re.match(r"^name:\s+'?([\w.$]+)'?\s*$", line):
                name = m.group(1)
            elif line.startswith("body:"):
                if name is None:
                    raise HazardOracleError("MIR body without a function name")
                body = out.setdefault(name, [])
            continue
        st = line.strip()
        if not st or st.startswith((";", "bb.", "successors:", "liveins:", "{{")):
            continue
        body.append(st)
    return out


def _fold_nops(lines: list[str]) -> list[tuple[str, int]]:
    """[(opcode, wait states of the S_NOPs right before it)], S_NOPs removed."""
    out, pending = [], 0
    for st in lines:
        op = _opcode(st)
        if op == "S_NOP":
            pending += int(st.split()[1]) + 1
            continue
        out.append((op, pending))
        pending = 0
    if pending:
        out.append(("<end>", pending))
    return out


def _explain_llc_failure(stderr: str, probes: Sequence[Probe]) -> str:
    starts, line = [], 1
    for p in probes:
        starts.append(line)
        line += p.mir.count("\n")
    owners = []
    for m in re.finditer(r":(\d+):\d+: error", stderr):
        ln = int(m.group(1))
        i = max(j for j, st in enumerate(starts) if st <= ln)
        owners.append(probes[i].name)
    owners += re.findall(r"- function:\s+(\S+)", stderr)
    head = "\n".join(stderr.strip().splitlines()[:12])
    return f"llc rejected probe(s) {sorted(set(owners)) or '?'}:\n{head}"


def _run_llc(llc: Path, probes: Sequence, args: Sequence[str], fold) -> dict[str, list]:
    """One llc run over all `probes` (one MIR function each); fold(body lines) per function."""
    with tempfile.TemporaryDirectory(prefix="flyasm-oracle-") as td:
        path = Path(td) / "probes.mir"
        path.write_text("".join(p.mir for p in probes))
        proc = subprocess.run([str(llc), *args, str(path), "-o", "-"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise HazardOracleError(_explain_llc_failure(proc.stderr, probes))
    bodies = _mir_body_lines(proc.stdout)
    missing = [p.name for p in probes if p.name not in bodies]
    if missing:
        raise HazardOracleError(f"llc output lacks functions {missing[:5]}")
    return {p.name: fold(bodies[p.name]) for p in probes}


def _key(version: str, mir: str) -> str:
    return hashlib.sha256((version + "\0" + mir).encode()).hexdigest()


def llc_batch(probes: Sequence, args: Sequence[str], fold, llc: Path | None = None, cache_dir: Path | None = None,
              jobs: int | None = None) -> dict[str, list[list]]:
    """Run llc with `args` over every probe's MIR and fold each function's output body; shared by the
    hazard and the wait-counter oracles. Results are cached in `cache_dir` (default
    ``<repo>/.flyasm-cache/llc_hazard``) keyed by the MIR text and llc's ``--version``; missing
    ones are computed in `jobs` parallel llc runs."""
    names = [p.name for p in probes]
    if len(set(names)) != len(names):
        raise HazardOracleError("probe names must be unique")
    llc = _tool(llc, "llc")
    version = llc_version(llc)
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    cache_file = cache_dir / f"llc-{hashlib.sha256(version.encode()).hexdigest()[:16]}.json"
    try:
        cache = json.loads(cache_file.read_text())
    except (OSError, ValueError):
        cache = {}
    keys = {p.name: _key(version + "\0" + " ".join(args), p.mir) for p in probes}
    todo = [p for p in probes if keys[p.name] not in cache]
    if todo:
        jobs = max(1, min(jobs or min(2, os.cpu_count() or 1), len(todo)))
        chunks = [todo[i::jobs] for i in range(jobs)]
        with ThreadPoolExecutor(jobs) as ex:
            for res in ex.map(lambda c: _run_llc(llc, c, args, fold), chunks):
                for name, insts in res.items():
                    cache[keys[name]] = [list(t) for t in insts]
        try:
            cache_dir.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=cache_dir, suffix=".tmp")
            with os.fdopen(fd, "w") as f:
                json.dump(cache, f, separators=(",", ":"), sort_keys=True)
            os.replace(tmp, cache_file)
        except OSError:
            pass  # a read-only cache is not an error
    return {p.name: cache[keys[p.name]] for p in probes}


def llc_instructions(probes: Sequence[Probe], llc: Path | None = None, cache_dir: Path | None = None,
                     jobs: int | None = None) -> dict[str, list[tuple[str, int]]]:
    """For each probe: llc's instructions after hazard recognition as (opcode, wait states before it)."""
    got = llc_batch(probes, LLC_ARGS, _fold_nops, llc, cache_dir, jobs)
    return {name: [(op, int(ws)) for op, ws in insts] for name, insts in got.items()}


def llc_wait_states(probes: Sequence[Probe], llc: Path | None = None,
                    cache_dir: Path | None = None) -> dict[str, list[int]]:
    """For each probe, one entry per asm instruction (labels excluded): the wait states llc inserted
    immediately before it (sum of N+1 over the S_NOP N placed there; 0 if none)."""
    insts = llc_instructions(probes, llc, cache_dir)
    out = {}
    for p in probes:
        got = insts[p.name]
        n = len(p.instructions)
        if len(got) != n:
            raise HazardOracleError(f"{p.name}: llc returned {len(got)} instructions for {n} asm instructions: "
                                    f"{[op for op, _ in got]}")
        out[p.name] = [ws for _, ws in got]
    return out


def _asm_batch(probes: Sequence[Probe]) -> tuple[str, list[int]]:
    """All probes in one .s text (labels made unique); owner[i] = probe index of line i+1."""
    lines, owner = [], []
    for i, p in enumerate(probes):
        lines.append(f".Lprobe_{i}:")
        owner.append(i)
        for line in p.asm:
            lines.append(re.sub(r"\.LBB0_(\d+)", rf".LBB{i}_\1", line))
            owner.append(i)
    return "\n".join(lines) + "\n", owner


def _run_mc(llvm_mc: Path, text: str, *extra: str) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="flyasm-hazard-") as td:
        src = Path(td) / "probes.s"
        src.write_text(text)
        return subprocess.run([str(llvm_mc), *MC_ARGS, *extra, str(src)], capture_output=True, text=True,
                              cwd=td)


def validate_asm(probes: Sequence[Probe], llvm_mc: Path | None = None) -> dict[str, list[str]]:
    """Assemble every probe's asm with llvm-mc in one batch; {probe name: [errors]} (empty: all good)."""
    mc = _tool(llvm_mc, "llvm-mc")
    text, owner = _asm_batch(probes)
    proc = _run_mc(mc, text, "-filetype=obj", "-o", os.devnull)
    errors: dict[str, list[str]] = {}
    for m in re.finditer(r"^[^\n]*?:(\d+):\d+: error: ([^\n]*)", proc.stderr, re.M):
        ln = int(m.group(1))
        name = probes[owner[ln - 1]].name if 0 < ln <= len(owner) else "?"
        errors.setdefault(name, []).append(f"line {ln}: {m.group(2)}: {text.splitlines()[ln - 1].strip()}")
    if proc.returncode != 0 and not errors:
        errors["?"] = [proc.stderr.strip()]
    return errors


@dataclass(frozen=True)
class McInst:
    opcode: str              # MC opcode name, e.g. V_MFMA_F32_32X32X16_BF16_gfx940_vcd
    regs: tuple[str, ...]    # register operands in order, e.g. ("VGPR0_VGPR1", "SGPR4")
    imms: tuple[int, ...]    # immediate operands in order


def mc_instructions(probes: Sequence[Probe], llvm_mc: Path | None = None) -> dict[str, list[McInst]]:
    """llvm-mc's view (-show-inst) of every probe instruction: opcode and operands."""
    mc = _tool(llvm_mc, "llvm-mc")
    text, _ = _asm_batch(probes)
    proc = _run_mc(mc, text, "-show-inst")
    if proc.returncode != 0:
        raise HazardOracleError(f"llvm-mc -show-inst failed:\n{proc.stderr[:2000]}")
    out: dict[str, list[McInst]] = {p.name: [] for p in probes}
    cur: list[McInst] | None = None
    op, regs, imms = None, [], []

    def flush():
        nonlocal op
        if op is not None:
            cur.append(McInst(op, tuple(regs), tuple(imms)))
        op = None

    for line in proc.stdout.splitlines():
        if m := re.match(r"^\.Lprobe_(\d+):", line):
            flush()
            cur = out[probes[int(m.group(1))].name]
            continue
        if m := re.search(r"<MCInst #\d+ (\S+)", line):
            flush()
            op, regs, imms = m.group(1), [], []
        for kind, val in re.findall(r"<MCOperand (Reg|Imm|Expr):([^>]*)>", line):
            if kind == "Reg":
                regs.append(val)
            elif kind == "Imm":
                imms.append(int(val))
    flush()
    return out


_DROP = {"vi", "gfx9", "gfx90a", "gfx940", "gfx950", "vcd", "acd", "vgprcd", "e64"}
_ALIAS = {"V_ADDC_CO_U32_e32": "V_ADDC_U32_e32"}


def normalize_opcode(name: str) -> str:
    """MC and MIR opcode names reduced to a common form (encoding/subtarget suffixes dropped)."""
    n = "_".join(t for t in name.split("_") if t not in _DROP)
    return _ALIAS.get(n, n)


def mir_operands(line: str) -> tuple[str, tuple[str, ...], tuple[int, ...]]:
    """(opcode, explicit register operands, immediate operands), in order, of a MIR instruction line."""
    defs, _, rest = line.partition(" = ") if re.match(r"^(\$|renamable|dead|early-clobber)", line) else ("", "", line)
    op = _opcode(rest)
    uses = rest.split(op, 1)[1]
    regs, imms = [], []
    for part in [*defs.split(","), *uses.split(",")]:
        part = part.strip()
        if not part or part.startswith("implicit"):
            continue
        tok = part.split()[-1]
        if tok.startswith("$"):
            regs.append(re.sub(r"\(.*\)$", "", tok)[1:].upper())
        elif re.fullmatch(r"-?\d+", tok):
            imms.append(int(tok))
    return op, tuple(regs), tuple(imms)


def _imms_agree(opcode: str, mc: tuple[int, ...], mir: tuple[int, ...]) -> bool:
    """MC and MIR immediates agree, up to two spelling differences: MC writes the VOP3P op_sel_hi
    operand as -1 where the MIR pseudo carries 0 (the bits live in the src modifiers), and MUBUF
    atomics carry one more trailing MC immediate."""
    if opcode.startswith("BUFFER_ATOMIC") and len(mc) == len(mir) + 1:
        mc = mc[:-1]
    if len(mc) != len(mir):
        return False
    vop3p = opcode.startswith(("V_PK_", "V_DOT"))
    return all(x == y or (vop3p and x == -1 and y == 0) for x, y in zip(mc, mir))


def asm_mir_mismatches(probes: Sequence[Probe], llvm_mc: Path | None = None) -> list[str]:
    """Places where a probe's MIR is not the same instruction as its asm: opcode, register operands
    and immediates (llvm-mc -show-inst against the MIR text)."""
    mc = mc_instructions(probes, llvm_mc)
    bad = []
    for p in probes:
        mir = next(iter(_mir_body_lines(p.mir).values()))
        if len(mir) != len(mc[p.name]):
            bad.append(f"{p.name}: {len(mc[p.name])} asm instructions, {len(mir)} MIR instructions")
            continue
        for i, (line, inst) in enumerate(zip(mir, mc[p.name])):
            op, regs, imms = mir_operands(line)
            mc_regs = tuple(re.sub(r"_gfxpre11$", "", r) for r in inst.regs)
            if normalize_opcode(op) != normalize_opcode(inst.opcode):
                bad.append(f"{p.name}[{i}]: asm opcode {inst.opcode}, MIR opcode {op}")
            elif regs != mc_regs:
                bad.append(f"{p.name}[{i}] {op}: asm registers {mc_regs}, MIR registers {regs}")
            elif not _imms_agree(op, inst.imms, imms):
                bad.append(f"{p.name}[{i}] {op}: asm immediates {inst.imms}, MIR immediates {imms}")
    return bad


# --------------------------------------------------------------------------------------------
# Summary: python tests/oracles/hazard_probes.py
# --------------------------------------------------------------------------------------------

def table_disagreements(probes: Sequence[Probe], ws: dict[str, list[int]]) -> list[tuple[Probe, int]]:
    """Probes whose llc number for the consumer differs from note_ws: [(probe, llc value)]."""
    out = []
    for p in probes:
        if p.note_ws is None:
            continue
        got = ws[p.name][p.consumer_index]
        if got != p.note_ws:
            out.append((p, got))
    return out


def main(argv: Sequence[str] = ()) -> int:
    seed = int(argv[0]) if argv else 0
    probes = generate_probes(seed)
    t0 = time.perf_counter()
    errs = validate_asm(probes)
    t1 = time.perf_counter()
    with tempfile.TemporaryDirectory() as td:
        ws = llc_wait_states(probes, cache_dir=Path(td))
    t2 = time.perf_counter()
    print(f"{len(probes)} probes; llvm-mc {t1 - t0:.2f}s, llc (uncached) {t2 - t1:.2f}s; asm errors: {len(errs)}")
    for name, e in errs.items():
        print("  ASM", name, e[:2])
    counts = Counter(p.rule for p in probes)
    for rule, (row, desc) in RULES.items():
        print(f"  {counts[rule]:4d}  row {row if row is not None else '-':>2}  {rule:28s} {desc}")
    print("llc differs from the notes' table (note_ws):")
    for p, got in table_disagreements(probes, ws):
        tag = "known" if p.known_diff else ("BOUND" if p.llvm_bound_bug else "NEW")
        print(f"  [{tag}] {p.name}: table {p.note_ws}, llc {got}  {p.known_diff}")
    unclean = [p.name for p in probes if p.clean and any(w for i, w in enumerate(ws[p.name]) if i != p.consumer_index)]
    print("probes with unexpected extra nops:", unclean)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
