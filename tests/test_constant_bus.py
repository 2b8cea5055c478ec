"""Builders refuse a VALU instruction that reads more than one scalar value (the constant bus limit
of gfx9-family VALU encodings; LLVM AMDGPUAsmParser::getConstantBusLimit is 1 before GFX10, and
validateConstantBusLimitations counts each distinct SGPR / VCC / EXEC / M0 / src_* value, the literal
and an implicit VCC or M0 read once). llvm-mc is the oracle: over a set of operand combinations,
our builder accepts exactly what llvm-mc encodes, and refuses the rest with one sentence at the
user's line."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from flyasm.errors import OperandError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from oracles.hazard_probes import find_tool  # noqa: E402
from oracles.mc_verdicts import refusals_agree  # noqa: E402

pytestmark = pytest.mark.skipif(find_tool("llvm-mc") is None, reason="llvm-mc (LLVM 22) is not installed")

# Each line is legal or refused by llvm-mc for its scalar sources alone (other operand rules hold).
LINES = [
    "v_writelane_b32 v0, s40, s16", "v_writelane_b32 v0, s40, m0", "v_writelane_b32 v0, m0, s16",
    "v_writelane_b32 v0, s16, s16", "v_writelane_b32 v0, vcc_lo, s16", "v_writelane_b32 v0, exec_lo, m0",
    "v_writelane_b32 v0, s40, 5", "v_writelane_b32 v0, m0, m0", "v_writelane_b32 v0, vcc_lo, exec_lo",
    "v_readlane_b32 s0, v1, s2", "v_readlane_b32 s0, v1, m0",
    "v_add_f32_e64 v0, s1, s2", "v_add_f32_e64 v0, s1, s1", "v_add_f32_e64 v0, s1, m0",
    "v_add_f32_e64 v0, vcc_lo, s1", "v_add_f32_e64 v0, s1, 1.0", "v_add_f32_e64 v0, ttmp0, s1",
    "v_add_f32_e64 v0, src_shared_base, s1", "v_add_f32_e64 v0, src_scc, s1", "v_add_f32_e64 v0, flat_scratch_lo, s1",
    "v_add_u32_e64 v0, s0, exec_lo", "v_add_f32_e32 v0, s1, v2", "v_add_f32_e32 v0, 0x40400000, v2",
    "v_fma_f32 v0, s0, s1, v2", "v_fma_f32 v0, s0, s0, v2", "v_fma_f32 v0, s0, v1, s0", "v_fma_f32 v0, s0, v1, m0",
    "v_div_fmas_f32 v0, v0, v1, v2", "v_div_fmas_f32 v0, 1.0, v1, v2",
    "v_addc_co_u32_e64 v0, s[2:3], v0, v1, s[4:5]", "v_cndmask_b32_e64 v0, v0, v1, s[2:3]",
    "v_cndmask_b32_e64 v0, 1, v1, s[2:3]",
    "v_pk_fma_f32 v[0:1], s[0:1], s[2:3], v[4:5]", "v_pk_fma_f32 v[0:1], s[0:1], s[0:1], v[4:5]",
    "v_pk_add_f32 v[0:1], s[0:1], v[2:3]",
    "v_add_f32_sdwa v0, s0, s1 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:DWORD src1_sel:DWORD",
    "v_add_f32_sdwa v0, s0, v1 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:DWORD src1_sel:DWORD",
    "v_cmp_eq_u32_e64 s[0:1], s2, s3", "v_cmp_eq_u32_e64 s[0:1], s2, s2", "v_cmp_eq_u32_e32 vcc, s2, v3",
    "v_mul_lo_u32 v0, s0, s1", "v_lshlrev_b64 v[0:1], s0, s[2:3]", "v_bfe_u32 v0, s0, s1, 8",
    "v_bfe_u32 v0, s0, 8, s0", "v_cvt_pk_bf16_f32 v0, s0, s1", "v_mad_u64_u32 v[0:1], s[2:3], s0, s1, v[4:5]",
    "v_mad_u64_u32 v[0:1], s[2:3], s0, v1, s[4:5]", "v_readfirstlane_b32 s0, v1", "v_mov_b32_e32 v0, s1",
    "v_mov_b32_e32 v0, 0x1234", "v_cvt_pk_f32_fp8_e64 v[0:1], s0",
]


def test_builders_accept_what_llvm_mc_accepts():
    # the set holds only this kind of refusal
    refused = refusals_agree(LINES, mc_says="constant bus", we_say="constant bus")
    assert 15 <= refused < len(LINES)          # both verdicts are exercised


def test_the_error_points_at_the_users_line(tmp_path):
    src = tmp_path / "user_kernel.py"
    src.write_text("from flyasm import Kernel, v, s\n"
                   "k = Kernel('x', block=64)\n"
                   "k.v_writelane_b32(v[0], s[40], s[16])\n")
    with pytest.raises(OperandError) as ei:
        exec(compile(src.read_text(), str(src), "exec"), {})
    err = ei.value
    assert err.loc is not None and Path(err.loc.file).name == "user_kernel.py" and err.loc.line == 3, err.loc
    assert "v_writelane_b32 reads 2 scalar values (s40, s16)" in err.message
