"""Attention forward TFLOPS on an AMD GPU (HIP backend): our set against torch SDPA and any .co given.

    python benchmarks/silicon.py [--set DIR] [--co FILE.co ...] [--shapes B,H,S,D;...] [--causal both]
                                 [--dtype bf16] [--iters 20] [--json PATH]

Our kernels come from an attention set (`flyasm build-set kernels/fa_fwd_set.py -o DIR`; built here
when --set is not given), rows with args=aiter. A foreign .co (e.g. aiter's fwd_hd128_bf16.co) is
launched exactly as aiter's fmha_fwd_v3 launcher does: the packed fmha_fwd_v3_args struct (16-byte
slots), block 512, grid (ceil(ceil(S / ts_qo) / tg_div), H, B) with tg_div = 2 when causal
(--ts-qo, default 256); our fa_fwd takes the same struct prefix with tg_div = 1. Tensors are BSHD (aiter's layout); SDPA gets the same memory as BHSD views.

FLOPs = 4·B·H·S²·D (Q·Kᵀ and P·V), halved when causal. Each kernel runs once and is compared with
SDPA before timing (max |err|), then timed as wall time over --iters launches after a warm-up,
with a device synchronise on both sides (torch.cuda.synchronize), the same way for every column.
Without an AMD GPU it prints why (flyasm.run.hip.available()) and exits 0.
"""
from __future__ import annotations

import argparse
import json
import math
import struct
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from flyasm.run import hip  # noqa: E402

DEFAULT_SHAPES = "16,64,8192,128;1,64,8192,128;4,32,4096,128;8,16,2048,128;16,16,1024,128"

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


def aiter_kernarg(q, k, v, o, lse, causal: bool, ts_qo: int) -> bytes:
    """fmha_fwd_v3_args for BSHD tensors (strides in bytes), as aiter's fmha_fwd_v3_dispatcher fills it."""
    B, S, H, D = q.shape
    es = q.element_size()
    tune_opt = 5
    if causal and (H % 8 or S > 16384):          # aiter downgrades the option for these shapes
        tune_opt -= 2
    vals = {"ptr_o": o.data_ptr(), "ptr_q": q.data_ptr(), "ptr_k": k.data_ptr(), "ptr_v": v.data_ptr(),
            "ptr_lse": lse.data_ptr(), "scalar": 1.0 / math.sqrt(D), "s_seq_len": S,
            "s_Seqs": q.stride(1) * es, "s_Ts": ts_qo * q.stride(1) * es, "s_Hs": q.stride(2) * es,
            "s_Bs": q.stride(0) * es, "s_gqa": H // k.shape[2], "s_k_Seqs": k.stride(1) * es,
            "s_k_Hs": k.stride(2) * es, "s_k_Bs": k.stride(0) * es, "s_opt": tune_opt, "s_lse": 1,
            "s_kv_seq_len": k.shape[1], "s_qk_head_dim": D, "s_v_head_dim": D, "s_q_head_num": H,
            "s_v_Seqs": v.stride(1) * es, "s_v_Hs": v.stride(2) * es, "s_v_Bs": v.stride(0) * es,
            "s_o_Seqs": o.stride(1) * es, "s_o_Hs": o.stride(2) * es, "s_o_Bs": o.stride(0) * es,
            "s_lse_Hs": lse.stride(1) * 4}
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


def candidates(args) -> list[dict]:
    """[{label, co, kernel, ts_qo, dtype, mask}] from our set and from --co files."""
    from flyasm.codeobj.reader import read_code_object
    from flyasm.dispatch import Dispatcher, build_set
    out = []
    set_dir = args.set
    if set_dir is None:
        set_dir = Path(args.workdir) / "fa_fwd_set"
        build_set(str(ROOT / "kernels" / "fa_fwd_set.py"), set_dir, jobs=2, progress=True)
    d = Dispatcher(set_dir)
    for r in d.rows:
        if r.get("args", "aiter") == "aiter" and r.get("gqa", "1") == "1":
            out.append({"label": f"flyasm {r['knl_name']}", "co": (Path(d.path).parent / r["co_name"]).read_bytes(),
                        "kernel": r["knl_name"], "ts_qo": int(r["ts_qo"]), "dtype": r["dtype"],
                        "causal": r["mask"] != "0", "tg_div": 1})   # fa_fwd: one Q tile per workgroup
    for p in args.co:
        co = read_code_object(p)
        for kk in co.kernels:
            for causal in (False, True):      # a foreign .co does not say; its name usually does
                if ("causal" in kk.name) == causal:
                    out.append({"label": f"{Path(p).name}:{kk.name}", "co": Path(p).read_bytes(), "kernel": kk.name,
                                "ts_qo": args.ts_qo, "dtype": args.dtype, "causal": causal,
                                "tg_div": 2 if causal else 1})   # aiter's causal kernels pair Q tiles
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", default=None, help="attention set directory (default: build kernels/fa_fwd_set.py)")
    ap.add_argument("--co", action="append", default=[], help="another code object to time (aiter args)")
    ap.add_argument("--shapes", default=DEFAULT_SHAPES, help="B,H,S,D;... (first is the headline shape)")
    ap.add_argument("--causal", choices=["no", "yes", "both"], default="both")
    ap.add_argument("--dtype", choices=["bf16", "f16"], default="bf16")
    ap.add_argument("--ts-qo", type=int, default=256, help="Q tile of a --co kernel (aiter's ts_qo)")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--workdir", default="/tmp/flyasm-silicon")
    ap.add_argument("--json", default=str(Path(__file__).with_suffix(".json")))
    args = ap.parse_args(argv)

    ok, why = hip.available()
    if not ok:
        print(f"silicon: no AMD GPU here ({why}); nothing measured.")
        Path(args.json).write_text(json.dumps({"measured": False, "reason": why}, indent=2) + "\n")
        print(f"wrote {args.json}")
        return 0
    import torch
    if not (torch.cuda.is_available() and getattr(torch.version, "hip", None)):
        why = "torch has no ROCm device (install a ROCm build of torch for SDPA and device tensors)"
        print(f"silicon: {why}; nothing measured.")
        Path(args.json).write_text(json.dumps({"measured": False, "reason": why}, indent=2) + "\n")
        return 0

    rt = hip.HipRuntime()
    dev = torch.device("cuda")
    tdt = {"bf16": torch.bfloat16, "f16": torch.float16}[args.dtype]
    shapes = [tuple(int(x) for x in s.split(",")) for s in args.shapes.split(";") if s]
    causals = {"no": [False], "yes": [True], "both": [False, True]}[args.causal]
    cands = [c for c in candidates(args) if c["dtype"] == args.dtype]
    loaded = {}
    for c in cands:
        mod = rt.load_module(c["co"])
        loaded[c["label"]] = (mod, rt.get_function(mod, c["kernel"]))
    rows = []

    def timed(fn) -> float:
        fn()
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(args.iters):
            fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - t) / args.iters

    for (B, H, S, D) in shapes:
        for causal in causals:
            q, k, v = (torch.randn(B, S, H, D, device=dev, dtype=tdt) for _ in range(3))
            qh, kh, vh = (t.transpose(1, 2) for t in (q, k, v))          # BHSD views of the same memory
            ref = torch.nn.functional.scaled_dot_product_attention(qh, kh, vh, is_causal=causal)
            f = flops(B, H, S, D, causal)
            row = {"B": B, "H": H, "S": S, "D": D, "causal": causal, "dtype": args.dtype, "flops": f}
            dt = timed(lambda: torch.nn.functional.scaled_dot_product_attention(qh, kh, vh, is_causal=causal))
            row["torch_sdpa"] = {"ms": dt * 1e3, "tflops": f / dt / 1e12}
            for c in cands:
                if c["causal"] != causal:
                    continue
                o = torch.full_like(q, float("nan"))
                lse = torch.empty(B, H, S, device=dev, dtype=torch.float32)
                kernarg = aiter_kernarg(q, k, v, o, lse, causal, c["ts_qo"])
                grid = (-(-(-(-S // c["ts_qo"])) // c["tg_div"]), H, B)   # workgroups, as hipModuleLaunchKernel takes
                fn = loaded[c["label"]][1]
                launch = lambda: rt.launch(fn, grid, (512, 1, 1), kernarg, 0, None)  # noqa: E731
                launch()
                torch.cuda.synchronize()
                err = (o.transpose(1, 2).float() - ref.float()).abs().max().item()
                dt = timed(launch)
                row[c["label"]] = {"ms": dt * 1e3, "tflops": f / dt / 1e12, "max_abs_err": err}
            rows.append(row)

    labels = ["torch_sdpa"] + [c["label"] for c in cands]
    print(f"{torch.cuda.get_device_name()}: {args.dtype}, {args.iters} iterations, TFLOPS (causal FLOPs halved)")
    print(f"{'B':>3} {'H':>3} {'S':>6} {'D':>4} {'causal':>6} " + " ".join(f"{lab[-28:]:>28}" for lab in labels))
    for r in rows:
        cells = []
        for lab in labels:
            x = r.get(lab)
            cells.append(f"{x['tflops']:>10.1f}" + (f" (err {x['max_abs_err']:.1e})" if "max_abs_err" in x else "")
                         if x else "-")
        print(f"{r['B']:>3} {r['H']:>3} {r['S']:>6} {r['D']:>4} {str(r['causal']):>6} "
              + " ".join(f"{c:>28}" for c in cells))
    Path(args.json).write_text(json.dumps({"measured": True, "device": torch.cuda.get_device_name(),
                                           "rows": rows}, indent=2) + "\n")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
