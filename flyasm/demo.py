"""`make demo`: build the attention kernels, check them, run one in the CPU emulator against
torch, print the report, and the timing model's calibrated prediction (ours beside aiter's and FlyDSL's).

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
    print()
    print("\n".join("  " + line for line in calibrated_prediction().splitlines()))
    print(f"\n  code objects and manifest in {out.relative_to(ROOT)}/set/")
    return 0 if ok else 1


def calibrated_prediction(batch: int = 16, heads: int = 64, seqlen: int = 8192) -> str:
    """4. The timing model with its calibrated constants (flyasm/perf/params.json, fitted on measured
    MI355X rows of aiter's and FlyDSL's kernels): ours beside aiter's and FlyDSL's at the #12 shape,
    priced by benchmarks/vs_aiter_model.py exactly as its tables are."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import vs_aiter_model as V  # noqa: E402  (benchmarks/ is a folder of scripts, not a package)

    from .perf import params as P
    p = P.load()
    out = [f"timing model (flyasm perf: emulator streams -> CU model -> 256 CUs; constants fitted on measured "
           f"MI355X rows: " + ", ".join(f"{n} {getattr(p, n):.3g}" for n in P.FITTED + P.FITTED_SIMULATED) +
           "); a prediction, not a "
           f"measurement:", f"  {f'batch {batch}, {heads} heads, seqlen {seqlen}, d 128 (TFLOPS)':<50}"
           f"{'aiter':>7} {'FlyDSL':>7} {'ours':>7}  ours/aiter"]
    shared = V.AL.SHARED.is_dir()
    for mask, name in ((0, "non-causal"), (2, "causal")):
        if shared:
            pr = V.predict_all(V.measured.co_index(), mask, batch, heads, heads, seqlen, p)
        else:                      # aiter's code objects and host code live in ../shared
            pr = {"aiter": None, "flydsl": None, "ours": V.predict_ours(bool(mask), batch, heads, heads, seqlen, p)}
        cells = [f"{pr[w].tflops:7.0f}" if pr[w] is not None else f"{'-':>7}" for w in ("aiter", "flydsl", "ours")]
        ratio = f"{pr['ours'].tflops / pr['aiter'].tflops:10.2f}" if pr["aiter"] is not None else f"{'-':>10}"
        out.append(f"  {name:<50}" + " ".join(cells) + ratio)
    if not shared:
        out.append(f"  (aiter's and FlyDSL's kernels are read from {V.AL.SHARED.parent}, which is not here)")
    return "\n".join(out)


if __name__ == "__main__":
    raise SystemExit(main())
