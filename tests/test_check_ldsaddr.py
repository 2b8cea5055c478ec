"""LDS address analysis (flyasm/check/ldsaddr.py): each modelled instruction against a formula
written here, DMA and DS footprints, wave-by-wave and cross-wave relations, loop-rotated buffers,
and what the wait-counter checker makes of them (error / unproven / nothing)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from flyasm.check import check_program
from flyasm.check.cfg import program_from_lines
from flyasm.check.ldsaddr import LdsAddressAnalysis

M = 0xFFFFFFFF
BLOCK = 256                      # 4 waves
TID = list(range(BLOCK))


def s24(x):
    x &= 0xFFFFFF
    return x - (1 << 24) if x & 0x800000 else x


# name -> formula on Python ints (a: thread id, b, c: SGPR constants); written from the ISA text
VALU = {
    "v_add_u32": lambda a, b: a + b, "v_sub_u32": lambda a, b: a - b, "v_subrev_u32": lambda a, b: b - a,
    "v_mul_lo_u32": lambda a, b: a * b, "v_mul_u32_u24": lambda a, b: (a % 2**24) * (b % 2**24),
    "v_mul_i32_i24": lambda a, b: s24(a) * s24(b),
    "v_lshlrev_b32": lambda a, b: b << (a % 32), "v_lshrrev_b32": lambda a, b: b >> (a % 32),
    "v_and_b32": lambda a, b: a & b, "v_or_b32": lambda a, b: a | b, "v_xor_b32": lambda a, b: a ^ b,
    "v_min_u32": min, "v_max_u32": max,
}
VALU3 = {
    "v_lshl_add_u32": lambda a, b, c: ((a << (b % 32)) & M) + c, "v_add_lshl_u32": lambda a, b, c: ((a + b) & M) << (c % 32),
    "v_lshl_or_b32": lambda a, b, c: ((a << (b % 32)) & M) | c, "v_and_or_b32": lambda a, b, c: (a & b) | c,
    "v_or3_b32": lambda a, b, c: a | b | c, "v_add3_u32": lambda a, b, c: a + b + c,
    "v_bfe_u32": lambda a, b, c: (a >> (b % 32)) & ((1 << (c % 32)) - 1),
    "v_mad_u32_u24": lambda a, b, c: (a % 2**24) * (b % 2**24) + c,
}
SALU = {
    "s_add_u32": lambda a, b: a + b, "s_sub_u32": lambda a, b: a - b, "s_mul_i32": lambda a, b: a * b,
    "s_lshl_b32": lambda a, b: a << (b % 32), "s_lshr_b32": lambda a, b: a >> (b % 32),
    "s_and_b32": lambda a, b: a & b, "s_or_b32": lambda a, b: a | b, "s_xor_b32": lambda a, b: a ^ b,
    "s_lshl2_add_u32": lambda a, b: (a << 2) + b, "s_min_u32": min, "s_max_u32": max,
}


def analyse(lines, block=BLOCK):
    items = program_from_lines(lines + ["s_endpgm"])
    return items, LdsAddressAnalysis(items, block)


def read_addr(lines, block=BLOCK):
    """The analysed per-thread address of a final `ds_read_b32 v9, v5`."""
    items, a = analyse(lines + ["ds_read_b32 v9, v5"], block)
    return a.starts(len(items) - 2)


consts = st.integers(0, M)


@settings(max_examples=30, deadline=None)
@given(name=st.sampled_from(sorted(VALU)), b=consts)
def test_valu_two_operand(name, b):
    got = read_addr([f"s_mov_b32 s2, 0x{b:x}", f"{name} v5, v0, s2"])
    assert got is not None and len(got) == 1
    assert got[0].tolist() == [VALU[name](t, b) & M for t in TID]


@settings(max_examples=30, deadline=None)
@given(name=st.sampled_from(sorted(VALU3)), b=consts, c=consts)
def test_valu_three_operand(name, b, c):
    got = read_addr([f"s_mov_b32 s2, 0x{b:x}", f"s_mov_b32 s3, 0x{c:x}", f"{name} v5, v0, s2, s3"])
    assert got[0].tolist() == [VALU3[name](t, b, c) & M for t in TID]


@settings(max_examples=30, deadline=None)
@given(name=st.sampled_from(sorted(SALU)), b=consts)
def test_salu_on_wave_id(name, b):
    # s4 = wave id (first lane's v0 >> 6), then the SALU op, then broadcast to every lane
    got = read_addr(["v_lshrrev_b32 v1, 6, v0", "v_readfirstlane_b32 s4, v1", f"s_mov_b32 s2, 0x{b:x}",
                     f"{name} s5, s4, s2", "v_mov_b32 v5, s5"])
    assert got[0].tolist() == [SALU[name](t // 64, b) & M for t in TID]


def test_lane_id_from_mbcnt_and_packed_workitem_ids():
    got = read_addr(["v_mbcnt_lo_u32_b32 v5, -1, 0", "v_mbcnt_hi_u32_b32 v5, -1, v5"])
    assert got[0].tolist() == [t % 64 for t in TID]
    # a (16, 8) block: v0 packs x | y << 10; y = v0 >> 10 & 0x3ff
    got = read_addr(["v_lshrrev_b32 v1, 10, v0", "v_and_b32 v5, 0x3ff, v1"], block=(16, 8))
    assert got[0].tolist() == [t // 16 for t in range(128)]


def test_cselect_gives_two_alternatives_and_a_load_gives_unknown():
    got = read_addr(["s_cmp_eq_u32 s0, 0", "s_cselect_b32 s4, 0x100, 0x2000", "v_lshl_add_u32 v5, v0, 2, s4"])
    assert sorted(a.tolist()[:2] for a in got) == [[0x100, 0x104], [0x2000, 0x2004]]
    assert read_addr(["global_load_dword v5, v[2:3], off", "s_waitcnt vmcnt(0)"]) is None
    assert read_addr(["v_lshlrev_b32 v5, 2, v0"], block=None) is None        # no block shape: no ids


def test_partial_exec_makes_a_vgpr_write_unknown():
    assert read_addr(["v_cmpx_gt_u32 vcc, 7, v0", "v_lshlrev_b32 v5, 2, v0"]) is None
    assert read_addr(["v_cmpx_gt_u32 vcc, 7, v0", "s_mov_b64 exec, -1", "v_lshlrev_b32 v5, 2, v0"]) is not None


def test_ds_and_dma_footprints_and_relations():
    # DMA: lane L of wave w writes 16 bytes at m0 = 0x1000 * w, + offset 16 + 16 L (notes §3.3)
    lines = ["v_lshrrev_b32 v1, 6, v0", "v_readfirstlane_b32 s4, v1", "s_lshl_b32 s5, s4, 12",
             "s_mov_b32 m0, s5", "s_nop 0", "buffer_load_dwordx4 v2, s[8:11], 0 offen offset:16 lds",
             "v_and_b32 v6, 63, v0",
             "v_lshl_add_u32 v5, v1, 12, 16",         # this wave's first byte of the DMA
             "v_xor_b32 v7, 1, v1", "v_lshlrev_b32 v7, 12, v7",     # the neighbour wave's buffer
             "ds_read2_b32 v[10:11], v5 offset0:0 offset1:255",      # bytes +0 and +1020: inside
             "ds_read_b32 v12, v5 offset:4096",                      # the next wave's first byte
             "ds_read_b128 v[12:15], v7 offset:32",                  # the neighbour's buffer
             "ds_write_b32 v9, v12"]                                  # v9 never set: unknown
    items, a = analyse(lines)
    dma = 5
    r2, r1, nb, wr = range(10, 14)
    assert a.relation(dma, r2) == "overlap"
    assert a.relation(dma, r1) == "disjoint" and a.relation(dma, r1, waves="any") == "overlap"
    assert a.relation(dma, nb) == "disjoint" and a.relation(dma, nb, waves="any") == "overlap"
    assert a.relation(dma, wr) == "unknown"
    assert a.relation(dma, r2, waves="other") == "disjoint"         # only its own wave's bytes
    assert a.relation(dma, r1, waves="other") == a.relation(dma, nb, waves="other") == "overlap"
    f = a.footprint(dma)
    (s, e, _), = f.alts
    for w in range(4):
        assert s[w].tolist() == [0x1000 * w + 16 + 16 * lane for lane in range(64)]
        assert (e[w] - s[w]).tolist() == [16] * 64


LOOP = ["s_mov_b32 s20, 0", "s_mov_b32 s21, 0x1000", "v_lshlrev_b32 v1, 2, v0",
        "v_and_b32 v1, 0xff, v1", "s_mov_b32 s30, 0",
        "L:",
        "s_mov_b32 m0, s21", "s_nop 0", "buffer_load_dword v2, s[8:11], 0 offen lds",   # fill 'next'
        "v_add_u32 v3, s20, v1", "ds_read_b32 v4, v3",                                   # read 'cur'
        "s_waitcnt vmcnt(0)", "s_barrier",
        "s_mov_b32 s22, s20", "s_mov_b32 s20, s21", "s_mov_b32 s21, s22",               # swap buffers
        "s_add_u32 s30, s30, 1", "s_cmp_lt_u32 s30, s31", "s_cbranch_scc1 L"]


def test_loop_rotated_buffers_are_alternatives():
    items, a = analyse(LOOP, block=64)
    dma = items.index(next(i for i in items if getattr(i, "name", "") == "buffer_load_dword"))
    assert sorted(x[0] for x in a.starts(dma)) == [0, 0x1000]
    # swapped registers are tracked apart (non-relational): the read may be either buffer
    assert a.relation(dma, dma + 2) == "unknown"


def findings(lines, block=64):
    return [(f.rule, f.severity) for f in check_program(program_from_lines(lines), block=block)]


def test_waitcnt_verdicts_follow_the_ranges():
    base = ["s_mov_b32 m0, 0", "s_nop 0", "buffer_load_dword v2, s[8:11], 0 offen lds", "v_lshlrev_b32 v3, 2, v0"]
    assert findings(base + ["ds_read_b32 v4, v3 offset:256", "s_waitcnt vmcnt(0) lgkmcnt(0)", "s_endpgm"]) == []
    assert findings(base + ["ds_read_b32 v4, v3 offset:252", "s_waitcnt vmcnt(0) lgkmcnt(0)", "s_endpgm"]) == [
        ("lds_dma_read", "error")]
    assert findings(base + ["ds_read_b32 v4, v9", "s_waitcnt vmcnt(0) lgkmcnt(0)", "s_endpgm"]) == [
        ("lds_dma_read", "unproven")]
    # a barrier: another wave's read up to the next barrier counts; the wave's own range does not matter
    assert findings(base + ["s_barrier", "ds_read_b32 v4, v3", "s_waitcnt vmcnt(0) lgkmcnt(0)", "s_endpgm"],
                    block=128) == [("lds_write_before_barrier", "error"), ("lds_dma_read", "error")]
    assert findings(base + ["s_barrier", "ds_read_b32 v4, v3 offset:256", "s_waitcnt vmcnt(0) lgkmcnt(0)",
                            "s_endpgm"], block=128) == []


def test_a_barrier_orders_waves_a_waves_own_ds_accesses_are_in_order():
    # each thread writes 4 bytes at 4 * tid and reads after the barrier with no lgkmcnt wait:
    # its own bytes (same wave: DS ops of a wave execute in order, nothing to wait for), or the
    # next wave's (another wave's write may still be in flight: AMDGPUUsage, memory model GFX942,
    # lgkmcnt(0) "between wavefronts of a work-group, but not between operations performed by the
    # same wavefront")
    def lines(read_offset, lane_xor=0):
        return ["v_lshlrev_b32 v1, 2, v0", "v_xor_b32 v4, v0, " + str(lane_xor), "v_lshlrev_b32 v4, 2, v4",
                "ds_write_b32 v1, v2", "s_barrier",
                f"ds_read_b32 v3, v4 offset:{read_offset}", "s_waitcnt lgkmcnt(0)", "s_endpgm"]
    assert findings(lines(0), block=256) == []
    assert findings(lines(0), block=64) == []
    assert findings(lines(0, lane_xor=1), block=256) == []      # the neighbour lane's bytes: same wave
    assert findings(lines(256), block=256) == [("lds_write_before_barrier", "error")]   # the next wave's
    assert findings(lines(0, lane_xor=64), block=256) == [("lds_write_before_barrier", "error")]
    assert findings(lines(256), block=64) == []                 # one wave: no next wave
    items, a = analyse(lines(256)[:-1], block=256)
    assert a.relation(3, 5, waves="same") == "disjoint" and a.relation(3, 5, waves="other") == "overlap"
    items, a = analyse(lines(0)[:-1], block=256)
    assert a.relation(3, 5, waves="same") == "overlap" and a.relation(3, 5, waves="other") == "disjoint"
    assert a.relation(3, 5, waves="any") == "overlap"


def test_a_dma_in_flight_on_some_paths_only_is_unproven():
    # the DMA is waited for on one arm of the diamond only: the ranges meet, but not on every path
    lines = ["s_mov_b32 m0, 0", "s_nop 0", "buffer_load_dword v2, s[8:11], 0 offen lds", "v_lshlrev_b32 v3, 2, v0",
             "s_cmp_eq_u32 s0, 0", "s_cbranch_scc1 SKIP", "s_waitcnt vmcnt(0)", "SKIP:",
             "ds_read_b32 v4, v3", "s_waitcnt vmcnt(0) lgkmcnt(0)", "s_endpgm"]
    assert findings(lines) == [("lds_dma_read", "unproven")]
    lines.remove("s_waitcnt vmcnt(0)")
    assert findings(lines) == [("lds_dma_read", "error")]


def _signed(x):
    return x - (1 << 32) if x & 0x80000000 else x


# s_cmp_<op>_<u32|i32> from the ISA text: SCC = (S0 op S1), the i32 forms on signed values
SCMP = {"eq": lambda a, b: a == b, "lg": lambda a, b: a != b, "gt": lambda a, b: a > b,
        "ge": lambda a, b: a >= b, "lt": lambda a, b: a < b, "le": lambda a, b: a <= b}


@settings(max_examples=40, deadline=None)
@given(op=st.sampled_from(sorted(SCMP)), signed=st.booleans(), a=consts, b=consts, same=st.booleans())
def test_scalar_compare_decides_cselect(op, signed, a, b, same):
    b = a if same else b
    got = read_addr([f"s_mov_b32 s1, 0x{a:x}", f"s_mov_b32 s2, 0x{b:x}",
                     f"s_cmp_{op}_{'i32' if signed else 'u32'} s1, s2",
                     "s_cselect_b32 s4, 0x100, 0x2000", "v_mov_b32 v5, s4"])
    x, y = (_signed(a), _signed(b)) if signed else (a, b)
    assert [g[0] for g in got] == [0x100 if SCMP[op](x, y) else 0x2000]
    assert len(got) == 1                      # a known SCC picks one value, not two alternatives


WAVE_SPLIT = ["v_readfirstlane_b32 s5, v0", "s_lshr_b32 s5, s5, 6",            # wave id
              "s_cmp_ge_u32 s5, 2", "s_cbranch_scc1 HIGH",
              "s_lshl_b32 s4, s5, 8", "s_branch JOIN",                          # waves 0, 1: 256 * wave
              "HIGH:", "s_lshl_b32 s4, s5, 9", "s_add_u32 s4, s4, 0x1000",      # waves 2, 3: 0x1000 + 512 * wave
              "JOIN:"]


def test_a_branch_on_the_wave_id_joins_wave_by_wave():
    got = read_addr(WAVE_SPLIT + ["v_mov_b32 v5, s4"])
    assert len(got) == 1                      # one value per wave, not two whole-workgroup alternatives
    assert got[0].tolist() == [(256 * w if w < 2 else 0x1000 + 512 * w) for w in (t // 64 for t in TID)]
    # the same branch on a value the analysis does not know keeps both arms as alternatives
    unknown = [ln.replace("s_cmp_ge_u32 s5, 2", "s_cmp_ge_u32 s0, 2") for ln in WAVE_SPLIT]
    got = read_addr(unknown + ["v_mov_b32 v5, s4"])
    assert len(got) == 2


def test_per_wave_dma_slots_are_proven_apart():
    # each wave DMAs 256 B to the slot its wave id picks through a branch (0, 0x100, 0x1400, 0x1600),
    # then reads 4 * tid + offset: at 0x2000 no DMA's bytes, proven fine
    # at 0x1100, wave w reads [0x1100 + 256 w, +256): none its own slot, but wave 3 reads wave 2's
    # in-flight slot after the barrier (the cross-wave case)
    # at 0, wave 0 reads its own in-flight slot: the same-wave case
    dma = ["s_mov_b32 m0, s4", "s_nop 0", "buffer_load_dword v2, s[8:11], 0 offen lds", "v_lshlrev_b32 v3, 2, v0"]
    tail = ["s_waitcnt vmcnt(0) lgkmcnt(0)", "s_endpgm"]
    assert findings(WAVE_SPLIT + dma + ["ds_read_b32 v4, v3 offset:0x2000"] + tail, block=BLOCK) == []
    assert findings(WAVE_SPLIT + dma + ["s_barrier", "ds_read_b32 v4, v3 offset:0x1100"] + tail, block=BLOCK) == [
        ("lds_write_before_barrier", "error")]
    assert findings(WAVE_SPLIT + dma + ["ds_read_b32 v4, v3"] + tail, block=BLOCK) == [("lds_dma_read", "error")]


def test_waves_a_branch_keeps_out_access_nothing_there():
    """Warp specialisation (aiter's fp8 attention: `s_cmp_lt_i32 s62, 4; s_cbranch_scc0` sends waves
    4-7 elsewhere): waves 0, 1 DMA 256 B at 0x400 * w, while every wave reads [0x800, 0x900) after the
    barrier. M0 = 0x400 * w would reach 0x800 for wave 2 and 0xc00 for wave 3, but those waves
    never get to the DMA: nothing meets. Let waves 0..2 through and wave 2's slot is read (by wave 2
    itself and, after the barrier, by the others); wave 3's path has no DMA, so the checker, which
    follows paths rather than waves, calls both meetings unproven -- still reported, not dropped."""
    def lines(limit):
        return ["v_readfirstlane_b32 s5, v0", "s_lshr_b32 s5, s5, 6",                 # wave id
                f"s_cmp_lt_u32 s5, {limit}", "s_cbranch_scc0 SKIP",
                "s_lshl_b32 s4, s5, 10", "s_mov_b32 m0, s4", "s_nop 0",
                "buffer_load_dword v2, s[8:11], 0 offen lds",
                "SKIP:", "v_lshlrev_b32 v3, 2, v0", "v_and_b32 v3, 0xfc, v3",          # 4 * (tid % 64)
                "s_barrier", "ds_read_b32 v4, v3 offset:0x800",
                "s_waitcnt vmcnt(0) lgkmcnt(0)", "s_endpgm"]
    assert findings(lines(2), block=BLOCK) == []
    assert sorted(findings(lines(3), block=BLOCK)) == [("lds_dma_read", "unproven"),
                                                      ("lds_write_before_barrier", "unproven")]
    items, a = analyse(lines(2)[:-1])
    dma = next(i for i, it in enumerate(items) if getattr(it, "is_lds_dma", False))
    # the footprint keeps exactly what waves 0 and 1 write: [0x400 w, 0x400 w + 256)
    f = a.footprint(dma)
    assert len(f.alts) == 1
    s, e, _ = f.alts[0]
    for w in range(BLOCK // 64):
        want = [(0x400 * w + 4 * ln, 0x400 * w + 4 * ln + 4) for ln in range(64)] if w < 2 else [(-1, -1)] * 64
        assert sorted(zip(s[w].tolist(), e[w].tolist())) == want
    assert a.described(dma) == "bytes [0x0, 0x500)"
