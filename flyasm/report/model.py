"""A static cycle MODEL of one wave running each loop body: MFMA pipe busy time versus everything
else issued in its shadow. It is arithmetic on the instruction list, not a measurement, and its
output says so. Works on any program (Kernel, .s, decoded .co).

What is modelled, and every assumption:
1. One wave alone on its SIMD; no other waves, no issue arbitration, no instruction fetch, no
   bank conflicts, no cache misses beyond the fixed latencies below. `s_barrier` costs its issue
   cycle only (the other waves are assumed to arrive at the same time).
2. MFMA: busy on the MFMA pipe for passes x 4 cycles (pass counts from the tables, LLVM
   SISchedule.td SIDPGFX950FullSpeedModel; "one pass = 4 cycles", reference notes §1.2). A new
   MFMA starts when the pipe is free. Its results are ready when it finishes.
3. Issue cost per instruction (cycles the wave spends issuing it before the next can issue):
   VALU 4 and MFMA 4 — a wave64 vector instruction runs on a 16-lane SIMD over 4 cycles (AMD GCN
   architecture whitepaper, "each SIMD16 executes a 64-wide wavefront over 4 cycles"; CDNA keeps
   the four-SIMD16 CU); TRANS 16 (ASSUMPTION: quarter rate, the GCN convention); DS, VMEM, FLAT
   4 (ASSUMPTION: like a VALU op, the 64 lanes' addresses leave over 4 cycles); SALU, SMEM,
   s_waitcnt, branches, s_setprio, s_barrier, s_endpgm 1 (ASSUMPTION); `s_nop N` N+1 (one wait
   state per cycle, notes §4.1).
4. Register dependencies: an instruction waits until every register it reads is ready. VALU/SALU
   results are ready when their issue ends. MFMA results are ready when the MFMA finishes, except
   for an MFMA whose C operand is exactly the D tuple of the MFMA that wrote it (same-C accumulate
   chain, notes §4.2 row 4): it only waits for the pipe. Memory results are not interlocked:
   waits (s_waitcnt) cover them, as on the hardware.
5. s_waitcnt: waits until the memory operations it names have completed, where an operation
   completes a fixed latency after its issue (ASSUMED latencies, table LATENCY below). Counters
   follow notes §3.4: vmcnt counts VMEM in order (incl. LDS-DMA loads and stores), lgkmcnt counts
   DS in order and SMEM out of order (only lgkmcnt(0) covers an SMEM). Only memory operations
   issued inside the same iteration are waited on: anything issued before the iteration is
   assumed complete (optimistic for loops that prefetch one iteration ahead, which is their aim).
6. Loops: the body (label .. backward branch) is run twice back to back; MFMA pipe and register
   readiness carry over, memory queues do not (item 5). The second iteration's length is the
   steady-state iteration time. A program without loops is modelled once, straight through.
7. Modelled MFMA utilisation = MFMA busy cycles / iteration cycles.

Bound: one pass over the stream per modelled iteration (two for a loop), each waitcnt
scanning the ops still in flight: O(I × ops in flight).
"""
from __future__ import annotations

from ..isa.operands import Mod, Reg, Waitcnt
from .program import Program, Span, as_program, loops
from .stats import classify, nop_wait_states

# ASSUMED completion latencies in cycles (labelled as assumptions everywhere they are printed).
LATENCY = {"vmem": 500, "ds": 64, "smem": 200}
ISSUE = {"mfma": 4, "valu": 4, "trans": 16, "ds_read": 4, "ds_write": 4, "ds_atomic": 4, "vmem_load": 4,
         "vmem_store": 4, "vmem_atomic": 4, "lds_dma": 4, "flat": 4}
ISSUE_DEFAULT = 1   # SALU, SMEM, SOPP, branches
ASSUMPTIONS = [
    "one wave alone on its SIMD; no fetch, arbitration, bank conflicts or cache effects",
    "MFMA pipe busy passes x 4 cycles (notes §1.2); results ready at the end",
    "issue cycles: VALU/MFMA 4 (wave64 on SIMD16), TRANS 16 (assumed), DS/VMEM/FLAT 4 (assumed), "
    "SALU/SMEM/SOPP/branch 1 (assumed), s_nop N = N+1",
    f"assumed latencies: VMEM {LATENCY['vmem']}, DS {LATENCY['ds']}, SMEM {LATENCY['smem']} cycles",
    "waits only on memory ops issued in the same iteration; earlier ones assumed complete",
    "steady state = 2nd of two back-to-back iterations (MFMA pipe and registers carry over)",
]


def _reg_key(op) -> tuple | None:
    op = op.base if isinstance(op, Mod) else op
    return (op.file, op.index, op.count) if isinstance(op, Reg) else None


def _wait_until(queue: list[int], keep: int | None) -> int:
    """Completion time after which at most `keep` of the queue's (in-order) ops are outstanding."""
    if keep is None or len(queue) <= keep:
        return 0
    done = queue[:len(queue) - keep]
    del queue[:len(queue) - keep]
    return max(done)


class _State:
    def __init__(self):
        self.t = 0
        self.mfma_free = 0
        self.ready: dict = {}
        self.chain_d: dict = {}   # register -> D tuple key of the MFMA that wrote it last
        self.vm: list[int] = []
        self.ds: list[int] = []
        self.smem: list[int] = []

    def new_iteration(self):
        self.vm, self.ds, self.smem = [], [], []


def _run(stream, st: _State, acc: dict) -> None:
    for inst in stream:
        cls = classify(inst)
        before = st.t
        if cls == "s_nop":
            st.t += nop_wait_states(inst)
            acc["nop"] += st.t - before
            continue
        if cls == "s_waitcnt":
            w = next((op for op in inst.operands if isinstance(op, Waitcnt)), None)
            until = 0
            if w is not None:
                vm = _wait_until(st.vm, w.vmcnt)
                lg = _wait_until(st.ds, w.lgkmcnt) if w.lgkmcnt is not None else 0
                sm = _wait_until(st.smem, 0) if w.lgkmcnt == 0 else 0
                until = max(vm, lg, sm)
                if until > st.t:
                    acc["vmcnt" if vm >= max(lg, sm) else "lgkmcnt"] += until - st.t
            st.t = max(st.t, until) + ISSUE_DEFAULT
            continue
        reads = [r for r in inst.reads if r[0] in ("v", "a", "s")]
        if cls == "mfma":
            c_key = _reg_key(inst.operands[3]) if len(inst.operands) > 3 else None
            d_key = _reg_key(inst.operands[0]) if inst.operands else None
            dep = 0
            for r in reads:
                if c_key is not None and st.chain_d.get(r) == c_key and c_key == d_key:
                    continue   # same-C accumulate chain: only the pipe orders them
                dep = max(dep, st.ready.get(r, 0))
            start = max(st.t, dep, st.mfma_free)
            if start > st.t:
                cause = "mfma_pipe" if st.mfma_free >= dep else "dependency"
                acc[cause] += start - st.t
            busy = 4 * (inst.passes or 0)
            st.mfma_free = start + busy
            for r in inst.writes:
                st.ready[r] = start + busy
                st.chain_d[r] = d_key
            acc["mfma_busy"] += busy
            acc["mfma_count"] += 1
            st.t = start + ISSUE["mfma"]
            acc["issue"]["mfma"] = acc["issue"].get("mfma", 0) + ISSUE["mfma"]
            continue
        dep = max((st.ready.get(r, 0) for r in reads), default=0)
        start = max(st.t, dep)
        if start > st.t:
            acc["dependency"] += start - st.t
        cost = ISSUE.get(cls, ISSUE_DEFAULT)
        st.t = start + cost
        acc["issue"][cls] = acc["issue"].get(cls, 0) + cost
        mem = inst.info.get("mem")
        if cls in ("vmem_load", "vmem_store", "vmem_atomic", "lds_dma") or (cls == "other" and inst.unit == "VMEM"):
            st.vm.append(start + LATENCY["vmem"])
        elif cls == "flat":
            st.vm.append(start + LATENCY["vmem"])
            st.ds.append(start + LATENCY["vmem"])
        elif cls.startswith("ds_"):
            st.ds.append(start + LATENCY["ds"])
        elif cls == "smem" and mem:
            st.smem.append(start + LATENCY["smem"])
        for r in inst.writes:
            st.chain_d.pop(r, None)
            # memory results are covered by waits, not by interlocks (item 4)
            st.ready[r] = st.t if inst.unit in ("VALU", "TRANS", "SALU") else 0


def _acc() -> dict:
    return {"mfma_busy": 0, "mfma_count": 0, "nop": 0, "vmcnt": 0, "lgkmcnt": 0, "mfma_pipe": 0, "dependency": 0,
            "issue": {}}


def model_span(p: Program, sp: Span, *, loop: bool) -> dict:
    body = p.stream[sp.start:sp.end]
    st = _State()
    if loop:
        _run(body, st, _acc())
        first_end = st.t
        st.new_iteration()
        acc = _acc()
        _run(body, st, acc)
        cycles = st.t - first_end
    else:
        acc = _acc()
        _run(body, st, acc)
        cycles = max(st.t, st.mfma_free)
    non_mfma_issue = sum(v for k, v in acc["issue"].items() if k != "mfma")
    return {
        "name": sp.name, "start": sp.start, "end": sp.end, "loop": loop, "instructions": len(body),
        "cycles": cycles, "mfma_count": acc["mfma_count"], "mfma_busy": acc["mfma_busy"],
        "utilisation": (acc["mfma_busy"] / cycles) if cycles else 0.0,
        "issue_cycles": dict(sorted(acc["issue"].items())), "non_mfma_issue": non_mfma_issue,
        "nop_cycles": acc["nop"],
        "stalls": {k: acc[k] for k in ("mfma_pipe", "dependency", "vmcnt", "lgkmcnt")},
    }


def model(x, kernel: str | None = None) -> dict:
    """The static model of every loop body of a program (or the whole program when it has none)."""
    p = as_program(x, kernel)
    lps = loops(p)
    spans = [model_span(p, lp, loop=True) for lp in lps] or [
        model_span(p, Span("whole program", 0, len(p.stream)), loop=False)]
    return {"name": p.name, "kind": "static model (not a measurement)", "assumptions": ASSUMPTIONS,
            "latency_assumed": dict(LATENCY), "spans": spans}


def format_model(d: dict) -> str:
    out = [f"STATIC CYCLE MODEL of {d['name']} - a model, not a measurement. Assumptions:"]
    out += [f"  - {a}" for a in d["assumptions"]]
    for sp in d["spans"]:
        what = "loop body (steady-state iteration)" if sp["loop"] else "straight-line program"
        out += ["", f"{what} '{sp['name']}' [{sp['start']}, {sp['end']}): {sp['instructions']} instructions",
                f"  modelled cycles {sp['cycles']}, MFMA busy {sp['mfma_busy']} ({sp['mfma_count']} MFMA), "
                f"modelled MFMA utilisation {100 * sp['utilisation']:.1f}%",
                f"  other issue cycles {sp['non_mfma_issue']} "
                + " ".join(f"{k}={v}" for k, v in sp["issue_cycles"].items() if k != "mfma")
                + f", s_nop {sp['nop_cycles']}",
                "  stalls: " + ", ".join(f"{k} {v}" for k, v in sp["stalls"].items())]
    return "\n".join(out)
