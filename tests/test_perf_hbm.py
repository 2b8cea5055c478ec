"""The device's HBM as one queue on the dispatch timeline (flyasm.perf.hbm), checked against explicit
per-step recursions and hand-worked waits, and the bytes a workgroup asks of it."""
from __future__ import annotations

import numpy as np
import pytest

from flyasm.perf import hbm


def test_queue_delay_is_lindleys_recursion():
    rng = np.random.default_rng()
    rate = float(rng.uniform(100, 4000))
    demand = rng.exponential(rate * hbm.BIN, 500) * rng.integers(0, 2, 500)   # bursts and idle steps
    backlog, want = 0.0, []
    for x in demand:                                          # the queue, one step at a time
        backlog = max(0.0, backlog + x - rate * hbm.BIN)
        want.append(backlog / rate)
    assert np.allclose(hbm.queue_delay(demand, rate), want, rtol=1e-9, atol=1e-6)


def _profile(waits, cycles=10_000.0, traffic=((0.0, 1024.0, 0, False),)):
    tr = np.array(traffic, float)
    return hbm.Profile(tr[:, 0], tr[:, 1], tr[:, 2].astype(np.int64), tr[:, 3] > 0,
                       [np.array(waits, float).reshape(-1, 4)], cycles)


@pytest.mark.parametrize("d", [0.0, 300.0, 2500.0])
def test_a_stalled_wait_takes_the_whole_delay_and_an_early_load_absorbs_its_slack(d):
    delay = np.full(100, d)
    stalled = _profile([(1000, 400, 1000, 100)])                      # waited 600 cycles for its load
    early = _profile([(1000, 1000, 600, 100)])                        # the load was 400 cycles early
    one = np.zeros(1, int)
    start, dur = np.zeros(1), np.full(1, 10_000.0)
    assert hbm.extension([stalled], one, start, dur, delay)[0] == pytest.approx(d)
    assert hbm.extension([early], one, start, dur, delay)[0] == pytest.approx(max(0.0, d - 400))


def test_waits_on_one_burst_of_loads_are_delayed_once_and_a_later_stall_absorbs_a_shift():
    delay = np.full(100, 700.0)
    one, start, dur = np.zeros(1, int), np.zeros(1), np.full(1, 10_000.0)
    # four loads issued together at 100, waited for one by one (vmcnt 3, 2, 1, 0): the burst is late by 700 once
    burst = _profile([(900, 900, 900, 100), (950, 950, 950, 100), (1000, 1000, 1000, 100), (1050, 1050, 1050, 100)])
    assert hbm.extension([burst], one, start, dur, delay)[0] == pytest.approx(700.0)
    # the first wait's load (issued at 700) queued 700 cycles, the second's (issued at 800, before that wait)
    # none: the second wait had stalled 2000 cycles, which absorb the wave's 700-cycle shift
    steps = np.zeros(100)
    steps[700 // hbm.BIN] = 700.0
    absorbed = _profile([(900, 900, 900, 700), (5000, 3000, 5000, 800)])
    assert hbm.extension([absorbed], one, start, dur, steps)[0] == pytest.approx(0.0)
    # the same second load issued after the first wait carries its shift: the wave ends 700 later
    carried = _profile([(900, 900, 900, 700), (5000, 3000, 5000, 1200)])
    assert hbm.extension([carried], one, start, dur, steps)[0] == pytest.approx(700.0)


def test_demand_puts_every_hbm_byte_on_the_timeline_once():
    rng = np.random.default_rng()
    n = 40
    tr = [(float(t), float(b), int(k), bool(st)) for t, b, k, st in
          zip(rng.uniform(0, 9000, 30), rng.integers(1, 64, 30) * 128, rng.integers(0, 3, 30), rng.integers(0, 2, 30))]
    pr = _profile([], 10_000.0, tr)
    start = rng.uniform(0, 50_000, n)
    dur = np.full(n, 10_000.0)
    frac = rng.uniform(0, 1, (n, 3))
    reads, writes = hbm.demand([pr], np.zeros(n, int), start, dur, frac)
    is_store = np.array([x[3] for x in tr])
    b = np.array([x[1] for x in tr])
    k = np.array([x[2] for x in tr])
    assert writes.sum() == pytest.approx(n * b[is_store].sum())                     # stores: every byte
    assert reads.sum() == pytest.approx(sum(frac[w, k[~is_store]] @ b[~is_store] for w in range(n)))
    # each workgroup's bytes land at its start plus the access's own offset
    first = int(np.argmin(start))
    t0 = start[first] + tr[int(np.argmin([x[0] for x in tr]))][0]
    assert np.flatnonzero(reads + writes)[0] == int(t0 // hbm.BIN)
