"""Emulator report mode and waivers (flyasm/emu/report.py): hazards="report" / races="report" run to
the end and list every distinct violation with its count; waivers accept a rule (or a rule at one
pc) and stay strict for the rest; in-flight reads stay errors; an empty program is one error."""
from __future__ import annotations

import functools

import numpy as np
import pytest

from emu_snippet import snippet
from flyasm.emu import EmuError, Memory, run_program
from flyasm.emu.program import Descriptor, Program
from flyasm.errors import FlyasmError
from flyasm.isa.operands import s, v
from flyasm.kernel import Kernel
from flyasm.run import launch

RNG = np.random.default_rng()

# A loop with two hazards per iteration: TRANS write -> VALU read at pc 0x4 (needs 1 wait state,
# has 0) and VALU writes an SGPR pair -> v_cndmask reads it at pc 0xc (needs 2, has 0).
LOOP = ["v_exp_f32_e32 v1, v2",                       # 0x0
        "v_add_f32_e32 v3, v1, v1",                   # 0x4  trans_valu_read
        "v_cmp_lt_f32_e64 s[4:5], v3, 1.0",            # 0x8
        "v_cndmask_b32_e64 v5, v6, v7, s[4:5]",       # 0xc  valu_sgpr_valu_read
        "v_add_f32_e32 v2, 0.5, v2",                  # 0x10 next iteration's input
        "s_sub_u32 s10, s10, 1",
        "s_cmp_lg_u32 s10, 0",
        "s_cbranch_scc1 -8"]                          # back to 0x0


def _loop_inputs(waves):
    x = RNG.uniform(-3, 3, (waves, 64)).astype(np.float32)
    a = RNG.integers(0, 2**32, (waves, 64), dtype=np.uint32)
    b = RNG.integers(0, 2**32, (waves, 64), dtype=np.uint32)
    return x, a, b


def _loop_reference(x, a, b, n):
    """The loop's result written independently: v5 = (2·2^x < 1) ? b : a for the last iteration's x."""
    x = x.astype(np.float64) + 0.5 * (n - 1)
    return np.where(2 * np.exp2(x) < 1, b, a)


def _run_loop(n, waves, **opts):
    x, a, b = _loop_inputs(waves)
    m = snippet(LOOP, {2: x.view(np.uint32), 6: a, 7: b, 5: np.full((waves, 64), 0xDEADBEEF, np.uint32)},
                sregs={10: n}, waves=waves, **opts)
    np.testing.assert_array_equal(m.R[:, 5], _loop_reference(x, a, b, n))
    return m


def test_strict_default_stops_at_the_first_hazard():
    with pytest.raises(EmuError, match=r"v_add_f32_e32 v3, v1, v1' at pc 0x4 .*after 'v_exp_f32"):
        _run_loop(2, 2)


def test_report_mode_lists_every_distinct_hazard_with_counts():
    n, waves = int(RNG.integers(2, 5)), 2
    m = _run_loop(n, waves, hazards="report")
    rows = m.report.rows()
    assert [(r.kind, r.rule, r.pc, r.other_pc) for r in rows] == [
        ("hazard", "trans_valu_read", 0x4, 0x0), ("hazard", "valu_sgpr_valu_read", 0xC, 0x8)]
    for r in rows:
        assert r.count == n * waves                   # every wave, every iteration
        assert r.wave == 0 and r.workgroup == 0 and not r.waived
    assert rows[0].inst == "v_add_f32_e32 v3, v1, v1" and rows[0].other == "v_exp_f32_e32 v1, v2"
    assert rows[1].inst.startswith("v_cndmask_b32_e64 v5") and rows[1].other.startswith("v_cmp_lt_f32_e64 s[4:5]")
    assert "needs 2" in rows[1].message and m.report.unused_waivers == []
    assert m.report.rules() == {"trans_valu_read": 1, "valu_sgpr_valu_read": 1}
    text = m.report.text()
    assert "2 distinct violation(s)" in text and f"x{n * waves}" in text


def test_hazard_counts_follow_the_waves_that_took_the_path():
    # with a seeded interleaving the waves split into groups; the counts still add up per wave
    n = 3
    m = _run_loop(n, 4, hazards="report", seed=int(RNG.integers(1 << 30)))
    assert {r.rule: r.count for r in m.report.rows()} == {"trans_valu_read": 4 * n, "valu_sgpr_valu_read": 4 * n}


def test_waivers_accept_known_ones_and_stay_strict_for_the_rest():
    with pytest.raises(EmuError, match=r"v_cndmask_b32_e64 v5.* at pc 0xc .*needs 2"):
        _run_loop(2, 2, waive=["trans_valu_read"])
    with pytest.raises(EmuError, match=r"at pc 0xc"):          # a waiver at another pc does not cover it
        _run_loop(2, 2, waive=["trans_valu_read", ("valu_sgpr_valu_read", 0x10)])
    m = _run_loop(2, 2, waive=["trans_valu_read", ("valu_sgpr_valu_read", 0xC), "salu_m0"])
    assert all(r.waived for r in m.report.rows()) and len(m.report.rows()) == 2
    assert m.report.unused_waivers == ["salu_m0"]
    assert "unused waiver: 'salu_m0'" in m.report.text()


def test_report_mode_with_a_waiver_marks_it():
    m = _run_loop(2, 1, hazards="report", waive=[("trans_valu_read", 0x4)])
    assert {r.rule: r.waived for r in m.report.rows()} == {"trans_valu_read": True, "valu_sgpr_valu_read": False}


def test_bad_waivers_and_modes_are_one_sentence():
    with pytest.raises(FlyasmError, match=r"'no_such_rule' is not a hazard rule or LDS race kind"):
        _run_loop(2, 1, waive=["no_such_rule"])
    with pytest.raises(FlyasmError, match=r"a waiver is a rule name or \(rule, pc\)"):
        _run_loop(2, 1, waive=[("salu_m0", "0x4")])
    with pytest.raises(FlyasmError, match="hazards is one of"):
        _run_loop(2, 1, hazards="reprot")
    with pytest.raises(FlyasmError, match="races is True, False or 'report'"):
        _run_loop(2, 1, races="yes")


# ---- LDS races -------------------------------------------------------------------------------------
L = np.arange(64, dtype=np.uint32)
W2 = np.arange(2, dtype=np.uint32)[:, None]
OWN, OTHER = 4 * L + 256 * W2, 4 * L + 256 * (1 - W2)


def test_race_report_names_both_instructions():
    data = RNG.integers(0, 2**32, (2, 64), dtype=np.uint32)
    prog = ["ds_write_b32 v1, v2", "s_waitcnt lgkmcnt(0)", "ds_read_b32 v3, v4", "s_waitcnt lgkmcnt(0)"]
    with pytest.raises(EmuError, match=r"read-after-write"):
        snippet(prog, {1: OWN, 4: OTHER, 2: data}, waves=2, lds=512)
    m = snippet(prog, {1: OWN, 4: OTHER, 2: data, 3: np.full((2, 64), 0xDEADBEEF, np.uint32)}, waves=2, lds=512,
                races="report")
    # lock step: both waves wrote before either read, so each wave holds the other's data
    assert np.array_equal(m.R[0, 3], data[1]) and np.array_equal(m.R[1, 3], data[0])
    (r,) = m.report.rows()
    assert (r.kind, r.rule, r.pc, r.other_pc, r.count) == ("race", "lds_read_after_write", 0x8, 0x0, 2)
    assert r.other == "ds_write_b32 v1, v2" and "wave 1 wrote with 'ds_write_b32 v1, v2' at pc 0x0" in r.message


def test_write_after_read_report_and_waiver():
    data = RNG.integers(0, 2**32, (2, 64), dtype=np.uint32)
    prog = ["ds_read_b32 v3, v4", "s_waitcnt lgkmcnt(0)", "ds_write_b32 v1, v2", "s_waitcnt lgkmcnt(0)",
            "s_barrier", "ds_read_b32 v5, v4", "s_waitcnt lgkmcnt(0)"]
    m = snippet(prog, {1: OWN, 4: OTHER, 2: data}, waves=2, lds=512, races="report")
    (r,) = m.report.rows()
    assert (r.rule, r.pc, r.other_pc, r.count) == ("lds_write_after_read", 0x8, 0x0, 2)
    assert np.array_equal(m.R[0, 5], data[1]) and np.array_equal(m.R[1, 5], data[0])   # after the barrier
    m = snippet(prog, {1: OWN, 4: OTHER, 2: data}, waves=2, lds=512, waive=[("lds_write_after_read", 0x8)])
    assert m.report.rows()[0].waived
    with pytest.raises(EmuError, match="write-after-read"):
        snippet(prog, {1: OWN, 4: OTHER, 2: data}, waves=2, lds=512, waive=[("lds_write_after_read", 0x4)])


def test_sub_dword_race_on_the_byte_path():
    # byte writes of both waves into the same dwords (different bytes), then each wave reads a byte
    # the other wrote: the byte path decides it and the report names the ds_write_b8
    data = RNG.integers(1, 255, (2, 64), dtype=np.uint32)
    own, other = 4 * L + W2, 4 * L + (1 - W2)
    prog = ["ds_write_b8 v1, v2", "s_waitcnt lgkmcnt(0)", "ds_read_u8 v3, v4", "s_waitcnt lgkmcnt(0)"]
    m = snippet(prog, {1: own, 4: other, 2: data}, waves=2, lds=512, races="report")
    (r,) = m.report.rows()
    assert (r.rule, r.pc, r.other_pc, r.count) == ("lds_read_after_write", 0x8, 0x0, 2)
    assert np.array_equal(m.R[0, 3], data[1]) and np.array_equal(m.R[1, 3], data[0])


# ---- what stays an error ------------------------------------------------------------------------------
def _inflight_kernel():
    k = Kernel("inflight", block=64, arg_layout="natural")
    k.arg("x", "ptr")
    k.s_load_dwordx2(s[4:5], s[0:1], 0)
    k.v_lshlrev_b32(v[1], 2, v[0])
    k.s_waitcnt(lgkmcnt=0)
    k.global_load_dword(v[2], v[1], s[4:5])
    k.v_add_u32(v[3], v[2], v[2])                      # no s_waitcnt vmcnt(0): v2 is still in flight
    k.s_endpgm()
    k.build = functools.partial(k.build, check=False)
    return k


def test_in_flight_reads_stay_errors_in_report_mode():
    x = RNG.integers(0, 1000, 64).astype(np.int32)
    with pytest.raises(EmuError, match=r"uses v2 while 'global_load_dword"):
        launch(_inflight_kernel(), 1, 64, x, hazards="report", races="report")


def test_empty_program_is_one_error():
    prog = Program("empty", [], Descriptor(0, 0, 0, 0, 0, 0, 0), [])
    mem = Memory()
    mem.finalize()
    with pytest.raises(EmuError, match="kernel 'empty' has no instructions: there is nothing to run"):
        run_program(prog, 1, 64, 0, mem)
