"""How well does `flyasm perf` predict measured kernel times?

    python3 benchmarks/model_accuracy.py DIR_OR_CSV [...] [--co-dir DIR ...] [--no-fit] [--keep-going]
                                         [--write-params] [--limit N] [--limit-table STEM=N] [--set NAME=VALUE]
                                         [--fit-simulated NAME=V,V,... ...]

Reads measured tables (benchmarks/measured.py: aiter's GEMM tuning tables and attention tables,
FlyDSL's attention table with its author and run columns, any mix of authors in one table, aiter's
attention-backward table whose rows are whole calls: pre, dq/dk/dv and post kernels, each launch
predicted and paying one launch overhead, benchmarks/aiter_bwd_launch.py), finds
each row's code object (kernelName / co_name under ../shared/aiter/gfx950, ../shared/flydsl/gfx950
and every --co-dir), launches it as its author's host code does and predicts it (perf.model:
emulator streams of sampled workgroups -> CU model -> dispatch over 256 CUs).

Without --no-fit it fits the few free constants (perf.params.FITTED) on the rows, one set for all
tables, and prints, for
  * training (fit on every row),
  * held out (fit on even rows, score odd rows, and the reverse; a backward table's rows count by
    shape: a16 and a32 of one shape fall in the same half, so each half holds both modes),
  * attention cross-validation over seqlen (for each seqlen: fit on every other row, score its rows),
  * each FlyDSL build held out (fit on every other row, score the build's rows and the within-run
    ratios it takes part in), and the run of the longest rows held out likewise:
median and p90 of |pred - meas| / meas and the Spearman rank correlation per table, per author and
overall, and the five worst rows. --fit-simulated also searches the constants that act inside the
simulation (params.FITTED_SIMULATED: the placement's refetch_latency and wg_jitter, the L2's atomic
rate) over the given values: each point is simulated once, every fit above (and every held-out fold)
picks its point on its own training rows by rows' plus within-run ratios' mean squared log error.
With --no-fit it refits nothing: the rows are scored with the
shipped flyasm/perf/params.json (how held-out rows are judged). Either way it then prints the
within-run ratio table: for rows sharing a `run` (measured in the same run), each pair's predicted
speed ratio against the measured one (FlyDSL/aiter; within one author, the later row over the
earlier, e.g. XCD mapping on/off), with the error.

Exit 0 when every row was predicted; a row that cannot be predicted is an error naming it (exit 1,
at once; with --keep-going after every row was tried, listing each failing row, the tables of the
others printed). --write-params stores the all-rows fit in flyasm/perf/params.json (what
`flyasm perf` uses).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import measured as MR  # noqa: E402
from flyasm.asm.driver import atomic_write  # noqa: E402
from flyasm.perf import calibrate as C  # noqa: E402
from flyasm.perf import params as P  # noqa: E402
from flyasm.perf.capture import CACHE, capture  # noqa: E402
from flyasm.perf.model import footprint_of, sample_plan, simulate_grid  # noqa: E402

ROWS_CACHE = CACHE.parent / "perf_rows.json"
# the model's code is part of a cached row's key: a change to the CU model or the sampling re-simulates
MODEL_SOURCE = hashlib.sha256(b"".join(f.read_bytes() for f in sorted((ROOT / "flyasm" / "perf").glob("*.py"))
                                       if f.stem not in ("calibrate", "report", "cli"))).hexdigest()


def with_setting(p: P.Params, item: str, error, excluded=()) -> P.Params:
    """p with a --set NAME=VALUE item applied; `error` (argparse's) gets the one sentence saying what is
    wrong: not a constant of Params (or one of `excluded`), or a value that is not a number."""
    name, _, value = item.partition("=")
    if name not in P.Params.__dataclass_fields__ or name in excluded:
        error(f"--set {item}: {name!r} is not a {'simulated ' if excluded else ''}constant of perf.params.Params")
    kind = type(getattr(p, name)) if getattr(p, name) is not None else float
    try:
        return p.with_(**{name: kind(float(value))})
    except ValueError:
        error(f"--set {item}: {value!r} is not a number for {name}")


def simulate_launch(L: dict, p: P.Params):
    """The perf.model GridRun of one launch as the launchers (aiter_launch / flydsl_launch .row_launch)
    describe it: recorded at its trace_grid, its reads placed by its probe (default, as perf.model.predict:
    the recorded launch when it is the whole grid)."""
    axis, wg_map = L.get("tile_axis", 0), L.get("wg_map")
    tg = tuple(L["trace_grid"]) + (1,) * (3 - len(L["trace_grid"]))
    g = tuple(L["grid"]) + (1,) * (3 - len(L["grid"]))
    samples, wgs = sample_plan(tg, axis, wg_map)
    tr = capture(L["co"], tg, L["block"], L["kernarg"], L["buffers"], workgroups=wgs, kernel=L["kernel"])
    fp = footprint_of(L["co"], tr, g, L["block"], L.get("probe") or (
        {"kernarg": L["kernarg"], "buffers": L["buffers"]} if tg == g else None))
    return simulate_grid(L["co"], L["kernel"], tr, samples, tg, g, L["block"], L["loop_scale"], p, tile_axis=axis,
                         wg_map=wg_map, footprint=fp)


def _packed(kernarg, buffers: dict) -> bytes:
    """A launch's kernarg bytes as content for a cache key: a callable packs fixed stand-in addresses."""
    if isinstance(kernarg, (bytes, bytearray)):
        return bytes(kernarg)
    return bytes(kernarg({n: (i + 1) << 36 for i, n in enumerate(sorted(buffers))}))


def _sizes(buffers: dict) -> list:
    return sorted((k, v if isinstance(v, int) else hashlib.sha256(np.ascontiguousarray(v).tobytes()).hexdigest())
                  for k, v in buffers.items())


def launch_content(L: dict) -> tuple:
    """What, beyond the code object and grids, decides a launch's simulation: its recorded kernarg and
    buffers, the real launch the placement probes (kernarg and buffers), and which work item each
    workgroup runs (wg_map's values over the grid, not its name)."""
    probe = L.get("probe") or {}
    g = tuple(L["grid"]) + (1,) * (3 - len(L["grid"]))
    items = None
    if L.get("wg_map") is not None:
        z, y, x = np.meshgrid(*(np.arange(n) for n in g[::-1]), indexing="ij")
        items = hashlib.sha256(np.stack([np.asarray(a, np.int64).ravel()
                                         for a in L["wg_map"](g, x.ravel(), y.ravel(), z.ravel())]).tobytes()).hexdigest()
    return (hashlib.sha256(_packed(L["kernarg"], L["buffers"])).hexdigest(), _sizes(L["buffers"]),
            hashlib.sha256(_packed(probe["kernarg"], probe["buffers"])).hexdigest() if probe else None,
            _sizes(probe.get("buffers") or {}), items)


def simulate_row(L: dict, p: P.Params, cache: dict) -> tuple[int, float]:
    """(cycles, fraction of CU slots busy) of one row, cached by content."""
    axis = L.get("tile_axis", 0)
    tg = tuple(L["trace_grid"]) + (1,) * (3 - len(L["trace_grid"]))
    scale = L["loop_scale"]
    if callable(scale):             # keyed by its values at the samples (a function's repr is its address)
        scale = tuple(scale(wg[axis] / max(tg[axis] - 1, 1)) for wg in sample_plan(tg, axis)[0])
    # keyed without the fitted constants, then by the values of those of params.FITTED_SIMULATED the
    # row's simulation used (recorded at its first simulation): a search over them re-simulates only
    # the rows they reach (the atomic rate: kernels with atomics; the placement's: shared streams)
    key = hashlib.sha256(repr((hashlib.sha256(L["co"]).hexdigest(), L["kernel"], L["grid"], L["trace_grid"],
                               scale, launch_content(L), p.with_(**{n: 0 for n in P.FITTED + P.FITTED_SIMULATED}),
                               MODEL_SOURCE, axis)).encode()).hexdigest()

    def with_values(uses):
        return key + repr([(n, getattr(p, n)) for n in uses])
    uses = cache.get(key + ":uses")
    if uses is not None and with_values(uses) in cache:
        return tuple(cache[with_values(uses)])
    run = simulate_launch(L, p)
    cache[key + ":uses"] = list(run.uses)
    cache[with_values(run.uses)] = (run.cycles, run.active)
    return run.cycles, run.active


def report(title: str, rows, pred, meta) -> None:
    print(f"\n== {title}")
    print(f"{'table / author':<44}{'rows':>5}{'median':>9}{'p90':>9}{'spearman':>10}")
    groups = [(t, [i for i, r in enumerate(rows) if r.table == t]) for t in sorted({r.table for r in rows})]
    authors = sorted({m["author"] for m in meta})
    groups += [(f"author {w}", [i for i, m in enumerate(meta) if m["author"] == w]) for w in authors]
    groups.append(("ALL", list(range(len(rows)))))
    for label, sel in groups:
        s = C.score([rows[i] for i in sel], pred[sel])
        print(f"{label:<44}{s['n']:>5}{s['median']:>9.1%}{s['p90']:>9.1%}{s['spearman']:>10.3f}")
    s = C.score(rows, pred)
    print("worst rows (measured us, predicted us, error):")
    for name, m, pr, e in s["worst"]:
        print(f"  {name:<80} {m:9.2f} {pr:9.2f} {e:7.1%}")


def run_pairs(meta) -> list[tuple[int, int]]:
    """(numerator, denominator) row indices of every pair of rows sharing a run: FlyDSL's row over
    aiter's when the authors differ, else the later row over the earlier."""
    by_run: dict = {}
    for i, m in enumerate(meta):
        if m["run"]:
            by_run.setdefault(m["run"], []).append(i)
    pairs = []
    for run in by_run.values():
        for a, i in enumerate(run):
            for j in run[a + 1:]:
                wi, wj = meta[i]["author"], meta[j]["author"]
                pairs.append((i, j) if wi != wj and wj == "aiter" else (j, i))
    return pairs


def speed_ratio(rows, pred, meta, i, j) -> tuple[float, float]:
    """(measured, predicted) speed of row i over row j (FLOP/s over FLOP/s)."""
    def speed(k, us):
        return meta[k]["flops"] / us
    return (speed(i, rows[i].measured_us) / speed(j, rows[j].measured_us),
            speed(i, pred[i]) / speed(j, pred[j]))


def ratio_table(title: str, rows, pred, meta, pairs=None) -> list[float]:
    """Speed ratios (FLOP/s of the numerator over the denominator's) of the run pairs, predicted
    against measured; returns the errors (predicted / measured - 1). pairs: (i, j, predictions) to
    print instead of every run pair with `pred`."""
    pairs = [(i, j, pred) for i, j in run_pairs(meta)] if pairs is None else pairs
    if not pairs:
        return []
    print(f"\n== within-run ratios, {title} (speed of the first over the second)")
    print(f"{'run':<16}{'first':<52}{'second':<52}{'measured':>9}{'predicted':>10}{'error':>8}")
    errs = []
    for i, j, pr in pairs:
        meas, got = speed_ratio(rows, pr, meta, i, j)
        errs.append(got / meas - 1)
        print(f"{meta[i]['run']:<16}{meta[i]['label'][:51]:<52}{meta[j]['label'][:51]:<52}{meas:>9.3f}{got:>10.3f}"
              f"{errs[-1]:>+8.1%}")
    e = np.abs(errs)
    print(f"{len(errs)} pairs: median |error| {np.median(e):.1%}, max {e.max():.1%}, within 5%: {int((e <= 0.05).sum())}")
    return errs


def load_rows_cache(path: Path | None = None) -> dict:
    """The simulated rows cached at `path` (default ROWS_CACHE), {} when there is none yet."""
    path = path or ROWS_CACHE
    return json.loads(path.read_text()) if path.exists() else {}


def save_rows_cache(cache: dict, path: Path | None = None) -> None:
    """Merge the entries another process wrote since we read the file (runs in several worktrees
    share it), then replace the file whole: a concurrent reader never sees half a file."""
    path = path or ROWS_CACHE
    cache.update({k: v for k, v in load_rows_cache(path).items() if k not in cache})
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(cache))


def simulate_all(entries, idx, base, keep_going: bool):
    """(rows, meta, failures): one calibrate.Row per predicted row, its author, run, FLOPs and label."""
    cache = load_rows_cache()
    rows: list[C.Row] = []
    meta, failed = [], []
    t0 = time.time()
    try:
        for table, kind, r in entries:
            name = MR.row_name(table, kind, r)
            try:
                call = MR.row_call(kind, r, idx)
                parts = [(*simulate_row(L, base, cache), L["dram_bytes"]) for L in call["launches"]]
            except Exception as e:          # noqa: BLE001 — name the row, say why
                failed.append(f"row {name} cannot be predicted: {type(e).__name__}: {e}")
                print(f"error: {failed[-1]}", file=sys.stderr, flush=True)
                if not keep_going:
                    break
                continue
            (cycles, active, dram), rest = parts[0], parts[1:]
            rows.append(C.Row(name, table, cycles, dram, float(r["us"]), call["group"], active,
                              tuple((c, d, a) for c, a, d in rest)))
            who = MR.author(r)
            build = call["launches"][0].get("build")       # the build a launcher priced, when it says
            kname = str(build or r.get("co_name") or r.get("kernelName") or name).removesuffix(".co")
            if build and build != r.get("co_name"):
                print(f"note: row {name} is priced as {call['launches'][0].get('priced') or build}", file=sys.stderr)
            meta.append(dict(author=who, run=r.get("run") or "", flops=call["flops"], label=f"{who} {kname}",
                             shape=call.get("shape") or name))
            print(f"  [{time.time() - t0:6.0f} s] {name}: {' + '.join(str(c) for c, _, _ in parts)} cycles",
                  file=sys.stderr, flush=True)
            save_rows_cache(cache)
    finally:
        save_rows_cache(cache)
    print(f"{len(rows)} rows simulated in {time.time() - t0:.0f} s")
    return rows, meta, failed


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("tables", nargs="+")
    ap.add_argument("--co-dir", action="append", default=[])
    ap.add_argument("--no-fit", action="store_true",
                    help="score with the shipped flyasm/perf/params.json, refit nothing (held-out rows)")
    ap.add_argument("--keep-going", action="store_true",
                    help="try every row, list all that cannot be predicted (still exit 1)")
    ap.add_argument("--write-params", action="store_true")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="simulate with this constant of perf.params changed (e.g. a scan of a simulated, "
                         "fitted constant such as l2_atomic_dwords_per_clk; the run says so)")
    ap.add_argument("--fit-simulated", action="append", default=[], metavar="NAME=V,V,...",
                    help="also fit a constant that acts in the simulation (params.FITTED_SIMULATED) over these "
                         "values; given for several constants, over their product. Every point re-simulates the "
                         "rows and gets its own fit of params.FITTED; the point with the least mean squared log "
                         "error over the rows plus that over the within-run ratios wins, and every held-out fold "
                         "picks its point on its own training rows")
    ap.add_argument("--limit", type=int, default=0, help="first N rows of each table only (smoke runs)")
    ap.add_argument("--limit-table", action="append", default=[], metavar="STEM=N",
                    help="first N rows of the table with this file stem only (the run says so)")
    a = ap.parse_args(argv)
    if a.no_fit and a.write_params:
        ap.error("--write-params stores a fit; --no-fit makes none")
    idx = MR.co_index(a.co_dir)
    entries = MR.read_tables(a.tables, ap.error)
    if a.limit:
        seen: dict = {}
        entries = [e for e in entries if seen.setdefault(e[0], []).append(1) or len(seen[e[0]]) <= a.limit]
    for item in a.limit_table:
        stem, _, n = item.partition("=")
        seen = {}
        entries = [e for e in entries if e[0] != stem or seen.setdefault(stem, []).append(1) or len(seen[stem]) <= int(n)]
        print(f"note: table {stem} limited to its first {n} rows (--limit-table)")
    if not entries:
        print("no measured rows found in " + ", ".join(a.tables), file=sys.stderr)
        return 2
    base = P.load()
    for item in a.set:
        base = with_setting(base, item, ap.error, P.FITTED)
        print(f"note: simulated with {item.partition('=')[0]} = {getattr(base, item.partition('=')[0])} (--set)")
    if a.set and a.write_params:
        ap.error("--write-params stores the fit of params.json's constants; it does not store --set values")
    cands = [base]
    for item in a.fit_simulated:
        name, _, values = item.partition("=")
        if a.no_fit:
            ap.error("--fit-simulated fits; --no-fit fits nothing")
        if name not in P.FITTED_SIMULATED:
            ap.error(f"--fit-simulated {item}: {name!r} is not one of params.FITTED_SIMULATED {P.FITTED_SIMULATED}")
        try:
            vals = [type(getattr(base, name))(float(v)) for v in values.split(",")]
        except ValueError:
            ap.error(f"--fit-simulated {item}: not a list of numbers")
        cands = [c.with_(**{name: v}) for c in cands for v in vals]
    points, failed = [], []
    for cand in cands:
        if len(cands) > 1:
            print("simulating " + ", ".join(f"{n} = {getattr(cand, n):.4g}" for n in P.FITTED_SIMULATED), flush=True)
        rows, meta, failed = simulate_all(entries, idx, cand, a.keep_going)
        if failed and not a.keep_going:
            return 1
        points.append((cand, rows))
    if rows:
        if a.no_fit:
            print("shipped params (flyasm/perf/params.json, nothing refitted): "
                  + ", ".join(f"{n} = {getattr(base, n):.4g}" for n in P.FITTED + P.FITTED_SIMULATED))
            pred = C.predict_us(rows, base)
            report("no fit: the shipped parameters", rows, pred, meta)
            ratio_table("shipped parameters", rows, pred, meta)
        else:
            fit_reports(points, meta, a)
    if failed:
        print(f"\n{len(failed)} row(s) could not be predicted:", file=sys.stderr)
        for f in failed:
            print(f"  {f}", file=sys.stderr)
        return 1
    return 0


def choose(points, meta, train, verbose=False):
    """(point index, fitted Params): the simulated point (params.FITTED_SIMULATED values) that, with
    params.FITTED fitted on the rows `train` for it, scores best on them: mean squared log error of the
    rows plus that of the within-run speed ratios of pairs inside `train` (the signal a run's shared
    part cannot move)."""
    train = list(train)
    inside = set(train)
    best = None
    for k, (cand, rows) in enumerate(points):
        part = [rows[i] for i in train]
        fitted = C.fit(part, cand)
        pred = np.zeros(len(rows))
        pred[train] = C.predict_us(part, fitted)
        row_loss = float(np.mean(np.log(pred[train] / np.array([r.measured_us for r in part])) ** 2))
        pairs = [(i, j) for i, j in run_pairs(meta) if i in inside and j in inside]
        errs = ratio_errors(rows, pred, meta, pairs)
        ratio_loss = float(np.mean(np.log1p(np.array(errs)) ** 2)) if errs else 0.0
        if verbose and len(points) > 1:
            print("  " + "  ".join(f"{n} {getattr(cand, n):.4g}" for n in P.FITTED_SIMULATED)
                  + f":  rows {row_loss:.5f}  ratios {ratio_loss:.5f}  ratio errors "
                  + " ".join(f"{e:+.1%}" for e in errs), flush=True)
        if best is None or row_loss + ratio_loss < best[0]:
            best = (row_loss + ratio_loss, k, fitted)
    return best[1], best[2]


def held_out(points, meta, test) -> tuple[int, P.Params, np.ndarray]:
    """Fit (point and constants, `choose`) on every row but `test`; (point, constants, predictions of
    every row by that fit)."""
    test = set(test)
    k, fitted = choose(points, meta, [i for i in range(len(meta)) if i not in test])
    return k, fitted, C.predict_us(points[k][1], fitted)


def ratio_errors(rows, pred, meta, pairs=None) -> list[float]:
    """predicted / measured - 1 of each run pair's speed ratio (default: every pair, run_pairs)."""
    out = []
    for i, j in run_pairs(meta) if pairs is None else pairs:
        meas, got = speed_ratio(rows, pred, meta, i, j)
        out.append(got / meas - 1)
    return out


def fit_reports(points, meta, a) -> None:
    if len(points) > 1:
        print("\n== simulated constants: every point's loss with params.FITTED fitted for it (all rows)")
    k, fitted = choose(points, meta, range(len(meta)), verbose=True)
    rows = points[k][1]
    print("fitted: " + ", ".join(f"{n} = {getattr(fitted, n):.4g}" for n in P.FITTED + P.FITTED_SIMULATED))
    train = C.predict_us(rows, fitted)
    report("training: fit on all rows, scored on the same rows", rows, train, meta)

    def fold(test, label):
        _, pf, pred = held_out(points, meta, test)
        print(f"  fold {label}: " + ", ".join(f"{n}={getattr(pf, n):.4g}" for n in P.FITTED + P.FITTED_SIMULATED))
        return pred

    pred = np.zeros(len(rows))
    order = {s: i for i, s in enumerate(dict.fromkeys(m["shape"] for m in meta))}
    half_of = [order[m["shape"]] % 2 for m in meta]           # rows of one shape (a16/a32) share a half
    print("\n(folds: each fits on every row but its held-out ones)")
    for half in (0, 1):
        test = [i for i, h in enumerate(half_of) if h == half]
        pred[test] = fold(test, f"shapes {'odd' if half else 'even'} held out")[test]
    report("held out: fit on even rows (shapes) -> score odd ones, and the reverse", rows, pred, meta)
    groups = sorted({r.group for r in rows if r.group})
    if len(groups) >= 2:
        att = [i for i, r in enumerate(rows) if r.group]
        cv = np.zeros(len(rows))
        for g in groups:
            test = [i for i in att if rows[i].group == g]
            cv[test] = fold(test, f"seqlen {g} held out")[test]
        report("attention cross-validation over seqlen: fit on every other row, score one seqlen's rows",
               [rows[i] for i in att], cv[att], [meta[i] for i in att])
    builds = sorted({m["label"] for m in meta if m["author"] == "flydsl"})
    if len(builds) >= 2:
        fly = [i for i, m in enumerate(meta) if m["author"] == "flydsl"]
        cv = np.zeros(len(rows))
        ratio_cv = []
        for b in builds:
            test = [i for i in fly if meta[i]["label"] == b]
            got = fold(test, f"{b} held out")
            cv[test] = got[test]
            ratio_cv += [(i, j, got) for i, j in run_pairs(meta) if i in test or j in test]
        report("each FlyDSL build held out: fit on every other row, score the build's rows",
               [rows[i] for i in fly], cv[fly], [meta[i] for i in fly])
        ratio_table("each pair predicted by the fit that held out its FlyDSL build (a pair of two builds: "
                    "once per build)", rows, None, meta, ratio_cv)
    runs = {m["run"] for m in meta if m["run"]}
    if len(runs) >= 2:
        # the run whose rows run longest (the longest sequences: the placement's strongest test)
        far = max(runs, key=lambda r: max(rows[i].measured_us for i, m in enumerate(meta) if m["run"] == r))
        test = [i for i, m in enumerate(meta) if m["run"] == far]
        got = fold(test, f"run {far} held out")
        report(f"run {far} held out: fit on every other row, score its rows", [rows[i] for i in test], got[test],
               [meta[i] for i in test])
        ratio_table(f"run {far} held out", rows, got, meta, [(i, j, got) for i, j in run_pairs(meta) if i in test])
    ratio_table("training fit", rows, train, meta)
    if a.write_params:
        P.STORE.write_text(json.dumps({"params": {n: getattr(fitted, n) for n in P.FITTED + P.FITTED_SIMULATED},
                                       "fitted_on": [_relative(t) for t in a.tables], "rows": len(rows),
                                       "limits": a.limit_table}, indent=1) + "\n")
        print(f"wrote {P.STORE}")


def _relative(path) -> str:
    """A table's path relative to the repo's parent (e.g. shared/aiter/measured), so params.json names
    the same tables on every machine."""
    p = Path(os.path.abspath(path))             # not resolve(): ../shared may be a symlink (worktrees)
    try:
        return str(p.relative_to(ROOT.parent))
    except ValueError:
        return p.name


if __name__ == "__main__":
    sys.exit(main())
