"""The bf16 hd192/hd128 forward's loop variants on the CU timing model (benchmarks/fa_hd192_model.md).

    python3 benchmarks/fa_hd192_variants.py [none] [causal]     # batch keys, default: both masks

Each variant is built (checked) with K/V LDS depth set through fa_layouts.GEOMETRY[192] (k_stages,
v_stages) and the loop through fa_fwd.build(split=...), written as a one-key set and priced by
fa_keys_model.price at issue 12's shape (batch 16, 64 Q / 64 K/V heads, seqlen 8192). A model,
not a measurement.
"""
from __future__ import annotations

import dataclasses
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks"), str(ROOT / "kernels")]
import fa_fwd  # noqa: E402
import fa_fwd_set  # noqa: E402
import fa_keys_model  # noqa: E402
from flyasm.dispatch import manifest_text  # noqa: E402

VARIANTS = {                       # name: (Geometry overrides, build() keywords)
    "unsplit, K and V 2 deep": (dict(k_stages=2, v_stages=2), dict(split=False)),
    "split, K and V 2 deep": (dict(k_stages=2, v_stages=2), {}),
    "split, K 4 deep, V 2 (default)": ({}, {}),
    "split, K and V 3 deep": (dict(k_stages=3, v_stages=3), {}),
}
SHAPE = (16, 64, 64, 8192)


def one_key_set(out: Path, causal: bool, geometry: dict, build: dict) -> dict:
    """Build the variant into out (its .co and fmha_fwd.csv); the manifest row, as csv reads it."""
    base = fa_fwd.L.GEOMETRY[192]
    fa_fwd.L.GEOMETRY[192] = dataclasses.replace(base, **geometry)
    try:
        co = fa_fwd.build("bf16", causal, aiter_args=True, head_dim=192, **build).build().co
    finally:
        fa_fwd.L.GEOMETRY[192] = base
    row = fa_fwd_set.manifest_row("bf16", causal=causal, head_dim=192)
    out.mkdir(parents=True, exist_ok=True)
    (out / row["co_name"]).write_bytes(co)
    (out / fa_fwd_set.MANIFEST).write_text(manifest_text([row], columns=list(row)))
    return {k: str(v) for k, v in row.items()}


def main(argv=None) -> int:
    masks = [m == "causal" for m in (argv if argv is not None else sys.argv[1:])] or [False, True]
    print(f"bf16 hd192/hd128, batch mode, shape {SHAPE} (batch, heads q, heads k/v, seqlen)")
    with tempfile.TemporaryDirectory() as tmp:
        for causal in masks:
            for i, (name, (geometry, build)) in enumerate(VARIANTS.items()):
                t0 = time.time()
                d = Path(tmp) / f"{int(causal)}_{i}"
                r = fa_keys_model.price(str(d), one_key_set(d, causal, geometry, build), SHAPE)
                print(f"{'causal' if causal else 'none':6} {name:32} {r['us']:9.0f} us {r['tflops']:7.1f} TFLOPS "
                      f"MFMA {r['mfma_busy']:.0%} VALU {r['valu_busy']:.0%} ({time.time() - t0:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
