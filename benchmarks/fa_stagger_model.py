"""Static cycle model of fa_fwd, the unsplit loop vs stagger=True, side by side (a model, not a measurement).

    python benchmarks/fa_stagger_model.py [--causal] [--dtype bf16|f16] [--json]

flyasm.report.model models ONE wave alone on its SIMD.  The staggered kernel has two loop copies
(group A = waves 0-3: the unsplit loop body, build(split=False); group B = waves 4-7: V read into VGPRs before the 2nd
barrier, PV MFMAs without LDS reads in their shadow), so the model gives each group's per-wave cost.
It cannot show what staggering is for -- group A's PV MFMAs running beside group B's softmax VALU on
the SIMD the two waves share (w and w+4) -- because it has no second wave, no issue arbitration
and treats s_barrier as free; only silicon (benchmarks/silicon.py) can measure that.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "kernels"))

import fa_fwd  # noqa: E402
from flyasm.report.model import ASSUMPTIONS, model  # noqa: E402

GROUP = {".Lloop": "A (waves 0-3)", ".Lloop_b": "B (waves 4-7)"}
KEYS = ["instructions", "cycles", "mfma_busy", "utilisation", "non_mfma_issue", "nop_cycles"]


def rows(causal: bool, dtype: str) -> list[dict]:
    out = []
    # stagger staggers the unsplit loop (the split/ping-pong default has its own four-phase schedule),
    # so the baseline is build(split=False): group A must model identically to it
    for stagger in (False, True):
        d = model(fa_fwd.build(dtype, causal, 8, 2, stagger=stagger, split=None if stagger else False))
        for sp in d["spans"]:
            r = {"kernel": d["name"], "stagger": stagger,
                 "loop": sp["name"], "group": GROUP[sp["name"]] if stagger else "all 8 waves (split=False)"}
            r.update({k: sp[k] for k in KEYS})
            r.update({f"stall_{k}": v for k, v in sp["stalls"].items()})
            r["ds_read_issue"] = sp["issue_cycles"].get("ds_read", 0)
            out.append(r)
    return out


def main(argv: list[str]) -> int:
    causal = "--causal" in argv
    dtype = argv[argv.index("--dtype") + 1] if "--dtype" in argv else "bf16"
    rs = rows(causal, dtype)
    if "--json" in argv:
        print(json.dumps({"kind": "static model (not a measurement)", "assumptions": ASSUMPTIONS, "rows": rs},
                         indent=2))
        return 0
    print("STATIC CYCLE MODEL (one wave alone on its SIMD; not a measurement). Loop body = 2 KV steps "
          "(128 keys), steady state.")
    cols = ["group", "instructions", "cycles", "mfma_busy", "utilisation", "non_mfma_issue", "ds_read_issue",
            "stall_mfma_pipe", "stall_lgkmcnt", "stall_vmcnt"]
    print(f"{'variant':<10}" + "".join(f"{c:>16}" for c in cols))
    for r in rs:
        cells = [f"{100 * r[c]:.1f}%" if c == "utilisation" else str(r[c]) for c in cols]
        print(f"{'stagger' if r['stagger'] else 'unsplit':<10}" + "".join(f"{c:>16}" for c in cells))
    base = rs[0]["cycles"]
    for r in rs[1:]:
        print(f"group {r['group']}: {r['cycles'] / base:.3f}x the unsplit per-wave loop time in this model")
    print("The model cannot show the cross-group overlap staggering aims at (no second wave, no issue "
          "arbitration, s_barrier free); measure on silicon.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
