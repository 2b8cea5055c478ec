"""One fix per group of findings: the `s_waitcnt` or `s_nop` that clears them all, and where.

Wait-counter findings are grouped under one wait placed before the earliest consumer (the
*anchor*): a later finding joins when that wait also covers it, i.e. its consumer is in the
anchor's basic block after the anchor and its producer was issued before the anchor (so every
path to the consumer passes the wait after the producer). The counter value at the anchor is the
value the consumer needs minus the same-class ops issued between anchor and consumer; the group's
wait is the weakest (largest) value that clears every member, i.e. the minimum per counter.
Hazard findings are grouped per consumer: the longest s_nop needed clears the others.

`apply_fixes(items, findings)` returns the program with those waits and nops inserted.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..isa.syntax import parse_instruction
from .cfg import build_cfg, is_label
from .findings import Finding
from .hazards import HazardAnalysis, nops_for
from .waitcnt import mem_op

_CNT = re.compile(r"(vm|lgkm|exp)cnt\((\d+)\)")


@dataclass
class Fix:
    kind: str                         # "waitcnt" or "hazard"
    anchor: int                       # item index the fix goes right before
    counters: dict = field(default_factory=dict)   # waitcnt: counter -> value at the anchor
    nops: int = 0                     # hazard: wait states to add
    findings: list[Finding] = field(default_factory=list)

    @property
    def text(self) -> str:
        if self.kind == "waitcnt":
            return "s_waitcnt " + " ".join(f"{c}cnt({v})" for c, v in sorted(self.counters.items()))
        return " + ".join(i.text() for i in nops_for(self.nops))

    @property
    def site(self):
        return min((f.consumer for f in self.findings), key=lambda s: s.index)

    def instructions(self) -> list:
        if self.kind == "waitcnt":
            return [parse_instruction(self.text)]
        return nops_for(self.nops)


def unique(findings: list[Finding]) -> list[Finding]:
    """Each (rule, consumer, producer) once, keeping the first."""
    seen, out = set(), []
    for f in findings:
        key = (f.rule, f.consumer.index, f.producer.index if f.producer else None)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def _wanted(f: Finding) -> dict:
    return {c: int(v) for c, v in _CNT.findall(f.fix)}


def _counts(items, producer: int, ctr: str):
    """Is item j an op ordered with the producer's op on counter `ctr`?"""
    po = mem_op(items[producer], producer)
    if po is None or not po.ordered:
        return lambda j: False

    def counts(j):
        o = None if is_label(items[j]) else mem_op(items[j], j)
        return o is not None and o.ordered and o.cls == po.cls and ctr in o.counters
    return counts


def _walk(cfg, start: int, stop: int, target: int, counts) -> int | None:
    """Most counted ops on a path from item `start` to item `target` that does not pass item
    `stop` (None: no such path). A loop between them gives CYCLE: unbounded."""
    memo: dict[tuple, int | None] = {}

    def go(bid, pos, active):
        key = (bid, pos)
        if key in memo:
            return memo[key]
        if key in active:
            return CYCLE
        active = active | {key}
        n = 0
        for j in cfg.blocks[bid].insts[pos:]:
            if j == target:
                memo[key] = n
                return n
            if j == stop:
                memo[key] = None
                return None
            n += counts(j)
        best = None
        for s in cfg.blocks[bid].succs:
            r = go(s, 0, active)
            if r is not None:
                best = n + r if best is None else max(best, n + r)
        memo[key] = best
        return best

    b = cfg.block_of[start]
    return go(b, cfg.blocks[b].insts.index(start), frozenset())


CYCLE = 1 << 20


def _covers(cfg, items, a: int, f: Finding, ctr: str, v: int) -> int | None:
    """The counter value at anchor `a` that retires f's producer before f's consumer, or None when
    a path from the producer reaches the consumer without passing `a`."""
    p, c = f.producer.index, f.consumer.index
    counts = _counts(items, p, ctr)
    first = cfg.blocks[cfg.block_of[p]].insts
    nxt = first.index(p) + 1
    if nxt < len(first):
        bypass = _walk(cfg, first[nxt], a, c, counts) if first[nxt] != a else None
    else:
        bypass = None
        for s in cfg.blocks[cfg.block_of[p]].succs:
            ins = cfg.blocks[s].insts
            if ins and ins[0] != a and _walk(cfg, ins[0], a, c, counts) is not None:
                bypass = 0
    if bypass is not None or (a == c):
        return v if a == c else None
    between = _walk(cfg, a, -1, c, counts)
    if between is None:
        return None
    return max(0, v - between)


def group_fixes(items: list, findings: list[Finding]) -> list[Fix]:
    """Findings grouped by the fix that clears them, in program order of the fix."""
    items = list(items)
    cfg = build_cfg(items) if items else None
    fixes: list[Fix] = []
    by_consumer: dict[int, Fix] = {}
    waits: list[Fix] = []
    for f in sorted(unique(findings), key=lambda f: (f.consumer.index, f.rule)):
        c = f.consumer.index
        if f.kind != "waitcnt":
            fx = by_consumer.get(c)
            if fx is None:
                fx = by_consumer[c] = Fix("hazard", c)
                fixes.append(fx)
            fx.nops = max(fx.nops, f.needed - f.found)
            fx.findings.append(f)
            continue
        want = _wanted(f) or {"vm": f.needed}
        p = f.producer.index if f.producer else None
        joined = False
        for fx in waits if cfg is not None and p is not None else ():
            at = {ctr: _covers(cfg, items, fx.anchor, f, ctr, v) for ctr, v in want.items()}
            if any(x is None for x in at.values()):
                continue
            for ctr, x in at.items():
                fx.counters[ctr] = min(fx.counters.get(ctr, x), x)
            fx.findings.append(f)
            joined = True
            break
        if not joined:
            fx = Fix("waitcnt", c, dict(want), findings=[f])
            waits.append(fx)
            fixes.append(fx)
    return sorted(fixes, key=lambda fx: (fx.anchor, fx.kind != "waitcnt"))


def insertions(items: list, fixes: list[Fix], strict: bool = False) -> dict[int, list]:
    """Instructions to put before each item: each group's wait before its anchor, then the s_nops
    that clear every hazard in the program with those waits (a wait counts as a wait state)."""
    waits: dict[int, list] = {}
    for fx in fixes:
        if fx.kind == "waitcnt":
            waits.setdefault(fx.anchor, []).extend(_at(ins, items[fx.anchor]) for ins in fx.instructions())
    staged, origin = [], []        # the program with the waits, and the original item each precedes
    for i, it in enumerate(items):
        for w in waits.get(i, ()):
            staged.append(w)
            origin.append(i)
        staged.append(it)
        origin.append(i)
    out: dict[int, list] = {}
    extra = HazardAnalysis(staged, strict).plan_nops()
    for j, it in enumerate(staged):
        if extra.get(j, 0) > 0:
            out.setdefault(origin[j], []).extend(_at(n, items[origin[j]]) for n in nops_for(extra[j]))
        if j < len(staged) - 1 and origin[j + 1] == origin[j]:     # it is an inserted wait
            out.setdefault(origin[j], []).append(it)
    return out


def apply_fixes(items: list, fixes: list[Fix], strict: bool = False) -> list:
    """The program with `insertions` in place."""
    add = insertions(items, fixes, strict)
    out: list = []
    for i, it in enumerate(items):
        out += add.get(i, [])
        out.append(it)
    return out


def _at(ins, where):
    """An inserted instruction carries the source line and region of the one it precedes."""
    if not is_label(where):
        ins.loc, ins.region = where.loc, where.region
    return ins
