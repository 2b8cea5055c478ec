"""`make demo`: build the attention kernels, check them, run one in the CPU emulator against
torch, and print the report.

Every step is the real one: `Kernel.build()` assembles with llvm-mc/ld.lld and fails on any
checker finding; the emulator runs the decoded IR of the final .co with strict asynchronous
memory and hazard checks; the reference is torch attention in float32.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _kernels():
    sys.path.insert(0, str(ROOT / "kernels"))
    import fa_fwd  # noqa: E402  (kernels/ is a folder of scripts, not a package)
    return fa_fwd


def main(out_dir: str = "out/demo") -> int:
    import torch

    from .report.model import format_model, model
    from .report.stats import stats

    fa = _kernels()
    out = ROOT / out_dir
    print("flyasm demo: attention forward for gfx950 (head dim 128), built and checked on the CPU\n")

    # 1. Build the attention set (every variant: llvm-mc + ld.lld; the static wait/hazard checker
    #    must find nothing) into .co files plus an aiter-style CSV manifest.
    from .dispatch import Dispatcher, attention, build_set
    res = build_set(f"{ROOT / 'kernels' / 'fa_fwd_set.py'}", out / "set", progress=True)
    print(f"  built and checked {len(res.builds)} variants in {res.wall_s:.1f} s -> {res.manifest.relative_to(ROOT)}:\n")
    print("\n".join("    " + line for line in res.manifest.read_text().splitlines()))

    # 2. One call through the dispatcher, run in the strict emulator, against torch:
    #    GQA 4:1, causal, lengths that are not multiples of the 256-row / 64-key tiles.
    torch.manual_seed(1234)
    B, Hq, Hkv, Sq, Sk = 1, 4, 1, 300, 300
    q = torch.randn(B, Hq, Sq, 128).bfloat16()
    kk = torch.randn(B, Hkv, Sk, 128).bfloat16()
    vv = torch.randn(B, Hkv, Sk, 128).bfloat16()
    d = Dispatcher(res.manifest)
    entry = d.select(dtype="bf16", hdim_q=128, hdim_v=128, mask=2, mode=0)   # Sq == Sk: aiter's mask 2
    print(f"\n  flyasm.attention(q[{B},{Hq},{Sq},128], k/v[{B},{Hkv},{Sk},128], causal=True) selects "
          f"{entry.knl_name}; emulating {(-(-Sq // 256) + 1) // 2}x{Hq}x{B} workgroups of 512 threads "
          f"(aiter's causal grid: two Q tiles each) ...")
    t = time.perf_counter()
    o, lse = attention(q, kk, vv, causal=True, kernels=d, return_lse=True)
    dt = time.perf_counter() - t
    ref, ref_lse = fa.reference(q, kk, vv, causal=True)
    err = (o.float() - ref).abs().max().item()
    lse_err = (lse - ref_lse).abs().max().item()
    ok = bool(torch.isfinite(o).all()) and err < 1e-2 and lse_err < 1e-4
    print(f"  emulator vs torch (float32): max |dO| = {err:.4f} (bf16 tolerance 1e-2), "
          f"max |dLSE| = {lse_err:.2e}  -> {'OK' if ok else 'MISMATCH'}  ({dt:.1f} s)")
    kern = fa.build(**entry.params)

    # 3. The report: the steady-state loop of the same kernel, per cluster, and the static model.
    st = stats(kern)
    print("\n  clusters of one 64-key step (instruction counts per region):")
    for r in st["regions"]:
        if r["name"].startswith("step0/"):
            mix = {k: r[k] for k in ("mfma", "valu", "trans", "ds_read", "lds_dma", "s_waitcnt") if r.get(k)}
            print(f"    {r['name']:22s} {mix}")
    print()
    print("\n".join("  " + line for line in format_model(model(kern)).splitlines()))
    print(f"\n  code objects and manifest in {out.relative_to(ROOT)}/set/")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
