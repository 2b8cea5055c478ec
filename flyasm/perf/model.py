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
cycles), so the port contention of a full CU is in its duration; its stores are done when the L2
has them, and the device's HBM queue (below) writes them back (a launch without a probe instead
queues them for its CU's share of HBM bandwidth, perf.cu). A main loop longer or shorter than
recorded (loop_scale f != 1) costs d1 + (f W1 - W1) (d2 - d1) / (W2 - W1): the recorded run (duration d1, MFMA work W1) and one with
about twice the work (trace.scale_loops adds main-loop iterations: d2, W2) give the steady-state
cost per unit of work, so a long sequence costs no more to price. W is measured,
not assumed: scale_loops adds whole iterations, so the x2 run adds 0.96x or 1.08x the recorded work
when iterations are 2 or 6 key steps (a bias of -4% to +8% in d2 - d1 otherwise). W sums the MFMA
pipe cycles of all the workgroup's waves: the SIMDs' pipes are shared by the waves placed on them
(ping-pong puts two on one SIMD), so the workgroup's work, not one wave's, is what its time follows.
f between 1 and 2 is interpolated on the same line (a run at f itself would round the same way), f
below 1 extrapolated down it: the recorded prologue and epilogue stay whole, the loop's steady cost
is taken off (aiter's forward recorded at seqlen 1024 priced at f = 0.5 costs what its record at 512
costs, to the cycle; unscaled it cost 65% more).
Samples whose streams are identical are simulated once.
Dispatch (perf.placement): workgroup i goes to XCD i mod 8 (x fastest), each XCD gives its next
workgroup its earliest-free slot; the makespan is the last end (rounds and the tail round fall out of
this). Durations carry a drawn spread (wg_jitter): real workgroups of equal work do not finish
together, and the spread is what desynchronises the readers of shared data.
Memory hierarchy (when the real launch can be probed, perf.footprint): which stream each workgroup
reads per buffer comes from running the kernel's own address computation over the whole grid; a
stream more than one workgroup reads is shared, the rest is private. Shared reads are placed by LRU
stack distance over the timeline (perf.placement: L2 per XCD, MALL device-wide). A read HBM serves
again, because the MALL evicted what an earlier workgroup fetched, costs refetch_latency more; every
other read (an L2 or MALL hit, a first read, private data) keeps vmem_latency. A workgroup's duration
mixes its CU runs with and without that latency by the fraction of its main-loop steps that wait on
a re-fetch.
HBM (with the probe too, perf.hbm): what every workgroup reads from HBM (private data, and the
fraction of a shared stream the placement leaves to HBM) and what it stores goes, at the times its
CU run issued it, into one first-in first-out queue served at HBM's rate; a workgroup is longer by
what its waves waited at s_waitcnt for loads that queued (its recorded waits replayed), and the
kernel ends no earlier than its last stored line reaches memory. Workgroups that start together
(a round) ask for their tiles at once and wait; the same bytes spread over scattered starts do not.
The kernel time is max(makespan / clock, compulsory DRAM bytes / HBM bandwidth) + launch overhead.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field

import numpy as np

from ..errors import FlyasmError
from . import hbm
from . import params as P
from . import placement
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
    levels: object = None                             # shared bytes served by L2, MALL, HBM again, HBM first


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


def predict(co: bytes, grid, block, kernarg, buffers: dict | None = None, *, kernel: str | None = None,
            lds: int | None = None, flops: float | None = None, dram_bytes: float | None = None,
            trace_grid=None, loop_scale: float = 1.0, params: P.Params | None = None, locs=None,
            tile_axis: int = 0, wg_map=None, probe: dict | None = None) -> Prediction:
    """Predicted time of one launch with grid `grid`. The streams are recorded on a launch described by
    `trace_grid` (default: grid), `kernarg` and `buffers`, which may be a smaller problem of the same
    kernel: fewer heads/batches (y, z), fewer tiles along x (samples map by relative x position) and a
    shorter main loop (`loop_scale` = target work / recorded work, e.g. K / recorded K: trace.scale_loops
    adds main-loop iterations until the MFMA work grows by that factor; a
    callable takes the sample's relative position along the tile axis, e.g. for a causal triangle).
    tile_axis: the grid axis along which work varies (durations are interpolated along it);
    wg_map(grid, x, y, z) -> (x', y', z'): the work item each workgroup runs (arrays in, arrays out,
    a bijection on the grid), when the kernel does not run workgroup (x, y, z) as item (x, y, z).
    probe: {"kernarg", "buffers"} of the real launch (kernarg bytes or a callable of {name: address};
    buffers {name: byte count}), for perf.footprint to find the streams every workgroup of `grid`
    reads; default: kernarg and buffers when trace_grid is the grid. Without it the reads are not
    placed in the memory hierarchy (every VMEM access at vmem_latency).
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
    if probe is None and tg == g:
        probe = {"kernarg": kernarg, "buffers": buffers or {}}
    fp = footprint_of(co, tr, g, block, probe)
    run = simulate_grid(co, kernel, tr, samples, tg, g, threads, loop_scale, p, locs, tile_axis, wg_map, fp)
    return finish(run, dram_bytes, p, flops)


def footprint_of(co: bytes, tr, grid, block, probe: dict | None):
    """perf.footprint.probe of the real launch, each wave running as far as the recorded waves' first
    access to every buffer they load from (not to what they only write: an output stored after the
    main loop would run the whole loop); None without a probe launch or a trace that names buffers."""
    from ..emu import load_program
    from .footprint import probe as run_probe
    names = getattr(tr, "buffers", None) or []
    if probe is None or not probe.get("buffers") or not any(names):
        return None                          # no launch to probe, or no buffers to place
    if any(w.get("buf") is None for w in tr.waves):
        return None
    loads = {i for i, n in enumerate(names) if n in _load_buffers(load_program(co, tr.kernel), tr.waves, names)}
    quota = 1
    for w in tr.waves:
        buf = w["buf"]
        vm = np.flatnonzero(buf >= 0)
        first_of, first = np.unique(buf[vm], return_index=True)
        first = [f for b, f in zip(first_of.tolist(), first.tolist()) if b in loads]
        quota = max(quota, max(first) + 1 if first else 1)
    fp = run_probe(co, tr.kernel, grid, block, probe["kernarg"], probe.get("buffers") or {}, quota)
    if fp is not None:
        fp.nbytes = {n: int(v if isinstance(v, (int, np.integer)) else np.asarray(v).nbytes)
                     for n, v in probe["buffers"].items()}
    return fp


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
    levels: object = None       # shared bytes served by L2, MALL, HBM again, HBM first (placement)
    uses: tuple = ()            # the params.FITTED_SIMULATED constants the result depends on


_SIM_CACHE: dict = {}
_RUN_CACHE: dict = {}
_DEFAULTS = P.Params()
# constants perf.cu.simulate never reads: the placement's, the post-simulation ones, and the device
# atomic rate (in FITTED_SIMULATED; it reaches the CU as cu_atomic_dwords_per_clk)
_NOT_READ_BY_CU = P.FITTED + P.FITTED_SIMULATED + ("n_xcd", "l2_bytes", "mall_bytes")



def simulate_grid(co, kernel, tr, samples, tg, g, threads, loop_scale, p, locs=None, tile_axis: int = 0,
                  wg_map=None, footprint=None) -> GridRun:
    """`samples` are work items of the trace grid `tg` (sample_plan), in the order `tr` recorded them.
    `footprint` (perf.footprint.probe of the real launch): the streams each workgroup reads; with it
    the reads are placed in the memory hierarchy (perf.placement), without it every VMEM access
    takes vmem_latency."""
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
    # a program without atomics runs alike at any share of the L2's atomic rate (its runs stay shared);
    # the busy CUs share HBM's bandwidth for what they store;
    # the CU runs read none of the constants the placement or the calibration apply (their runs stay
    # shared across a search over those: refetch_latency reaches them as the streams' latencies)
    pc = p.with_(cu_bytes_per_clk=min(p.cu_bytes_per_clk, p.l2_hit_bytes_per_clk / active_cu),
                 cu_atomic_dwords_per_clk=p.l2_atomic_dwords_per_clk / active_cu if any(static.atomic) else None,
                 cu_hbm_bytes_per_clk=p.hbm_bytes_per_clk / active_cu,
                 # no probe, no timeline of what the workgroups ask of HBM together (perf.hbm): stores
                 # wait for the busy CUs' share of HBM instead of the device's queue
                 stores_complete_at_l2=footprint is not None,
                 **{n: getattr(_DEFAULTS, n) for n in _NOT_READ_BY_CU})
    ax = tile_axis
    work = np.asarray(static.passes, float)     # loops scale so that the MFMA work grows by the factor
    wpg = -(-threads // 64)
    by_wg: dict[int, list] = {}
    for s in tr.waves:
        by_wg.setdefault(s["wg"], []).append(s)
    names = list(getattr(tr, "buffers", []) or [])
    loads = _load_buffers(prog, tr.waves, names)
    shared = _shared_buffers(footprint, loads)

    def sample_runs(lat=None):
        """{sample: (cycles, {buffer: bytes read})} with the shared streams' reads at lat[0] cycles and
        the private ones' at lat[1]; None: every read at vmem_latency."""
        lats = None if lat is None else tuple((b, lat[0] if b in shared else lat[1]) for b in sorted(loads))
        key = (tr.key or id(tr), tuple(samples), loop_scale if not callable(loop_scale) else
               tuple(loop_scale(wg[ax] / max(tg[ax] - 1, 1)) for wg in samples), resident, pc, lats)
        hit = _SIM_CACHE.get(key)
        if hit is not None:
            return hit
        out, main, seen = {}, None, {}
        for si, wg in enumerate(samples):
            rel = wg[ax] / max(tg[ax] - 1, 1)
            f = loop_scale(rel) if callable(loop_scale) else loop_scale
            raw = by_wg.get(si, [])
            if not raw:
                raise PerfError(f"the trace has no waves for sampled workgroup {wg}")
            ident = (hashlib.sha1(b"".join(w["pc"].tobytes() + w["cost"].tobytes() for w in raw)).hexdigest(), f)
            if ident in seen:                      # the same stream as an earlier sample: same duration
                out[wg] = seen[ident]
                continue

            def run_at(fs, raw=raw, stream=ident[0]):
                # one CU run per (stream, scale, residency, constants, latencies): shapes that differ
                # only in their loop scale share the x1 and x2 runs of the steady-state extrapolation
                rk = (tr.key or id(tr), stream, fs, resident, pc, lats)
                if rk not in _RUN_CACHE:
                    ws = [_with_latency(scale_loops(w, fs, work), names, lats, p.vmem_latency) for w in raw]
                    simd_of = [[(g_ * wpg + kk) % 4 for kk in range(len(ws))] for g_ in range(resident)]
                    r = simulate(prog, static, [ws] * resident, simd_of, pc,
                                 starts=[g_ * p.wg_stagger for g_ in range(resident)])
                    _RUN_CACHE[rk] = (float(np.mean([e - s for e, s in zip(r.wg_end, r.wg_start)])),
                                      sum(stream_work(w, work) for w in ws), r, _bytes_by_buffer(ws, names))
                return _RUN_CACHE[rk]
            d, w1, r, nb = run_at(1.0)
            traffic = (hbm.Profile.of(r, d), None, 0.0)
            if f != 1.0:    # steady state: the loop's cost per unit of work from x1 and x2, linear in work
                d2, w2, r, nb2 = run_at(2.0)
                # no MFMA work added (no loop, or a loop without MFMAs, scaled by iterations): per unit of scale
                k = (f - 1.0) * (w1 / (w2 - w1) if w2 > w1 else 1.0)
                traffic = (traffic[0], hbm.Profile.of(r, d2), k)
                d += k * (d2 - d)
                nb = {b: v + k * (nb2.get(b, 0.0) - v) for b, v in nb.items()}
            out[wg] = seen[ident] = (d, nb, traffic)
            if main is None or d >= main[0]:
                main = (d, r)
        hit = _SIM_CACHE[key] = (out, main[1])
        return hit

    def on_grid(values: dict) -> np.ndarray:
        """A per-sample value spread over the real grid, in dispatch order (x fastest): linear along
        the tile axis between the samples, the last of each other axis differing by its own sample."""
        others = [a for a in range(3) if a != ax]
        line = sorted((wg[ax] / max(tg[ax] - 1, 1), v) for wg, v in values.items() if all(wg[a] == 0 for a in others))
        dt = np.interp(np.arange(g[ax]) / max(g[ax] - 1, 1), [x for x, _ in line], [v for _, v in line])
        d = np.broadcast_to(dt.reshape([-1 if 2 - a == ax else 1 for a in range(3)]), g[::-1]).copy()  # [z, y, x]
        first = values[(0, 0, 0)]
        for a in others:
            if tg[a] > 1:
                last = tuple(tg[a] - 1 if b == a else 0 for b in range(3))
                d[tuple(-1 if 2 - b == a else slice(None) for b in range(3))] += values[last] - first
        if wg_map is not None:           # the item each workgroup runs, in dispatch order (x fastest)
            z, y, x = np.indices(g[::-1]).reshape(3, -1)
            lx, ly, lz = wg_map(g, x, y, z)
            d = d[lz, ly, lx]
        return d.reshape(-1)

    slots = p.n_cu // p.n_xcd * resident
    # the spread of real durations desynchronises the readers of shared data; it shapes the timeline
    # the placement sees (the makespan's own tail is inside the fitted clock and launch constants)
    jitter = 1.0 + p.wg_jitter * np.random.default_rng(0).standard_normal(n_wg)
    if footprint is None:
        runs, r = sample_runs(None)
        d = np.maximum(on_grid({wg: v[0] for wg, v in runs.items()}), 1.0)
        fractions = None
    else:
        # two CU runs per sample: the shared streams' reads at vmem_latency, and at vmem_latency +
        # refetch_latency (data HBM serves again after the MALL evicted it); a workgroup mixes them
        # by the fraction of its main-loop steps that wait on such a re-fetch
        runs, r = sample_runs((p.vmem_latency, p.vmem_latency))
        slow = sample_runs((p.vmem_latency + p.refetch_latency, p.vmem_latency))[0]
        fast = np.maximum(on_grid({wg: v[0] for wg, v in runs.items()}), 1.0)
        refetch = np.maximum(on_grid({wg: v[0] for wg, v in slow.items()}), 1.0)
        streams = _streams(footprint, shared, runs, on_grid, by_wg, names)
        d = fast
        for _ in range(2 if streams.key.shape[1] else 0):   # the timeline sets the levels, they the durations
            start = placement.dispatch(d * jitter, p.n_xcd, slots)
            lv = placement.levels(streams, start, d * jitter, p.n_xcd, p.l2_bytes, p.mall_bytes)
            q = _refetch_steps(lv)
            d = fast + q * (refetch - fast)
        fractions = np.zeros(4)
        if streams.key.shape[1]:
            fractions = np.einsum("wjl,wj->l", lv, streams.nbytes)
            fractions = fractions / max(fractions.sum(), 1.0)
        # the device's HBM as one queue: what the workgroups running together load and store at once
        hf = _hbm_fractions(n_wg, names, streams, lv if streams.key.shape[1] else None)
        order, near = _nearest_sample(runs, samples, on_grid)
        hf = _at_most_once(hf, [runs[wg][2][0] for wg in order], near, d, names, shared, footprint.nbytes)
        ext, drained = _hbm_queue([runs[wg][2] for wg in order], near, d, jitter, hf, p, slots)
        d = d + ext
    start = placement.dispatch(d, p.n_xcd, slots)
    cycles = int(np.ceil((start + d).max()))
    if footprint is not None:                  # the kernel ends when its write-back has reached memory
        cycles = max(cycles, int(np.ceil(drained)))
    active = min(1.0, float(d.sum()) / (p.n_cu * resident * max(cycles, 1)))
    durs = {wg: v[0] for wg, v in runs.items()}
    simd = {sid: {"mfma": bz["mfma"] / max(r.cycles, 1), "valu": bz["valu"] / max(r.cycles, 1),
                  **{f"idle_{c}": v / max(r.cycles, 1) for c, v in r.idle.get(sid, {}).items()}}
            for sid, bz in r.busy.items()}
    stalls = sorted(((i, prog.insts[i].pc, prog.insts[i].text(), prog.insts[i].loc, row) for i, row in
                     r.stalls.items()), key=lambda t: -sum(v for kk, v in t[4].items() if kk != "issued"))
    # the fitted constants this run read (a search over one re-simulates only the rows it reaches): the
    # atomic rate with atomics, the re-fetch latency with shared streams, the spread with a timeline
    uses = (("l2_atomic_dwords_per_clk",) if any(static.atomic) else ()) + \
        (("refetch_latency",) if fractions is not None and streams.key.shape[1] else ()) + \
        (("wg_jitter",) if footprint is not None else ())
    return GridRun(cycles, g, resident, durs, simd, stalls, prog, active, fractions, uses)


def _load_buffers(prog, waves, names) -> set:
    """Names of the buffers the recorded waves load from (a VMEM load into registers or LDS)."""
    out = set()
    for w in waves:
        buf = w.get("buf")
        if buf is None:
            continue
        for i in np.unique(w["pc"][buf >= 0]).tolist():
            name = prog.insts[i].name
            if "load" in name:
                out.update(names[b] for b in np.unique(buf[w["pc"] == i]).tolist() if 0 <= b < len(names) and names[b])
    return out


def _shared_buffers(footprint, loads) -> set:
    """Load buffers most of whose workgroups read a stream another workgroup reads too."""
    if footprint is None:
        return set()
    out = set()
    for b in loads:
        k = footprint.key.get(b)
        if k is None or not (k >= 0).any():
            continue
        _, inv, cnt = np.unique(k[k >= 0], return_inverse=True, return_counts=True)
        if (cnt[inv] > 1).mean() > 0.5:
            out.add(b)
    return out


def _with_latency(w: dict, names: list, lats, default: int) -> dict:
    """The wave stream with 'lat': each VMEM access's latency by the buffer it accesses, from (name,
    cycles) pairs; None: the stream as is (every access at vmem_latency)."""
    if lats is None or "buf" not in w:
        return w
    by_name = dict(lats)
    table = np.array([by_name.get(n, default) for n in names] + [default], np.int64)
    out = dict(w)
    out["lat"] = table[w["buf"]]           # buf -1 picks the last entry: the default
    return out


def _bytes_by_buffer(ws, names) -> dict:
    """Bytes (whole 128-byte lines) the waves read or write per buffer name."""
    out: dict = {}
    for w in ws:
        buf = w.get("buf")
        if buf is None:
            continue
        m = buf >= 0
        tot = np.bincount(buf[m].astype(np.int64), w["lines"][m] * 128, minlength=len(names))
        for i, v in enumerate(tot.tolist()):
            if v and i < len(names) and names[i]:
                out[names[i]] = out.get(names[i], 0.0) + v
    return out


def _streams(footprint, shared, runs, on_grid, by_wg, names) -> "placement.Streams":
    """The placement model's input: per workgroup (dispatch order) the streams it shares with other
    workgroups (footprint keys), how many bytes (the samples' reads spread over the grid) and when
    (the span of the recorded waves' accesses, as fractions of their instruction streams). Buffers
    read by the same groups of workgroups (K and V of a head) are one stream: read together, at one
    pace. Private data (a Q tile) is left out: its first read is its only one, and its bytes in a
    window are a few per cent of what the shared streams sweep (a 64 KB Q tile per 8 MB of K and V)."""
    n_wg = int(np.prod(footprint.grid))
    slots: dict = {}                            # partition of the workgroups -> (buffers, key)
    for b in sorted(shared):
        k = footprint.key[b]
        _, inv = np.unique(k, return_inverse=True)
        inv = np.where(k >= 0, inv.reshape(-1), -1)
        slots.setdefault(inv.tobytes(), ([], inv))[0].append(b)
    key = np.full((n_wg, len(slots)), -1, np.int64)
    nbytes = np.zeros((n_wg, len(slots)))
    span = np.zeros((len(slots), 2))
    for j, (bufs, inv) in enumerate(slots.values()):
        key[:, j] = np.where(inv >= 0, inv + j * n_wg, -1)
        nbytes[:, j] = np.maximum(on_grid({wg: sum(v[1].get(b, 0.0) for b in bufs) for wg, v in runs.items()}), 0.0)
        ids = [i for i, n in enumerate(names) if n in bufs]
        lo, hi = 1.0, 0.0
        for raw in by_wg.values():
            for w in raw:
                idx = np.flatnonzero(np.isin(w["buf"], ids))
                if len(idx):
                    lo, hi = min(lo, idx[0] / len(w["pc"])), max(hi, (idx[-1] + 1) / len(w["pc"]))
        span[j] = (lo, max(hi, lo + 1e-6))
    return placement.Streams(key, nbytes, span, tuple("+".join(bufs) for bufs, _ in slots.values()))


def _hbm_fractions(n_wg: int, names: list, streams, lv) -> np.ndarray:
    """[w, b]: the fraction of buffer b's reads HBM serves for workgroup w: private data every time (it
    is read once), a shared stream what the placement left to HBM (first reads and re-fetches)."""
    out = np.ones((n_wg, max(len(names), 1)))
    if lv is None:
        return out
    for j, joined in enumerate(streams.names):
        for b in joined.split("+"):
            if b in names:
                out[:, names.index(b)] = lv[:, j, placement.HBM] + lv[:, j, placement.COLD]
    return out


def _nearest_sample(runs: dict, samples: list, on_grid) -> tuple[list, np.ndarray]:
    """(the simulated samples in order, [w]: the index of the sample whose run workgroup w takes)."""
    order = [wg for wg in samples if wg in runs]
    near = np.clip(np.rint(on_grid({wg: float(i) for i, wg in enumerate(order)})), 0, len(order) - 1)
    return order, near.astype(int)


def _at_most_once(hf: np.ndarray, profiles: list, near: np.ndarray, d: np.ndarray, names: list,
                  shared: set, sizes: dict | None) -> np.ndarray:
    """hf with each private buffer's HBM fraction scaled so that the workgroups together read at most
    the buffer's size from HBM: data read by one workgroup each is read once. (A buffer the probe
    saw as private while many workgroups read its bytes, e.g. streams it could not match, would
    otherwise ask HBM for many times its size.) profiles: each sample's x1 traffic (hbm.Profile)."""
    if not sizes:
        return hf
    out = hf.copy()
    for b, name in enumerate(names):
        if not name or name in shared or name not in sizes:
            continue
        # first-touch bytes a cycle each sample's workgroup loads from the buffer
        per = [pr.nbytes[(pr.buf == b) & ~pr.store].sum() / pr.cycles for pr in profiles]
        total = float((np.array(per)[near] * d).sum())
        if total > sizes[name] > 0:
            out[:, b] *= sizes[name] / total
    return out


def _hbm_queue(traffic: list, near: np.ndarray, d: np.ndarray, jitter: np.ndarray, hf: np.ndarray,
               p: P.Params, slots: int) -> tuple[np.ndarray, float]:
    """([w]: cycles workgroup w waits on loads queued for HBM behind what the others ask at the same
    time, the cycle the queue has served everything) (perf.hbm), on the timeline the durations and
    their spread give; the timeline moves with the waits it causes, so three rounds. Workgroup w runs
    sample near[w]'s traffic ((x1 profile, x2 profile or None, k) per sample); a loop scaled from its
    record extrapolates the waits from the x1 and x2 runs as the duration is (k)."""
    x1 = [t[0] for t in traffic]
    x2 = [t[1] or t[0] for t in traffic]
    k = np.array([t[2] for t in traffic])[near]
    ext = np.zeros(len(d))
    dj = d * jitter
    # the replay is first order: under a demand that stays above HBM's rate it would add a delay per
    # wait without bound. A workgroup can wait no longer than its HBM bytes take at its share of the
    # rate with every slot of the device loading (the bandwidth-bound limit)
    ext_max = np.zeros(len(d))
    for i, pr in enumerate(x1):
        ws = near == i
        if not ws.any():
            continue
        own = np.where(pr.store | (pr.buf < 0), 1.0, hf[np.ix_(ws, np.maximum(pr.buf, 0))].mean(0)) * pr.nbytes
        ext_max[ws] = own.sum() * dj[ws] / pr.cycles * (slots * p.n_xcd) / p.hbm_bytes_per_clk
    for _ in range(3):
        start = placement.dispatch(dj + ext, p.n_xcd, slots)
        step = hbm.step_for((start + dj + ext).max())
        # reads and the write-back of stored lines share one first-in first-out queue
        delay = hbm.queue_delay(hbm.demand(x1, near, start, dj, hf, ext, step).sum(0), p.hbm_bytes_per_clk, step)
        e1 = hbm.extension(x1, near, start, dj, delay, step)
        e2 = hbm.extension(x2, near, start, dj, delay, step) if k.any() else e1
        ext = np.clip(e1 + k * (e2 - e1), 0.0, ext_max)
    busy = np.flatnonzero(delay > 0)
    drained = (busy[-1] + 1) * step + delay[busy[-1]] if len(busy) else 0.0
    return ext, drained


def _refetch_steps(lv: np.ndarray) -> np.ndarray:
    """[w]: the fraction of a workgroup's main-loop steps that wait on an HBM re-fetch: a step reads
    every shared stream, each independently at its own levels."""
    none = np.ones(lv.shape[0])
    for j in range(lv.shape[1]):
        f = lv[:, j, :]
        has = f.sum(1) > 0
        none[has] *= 1.0 - f[has, placement.HBM]
    return 1.0 - none


def finish(run: GridRun, dram_bytes: float, p: P.Params, flops: float | None = None) -> Prediction:
    """Microseconds from a GridRun: max(compute at the sustained clock for its CU activity
    (Params.clock_mhz), compulsory DRAM traffic at the achievable HBM bandwidth) + launch overhead."""
    compute_us = run.cycles / p.clock_mhz(run.active)
    dram_us = dram_bytes / (p.hbm_tb_s * 1e6 * p.hbm_efficiency)
    us = max(compute_us, dram_us) + p.launch_us
    pred = Prediction(us, run.cycles, compute_us, dram_us, p.launch_us, run.grid, run.resident, run.samples,
                      dram_bytes=dram_bytes, flops=flops, simd=run.simd, stalls=run.stalls, program=run.program,
                      active=run.active, levels=run.levels)
    if flops:
        pred.tflops = flops / us / 1e6
    return pred


def reprice(pred: Prediction, p: P.Params) -> Prediction:
    """The same simulation under other calibrated constants (they apply after the simulation)."""
    run = GridRun(pred.cycles, pred.grid, pred.resident, pred.samples, pred.simd, pred.stalls, pred.program,
                  pred.active, pred.levels)
    return finish(run, pred.dram_bytes, p, pred.flops)
