"""Whole-kernel time: sampled workgroups through the CU model, then the grid over the device.

Sample (say which, it is part of the answer): along the tile axis (grid x for aiter's GEMMs and
attention; a launch may name another, `tile_axis`) the work items 0, the middle one and the last, at
0 on the other axes; and on each other axis with more than one workgroup, its last one. Work items
are the launch's workgroups unless `wg_map` says otherwise: a kernel that re-derives its (tile,
head, batch) from the workgroup id (FlyDSL's XCD-mapping build) gives that bijection, the samples
are taken over work items and emulated at the workgroups that run them, and the dispatch puts each
item's duration where the hardware dispatches its workgroup. An item's duration is linear along the
tile axis between its samples, which is exact for uniform tiles, for a causal triangle (work linear
in the tile index) and for aiter's paired causal tiles (flat). Along the other axes the interior is
taken to equal the first and the last to differ by what its sample shows: the remainder tile (an
M tail; split-K's last split, which in aiter's bf16 GEMMs gets K's remainder: 80 K-steps over 13
splits run 6 each and 8 on the last, seen in the emulator). Each sample runs on one CU with as many
copies of itself as occupancy and the grid allow (co-resident workgroups staggered by wg_stagger
cycles), so the port contention of a full CU is in its duration. A main loop longer than recorded
(loop_scale f > 1) costs d1 + (f W1 - W1) (d2 - d1) / (W2 - W1): the recorded run (duration d1,
MFMA work W1) and one with about twice the work (trace.scale_loops adds main-loop iterations: d2, W2)
give the steady-state cost per unit of work, so a long sequence costs no more to price. W is measured,
not assumed: scale_loops adds whole iterations, so the x2 run adds 0.96x or 1.08x the recorded work
when iterations are 2 or 6 key steps (a bias of -4% to +8% in d2 - d1 otherwise). W sums the MFMA
pipe cycles of all the workgroup's waves: the SIMDs' pipes are shared by the waves placed on them
(ping-pong puts two on one SIMD), so the workgroup's work, not one wave's, is what its time follows.
f between 1 and 2 is interpolated on the same line (a run at f itself would round the same way).
Samples whose streams are identical are simulated once.
Dispatch: the grid's workgroups go in order (x fastest) to the earliest-free of n_cu x resident
slots; the makespan is the last end (rounds and the tail round fall out of this). The kernel time
is max(makespan / clock, compulsory DRAM bytes / HBM bandwidth) + launch overhead.
"""
from __future__ import annotations

import hashlib
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
    samples: dict                 # sampled workgroup (x, y, z) of the trace grid -> duration (cycles)
    tflops: float | None = None
    dram_bytes: float = 0.0
    flops: float | None = None
    simd: dict = field(default_factory=dict)          # per SIMD: mfma/valu busy fraction, idle by cause
    stalls: list = field(default_factory=list)        # rows: (index, pc, text, loc, issued, causes)
    program: object = None
    active: float = 1.0                               # mean fraction of CU slots busy (sets the clock)


def occupancy_of(co: bytes, kernel: str | None, threads: int) -> int:
    """Workgroups per CU from the descriptor (VGPR/AGPR, SGPR, LDS limits; report.stats.occupancy)."""
    from ..codeobj.reader import read_code_object
    from ..report.program import codeobj_descriptor
    from ..report.stats import occupancy
    obj = read_code_object(co)
    d = codeobj_descriptor(obj.kernel(kernel) if kernel else obj.kernels[0])
    occ = occupancy(d["vgpr_alloc"], d["sgpr_count"] or 0, d["lds"] or 0, threads)
    if not occ["fits"]:
        raise PerfError(f"a workgroup of {threads} work-items does not fit on a CU ({occ['limited_by']})")
    return int(occ["workgroups_per_cu"])


def _samples(grid, tile_axis: int = 0) -> list[tuple]:
    """The sampled work items (x, y, z) of `grid`: first, middle and last along the tile axis, then
    the last of each other axis that has more than one."""
    dims = _dims3(grid)

    def at(axis, i):
        return tuple(i if a == axis else 0 for a in range(3))
    n = dims[tile_axis]
    return [at(tile_axis, i) for i in sorted({0, (n - 1) // 2, n - 1})] + \
        [at(a, dims[a] - 1) for a in range(3) if a != tile_axis and dims[a] > 1]


def sample_plan(grid, tile_axis: int = 0, wg_map=None) -> tuple[list, list]:
    """(sampled work items, the workgroups of `grid` that run them: what to record)."""
    items = _samples(grid, tile_axis)
    if wg_map is None:
        return items, items
    g = _dims3(grid)
    z, y, x = np.indices(g[::-1]).reshape(3, -1)
    lx, ly, lz = wg_map(g, x, y, z)
    where = {(int(a), int(b), int(c)): (int(i), int(j), int(k)) for a, b, c, i, j, k in zip(lx, ly, lz, x, y, z)}
    if len(where) != len(x):
        raise PerfError(f"wg_map is not a bijection on the grid {g}")
    return items, [where[it] for it in items]


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
            trace_grid=None, loop_scale: float = 1.0, params: P.Params | None = None, locs=None,
            tile_axis: int = 0, wg_map=None) -> Prediction:
    """Predicted time of one launch with grid `grid`. The streams are recorded on a launch described by
    `trace_grid` (default: grid), `kernarg` and `buffers`, which may be a smaller problem of the same
    kernel: fewer heads/batches (y, z), fewer tiles along x (samples map by relative x position) and a
    shorter main loop (`loop_scale` = target work / recorded work, e.g. K / recorded K: trace.scale_loops
    adds main-loop iterations until the MFMA work grows by that factor; a
    callable takes the sample's relative position along the tile axis, e.g. for a causal triangle).
    tile_axis: the grid axis along which work varies (durations are interpolated along it);
    wg_map(grid, x, y, z) -> (x', y', z'): the work item each workgroup runs (arrays in, arrays out,
    a bijection on the grid), when the kernel does not run workgroup (x, y, z) as item (x, y, z).
    dram_bytes: compulsory traffic (default: the buffers' sizes x grid / trace_grid). flops: for TFLOPS."""
    p = params or P.load()
    g = _dims3(grid)
    tg = _dims3(trace_grid or g)
    threads = int(np.prod(_dims3(block)))
    samples, wgs = sample_plan(tg, tile_axis, wg_map)
    tr = capture(co, tg, block, kernarg, buffers, workgroups=wgs, kernel=kernel, lds=lds)
    if dram_bytes is None:
        scale = (g[0] * g[1] * g[2]) / (tg[0] * tg[1] * tg[2])
        dram_bytes = sum(v if isinstance(v, int) else v.nbytes for v in (buffers or {}).values()) * scale
    run = simulate_grid(co, kernel, tr, samples, tg, g, threads, loop_scale, p, locs, tile_axis, wg_map)
    return finish(run, dram_bytes, p, flops)


def _dims3(x) -> tuple:
    t = (x,) if isinstance(x, (int, np.integer)) else tuple(x)
    return tuple(int(v) for v in t) + (1,) * (3 - len(t))


@dataclass
class GridRun:
    """What the CU simulation gives for one launch, before the calibrated constants apply."""
    cycles: int                 # dispatch makespan at the nominal clock
    grid: tuple
    resident: int
    samples: dict               # sampled workgroup (x, y, z) of the trace grid -> duration (cycles)
    simd: dict
    stalls: list
    program: object
    active: float = 1.0         # mean fraction of the device's workgroup slots busy over the makespan


_SIM_CACHE: dict = {}
_RUN_CACHE: dict = {}


def simulate_grid(co, kernel, tr, samples, tg, g, threads, loop_scale, p, locs=None, tile_axis: int = 0,
                  wg_map=None) -> GridRun:
    """`samples` are work items of the trace grid `tg` (sample_plan), in the order `tr` recorded them."""
    from ..emu import load_program
    from .trace import scale_loops, stream_work
    prog = load_program(co, kernel)
    if locs:
        for inst, loc in zip(prog.insts, locs):
            inst.loc = inst.loc or loc
    n_wg = g[0] * g[1] * g[2]
    resident = max(1, min(occupancy_of(co, prog.name, threads), math.ceil(n_wg / p.n_cu)))
    active_cu = min(p.n_cu, n_wg)
    static = prog.__dict__.get("_perf_static")
    if static is None or static[0] != Static.depends_on(p):
        static = (Static.depends_on(p), Static.of(prog, p))
        prog.__dict__["_perf_static"] = static
    static = static[1]
    # a program without atomics runs alike at any share of the L2's atomic rate (its runs stay shared)
    pc = p.with_(cu_bytes_per_clk=min(p.cu_bytes_per_clk, p.l2_hit_bytes_per_clk / active_cu),
                 cu_atomic_dwords_per_clk=p.l2_atomic_dwords_per_clk / active_cu if any(static.atomic) else None)
    ax = tile_axis
    key = (tr.key or id(tr), tuple(samples), loop_scale if not callable(loop_scale) else
           tuple(loop_scale(wg[ax] / max(tg[ax] - 1, 1)) for wg in samples), resident, pc)
    hit = _SIM_CACHE.get(key)
    if hit is None:
        work = np.asarray(static.passes, float)     # loops scale so that the MFMA work grows by the factor
        wpg = -(-threads // 64)
        by_wg: dict[int, list] = {}
        for s in tr.waves:
            by_wg.setdefault(s["wg"], []).append(s)
        durs, main, seen = {}, None, {}
        for si, wg in enumerate(samples):
            rel = wg[ax] / max(tg[ax] - 1, 1)
            f = loop_scale(rel) if callable(loop_scale) else loop_scale
            raw = by_wg.get(si, [])
            if not raw:
                raise PerfError(f"the trace has no waves for sampled workgroup {wg}")
            ident = (hashlib.sha1(b"".join(w["pc"].tobytes() + w["cost"].tobytes() for w in raw)).hexdigest(), f)
            if ident in seen:                      # the same stream as an earlier sample: same duration
                durs[wg] = seen[ident]
                continue

            def run_at(fs, raw=raw, stream=ident[0]):
                # one CU run per (stream, scale, residency, constants): shapes that differ only in
                # their loop scale share the x1 and x2 runs of the steady-state extrapolation
                rk = (tr.key or id(tr), stream, fs, resident, pc)
                if rk not in _RUN_CACHE:
                    ws = [scale_loops(w, fs, work) for w in raw]
                    simd_of = [[(g_ * wpg + kk) % 4 for kk in range(len(ws))] for g_ in range(resident)]
                    r = simulate(prog, static, [ws] * resident, simd_of, pc,
                                 starts=[g_ * p.wg_stagger for g_ in range(resident)])
                    _RUN_CACHE[rk] = (float(np.mean([e - s for e, s in zip(r.wg_end, r.wg_start)])),
                                      sum(stream_work(w, work) for w in ws), r)
                return _RUN_CACHE[rk]
            d, w1, r = run_at(1.0)
            if f > 1.0:     # steady state: the loop's cost per unit of work from x1 and x2, linear in work
                d2, w2, r = run_at(2.0)
                # no MFMA work added (no loop, or a loop without MFMAs, scaled by iterations): per unit of scale
                d += (f - 1.0) * (d2 - d) * (w1 / (w2 - w1) if w2 > w1 else 1.0)
            durs[wg] = seen[ident] = d
            if main is None or d >= main[0]:
                main = (d, r)
        hit = _SIM_CACHE[key] = (durs, main[1])
    durs, r = hit
    others = [a for a in range(3) if a != ax]
    line = sorted((wg[ax] / max(tg[ax] - 1, 1), d) for wg, d in durs.items() if all(wg[a] == 0 for a in others))
    dt = np.interp(np.arange(g[ax]) / max(g[ax] - 1, 1), [x for x, _ in line], [d for _, d in line])
    d = np.broadcast_to(dt.reshape([-1 if 2 - a == ax else 1 for a in range(3)]), g[::-1]).copy()  # [z, y, x]
    first = durs[(0, 0, 0)]
    for a in others:
        if tg[a] > 1:
            last = tuple(tg[a] - 1 if b == a else 0 for b in range(3))
            d[tuple(-1 if 2 - b == a else slice(None) for b in range(3))] += durs[last] - first
    if wg_map is not None:           # the item each workgroup runs, in dispatch order (x fastest)
        z, y, x = np.indices(g[::-1]).reshape(3, -1)
        lx, ly, lz = wg_map(g, x, y, z)
        d = d[lz, ly, lx]
    d = np.maximum(d.reshape(-1), 1).astype(np.int64)
    cycles = dispatch(d, p.n_cu * resident)
    active = min(1.0, float(d.sum()) / (p.n_cu * resident * max(cycles, 1)))
    simd = {sid: {"mfma": bz["mfma"] / max(r.cycles, 1), "valu": bz["valu"] / max(r.cycles, 1),
                  **{f"idle_{c}": v / max(r.cycles, 1) for c, v in r.idle.get(sid, {}).items()}}
            for sid, bz in r.busy.items()}
    stalls = sorted(((i, prog.insts[i].pc, prog.insts[i].text(), prog.insts[i].loc, row) for i, row in
                     r.stalls.items()), key=lambda t: -sum(v for kk, v in t[4].items() if kk != "issued"))
    return GridRun(cycles, g, resident, durs, simd, stalls, prog, active)


def finish(run: GridRun, dram_bytes: float, p: P.Params, flops: float | None = None) -> Prediction:
    """Microseconds from a GridRun: max(compute at the sustained clock for its CU activity
    (Params.clock_mhz), compulsory DRAM traffic at the achievable HBM bandwidth) + launch overhead."""
    compute_us = run.cycles / p.clock_mhz(run.active)
    dram_us = dram_bytes / (p.hbm_tb_s * 1e6 * p.hbm_efficiency)
    us = max(compute_us, dram_us) + p.launch_us
    pred = Prediction(us, run.cycles, compute_us, dram_us, p.launch_us, run.grid, run.resident, run.samples,
                      dram_bytes=dram_bytes, flops=flops, simd=run.simd, stalls=run.stalls, program=run.program,
                      active=run.active)
    if flops:
        pred.tflops = flops / us / 1e6
    return pred


def reprice(pred: Prediction, p: P.Params) -> Prediction:
    """The same simulation under other calibrated constants (they apply after the simulation)."""
    run = GridRun(pred.cycles, pred.grid, pred.resident, pred.samples, pred.simd, pred.stalls, pred.program,
                  pred.active)
    return finish(run, pred.dram_bytes, p, pred.flops)
