"""benchmarks/wg_phases.py: a wave's cycles split into phases add up to its simulated span, the phases
fall where the MFMAs are, and each s_waitcnt waits for the operations its counters say."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from flyasm import Kernel, s, v
from flyasm.emu import load_program
from flyasm.perf import params as P
from flyasm.perf.capture import capture
from flyasm.perf.cu import Static, simulate

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import wg_phases as WP  # noqa: E402

PARAMS = P.Params()


def _kernel() -> Kernel:
    """Prologue: two loads, a wait for the first; main: two MFMAs around a VALU; epilogue: a VALU, a
    store and the wait for everything (the second load too), so the wave ends when it issues s_endpgm."""
    k = Kernel("phases", block=64)
    out = k.arg("out", "ptr")
    k.s_load_dwordx2(s[4:5], k.kernarg_ptr, out.offset)
    k.v_lshlrev_b32(v[1], 2, k.workitem_id)
    k.s_waitcnt(lgkmcnt=0)
    k.global_load_dword(v[2], v[1], s[4:5])
    k.global_load_dword(v[3], v[1], s[4:5], offset=256)
    k.s_waitcnt(vmcnt=1)
    k.v_mfma_f32_32x32x16_bf16(v[32:47], v[64:67], v[68:71], v[32:47])
    k.v_add_f32(v[2], v[2], v[2])
    k.v_mfma_f32_32x32x16_bf16(v[32:47], v[64:67], v[68:71], v[32:47])
    k.v_add_f32(v[2], v[2], v[2])
    k.global_store_dword(v[1], v[2], s[4:5])
    k.s_waitcnt(vmcnt=0)
    k.s_endpgm()
    return k


def test_phases_add_up_to_the_wave_and_waits_name_their_loads():
    co = _kernel().build().co
    tr = capture(co, 1, 64, lambda a: np.uint64(a["out"]).tobytes(), {"out": 1024}, cache=False)
    prog = load_program(co)
    st = Static.of(prog, PARAMS)
    r = simulate(prog, st, [tr.waves], [[0]], PARAMS)
    kinds = np.array(st.kind, dtype=object)
    phase = WP.phase_of([(tr.waves[0], kinds)])
    names = [inst.name for inst in prog.insts]
    by_phase = {ph: [names[i] for i in sorted(phase) if phase[i] == ph] for ph in WP.PHASES}
    assert by_phase["prologue"][-1] == "s_waitcnt" and "global_load_dword" in by_phase["prologue"]
    assert by_phase["main"] == ["v_mfma_f32_32x32x16_bf16", "v_add_f32", "v_mfma_f32_32x32x16_bf16"]
    assert by_phase["epilogue"] == ["v_add_f32", "global_store_dword", "s_waitcnt", "s_endpgm"]
    per = WP.wave_cycles(r.stalls, st, phase, 1)
    total = sum(sum(own.values()) + sum(stall.values()) for own, stall in per.values())
    assert total == r.cycles            # the store was waited for: the wave ends at s_endpgm's issue turn
    # the prologue holds the first load's round trip, the epilogue the store's
    assert sum(per["prologue"][1].values()) >= PARAMS.vmem_latency
    assert per["epilogue"][1]["vmcnt"] >= PARAMS.vmem_latency - 64
    assert per["main"][0]["mfma"] == 2 * st.issue[next(i for i in phase if kinds[i] == "mfma")]
    waits = WP.awaited(tr.waves[0]["pc"], kinds, st.wait, names)
    order = sorted(waits)
    assert dict(waits[order[0]]) == {"s_load_dwordx2": 1}
    assert dict(waits[order[1]]) == {"global_load_dword": 1}        # vmcnt(1): the older load only
    assert dict(waits[order[2]]) == {"global_load_dword": 1, "global_store_dword": 1}


def test_loop_visits_count_runs_of_the_most_jumped_back_to_head():
    assert WP.loop_visits(np.array([0, 1, 2, 3, 1, 2, 3, 1, 2, 3, 4])) == (1, 3)
    # a rotated loop entered in its middle (0 -> 2): its head runs once a backward jump
    assert WP.loop_visits(np.array([0, 2, 3, 1, 2, 3, 1, 2, 3, 4])) == (1, 2)
    assert WP.loop_visits(np.array([0, 1, 2])) == (-1, 1)


def test_wg_phases_smoke():
    """On FlyDSL's table, aiter's S256 causal row: three phases and the wait it spends longest in."""
    table = ROOT.parent / "shared" / "flydsl" / "measured"
    if not table.exists():
        pytest.skip("../shared/flydsl/measured is absent (FlyDSL's measured table)")
    r = subprocess.run([sys.executable, "benchmarks/wg_phases.py", str(table), "--row", "s256", "--row", "fwd_hd128"],
                       capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    for ph in WP.PHASES:
        assert f"  {ph}" in r.stdout
    assert "s_waitcnt" in r.stdout and "waits for:" in r.stdout
