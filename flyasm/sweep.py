"""flyasm sweep: build every variant of a grid, check each, rank them by a timing model, and run the
best in the strict emulator against the builder's reference.

A sweep takes the grid files of `flyasm build-set` (flyasm/dispatch.py: `build(**params)` and a
grid, `FILE.py[:GRID]`). A grid entry is any keyword parameters of build(): levers and schedule
knobs alike. Two optional hooks in the grid file make the table complete:

    def workload(**params) -> dict      # the problem a prediction is for:
        return {"flops": 4 * B * H * S * S * D, "label": "B16 H64 S8192"}
    def verify(kernel, seed, **params) -> dict   # the kernel in the emulator, fresh inputs from seed,
        return {"ok": bool, "max_err": float, "tol": float, "shape": "..."}   # vs the reference

Without workload() the table has no µs/TFLOPS (variants rank by modelled MFMA FLOPs per cycle);
without verify() the verified column says "not-run". A grid file that builds with code from
elsewhere lists it in `SOURCES = [path, ...]` (files or directories of .py) for the cache key.

Pipeline: build + check + model run in worker processes (or Ray tasks with `ray_address`), results
cached by content (the builder's directory of .py files, flyasm's sources and tables, the
parameters, the toolchain, the model), so a rerun only builds what changed; then the best `top`
variants that check clean are verified (also cached, by the same key). A variant with findings or a
build error is listed, never ranked above one that checks clean.

Rankers are pluggable (RANKERS): "static" is flyasm.report.model; "perf" is the CU timing model,
flyasm.perf.sweep_predict(kernel, workload), which prices the launch the grid's workload() gives
under "launch" (perf.predict()'s grid, block, kernarg, buffers ...; see flyasm/perf/sweep.py).
"""
from __future__ import annotations

import csv
import hashlib
import inspect
import io
import json
import os
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .errors import FlyasmError

CACHE_VERSION = "sweep-1"
# MI355X: 256 CUs x 4 SIMDs at a 2400 MHz peak engine clock (AMD Instinct MI355X data sheet).
CLOCK_HZ = 2.4e9
SIMDS = 256 * 4
STATIC_ASSUMPTIONS = [
    "flyasm.report.model's steady-state loop time of ONE wave alone on its SIMD (its assumptions apply)",
    "waves sharing a SIMD take turns: a SIMD spends that loop time per wave-iteration (no overlap)",
    "all the workload's FLOPs run in the modelled loops at their MFMA FLOPs per cycle; prologue, "
    "epilogue, masked tiles, tail rounds and load imbalance are not modelled",
    f"{SIMDS} SIMDs (256 CUs) at {CLOCK_HZ / 1e9:.1f} GHz (MI355X peak engine clock)",
]


class SweepError(FlyasmError):
    """A sweep that cannot run: bad grid, missing model or missing Ray."""

    def __init__(self, message: str):
        super().__init__(message, find_loc=False)


# ---- rankers ------------------------------------------------------------------------------------
_MFMA_SHAPE = re.compile(r"_(\d+)x(\d+)x(\d+)")
_MFMA_BLOCKS = re.compile(r"_(\d+)b_")


def mfma_flops(name: str) -> int:
    """2·M·N·K·blocks of an MFMA mnemonic (v_mfma_<dst>_<M>x<N>x<K>[_<B>b]_<src>, CDNA4 ISA §7.1)."""
    m = _MFMA_SHAPE.search(name)
    if not m:
        return 0
    b = _MFMA_BLOCKS.search(name)
    return 2 * int(m[1]) * int(m[2]) * int(m[3]) * (int(b[1]) if b else 1)


class StaticRanker:
    """Predictions from flyasm.report.model (STATIC_ASSUMPTIONS)."""
    name = "static"
    assumptions = STATIC_ASSUMPTIONS

    def predict(self, kernel, workload: dict | None, co: bytes | None = None) -> dict:
        from .report.model import model
        from .report.program import as_program
        p = as_program(kernel)
        d = model(p)
        cycles = sum(sp["cycles"] for sp in d["spans"])
        busy = sum(sp["mfma_busy"] for sp in d["spans"])
        flops = sum(mfma_flops(i.name) for sp in d["spans"] for i in p.stream[sp["start"]:sp["end"]]
                    if i.name.startswith("v_mfma"))
        out = {"loop_cycles": cycles, "mfma_util": busy / cycles if cycles else 0.0,
               "flops_per_cycle": flops / cycles if cycles else 0.0, "pred_us": None, "pred_tflops": None}
        if workload and workload.get("flops") and flops:
            secs = workload["flops"] / (out["flops_per_cycle"] * SIMDS * CLOCK_HZ)
            out["pred_us"] = secs * 1e6
            out["pred_tflops"] = workload["flops"] / secs / 1e12
        return out


class PerfRanker:
    """The CU timing model (flyasm.perf), when this checkout has it."""
    name = "perf"
    assumptions = ["flyasm.perf CU timing model (see its report)"]

    def __init__(self):
        try:
            import flyasm.perf as perf
        except ImportError:
            raise SweepError("--model perf needs the CU timing model package flyasm.perf, which this checkout "
                             "does not have; use --model static") from None
        fn = getattr(perf, "sweep_predict", None)
        if not callable(fn):
            raise SweepError("flyasm.perf has no sweep_predict(kernel, workload) yet; use --model static")
        self._fn = fn

    def predict(self, kernel, workload: dict | None, co: bytes | None = None) -> dict:
        return dict(self._fn(kernel, workload, co))


RANKERS = {"static": StaticRanker, "perf": PerfRanker}


def get_ranker(name: str):
    if name not in RANKERS:
        raise SweepError(f"--model is one of {', '.join(RANKERS)}, not '{name}'")
    return RANKERS[name]()


# ---- content keys -------------------------------------------------------------------------------
_ROOT = Path(__file__).resolve().parents[1]


def source_digest(builder: Path, sources=()) -> str:
    """Hash of what a variant's bytes and prediction can depend on: every .py beside the builder (its
    helpers) and in the grid file's SOURCES (files or directories), flyasm's sources and data files
    (the perf model's params.json: a refit alone changes every prediction), the instruction tables
    and the toolchain version."""
    from .asm.toolchain import find_toolchain
    h = hashlib.sha256(CACHE_VERSION.encode() + b"\0" + find_toolchain().version.encode())
    files = sorted(builder.resolve().parent.glob("*.py"))
    for extra in sources:
        x = Path(extra)
        files += sorted(x.glob("*.py")) if x.is_dir() else [x]
    files += sorted(Path(__file__).parent.rglob("*.py"))
    files += sorted(Path(__file__).parent.rglob("*.json"))     # the perf model's fitted constants (params.json)
    tables = _ROOT / "isa_tables"
    if tables.is_dir():
        files += sorted(p for p in tables.rglob("*") if p.is_file())
    for p in files:
        h.update(str(p.name).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def variant_key(digest: str, params: dict, model_name: str) -> str:
    pj = json.dumps(params, sort_keys=True, default=str)
    return hashlib.sha256(f"{digest}\0{pj}\0{model_name}".encode()).hexdigest()[:24]


# ---- one variant: build, check, model (worker side) ---------------------------------------------
@dataclass
class Row:
    index: int
    params: dict
    key: str = ""
    name: str = ""
    co_name: str = ""
    instructions: int | None = None
    vgpr: int | None = None
    agpr: int | None = None
    sgpr: int | None = None
    lds: int | None = None
    findings: int | None = None
    error: str = ""
    prediction: dict = field(default_factory=dict)
    workload: str = ""
    verified: str = "not-run"       # yes / no / not-run
    verify: dict = field(default_factory=dict)
    cached: bool = False
    default: bool = False

    @property
    def check_ok(self) -> bool:
        return not self.error and self.findings == 0


def build_and_model(path: str, index: int, params: dict, key: str, model_name: str) -> dict:
    """Build one variant without the raising check, count its findings, model it (runs in a worker).
    Returns Row fields plus the code object bytes under 'co' (None on a build error)."""
    from .check import check_kernel
    from .dispatch import load_module
    from .kernel import Kernel
    mod = load_module(path)
    r = {"index": index, "params": params, "key": key}
    try:
        k = mod.build(**params)
        if not isinstance(k, Kernel):
            raise FlyasmError(f"build() returned {type(k).__name__}, not a Kernel", find_loc=False)
        res = k.build(check=False)
        d = k.descriptor()
        r.update(name=k.name, co_name=f"{k.name}.co", instructions=len(k.stream), vgpr=d["arch_vgprs"],
                 agpr=d["agprs"], sgpr=d["next_free_sgpr"], lds=d["group_segment_fixed_size"],
                 findings=len(check_kernel(k)))
        wl = mod.workload(**params) if callable(getattr(mod, "workload", None)) else None
        r["workload"] = (wl or {}).get("label", "")
        r["prediction"] = get_ranker(model_name).predict(k, wl, res.co)     # the code object just built
        r["co"] = res.co
    except Exception as e:           # one broken variant is a row of the table, not the end of the sweep
        r["error"] = f"{type(e).__name__}: {e}".splitlines()[0]
        r["co"] = None
    return r


def verify_variant(path: str, params: dict, seed: int) -> dict:
    """Rebuild the Kernel object (the builder only) and run the grid file's verify() hook."""
    from .dispatch import load_module
    mod = load_module(path)
    t0 = time.perf_counter()
    try:
        out = dict(mod.verify(mod.build(**params), seed, **params))
    except Exception as e:           # a crash in the emulator or the reference is a failed verification
        out = {"ok": False, "error": f"{type(e).__name__}: {e}".splitlines()[0]}
    out["seed"] = seed
    out["seconds"] = round(time.perf_counter() - t0, 2)
    return out


# ---- executors ----------------------------------------------------------------------------------
def _local_map(fn, tasks: list[tuple], jobs: int):
    """Yield fn(*t) results as they complete, in a process pool (inline when jobs == 1)."""
    if jobs <= 1 or len(tasks) <= 1:
        for t in tasks:
            yield fn(*t)
        return
    from concurrent.futures import as_completed

    from .dispatch import _pool
    with _pool(min(jobs, len(tasks))) as ex:
        futs = [ex.submit(fn, *t) for t in tasks]
        try:
            for f in as_completed(futs):
                yield f.result()
        except BaseException:
            for f in futs:
                f.cancel()
            raise


def _ray_map(fn, tasks: list[tuple], address: str, jobs: int):
    """Yield fn(*t) results from Ray tasks. address: a cluster address, "auto", or "local" (start a
    local instance of `jobs` CPUs); a Ray session the caller already started is used as it is.
    Workers import flyasm: installed on the cluster, or this checkout on PYTHONPATH for a local one."""
    try:
        import ray
    except ImportError:
        raise SweepError("--ray needs the ray package (pip install 'flyasm[ray]')") from None
    if not ray.is_initialized():
        env = {"env_vars": {"PYTHONPATH": os.pathsep.join(filter(None, [str(_ROOT), os.environ.get("PYTHONPATH")]))}}
        try:
            if address == "local":
                ray.init(num_cpus=max(1, jobs), runtime_env=env, include_dashboard=False, log_to_driver=False)
            else:
                ray.init(address=address, runtime_env=env, log_to_driver=False)
        except Exception as e:           # ray raises many kinds (ConnectionError, RuntimeError, ...)
            raise SweepError(f"cannot reach a Ray cluster at {address}: {e}".splitlines()[0]) from None
    remote = ray.remote(fn)
    pending = [remote.remote(*t) for t in tasks]
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        yield ray.get(done[0])


# ---- the sweep ----------------------------------------------------------------------------------
@dataclass
class SweepResult:
    rows: list[Row]                  # ranked
    csv_path: Path | None
    built: int                       # variants actually built (not from the cache)
    verified_runs: int               # emulator verifications actually run
    model: str
    assumptions: list[str]
    wall_s: float


def _cache_dir(cache) -> Path:
    from .asm.driver import cache_dir
    d = Path(cache) if cache else cache_dir() / "sweep"
    d.mkdir(parents=True, exist_ok=True)
    return d


def _defaults(fn) -> dict:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return {}
    return {n: p.default for n, p in sig.parameters.items() if p.default is not inspect.Parameter.empty}


def rank_key(r: Row):
    """Clean-checking variants first; then the fastest prediction (µs), else most MFMA FLOPs per cycle."""
    p = r.prediction
    if not r.check_ok:
        return (2 if r.error else 1, 0.0, r.index)
    if p.get("pred_us") is not None:
        return (0, p["pred_us"], r.index)
    return (0, -p.get("flops_per_cycle", 0.0), r.index)


def run_sweep(spec: str, out_dir=None, *, top: int = 3, jobs: int | None = None, ray_address: str | None = None,
              model: str = "static", cache=None, progress: bool = True, seed: int | None = None) -> SweepResult:
    """Build, check, model and rank every variant of `FILE.py[:GRID]`; verify the best `top`."""
    from tqdm import tqdm

    from .asm.driver import atomic_write
    from .dispatch import load_grid, parse_spec
    t0 = time.perf_counter()
    ranker = get_ranker(model)          # fail before building anything
    path, _ = parse_spec(spec)
    mod, grid, variants = load_grid(spec)
    jobs = max(1, jobs or os.cpu_count() or 1)
    cdir = _cache_dir(cache)
    digest = source_digest(path, getattr(mod, "SOURCES", ()))
    defaults = _defaults(mod.build)
    varying = {k for p in variants for k in p if len({json.dumps(q.get(k), default=str) for q in variants}) > 1}
    rows: list[Row] = []
    todo = []
    for i, p in enumerate(variants):
        key = variant_key(digest, p, ranker.name)
        hit = cdir / f"{key}.json"
        if hit.is_file():
            r = Row(**{**json.loads(hit.read_text()), "index": i, "params": p})
            r.cached = True
        else:
            r = Row(i, p, key=key)
            todo.append((str(path.resolve()), i, p, key, ranker.name))
        r.default = bool(varying) and all(k in defaults and defaults[k] == p.get(k, defaults[k]) for k in varying)
        rows.append(r)
    desc = f"sweep {path.name}:{grid}"
    runner = _ray_map(build_and_model, todo, ray_address, jobs) if (ray_address and todo) else \
        _local_map(build_and_model, todo, jobs)
    with tqdm(total=len(todo), desc=desc, unit="variant", disable=not progress or None) as bar:
        for res in runner:
            co = res.pop("co")
            r = rows[res["index"]]
            for k2, v in res.items():
                setattr(r, k2, v)
            if co is not None:
                atomic_write(cdir / f"{r.key}.co", co)
            _store(cdir, r)
            bar.update(1)

    ranked = sorted(rows, key=rank_key)
    # verification of the best `top` clean variants (cached under the same key)
    can_verify = callable(getattr(mod, "verify", None))
    want = [r for r in ranked if r.check_ok][:top] if can_verify else []
    vtodo = []
    rng_seed = seed if seed is not None else int.from_bytes(os.urandom(4), "little")
    for n, r in enumerate(want):
        vpath = cdir / f"{r.key}.verify.json"
        if vpath.is_file():
            r.verify = json.loads(vpath.read_text())
        else:
            vtodo.append((str(path.resolve()), r.params, rng_seed + n, r.index))
    with tqdm(total=len(vtodo), desc="verify (emulator)", unit="variant", disable=not progress or None) as bar:
        for idx, res in _local_map(_verify_task, vtodo, jobs):
            r = rows[idx]
            r.verify = res
            atomic_write(cdir / f"{r.key}.verify.json", json.dumps(res, sort_keys=True) + "\n")
            bar.update(1)
    for r in want:
        r.verified = "yes" if r.verify.get("ok") else "no"

    csv_path = None
    if out_dir is not None:
        out = Path(out_dir)
        names = [r.co_name for r in rows]
        for r in ranked:
            co = cdir / f"{r.key}.co"
            if co.is_file() and r.co_name:
                if names.count(r.co_name) > 1:      # levers that keep the kernel's name: one file each
                    r.co_name = f"{Path(r.co_name).stem}_v{r.index}.co"
                atomic_write(out / r.co_name, co.read_bytes())
        stem = path.stem if path.stem.startswith("sweep") else f"sweep_{path.stem}"
        csv_path = out / f"{stem}_{grid}.csv"
        atomic_write(csv_path, table_csv(ranked))
    return SweepResult(ranked, csv_path, len(todo), len(vtodo), ranker.name, list(ranker.assumptions),
                       time.perf_counter() - t0)


def _verify_task(path: str, params: dict, seed: int, index: int):
    return index, verify_variant(path, params, seed)


def _store(cdir: Path, r: Row) -> None:
    from .asm.driver import atomic_write
    if r.error:                        # build errors are not cached: the next run tries again
        return
    d = asdict(r)
    for k in ("index", "params", "verified", "verify", "cached", "default"):
        d.pop(k)
    atomic_write(cdir / f"{r.key}.json", json.dumps(d, sort_keys=True) + "\n")


# ---- the table ----------------------------------------------------------------------------------
COLUMNS = ["rank", "default", "name", "co", "instructions", "vgpr", "agpr", "sgpr", "lds", "check", "loop_cycles",
           "mfma_util", "pred_us", "pred_tflops", "verified", "max_err", "workload"]


def _fmt(v, nd=1):
    if v is None or v == "":
        return ""
    if isinstance(v, float):
        return f"{v:.{nd}f}"
    return str(v)


def table_rows(rows: list[Row]) -> tuple[list[str], list[list[str]]]:
    pkeys: list[str] = []
    for r in sorted(rows, key=lambda r: r.index):         # parameters in grid order
        for k in r.params:
            if k not in pkeys:
                pkeys.append(k)
    head = ["rank"] + pkeys + COLUMNS[1:]
    body = []
    for n, r in enumerate(rows, 1):
        p = r.prediction
        check = "ok" if r.check_ok else (f"error: {r.error}" if r.error else f"{r.findings} findings")
        err = r.verify.get("max_err")
        cells = [str(n)] + [_fmt(r.params.get(k)) for k in pkeys] + [
            "*" if r.default else "", r.name, r.co_name, _fmt(r.instructions), _fmt(r.vgpr), _fmt(r.agpr), _fmt(r.sgpr),
            _fmt(r.lds), check, _fmt(p.get("loop_cycles")),
            "" if p.get("mfma_util") is None else f"{100 * p['mfma_util']:.1f}%",
            _fmt(p.get("pred_us")), _fmt(p.get("pred_tflops")), r.verified,
            "" if err is None else f"{err:.2e}", r.workload]
        body.append(cells)
    return head, body


def table_csv(rows: list[Row]) -> str:
    head, body = table_rows(rows)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(head)
    w.writerows(body)
    return buf.getvalue()


def format_table(rows: list[Row]) -> str:
    head, body = table_rows(rows)
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(head)]
    line = lambda cells: "  ".join(c.rjust(w) for c, w in zip(cells, widths))  # noqa: E731
    return "\n".join([line(head)] + [line(b) for b in body])
