"""Where the model puts a short row's time: each attention row at seqlen <= --max-seqlen, simulated
as model_accuracy.py prices it, broken down (issue 20, short sequences).

    python3 benchmarks/short_rows.py TABLE [...] [--max-seqlen 1024] [--set NAME=VALUE]
                                     [--experiment reads-at-hbm-share]

Per row: measured and predicted us (shipped params.json, nothing refitted), the grid, workgroups a
CU slot runs (rounds), each sampled work item's cycles with its MFMA-pipe cycles per SIMD, the
dispatch makespan against a perfect balance (every slot the same share of the summed durations),
the fraction of CU slots busy and the clock it sets. Then, for rows measured in the same run, the
predicted speed ratio against the measured one, as priced and with the makespan replaced by the
perfect balance (what in-order dispatch costs the ratio).

--experiment reads-at-hbm-share: every VMEM load also queues for the CU's share of HBM (as stores
do, perf.cu), the upper bound of a round whose workgroups all start, and so all read, at once (L2 and
MALL hits priced as HBM reads too).
--experiment coresident-steady: co-resident workgroups out of step, as they are once the first ones
have ended, instead of in lockstep (perf.model starts them wg_stagger apart): each of a CU run's
slots runs copies back to back, slot g offset by g/R of a duration, and a sample's duration is that
of the middle copies (iterated to a fixed point).
--experiment tail-drain: prints, beside the makespan, the one where a workgroup left alone on its
CU when no more are queued runs at its alone speed (its co-resident copies dispatched far apart),
per CU, not per slot.
Experiments, not the model: the numbers of the rejected and open hypotheses in model_accuracy.md's
short-sequence sections.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import measured as MR  # noqa: E402
from flyasm.perf import cu  # noqa: E402
from flyasm.perf import model as M  # noqa: E402
from flyasm.perf import placement  # noqa: E402
from flyasm.perf import params as P  # noqa: E402
from flyasm.perf.model import finish, occupancy_of  # noqa: E402
from model_accuracy import simulate_launch, with_setting  # noqa: E402


def reads_at_hbm_share() -> None:
    """The experiment: perf.cu treats every plain VMEM load as it treats a store (after the port, its
    bytes queue for the CU's share of HBM)."""
    of = cu.Static.of.__func__

    def patched(cls, program, p):
        st = of(cls, program, p)
        st.store = [s or (k == "vmem" and not a and program.insts[i].info.get("mem") == "load")
                    for i, (s, k, a) in enumerate(zip(st.store, st.kind, st.atomic))]
        return st
    cu.Static.of = classmethod(patched)


def coresident_steady() -> None:
    """The experiment: perf.model's CU runs of R >= 2 co-resident workgroups take the duration of
    copies in steady state (slot g runs copies back to back from g D / R; D iterated to 1%)."""
    real = M.simulate

    def steady(program, static, workgroups, simd_of, p, starts=None):
        r0 = real(program, static, workgroups, simd_of, p, starts)
        R = len(workgroups)
        if R < 2:
            return r0
        D = float(np.mean(np.subtract(r0.wg_end, r0.wg_start)))
        copies = 3                                      # the middle one is in steady state
        for _ in range(4):
            st = [int(g * D / R + k * D) for k in range(copies) for g in range(R)]
            r = real(program, static, workgroups * copies, simd_of * copies, p, st)
            D, last = float(np.mean(np.subtract(r.wg_end, r.wg_start)[R:-R])), D
            if abs(D - last) < 0.01 * last:
                break
        r0.wg_end = [s + D for s in r0.wg_start]
        return r0
    M.simulate = steady


def drain_makespan(d: np.ndarray, alone: np.ndarray, n_xcd: int, cus: int, R: int) -> float:
    """In-order dispatch per XCD (workgroup i to XCD i mod n_xcd, the next one to a CU with a free
    slot, the CUs filled round-robin first), where a workgroup progresses at rate 1 with R on its CU and
    d / alone when alone (linear in between): the makespan once the tail's CUs empty."""
    end = 0.0
    for x in range(min(n_xcd, len(d))):
        idx = np.arange(x, len(d), n_xcd)
        queue = [[float(d[i]), float(alone[i] / d[i])] for i in idx][::-1]   # [work left, alone/shared]
        on = [[] for _ in range(cus)]
        for _ in range(R):
            for c in range(cus):
                if queue:
                    on[c].append(queue.pop())
        t = 0.0

        def rate(c, w):
            k = len(on[c])
            return 1.0 if k >= R else 1.0 / (w[1] + (1.0 - w[1]) * (k - 1) / (R - 1))
        while any(on):
            dt, c0, w0 = min((w[0] / rate(c, w), c, id(w)) for c in range(cus) for w in on[c])
            for c in range(cus):
                rs = [rate(c, w) for w in on[c]]
                for w, r in zip(on[c], rs):
                    w[0] -= dt * r
            t += dt
            on = [[w for w in ws if w[0] > 1e-9 and id(w) != w0] for ws in on]
            for c in [c0] + [c for c in range(cus) if c != c0]:       # ties: every freed slot refills
                while queue and len(on[c]) < R:
                    on[c].append(queue.pop())
        end = max(end, t)
    return end


def with_makespan(run, cycles: float, active: float):
    """The GridRun `run` with another makespan and busy fraction (what finish prices)."""
    return run.__class__(int(np.ceil(cycles)), run.grid, run.resident, run.samples, run.simd, run.stalls,
                         run.program, active)


def breakdown(L: dict, p: P.Params) -> dict:
    """The GridRun of one launch (model_accuracy.simulate_launch, uncached) and what it is made of."""
    run = simulate_launch(L, p)
    g = run.grid
    threads = int(np.prod(L["block"])) if not isinstance(L["block"], int) else L["block"]
    n_wg = g[0] * g[1] * g[2]
    slots = p.n_cu * run.resident
    # the durations over the grid, summed: work items between samples are linear along the tile axis
    # (model.py), so the mean of the sampled line times the count is the sum when the samples are the
    # tile axis's ends and middle; the model's active fraction gives it exactly
    summed = run.active * slots * run.cycles
    return dict(run=run, grid=g, n_wg=n_wg, occupancy=occupancy_of(L["co"], run.program.name, threads),
                rounds=n_wg / slots, balanced=summed / slots,
                mfma=max(v["mfma"] for v in run.simd.values()) * max(run.samples.values()) if run.simd else 0.0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tables", nargs="+")
    ap.add_argument("--max-seqlen", type=int, default=1024)
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    ap.add_argument("--experiment", choices=["reads-at-hbm-share", "coresident-steady", "tail-drain"])
    a = ap.parse_args(argv)
    p = P.load()
    for item in a.set:
        p = with_setting(p, item, ap.error)
    if a.experiment == "reads-at-hbm-share":
        reads_at_hbm_share()
        print("experiment: every VMEM load queues for the CU's HBM share")
    if a.experiment == "coresident-steady":
        coresident_steady()
        print("experiment: co-resident workgroups in steady state, out of step")
    durations = []
    if a.experiment == "tail-drain":              # the durations of each launch's final dispatch
        dispatch = placement.dispatch

        def recorded(d, n_xcd, slots):
            durations.append(np.array(d, float))
            return dispatch(d, n_xcd, slots)
        placement.dispatch = recorded
    idx = MR.co_index()
    entries = MR.read_tables(a.tables, ap.error)
    rows = []
    for table, kind, r in entries:
        if kind != "fmha" or int(r["seqlen_q"]) > a.max_seqlen:
            continue
        call = MR.row_call(kind, r, idx)
        L = call["launches"][0]
        b = breakdown(L, p)
        run = b["run"]
        pred = finish(run, L["dram_bytes"], p, call["flops"])
        bal = finish(with_makespan(run, b["balanced"], 1.0), L["dram_bytes"], p)
        meas = float(r["us"])
        who = MR.author(r)
        name = str(L.get("build") or r.get("co_name") or r.get("kernelName")).removesuffix(".co")
        rows.append(dict(run_id=r.get("run") or "", who=who, us=meas, pred=pred.us, bal=bal.us))
        print(f"{who} {name} B{r['batch']} H{r['nhead_q']}/{r['nhead_k']} S{r['seqlen_q']}: measured {meas:.2f} us, "
              f"predicted {pred.us:.2f} ({pred.us / meas - 1:+.1%})")
        print(f"    grid {b['grid']} = {b['n_wg']} workgroups, {b['occupancy']} a CU, {b['rounds']:.2f} a slot; "
              f"sampled cycles {sorted(set(round(v) for v in run.samples.values()))}, MFMA pipe "
              f"{b['mfma']:.0f} cycles a SIMD in the longest")
        print(f"    makespan {run.cycles} cycles, perfect balance {b['balanced']:.0f} "
              f"({run.cycles / b['balanced'] - 1:+.1%}); busy {run.active:.3f}, clock {p.clock_mhz(run.active):.0f} MHz; "
              f"balanced: {bal.us:.2f} us ({bal.us / meas - 1:+.1%})")
        if a.experiment == "tail-drain" and run.resident > 1:
            shared = durations[-1]
            breakdown(L, p.with_(wg_stagger=10 ** 8))   # the same launch, its co-resident copies apart
            drained = drain_makespan(shared, durations[-1], p.n_xcd, p.n_cu // p.n_xcd, run.resident)
            us = finish(with_makespan(run, drained, run.active), L["dram_bytes"], p).us
            print(f"    tail drained alone per CU: makespan {drained:.0f} cycles ({drained / run.cycles - 1:+.1%}), "
                  f"{us:.2f} us ({us / meas - 1:+.1%})")
    by_run: dict = {}
    for x in rows:
        if x["run_id"]:
            by_run.setdefault(x["run_id"], []).append(x)
    for rid, xs in by_run.items():
        for i in range(len(xs)):
            for j in range(i + 1, len(xs)):
                f, s = xs[i], xs[j]
                m, pr, pb = s["us"] / f["us"], s["pred"] / f["pred"], s["bal"] / f["bal"]
                print(f"run {rid}: {f['who']} over {s['who']} speed ratio measured {m:.3f}, predicted {pr:.3f} "
                      f"({pr / m - 1:+.1%}), with both makespans at a perfect balance {pb:.3f} ({pb / m - 1:+.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
