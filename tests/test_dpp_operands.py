"""Builders give DPP the operands llvm-mc gives it: the DPP word takes the place of src0's 9-bit
field, so every source of a VOP1/VOP2 DPP instruction is a VGPR (no SGPR, AGPR, M0, VCC, EXEC or
constant) and a carry is VCC itself; SDWA keeps scalar sources on gfx9. llvm-mc is the oracle:
each line below is encoded or refused by it, and the builder must agree, refusing with one sentence."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest


sys.path.insert(0, str(Path(__file__).resolve().parent))
from oracles.hazard_probes import find_tool  # noqa: E402
from oracles.mc_verdicts import refusals_agree  # noqa: E402

pytestmark = pytest.mark.skipif(find_tool("llvm-mc") is None, reason="llvm-mc (LLVM 22) is not installed")

SRCS = ["v1", "s1", "a1", "1", "m0", "vcc_lo", "exec_lo"]
LINES = (
    [f"v_mov_b32_dpp v0, {x} row_shl:1 row_mask:0xf bank_mask:0xf" for x in SRCS]
    + [f"v_mov_b32 v0, {x} quad_perm:[1,0,3,2] row_mask:0xf bank_mask:0xf" for x in SRCS[:3]]
    + [f"v_add_f32_dpp v0, v1, {x} row_ror:3 row_mask:0xf bank_mask:0xf" for x in SRCS]
    + [f"v_add_f32_dpp v0, {x}, v2 row_bcast:15 row_mask:0xa bank_mask:0xf" for x in SRCS[:4]]
    + ["v_cndmask_b32_dpp v0, v1, v2, vcc quad_perm:[0,1,2,3] row_mask:0xf bank_mask:0xf",
       "v_cndmask_b32_dpp v0, s1, v2, vcc quad_perm:[0,1,2,3] row_mask:0xf bank_mask:0xf",
       "v_cndmask_b32_dpp v0, v1, v2, s[2:3] quad_perm:[0,1,2,3] row_mask:0xf bank_mask:0xf",
       "v_addc_co_u32_dpp v0, vcc, v1, v2, vcc quad_perm:[0,1,2,3] row_mask:0xf bank_mask:0xf",
       "v_addc_co_u32_dpp v0, vcc, s1, v2, vcc quad_perm:[0,1,2,3] row_mask:0xf bank_mask:0xf",
       "v_add_f32_dpp v0, -v1, |v2| row_shl:1 row_mask:0xf bank_mask:0xf",
       "v_add_f32_dpp v0, v1, v2 row_shl:1 row_mask:0xf bank_mask:0xf bound_ctrl:1",
       # SDWA on gfx9 keeps SGPR sources: the DPP rule must not leak into it
       "v_add_f32_sdwa v0, s1, v2 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:WORD_1 src1_sel:DWORD",
       "v_add_f32_sdwa v0, v1, s2 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:WORD_1 src1_sel:DWORD",
       # VOP3 v_permlane*_swap takes bound_ctrl/fi without being DPP
       "v_permlane32_swap_b32_e64 v0, v1 bound_ctrl:1 fi:1"]
)


def test_dpp_sources_follow_llvm_mc():
    refused = refusals_agree(LINES, we_say="not")
    assert 10 <= refused <= len(LINES) - 8         # both verdicts are exercised
