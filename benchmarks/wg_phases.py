"""Where a sampled workgroup's cycles go in the CU model, phase by phase (issue 20: why a kernel is
priced slow or fast at a short sequence).

    python3 benchmarks/wg_phases.py TABLE [...] [--max-seqlen 512] [--row TEXT] [--set NAME=VALUE]

For each attention row at seqlen <= --max-seqlen (and whose name contains every --row TEXT), the row
is simulated as model_accuracy.py prices it (short_rows.breakdown), and every CU run perf.model makes
of a sampled workgroup's *recorded* stream with every read at vmem_latency (the x1 run the model
scales loops and places reads from) is broken down per wave:
  * phases by stream position: prologue (before the wave's first MFMA), main (first MFMA to last),
    epilogue (after the last MFMA); an instruction executed in more than one phase counts in the
    latest (a loop head visited before the first MFMA is main);
  * per phase, cycles of the wave's own issue (by category; s_nop N is N+1 issue turns) and cycles it
    stalled (by cause, perf.cu.CAUSES), from the run's per-instruction stall table: their sum is the
    wave's span from its start to its last issue;
  * the s_waitcnt and s_barrier that stall longest, with the memory operations each s_waitcnt waits
    for per execution (replayed from the streams: vmcnt counts VMEM in order, lgkmcnt LDS and SMEM);
  * each memory instruction's 128-byte lines and active bytes (what the CU's memory port prices);
  * the main loop (the target of the most backward jumps): its head's visits, main-phase cycles a visit.
Numbers are per wave, averaged over the waves of the run (co-resident copies included).
"""
from __future__ import annotations

import argparse
import collections
import hashlib
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import measured as MR  # noqa: E402
from flyasm.perf import cu  # noqa: E402
from flyasm.perf import model as M  # noqa: E402
from flyasm.perf import params as P  # noqa: E402
from flyasm.perf.trace import loop_head  # noqa: E402
from model_accuracy import with_setting  # noqa: E402
from short_rows import breakdown  # noqa: E402

PHASES = ("prologue", "main", "epilogue")
MEMORY = ("vmem", "ds", "smem")


def recorded_runs(L: dict, p: P.Params) -> tuple[list, object]:
    """(the CU runs perf.model makes for launch L, each (wave streams of every co-resident workgroup,
    CUResult)), the breakdown of L (short_rows.breakdown). The runs are caught at perf.model's call of
    perf.cu.simulate, uncached."""
    caught = []
    real = M.simulate

    def catch(program, static, workgroups, simd_of, params, starts=None):
        r = real(program, static, workgroups, simd_of, params, starts)
        caught.append((workgroups, r, static))
        return r
    M._RUN_CACHE.clear()
    M._SIM_CACHE.clear()
    M.simulate = catch
    try:
        b = breakdown(L, p)
    finally:
        M.simulate = real
    return caught, b


def is_recorded(workgroups, vmem_latency: int, recorded: set) -> bool:
    """A run of recorded streams (not loop-scaled) with every read at vmem_latency."""
    for w in workgroups[0]:
        if _digest(w) not in recorded:
            return False
        lat = w.get("lat")
        if lat is not None and len(lat) and np.any((lat != vmem_latency) & (w["lines"] > 0)):
            return False
    return True


def _digest(w: dict) -> str:
    return hashlib.sha1(w["pc"].tobytes() + w["cost"].tobytes()).hexdigest()


def phase_of(streams: list) -> dict:
    """{instruction index: phase} over the waves' streams (PHASES; the latest phase an index runs in)."""
    out: dict = {}
    for w, kinds in streams:
        pc = w["pc"]
        mf = np.flatnonzero(kinds[pc] == "mfma")
        first, last = (mf[0], mf[-1]) if len(mf) else (len(pc), len(pc))
        ph = np.where(np.arange(len(pc)) < first, 0, np.where(np.arange(len(pc)) > last, 2, 1))
        for i, k in zip(pc.tolist(), ph.tolist()):
            out[i] = max(out.get(i, 0), k)
    return {i: PHASES[k] for i, k in out.items()}


def awaited(pc, kinds, waits, names) -> dict:
    """{s_waitcnt index: Counter of the instruction names it waits for}, replaying the counters over one
    stream: VMEM ops return in order (vmcnt), LDS and SMEM ops count on lgkmcnt (waited all at once)."""
    vm, lgkm = [], []
    out: dict = collections.defaultdict(collections.Counter)
    for i in pc.tolist():
        k = kinds[i]
        if k == "vmem":
            vm.append(i)
        elif k in ("ds", "smem"):
            lgkm.append(i)
        elif k == "waitcnt" and waits[i] is not None:
            vmn, lgn = waits[i]
            if len(vm) > vmn:
                out[i].update(names[j] for j in vm[:len(vm) - vmn])
                del vm[:len(vm) - vmn]
            if len(lgkm) > lgn:
                out[i].update(names[j] for j in lgkm[:len(lgkm) - lgn])
                del lgkm[:len(lgkm) - lgn]
    return out


def wave_cycles(stalls: dict, static, phase: dict, n_waves: int) -> dict:
    """{phase: (own issue cycles by category, stall cycles by cause)} per wave: each instruction's issue
    spacing (perf.cu.Static.issue; an s_nop its wait states) times its executions, and its stalls,
    summed over the run's waves and divided by their number."""
    out = {ph: (collections.Counter(), collections.Counter()) for ph in PHASES}
    for i, row in stalls.items():
        own, stall = out[phase.get(i, "main")]
        k = static.kind[i]
        own[k] += row["issued"] * (static.nops[i] if k == "nop" else static.issue[i]) / n_waves
        for c in cu.CAUSES:
            if row.get(c):
                stall[c] += row[c] / n_waves
    return out


def loop_visits(pc) -> tuple[int, int]:
    """(head, executions of it) of the loop whose head (a backward-branch target) is jumped back to
    most (trace.loop_head); (-1, 1) when the stream has no loop. A software-pipelined loop runs one key
    block a visit."""
    head, _ = loop_head(pc)
    return (-1, 1) if head is None else (head, int((pc == head).sum()))


def report(workgroups, r, static, prog, top: int = 8) -> list[str]:
    """The lines printed for one CU run."""
    kinds = np.array(static.kind, dtype=object)
    waves = [w for wg in workgroups for w in wg]
    names = [inst.name for inst in prog.insts]
    phase = phase_of([(w, kinds) for w in waves])
    per = wave_cycles(r.stalls, static, phase, len(waves))
    dur = [e - s for e, s in zip(r.wg_end, r.wg_start)]
    w0 = waves[0]["pc"]
    head, iters = loop_visits(w0)
    lines = [f"  {len(workgroups)} co-resident workgroup(s) of {len(workgroups[0])} waves, durations {dur} cycles, "
             f"{len(w0)} instructions a wave, loop head [{head}] run {iters} time(s); MFMA pipe busy "
             f"{max(b['mfma'] for b in r.busy.values())}, VALU busy {max(b['valu'] for b in r.busy.values())} "
             "cycles on the busiest SIMD"]
    for ph in PHASES:
        own, stall = per[ph]
        t_own, t_stall = sum(own.values()), sum(stall.values())
        if not t_own and not t_stall:
            continue
        extra = f", {(t_own + t_stall) / iters:.0f} a loop-head visit" if ph == "main" and iters > 1 else ""
        lines.append(f"  {ph:9s} {t_own + t_stall:8.0f} cycles a wave{extra}")
        lines.append("      own issue " + f"{t_own:6.0f}: " + ", ".join(f"{k} {v:.0f}" for k, v in own.most_common() if v >= 1))
        lines.append("      stalled   " + f"{t_stall:6.0f}: " + ", ".join(f"{k} {v:.0f}" for k, v in stall.most_common() if v >= 1))
    waits = collections.defaultdict(collections.Counter)
    for w in waves:
        for i, c in awaited(w["pc"], kinds, static.wait, names).items():
            waits[i].update(c)
    held = sorted(((sum(v for c, v in row.items() if c in cu.CAUSES), i, row) for i, row in r.stalls.items()
                   if static.kind[i] in ("waitcnt", "barrier")), reverse=True)[:top]
    lines.append("  longest waits (per wave; what an s_waitcnt waits for: operations per execution):")
    for tot, i, row in held:
        causes = {c: round(row[c] / len(waves)) for c in cu.CAUSES if row.get(c)}
        what = ", ".join(f"{n} x{c / row['issued']:.3g}" for n, c in waits.get(i, {}).items())
        lines.append(f"    [{i:5d}] {prog.insts[i].text()[:44]:44s} {phase.get(i, ''):8s} x{row['issued'] / len(waves):<4.0f} "
                     f"{tot / len(waves):7.0f} cycles {causes}" + (f"  waits for: {what}" if what else ""))
    mem = collections.defaultdict(lambda: [0, 0, 0])
    for w in waves:
        on = w["lines"] > 0
        for i, nl, nb in zip(w["pc"][on].tolist(), w["lines"][on].tolist(), w["cost"][on].tolist()):
            m = mem[names[i]]
            m[0] += 1
            m[1] += nl
            m[2] += nb
    lines.append("  memory instructions (all waves of the run): " + "; ".join(
        f"{n} x{c}: {nl * 128 >> 10} KiB of lines, {nb >> 10} KiB active" for n, (c, nl, nb) in sorted(mem.items())))
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tables", nargs="+")
    ap.add_argument("--max-seqlen", type=int, default=512)
    ap.add_argument("--row", action="append", default=[], metavar="TEXT", help="rows whose name contains TEXT")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    a = ap.parse_args(argv)
    p = P.load()
    for item in a.set:
        p = with_setting(p, item, ap.error)
    idx = MR.co_index()
    entries = MR.read_tables(a.tables, ap.error)
    from flyasm.perf.capture import capture
    from flyasm.perf.model import sample_plan
    shown = 0
    for table, kind, r in entries:
        name = MR.row_name(table, kind, r)
        if kind != "fmha" or int(r["seqlen_q"]) > a.max_seqlen or not all(t in name for t in a.row):
            continue
        L = MR.row_call(kind, r, idx)["launches"][0]
        runs, b = recorded_runs(L, p)
        tg = tuple(L["trace_grid"]) + (1,) * (3 - len(L["trace_grid"]))
        _, wgs = sample_plan(tg, L.get("tile_axis", 0), L.get("wg_map"))
        tr = capture(L["co"], tg, L["block"], L["kernarg"], L["buffers"], workgroups=wgs, kernel=L["kernel"])
        recorded = {_digest(w) for w in tr.waves}
        priced = L.get("build") or r.get("co_name")
        print(f"{name} ({priced}): measured {float(r['us']):.2f} us; sampled durations "
              f"{[round(v) for v in b['run'].samples.values()]} cycles")
        seen = set()
        for workgroups, res, static in runs:
            key = tuple(_digest(w) for w in workgroups[0])
            if key in seen or not is_recorded(workgroups, p.vmem_latency, recorded):
                continue
            seen.add(key)
            print("\n".join(report(workgroups, res, static, b["run"].program)))
        shown += 1
    if not shown:
        print("no attention row matched", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
