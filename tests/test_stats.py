"""stats(): exact counts on a kernel built from known instructions, occupancy formulas, corpus."""
from __future__ import annotations

import json

import pytest

from flyasm import Kernel, s, v
from flyasm.isa.syntax import parse_instruction
from flyasm.report.stats import format_stats, occupancy, stats


def known_kernel() -> Kernel:
    k = Kernel("known", block=256, lds=32768)
    with k.region("setup"):
        k.s_load_dwordx4(s[8:11], k.kernarg_ptr, 0)                  # smem
        k.s_mov_b32(s[12], 4)                                         # salu
        k.s_waitcnt(lgkmcnt=0)                                        # waitcnt 1
    k.label("loop")
    with k.region("body"):
        with k.region("mma"):
            k.v_mfma_f32_32x32x16_bf16(v[16:31], v[4:7], v[8:11], v[16:31])   # 8 passes
            k.v_mfma_f32_16x16x32_bf16(v[32:35], v[4:7], v[8:11], v[32:35])   # 4 passes
            k.v_mfma_f32_32x32x16_bf16(v[16:31], v[4:7], v[8:11], v[16:31])
        with k.region("mem"):
            k.buffer_load_dwordx4(v[1], s[8:11], 0, offen=True, lds=True)     # LDS-DMA
            k.buffer_load_dword(v[2], v[1], s[8:11], 0, offen=True)           # vmem load
            k.buffer_store_dword(v[2], v[1], s[8:11], 0, offen=True)          # vmem store
            k.ds_read_b128(v[40:43], v[1])
            k.ds_read_b128(v[44:47], v[1])
            k.ds_write_b64(v[1], v[40:41])
            k.s_waitcnt(vmcnt=0, lgkmcnt=0)                                   # waitcnt 2
        k.v_exp_f32(v[3], v[2])                                               # trans
        k.v_permlane32_swap_b32(v[40], v[41])                                 # valu + permlane
        k.emit(parse_instruction("v_mov_b32_dpp v1, v2 quad_perm:[1,0,3,2] row_mask:0xf bank_mask:0xf"))
        k.s_nop(3)                                                            # 4 wait states
        k.s_nop(0)                                                            # 1 wait state
        k.s_setprio(2)
        k.s_barrier()
        k.s_sub_u32(s[12], s[12], 1)
        k.s_cmp_lg_u32(s[12], 0)
        k.s_cbranch_scc1(k.L("loop"))
    k.s_endpgm()
    return k


def test_exact_counts():
    d = stats(known_kernel())
    c = d["counts"]
    expect = {"mfma": 3, "valu": 2, "trans": 1, "salu": 3, "smem": 1, "ds_read": 2, "ds_write": 1, "vmem_load": 1,
              "vmem_store": 1, "lds_dma": 1, "s_waitcnt": 2, "s_nop": 2, "s_barrier": 1, "s_setprio": 1,
              "branch": 1, "s_endpgm": 1, "permlane": 1, "dpp": 1, "nop_wait_states": 5,
              "mfma_cycles": 32 + 16 + 32, "total": 24}
    assert {k_: c[k_] for k_ in expect} == expect
    assert sum(c[k_] for k_ in ("mfma", "valu", "trans", "salu", "smem", "ds_read", "ds_write", "ds_atomic",
                                "vmem_load", "vmem_store", "vmem_atomic", "lds_dma", "flat", "s_waitcnt",
                                "s_nop", "s_barrier", "s_setprio", "branch", "s_endpgm", "other")) == c["total"]
    assert c["mfma_by_shape"] == {"v_mfma_f32_16x16x32_bf16": {"count": 1, "passes": 4, "cycles": 16},
                                  "v_mfma_f32_32x32x16_bf16": {"count": 2, "passes": 8, "cycles": 64}}


def test_regions_blocks_loops():
    d = stats(known_kernel())
    regs = {r["name"]: r for r in d["regions"]}
    assert set(regs) == {"setup", "body", "body/mma", "body/mem"}
    assert (regs["body/mma"]["mfma"], regs["body/mma"]["total"]) == (3, 3)
    assert (regs["body/mem"]["total"], regs["body/mem"]["lds_dma"]) == (7, 1)
    assert regs["body"]["total"] == 20 and regs["setup"]["total"] == 3
    (lp,) = d["loops"]
    assert (lp["name"], lp["start"], lp["end"], lp["mfma"]) == (".Lloop", 3, 23, 3)
    assert [(b["start"], b["end"]) for b in d["blocks"]] == [(0, 3), (3, 23), (23, 24)]


def test_registers_and_descriptor():
    d = stats(known_kernel())
    u, dd = d["registers"]["used"], d["registers"]["descriptor"]
    assert (u["vgpr"], u["agpr"], u["sgpr"]) == (48, 0, 13)
    assert dd["next_free_vgpr"] == 48 and dd["vgpr_alloc"] == 48
    assert d["lds"] == 32768 and d["scratch"] == 0
    o = d["occupancy"]
    # 512 // 48 = 10 -> capped at 8 waves; 4 waves per workgroup; LDS: 163840 // 32768 = 5 workgroups
    assert (o["waves_per_simd_by_vgpr"], o["waves_per_workgroup"], o["workgroups_per_cu_by_lds"]) == (8, 4, 5)
    assert o["workgroups_per_cu"] == 5 and o["waves_per_simd"] == 5.0 and o["limited_by"] == ["lds"]
    json.dumps(d)   # JSON-serialisable
    text = format_stats(d)
    assert "v_mfma_f32_32x32x16_bf16" in text and "occupancy: 5 waves/SIMD" in text


@pytest.mark.parametrize("args,waves,wg,limit", [
    ((256, 50, 0, 512), 2.0, 1, ["vgpr"]),          # 512/256 = 2 waves/SIMD; 8 waves per workgroup
    ((128, 50, 65536, 256), 2.0, 2, ["lds"]),       # LDS: 2 workgroups of 4 waves over 4 SIMDs
    ((64, 104, 0, 64), 7.0, 28, ["sgpr"]),          # >100 SGPRs: 7 waves (LLVM GFX9 table)
    ((24, 20, 0, 64), 8.0, 32, ["wave slots"]),
    ((512, 20, 0, 1024), 0.0, 0, ["vgpr"]),         # 16 waves cannot fit in 4 wave slots
])
def test_occupancy_formulas(args, waves, wg, limit):
    o = occupancy(*args)
    assert (o["waves_per_simd"], o["workgroups_per_cu"], o["limited_by"]) == (waves, wg, limit)
    assert o["fits"] == (wg >= 1)


def test_asm_file_gives_the_same_counts(tmp_path):
    k = known_kernel()
    p = tmp_path / "known.s"
    p.write_text(k.to_asm())
    a, b = stats(k), stats(str(p))
    assert a["counts"] == b["counts"]
    assert [(r["name"], r["total"]) for r in a["regions"]] == [(r["name"], r["total"]) for r in b["regions"]]


def test_corpus_kernel(corpus):
    ck = corpus["mfma_16x16x32_f16_kloop"]
    d = stats(str(ck.path))
    md = ck.kernel_metadata()
    assert d["registers"]["descriptor"]["arch_vgprs"] == md[".vgpr_count"]
    assert d["registers"]["used"]["vgpr"] <= d["registers"]["descriptor"]["vgpr_alloc"]
    assert d["counts"]["mfma_by_shape"] == {"v_mfma_f32_16x16x32_f16": {"count": 1, "passes": 4, "cycles": 16}}
    assert len(d["loops"]) == 1 and d["loops"][0]["mfma"] == 1
    # the objdump padding after s_endpgm is not counted
    assert d["counts"]["s_endpgm"] == 1 and d["counts"]["total"] == len(ck.instructions())
