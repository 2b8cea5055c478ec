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


def _expected_cycles(addr, nbytes, active=None):
    """Independent formula: 256 bytes per phase, a phase costs the largest number of distinct dwords
    in one of 64 four-byte banks (inactive lanes access nothing)."""
    per = 256 // nbytes
    active = [True] * 64 if active is None else active
    total = 0
    for p0 in range(0, 64, per):
        dws = {a // 4 + j for a, on in zip(addr[p0:p0 + per], active[p0:p0 + per]) if on for j in range(nbytes // 4)}
        banks = {}
        for d in dws:
            banks[d % 64] = banks.get(d % 64, 0) + 1
        total += max(banks.values(), default=0)
    return total


@pytest.mark.parametrize("nbytes", [4, 8, 16])
def test_lds_cycles_against_independent_count(nbytes):
    rng = np.random.default_rng()
    ex = np.ones((1, 64), bool)
    lane = np.arange(64)
    linear = lane * nbytes                                           # conflict-free: nbytes/4 cycles
    assert lds_cycles(linear[None], ex, nbytes)[0] == nbytes // 4
    same_bank = lane * 256          # every lane's first dword in bank 0: each phase serialises fully
    assert lds_cycles(same_bank[None], ex, nbytes)[0] == 64        # (256/nbytes lanes) x (nbytes/4 phases)
    broadcast = np.zeros(64, np.int64)                               # one address: read once per phase
    assert lds_cycles(broadcast[None], ex, nbytes)[0] == 64 * nbytes // 256
    for _ in range(3):
        a = rng.integers(0, 4096, 64) * nbytes
        assert lds_cycles(a[None], ex, nbytes)[0] == _expected_cycles(a, nbytes)
    waves = rng.integers(0, 4096, (3, 64)) * nbytes                  # several waves at once, partial EXEC
    ex = rng.random((3, 64)) < 0.6
    assert list(lds_cycles(waves, ex, nbytes)) == [_expected_cycles(w, nbytes, e) for w, e in zip(waves, ex)]
