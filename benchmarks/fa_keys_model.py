"""Every key of aiter's gfx950 attention-forward manifest, ours and aiter's, on the CU timing model.

    python3 benchmarks/fa_keys_model.py [--shape B,HQ,HK,S] [--key DTYPE,HQ,HV,MASK,MODE ...]
                                        [--set DIR] [--aiter-dir DIR] [--jobs N] [--md PATH] [--json PATH]

For each row of ../shared/aiter/gfx950/fmha_v3_fwd/fmha_fwd.csv (dtype, hdim_q, hdim_v, mask, mode):
our kernel for that key (kernels/fa_fwd_set.py:KEYS, built into --set or a temporary directory) and
aiter's, when its code object is in --aiter-dir (default: the sample; aiter's whole hsa/gfx950/fmha_v3_fwd
directory gives every key), are priced by `flyasm perf` (flyasm.perf.predict)
on the SAME launch: aiter's own host code (client/drop_in.sh pack) packs the 656-byte arguments and
picks the grid for each set, with aiter's launch width (benchmarks/aiter_launch.py). Default shape:
issue 12's, batch 16, 64 Q heads, 64 K/V heads, seqlen 8192 (group mode: 16 sequences of 8192).
Columns: predicted µs and TFLOPS, and the mean MFMA and VALU busy fractions of the SIMDs in the
steady-state simulation, which say what bounds a kernel. A model, not a measurement.
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import aiter_launch as AL  # noqa: E402

AITER_SET = AL.SHARED / "gfx950" / "fmha_v3_fwd"
KEY_COLUMNS = ("dtype", "hdim_q", "hdim_v", "mask", "mode")
MASK = {0: "none", 1: "causal top-left", 2: "causal"}
MODE = {0: "batch", 1: "group"}


def key_of(row: dict) -> tuple:
    return tuple(row[c] if c == "dtype" else int(row[c]) for c in KEY_COLUMNS)


def parse_key(text: str) -> tuple:
    """'fp8bf16,128,128,2,1' -> ('fp8bf16', 128, 128, 2, 1)"""
    return tuple(x if i == 0 else int(x) for i, x in enumerate(text.split(",")))


def chosen(ap, a, aiter: dict) -> tuple:
    """(shape, keys) from --shape and --key (default: every key of aiter's manifest, in its order)."""
    shape = tuple(int(x) for x in a.shape.split(","))
    if len(shape) != 4:
        ap.error("--shape is batch,heads_q,heads_k,seqlen")
    want = [parse_key(k) for k in a.key]
    bad = [k for k in want if k not in aiter]
    if bad:
        ap.error(f"not keys of aiter's manifest: {bad}")
    return shape, [k for k in aiter if not want or k in want]


def manifest(set_dir: Path) -> dict:
    """{key: manifest row} of the set in set_dir (its fmha_fwd.csv)."""
    with open(Path(set_dir) / "fmha_fwd.csv") as f:
        return {key_of(r): r for r in csv.DictReader(f)}


def price(set_dir: str, mrow: dict, shape: tuple) -> dict:
    """One key of one set at shape (batch, heads_q, heads_k, seqlen): vs_aiter_model.predict_launch (perf.predict)."""
    from flyasm.perf import params as P
    from vs_aiter_model import predict_launch
    b, hq, hk, s = shape
    path = Path(set_dir) / mrow["co_name"]
    row = dict(mrow, co_name=mrow["co_name"], kernelName=mrow["knl_name"], batch=b, nhead_q=hq, nhead_k=hk,
               seqlen_q=s, seqlen_k=s)
    L = AL.row_launch("fmha", row, {mrow["co_name"]: (path, mrow)})
    t0 = time.time()
    pr = predict_launch(L, P.load())
    simd = list(pr.simd.values()) or [{}]
    return {"co": mrow["co_name"], "us": pr.us, "tflops": pr.tflops, "grid": list(pr.grid), "block": L["block"],
            "resident": pr.resident, "mfma_busy": sum(x.get("mfma", 0) for x in simd) / len(simd),
            "valu_busy": sum(x.get("valu", 0) for x in simd) / len(simd), "model_s": time.time() - t0}


def build_ours(out: Path, jobs: int) -> Path:
    from flyasm.dispatch import build_set
    build_set(f"{ROOT / 'kernels' / 'fa_fwd_set.py'}:KEYS", out, jobs=jobs)
    return out


def table(rows: list[dict], shape: tuple) -> str:
    b, hq, hk, s = shape
    out = [f"Predicted by `flyasm perf` (CU timing model, calibrated constants flyasm/perf/params.json) at batch {b}, "
           f"{hq} Q heads / {hk} K/V heads, seqlen {s} (group mode: {b} sequences of {s}); launches packed by aiter's "
           "own host code for each set. A model, not a measurement.", "",
           "| dtype | hdim q/v | mask | mode | ours µs | ours TFLOPS | ours MFMA / VALU busy | aiter µs | aiter TFLOPS "
           "| aiter MFMA / VALU busy | ours / aiter speed |",
           "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        o, a = r["ours"], r.get("aiter")
        cells = [r["key"][0], f"{r['key'][1]}/{r['key'][2]}", MASK[r["key"][3]], MODE[r["key"][4]],
                 f"{o['us']:.0f}", f"{o['tflops']:.0f}", f"{o['mfma_busy']:.0%} / {o['valu_busy']:.0%}"]
        if a:
            cells += [f"{a['us']:.0f}", f"{a['tflops']:.0f}", f"{a['mfma_busy']:.0%} / {a['valu_busy']:.0%}",
                      f"{a['us'] / o['us']:.2f}x"]
        else:
            cells += ["", "", "", f"(aiter's {r['aiter_co']} is not in the aiter directory)"]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", default="16,64,64,8192", help="batch,heads_q,heads_k,seqlen")
    ap.add_argument("--key", action="append", default=[], help="dtype,hdim_q,hdim_v,mask,mode (repeatable)")
    ap.add_argument("--set", help="a built set (flyasm build-set kernels/fa_fwd_set.py:KEYS -o DIR); default: build one")
    ap.add_argument("--aiter-dir", default=str(AITER_SET), help="aiter's fmha_v3_fwd directory (manifest + .co files)")
    ap.add_argument("--jobs", type=int, default=1, help="processes (default 1)")
    ap.add_argument("--md", help="write the markdown table here")
    ap.add_argument("--json", help="write the rows as JSON here")
    a = ap.parse_args(argv)
    aiter_dir = Path(a.aiter_dir)
    if not (aiter_dir / "fmha_fwd.csv").is_file():
        print(f"{aiter_dir} has no fmha_fwd.csv (../shared absent?): this benchmark prices aiter's manifest keys")
        return 0
    aiter = manifest(aiter_dir)
    shape, keys = chosen(ap, a, aiter)
    with tempfile.TemporaryDirectory() as tmp:
        set_dir = Path(a.set) if a.set else build_ours(Path(tmp) / "fa", a.jobs)
        ours = manifest(set_dir)
        missing = [k for k in keys if k not in ours]
        if missing:
            raise SystemExit(f"{set_dir} has no kernel for keys {missing}")
        jobs = [(k, "ours", str(set_dir), ours[k]) for k in keys] + \
            [(k, "aiter", str(aiter_dir), aiter[k]) for k in keys if (aiter_dir / aiter[k]["co_name"]).exists()]
        t0 = time.time()
        with ProcessPoolExecutor(max(1, a.jobs)) as ex:
            got = list(ex.map(price, [j[2] for j in jobs], [j[3] for j in jobs], [shape] * len(jobs)))
    res = {(j[0], j[1]): g for j, g in zip(jobs, got)}
    rows = [{"key": k, "ours": res[(k, "ours")], "aiter": res.get((k, "aiter")), "aiter_co": aiter[k]["co_name"]}
            for k in keys]
    text = table(rows, shape)
    print(text)
    print(f"({len(jobs)} predictions, {time.time() - t0:.0f} s)")
    if a.md:
        Path(a.md).write_text("# Attention forward, every aiter gfx950 key: ours vs aiter on the CU timing model\n\n"
                              f"`python3 benchmarks/fa_keys_model.py {' '.join(argv or sys.argv[1:])}`\n\n" + text)
    if a.json:
        Path(a.json).write_text(json.dumps({"shape": shape, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
