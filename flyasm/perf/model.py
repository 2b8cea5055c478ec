"""Whole-kernel time: sampled workgroups through the CU model, then the grid over the device.

Sample (say which, it is part of the answer): along grid x (the tile axis of GEMMs and attention)
the workgroups x = 0, the middle one and the last, at y = z = 0. A workgroup's duration is linear
in x between those samples, which is exact for uniform tiles, for a causal triangle (work linear in
the tile index) and for aiter's paired causal tiles (flat). Each sample runs on one CU with as many
copies of itself as occupancy and the grid allow (co-resident workgroups staggered by wg_stagger
cycles), so the port contention of a full CU is in its duration.
Dispatch: the grid's workgroups go in order (x fastest) to the earliest-free of n_cu x resident
slots; the makespan is the last end (rounds and the tail round fall out of this). The kernel time
is max(makespan / clock, compulsory DRAM bytes / HBM bandwidth) + launch overhead.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

import numpy as np

from ..errors import FlyasmError
from . import params as P
from .capture import capture
from .cu import Static, simulate


class PerfError(FlyasmError):
    """The timing model cannot price this launch."""


@dataclass
class Prediction:
    us: float
    cycles: int
    compute_us: float
    dram_us: float
    launch_us: float
    grid: tuple
    resident: int                 # workgroups per CU used
    samples: dict                 # x -> modelled workgroup duration (cycles)
    tflops: float | None = None
    simd: dict = field(default_factory=dict)          # per SIMD: mfma/valu busy fraction, idle by cause
    stalls: list = field(default_factory=list)        # rows: (index, pc, text, loc, issued, causes)
    program: object = None


def occupancy_of(co: bytes, kernel: str | None, threads: int) -> int:
    """Workgroups per CU from the descriptor (VGPR/AGPR, SGPR, LDS limits; report.stats.occupancy)."""
    from ..report.program import as_program
    from ..report.stats import occupancy
    d = as_program(co, kernel).descriptor
    occ = occupancy(d["vgpr_alloc"], d["sgpr_count"] or 0, d["lds"] or 0, threads)
    if not occ["fits"]:
        raise PerfError(f"a workgroup of {threads} work-items does not fit on a CU ({occ['limited_by']})")
    return int(occ["workgroups_per_cu"])


def _samples(grid) -> list[tuple]:
    gx = grid[0]
    return [(x, 0, 0) for x in sorted({0, (gx - 1) // 2, gx - 1})]


def dispatch(durations: np.ndarray, slots: int) -> int:
    """Makespan of workgroups (in dispatch order) on `slots` identical slots, earliest-free first."""
    n = len(durations)
    if n <= slots:
        return int(durations.max())
    free = [0] * slots
    heapq.heapify(free)
    end = 0
    for d in durations.tolist():
        t = heapq.heappop(free) + d
        end = max(end, t)
        heapq.heappush(free, t)
    return int(end)


def predict(co: bytes, grid, block, kernarg, buffers: dict | None = None, *, kernel: str | None = None,
            lds: int | None = None, flops: float | None = None, dram_bytes: float | None = None,
            trace_grid=None, params: P.Params | None = None, trace=None, locs=None) -> Prediction:
    """Predicted time of one launch. `grid` is the launch's grid; the streams are recorded on
    `trace_grid` (default: grid), which may shrink y/z (heads, batch) but keeps x, with `kernarg`
    and `buffers` for that smaller launch. dram_bytes: compulsory traffic (default: the buffers'
    sizes scaled by grid / trace_grid). flops: for TFLOPS."""
    p = params or P.load()
    g = tuple(int(v) for v in grid) + (1,) * (3 - len(tuple(grid)))
    tg = tuple(int(v) for v in (trace_grid or g)) + (1,) * (3 - len(tuple(trace_grid or g)))
    if tg[0] != g[0]:
        raise PerfError(f"the trace grid {tg} must keep the launch's x extent {g[0]} (x is the sampled axis)")
    b = tuple(int(v) for v in ((block,) if isinstance(block, int) else block)) + (1,) * 3
    threads = b[0] * b[1] * b[2]
    samples = _samples(tg)
    tr = trace or capture(co, tg, block, kernarg, buffers, workgroups=samples, kernel=kernel, lds=lds)
    from ..emu import load_program
    prog = load_program(co, kernel)
    if locs:
        for inst, loc in zip(prog.insts, locs):
            inst.loc = inst.loc or loc
    static = prog.__dict__.get("_perf_static")
    if static is None or static[0] != p.trans_cycles:
        static = (p.trans_cycles, Static.of(prog, p))
        prog.__dict__["_perf_static"] = static
    static = static[1]
    n_wg = g[0] * g[1] * g[2]
    k = occupancy_of(co, prog.name, threads)
    resident = max(1, min(k, math.ceil(n_wg / p.n_cu)))
    active_cu = min(p.n_cu, n_wg)
    share = p.l2_hit_bytes_per_clk / active_cu
    pc = p.with_(cu_bytes_per_clk=min(p.cu_bytes_per_clk, share))
    wpg = -(-threads // 64)
    by_wg: dict[int, list] = {}
    for s in tr.waves:
        by_wg.setdefault(s["wg"], []).append(s)
    durs, simd_rows, stalls = {}, {}, {}
    main = None
    for si, (x, _, _) in enumerate(samples):
        ws = by_wg.get(si)
        if not ws:
            raise PerfError(f"the trace has no waves for sampled workgroup x={x}")
        wgs = [ws] * resident
        simd_of = [[(g_ * wpg + kk) % 4 for kk in range(len(ws))] for g_ in range(resident)]
        r = simulate(prog, static, wgs, simd_of, pc, starts=[g_ * p.wg_stagger for g_ in range(resident)])
        durs[x] = float(np.mean([e - s for e, s in zip(r.wg_end, r.wg_start)]))
        if main is None or durs[x] >= durs.get(main[0], 0):
            main = (x, r)
    xs = np.array(sorted(durs))
    dx = np.interp(np.arange(g[0]), xs, [durs[x] for x in xs])
    per_wg = np.tile(dx, g[1] * g[2])
    cycles = dispatch(np.maximum(per_wg, 1).astype(np.int64), p.n_cu * resident)
    clock = p.clock_ghz * 1e3 * p.clock_derate            # cycles per microsecond
    compute_us = cycles / clock
    if dram_bytes is None:
        scale = n_wg / (tg[0] * tg[1] * tg[2])
        dram_bytes = sum(v if isinstance(v, int) else v.nbytes for v in (buffers or {}).values()) * scale
    dram_us = dram_bytes / (p.hbm_tb_s * 1e6)
    us = max(compute_us, dram_us) + p.launch_us
    pred = Prediction(us, cycles, compute_us, dram_us, p.launch_us, g, resident, durs, program=prog)
    if flops:
        pred.tflops = flops / us / 1e6
    r = main[1]
    for s, bz in r.busy.items():
        simd_rows[s] = {"mfma": bz["mfma"] / max(r.cycles, 1), "valu": bz["valu"] / max(r.cycles, 1)}
    pred.simd = simd_rows
    for i, row in r.stalls.items():
        stalls[i] = row
    pred.stalls = sorted(((i, prog.insts[i].pc, prog.insts[i].text(), prog.insts[i].loc, row) for i, row in
                          stalls.items()), key=lambda t: -sum(v for kk, v in t[4].items() if kk != "issued"))
    return pred
