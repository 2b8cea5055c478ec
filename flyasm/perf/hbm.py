"""The device's HBM as one queue on the dispatch timeline: what the workgroups running at the same time
ask of memory together.

A CU run (perf.cu) prices one workgroup alone on its CU: its loads take their latency, its stores are
done when the L2 has them. But HBM is one device-wide resource (MI355X: 8 TB/s, params.hbm_tb_s,
behind every CU). When the workgroups of a round start together, each loads its tiles before its
first MFMA, and together they ask for more than HBM delivers in that time: 256 workgroups loading a
64 KB Q tile and a 128 KB K/V block are 50 MB, 15,000 cycles of the device's bandwidth, where one
alone waits only its latency. Workgroups that start at scattered times (a grid of mixed tile lengths
after its first round) spread the same bytes out and wait less.

The model: every workgroup's memory traffic (its CU run's VMEM accesses at the times it issued them,
placed on the dispatch timeline at the workgroup's start) goes into one first-in first-out fluid
queue served at HBM's rate. Only bytes HBM serves count, at line granularity and once per workgroup
(the lines it touches first, trace 'fresh'): private data, the fraction of a shared stream the
placement model (perf.placement) leaves to HBM, and the write-back of stored lines (the L2 is a
write-back cache: the store completed when the L2 took it, its lines reach HBM through this queue).
A request waits behind the queue's backlog. A workgroup gets longer where one of its waves waited at
an `s_waitcnt vmcnt` for a load that queued: replaying the wave's recorded waits in order, a wait
ends max(when the wave got there, when its load now completes), and everything after it moves by
that much (first order: the CU run is not repeated with the delays). A workgroup's extension is its
slowest wave's. The kernel ends no earlier than the queue has written the last stored line.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BIN = 256                 # cycles per step of the queue's timeline
MAX_STEPS = 1 << 20       # steps a timeline is cut into at most: a longer launch gets longer steps


def step_for(horizon: float) -> float:
    """Cycles per step for a timeline `horizon` cycles long."""
    return max(float(BIN), float(np.ceil(horizon / MAX_STEPS)))


@dataclass
class Profile:
    """What one recorded workgroup asks of memory (perf.cu.CUResult.traffic / waits), cycles from its
    start, and how long that run took."""
    t: np.ndarray          # issue cycle of each access
    nbytes: np.ndarray     # bytes it moves
    buf: np.ndarray        # buffer index (-1: unknown)
    store: np.ndarray      # bool
    waits: list            # per wave: array [n, 4] of (wait issue, own readiness, awaited done, its issue)
    cycles: float

    @classmethod
    def of(cls, result, cycles: float) -> "Profile":
        tr = np.array(result.traffic, float).reshape(-1, 4)
        waits = [np.array(v, float).reshape(-1, 4) for _, v in sorted(result.waits.items())]
        return cls(tr[:, 0], tr[:, 1], tr[:, 2].astype(np.int64), tr[:, 3] > 0, waits, float(max(cycles, 1.0)))


def queue_delay(demand: np.ndarray, rate: float, step: float = BIN) -> np.ndarray:
    """Per step: the cycles a request arriving then waits behind the backlog of a FIFO served at `rate`
    bytes a cycle, given the bytes that arrive in each step (Lindley's recursion in closed form:
    backlog_k = S_k - min(0, min_{j<=k} S_j), S the running sum of arrivals minus service)."""
    s = np.cumsum(np.asarray(demand, float) - rate * step)
    backlog = s - np.minimum(np.minimum.accumulate(s), 0.0)
    return backlog / rate


def demand(profiles: list, which: np.ndarray, start: np.ndarray, dur: np.ndarray,
           hbm_fraction: np.ndarray, longer: np.ndarray | None = None, step: float = BIN) -> np.ndarray:
    """Bytes HBM is asked for per step of the timeline. Workgroup w runs profile which[w], stretched to
    its own duration dur[w] (a longer loop moves proportionally more bytes: the rate is kept), and
    spread over `longer` more cycles when it waits on the queue (the same bytes, later);
    hbm_fraction[w, b]: the fraction of buffer b's reads HBM serves for w (stores: all)."""
    longer = np.zeros(len(dur)) if longer is None else longer
    n = int(np.ceil((start + dur + longer).max() / step)) + 2
    out = np.zeros((2, n))                      # reads, writes
    for k, pr in enumerate(profiles):
        ws = np.flatnonzero(which == k)
        if not len(ws) or not len(pr.t):
            continue
        stretch = dur[ws] / pr.cycles
        t = start[ws, None] + ((dur[ws] + longer[ws]) / pr.cycles)[:, None] * pr.t[None, :]
        frac = np.where(pr.store[None, :], 1.0, hbm_fraction[ws][:, np.where(pr.buf >= 0, pr.buf, -1)])
        frac = np.where(pr.buf[None, :] >= 0, frac, 1.0)
        b = stretch[:, None] * pr.nbytes[None, :] * frac
        np.add.at(out, (np.broadcast_to(pr.store[None, :], t.shape).astype(np.int64),
                        np.minimum((t // step).astype(np.int64), n - 1)), b)
    return out


def extension(profiles: list, which: np.ndarray, start: np.ndarray, dur: np.ndarray,
              delay: np.ndarray, step: float = BIN) -> np.ndarray:
    """Cycles each workgroup runs longer because loads it waited for queued (`delay` per step, from
    queue_delay): its waves' recorded waits replayed with the delays, the slowest wave's."""
    ext = np.zeros(len(start))
    for k, pr in enumerate(profiles):
        ws = np.flatnonzero(which == k)
        if not len(ws):
            continue
        stretch = dur[ws] / pr.cycles
        for wv in pr.waits:
            if not len(wv):
                continue
            t_wait, ready, done, issued = wv.T
            slack = np.maximum(ready - done, 0.0)         # the load had completed this early
            stall = np.maximum(done - ready, 0.0)         # the wave waited this long for it
            # the shift a load issued at cycle x carries: that of the last wait before it
            prior = np.searchsorted(t_wait, issued, side="right") - 1
            shifts = np.zeros((len(wv) + 1, len(ws)))     # row e + 1: the shift after wait e
            for e in range(len(wv)):
                at = start[ws] + stretch * issued[e] + shifts[prior[e] + 1]
                d = delay[np.clip((at // step).astype(np.int64), 0, len(delay) - 1)]
                # the wait ends when the wave gets there (moved by the shift so far; a wait that
                # stalled absorbs that much) or when its load does (moved by the shift it was issued
                # with and its queueing delay; an early load absorbs its slack), whichever is later
                shifts[e + 1] = np.maximum(shifts[e] - stall[e], shifts[prior[e] + 1] + d - slack[e])
            ext[ws] = np.maximum(ext[ws], shifts[-1])
    return ext
