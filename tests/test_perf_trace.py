"""The emulator's opt-in recorder (flyasm.perf.trace) and workgroup sampling."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from flyasm.emu import EmuError
from flyasm.perf.trace import Recorder, lds_cycles
from flyasm.run import launch
from kernels import vector_add as va


def test_recorder_sees_every_step_of_a_sampled_workgroup():
    n = 4096 * 3 + 5
    x, y = torch.randn(n), torch.randn(n)
    out = torch.full_like(x, float("nan"))                     # poisoned: unsampled workgroups stay NaN
    rec = Recorder()
    res = launch(va.build(4096, "f32"), va.grid(n, 4096), 256, out, x, y, n, recorder=rec, workgroups=[(1, 0, 0)])
    streams = rec.streams()
    assert len(streams) == 4                                    # 256 work-items = 4 waves of the one workgroup
    assert sum(len(s["pc"]) for s in streams) == res.wave_instructions
    assert torch.equal(out[4096:8192], (x + y)[4096:8192])
    assert torch.isnan(out[:4096]).all() and torch.isnan(out[8192:]).all()
    insts = rec.program.insts
    vm = [i for i, s in enumerate(streams[0]["pc"]) if insts[s].unit == "VMEM"]
    # each lane moves 16-byte vectors: 64 lanes x 16 B = 1024 B = 8 lines of 128 B per full-EXEC access
    assert all(streams[0]["cost"][i] == 64 * 16 for i in vm) and all(streams[0]["lines"][i] == 8 for i in vm)


def test_workgroups_outside_the_grid_is_one_error():
    x = torch.randn(4096)
    with pytest.raises(EmuError, match="not ids inside the grid"):
        launch(va.build(4096, "f32"), 1, 256, torch.empty_like(x), x, x, 4096, workgroups=[(3, 0, 0)])


# gfx950 LDS phases of lanes 0-31 as HipKittens measured them (analysis/paper_experiments/phases/
# ds_read_b128/phase_results.txt and ds_read_b96/...: lanes 32-63 are the same 32 higher), written
# out here as listed there, independently of flyasm.perf.trace.PHASES
READ_B128 = [[0, 1, 2, 3, 12, 13, 14, 15, 20, 21, 22, 23, 24, 25, 26, 27],
             [4, 5, 6, 7, 8, 9, 10, 11, 16, 17, 18, 19, 28, 29, 30, 31]]
READ_B96 = [[0, 1, 2, 3, 20, 21, 22, 23], [4, 5, 6, 7, 16, 17, 18, 19], [8, 9, 10, 11, 28, 29, 30, 31],
            [12, 13, 14, 15, 24, 25, 26, 27]]


def _phases(nbytes, write=False):
    """Lane lists of the phases: measured ones, else runs of 256 / nbytes lanes."""
    if not write and nbytes in (16, 12):
        half = READ_B128 if nbytes == 16 else READ_B96
        return half + [[lane + 32 for lane in g] for g in half]
    per = 16 if (write and nbytes == 8) else 256 // nbytes      # ds_write_b64: 16 lanes a phase (measured)
    return [list(range(p0, min(64, p0 + per))) for p0 in range(0, 64, per)]


def _expected_cycles(addr, nbytes, active=None, write=False):
    """Independent formula: a phase costs the largest number of distinct dwords in one of 64
    four-byte banks (inactive lanes access nothing)."""
    active = [True] * 64 if active is None else active
    total = 0
    for lanes in _phases(nbytes, write):
        dws = {addr[i] // 4 + j for i in lanes if active[i] for j in range(-(-nbytes // 4))}
        banks = {}
        for d in dws:
            banks[d % 64] = banks.get(d % 64, 0) + 1
        total += max(banks.values(), default=0)
    return total


@pytest.mark.parametrize("nbytes", [4, 8, 12, 16])
def test_lds_cycles_against_independent_count(nbytes):
    rng = np.random.default_rng()
    ex = np.ones((1, 64), bool)
    lane = np.arange(64)
    linear = lane * nbytes                                           # conflict-free
    assert lds_cycles(linear[None], ex, nbytes)[0] == _expected_cycles(linear, nbytes)
    if nbytes != 12:
        assert lds_cycles(linear[None], ex, nbytes)[0] == nbytes // 4   # 64 x nbytes / 256 B a cycle
        same_bank = lane * 256      # every lane's first dword in bank 0: each phase serialises fully
        assert lds_cycles(same_bank[None], ex, nbytes)[0] == 64        # (256/nbytes lanes) x (nbytes/4 dwords)
        broadcast = np.zeros(64, np.int64)                           # one address: read once per phase
        assert lds_cycles(broadcast[None], ex, nbytes)[0] == 64 * nbytes // 256
    for _ in range(3):
        a = rng.integers(0, 4096, 64) * nbytes
        assert lds_cycles(a[None], ex, nbytes)[0] == _expected_cycles(a, nbytes)
    waves = rng.integers(0, 4096, (3, 64)) * nbytes                  # several waves at once, partial EXEC
    ex = rng.random((3, 64)) < 0.6
    assert list(lds_cycles(waves, ex, nbytes)) == [_expected_cycles(w, nbytes, e) for w, e in zip(waves, ex)]


def test_ds_read_b128_phases_are_not_runs_of_16_lanes():
    """Quads of lanes q = 0..7 (per half wave) read 16 banks each: block q // 2 of the 64 banks, in
    row q % 2 (1 KB apart). Runs of 16 lanes (quads 0-3) would put rows 0 and 1 of blocks 0 and 1
    in one phase, a 2-way conflict: 4 phases x 2 cycles. gfx950 serves quads {0, 3, 5, 6} and
    {1, 2, 4, 7} together: blocks 0-3 once each, conflict-free, 4 phases x 1 cycle."""
    lane = np.arange(64)
    q = (lane % 32) // 4
    addr = 16 * (lane % 4) + 64 * (q // 2) + 1024 * (q % 2) + 4096 * (lane // 32)
    ex = np.ones((1, 64), bool)
    assert lds_cycles(addr[None], ex, 16)[0] == 4
    assert lds_cycles(addr[None], ex, 16, np.arange(64) // 16)[0] == 8     # the runs-of-16 rule
    assert _expected_cycles(addr, 16) == 4


def test_ds_write_b64_serves_16_lanes_a_phase():
    """Measured: ds_write_b64 takes 4 phases of 16 lanes (128 B), ds_read_b64 2 of 32: the same
    linear 8-byte accesses cost 4 cycles written, 2 read."""
    from flyasm.perf.trace import phase_of_lane
    lane = np.arange(64)
    ex = np.ones((1, 64), bool)
    assert lds_cycles((lane * 8)[None], ex, 8, phase_of_lane(True, 8))[0] == 4
    assert lds_cycles((lane * 8)[None], ex, 8, phase_of_lane(False, 8))[0] == 2
    rng = np.random.default_rng()
    a = rng.integers(0, 4096, 64) * 8
    assert lds_cycles(a[None], ex, 8, phase_of_lane(True, 8))[0] == _expected_cycles(a, 8, write=True)


def reload_kernel(offsets, lane_bytes: int = 4):
    """One wave loading 64 lanes x 4 bytes, lane i at byte lane_bytes x i (4: two 128-byte lines), at
    each byte offset in turn, then vmcnt(0)."""
    from flyasm import Kernel, s, v
    k = Kernel("reload", block=64)
    src = k.arg("src", "ptr")
    k.s_load_dwordx2(s[4:5], k.kernarg_ptr, src.offset)
    k.v_lshlrev_b32(v[1], lane_bytes.bit_length() - 1, k.workitem_id)
    k.s_waitcnt(lgkmcnt=0)
    for i, off in enumerate(offsets):
        k.global_load_dword(v[2 + i], v[1], s[4:5], offset=off)
    k.s_waitcnt(vmcnt=0)
    k.s_endpgm()
    return k.build().co


def test_fresh_lines_count_what_the_workgroup_had_not_touched():
    # lines 0-1, the same again, lines 2-3, then 1-2 (one line at each end seen before): 2, 0, 2, 0;
    # starting half a line in, 64 x 4 bytes span three lines: the neighbours' lines count once
    from flyasm.perf.capture import capture
    for offsets, want in (((0, 0, 256, 128), [2, 0, 2, 0]), ((64, 320, 64), [3, 2, 0])):
        co = reload_kernel(offsets)
        tr = capture(co, 1, 64, kernarg=lambda a: a["src"].to_bytes(8, "little"), buffers={"src": 1024}, cache=False)
        w = tr.waves[0]
        loads = [i for i, pc in enumerate(w["pc"]) if "global_load" in tr.program.insts[pc].name]
        assert [int(w["lines"][i]) for i in loads] == [2 + (off % 128 != 0) for off in offsets]
        assert [int(w["fresh"][i]) for i in loads] == want
