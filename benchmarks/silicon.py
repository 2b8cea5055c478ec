"""Attention forward on an AMD GPU through HIP: ours (kernels/fa_fwd.py) and aiter's code objects, timed,
with the predicted columns of `flyasm sweep` beside the measured ones.

    python benchmarks/silicon.py [--shapes B,H,S,D;...] [--causal no|yes|both] [--aiter-dir DIR]
                                 [--warmup 3] [--repeats 20] [--model static] [--json PATH]

Rows: every shape x mask, for ours (fa_fwd.build(aiter_args=True), bf16, aiter's grid) and
for every key of aiter's manifest (DIR/fmha_fwd.csv, default /work/shared/aiter/gfx950/fmha_v3_fwd)
that matches the row (bf16, hdim 128/128, batch mode; mask 0, or 2 = bottom-right causal, the same as
our top-left when seqlen_q == seqlen_k). aiter's kernel name, code object, grid and kernarg bytes come
from aiter's own host code (`client/drop_in.sh DIR pack ...`, needs pandas and clang++) with the real
device pointers. Keys not timed here (group mode, fp8, a .co absent from DIR) are listed with why.

Timing: each kernel is launched `--warmup` times, then `--repeats` times as (launch, stream
synchronise) pairs, each timed by the host wall clock (time.perf_counter); the median is reported
(min and max in the JSON). Inputs are random bf16 N(0, 1); after timing, 64 rows of (batch 0, head 0)
of O are read back and compared with a float64 numpy reference (max |err|).
FLOPs = 4·B·H·S²·D (Q·Kᵀ and P·V), halved when causal. Predictions: flyasm.sweep's ranker (the
static model; --model perf once flyasm.perf has sweep_predict), marked as predictions.
Without an AMD GPU it prints the predicted table, says why nothing was measured, and exits 0.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "kernels")]

from flyasm.run import hip  # noqa: E402

DEFAULT_SHAPES = "16,64,8192,128"
AITER_DIR = ROOT.parent / "shared" / "aiter" / "gfx950" / "fmha_v3_fwd"
DROP_IN = ROOT.parent / "shared" / "aiter" / "client" / "drop_in.sh"
TS_QO = 256                      # fa_fwd's Q tile (fa_layouts.BLOCK_Q)

# aiter's fmha_fwd_v3_args (csrc/include/mha_fwd.h): every field in a 16-byte slot, in this order.
AITER_FIELDS = ["ptr_o", "ptr_q", "ptr_k", "ptr_v", "ptr_lse", "scalar", "s_seq_len", "s_Seqs", "s_Ts", "s_Hs",
                "s_Bs", "s_gqa", "s_k_Seqs", "s_k_Hs", "s_k_Bs", "s_opt", "s_lse", "s_kv_seq_len",
                "s_qk_head_dim", "s_v_head_dim", "s_q_head_num", "s_v_Seqs", "s_v_Hs", "s_v_Bs", "s_o_Seqs",
                "s_o_Hs", "s_o_Bs", "ptr_qseq", "ptr_kseq", "s_lse_Hs", "ptr_qseq_padding", "ptr_kseq_padding",
                "ptr_q_descale", "ptr_k_descale", "ptr_v_descale", "s_descale_q_Bs", "s_descale_q_Hs",
                "s_descale_k_Bs", "s_descale_k_Hs", "s_descale_v_Bs", "s_descale_v_Hs"]


def flops(b, h, s, d, causal) -> float:
    f = 4.0 * b * h * s * s * d
    return f / 2 if causal else f


# ---- kernel arguments ---------------------------------------------------------------------------
def kernarg_from(ptrs: dict, strides: dict, B, S, Sk, H, Hkv, D, es, causal, ts_qo) -> bytes:
    """fmha_fwd_v3_args from pointers and per-tensor (batch, seq, head) strides in elements, as aiter's
    fmha_fwd_v3_dispatcher fills it (our fa_fwd reads the same prefix)."""
    tune_opt = 5
    if causal and (H % 8 or S > 16384):          # aiter downgrades the option for these shapes
        tune_opt -= 2
    vals = {"ptr_o": ptrs["o"], "ptr_q": ptrs["q"], "ptr_k": ptrs["k"], "ptr_v": ptrs["v"], "ptr_lse": ptrs["lse"],
            "scalar": 1.0 / math.sqrt(D), "s_seq_len": S, "s_gqa": H // Hkv, "s_opt": tune_opt, "s_lse": 1,
            "s_kv_seq_len": Sk, "s_qk_head_dim": D, "s_v_head_dim": D, "s_q_head_num": H,
            "s_lse_Hs": strides["lse"] * 4, "s_Ts": ts_qo * strides["q"][1] * es}
    for t, pre in (("q", "s_"), ("k", "s_k_"), ("v", "s_v_"), ("o", "s_o_")):
        sb, ss, sh = strides[t]
        vals.update({f"{pre}Bs": sb * es, f"{pre}Seqs": ss * es, f"{pre}Hs": sh * es})
    buf = bytearray(16 * len(AITER_FIELDS))
    for i, f in enumerate(AITER_FIELDS):
        x = vals.get(f, 0)
        if f.startswith("ptr_"):
            buf[16 * i:16 * i + 8] = struct.pack("<Q", x)
        elif f == "scalar":
            buf[16 * i:16 * i + 4] = struct.pack("<f", x)
        else:
            buf[16 * i:16 * i + 4] = struct.pack("<I", x)
    return bytes(buf)


def aiter_kernarg(q, k, v, o, lse, causal: bool, ts_qo: int) -> bytes:
    """kernarg_from for BSHD torch tensors (lse [B, H, S])."""
    B, S, H, D = q.shape
    st = {n: (t.stride(0), t.stride(1), t.stride(2)) for n, t in (("q", q), ("k", k), ("v", v), ("o", o))}
    st["lse"] = lse.stride(1)
    return kernarg_from({n: t.data_ptr() for n, t in (("q", q), ("k", k), ("v", v), ("o", o), ("lse", lse))}, st,
                        B, S, k.shape[1], H, k.shape[2], D, q.element_size(), causal, ts_qo)


def drop_in_pack(aiter_dir: Path, ptrs: dict, B, S, H, Hkv, D, mask: int, mode: int = 0) -> dict:
    """aiter's own host code: {knl_name, co_name, ts_qo, grid, kernarg (bytes)} for one call."""
    cmd = [str(DROP_IN), str(aiter_dir), "pack", "dtype=bf16", f"hdim_q={D}", f"hdim_v={D}", f"batch={B}",
           f"nhead_q={H}", f"nhead_k={Hkv}", f"seqlen_q={S}", f"seqlen_k={S}", f"mask_type={mask}", f"group={mode}",
           "has_lse=1", f"scale={1.0 / math.sqrt(D)!r}"] + [f"{n}={ptrs[n]:#x}" for n in ("q", "k", "v", "o", "lse")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"drop_in.sh pack failed: {(r.stderr or r.stdout).strip().splitlines()[-1:]}")
    d = json.loads(r.stdout)
    d["kernarg"] = bytes.fromhex(d.pop("kernarg_hex"))
    return d


# ---- candidates ---------------------------------------------------------------------------------
def aiter_keys(aiter_dir: Path) -> list[dict]:
    """aiter's manifest rows; `why` says why a key is not timed here ("" when it is)."""
    with (aiter_dir / "fmha_fwd.csv").open(newline="") as f:
        rows = [dict(r) for r in csv.DictReader(f)]
    for r in rows:
        co = aiter_dir / r["co_name"]
        r["why"] = ("group mode (varlen): needs seqstart arrays" if r["mode"] != "0"
                    else "fp8: needs descale inputs" if r["dtype"] != "bf16"
                    else f"hdim {r['hdim_q']}/{r['hdim_v']}: not an hd128 shape" if (r["hdim_q"], r["hdim_v"]) != ("128", "128")
                    else f"{r['co_name']} is not in {aiter_dir}" if not co.is_file() else "")
    return rows


def our_kernel(causal: bool, H: int, Hkv: int):
    import fa_fwd
    return fa_fwd.build("bf16", causal, H, Hkv, aiter_args=True)


def predict(prog, fl: float, model: str) -> dict:
    if model == "none":
        return {}
    from flyasm.sweep import get_ranker
    return get_ranker(model).predict(prog, {"flops": fl})


# ---- timing -------------------------------------------------------------------------------------
def time_launches(rt, fn, grid, block, kernarg, lds, stream, warmup: int, repeats: int) -> list[float]:
    for _ in range(warmup):
        rt.launch(fn, grid, block, kernarg, lds, stream)
    rt.synchronize(stream)
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        rt.launch(fn, grid, block, kernarg, lds, stream)
        rt.synchronize(stream)
        out.append(time.perf_counter() - t)
    return out


def reference_rows(q, k, v, causal: bool, rows: int) -> "np.ndarray":  # noqa: F821
    """float64 softmax(q kᵀ / sqrt(D)) v for the first `rows` queries of one (batch, head)."""
    import numpy as np
    s = q[:rows] @ k.T / math.sqrt(q.shape[1])
    if causal:
        s = np.where(np.arange(k.shape[0])[None, :] <= np.arange(rows)[:, None], s, -np.inf)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)) @ v


def _bf16_bytes(x) -> bytes:
    import numpy as np
    return (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16).tobytes()     # truncation: exact values


def _bf16_from(b: bytes):
    import numpy as np
    return (np.frombuffer(b, np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def measure(rt, args, shapes, causals, table) -> None:
    """Fill table rows with measured columns (needs a device: rt is a HipRuntime)."""
    import numpy as np
    rng = np.random.default_rng()
    st = rt.stream()
    loaded = {}
    for (B, H, S, D) in shapes:
        n = B * S * H * D
        ptrs = {t: rt.malloc(2 * n) for t in ("q", "k", "v", "o")}
        ptrs["lse"] = rt.malloc(4 * B * H * S)
        sl = {}
        for t in ("q", "k", "v"):           # one random batch, copied to every batch (host memory stays small)
            chunk = _bf16_bytes(rng.standard_normal(S * H * D, dtype=np.float32))
            for b in range(B):
                rt.to_device(ptrs[t] + b * len(chunk), chunk)
            sl[t] = _bf16_from(chunk).reshape(S, H, D)[:, 0, :]        # (batch 0, head 0) of BSHD
        strides = {t: (S * H * D, H * D, D) for t in ("q", "k", "v", "o")}
        strides["lse"] = S
        for causal in causals:
            rows = [r for r in table if (r["B"], r["H"], r["S"], r["D"], r["causal"]) == (B, H, S, D, causal)
                    and not r["why"]]
            for r in rows:
                if r["kernel"] == "ours":
                    co, name = r["co"], r["knl_name"]
                    tiles = -(-S // TS_QO)                # aiter's grid: causal pairs two Q tiles per workgroup
                    grid = (-(-tiles // 2) if causal else tiles, H, B)
                    kernarg = kernarg_from(ptrs, strides, B, S, S, H, H, D, 2, causal, TS_QO)
                else:
                    d = drop_in_pack(Path(args.aiter_dir), ptrs, B, S, H, H, D, 2 if causal else 0)
                    co, name = (Path(args.aiter_dir) / Path(d["co_name"]).name).read_bytes(), d["knl_name"]
                    grid, kernarg = tuple(d["grid"]), d["kernarg"]
                if name not in loaded:
                    loaded[name] = rt.get_function(rt.load_module(co), name)
                rt.to_device(ptrs["o"], b"\xff" * (2 * n))                                  # NaN-poisoned O
                ts = time_launches(rt, loaded[name], grid, (512, 1, 1), kernarg, 0, st, args.warmup, args.repeats)
                med = statistics.median(ts)
                got = _bf16_from(b"".join(rt.from_device(ptrs["o"] + 2 * s * H * D, 2 * D) for s in range(64)))
                ref = reference_rows(sl["q"], sl["k"], sl["v"], causal, 64)
                r.update(meas_us=med * 1e6, meas_min_us=min(ts) * 1e6, meas_max_us=max(ts) * 1e6,
                         meas_tflops=r["flops"] / med / 1e12, grid=list(grid),
                         max_err=float(np.nan_to_num(np.abs(got.reshape(64, D) - ref), nan=np.inf).max()))
        for p in ptrs.values():
            rt.free(p)


def build_table(args, shapes, causals) -> list[dict]:
    """One row per (shape, mask, kernel) with predictions; aiter keys that cannot be timed keep `why`."""
    from flyasm.report.program import as_program
    keys = aiter_keys(Path(args.aiter_dir)) if (Path(args.aiter_dir) / "fmha_fwd.csv").is_file() else []
    progs, table = {}, []
    for (B, H, S, D) in shapes:
        for causal in causals:
            fl = flops(B, H, S, D, causal)
            base = {"B": B, "H": H, "S": S, "D": D, "causal": causal, "flops": fl}
            k = our_kernel(causal, H, H)
            res = k.build()
            table.append({**base, "kernel": "ours", "knl_name": k.name, "co": res.co, "why": "" if D == 128 else
                          "fa_fwd is head dim 128", **predict(k, fl, args.model)})
            for key in keys:
                if int(key["mask"]) not in ((1, 2) if causal else (0,)):
                    continue
                row = {**base, "kernel": f"aiter {key['co_name']}", "knl_name": key["knl_name"],
                       "key": "/".join(key[c] for c in ("dtype", "hdim_q", "hdim_v", "mask", "mode")), "why": key["why"]}
                if not key["why"]:
                    path = Path(args.aiter_dir) / key["co_name"]
                    if path not in progs:
                        progs[path] = as_program(str(path), key["knl_name"])
                    row.update(predict(progs[path], fl, args.model))
                table.append(row)
    return table


def format_table(table: list[dict]) -> str:
    head = ["B", "H", "S", "D", "causal", "kernel", "pred_us", "pred_tflops", "meas_us", "meas_tflops",
            "meas/pred", "max_err", "note"]

    def cell(r, c):
        x = r.get(c)
        if c == "meas/pred":
            return f"{r['meas_us'] / r['pred_us']:.2f}" if r.get("meas_us") and r.get("pred_us") else "-"
        if c == "note":
            return r.get("why") or ""
        if x is None:
            return "-"
        return f"{x:.1f}" if isinstance(x, float) and c != "max_err" else f"{x:.1e}" if c == "max_err" else str(x)

    body = [[cell(r, c) for c in head] for r in table]
    w = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(head)]
    return "\n".join("  ".join(c.rjust(x) if i < len(head) - 1 else c for i, (c, x) in enumerate(zip(cells, w)))
                     for cells in [head] + body)


def main(argv=None, runtime=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default=DEFAULT_SHAPES, help="B,H,S,D;... (default: the issue's headline shape)")
    ap.add_argument("--causal", choices=["no", "yes", "both"], default="both")
    ap.add_argument("--aiter-dir", default=str(AITER_DIR), help="aiter's gfx950 fmha_v3_fwd directory (manifest + .co)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--model", default="static", help="ranker of flyasm.sweep for the predicted columns ('none': skip)")
    ap.add_argument("--json", default=None, help="write the rows as JSON here")
    args = ap.parse_args(argv)
    shapes = [tuple(int(x) for x in s.split(",")) for s in args.shapes.split(";") if s]
    causals = {"no": [False], "yes": [True], "both": [False, True]}[args.causal]

    if runtime is None:
        ok, why = hip.available()
        rt = hip.HipRuntime() if ok else None
    else:
        ok, why, rt = True, "injected runtime", runtime
    table = build_table(args, shapes, causals)
    if ok:
        measure(rt, args, shapes, causals, table)
    print(f"Attention forward, bf16; predicted by the {args.model} model (a prediction, not a measurement); "
          + (f"measured: median of {args.repeats} synchronised launches after {args.warmup} warm-up"
             if ok else "nothing measured"))
    print(format_table(table))
    if not ok:
        print(f"silicon: no AMD GPU here ({why}); nothing measured.")
    if args.json:
        rows = [{k: v for k, v in r.items() if k != "co"} for r in table]
        Path(args.json).write_text(json.dumps({"measured": ok, "reason": why, "rows": rows}, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
