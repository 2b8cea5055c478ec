"""The CU timing model on synthetic kernels whose answer is known by construction."""
from __future__ import annotations

import numpy as np
import pytest

from flyasm import Kernel, s, v
from flyasm.emu import load_program
from flyasm.perf import params as P
from flyasm.perf import placement
from flyasm.perf.capture import capture
from flyasm.perf.cu import Static, simulate
from flyasm.perf.placement import dispatch as xcd_dispatch
from flyasm.perf.model import predict
from flyasm.perf.trace import scale_loops

PARAMS = P.Params().with_(wg_jitter=0.0)     # durations as simulated: no drawn spread in the timeline


def dispatch(durations, slots):
    """Makespan of workgroups (dispatch order) over PARAMS' XCDs with `slots` slots in all."""
    d = np.asarray(durations, float)
    return int(np.ceil((xcd_dispatch(d, PARAMS.n_xcd, slots // PARAMS.n_xcd) + d).max()))


def _run(k: Kernel, block: int, simds=None, kernarg=b""):
    co = k.build().co
    tr = capture(co, 1, block, kernarg, cache=False)
    prog = load_program(co)
    simd_of = [simds or [i % 4 for i in range(len(tr.waves))]]
    return simulate(prog, Static.of(prog, PARAMS), [tr.waves], simd_of, PARAMS), tr


@pytest.mark.parametrize("name,passes", [("v_mfma_f32_32x32x16_bf16", 8), ("v_mfma_f32_16x16x32_bf16", 4)])
@pytest.mark.parametrize("chain", [False, True])
def test_n_mfmas_on_one_wave_take_n_passes_x4(name, passes, chain):
    """Pass counts from the notes §1.2 table (32x32x16 bf16 = 8, 16x16x32 bf16 = 4), 4 cycles a pass;
    independent MFMAs and a same-C accumulate chain both run back to back on the pipe."""
    n = 6
    k = Kernel("mf", block=64)
    width = 16 if "32x32" in name else 4
    for i in range(n):
        base = 0 if chain else width * (i % 3)
        acc = v[base:base + width - 1]
        getattr(k, name)(acc, v[64:67], v[68:71], acc)
    k.s_endpgm()
    r, _ = _run(k, 64)
    assert r.cycles == n * passes * 4
    assert r.busy[0]["mfma"] == n * passes * 4


def _mixed_kernel():
    """Wave 0 runs 4 MFMAs (4 x 32 cycles), wave 1 runs 32 VALU adds (32 x 4 cycles)."""
    k = Kernel("mix", block=128)
    k.v_lshrrev_b32(v[1], 6, v[0])
    k.s_nop(0)
    k.v_readfirstlane_b32(s[8], v[1])
    k.s_cmp_eq_u32(s[8], 0)
    k.s_cbranch_scc1("mfma")
    for i in range(32):
        k.v_add_f32(v[2 + i % 8], 1.0, v[2 + i % 8])
    k.s_endpgm()
    k.label("mfma")
    for _ in range(4):
        k.v_mfma_f32_32x32x16_bf16(v[16:31], v[64:67], v[68:71], v[16:31])
    k.s_endpgm()
    return k


def test_two_waves_on_one_simd_overlap_valu_and_mfma():
    k = _mixed_kernel()
    alone, _ = _run(k, 128, simds=[0, 1])
    shared, _ = _run(k, 128, simds=[0, 0])
    work = 4 * 32                                   # each wave alone needs 128 cycles of its pipe
    assert work <= alone.cycles < work + 40         # + the short prologue
    # one SIMD: the VALU adds issue in the MFMAs' shadow; only each MFMA's 4 issue cycles collide
    assert shared.cycles < 2 * work
    assert shared.cycles >= alone.cycles
    assert shared.busy[0]["mfma"] == work and shared.busy[0]["valu"] >= 32 * 4


def _lds_kernel(stride: int, n: int):
    k = Kernel("lds", block=64, lds=64 * 1024)
    k.v_and_b32(v[1], 63, v[0])
    k.v_mul_u32_u24(v[1], stride, v[1])
    for i in range(n):
        k.ds_read_b32(v[2 + i], v[1])
    k.s_waitcnt(lgkmcnt=0)
    k.s_endpgm()
    return k


def test_bank_conflicted_ds_reads_cost_their_conflict_cycles():
    """Stride 4 bytes: 64 lanes in 64 banks, 1 cycle each; stride 256: all lanes in bank 0, 64
    cycles each. The conflicted reads are LDS-bound, 64 cycles apart; the conflict-free ones
    issue-bound, one a turn (4 cycles). The s_waitcnt then issues on SIMD 0's first turn after the
    last read's data (issue + LDS cycles + 64 latency): the conflicted run's 8 + 64n + 64 is a turn,
    the free run's 8 + 4(n - 1) + 1 + 64 rounds up to the turn 4n + 72. Difference: n (64 - 4)."""
    n = 8
    free, _ = _run(_lds_kernel(4, n), 64)
    bad, _ = _run(_lds_kernel(256, n), 64)
    assert bad.cycles - free.cycles == n * (64 - 4)


def _scalar_kernel(n: int, nop: bool, block: int = 64):
    k = Kernel("scalar", block=block)
    for i in range(n):
        if nop:
            k.s_nop(0)
        else:
            k.s_add_u32(s[8 + i % 4], s[8 + i % 4], 1)
    k.s_endpgm()
    return k


def test_every_instruction_takes_a_turn_of_its_simd():
    """The scheduler serves one SIMD a cycle, round-robin over 4, one instruction per wave per turn
    (Params.issue_turn): n SALU ops and s_endpgm on SIMD 0 issue at 0, 4, ..., 4n and the wave
    ends a turn after the last; on SIMD 1 everything is one cycle later; `s_nop 3` is 4 turns."""
    n = 5
    r, _ = _run(_scalar_kernel(n, False), 64, simds=[0])
    assert r.cycles == 4 * (n + 1)
    r, _ = _run(_scalar_kernel(n, False), 64, simds=[1])
    assert r.cycles == 4 * (n + 1) + 1
    k = Kernel("nop", block=64)
    k.s_nop(3)
    k.s_endpgm()
    r, _ = _run(k, 64, simds=[0])
    assert r.cycles == 4 * 4 + 4


@pytest.mark.parametrize("nops", [None, 0, 11])
def test_a_valu_reads_an_mfma_result_16_cycles_after_its_last_pass(nops):
    """v_mfma_f32_32x32x16_bf16 (8 passes, 32 cycles) at cycle 0, then a VALU op reading its D.
    Unchecked, with no wait states (None), the VALU waits until 32 + 16 = 48 (Params.mfma_writeback),
    s_endpgm a turn later, the wave ends a turn after that: 56. With s_nop 0 (issued at 4, one turn)
    still 48. With the 12 wait states LLVM asks (s_nop 11 at 4, twelve turns: flyasm check's fix) the
    VALU issues at 52, past the writeback: 60. Reading another register (checked, no hazard) it issues
    at 4, s_endpgm at 8, and the wave ends when the MFMA does: 32."""
    k = Kernel("wb", block=64)
    k.v_mfma_f32_32x32x16_bf16(v[0:15], v[64:67], v[68:71], v[0:15])
    if nops is not None:
        k.s_nop(nops)
    k.v_add_f32(v[20], v[0], 1.0)
    k.s_endpgm()
    co = k.build(check=nops == 11).co
    tr = capture(co, 1, 64, b"", cache=False)
    prog = load_program(co)
    r = simulate(prog, Static.of(prog, PARAMS), [tr.waves], [[0]], PARAMS)
    assert r.cycles == {None: 56, 0: 56, 11: 60}[nops]
    k = Kernel("free", block=64)
    k.v_mfma_f32_32x32x16_bf16(v[0:15], v[64:67], v[68:71], v[0:15])
    k.v_add_f32(v[20], v[30], 1.0)
    k.s_endpgm()
    assert _run(k, 64, simds=[0])[0].cycles == 32


def test_a_prediction_follows_issue_turn_on_a_program_already_priced():
    """The per-program facts (perf.cu.Static) are cached on the decoded program: pricing the same
    code object under another issue_turn must not reuse them. n SALU ops and s_endpgm: one turn
    each, 4(n + 1) cycles at issue_turn 4, n + 1 at 1."""
    from flyasm.perf.model import predict
    n = 5
    co = _scalar_kernel(n, False).build().co
    for turn in (4, 1, 4):
        assert predict(co, 1, 64, b"", params=PARAMS.with_(issue_turn=turn), dram_bytes=0).cycles == turn * (n + 1)


def test_two_waves_share_a_simds_salu_slot_but_not_for_internal_instructions():
    """Per turn a SIMD issues one SALU op among its waves, so two waves of n SALU ops on one SIMD
    take 2n turns, on two SIMDs n. s_nop goes to no functional unit: two waves of n s_nop 0 on one
    SIMD issue side by side, n turns (each wave ends a turn after its s_endpgm's turn)."""
    n = 6
    one, _ = _run(_scalar_kernel(n, False, 128), 128, simds=[0, 0])
    two, _ = _run(_scalar_kernel(n, False, 128), 128, simds=[0, 2])
    assert two.cycles == 4 * (n + 1) + 2           # SIMD 2's turns are cycles 2, 6, ...
    assert one.cycles == 4 * (2 * n) + 4            # the second wave's last op at turn 2n - 1, endpgm at 2n
    nops, _ = _run(_scalar_kernel(n, True, 128), 128, simds=[0, 0])
    assert nops.cycles == 4 * (n + 1)


def test_barrier_holds_the_early_wave():
    k = Kernel("bar", block=128)
    k.v_lshrrev_b32(v[1], 6, v[0])
    k.s_nop(0)
    k.v_readfirstlane_b32(s[8], v[1])
    k.s_cmp_eq_u32(s[8], 0)
    k.s_cbranch_scc0("late")
    for i in range(40):
        k.v_add_f32(v[2 + i % 8], 1.0, v[2 + i % 8])
    k.label("late")
    k.s_barrier()
    k.v_add_f32(v[2], 1.0, v[2])
    k.s_endpgm()
    r, tr = _run(k, 128, simds=[0, 1])
    ends = r.wg_end[0]
    assert ends >= 40 * 4                           # nobody leaves before wave 0's 40 adds reach the barrier
    with_bar = r.stalls
    insts = load_program(k.build().co).insts
    bar = [i for i, ins in enumerate(insts) if ins.name == "s_barrier"][0]
    assert with_bar[bar]["issued"] == 2
    # the early wave waits at the barrier for the other's 40 adds (4 cycles each), less the few
    # cycles the two paths differ by before it (branch taken vs not); charged to the barrier
    assert 40 * 4 - 16 <= with_bar[bar + 1]["barrier"] <= 40 * 4 + 16


def _loop_kernel():
    k = Kernel("loop", block=64)
    n = k.arg("n", "u32")
    k.s_load_dword(s[8], k.kernarg_ptr, n.offset)
    k.s_waitcnt(lgkmcnt=0)
    k.label("top")
    k.v_add_f32(v[2], 1.0, v[2])
    k.v_mul_f32(v[3], 2.0, v[3])
    k.s_sub_u32(s[8], s[8], 1)
    k.s_cmp_lg_u32(s[8], 0)
    k.s_cbranch_scc1("top")
    k.s_endpgm()
    return k


def test_scale_loops_matches_the_longer_run():
    import struct
    k = _loop_kernel()
    co = k.build().co
    short = capture(co, 1, 64, struct.pack("<I", 6) + bytes(12), cache=False).waves[0]
    long_ = capture(co, 1, 64, struct.pack("<I", 12) + bytes(12), cache=False).waves[0]
    scaled = scale_loops(short, 2.0)
    assert np.array_equal(scaled["pc"], long_["pc"])


def _pipelined_kernel(body: int = 1):
    """One MFMA peeled into the prologue (as software-pipelined GEMMs do), then n-1 loop iterations of
    `body` dependent 16x16x32 bf16 MFMAs each (4 passes, 16 cycles: notes §1.2): 1 + body (n-1) MFMAs
    of work in all, back to back on one wave's pipe."""
    k = Kernel("pipe", block=64)
    n = k.arg("n", "u32")
    k.s_load_dword(s[8], k.kernarg_ptr, n.offset)
    k.s_waitcnt(lgkmcnt=0)
    k.v_mfma_f32_16x16x32_bf16(v[0:3], v[64:67], v[68:71], v[0:3])
    k.s_sub_u32(s[8], s[8], 1)
    k.label("top")
    for _ in range(body):
        k.v_mfma_f32_16x16x32_bf16(v[0:3], v[64:67], v[68:71], v[0:3])
    k.s_sub_u32(s[8], s[8], 1)
    k.s_cmp_lg_u32(s[8], 0)
    k.s_cbranch_scc1("top")
    k.s_endpgm()
    return k


def test_scale_loops_by_work_counts_peeled_iterations():
    """Doubling the work of a run with 4 MFMAs (1 peeled + 3 in the loop) is the run with 8 (1 + 7),
    not the run with the loop's iterations doubled (1 + 6)."""
    import struct
    k = _pipelined_kernel()
    co = k.build().co
    prog = load_program(co)
    work = np.array([8.0 if i.name.startswith("v_mfma") else 0.0 for i in prog.insts])
    runs = {n: capture(co, 1, 64, struct.pack("<I", n) + bytes(12), cache=False).waves[0] for n in (4, 8)}
    mf = [i for i, ins in enumerate(prog.insts) if ins.name.startswith("v_mfma")]
    assert np.isin(runs[4]["pc"], mf).sum() == 4 and np.isin(runs[8]["pc"], mf).sum() == 8
    assert np.array_equal(scale_loops(runs[4], 2.0, work)["pc"], runs[8]["pc"])
    by_iterations = scale_loops(runs[4], 2.0)["pc"]
    assert np.isin(by_iterations, mf).sum() == 7        # the old rule: 3 loop iterations -> 6


def test_clock_falls_as_more_cus_are_busy():
    """Params.clock_mhz: peak clock with nothing busy, clock_derate x peak with every CU busy. One
    workgroup per CU (96 KB of LDS each): 128 workgroups fill half the 256 CUs for one duration d,
    1024 fill all of them for four rounds, 4d. At derate 0.5 the clocks are 0.75 and 0.5 of peak, so
    the full grid takes 4 x 0.75 / 0.5 = 6 times as long (no launch cost, no DRAM bound)."""
    from flyasm.perf.model import predict
    k = Kernel("busy", block=64, lds=96 * 1024)
    for i in range(16):
        k.v_add_f32(v[1 + i % 4], 1.0, v[1 + i % 4])
    k.s_endpgm()
    co = k.build().co
    p = PARAMS.with_(clock_derate=0.5, launch_us=0.0)
    half = predict(co, 128, 64, b"", params=p, dram_bytes=0)
    full = predict(co, 1024, 64, b"", params=p, dram_bytes=0)
    assert half.resident == full.resident == 1
    assert full.cycles == 4 * half.cycles
    assert half.active == pytest.approx(0.5) and full.active == pytest.approx(1.0)
    assert full.us / half.us == pytest.approx(6.0)
    assert half.us == pytest.approx(half.cycles / (PARAMS.clock_ghz * 1e3 * 0.75))


def test_long_loop_is_priced_by_the_work_simulated_not_by_whole_iterations():
    """Two MFMAs per iteration, recorded with n = 4 (1 + 3 x 2 = 7 MFMAs): the x2 run adds whole
    iterations, 7 MFMAs of extra work are 3.5 iterations, rounded to 4, so it adds 8 MFMAs (8/7 of
    the recorded work). The kernel's time is exactly linear in its MFMA count (16 cycles each), so
    the price at loop_scale f must be the time of 7f MFMAs: beyond x2 (f = 3 is the run with n = 11)
    and between x1 and x2 (f = 1.5 and 2 are 10.5 and 14 MFMAs, not a whole number of iterations).
    Extrapolating per unit of scale from the x2 run instead prices f = 3 at 7 + 2 x 8 = 23 MFMAs."""
    import struct
    from flyasm.perf.model import predict
    from flyasm.perf.trace import stream_work
    co = _pipelined_kernel(body=2).build().co
    p = PARAMS.with_(launch_us=0.0)
    mfma = 4 * 4                                    # cycles of one 16x16x32 bf16 MFMA

    def ka(n):
        return struct.pack("<I", n) + bytes(12)

    def cycles(n, f=1.0):
        return predict(co, 1, 64, ka(n), params=p, dram_bytes=0, loop_scale=f).cycles
    base = cycles(4) - 7 * mfma                      # prologue, loop control and epilogue
    assert cycles(11) == base + 21 * mfma           # the premise: time linear in the MFMA count
    prog = load_program(co)
    work = np.array([8.0 if i.name.startswith("v_mfma") else 0.0 for i in prog.insts])
    rec = capture(co, 1, 64, ka(4), cache=False).waves[0]
    assert stream_work(scale_loops(rec, 2.0, work), work) == 15 * 8   # x2 run: 8 MFMAs added, not 7
    for f in (3.0, 1.5, 2.0):
        assert abs(cycles(4, f) - (base + 7 * f * mfma)) <= 1, f     # cycles are whole (floor)


def test_a_loop_shorter_than_recorded_is_priced_on_the_same_line():
    """loop_scale f < 1 (a recorded loop longer than the problem's): the steady state's cost per unit
    of work, from the x1 and x2 runs, is taken off instead of added. The kernel of the test above,
    recorded with n = 11 (21 MFMAs) and priced at f = 7/21 and 15/21, costs what the runs with n = 4
    and n = 8 (7 and 15 MFMAs) cost; unscaled (the recorded length) it would cost 14 and 6 MFMAs more."""
    import struct
    from flyasm.perf.model import predict
    co = _pipelined_kernel(body=2).build().co
    p = PARAMS.with_(launch_us=0.0)

    def cycles(n, f=1.0):
        return predict(co, 1, 64, struct.pack("<I", n) + bytes(12), params=p, dram_bytes=0, loop_scale=f).cycles
    assert abs(cycles(11, 7 / 21) - cycles(4)) <= 1
    assert abs(cycles(11, 15 / 21) - cycles(8)) <= 1
    assert cycles(11) - cycles(4) == 14 * 4 * 4


def _mfma_countdown(k: Kernel):
    """s20 dependent MFMAs (16 cycles each), then the end (one per workgroup per CU: 96 KB LDS)."""
    k.label("top")
    k.v_mfma_f32_16x16x32_bf16(v[0:3], v[64:67], v[68:71], v[0:3])
    k.s_sub_u32(s[20], s[20], 1)
    k.s_cmp_lg_u32(s[20], 0)
    k.s_cbranch_scc1("top")
    k.s_endpgm()
    return k.build().co


def _triangle_kernel(axis: str):
    """Workgroup i along `axis` runs 1 + i MFMAs: work linear in i, like a causal Q tile (FlyDSL's
    attention has its tiles on grid y)."""
    k = Kernel(f"tri_{axis}", block=64, workgroup_ids="xyz", lds=96 * 1024)
    k.s_add_u32(s[20], k.workgroup_id(axis), 1)
    return _mfma_countdown(k)


def test_tile_axis_y_prices_a_triangle_as_axis_x_does():
    """The same triangle on grid x (the default tile axis) and on grid y (tile_axis=1): the same
    samples, durations and makespan. Without tile_axis the y triangle's interior is priced as its
    first, and the makespan comes out short."""
    from flyasm.perf.model import predict, sample_plan
    p = PARAMS.with_(launch_us=0.0)
    n = 9
    on_x = predict(_triangle_kernel("x"), (n, 1, 1), 64, b"", params=p, dram_bytes=0)
    on_y = predict(_triangle_kernel("y"), (1, n, 1), 64, b"", params=p, dram_bytes=0, tile_axis=1)
    assert sorted(on_x.samples.values()) == sorted(on_y.samples.values())
    assert on_x.cycles == on_y.cycles == max(on_x.samples.values())
    assert sample_plan((1, n, 3), tile_axis=1)[0] == [(0, 0, 0), (0, 4, 0), (0, 8, 0), (0, 0, 2)]
    # once workgroups queue (600 on 256 CUs, one per CU: 96 KB LDS) the interior's durations count
    ax = predict(_triangle_kernel("y"), (1, 600, 1), 64, b"", params=p, dram_bytes=0, tile_axis=1)
    assert ax.cycles == predict(_triangle_kernel("x"), (600, 1, 1), 64, b"", params=p, dram_bytes=0).cycles
    flat = predict(_triangle_kernel("y"), (1, 600, 1), 64, b"", params=p, dram_bytes=0)
    assert flat.cycles < ax.cycles


def test_wg_map_puts_each_items_duration_where_its_workgroup_is_dispatched():
    """A kernel that runs workgroup x as item (x + n/2) % n, item i doing 1 + i MFMAs: the samples
    are items (recorded at the workgroups that run them), and the dispatch sees the items in the
    workgroups' order, longest half first: the makespan of those durations in that order."""
    from flyasm.perf.model import PerfError, predict, sample_plan
    n, shift = 600, 300

    def wg_map(g, x, y, z):
        return (x + shift) % g[0], y, z
    k = Kernel("tri_shift", block=64, workgroup_ids="x", lds=96 * 1024)
    k.s_add_u32(s[20], k.workgroup_id("x"), shift + 1)
    k.s_cmp_gt_u32(s[20], n)                 # s20 = (x + shift) % n + 1 MFMAs
    k.s_cselect_b32(s[21], n, 0)
    k.s_sub_u32(s[20], s[20], s[21])
    co = _mfma_countdown(k)
    items, wgs = sample_plan((n, 1, 1), wg_map=wg_map)
    assert items == [(0, 0, 0), (299, 0, 0), (599, 0, 0)] and wgs == [(300, 0, 0), (599, 0, 0), (299, 0, 0)]
    p = PARAMS.with_(launch_us=0.0)
    got = predict(co, (n, 1, 1), 64, b"", params=p, dram_bytes=0, wg_map=wg_map)
    d = got.samples
    assert d[(299, 0, 0)] - d[(0, 0, 0)] == 299 * 16 and d[(599, 0, 0)] - d[(0, 0, 0)] == 599 * 16
    per_item = d[(0, 0, 0)] + 16 * np.arange(n)
    in_order = per_item[(np.arange(n) + shift) % n]
    assert got.cycles == dispatch(in_order, PARAMS.n_cu) != dispatch(per_item, PARAMS.n_cu)
    with pytest.raises(PerfError, match="bijection"):
        sample_plan((n, 1, 1), wg_map=lambda g, x, y, z: (x // 2, y, z))


def test_a_calls_launches_each_pay_their_price_and_one_launch_overhead():
    """calibrate.Row.extra: a row of three launches (an attention backward: pre, main, post) costs the
    sum of the three priced alone, each with its own launch overhead and its own clock."""
    from flyasm.perf import calibrate as C
    p = PARAMS.with_(launch_us=4.0, clock_derate=0.7)
    parts = [(10_000, 1e6, 0.5), (900_000, 3e8, 1.0), (5_000, 2e9, 0.25)]    # the last one DRAM-bound
    alone = [C.predict_us([C.Row("x", "t", c, d, 1.0, active=a)], p)[0] for c, d, a in parts]
    call = C.Row("call", "t", *parts[0][:2], 1.0, active=parts[0][2], extra=tuple(parts[1:]))
    assert C.predict_us([call], p)[0] == pytest.approx(sum(alone))
    assert alone[2] == pytest.approx(2e9 / (p.hbm_tb_s * 1e6 * p.hbm_efficiency) + 4.0)


def _atomic_kernel(n: int, op: str = "global_atomic_add_f32"):
    """n accesses of 64 lanes x 4 bytes, each into its own two 128-byte lines, then vmcnt(0)."""
    k = Kernel("atom", block=64)
    out = k.arg("out", "ptr")
    k.s_load_dwordx2(s[4:5], k.kernarg_ptr, out.offset)
    k.v_lshlrev_b32(v[1], 2, k.workitem_id)
    k.v_mov_b32(v[2], 1.0)
    k.s_waitcnt(lgkmcnt=0)
    for i in range(n):
        getattr(k, op)(v[1], v[2], s[4:5], offset=256 * i)
    k.s_waitcnt(vmcnt=0)
    k.s_endpgm()
    return k.build().co


def _atomic_args(n: int):
    return dict(kernarg=lambda a: a["out"].to_bytes(8, "little"), buffers={"out": 256 * n})


@pytest.mark.parametrize("op", ["global_atomic_add_f32", "global_atomic_pk_add_bf16"])
def test_atomics_queue_for_the_cus_share_of_the_l2_atomic_rate(op):
    """8 atomics of 64 lanes x 1 dword issue a turn apart (4 cycles), each holding the memory port 4
    cycles (2 lines x 128 B at 64 B/clk). At a share of 1 dword read-modify-write per cycle the L2
    performs one in 64 cycles, so the last completes 4 + 8 x 64 cycles after the first issue instead
    of 8 x 4 (the port's pace): the wave ends 60 x 8 + 4 cycles later (every time here is a turn of
    SIMD 0, vmem_latency 800). At 16 dwords per cycle the L2 keeps the port's pace and only the last
    atomic's 4 cycles of L2 work add to its latency. fp32 adds and packed bf16 pairs alike: one dword
    per lane. A store of the same bytes is not an atomic and never waits for the L2's atomic rate. The
    final wait's stall is the atomic queue's when it bounds it, the memory's otherwise."""
    n = 8
    co = _atomic_kernel(n, op)
    tr = capture(co, 1, 64, cache=False, **_atomic_args(n))
    prog = load_program(co)

    def run(rate, p=PARAMS):
        p = p.with_(cu_atomic_dwords_per_clk=rate)
        return simulate(prog, Static.of(prog, p), [tr.waves], [[0]], p)

    def cycles(rate):
        return run(rate).cycles
    assert cycles(1.0) - cycles(1e9) == 60 * n + 4
    wait = next(i for i, ins in enumerate(prog.insts) if ins.name == "s_waitcnt" and "vmcnt" in ins.text())
    bound, free = run(1.0).stalls[wait], run(1e9).stalls[wait]      # the stall table says which it was
    assert bound["atomic"] > 0 and bound["vmcnt"] == 0
    assert free["vmcnt"] > 0 and free["atomic"] == 0
    assert cycles(4.0) - cycles(1e9) == 4 + n * 16 - 4 * n          # 16 cycles each: still the bound
    assert cycles(16.0) - cycles(1e9) == 4       # 4 cycles each, the port's pace: only the last one's work
    st = _atomic_kernel(n, "global_store_dword")
    trs = capture(st, 1, 64, cache=False, **_atomic_args(n))
    ps = load_program(st)
    p = PARAMS.with_(cu_atomic_dwords_per_clk=1.0, cu_hbm_bytes_per_clk=1e9)    # HBM's share: the tests below
    assert simulate(ps, Static.of(ps, p), [trs.waves], [[0]], p).cycles == cycles(1e9)


def test_a_cus_share_of_the_atomic_rate_is_the_device_rate_over_the_busy_cus():
    """l2_atomic_dwords_per_clk = 256: one workgroup alone has the whole rate (its atomics go at the
    port's pace), 128 on 128 CUs have 2 dwords per cycle each (32 cycles an atomic), 256 on every CU
    1 (64 cycles): 28 n + 4 and 60 n + 4 cycles more than alone (the test above's arithmetic)."""
    from flyasm.perf.model import predict
    n = 8
    co = _atomic_kernel(n)
    p = PARAMS.with_(l2_atomic_dwords_per_clk=256.0, launch_us=0.0)

    def cycles(grid):
        return predict(co, grid, 64, params=p, dram_bytes=0, trace_grid=1, **_atomic_args(n)).cycles
    alone = cycles(1)
    assert cycles(128) - alone == 28 * n + 4
    assert cycles(256) - alone == 60 * n + 4


def _shared_reads_kernel(n: int):
    """Every workgroup reads the same n 256-byte pieces of buffer `a` (one stream, shared by all),
    each load waited for before the next: the wave's time is n load latencies plus a little."""
    k = Kernel("shared_reads", block=64)
    a = k.arg("a", "ptr")
    k.s_load_dwordx2(s[4:5], k.kernarg_ptr, a.offset)
    k.v_lshlrev_b32(v[1], 2, k.workitem_id)
    k.s_waitcnt(lgkmcnt=0)
    for i in range(n):
        k.global_load_dword(v[2], v[1], s[4:5], offset=256 * i)
        k.s_waitcnt(vmcnt=0)
    k.s_endpgm()
    return k.build().co


def test_a_shared_read_hbm_serves_again_costs_refetch_latency_per_dependent_load():
    """16 workgroups read one stream. With 4 MB L2s every read after the first on an XCD hits (and
    the first anywhere is a compulsory read): every load at vmem_latency. With no L2 and no MALL
    capacity the later readers' loads are HBM re-fetches: each of the n dependent loads waits
    refetch_latency longer, so the slowest workgroup (the makespan) is n x refetch_latency longer.
    Without the placement (no buffers to probe) the default latencies apply."""
    n, grid = 6, (16, 1, 1)
    co = _shared_reads_kernel(n)
    args = dict(kernarg=lambda ad: ad["a"].to_bytes(8, "little"), buffers={"a": 256 * n})
    p = PARAMS.with_(launch_us=0.0, refetch_latency=3000)
    cached = predict(co, grid, 64, **args, params=p, dram_bytes=0)
    evicted = predict(co, grid, 64, **args, params=p.with_(l2_bytes=0, mall_bytes=0), dram_bytes=0)
    assert cached.levels[placement.HBM] == 0 and evicted.levels[placement.L2] == 0
    assert evicted.levels[placement.HBM] == pytest.approx(15 / 16)     # all but the first reader
    assert evicted.cycles - cached.cycles == n * 3000
    free = predict(co, grid, 64, **args, params=p.with_(l2_bytes=0, mall_bytes=0, refetch_latency=0), dram_bytes=0)
    assert free.cycles == cached.cycles


def test_stores_queue_for_the_cus_share_of_hbm_bandwidth():
    """8 stores of 64 lanes x 4 bytes (256 bytes each) issue a turn apart, each holding the memory port
    4 cycles (2 lines x 128 B at 64 B/clk). Their bytes then go to memory at the CU's share of HBM:
    at 1 byte per cycle 256 cycles a store, so the last completes 4 + 8 x 256 cycles after the first
    issue instead of 8 x 4 (the port's pace): the wave, which ends when its stores have, ends
    252 x 8 + 4 cycles later (the atomic test's arithmetic with 256 cycles for 64). At 16 bytes per
    cycle 16 cycles a store; at 64 the port's pace, only the last store's 4 cycles add to its latency.
    Atomics of the same bytes do not queue there (their L2 rate bounds them). This is the path of a
    launch without a timeline of its traffic; with one (stores_complete_at_l2, the default) a store is
    done when the L2 has it, whatever the share, and the device's HBM queue (perf.hbm) carries it on."""
    n = 8
    co = _atomic_kernel(n, "global_store_dword")
    tr = capture(co, 1, 64, cache=False, **_atomic_args(n))
    prog = load_program(co)

    def cycles(rate, co_tr=(prog, tr), at_l2=False):
        pr, t = co_tr
        p = PARAMS.with_(cu_hbm_bytes_per_clk=rate, stores_complete_at_l2=at_l2)
        return simulate(pr, Static.of(pr, p), [t.waves], [[0]], p).cycles
    assert cycles(1.0) - cycles(1e9) == (256 - 4) * n + 4
    assert cycles(1.0, at_l2=True) == cycles(1e9)
    assert cycles(16.0) - cycles(1e9) == (16 - 4) * n + 4
    assert cycles(64.0) - cycles(1e9) == 4
    at = _atomic_kernel(n)
    atomics = (load_program(at), capture(at, 1, 64, cache=False, **_atomic_args(n)))
    assert cycles(1.0, atomics) == cycles(1e9, atomics)


def test_a_cus_share_of_hbm_is_the_device_bandwidth_over_the_busy_cus():
    """HBM at 4096 bytes per cycle (hbm_tb_s 9.8304 at 2.4 GHz): one workgroup alone stores faster
    than its port (no cost), 128 on 128 CUs have 32 bytes per cycle each (8 cycles a 256-byte store),
    256 on every CU 16 (16 cycles): 4 n + 4 and 12 n + 4 cycles more than alone (the test above's
    arithmetic). This is what prices a short attention's O tiles: every workgroup of a round writes
    its tile at its end."""
    from flyasm.perf.model import predict
    n = 8
    co = _atomic_kernel(n, "global_store_dword")
    p = PARAMS.with_(hbm_tb_s=9.8304, launch_us=0.0)
    assert p.hbm_bytes_per_clk == pytest.approx(4096)

    def cycles(grid):
        return predict(co, grid, 64, params=p, dram_bytes=0, trace_grid=1, **_atomic_args(n)).cycles
    alone = cycles(1)
    assert cycles(128) - alone == 4 * n + 4
    assert cycles(256) - alone == 12 * n + 4


def test_a_partial_line_read_again_costs_its_lookup_not_another_fill():
    """A load touching 16 lines it has not touched holds the port for their fills, 16 x 128 B at 64 B/clk
    = 32 cycles (its 256 bytes alone would take 4); the same lines again (4 bytes further) cost a
    lookup a line, 16 cycles; 16 other lines 32 again. The loads issue a turn apart and complete in
    order, so the wave ends later by the second load's port time."""
    from test_perf_trace import reload_kernel

    def cycles(offsets):
        co = reload_kernel(offsets, lane_bytes=32)          # 16 lines, 4 lanes and 16 bytes in each
        tr = capture(co, 1, 64, kernarg=lambda a: a["src"].to_bytes(8, "little"), buffers={"src": 4096},
                     cache=False)
        prog = load_program(co)
        return simulate(prog, Static.of(prog, PARAMS), [tr.waves], [[0]], PARAMS).cycles
    one = cycles((0,))
    assert cycles((0, 4)) - one == 16
    assert cycles((0, 2048)) - one == 32
