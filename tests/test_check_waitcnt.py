"""Wait-counter model: in-order vmcnt, DS in order / SMEM out of order on lgkmcnt, FLAT on both,
LDS DMA -> ds_read, loop-carried loads, barriers, counter limits, suggested fixes."""
from __future__ import annotations

from flyasm.check import check_program, program_from_lines
from flyasm.check.waitcnt import check_waitcnt


def wc(*lines):
    return check_waitcnt(program_from_lines(lines))


def rules(fs):
    return [(f.rule, f.consumer.index, f.producer.index) for f in fs]


def test_vmem_in_order_largest_vmcnt():
    p = ("global_load_dword v1, v[10:11], off", "global_load_dword v2, v[10:11], off",
         "global_store_dword v[10:11], v9, off", "v_add_f32_e32 v3, v1, v4")
    f = wc(*p)
    assert rules(f) == [("vm_raw", 3, 0)]
    assert f[0].fix == "s_waitcnt vmcnt(2)" and "v1" in f[0].message
    assert wc(*p[:3], "s_waitcnt vmcnt(2)", p[3]) == []
    assert rules(wc(*p[:3], "s_waitcnt vmcnt(3)", p[3])) == [("vm_raw", 4, 0)]


def test_waw_and_load_order():
    assert rules(wc("global_load_dword v1, v[10:11], off", "v_mov_b32 v1, 0")) == [("vm_waw", 1, 0)]
    # two in-order loads to one register: the later lands last
    assert wc("global_load_dword v1, v[10:11], off", "global_load_dword v1, v[12:13], off") == []


def test_smem_out_of_order_needs_lgkmcnt0():
    p = ("s_load_dwordx2 s[4:5], s[0:1], 0", "ds_read_b32 v1, v2", "s_waitcnt lgkmcnt(1)",
         "s_add_u32 s6, s4, 1")
    f = wc(*p)
    assert rules(f) == [("lgkm_raw", 3, 0)] and f[0].fix == "s_waitcnt lgkmcnt(0)"
    # DS ops are in order: lgkmcnt(1) retires the older ds_read
    assert wc("ds_read_b32 v1, v2", "ds_read_b32 v3, v2", "s_waitcnt lgkmcnt(1)", "v_mov_b32 v4, v1") == []
    assert rules(wc("ds_read_b32 v1, v2", "ds_read_b32 v3, v2", "s_waitcnt lgkmcnt(1)",
                    "v_mov_b32 v4, v3")) == [("lgkm_raw", 3, 1)]


def test_flat_counts_on_both():
    p = ("flat_load_dword v1, v[2:3]", "ds_read_b32 v5, v6")
    assert rules(wc(*p, "s_waitcnt lgkmcnt(1)", "v_mov_b32 v4, v1")) == [("vm_raw", 3, 0)]
    assert wc(*p, "s_waitcnt vmcnt(0)", "v_mov_b32 v4, v1") == []
    assert wc(*p, "s_waitcnt lgkmcnt(0)", "v_mov_b32 v4, v1") == []


def test_lds_dma_then_ds_read():
    p = ("s_mov_b32 m0, s20", "buffer_load_dword v1, s[8:11], 0 offen lds", "ds_read_b32 v2, v3")
    f = wc(*p)
    assert rules(f) == [("lds_dma_read", 2, 1)] and f[0].fix == "s_waitcnt vmcnt(0)"
    assert wc(*p[:2], "s_waitcnt vmcnt(0)", p[2]) == []
    # waiting on lgkmcnt does not help: the DMA is counted by vmcnt
    assert rules(wc(*p[:2], "s_waitcnt lgkmcnt(0)", p[2])) == [("lds_dma_read", 3, 1)]


def test_loop_carried_load():
    p = (".L1:", "v_add_f32_e32 v3, v1, v4", "global_load_dword v1, v[10:11], off", "s_cbranch_scc0 .L1",
         "s_endpgm")
    assert rules(wc(*p)) == [("vm_raw", 1, 2)]
    ok = (".L1:", "s_waitcnt vmcnt(0)", "v_add_f32_e32 v3, v1, v4", "global_load_dword v1, v[10:11], off",
          "s_cbranch_scc0 .L1", "s_endpgm")
    assert wc(*ok) == []


def test_barrier_with_outstanding_lds_write():
    p = ("ds_write_b32 v1, v2", "s_barrier", "ds_read_b32 v3, v1")
    f = wc(*p)
    assert ("lds_write_before_barrier", 1, 0) in rules(f)
    assert wc("ds_write_b32 v1, v2", "s_waitcnt lgkmcnt(0)", "s_barrier", "ds_read_b32 v3, v1") == []
    # nothing reads LDS after the barrier: no finding
    assert wc("ds_write_b32 v1, v2", "s_barrier", "s_endpgm") == []


def test_counter_limit_implies_completion():
    loads = [f"global_load_dword v{20 + i}, v[10:11], off" for i in range(16)]
    # 16 DS reads after a DS read: lgkmcnt holds 15, so the first one is complete
    ds = [f"ds_read_b32 v{100 + i}, v2" for i in range(16)]
    assert wc(*ds, "v_mov_b32 v1, v100") == []
    assert rules(wc(*ds[:15], "v_mov_b32 v1, v100")) == [("lgkm_raw", 15, 0)]
    assert rules(wc(*loads, "v_mov_b32 v1, v20")) == [("vm_raw", 16, 0)]


def test_store_data_is_not_a_counter_matter():
    # store data is read at issue; the wide-store overwrite is the 2-wait-state hazard (row 27)
    p = program_from_lines(["buffer_store_dwordx4 v[0:3], off, s[8:11], 0", "s_nop 1", "v_mov_b32 v2, v9"])
    assert check_program(p) == []
