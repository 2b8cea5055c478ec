"""Measured rows of any author -> what perf.predict needs: the one place that reads the measured tables
and says which author's launcher prices a row.

Tables: aiter's GEMM tuning tables (gfx=gfx950, cu_num=256, libtype=asm rows), attention tables with
kernelName,co_name,dtype,hdim_q,hdim_v,mask,mode,batch,nhead_q,nhead_k,seqlen_q,seqlen_k,us (aiter's
fmha_v3_fwd tables; FlyDSL's, which add author,run,kernel_state,source and may mix both authors).
Backward rows (aiter's measured_bwd table: an atomic32 column) are whole calls of several launches
(benchmarks/aiter_bwd_launch.py). A row's author is its `author` column when the table has one, else the kernel's: FlyDSL's kernel
symbol is FlyDSL's, everything else aiter's. Code objects are looked up by kernelName / co_name under
../shared/aiter/gfx950, ../shared/flydsl/gfx950 and any extra directory.
"""
from __future__ import annotations

import math
from pathlib import Path

import aiter_bwd_launch as BL
import aiter_launch as AL
import flydsl_launch as FL

CO_DIRS = (AL.SHARED / "gfx950", FL.CO_DIR)


def co_index(extra=()) -> dict:
    return AL.co_index([d for d in (*CO_DIRS, *extra) if Path(d).exists()])


def author(row: dict) -> str:
    a = row.get("author")
    if isinstance(a, str) and a:
        return a
    return "flydsl" if row.get("kernelName") == FL.KERNEL else "aiter"


def row_launch(kind: str, row: dict, idx: dict) -> dict:
    """perf.predict's inputs for one row (raises LookupError naming what is missing). Keys: co, kernel,
    grid, block, trace_grid, kernarg, buffers, loop_scale, dram_bytes, flops, group, and optionally
    tile_axis and wg_map (model.predict's)."""
    who = author(row)
    if who == "flydsl":
        if kind != "fmha":
            raise LookupError(f"FlyDSL rows are attention rows; this one is a {kind} row")
        return FL.row_launch(row, idx)
    if who == "aiter":
        return AL.row_launch(kind, row, idx)
    raise LookupError(f"no launcher for author {who!r}")


def table_kind(columns) -> str | None:
    """fmha_bwd (aiter's backward calls), fmha (attention forward), gemm, or None (not a measured table)."""
    if {"atomic32", "seqlen_q", "seqlen_k", "nhead_q", "hdim_q", "us"} <= set(columns):
        return "fmha_bwd"
    return AL.table_kind(columns)


def row_call(kind: str, row: dict, idx: dict) -> dict:
    """{"launches": [perf.predict inputs of each launch of the row's call, in order], "flops", "group"}:
    one launch for a forward or GEMM row, the whole pipeline for a backward row."""
    if kind == "fmha_bwd":
        if author(row) != "aiter":
            raise LookupError(f"no backward launcher for author {author(row)!r}")
        return BL.row_call(row, idx)
    L = row_launch(kind, row, idx)
    return dict(launches=[L], flops=L["flops"], group=L["group"] if kind == "fmha" else "")


class MeasuredTableError(ValueError):
    """A path given as a measured table that is not one: missing, not a CSV, or a CSV of no known kind."""


def read_tables(paths, error=None) -> list[tuple[str, str, dict]]:
    """(table stem, kind, row dict with its index in '_row') of every measured row under paths. A file
    named directly must be a measured table; a directory's CSVs of no known kind are skipped. A path
    that is not a table raises MeasuredTableError, or is one sentence to `error` (argparse's) when given."""
    try:
        return _read_tables(paths)
    except MeasuredTableError as e:
        if error is None:
            raise
        error(str(e))


def _read_tables(paths) -> list[tuple[str, str, dict]]:
    import pandas as pd
    files = []
    for p in map(Path, paths):
        if not p.exists():
            raise MeasuredTableError(f"{p}: no such measured table or directory")
        files += [(f, False) for f in sorted(p.glob("*.csv"))] if p.is_dir() else [(p, True)]
    out = []
    for f, named in files:
        try:
            df = pd.read_csv(f)
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, IsADirectoryError) as e:
            raise MeasuredTableError(f"{f}: not a CSV table ({str(e).splitlines()[0] if str(e) else type(e).__name__})")
        kind = table_kind(df.columns)
        if kind is None:
            if named:
                raise MeasuredTableError(f"{f}: not a measured table (its columns are not those of a GEMM, "
                                         "attention forward or attention backward table)")
            continue
        if kind == "gemm":
            df = df[(df["gfx"] == "gfx950") & (df["cu_num"] == 256) & (df["libtype"] == "asm")]
        elif {"gfx", "cu_num"} <= set(df.columns):
            df = df[(df["gfx"] == "gfx950") & (df["cu_num"] == 256)]
        for i, r in df.iterrows():
            d = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.to_dict().items()}
            out.append((f.stem, kind, {**d, "_row": int(i)}))
    return out


def row_name(table: str, kind: str, r: dict) -> str:
    if kind in ("fmha", "fmha_bwd"):
        # a group-mode row and its batch twin, or seqlen_k != seqlen_q, must not print alike
        seq = f"s{r['seqlen_q']}" + (f"/{r['seqlen_k']}" if str(r.get("seqlen_k") or r["seqlen_q"]) != str(r["seqlen_q"]) else "")
        shape = f"{' group' if int(r.get('mode') or 0) else ''} b{r['batch']} h{r['nhead_q']}/{r['nhead_k']} {seq}"
        if kind == "fmha_bwd":
            return (f"{table}:{r['_row']} bwd hd{r['hdim_q']} a{32 if int(r['atomic32']) else 16}"
                    f"{' causal' if int(r['mask']) else ''}{shape}")
        return f"{table}:{r['_row']} {r['co_name']}{shape}"
    return f"{table}:{r['_row']} {r['kernelName'].replace('_ZN5aiter', '')[:48]} M{r['M']} N{r['N']} K{r['K']} sk{r['splitK']}"
