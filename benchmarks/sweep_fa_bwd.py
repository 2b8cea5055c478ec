"""Sweep grids of the attention backward's dQ/dK/dV kernel (kernels/fa_bwd.py), and the script that
writes benchmarks/sweep_fa_bwd.md.

    flyasm sweep benchmarks/sweep_fa_bwd.py:ONE_OFF_A16 --model perf -o out/sweep_bwd --top 3   # any grid
    python3 benchmarks/sweep_fa_bwd.py [--top 3] [--jobs 1] [--grid NAME ...]                 # the table

Grids (keyword parameters of fa_bwd.build() plus the problem shape; bf16, batch mode): the default and
each lever moved alone over the values it builds with, for each mode of aiter's call and two shapes:
  ONE_OFF_A16 / ONE_OFF_A16_CAUSAL / ONE_OFF_A32 / ONE_OFF_A32_CAUSAL   (atomic16 / atomic32 dQ,
                                                                       no mask / causal top-left)
at aiter's figure shape (batch 8, 64/8 heads, seqlen 8192), and the same names + _B16 at batch 16,
64 heads, seqlen 8192; HEAD_<mode>[_B16]: the default and the levers of HEADLINE only (a re-run on a
new model); COMBO_<mode>[_B16]: the default and the pairs of COMBOS. The levers (fa_bwd's docstring): the schedule's AHEAD (MFMAs the LDS operands are read
ahead), WAIT_SPAN, DMA_SPREAD, STATS_SPREAD, REREAD_DV, DQ_EVERY, BARRIER_EARLY, NEXT_EARLY, NEXT_K,
FEED_FIT, FEED_CARRY, SLOT (issue cycles the shadow gets under each MFMA; 0: the softmax, dS, DMAs
and atomics between the MFMAs instead of under them), XCD_MAP (each XCD runs whole heads), and
fold_scale (numerics: the softmax scale folded into P). A value is in a grid when the kernel builds
with it (ahead 6, stats_spread 3, dq_every 4, next_early 0, next_k 4 do not).
workload(): the dq/dk/dv launch aiter's host code packs for the shape (benchmarks/aiter_bwd_launch.
row_call: recorded at batch 1, one head, seqlen 1024, the query loop scaled; the bytes and grid do
not depend on which kernel runs); FLOPs of the whole call (2 B Hq S^2 (3 d + 2 d), halved when
causal). verify(): the variant as the dq/dk/dv stage of one call through the backward harness (our
pre and post kernels) at a small ragged GQA shape, against torch autograd within
tests/attn_bwd_ref.py's bounds (the B16 grids' kernels are the same bytes: their verification is the
figure-shape grid's, not run again).
The table: each variant's main-kernel time, its change against the default, the whole call's time
(our pre and post kernels priced by benchmarks/vs_aiter_bwd.py's Pricer) and aiter's whole call /
ours. The analysis in the .md between the NOTES markers is kept when the file is rewritten.
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "kernels"
sys.path[:0] = [str(ROOT), str(KERNELS), str(ROOT / "benchmarks"), str(ROOT / "tests")]
import fa_bwd  # noqa: E402

SOURCES = [KERNELS]
SHAPES = {"FIG": dict(batch=8, nhead_q=64, nhead_k=8, seqlen=8192),      # aiter's figure shape
          "B16": dict(batch=16, nhead_q=64, nhead_k=64, seqlen=8192)}
BASE = dict(dtype="bf16", group=False)
MODES = {"A16": dict(mask=0, atomic32=False), "A16_CAUSAL": dict(mask=1, atomic32=False),
         "A32": dict(mask=0, atomic32=True), "A32_CAUSAL": dict(mask=1, atomic32=True)}
# each lever over the values it builds with, the others at their defaults (ahead 4, wait_span 2,
# dma_spread 2, stats_spread 1, reread_dv, dq_every 2, barrier_early 1, next_early 1, next_k 2,
# feed_fit off, feed_carry 0, slot 28, fold_scale (bf16), xcd_map off)
VALUES = dict(ahead=(2, 3, 5), wait_span=(1, 3, 4), dma_spread=(0, 1, 3, 4), stats_spread=(0, 2),
              reread_dv=(False,), dq_every=(1, 3), barrier_early=(0, 2, 3), next_early=(2, 3), next_k=(0, 1, 3),
              feed_fit=(True,), feed_carry=(4, 12, 24), slot=(0, 16, 20, 24, 32, 40), fold_scale=(False,),
              xcd_map=(True,))
ONE_OFF = [{}] + [{n: x} for n, xs in VALUES.items() for x in xs]
# the rows a re-run on a new model starts from: the default, the interleave's baseline (slot 0), the
# placement lever, a weak and the strongest move of the one-off grids, the best pair for causal a16
HEADLINE = [{}, dict(slot=0), dict(xcd_map=True), dict(ahead=3), dict(next_early=3), dict(next_early=3, next_k=1)]
# pairs and triples of the one-off grids' causal a16 gains (next_early, next_k, barrier_early)
COMBOS = [{}, dict(next_early=3, barrier_early=2), dict(next_early=3, next_k=1),
          dict(next_early=2, next_k=1, barrier_early=2), dict(next_early=3, next_k=1, barrier_early=2)]
GRIDS = []
for _shape in SHAPES:
    for _mode, _kw in MODES.items():
        for _family, _levers in (("ONE_OFF", ONE_OFF), ("HEAD", HEADLINE), ("COMBO", COMBOS)):
            _name = f"{_family}_{_mode}" + ("" if _shape == "FIG" else f"_{_shape}")
            globals()[_name] = [dict(BASE, **_kw, **d, shape=_shape) for d in _levers]
            GRIDS += [_name] if _family == "ONE_OFF" else []
VARIANTS = ONE_OFF_A16  # noqa: F821 (made above)


def build(shape="FIG", **params):
    """fa_bwd.build; shape only selects workload()'s problem (and keys the sweep cache by it)."""
    return fa_bwd.build(**params)


def _row(shape, mask, atomic32):
    from vs_aiter_bwd import row_of
    return row_of(*(SHAPES[shape][n] for n in ("batch", "nhead_q", "nhead_k", "seqlen")), mask, int(atomic32))


def workload(shape="FIG", mask=0, atomic32=False, dtype="bf16", **_):
    import aiter_bwd_launch as BL
    call = BL.row_call(_row(shape, mask, atomic32))
    main = next(ln for ln in call["launches"] if ln["stage"] == "dqdkdv")
    spec = {k: main[k] for k in ("grid", "block", "kernarg", "buffers", "trace_grid", "loop_scale", "dram_bytes")}
    sh = SHAPES[shape]

    def launch(kern):
        return {**spec, **({"wg_map": kern.wg_map} if getattr(kern, "wg_map", None) else {})}
    return {"flops": call["flops"], "launch": launch,
            "label": f"{dtype} B{sh['batch']} H{sh['nhead_q']}/{sh['nhead_k']} S{sh['seqlen']} D128 "
                     f"{'a32' if atomic32 else 'a16'}{' causal' if mask else ''}"}


def verify(kernel, seed, mask=0, atomic32=False, group=False, dtype="bf16", **_):
    """One call (batch 1, 4/2 heads, Sq 200, Sk 300) with the variant as the dq/dk/dv stage."""
    import math

    import aiter_launch as AL
    import torch
    from attn_bwd_ref import bounds, grads
    from flyasm.dispatch import _attention_bwd_set_dir
    g = torch.Generator().manual_seed(seed)
    dt = {"bf16": torch.bfloat16, "fp16": torch.float16, "f16": torch.float16}[dtype]
    sq, sk, hq, hk = 200, 300, 4, 2
    q, do = (torch.randn(1, sq, hq, 128, generator=g).to(dt) for _ in range(2))
    k, v = (torch.randn(1, sk, hk, 128, generator=g).to(dt) for _ in range(2))
    scale = 1 / math.sqrt(128)
    ref = grads(q[0], k[0], v[0], do[0], scale, mask)
    o, lse = ref["o"][None].to(dt), ref["lse"][None].float()
    res = AL.run_bwd_call(_attention_bwd_set_dir(), q, k, v, o, do, lse, main=kernel, mask_type=mask,
                          atomic32=int(atomic32), scale=scale)
    bd = bounds(q[0], k[0], v[0], o[0], do[0], lse[0], ref, scale, None if atomic32 else -(-sk // 256))
    worst, err = 0.0, 0.0
    for n in ("dq", "dk", "dv"):
        e = (res[n][0].double() - ref[n]).abs().nan_to_num(float("inf"))
        err, worst = max(err, float(e.max())), max(worst, float((e / bd[n]).max()))
    return {"ok": worst <= 1.0, "max_err": err, "tol": "attn_bwd_ref bounds", "worst_err_over_bound": worst,
            "shape": f"B1 Hq{hq} Hkv{hk} Sq{sq} Sk{sk}"}


# ---- the table in benchmarks/ -------------------------------------------------------------------
def lever_of(params: dict) -> str:
    """The lever a one-off variant changes ('default' for none)."""
    diff = {k: v for k, v in params.items() if k not in BASE and k not in ("mask", "atomic32", "shape")}
    return ", ".join(f"{k}={v}" for k, v in diff.items()) or "default"


def call_terms(shape: str, mode: str) -> dict:
    """Our pre + post kernels and aiter's whole call at the shape (vs_aiter_bwd's pricing), µs."""
    import vs_aiter_bwd as VS
    from flyasm.dispatch import _attention_bwd_set_dir
    from flyasm.perf import params as P
    pr = VS.Pricer(P.load())
    row = _row(shape, **MODES[mode])
    ours, _ = pr.call(row, _attention_bwd_set_dir())
    theirs, _ = pr.call(row)
    pr.save()
    return {"rest": VS.total(ours) - VS.main_us(ours), "aiter": VS.total(theirs), "aiter_main": VS.main_us(theirs)}


def grid_section(grid: str, res, terms: dict, checked: dict) -> tuple[list[str], dict]:
    """Markdown lines of one grid's table and {lever: its main-kernel time / the default's − 1};
    checked: {lever: (verified, max err / bound)} of the same kernels verified in another grid."""
    base = next((r for r in res.rows if lever_of(r.params) == "default"), None)   # (build() takes **levers:
    # flyasm.sweep cannot tell the defaults from its signature)
    b_us = base.prediction.get("pred_us") if base else None
    if not b_us:
        raise SystemExit(f"{grid}: the default variant did not build or price: {base and base.error}")
    lines = [f"### {grid}: {res.rows[0].workload} ({len(res.rows)} variants)", "",
             f"aiter: main kernel {terms['aiter_main']:.0f} µs, whole call {terms['aiter']:.0f} µs; our pre + post "
             f"{terms['rest']:.0f} µs.", "",
             "| rank | lever | main µs | vs default | MFMA busy | call µs | aiter/ours call | check | verified "
             "| max err / bound |", "|---|---|---|---|---|---|---|---|---|---|"]
    gains = {}
    for n, r in enumerate(res.rows, 1):
        us = r.prediction.get("pred_us")
        lever = lever_of(r.params)
        check = "ok" if r.check_ok else (f"error: {r.error}" if r.error else f"{r.findings} findings")
        worst = r.verify.get("worst_err_over_bound")
        verified = r.verified
        if verified == "not-run" and lever in checked:
            verified, worst = checked[lever]
            verified = f"{verified} (figure shape)"
        err = "" if worst is None else f"{worst:.2f}"
        if not us:
            lines.append(f"| {n} | {lever} | | | | | | {check} | {verified} | |")
            continue
        gains[lever] = us / b_us - 1
        lines.append(f"| {n} | {lever} | {us:.0f} | {us / b_us - 1:+.2%} | {100 * r.prediction['mfma_util']:.1f}% | "
                     f"{us + terms['rest']:.0f} | {terms['aiter'] / (us + terms['rest']):.3f} | {check} | {verified} "
                     f"| {err} |")
    return lines + [""], gains


def ranking(gains: dict) -> list[str]:
    """Markdown: each lever's best value per grid and its change, levers ranked by their best change
    (the gain), then by their worst (what the default's value is worth); then every value's change in
    every grid."""
    cols = list(gains)
    values = sorted({lv for g in gains.values() for lv in g} - {"default"},
                    key=lambda lv: min(g.get(lv, 1.0) for g in gains.values()))
    by_lever: dict = {}
    for lv in values:
        by_lever.setdefault(lv.split("=")[0] if lv.count("=") == 1 else lv, []).append(lv)
    rows = []
    for name, lvs in by_lever.items():
        cells = []
        for c in cols:
            have = [lv for lv in lvs if lv in gains[c]]
            b = min(have, key=lambda lv: gains[c][lv]) if have else None
            cells.append("" if not b else f"{gains[c][b]:+.2%}" if b == name else f"{b.split('=')[1]}: {gains[c][b]:+.2%}")
        changes = [g[lv] for g in gains.values() for lv in lvs if lv in g]
        rows.append((min(changes), max(changes), f"| {name} | {min(changes):+.2%} | {max(changes):+.2%} | "
                     + " | ".join(cells) + " |"))
    out = ["| lever | best change | worst change | " + " | ".join(cols) + " |", "|---|---|---|" + "---|" * len(cols)]
    out += [r[2] for r in sorted(rows, key=lambda r: (round(r[0], 4), -r[1]))]
    out += ["", "Every value (variant / default − 1 of the main kernel):", "",
            "| value | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    out += [f"| {lv} | " + " | ".join(f"{g[lv]:+.2%}" if lv in g else "" for g in gains.values()) + " |"
            for lv in values]
    return out


NOTES = ("<!-- NOTES -->", "<!-- /NOTES -->")


def main(argv=None) -> int:
    import argparse
    import subprocess
    import time

    from flyasm.sweep import run_sweep
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top", type=int, default=3, help="best variants verified in the emulator per figure-shape grid")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out", default=str(Path(__file__).with_suffix(".md")))
    ap.add_argument("--grid", action="append", help="these grids only (default: every ONE_OFF grid)")
    args = ap.parse_args(argv)
    rev = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True,
                         text=True).stdout.strip() or "unknown"
    grids = args.grid or list(GRIDS)
    grids.sort(key=lambda g: g.endswith("_B16"))        # the figure shape first: its verifications serve both
    sections, gains, checked = [], {}, {}
    t0 = time.time()
    for grid in grids:
        shape = "B16" if grid.endswith("_B16") else "FIG"
        mode = grid.removesuffix("_B16").removeprefix("ONE_OFF_").removeprefix("HEAD_").removeprefix("COMBO_")
        res = run_sweep(f"{__file__}:{grid}", None, top=args.top if shape == "FIG" else 0, jobs=args.jobs,
                        model="perf")
        mine = checked.setdefault(mode, {})
        mine.update({lever_of(r.params): (r.verified, r.verify.get("worst_err_over_bound"))
                     for r in res.rows if r.verified != "not-run"})
        lines, g = grid_section(grid, res, call_terms(shape, mode), mine)
        gains.setdefault(mode if shape == "FIG" else f"{mode} B16", {}).update(g)   # a mode's grids: one column
        sections += lines
        print("\n".join(lines), flush=True)
    out = Path(args.out)
    old = out.read_text() if out.is_file() else ""
    notes = old[old.index(NOTES[0]):old.index(NOTES[1]) + len(NOTES[1])] if NOTES[1] in old else "\n".join(NOTES)
    cmd = "python3 benchmarks/sweep_fa_bwd.py" + "".join(f" --grid {g}" for g in args.grid or ()) + \
        f" --top {args.top} --jobs {args.jobs}"
    text = ["# fa_bwd lever sweep (perf model: a prediction, not a measurement)", "",
            f"Sources at {rev}. Regenerate: `{cmd}` (cached by content: a rerun only builds what changed; "
            f"this run {time.time() - t0:.0f} s). FIG = aiter's figure shape, batch 8, 64/8 heads, seqlen 8192; "
            "B16 = batch 16, 64 heads, seqlen 8192; bf16, head dim 128.", "",
            "## Each lever moved alone (main-kernel time: variant / default − 1; negative = the variant is faster)",
            "", "Levers ranked by their best change over the grids (the gain), then by their worst (what the "
            "default's value is worth); per grid the lever's best value and its change.", ""]
    text += ranking(gains) + ["", notes, "", "## The grids", ""] + sections
    out.write_text("\n".join(text) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
