"""Text report of a prediction: time, TFLOPS, per-SIMD utilisation and idle causes, and the
instructions that stalled longest (with the builder line from `.loc` when the program has it)."""
from __future__ import annotations

from .cu import CAUSES
from .params import FITTED, FITTED_SIMULATED, Params


def format_prediction(pred, p: Params, top: int = 15) -> str:
    out = [f"predicted {pred.us:.2f} us" + (f", {pred.tflops:.0f} TFLOPS" if pred.tflops else "") +
           f"  (compute {pred.compute_us:.2f} us = {pred.cycles} cycles at {p.clock_mhz(pred.active) / 1e3:.3g} GHz "
           f"with {pred.active:.0%} of the CUs busy; "
           f"DRAM {pred.dram_us:.2f} us; launch {pred.launch_us:.2f} us)",
           f"grid {pred.grid}, {pred.resident} workgroup(s) resident per CU over {p.n_cu} CUs; sampled workgroups "
           f"(x,y,z of the recorded grid: cycles) " + ", ".join(f"{w}: {d:.0f}" for w, d in sorted(pred.samples.items())),
           "fitted constants: " + ", ".join(f"{n}={getattr(p, n):.3g}" for n in FITTED + FITTED_SIMULATED),
           "", "per SIMD of the longest sample (fraction of its cycles):",
           f"{'simd':<6}{'mfma':>7}{'valu':>7}  idle by cause"]
    for s, row in sorted(pred.simd.items()):
        idle = ", ".join(f"{k[5:]} {v:.0%}" for k, v in sorted(row.items(), key=lambda kv: -kv[1])
                         if k.startswith("idle_") and v >= 0.005)
        out.append(f"{s:<6}{row['mfma']:>7.0%}{row['valu']:>7.0%}  {idle}")
    out += ["", f"stalls (cycles a wave waited before issuing, summed over the sample's waves), top {top}:",
            f"{'pc':>6} {'issued':>7} {'stall':>8}  {'cause':<28} instruction  [source]"]
    for i, pc, text, loc, row in pred.stalls[:top]:
        total = sum(row[c] for c in CAUSES)
        if not total:
            break
        cause = ", ".join(f"{c} {row[c]}" for c in sorted(CAUSES, key=lambda c: -row[c])[:2] if row[c])
        out.append(f"{(pc or 0):>6x} {row['issued']:>7} {total:>8}  {cause:<28} {text}" + (f"  [{loc}]" if loc else ""))
    return "\n".join(out)
