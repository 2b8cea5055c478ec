"""Our drop-in attention kernels beside aiter's, per aiter key, under one static model (not a measurement).

    python benchmarks/fa_aiter_model.py [--aiter DIR] [--dtype bf16|fp8bf16] [--json]

For every key of aiter's gfx950 fmha_v3_fwd manifest that we build (kernels/fa_fwd_set.py) and for
which aiter's code object is at hand (../shared/aiter/gfx950/fmha_v3_fwd holds 3 of its 16), the
steady-state loop of each kernel through flyasm.report.model (the same model `flyasm stats --model`
prints: one wave alone on its SIMD, fixed latencies, s_barrier free). Both kernels do the same MFMA
work per key (bf16: 32x32x16 MFMAs, fp8bf16: 32x32x64 f8f6f4 in both; the Q tile is aiter's ts_qo:
256 rows for head dim 128 and fp8 256, 128 for 192/128); `keys/iter` is that work in keys (our loop's MFMA-busy cycles per 64 keys), so
`cycles/64 keys` compares the loops directly. Keys without aiter's object are
listed with ours alone.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "kernels"))

import fa_fwd_set  # noqa: E402
from flyasm.report.model import model  # noqa: E402

AITER_DIR = ROOT.parent / "shared" / "aiter" / "gfx950" / "fmha_v3_fwd"
COLS = ["key", "kernel", "loop", "instructions", "cycles", "mfma_busy", "keys_per_iter", "cycles_per_64_keys",
        "utilisation", "valu_issue", "trans_issue", "ds_read_issue", "mfma_pipe_stall", "lgkmcnt_stall"]


def aiter_manifest(adir: Path) -> dict:
    """(dtype, hdim_q, hdim_v, mask, mode) -> (knl_name, co_name) from aiter's manifest beside its objects."""
    import csv
    out = {}
    p = adir / "fmha_fwd.csv"
    if p.is_file():
        for r in csv.DictReader(p.open()):
            out[(r["dtype"], int(r["hdim_q"]), int(r["hdim_v"]), int(r["mask"]), int(r["mode"]))] = \
                (r["knl_name"], r["co_name"])
    return out


def loop_rows(key: str, x, kernel: str | None, busy_per_64: float) -> list[dict]:
    d = model(x, kernel)
    rows = []
    spans = d["spans"]
    for sp in spans:
        if any(o is not sp and sp["start"] <= o["start"] and o["end"] <= sp["end"] for o in spans):
            continue                                  # an outer loop (our Q-tile pass, aiter's tile loop)
        keys = sp["mfma_busy"] / busy_per_64 * 64 if busy_per_64 else 0
        ic = sp["issue_cycles"]
        rows.append({"key": key, "kernel": d["name"], "loop": sp["name"], "instructions": sp["instructions"],
                     "cycles": sp["cycles"], "mfma_busy": sp["mfma_busy"], "keys_per_iter": round(keys),
                     "cycles_per_64_keys": round(sp["cycles"] * 64 / keys, 1) if keys else None,
                     "utilisation": round(sp["utilisation"], 3), "valu_issue": ic.get("valu", 0),
                     "trans_issue": ic.get("trans", 0), "ds_read_issue": ic.get("ds_read", 0),
                     "mfma_pipe_stall": sp["stalls"].get("mfma_pipe", 0),
                     "lgkmcnt_stall": sp["stalls"].get("lgkmcnt", 0)})
    return rows


def table(adir: Path = AITER_DIR, dtype: str | None = None) -> list[dict]:
    theirs = aiter_manifest(adir)
    rows = []
    for p in fa_fwd_set.VARIANTS:
        row = fa_fwd_set.manifest_row(**p)
        akey = (row["dtype"], row["hdim_q"], row["hdim_v"], row["mask"], row["mode"])
        if row["mask"] == 1 or row["dtype"] not in ("bf16", "fp8bf16"):
            continue                                  # not an aiter key (flyasm.attention's f16 / top-left extras)
        if dtype and row["dtype"] != dtype:
            continue
        key = "{} hd{}/{} mask {} mode {}".format(*akey)
        kern = fa_fwd_set.build(**p)
        # our loop body is two 64-key steps: its MFMA-busy cycles per 64 keys normalise both kernels
        inner = min(model(kern)["spans"], key=lambda sp: sp["end"] - sp["start"])
        per64 = inner["mfma_busy"] / 2
        rows += loop_rows(key, kern, None, per64)
        if akey in theirs and (adir / theirs[akey][1]).is_file():
            rows += loop_rows(key, adir / theirs[akey][1], theirs[akey][0], per64)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--aiter", default=str(AITER_DIR), help="directory of aiter's fmha_v3_fwd .co files + manifest")
    ap.add_argument("--dtype", choices=("bf16", "fp8bf16"), help="only this dtype's keys")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rows = table(Path(args.aiter), args.dtype)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(__doc__.splitlines()[0])
    widths = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in COLS}
    print("  ".join(c.ljust(widths[c]) for c in COLS))
    for r in rows:
        print("  ".join(str(r[c]).ljust(widths[c]) for c in COLS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
