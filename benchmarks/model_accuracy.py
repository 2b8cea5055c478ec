"""How well does `flyasm perf` predict measured kernel times?

    python3 benchmarks/model_accuracy.py DIR_OR_CSV [...] [--co-dir DIR ...] [--no-fit] [--keep-going]
                                         [--write-params] [--limit N] [--limit-table STEM=N] [--set NAME=VALUE]

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
  * attention cross-validation over seqlen (for each seqlen: fit on every other row, score its rows):
median and p90 of |pred - meas| / meas and the Spearman rank correlation per table, per author and
overall, and the five worst rows. With --no-fit it refits nothing: the rows are scored with the
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
from flyasm.perf import calibrate as C  # noqa: E402
from flyasm.perf import params as P  # noqa: E402
from flyasm.perf.capture import CACHE, capture  # noqa: E402
from flyasm.perf.model import footprint_of, sample_plan, simulate_grid  # noqa: E402

ROWS_CACHE = CACHE.parent / "perf_rows.json"
# the model's code is part of a cached row's key: a change to the CU model or the sampling re-simulates
MODEL_SOURCE = hashlib.sha256(b"".join(f.read_bytes() for f in sorted((ROOT / "flyasm" / "perf").glob("*.py"))
                                       if f.stem not in ("calibrate", "report", "cli"))).hexdigest()


def simulate_row(L: dict, p: P.Params, cache: dict) -> tuple[int, float]:
    """(cycles, fraction of CU slots busy) of one row, cached by content."""
    kah = L["kernarg"] if isinstance(L["kernarg"], bytes) else None
    axis, wg_map = L.get("tile_axis", 0), L.get("wg_map")
    tg = tuple(L["trace_grid"]) + (1,) * (3 - len(L["trace_grid"]))
    scale = L["loop_scale"]
    if callable(scale):             # keyed by its values at the samples (a function's repr is its address)
        scale = tuple(scale(wg[axis] / max(tg[axis] - 1, 1)) for wg in sample_plan(tg, axis)[0])
    key = hashlib.sha256(repr((hashlib.sha256(L["co"]).hexdigest(), L["kernel"], L["grid"], L["trace_grid"],
                               scale, kah, sorted((k, v if isinstance(v, int) else v.nbytes)
                                                  for k, v in L["buffers"].items()),
                               p.with_(**{n: 0 for n in P.FITTED}), MODEL_SOURCE, axis,
                               getattr(wg_map, "__qualname__", None))).encode()).hexdigest()
    if key in cache:
        return tuple(cache[key])
    samples, wgs = sample_plan(tg, axis, wg_map)
    tr = capture(L["co"], tg, L["block"], L["kernarg"], L["buffers"], workgroups=wgs, kernel=L["kernel"])
    g = tuple(L["grid"]) + (1,) * (3 - len(L["grid"]))
    fp = footprint_of(L["co"], tr, g, L["block"], L.get("probe") or (
        {"kernarg": L["kernarg"], "buffers": L["buffers"]} if tg == g else None))
    run = simulate_grid(L["co"], L["kernel"], tr, samples, tg, g, L["block"], L["loop_scale"], p, tile_axis=axis,
                        wg_map=wg_map, footprint=fp)
    cache[key] = (run.cycles, run.active)
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


def ratio_table(title: str, rows, pred, meta) -> list[float]:
    """Speed ratios (FLOP/s of the numerator over the denominator's) of the run pairs, predicted
    against measured; returns the errors (predicted / measured - 1)."""
    pairs = run_pairs(meta)
    if not pairs:
        return []
    print(f"\n== within-run ratios, {title} (speed of the first over the second)")
    print(f"{'run':<16}{'first':<52}{'second':<52}{'measured':>9}{'predicted':>10}{'error':>8}")
    errs = []
    for i, j in pairs:
        def speed(k, us):
            return meta[k]["flops"] / us
        meas = speed(i, rows[i].measured_us) / speed(j, rows[j].measured_us)
        got = speed(i, pred[i]) / speed(j, pred[j])
        errs.append(got / meas - 1)
        print(f"{meta[i]['run']:<16}{meta[i]['label'][:51]:<52}{meta[j]['label'][:51]:<52}{meas:>9.3f}{got:>10.3f}"
              f"{errs[-1]:>+8.1%}")
    e = np.abs(errs)
    print(f"{len(errs)} pairs: median |error| {np.median(e):.1%}, max {e.max():.1%}, within 5%: {int((e <= 0.05).sum())}")
    return errs


def simulate_all(entries, idx, base, keep_going: bool):
    """(rows, meta, failures): one calibrate.Row per predicted row, its author, run, FLOPs and label."""
    cache = json.loads(ROWS_CACHE.read_text()) if ROWS_CACHE.exists() else {}
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
            kname = str(r.get("co_name") or r.get("kernelName") or name).removesuffix(".co")
            meta.append(dict(author=who, run=r.get("run") or "", flops=call["flops"], label=f"{who} {kname}",
                             shape=call.get("shape") or name))
            print(f"  [{time.time() - t0:6.0f} s] {name}: {' + '.join(str(c) for c, _, _ in parts)} cycles",
                  file=sys.stderr, flush=True)
            ROWS_CACHE.parent.mkdir(parents=True, exist_ok=True)
            ROWS_CACHE.write_text(json.dumps(cache))
    finally:
        ROWS_CACHE.parent.mkdir(parents=True, exist_ok=True)
        ROWS_CACHE.write_text(json.dumps(cache))
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
    ap.add_argument("--fit-placement", metavar="R,R,...:J,J,...",
                    help="also fit the constants that act before the simulation (params.FITTED_SIMULATED: "
                         "refetch_latency values : wg_jitter values): every pair re-simulates the rows, "
                         "the one with the least mean squared log error over rows plus over within-run ratios wins")
    ap.add_argument("--limit", type=int, default=0, help="first N rows of each table only (smoke runs)")
    ap.add_argument("--limit-table", action="append", default=[], metavar="STEM=N",
                    help="first N rows of the table with this file stem only (the run says so)")
    a = ap.parse_args(argv)
    if a.no_fit and a.write_params:
        ap.error("--write-params stores a fit; --no-fit makes none")
    idx = MR.co_index(a.co_dir)
    entries = MR.read_tables(a.tables)
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
        name, _, value = item.partition("=")
        if name not in P.Params.__dataclass_fields__ or name in P.FITTED:
            ap.error(f"--set {item}: {name!r} is not a simulated constant of perf.params.Params")
        try:
            base = base.with_(**{name: type(getattr(base, name) if getattr(base, name) is not None else 0.0)(value)})
        except ValueError:
            ap.error(f"--set {item}: {value!r} is not a value of {name}")
        print(f"note: simulated with {name} = {getattr(base, name)} (--set)")
    if a.set and a.write_params:
        ap.error("--write-params stores the fit of params.json's constants; it does not store --set values")
    if a.fit_placement:
        if a.no_fit:
            ap.error("--fit-placement fits; --no-fit fits nothing")
        base = fit_placement(entries, idx, base, a)
    rows, meta, failed = simulate_all(entries, idx, base, a.keep_going)
    if failed and not a.keep_going:
        return 1
    if rows:
        if a.no_fit:
            print("shipped params (flyasm/perf/params.json, nothing refitted): "
                  + ", ".join(f"{n} = {getattr(base, n):.4g}" for n in P.FITTED))
            pred = C.predict_us(rows, base)
            report("no fit: the shipped parameters", rows, pred, meta)
            ratio_table("shipped parameters", rows, pred, meta)
        else:
            fit_reports(rows, meta, base, a)
    if failed:
        print(f"\n{len(failed)} row(s) could not be predicted:", file=sys.stderr)
        for f in failed:
            print(f"  {f}", file=sys.stderr)
        return 1
    return 0


def fit_placement(entries, idx, base: P.Params, a) -> P.Params:
    """The FITTED_SIMULATED pair (refetch_latency, wg_jitter) of the grid a.fit_placement names
    that, with the post-simulation constants fitted for it, scores best: mean squared log error of
    the rows plus that of the within-run speed ratios (the signal a run's shared part cannot move)."""
    fs, js = a.fit_placement.split(":")
    best = None
    print("\n== placement constants (re-simulated per pair; post-simulation constants fitted per pair)")
    for f in map(float, fs.split(",")):
        for j in map(float, js.split(",")):
            cand = base.with_(refetch_latency=int(f), wg_jitter=j)
            rows, meta, failed = simulate_all(entries, idx, cand, a.keep_going)
            if failed and not a.keep_going:
                raise SystemExit(1)
            fitted = C.fit(rows, cand)
            pred = C.predict_us(rows, fitted)
            row_loss = float(np.mean(np.log(pred / np.array([r.measured_us for r in rows])) ** 2))
            errs = [e for e in ratio_errors(rows, pred, meta)]
            ratio_loss = float(np.mean(np.log1p(np.array(errs)) ** 2)) if errs else 0.0
            print(f"  refetch_latency {f:6.0f}  wg_jitter {j:5.3f}:  rows {row_loss:.5f}  ratios {ratio_loss:.5f}"
                  f"  ratio errors {' '.join(f'{e:+.1%}' for e in errs)}", flush=True)
            if best is None or row_loss + ratio_loss < best[0]:
                best = (row_loss + ratio_loss, fitted)
    print("chosen: " + ", ".join(f"{n} = {getattr(best[1], n):.4g}" for n in P.FITTED_SIMULATED))
    return best[1]


def ratio_errors(rows, pred, meta) -> list[float]:
    """predicted / measured - 1 of each run pair's speed ratio (run_pairs)."""
    out = []
    for i, j in run_pairs(meta):
        meas = (meta[i]["flops"] / rows[i].measured_us) / (meta[j]["flops"] / rows[j].measured_us)
        out.append((meta[i]["flops"] / pred[i]) / (meta[j]["flops"] / pred[j]) / meas - 1)
    return out


def fit_reports(rows, meta, base, a) -> None:
    fitted = C.fit(rows, base)
    print("fitted: " + ", ".join(f"{n} = {getattr(fitted, n):.4g}" for n in P.FITTED))
    train = C.predict_us(rows, fitted)
    report("training: fit on all rows, scored on the same rows", rows, train, meta)
    pred = np.zeros(len(rows))
    order = {k: i for i, k in enumerate(dict.fromkeys(m["shape"] for m in meta))}
    half_of = [order[m["shape"]] % 2 for m in meta]           # rows of one shape (a16/a32) share a half
    for half in (0, 1):
        part = [r for r, h in zip(rows, half_of) if h == half]
        pf = C.fit(part, base)
        for i, r in enumerate(rows):
            if half_of[i] != half:
                pred[i] = C.predict_us([r], pf)[0]
    report("held out: fit on even rows (shapes) -> score odd ones, and the reverse", rows, pred, meta)
    groups = sorted({r.group for r in rows if r.group})
    if len(groups) >= 2:
        att = [i for i, r in enumerate(rows) if r.group]
        cv = np.zeros(len(att))
        for g in groups:
            pf = C.fit([r for r in rows if r.group != g], base)
            print(f"  cv {g}: fitted " + ", ".join(f"{n}={getattr(pf, n):.3g}" for n in P.FITTED))
            for k, i in enumerate(att):
                if rows[i].group == g:
                    cv[k] = C.predict_us([rows[i]], pf)[0]
        report("attention cross-validation over seqlen: fit on every other row, score one seqlen's rows",
               [rows[i] for i in att], cv, [meta[i] for i in att])
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
