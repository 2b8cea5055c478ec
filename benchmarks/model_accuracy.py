"""How well does `flyasm perf` predict measured kernel times?

    python3 benchmarks/model_accuracy.py DIR_OR_CSV [...] [--co-dir DIR ...] [--write-params] [--limit N]

Reads aiter-style measured tables (GEMM tuning tables: gfx=gfx950, cu_num=256, libtype=asm rows;
attention tables with kernelName,co_name,dtype,hdim_q,hdim_v,mask,mode,batch,nhead_q,nhead_k,
seqlen_q,seqlen_k,us), finds each row's code object by kernelName / co_name under
../shared/aiter/gfx950 and every --co-dir, predicts it (perf.model: emulator streams of sampled
workgroups -> CU model -> dispatch over 256 CUs) and fits the few free constants
(perf.params.FITTED) on measured rows, one set for all tables. Prints, per table and overall:
median and p90 of |pred - meas| / meas, Spearman rank correlation, the five worst rows; for
  * training (fit on every row),
  * held out (fit on even rows, score odd rows, and the reverse),
  * attention cross-validation over seqlen (fit on all GEMM rows + two seqlens, score the third).
Exit 0 when every row was predicted; a row that cannot be predicted is an error naming it.
--write-params stores the all-rows fit in flyasm/perf/params.json (what `flyasm perf` uses).
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
from flyasm.perf.model import sample_plan, simulate_grid  # noqa: E402

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
                               P.Params().with_(**{n: 0 for n in P.FITTED}), MODEL_SOURCE, axis,
                               getattr(wg_map, "__qualname__", None))).encode()).hexdigest()
    if key in cache:
        return tuple(cache[key])
    samples, wgs = sample_plan(tg, axis, wg_map)
    tr = capture(L["co"], tg, L["block"], L["kernarg"], L["buffers"], workgroups=wgs, kernel=L["kernel"])
    run = simulate_grid(L["co"], L["kernel"], tr, samples, tg, tuple(L["grid"]) + (1,) * (3 - len(L["grid"])),
                        L["block"], L["loop_scale"], p, tile_axis=axis, wg_map=wg_map)
    cache[key] = (run.cycles, run.active)
    return run.cycles, run.active


def report(title: str, rows, pred) -> bool:
    print(f"\n== {title}")
    tables = sorted({r.table for r in rows})
    print(f"{'table':<44}{'rows':>5}{'median':>9}{'p90':>9}{'spearman':>10}")
    for t in tables + ["ALL"]:
        sel = [i for i, r in enumerate(rows) if t == "ALL" or r.table == t]
        s = C.score([rows[i] for i in sel], pred[sel])
        print(f"{t:<44}{s['n']:>5}{s['median']:>9.1%}{s['p90']:>9.1%}{s['spearman']:>10.3f}")
    s = C.score(rows, pred)
    print("worst rows (measured us, predicted us, error):")
    for name, m, pr, e in s["worst"]:
        print(f"  {name:<80} {m:9.2f} {pr:9.2f} {e:7.1%}")
    return True


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("tables", nargs="+")
    ap.add_argument("--co-dir", action="append", default=[])
    ap.add_argument("--write-params", action="store_true")
    ap.add_argument("--limit", type=int, default=0, help="first N rows of each table only (smoke runs)")
    ap.add_argument("--limit-table", action="append", default=[], metavar="STEM=N",
                    help="first N rows of the table with this file stem only (the run says so)")
    a = ap.parse_args(argv)
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
    cache = json.loads(ROWS_CACHE.read_text()) if ROWS_CACHE.exists() else {}
    base = P.Params()
    rows: list[C.Row] = []
    t0 = time.time()
    for table, kind, r in entries:
        name = MR.row_name(table, kind, r)
        try:
            L = MR.row_launch(kind, r, idx)
            cycles, active = simulate_row(L, base, cache)
        except Exception as e:          # noqa: BLE001 — name the row, say why, stop
            print(f"error: row {name} cannot be predicted: {type(e).__name__}: {e}", file=sys.stderr)
            ROWS_CACHE.parent.mkdir(parents=True, exist_ok=True)
            ROWS_CACHE.write_text(json.dumps(cache))
            return 1
        rows.append(C.Row(name, table, cycles, L["dram_bytes"], float(r["us"]), L["group"] if kind == "fmha" else "",
                          active))
        ROWS_CACHE.parent.mkdir(parents=True, exist_ok=True)
        ROWS_CACHE.write_text(json.dumps(cache))
        print(f"  [{time.time() - t0:6.0f} s] {name}: {cycles} cycles", file=sys.stderr, flush=True)
    ROWS_CACHE.parent.mkdir(parents=True, exist_ok=True)
    ROWS_CACHE.write_text(json.dumps(cache))
    print(f"{len(rows)} rows simulated in {time.time() - t0:.0f} s")
    fitted = C.fit(rows, base)
    print("fitted: " + ", ".join(f"{n} = {getattr(fitted, n):.4g}" for n in P.FITTED))
    report("training: fit on all rows, scored on the same rows", rows, C.predict_us(rows, fitted))
    pred = np.zeros(len(rows))
    for half in (0, 1):
        train = [r for i, r in enumerate(rows) if i % 2 == half]
        pf = C.fit(train, base)
        for i, r in enumerate(rows):
            if i % 2 != half:
                pred[i] = C.predict_us([r], pf)[0]
    report("held out: fit on even rows -> score odd rows, and the reverse", rows, pred)
    groups = sorted({r.group for r in rows if r.group})
    if len(groups) >= 2:
        att = [r for r in rows if r.group]
        cv = np.zeros(len(att))
        for g in groups:
            train = [r for r in rows if r.group != g]
            pf = C.fit(train, base)
            for i, r in enumerate(att):
                if r.group == g:
                    cv[i] = C.predict_us([r], pf)[0]
                    print(f"  cv {g}: fitted " + ", ".join(f"{n}={getattr(pf, n):.3g}" for n in P.FITTED)) \
                        if i == min(j for j, x in enumerate(att) if x.group == g) else None
        report("attention cross-validation over seqlen: fit on GEMMs + two seqlens, score the third", att, cv)
    if a.write_params:
        P.STORE.write_text(json.dumps({"params": {n: getattr(fitted, n) for n in P.FITTED},
                                       "fitted_on": [_relative(t) for t in a.tables], "rows": len(rows),
                                       "limits": a.limit_table}, indent=1) + "\n")
        print(f"wrote {P.STORE}")
    return 0



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
