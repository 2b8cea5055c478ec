"""Cycle-level model of one gfx950 compute unit driven by recorded wave streams (perf.trace).

Event-driven: each wave's next instruction gets the earliest cycle at which it can issue (its own
issue spacing, register readiness, s_waitcnt against modelled completion times, s_barrier, and the
port it needs on its SIMD or CU); the CU issues the globally earliest one, ties going to the higher
s_setprio, then to the older wave. Ports only ever get busier, so a wave whose candidate cycle moved
is re-queued (lazy list scheduling). Facts and assumptions (every number is in params.Params):

* 4 SIMDs per CU; the waves of a workgroup go to SIMDs round-robin, workgroups as occupancy allows.
* Issue turns (ROCm Compute Profiler's CDNA performance model, "Pipeline descriptions: Scheduler",
  ROCm/rocprofiler-compute docs/conceptual/pipeline-descriptions.rst): each cycle the scheduler
  considers the waves of one SIMD, round-robin over the CU's SIMDs, and issues at most one
  instruction per wave and one per category (VALU with MFMA, VMEM, SALU/SMEM, LDS, branch). So SIMD
  s issues only on cycles = s mod issue_turn (4), and every instruction takes at least one turn of
  its wave: scalar ones too, and `s_nop N` N+1 turns (its N+1 wait states: LLVM's XDL-write ->
  VALU-read distance, NP + 4 wait states for NP >= 4 passes, covers the NP x 4 pipe cycles only if a
  wait state is a 4-cycle turn). Internal instructions (s_nop, s_waitcnt, s_barrier, s_setprio,
  s_endpgm) go to no functional unit and take no category slot.
* Per SIMD one instruction per turn per category: VALU (a wave64 VALU op holds it 4 cycles on the
  16-lane SIMD, TRANS 16), SALU, branch; the MFMA pipe; per CU one LDS pipe and one vector-memory
  port (shared by the 4 SIMDs).
* MFMA: the pipe is busy passes x 4 cycles (isa_tables passes, LLVM SISchedule gfx950); an MFMA
  also takes the VALU issue port for its 4 issue cycles. Its D registers are ready mfma_writeback
  cycles after it ends; an MFMA reading exactly that D as C (accumulate chain) only waits for the pipe.
* LDS: an access holds the LDS pipe for its bank-conflict cycles from the lane addresses
  (trace.lds_cycles) and completes lds_latency cycles later.
* VMEM (and LDS-DMA): an access holds the CU's memory port for the longest of three stages: the
  vector L1 looks up one 128-byte line a clock, moves the active bytes at the port's rate (bytes per
  cycle of the CU's share of the device, params; at most its lines' bytes), and a load fills each
  line its workgroup has not touched before ('fresh', trace.Recorder) from the L2 at that rate, 128
  bytes a line (ROCm Compute Profiler's vL1D: one line lookup a clock per CU; its L1-L2 traffic
  counts 128 B a read request). A partial line read again (FlyDSL's Q loads at offsets 32 B apart,
  aiter's backward half-line DMAs re-read by another wave) costs its lookup, not another fill.
  Atomics and streams recorded without 'fresh' take every line as fresh. It completes its latency
  later (the stream's 'lat' per access when the model placed it in the memory hierarchy, perf.placement; else vmem_latency);
  vmcnt returns in order. SMEM completes smem_latency after issue (lgkmcnt(0) covers it).
* Atomics (buffer/global_atomic_*: read-modify-writes bypass the L1 and are performed at the L2, ROCm
  Compute Profiler's vL1D "L1-L2 Atomics" and LLVM AMDGPUUsage): after the port, a CU's atomics queue
  for its share of the L2s' atomic rate (params.l2_atomic_dwords_per_clk over the CUs the launch keeps
  busy; one dword read-modify-write per active lane and dword), and complete vmem_latency after the
  L2 has performed them.
* Stores complete when the L2 has taken them (it is a write-back cache, the device's coherence point:
  ROCm Compute Profiler, "L2 cache (TCC)"): after the port, vmem_latency later. Their lines go on to
  HBM as the device's queue serves them (perf.hbm, on the dispatch timeline, with every other
  workgroup's traffic; the kernel ends when they are written). A launch priced without that timeline
  (no probe, params.stores_complete_at_l2 False) instead queues the bytes a store writes (its active
  lanes': the L2 merges a line's partial writes) for the CU's share of HBM bandwidth
  (params.hbm_bytes_per_clk over the CUs the launch keeps busy: a workgroup writes its tile of
  results when it ends, as do the others of its round). A wave ends when its memory operations have
  completed (LLVM SIInsertWaitcnts: S_ENDPGM may have to wait for outstanding VMEM stores; gfx11 and
  later send a message to release the VGPRs before). Atomics are not stores here (their L2 rate
  bounds them).
* For the device's HBM queue the run records what its first workgroup asks of memory: each VMEM
  access's issue cycle, its bytes (the 128-byte lines its workgroup touches first: trace 'fresh'),
  buffer and kind, and each wave's s_waitcnt vmcnt waits on loads (when the wave got there, when the
  awaited load completed, when it was issued).
* s_barrier releases all waves of the workgroup one cycle after the last arrives.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from ..isa.operands import Imm, Mod, Reg, Waitcnt
from ..report.stats import classify, nop_wait_states

AOFF = 512
KINDS = {"mfma": "mfma", "valu": "valu", "trans": "trans", "salu": "salu", "smem": "smem", "ds_read": "ds",
         "ds_write": "ds", "ds_atomic": "ds", "vmem_load": "vmem", "vmem_store": "vmem", "vmem_atomic": "vmem",
         "lds_dma": "vmem", "flat": "vmem", "s_waitcnt": "waitcnt", "s_nop": "nop", "s_barrier": "barrier",
         "s_setprio": "setprio", "branch": "branch", "s_endpgm": "endpgm", "other": "salu"}
CAUSES = ("dependency", "vmcnt", "atomic", "lgkmcnt", "barrier", "mfma_busy", "valu_busy", "lds_busy", "vmem_busy",
          "issue", "nop")


def _rows(regs) -> tuple:
    return tuple(sorted(n + (AOFF if f == "a" else 0) for f, n in regs if f in ("v", "a")))


def _reg_rows(op) -> tuple:
    op = op.base if isinstance(op, Mod) else op
    if isinstance(op, Reg) and op.file in "va":
        b = op.index + (AOFF if op.file == "a" else 0)
        return tuple(range(b, b + getattr(op, "count", 1)))
    return ()


@dataclass
class Static:
    """Per-instruction facts of a program the model needs (computed once per program)."""
    kind: list
    issue: list
    passes: list
    reads: list
    writes: list
    chain_c: list          # MFMA: rows of src C (skipped for the readiness check when C == D)
    wait: list             # s_waitcnt: (vm, lgkm) or None
    nops: list
    prio: list
    atomic: list           # a VMEM read-modify-write (performed at the L2)
    store: list            # a VMEM store: its bytes must reach memory
    coissue: list          # a VALU op another wave's may share an issue turn with (Params.valu_coissue)

    @staticmethod
    def depends_on(p) -> tuple:
        """The constants a Static is computed from (a cached one is stale when they change)."""
        return p.trans_cycles, p.issue_turn, p.valu_coissue

    @classmethod
    def of(cls, program, p) -> "Static":
        st = cls([], [], [], [], [], [], [], [], [], [], [], [])
        for inst in program.insts:
            k = KINDS.get(classify(inst), "salu")
            st.kind.append(k)
            st.issue.append({"mfma": 4, "valu": 4, "trans": p.trans_cycles, "ds": 4, "vmem": 4}.get(k, p.issue_turn))
            st.passes.append((inst.passes or 8) if k == "mfma" else 0)
            st.reads.append(_rows(inst.reads))
            st.writes.append(_rows(inst.writes))
            c = ()
            if k == "mfma" and len(inst.operands) >= 4 and _reg_rows(inst.operands[3]) == _reg_rows(inst.operands[0]):
                c = _reg_rows(inst.operands[3])
            st.chain_c.append(frozenset(c))
            w = None
            if k == "waitcnt":
                vm, lgkm = 63, 15
                for op in inst.operands:
                    wc = op if isinstance(op, Waitcnt) else (Waitcnt.from_simm16(op.value) if isinstance(op, Imm)
                                                            and isinstance(op.value, int) else None)
                    if wc is not None:
                        vm = 63 if wc.vmcnt is None else wc.vmcnt
                        lgkm = 15 if wc.lgkmcnt is None else wc.lgkmcnt
                w = (vm, lgkm)
            st.wait.append(w)
            st.nops.append(nop_wait_states(inst) * p.issue_turn if k == "nop" else 0)
            pr = 0
            if k == "setprio":
                pr = next((op.value for op in inst.operands if isinstance(op, Imm)), 0)
            st.prio.append(int(pr))
            st.atomic.append(k == "vmem" and inst.info.get("mem") == "atomic")
            st.store.append(k == "vmem" and inst.info.get("mem") == "store")
            st.coissue.append(bool(p.valu_coissue) and k == "valu" and not inst.is_dpp and not inst.name.startswith(
                ("v_pk_", "v_permlane", "v_readlane", "v_readfirstlane", "v_writelane")))
        return st


@dataclass
class Wave:
    wid: int
    wg: int
    simd: int
    pc: object            # instruction indices (numpy int32)
    cost: object          # DS cycles / VMEM bytes per executed instruction
    lines: object
    lat: object = None    # VMEM latency per executed instruction (cycles), or None: vmem_latency
    buf: object = None    # buffer index per executed instruction (trace 'buf', -1: none), or None
    fresh: object = None  # 128-byte lines per VMEM access its workgroup touches first (trace 'fresh'), or None
    start: int = 0
    i: int = 0
    t_next: int = 0
    prio: int = 0
    ready: dict = field(default_factory=dict)
    vm: list = field(default_factory=list)        # completion cycles, in issue order
    vm_at: list = field(default_factory=list)     # per vm entry: its completion is the L2's atomic queue
    vm_iss: list = field(default_factory=list)    # per vm entry: (its issue cycle, it is a store)
    lgkm: list = field(default_factory=list)      # (completion, is_smem)
    done: bool = False
    end: int = 0
    drain: float = 0      # last cycle any of its MFMAs or memory operations completes
    hold: str = "issue"   # what its own next-issue cycle waits for: issue spacing, an s_nop, a barrier


@dataclass
class CUResult:
    cycles: int                       # last wave's end
    wg_end: list                      # per workgroup: cycle its last wave ended
    wg_start: list
    busy: dict                        # per SIMD: {"mfma": cycles, "valu": cycles}
    stalls: dict                      # instruction index -> {cause: cycles, "issued": n}
    idle: dict                        # per SIMD idle-by-cause (cycles no instruction issued)
    # what the first workgroup asks of memory (cycles from its start), for the device's HBM queue (perf.hbm):
    traffic: list = field(default_factory=list)   # (issue cycle, bytes, buffer index or -1, is a store)
    waits: dict = field(default_factory=dict)     # wave -> [(wait issue, own readiness, awaited load's done,
                                                  #           its issue)]; waits for a store left out


def simulate(program, static: Static, workgroups: list, simd_of: list, p, starts: list | None = None) -> CUResult:
    """Run workgroups (each a list of wave streams) concurrently on one CU; `simd_of[g][k]` is the
    SIMD of wave k of workgroup g; `starts[g]` its dispatch cycle."""
    waves: list[Wave] = []
    wg_waves: list[list[int]] = []
    for g, wg in enumerate(workgroups):
        ids = []
        for k, s in enumerate(wg):
            w = Wave(len(waves), g, simd_of[g][k], s["pc"], s["cost"], s["lines"], s.get("lat"), s.get("buf"),
                     s.get("fresh"))
            w.start = w.t_next = (starts[g] if starts else 0)
            ids.append(w.wid)
            waves.append(w)
        wg_waves.append(ids)
    K, ISS, PAS, RD, WR, CH, WT, NOP, PR, AT, STO = (static.kind, static.issue, static.passes, static.reads,
                                                      static.writes, static.chain_c, static.wait, static.nops,
                                                      static.prio, static.atomic, static.store)
    CO = static.coissue
    nsimd = 4
    turn = p.issue_turn
    port = [{"mfma": 0, "valu": 0, "salu": 0, "branch": 0} for _ in range(nsimd)]
    co_turn = [(-1, -1)] * nsimd     # per SIMD: (turn, wave) of a co-issuable VALU op still alone in it
    lds_free = 0
    vm_free = 0.0
    vm_cyc_per_byte = 1.0 / p.cu_bytes_per_clk
    at_free = 0.0                    # when the L2s finish this CU's atomics issued so far
    at_cyc_per_dword = 1.0 / (p.cu_atomic_dwords_per_clk or p.l2_atomic_dwords_per_clk / p.n_cu)
    hbm_free = 0.0                   # when memory has taken this CU's stored bytes so far
    hbm_cyc_per_byte = 1.0 / (p.cu_hbm_bytes_per_clk or p.hbm_bytes_per_clk / p.n_cu)
    busy = [{"mfma": 0, "valu": 0} for _ in range(nsimd)]
    stalls: dict = {}
    bar_arrived: dict = {}
    heap = []
    traffic: list = []
    waits: dict = {}

    def candidate(w: Wave):
        """(cycle, cause) the wave's next instruction can issue at; cause = what held it longest."""
        i = int(w.pc[w.i])
        k = K[i]
        t, cause = w.t_next, w.hold
        rd = w.ready
        if rd and k in ("valu", "trans", "mfma", "ds", "vmem"):
            ch = CH[i]
            for r in RD[i]:
                tr = rd.get(r)
                if tr is not None and tr > t and r not in ch:
                    t, cause = tr, "dependency"
        if k == "waitcnt":
            vmn, lgn = WT[i]
            q = w.vm
            if len(q) > vmn:
                tq = q[len(q) - vmn - 1]
                if tq > t:
                    t, cause = tq, "atomic" if w.vm_at[len(q) - vmn - 1] else "vmcnt"
            q = w.lgkm
            if q:
                need = q if lgn == 0 else q[:max(0, len(q) - lgn)]
                for tq, _ in need:
                    if tq > t:
                        t, cause = tq, "lgkmcnt"
        pt = port[w.simd]
        if k == "mfma":
            if pt["mfma"] > t:
                t, cause = pt["mfma"], "mfma_busy"
            if pt["valu"] > t:
                t, cause = pt["valu"], "valu_busy"
        elif k in ("valu", "trans"):
            if pt["valu"] > t:
                if CO[i] and t <= co_turn[w.simd][0] and co_turn[w.simd][1] != w.wid:
                    t = co_turn[w.simd][0]          # the second op of a co-issued pair
                else:
                    t, cause = pt["valu"], "valu_busy"
        elif k == "ds":
            if lds_free > t:
                t, cause = lds_free, "lds_busy"
        elif k == "vmem":
            if vm_free > t:
                t, cause = int(vm_free + 0.999), "vmem_busy"
        elif k in ("salu", "smem"):
            if pt["salu"] > t:
                t, cause = pt["salu"], "issue"
        elif k == "branch":
            if pt["branch"] > t:
                t, cause = pt["branch"], "issue"
        return t + (w.simd - t) % turn, cause           # the SIMD's next issue turn

    for w in waves:
        t, _ = candidate(w)
        heapq.heappush(heap, (t, 0, w.wg, w.wid))
    last_issue = [0] * len(waves)
    simd_last = [-1] * nsimd
    idle = [dict.fromkeys(CAUSES, 0) for _ in range(nsimd)]
    while heap:
        t0, _, _, wid = heapq.heappop(heap)
        w = waves[wid]
        t, cause = candidate(w)
        if t > t0:
            heapq.heappush(heap, (t, -w.prio, w.wg, wid))
            continue
        i = int(w.pc[w.i])
        k = K[i]
        stall = t - last_issue[wid] - (ISS[int(w.pc[w.i - 1])] if w.i else 0) if w.i else t - w.start
        row = stalls.get(i)
        if row is None:
            row = stalls[i] = dict.fromkeys(CAUSES, 0) | {"issued": 0}
        row["issued"] += 1
        if stall > 0:
            row[cause] += stall
        last_issue[wid] = t
        gap = t - simd_last[w.simd] - 1
        if gap > 0:                      # no instruction issued on this SIMD: blame what held this one
            idle[w.simd][cause] += gap
        simd_last[w.simd] = max(simd_last[w.simd], t)
        pt = port[w.simd]
        nxt = t + ISS[i]
        if k == "mfma":
            dur = PAS[i] * 4
            pt["mfma"] = t + dur
            pt["valu"] = max(pt["valu"], t + 4)
            co_turn[w.simd] = (-1, -1)
            busy[w.simd]["mfma"] += dur
            w.drain = max(w.drain, t + dur)
            for r in WR[i]:
                w.ready[r] = t + dur + p.mfma_writeback
        elif k in ("valu", "trans"):
            busy[w.simd]["valu"] += ISS[i]
            if CO[i] and co_turn[w.simd][0] == t and t < pt["valu"]:
                co_turn[w.simd] = (-1, -1)            # the turn's second op: the pair is complete
            else:
                pt["valu"] = t + ISS[i]
                co_turn[w.simd] = (t, w.wid) if CO[i] else (-1, -1)
            if k == "trans":
                for r in WR[i]:
                    w.ready[r] = t + ISS[i] + p.trans_latency
        elif k == "ds":
            c = int(w.cost[w.i]) or 1
            lds_free = t + c
            w.lgkm.append((t + c + p.lds_latency, False))
            w.drain = max(w.drain, t + c + p.lds_latency)
        elif k == "vmem":
            lines = int(w.lines[w.i])
            fresh = lines if w.fresh is None or AT[i] else int(w.fresh[w.i])
            moved = min(int(w.cost[w.i]), lines * 128)      # lanes reading one address share its bytes
            fill = 0 if STO[i] else fresh * 128
            vm_free = max(vm_free, t) + max(lines, max(moved, fill) * vm_cyc_per_byte)
            lat = p.vmem_latency if w.lat is None else int(w.lat[w.i])
            done = int(vm_free) + lat
            by_atomics = False
            if AT[i]:                    # the L2 performs it: the CU's share of the atomic units' rate
                at_free = max(at_free, vm_free) + int(w.cost[w.i]) / 4 * at_cyc_per_dword
                if int(at_free) + lat > done:
                    done, by_atomics = int(at_free) + lat, True
            if STO[i] and not p.stores_complete_at_l2:  # the stored bytes reach memory at the CU's share of HBM
                hbm_free = max(hbm_free, vm_free) + int(w.cost[w.i]) * hbm_cyc_per_byte
                done = max(done, int(hbm_free) + lat)
            if w.vm and w.vm[-1] > done:
                done, by_atomics = w.vm[-1], w.vm_at[-1]
            if w.wg == 0 and not AT[i]:
                # the lines the workgroup touches first: a line it touched before is in its L2
                traffic.append((t - w.start, int(w.cost[w.i]) if w.fresh is None else int(w.fresh[w.i]) * 128,
                                -1 if w.buf is None else int(w.buf[w.i]), bool(STO[i])))
            w.vm.append(done)
            w.vm_at.append(by_atomics)
            w.vm_iss.append((t, bool(STO[i])))
            w.drain = max(w.drain, done)
        elif k == "smem":
            w.lgkm.append((t + p.smem_latency, True))
            pt["salu"] = t + turn
        elif k == "waitcnt":
            vmn, lgn = WT[i]
            if len(w.vm) > vmn:
                j = len(w.vm) - vmn - 1
                if w.wg == 0 and not w.vm_iss[j][1]:     # a store is done at the L2: the queue delays loads
                    waits.setdefault(wid, []).append((t - w.start, w.t_next - w.start, w.vm[j] - w.start,
                                                      w.vm_iss[j][0] - w.start))
                del w.vm[:len(w.vm) - vmn]
                del w.vm_at[:len(w.vm_at) - vmn]
                del w.vm_iss[:len(w.vm_iss) - vmn]
            if w.lgkm:
                w.lgkm = [] if lgn == 0 else [e for e in w.lgkm[max(0, len(w.lgkm) - lgn):]]
        elif k == "nop":
            nxt = t + NOP[i]
        elif k == "setprio":
            w.prio = PR[i]
        elif k == "branch":
            pt["branch"] = t + turn
            if w.i + 1 < len(w.pc) and int(w.pc[w.i + 1]) != i + 1:
                nxt = t + p.taken_branch
        elif k == "salu":
            pt["salu"] = t + turn
        w.i += 1
        w.t_next = nxt
        w.hold = "nop" if k == "nop" else "issue"
        if k == "endpgm" or w.i >= len(w.pc):
            w.done, w.end = True, int(max(nxt, w.drain))
            continue
        if k == "barrier":
            arr = bar_arrived.setdefault(w.wg, [])
            arr.append(wid)
            live = [x for x in wg_waves[w.wg] if not waves[x].done]
            if len(arr) >= len(live):
                rel = max(waves[x].t_next for x in arr) + p.barrier_cycles
                for x in arr:
                    waves[x].t_next = rel
                    waves[x].hold = "barrier"
                    heapq.heappush(heap, (rel, -waves[x].prio, waves[x].wg, x))
                bar_arrived[w.wg] = []
            continue
        tn, _ = candidate(w)
        heapq.heappush(heap, (tn, -w.prio, w.wg, wid))
    wg_end = [max(waves[x].end for x in ids) for ids in wg_waves]
    total = max(wg_end) if wg_end else 0
    return CUResult(total, wg_end, [starts[g] if starts else 0 for g in range(len(workgroups))],
                    {s: busy[s] for s in range(nsimd)}, stalls, {s: idle[s] for s in range(nsimd)}, traffic, waits)
