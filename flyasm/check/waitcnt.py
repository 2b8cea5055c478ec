"""Wait-counter check: reads and writes of registers (and LDS) that a memory op still writes.

Model (notes §3.4, CDNA4 ISA 4.4):
* vmcnt: every VMEM op (MUBUF/global/scratch: loads, stores, atomics, LDS-DMA loads) counts; they
  complete in issue order, so `vmcnt(N)` retires all but the N most recent.
* lgkmcnt: DS ops complete in order among themselves; SMEM (and s_sendmsg) may return out of order,
  so only `lgkmcnt(0)` is known to retire them. FLAT counts on both counters and is unordered on
  both ("the only sensible s_waitcnt after FLAT is 0"): it is retired by vmcnt(0) or lgkmcnt(0).
* Limits vmcnt <= 63, lgkmcnt <= 15: an op with that many same-counter ordered ops issued after
  it is complete, because the hardware stalls issue while a counter is full (LLVM's
  SIInsertWaitcnts makes the same assumption when a score bracket exceeds the counter).
* LDS-DMA (`buffer_load_* ... lds`, `global_load_lds_*`) writes LDS, tracked by vmcnt: an `lds`
  pseudo-register that a later DS read consumes (RAW) and a later DS write must not overtake
  (WAW: the DMA landing after the ds_write would undo it; LLVM's SIInsertWaitcnts waits there too).
* Store data is read at issue: overwriting a store's data VGPRs is not a wait-counter matter (the
  2-wait-state row 27 hazard covers wide VMEM stores, see hazards.py); DS and SMEM stores likewise.
* `s_barrier` does not wait (gfx950 `hasAutoWaitcntBeforeBarrier` not assumed): an LDS write or
  LDS-DMA still outstanding at a barrier is a finding when another wave reads it after the barrier
  (LLVM's memory model waits lgkmcnt(0) / vmcnt(0) there for a workgroup release fence).
* LDS ranges (ldsaddr.py): an in-flight LDS-DMA (or DS write at a barrier) and a DS access
  conflict only if their byte ranges may meet. Ranges that meet give an "error" finding, ranges
  the value analysis cannot compute (or only some alternatives of which meet) an "unproven" one,
  proven-disjoint ranges nothing. Same-wave conflicts compare wave by wave; a barrier compares
  this wave's in-flight write with the *other* waves' reads up to the next barrier (a wave's own
  DS accesses execute in order, and its own read of a DMA in flight is `lds_dma_read`'s).
* `lds_buffer` tags (author annotations) are assertions, not facts: `check_lds_tags` reports two
  differently tagged accesses whose proven ranges meet.

The state at each block entry is the set of outstanding ops with, per op and counter, the fewest
and the most same-class ops issued after it over the paths (merge = union, min and max), and
whether it is outstanding on every path or only some; a fixed point over the CFG carries loads
around loop back edges.

Bound: the fixed point runs blocks first in, first out, each queued once at a time. A block's
entry state only grows: ops join it, and per op and counter `lo` only falls, `hi` only rises
(saturating at the counter limit, 63 or 15) and `every` only clears, so it changes at most
2·LIMIT + 2 times per op it holds: at most O(B × M × LIMIT) block runs for M memory ops, each
step O(ops in flight). Measured on aiter's sample (80 objects): at most 43 runs of one block. The
readers after a barrier are one forward scan per barrier with an LDS write in flight, to the
next barrier on every path, each block once: O(I) per such barrier, cached.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from ..isa.instruction import Instruction
from ..isa.operands import Waitcnt
from .cfg import CFG, build_cfg, is_label
from .findings import Finding, Site
from .ldsaddr import LdsAddressAnalysis

LIMIT = {"vm": 63, "lgkm": 15}
LDS = ("lds", 0)     # pseudo-register: LDS bytes written by a DMA


@dataclass(frozen=True, eq=False)     # one Op per instruction (Facts): identity is equality, and hashes fast
class Op:
    index: int               # item index of the memory instruction
    counters: tuple          # ("vm",), ("lgkm",) or ("vm", "lgkm")
    ordered: bool            # completes in order with the ops of its class
    cls: str                 # ordering class: "vm" (all VMEM), "ds", "smem", "flat", "msg"
    writes: frozenset        # registers (and LDS) the op writes when it completes
    lds_write: bool          # ds_write / DS atomic / LDS DMA


def mem_op(i: Instruction, idx: int) -> Op | None:
    ctr = i.counter
    if ctr is None or is_label(i):
        return None
    writes = frozenset(r for r in i.writes if r[0] in ("v", "a", "s"))
    dma = i.is_lds_dma
    if dma:
        writes = writes | {LDS}
    if i.unit == "FLAT" or ctr == "vm+lgkm":
        return Op(idx, ("vm", "lgkm"), False, "flat", writes, False)
    if ctr == "vm":
        return Op(idx, ("vm",), True, "vm", writes, dma)
    if ctr == "lgkm_smem":
        return Op(idx, ("lgkm",), False, "smem", writes, False)
    if ctr == "lgkm":
        if i.unit == "DS":
            lds_w = i.info.get("mem") in ("store", "atomic")
            return Op(idx, ("lgkm",), True, "ds", writes, lds_w)
        return Op(idx, ("lgkm",), False, "msg", writes, False)
    return None


def reads_lds(i: Instruction) -> bool:
    return i.unit == "DS" and i.info.get("mem") in ("load", "atomic")


def touches_lds(i: Instruction) -> bool:
    """DS reads and writes: both must wait for an LDS DMA to the same bytes (RAW / WAW on LDS)."""
    return i.unit == "DS" and i.info.get("mem") in ("load", "store", "atomic")


def lds_buffer(i) -> str | None:
    """The author's LDS-buffer annotation of a DS access or LDS-DMA (None: none)."""
    return i.lds_buffer if isinstance(i, Instruction) else None


# state: {(Op, counter): (lo, hi, every)} -- `lo`/`hi` = fewest/most ordered same-class ops issued
# after it over the paths that reach here; `every` = outstanding on every path (not just some)
def _issue(state: dict, op: Op) -> dict:
    new = {}
    for (o, ctr), (lo, hi, every) in state.items():
        if op.ordered and o.ordered and o.cls == op.cls and ctr in op.counters:
            lo, hi = lo + 1, hi + 1
            if lo >= LIMIT[ctr]:
                continue          # the counter is full: the hardware stalled until o completed
            if hi >= LIMIT[ctr]:
                hi, every = LIMIT[ctr], False
        new[(o, ctr)] = (lo, hi, every)
    for ctr in op.counters:
        new[(op, ctr)] = (0, 0, True)
    return new


def _wait(state: dict, w: Waitcnt) -> dict:
    lim = {"vm": w.vmcnt, "lgkm": w.lgkmcnt}
    done, some = set(), set()
    for (o, ctr), (lo, hi, _) in state.items():
        n = lim[ctr]
        if n is not None and (n == 0 or (o.ordered and lo >= n)):
            done.add(o)
        elif n is not None and o.ordered and hi >= n:
            some.add(o)       # retired on the paths that issued more after it
    # an op is complete once any of its counters retired it (FLAT decrements both at completion)
    return {k: (v if k[0] not in some else (v[0], v[1], False)) for k, v in state.items() if k[0] not in done}


def _merge(a: dict, b: dict) -> dict:
    out = {k: (v[0], v[1], False) for k, v in a.items()}
    for k, v in b.items():
        if k in a:
            u = a[k]
            out[k] = (min(u[0], v[0]), max(u[1], v[1]), u[2] and v[2])
        else:
            out[k] = (v[0], v[1], False)
    return out


def _suffices(o: Op, after_by_ctr: dict) -> dict:
    """Largest N per counter that retires `o` (FLAT: 0 on either counter)."""
    out = {}
    for ctr, after in after_by_ctr.items():
        out[ctr] = min(after, LIMIT[ctr]) if o.ordered else 0
    return out


@dataclass(frozen=True)
class Facts:
    """What the analysis asks of one instruction, worked out once."""
    wait: Waitcnt | None
    op: Op | None
    reads: frozenset            # registers read, plus LDS for a DS read
    writes: frozenset           # registers written, plus LDS for a DS write
    barrier: bool


def facts(ins: Instruction, idx: int) -> Facts:
    w = None
    if ins.name == "s_waitcnt":
        w = ins.operands[0] if ins.operands and isinstance(ins.operands[0], Waitcnt) else Waitcnt()
    reads = frozenset(ins.reads) | ({LDS} if reads_lds(ins) else frozenset())
    writes = frozenset(r for r in ins.writes if r[0] in ("v", "a", "s"))
    if touches_lds(ins) and not reads_lds(ins):
        writes |= {LDS}                                  # ds_write after a DMA to LDS
    return Facts(w, mem_op(ins, idx), reads, writes, ins.name == "s_barrier")


class WaitcntAnalysis:
    def __init__(self, items: list, cfg: CFG | None = None):
        self.items = items
        self.cfg = cfg or build_cfg(items)
        # unrolled code repeats its instructions: their registers once per text, the op per index
        same = self.cfg.per_text(lambda ins: facts(ins, -1))
        self.facts = {i: Facts(f.wait, mem_op(items[i], i), f.reads, f.writes, f.barrier) for i, f in same.items()}

    def step(self, state: dict, idx: int, ins: Instruction, report=None) -> dict:
        f = self.facts[idx]
        if f.wait is not None:
            return _wait(state, f.wait)
        if report is not None and state:
            self._consume(state, idx, ins, f, report)
        if f.op is not None:
            state = _issue(state, f.op)
        return state

    def _consume(self, state: dict, idx: int, ins: Instruction, f: Facts, report) -> None:
        op_self = f.op
        by_op: dict[Op, dict] = {}
        every: dict[Op, bool] = {}
        fr, fw, bar = f.reads, f.writes, f.barrier
        for (o, ctr), (lo, _, ev) in state.items():
            ow = o.writes
            if ow.isdisjoint(fr) and ow.isdisjoint(fw) and not (bar and o.lds_write):
                continue                  # this instruction does not touch what o writes
            by_op.setdefault(o, {})[ctr] = lo
            every[o] = every.get(o, True) and ev
        for o, afters in by_op.items():
            raw = o.writes & f.reads
            waw = o.writes & f.writes
            if waw and op_self is not None and op_self.ordered and o.ordered and op_self.cls == o.cls:
                waw = set()     # same in-order queue: the later write lands last
            if raw or waw:
                report(idx, ins, o, afters, "raw" if raw else "waw", raw or waw, every[o])
        if f.barrier:
            for o in by_op:
                if o.lds_write:
                    report(idx, ins, o, by_op[o], "barrier", {LDS}, every[o])

    def run(self, report=None) -> None:
        cfg = self.cfg
        entry: dict[int, dict] = {0: {}} if cfg.blocks else {}
        work = deque([0] if cfg.blocks else [])          # first in, first out; each block queued once
        queued = set(work)
        while work:
            bid = work.popleft()
            queued.discard(bid)
            st = entry[bid]
            for i in cfg.blocks[bid].insts:
                st = self.step(st, i, self.items[i])
            for s in cfg.blocks[bid].succs:
                new = _merge(entry[s], st) if s in entry else st
                if s not in entry or new != entry[s]:
                    entry[s] = new
                    if s not in queued:
                        queued.add(s)
                        work.append(s)
        self.entry = entry
        if report is not None:
            for bid, st in sorted(entry.items()):
                for i in cfg.blocks[bid].insts:
                    st = self.step(st, i, self.items[i], report)


def _fmt_regs(regs) -> str:
    names = sorted(f"{k}{i}" if k != "lds" else "LDS" for k, i in regs)
    return ", ".join(names[:4]) + (" ..." if len(names) > 4 else "")


def check_waitcnt(items: list, block=None, lds: LdsAddressAnalysis | None = None,
                  cfg: CFG | None = None) -> list[Finding]:
    """Wait-counter findings; `block` (threads, or (x, y, z)) lets the LDS ranges be computed."""
    wa = WaitcntAnalysis(items, cfg)
    cfg = wa.cfg
    lds = lds or LdsAddressAnalysis(items, block, cfg)
    found: dict[tuple, Finding] = {}

    readers: dict[int, list[int]] = {}

    def readers_before_next_barrier(idx: int) -> list[int]:
        """DS reads after item idx up to the next s_barrier, on every path."""
        if idx not in readers:
            readers[idx] = _readers(idx)
        return readers[idx]

    def _readers(idx: int) -> list[int]:
        b0 = cfg.block_of[idx]
        insts = cfg.blocks[b0].insts
        work, seen, out = [(b0, insts.index(idx) + 1)], set(), []
        while work:
            b, start = work.pop()
            for i in cfg.blocks[b].insts[start:]:
                it = items[i]
                if it.name == "s_barrier":
                    break
                if reads_lds(it):
                    out.append(i)
            else:
                for s in cfg.blocks[b].succs:
                    if s not in seen:
                        seen.add(s)
                        work.append((s, 0))
        return out

    def verdict(o: Op, idx: int, kind: str) -> tuple[str, int | None]:
        """(relation, example reader) of the LDS bytes of op o and the access at idx."""
        if kind != "barrier":
            return lds.relation(o.index, idx), idx
        unknown = None           # the first reader that meets, else the first one not proven apart
        for r in readers_before_next_barrier(idx):
            rel = lds.relation(o.index, r, waves="other")
            if rel == "overlap":
                return rel, r
            if rel == "unknown" and unknown is None:
                unknown = r
        return ("unknown", unknown) if unknown is not None else ("disjoint", None)

    sites: dict[int, Site] = {}

    def site(i: int) -> Site:
        """One Site per instruction: one that many findings name works out its text once."""
        if i not in sites:
            sites[i] = Site(i, items[i])
        return sites[i]

    def report(idx, ins, o: Op, afters, kind, regs, every=True):
        lds_regs = any(r[0] == "lds" for r in regs)
        if kind == "barrier":
            rule = "lds_write_before_barrier"
        elif lds_regs:
            rule = "lds_dma_read" if kind == "raw" else "lds_dma_write"
        else:
            rule = f"{'vm' if 'vm' in o.counters else 'lgkm'}_{kind}"
        key = (rule, idx, o.index)
        if key in found:            # the first report of a (rule, consumer, producer) stands
            return
        severity, note = "error", ""
        if kind == "barrier" or lds_regs:
            rel, other = verdict(o, idx, kind)
            if rel == "disjoint":
                return
            prod_r = lds.described(o.index)
            other_r = lds.described(other)
            if rel == "unknown":
                severity = "unproven"
                note = f" (cannot prove these LDS ranges disjoint: {prod_r} and {other_r} of #{other})"
            elif not every:
                # the ranges meet, but the DMA is in flight only on some paths to here, and the
                # checker does not decide which paths run (e.g. a loop-parity branch)
                severity = "unproven"
                note = (f" (cannot prove these LDS ranges disjoint: {prod_r} meets {other_r} of #{other}, "
                        f"on some paths only)")
            else:
                note = f" ({prod_r} meets {other_r} of #{other})"
        n = _suffices(o, afters)
        ctr_txt = " ".join(f"{c}cnt({v})" for c, v in sorted(n.items()))
        if o.cls == "flat":
            ctr_txt = "vmcnt(0)" if "vm" in n else "lgkmcnt(0)"
        fix = f"s_waitcnt {ctr_txt}"
        prod, cons = site(o.index), site(idx)
        if kind == "barrier":
            msg = (f"{cons.describe()} is reached while {prod.describe()} may still be writing LDS that is "
                   f"read after the barrier{note}; put {fix} before the barrier")
        elif lds_regs:
            verb = "reads" if kind == "raw" else "writes"
            msg = (f"{cons.describe()} {verb} LDS that the DMA {prod.describe()} may still be writing{note}; "
                   f"put {fix} right before it")
        else:
            ctr = "vmcnt" if "vm" in o.counters else "lgkmcnt"
            verb = "reads" if kind == "raw" else "overwrites"
            msg = (f"{cons.describe()} {verb} {_fmt_regs(regs)} that {prod.describe()} may still be writing "
                   f"({ctr} not waited); put {fix} right before it")
        found[key] = Finding(rule, msg, cons, prod, min(afters.values()), min(n.values()), fix, None, "waitcnt",
                             severity)

    wa.run(report)
    return sorted(found.values(), key=lambda f: (f.consumer.index, f.producer.index))


def check_lds_tags(items: list, lds: LdsAddressAnalysis) -> list[Finding]:
    """`lds_buffer` tags are the author's claim that differently named buffers never share bytes
    (declared scratch aside): one finding per pair of tags whose proven ranges meet (first
    accesses that show it). Scratch is the author's claim that no DS access touches those bytes:
    one finding per DS access whose proven range meets it."""
    by_tag: dict[str, list[int]] = {}
    for i, it in enumerate(items):
        if not is_label(it) and lds_buffer(it) and i in lds.watched:
            by_tag.setdefault(lds_buffer(it), []).append(i)
    out = []
    tags = sorted(by_tag)
    for n, a in enumerate(tags):
        for b in tags[n + 1:]:
            pair = next(((i, j) for i in by_tag[a] for j in by_tag[b]
                         if lds.relation(i, j, waves="any", past_scratch=True) == "overlap"), None)
            if pair is None:
                continue
            i, j = pair
            p, c = Site(i, items[i]), Site(j, items[j])
            msg = (f"{c.describe()} is tagged lds_buffer {b!r} and {p.describe()} {a!r}, but their ranges meet: "
                   f"{lds.described(j)} and {lds.described(i)}; fix the tag or the addresses")
            out.append(Finding("lds_buffer_tag", msg, c, p, 0, 0, "retag or readdress", None, "waitcnt"))
    for i in sorted(lds.watched) if lds.scratch else ():
        hit = None if items[i].is_lds_dma else lds.touches_scratch(i)
        if hit:
            c = Site(i, items[i])
            msg = (f"{c.describe()} touches LDS bytes [0x{hit[0]:x}, 0x{hit[1]:x}) declared scratch "
                   f"(Kernel.lds_scratch: only DMAs with nothing to load write there, nothing reads them); "
                   f"its {lds.described(i)}")
            out.append(Finding("lds_scratch_access", msg, c, c, 0, 0, "readdress", None, "waitcnt"))
    return out
