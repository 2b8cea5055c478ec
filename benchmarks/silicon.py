"""Attention forward on an AMD GPU through HIP: every key of aiter's gfx950 fmha_v3_fwd manifest, ours and
aiter's, measured beside the CU timing model's prediction.

    python3 benchmarks/silicon.py [--set DIR] [--aiter-dir DIR] [--shape B,HQ,HK,S] [--key DTYPE,HQ,HV,MASK,MODE ...]
                                  [--model perf|static|none] [--warmup 3] [--repeats 20] [--check-rows 8]
                                  [--jobs N] [--md PATH] [--json PATH]

Rows: for each key (dtype, hdim_q, hdim_v, mask, mode) of aiter's manifest (--aiter-dir/fmha_fwd.csv,
default ../shared/aiter/gfx950/fmha_v3_fwd), our kernel (a built set, --set DIR; default flyasm's cached
attention set, built once) and aiter's (when its .co is in --aiter-dir; otherwise listed with why).
Default shape: issue 12's, batch 16, 64 Q heads, 64 K/V heads, seqlen 8192 (group mode: 16 sequences of
8192). Both sets are launched the same way, by aiter's own host code (benchmarks/aiter_launch.py, which
runs client/drop_in.sh's codegen, lookup and packing): kernel name, grid and the 656 kernarg bytes
with the real device pointers; the launch width is aiter's rule (256 threads for hdim 192/128, else 512).

Predicted: fa_keys_model.price (`flyasm perf`, the CU timing model; the default), `--model static`
(flyasm.sweep's static ranker), or none. FLOPs = 2·B·HQ·Sq·Sk·(hdim_q + hdim_v), halved when causal.

Measured (only with an AMD GPU): device buffers per (dtype, head dims): bf16 N(0, 1), or fp8 E4M3 of
N(0, 1) with per-tensor descales DESCALES (not 1); group mode passes seqstart arrays of B equal-length
sequences over the same memory (packed [B·S, H, D], batch strides 0, LSE [H, B·S]). O is poisoned with
NaN, each kernel is launched --warmup times, then --repeats times between two hipEvents each (device
time: median, min, max). Afterwards --check-rows rows of (batch 0, head 0), spread over the sequence and
including the first and last, are compared with a float64 reference (dequantised for fp8; causal is
bottom-right, aiter's mask 2): max |err| and whether every element is within error_bound().
Without an AMD GPU it prints the predicted table, says why nothing was measured, and exits 0.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import struct
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import aiter_launch as AL  # noqa: E402
import fa_keys_model as FK  # noqa: E402

from flyasm.run import hip  # noqa: E402

AITER_DIR = FK.AITER_SET
DESCALES = {"q_descale": 0.625, "k_descale": 1.375, "v_descale": 0.75}     # fp8 keys: not 1, exact in f32


# ---- rows: which kernel runs which key ----------------------------------------------------------
def key_text(key: tuple) -> str:
    return f"{key[0]} {key[1]}/{key[2]} {FK.MASK[key[3]]} {FK.MODE[key[4]]}"


def plan(keys, sets: dict, shape) -> list[dict]:
    """One row per (key, kernel): ours and aiter's. A row that cannot run keeps `why`; one that can has
    aiter's launch for it at `shape` (aiter_launch.row_launch: kernel, grid, block, FLOPs)."""
    b, hq, hk, s = shape
    rows = []
    for key in keys:
        for who, (set_dir, man) in sets.items():
            r = {"key": list(key), "kernel": who, "why": ""}
            rows.append(r)
            if set_dir is None:
                r["why"] = man          # why there is no set
                continue
            if key not in man:
                r["why"] = f"{set_dir} has no kernel for this key"
                continue
            mrow = man[key]
            path = Path(set_dir) / mrow["co_name"]
            r.update(set_dir=str(set_dir), co_name=mrow["co_name"], mrow=mrow)
            if not path.is_file():
                r["why"] = f"{mrow['co_name']} is not in {set_dir}"
                continue
            call = dict(mrow, kernelName=mrow["knl_name"], batch=b, nhead_q=hq, nhead_k=hk, seqlen_q=s, seqlen_k=s)
            L = AL.row_launch("fmha", call, {mrow["co_name"]: (path, mrow)})
            r.update(knl_name=L["kernel"], grid=list(L["grid"]), block=L["block"], flops=L["flops"])
    return rows


# ---- predictions ----------------------------------------------------------------------------------
def _static(path: str, knl: str, flops: float) -> dict:
    from flyasm.report.program import as_program
    from flyasm.sweep import StaticRanker
    p = StaticRanker().predict(as_program(path, knl), {"flops": flops})
    return {"us": p["pred_us"], "tflops": p["pred_tflops"]}


def _one(model: str, r: dict, shape) -> dict:
    try:
        if model == "perf":
            return FK.price(r["set_dir"], r["mrow"], shape)
        return _static(str(Path(r["set_dir"]) / r["co_name"]), r["knl_name"], r["flops"])
    except Exception as e:          # one row's model failure is that row's note, not the table's end
        return {"error": f"{type(e).__name__}: {e}"}


def predict(rows: list[dict], model: str, shape, jobs: int) -> None:
    todo = [r for r in rows if not r["why"]]
    if model == "none" or not todo:
        return
    args = ([model] * len(todo), todo, [shape] * len(todo))
    if jobs <= 1:
        got = list(map(_one, *args))
    else:
        with ProcessPoolExecutor(jobs) as ex:
            got = list(ex.map(_one, *args))
    for r, p in zip(todo, got):
        if "error" in p:
            r["pred_error"] = p["error"]
        else:
            r.update(pred_us=p["us"], pred_tflops=p["tflops"])


# ---- device data and the reference -----------------------------------------------------------------
def _encode(x, fp8: bool):
    """float32 numpy -> (device bytes, the float64 values those bytes hold): bf16 or OCP E4M3 (gfx950's fp8)."""
    import torch
    t = torch.from_numpy(x)
    t = t.to(torch.float8_e4m3fn) if fp8 else t.to(torch.bfloat16)
    raw = t.view(torch.uint8 if fp8 else torch.int16).numpy().tobytes()
    return raw, t.double().numpy()


def _bf16_rows(raw: bytes, cols: int):
    import numpy as np
    return (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64).reshape(-1, cols)


class DeviceData:
    """Q, K, V (one random batch copied to every batch), O, LSE, descales and seqstarts for one
    (dtype, hdim_q, hdim_v) at shape; `host` keeps (batch 0, head 0) of Q/K/V as float64."""

    def __init__(self, rt, dtype: str, dq: int, dv: int, shape, rng):
        self.rt, self.fp8, self.dq, self.dv, self.shape = rt, dtype.startswith("fp8"), dq, dv, shape
        b, hq, hk, s = shape
        self.ptrs, self.host = {}, {}
        try:
            for n, heads, d in (("q", hq, dq), ("k", hk, dq), ("v", hk, dv)):
                raw, val = _encode(rng.standard_normal(s * heads * d, dtype="float32"), self.fp8)
                self.ptrs[n] = rt.malloc(len(raw) * b)
                for i in range(b):
                    rt.to_device(self.ptrs[n] + i * len(raw), raw)
                self.host[n] = val.reshape(s, heads, d)[:, 0, :]
            self.ptrs["o"] = rt.malloc(2 * b * s * hq * dv)
            self.ptrs["lse"] = rt.malloc(4 * b * hq * s)
            if self.fp8:
                for n, x in DESCALES.items():
                    self.ptrs[n] = rt.malloc(4)
                    rt.to_device(self.ptrs[n], struct.pack("<f", x))
            starts = struct.pack(f"<{b + 1}i", *(i * s for i in range(b + 1)))
            for n in ("seqstart_q", "seqstart_k"):
                self.ptrs[n] = rt.malloc(len(starts))
                rt.to_device(self.ptrs[n], starts)
        except BaseException:
            self.free()
            raise

    def free(self) -> None:
        for p in self.ptrs.values():
            self.rt.free(p)
        self.ptrs = {}

    def call(self, key) -> dict:
        """drop_in pack's arguments for this key: shape, strides (group mode: packed sequences), pointers."""
        dtype, dq, dv, mask, mode = key
        b, hq, hk, s = self.shape
        kv = dict(dtype=dtype, hdim_q=dq, hdim_v=dv, mask_type=mask, group=mode, batch=b, nhead_q=hq, nhead_k=hk,
                  seqlen_q=s, seqlen_k=s, has_lse=1, scale=repr(1.0 / math.sqrt(dq)))
        if mode:
            for n, h, d in (("q", hq, dq), ("k", hk, dq), ("v", hk, dv), ("o", hq, dv)):
                kv.update({f"stride_{n}": h * d, f"nhead_stride_{n}": d, f"batch_stride_{n}": 0})
            kv["nhead_stride_lse"] = b * s
        names = ["q", "k", "v", "o", "lse"] + (list(DESCALES) if self.fp8 else []) + \
            (["seqstart_q", "seqstart_k"] if mode else [])
        kv.update({n: hex(self.ptrs[n]) for n in names})
        return kv

    def poison_o(self) -> None:
        b, hq, hk, s = self.shape
        self.rt.memset(self.ptrs["o"], 0xFF, 2 * b * s * hq * self.dv)     # bf16 0xFFFF: NaN

    def check(self, causal: bool, nrows: int) -> dict:
        """O rows of (batch 0, head 0) against the float64 reference: max |err|, worst err/bound."""
        import numpy as np
        b, hq, hk, s = self.shape
        rows = np.unique(np.linspace(0, s - 1, max(2, nrows)).round().astype(int))
        got = _bf16_rows(b"".join(self.rt.from_device(self.ptrs["o"] + 2 * int(i) * hq * self.dv, 2 * self.dv)
                                  for i in rows), self.dv)
        ds = [DESCALES[n] if self.fp8 else 1.0 for n in DESCALES]
        ref, bound = reference(self.host["q"][rows] * ds[0], self.host["k"] * ds[1], self.host["v"] * ds[2], rows,
                               s, causal, 1.0 / math.sqrt(self.dq), self.fp8)
        err = np.nan_to_num(np.abs(got - ref), nan=np.inf)
        return {"checked_rows": [int(i) for i in rows], "max_err": float(err.max()),
                "err_over_bound": float((err / bound).max()), "ok": bool((err <= bound).all())}


def reference(q, k, v, rows, sq: int, causal: bool, scale: float, fp8: bool):
    """float64 softmax(scale·q kᵀ) v for query rows `rows` of one (batch, head) (q holds those rows,
    dequantised; causal: bottom-right, query i sees keys j <= i + Sk - Sq), and the error bound."""
    import numpy as np
    s = (q @ k.T) * scale
    if causal:
        s = np.where(np.arange(k.shape[0])[None, :] <= rows[:, None] + (k.shape[0] - sq), s, -np.inf)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    o = (p @ v) / p.sum(axis=1, keepdims=True)
    return o, error_bound(p, v, o, fp8)


def error_bound(p, v, o, fp8: bool):
    """Per-element bound on |O - O_ref| for a flash-attention kernel that rounds P = exp(s - m) to the
    input format before P·V (p here: exp(s - max s), so p <= 1, sum p >= 1) and stores O in bf16.
    Rounding P_j with error e_j moves O by at most sum_j e_j (|v_j| + |O|) / sum_j p_j, whether the kernel
    divides by the sum of the rounded or of the unrounded P (the |O| term covers the former).
    bf16 P: e = 2^-7 p (7 fraction bits, truncation or RNE); fp8 P (OCP E4M3, RNE, 3 fraction bits,
    subnormal spacing 2^-9): e = max(2^-4 p, min(2^-10, p)) (tests/conftest.fp8_attention_bound derives
    it, with the running max: P relative to a max no larger than the true one keeps these in its units).
    Plus O's bf16 store, 2^-7 |O|, and fp32 accumulation/exp, 2^-16 sum p |v| / sum p (far below the rest).
    The inputs are exact (the reference reads the bytes the kernel reads)."""
    import numpy as np
    e = np.maximum(2.0 ** -4 * p, np.minimum(2.0 ** -10, p)) if fp8 else 2.0 ** -7 * p
    den = p.sum(axis=1, keepdims=True)
    av = np.abs(v)
    return (e @ av + e.sum(axis=1, keepdims=True) * np.abs(o) + 2.0 ** -16 * (p @ av)) / den + 2.0 ** -7 * np.abs(o)


# ---- measurement ------------------------------------------------------------------------------------
def time_events(rt, fn, grid, block: int, kernarg: bytes, stream, warmup: int, repeats: int) -> list[float]:
    """Device seconds of `repeats` launches, each between two hipEvents on the stream, after `warmup`."""
    for _ in range(warmup):
        rt.launch(fn, grid, (block, 1, 1), kernarg, 0, stream)
    evs = [(rt.event(), rt.event()) for _ in range(repeats)]
    try:
        for a, b in evs:
            rt.record(a, stream)
            rt.launch(fn, grid, (block, 1, 1), kernarg, 0, stream)
            rt.record(b, stream)
        rt.event_synchronize(evs[-1][1])
        return [rt.elapsed_ms(a, b) / 1e3 for a, b in evs]
    finally:
        for pair in evs:
            for ev in pair:
                rt.destroy_event(ev)


def measure(rt, rows: list[dict], shape, args) -> None:
    """Fill the runnable rows with measured columns (rt: a HipRuntime on a machine with a GPU)."""
    import numpy as np
    rng = np.random.default_rng()
    stream = rt.stream()
    functions = {}
    todo = [r for r in rows if not r["why"]]
    for dims in sorted({tuple(r["key"][:3]) for r in todo}):
        data = DeviceData(rt, *dims, shape, rng)
        try:
            for r in (r for r in todo if tuple(r["key"][:3]) == dims):
                try:
                    d = AL.fmha_pack(Path(r["set_dir"]), **data.call(r["key"]))
                    if d["knl_name"] not in functions:
                        co = (Path(r["set_dir"]) / Path(d["co_name"]).name).read_bytes()
                        functions[d["knl_name"]] = rt.get_function(rt.load_module(co), d["knl_name"])
                    data.poison_o()
                    ts = time_events(rt, functions[d["knl_name"]], tuple(d["grid"]), r["block"], d["kernarg"],
                                     stream, args.warmup, args.repeats)
                except hip.HipError as e:
                    r["meas_error"] = e.message
                    continue
                med = statistics.median(ts)
                r.update(grid=list(d["grid"]), meas_us=med * 1e6, meas_min_us=min(ts) * 1e6,
                         meas_max_us=max(ts) * 1e6, meas_tflops=r["flops"] / med / 1e12,
                         **data.check(bool(r["key"][3]), args.check_rows))
        finally:
            data.free()


# ---- the table ----------------------------------------------------------------------------------------
COLUMNS = ["key", "kernel", "code object", "pred µs", "pred TFLOPS", "meas µs (median)", "min-max µs",
           "meas TFLOPS", "meas/pred", "max abs err", "within bound", "note"]


def _num(x) -> str:
    return "" if x is None else f"{x:.0f}" if abs(x) >= 100 else f"{x:.3g}"


def _cells(r: dict) -> list[str]:
    meas = r.get("meas_us") is not None
    note = r["why"] or r.get("meas_error") or r.get("pred_error") or ""
    return [key_text(r["key"]), r["kernel"], r.get("co_name", ""), _num(r.get("pred_us")), _num(r.get("pred_tflops")),
            _num(r.get("meas_us")), f"{_num(r['meas_min_us'])}-{_num(r['meas_max_us'])}" if meas else "",
            _num(r.get("meas_tflops")), f"{r['meas_us'] / r['pred_us']:.2f}" if meas and r.get("pred_us") else "",
            f"{r['max_err']:.2e}" if meas else "",
            ("yes" if r["ok"] else f"NO (err/bound {r['err_over_bound']:.3g})") if meas else "", note]


def table(rows: list[dict]) -> str:
    out = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    out += ["| " + " | ".join(_cells(r)) + " |" for r in rows]
    return "\n".join(out) + "\n"


def our_set(args, needed: bool):
    """(dir, manifest) of our kernels, or (None, why)."""
    if args.set:
        return Path(args.set), FK.manifest(Path(args.set))
    if not needed:
        return None, "no set: nothing to predict or measure (--model none, no GPU); pass --set DIR to list it"
    from flyasm.dispatch import _attention_set_dir
    print("our attention set: flyasm's cached build (kernels/fa_fwd_set.py; built once, minutes)", flush=True)
    d = _attention_set_dir()
    return d, FK.manifest(d)


def main(argv=None, runtime=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--set", help="our built set (flyasm build-set kernels/fa_fwd_set.py:KEYS -o DIR); "
                                  "default: flyasm's cached attention set")
    ap.add_argument("--aiter-dir", default=str(AITER_DIR), help="aiter's gfx950 fmha_v3_fwd (manifest + .co)")
    ap.add_argument("--shape", default="16,64,64,8192", help="batch,heads_q,heads_k,seqlen (group: batch sequences)")
    ap.add_argument("--key", action="append", default=[], help="dtype,hdim_q,hdim_v,mask,mode (repeatable)")
    ap.add_argument("--model", choices=["perf", "static", "none"], default="perf",
                    help="predicted columns: flyasm perf (CU timing model), the static model, or none")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--check-rows", type=int, default=8, help="O rows of (batch 0, head 0) checked per kernel")
    ap.add_argument("--jobs", type=int, default=1, help="processes for the predictions")
    ap.add_argument("--md", help="write the table (markdown) here")
    ap.add_argument("--json", help="write the rows as JSON here")
    a = ap.parse_args(argv)
    aiter_dir = Path(a.aiter_dir)
    if not (aiter_dir / "fmha_fwd.csv").is_file():
        print(f"silicon: {aiter_dir} has no fmha_fwd.csv: the rows are the keys of aiter's manifest; nothing to do")
        return 0
    aiter = FK.manifest(aiter_dir)
    shape, keys = FK.chosen(ap, a, aiter)

    if runtime is None:
        ok, why = hip.available()
        rt = hip.HipRuntime() if ok else None
    else:
        ok, why, rt = True, "injected runtime", runtime
    sets = {"ours": our_set(a, ok or a.model != "none"), "aiter": (aiter_dir, aiter)}
    try:
        rows = plan(keys, sets, shape)
    except (subprocess.CalledProcessError, OSError) as e:     # codegen needs pandas, host.cpp a C++ compiler
        err = getattr(e, "stderr", None)
        err = err.decode(errors="replace") if isinstance(err, bytes) else err
        tail = ((err or str(e)).strip().splitlines() or [str(e)])[-1]
        print(f"silicon: aiter's host code (client/drop_in.sh's codegen + host.cpp) could not run: {tail}")
        return 1
    t0 = time.time()
    predict(rows, a.model, shape, a.jobs)
    t_pred = time.time() - t0
    if ok:
        measure(rt, rows, shape, a)
    b, hq, hk, s = shape
    head = (f"Attention forward, every aiter gfx950 key: batch {b}, {hq} Q / {hk} K/V heads, seqlen {s} (group mode: "
            f"{b} sequences of {s}); launches packed by aiter's own host code. Predicted: "
            + {"perf": "`flyasm perf` (CU timing model)", "static": "the static model (flyasm.sweep)",
               "none": "nothing (--model none)"}[a.model] + f" ({t_pred:.0f} s). Measured: "
            + (f"hipEvent device time, median of {a.repeats} launches after {a.warmup} warm-up; max abs err over "
               f"{a.check_rows} O rows of (batch 0, head 0) vs a float64 reference, bound: silicon.error_bound"
               if ok else "nothing"))
    text = table(rows)
    print(head + "\n\n" + text)
    if not ok:
        print(f"silicon: no AMD GPU here ({why}); nothing measured.")
    if a.md:
        Path(a.md).write_text(f"`python3 benchmarks/silicon.py {' '.join(argv if argv is not None else sys.argv[1:])}`"
                              f"\n\n{head}\n\n{text}")
    if a.json:
        out = [{k: v for k, v in r.items() if k != "mrow"} for r in rows]
        Path(a.json).write_text(json.dumps({"measured": ok, "reason": why, "shape": shape, "model": a.model,
                                            "rows": out}, indent=1) + "\n")
        print(f"wrote {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
