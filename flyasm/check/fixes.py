"""One fix per group of findings: the `s_waitcnt` or `s_nop` that clears them all, and where.

Wait-counter findings are grouped under one wait placed before the earliest consumer (the
*anchor*): a later finding joins the first wait that also covers it, i.e. no walk from its
producer reaches its consumer -- or a loop, which the grouping does not follow -- without passing
the anchor (so every path to the consumer passes the wait after the producer; separation.py). The
counter value at the anchor is the value the consumer needs minus the same-class ops issued
between anchor and consumer (none left to count past a loop: 0); the group's wait is the weakest
(largest) value that clears every member, i.e. the minimum per counter. Hazard findings are
grouped per consumer: the longest s_nop needed clears the others.

Bound of `group_fixes`: O(F log F) to order the F findings, plus per wait-counter finding the
candidate waits `Separation.candidates` leaves (a wait in its consumer's block or a dominator of
it), each asked in O(successors) mask tests; the graph work is separation.py's, at most
O(B × (B + E)) for B blocks and E edges. `insertions` adds one hazard pass (hazards.py).

`apply_fixes(items, findings)` returns the program with those waits and nops inserted.
"""
from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field

from ..isa.syntax import parse_instruction
from .cfg import build_cfg, is_label
from .findings import Finding
from .hazards import HazardAnalysis, nops_for
from .separation import Separation

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


def _covers(sep: Separation, a: int, f: Finding, want: dict) -> dict | None:
    """Per counter, the value at anchor `a` that retires f's producer before f's consumer (want:
    the values the consumer needs), or None when a walk from the producer reaches the consumer
    (or a loop) without passing `a`."""
    p, c = f.producer.index, f.consumer.index
    if a == c:
        return dict(want)
    if sep.bypass(p, a, c):
        return None
    out = {}
    for ctr, v in want.items():
        between = sep.between(a, c, sep.kind(p, ctr))
        if between is None:
            return None
        out[ctr] = max(0, v - between)
    return out


def _candidates(ranges, in_block: dict, own: int | None, made: int):
    """Indices of the waits made so far that lie in ranges (all of them for None), and of the
    consumer's own wait (own), in the order they were made."""
    if ranges is None:
        return range(made)
    out = set() if own is None else {own}
    for b, lo, hi in ranges:
        at_pos, idx = in_block.get(b, ((), ()))
        out.update(idx[bisect_left(at_pos, lo):bisect_right(at_pos, hi)])
    return sorted(out)


def group_fixes(items: list, findings: list[Finding]) -> list[Fix]:
    """Findings grouped by the fix that clears them, in program order of the fix. A finding joins
    the first wait (in the order they were made) that covers it; only waits where
    `Separation.candidates` says one can be are asked."""
    items = list(items)
    cfg = build_cfg(items) if items else None
    sep = Separation(cfg) if cfg is not None else None
    fixes: list[Fix] = []
    by_consumer: dict[int, Fix] = {}
    waits: list[Fix] = []
    # block -> (positions, indices in `waits`) of the waits anchored there; waits are made in the
    # order of their consumers, so both lists ascend
    in_block: dict[int, tuple[list[int], list[int]]] = {}
    at_consumer: dict[int, int] = {}             # consumer -> the wait anchored at it (it covers all of its findings)
    wanted: dict[str, dict] = {}                 # fix text -> the counter values it names
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
        want = wanted.get(f.fix)
        if want is None:
            want = wanted[f.fix] = _wanted(f)
        want = want or {"vm": f.needed}
        p = f.producer.index if f.producer else None
        joined = False
        order = () if sep is None or p is None else _candidates(sep.candidates(p, c), in_block, at_consumer.get(c),
                                                                len(waits))
        for n in order:
            fx = waits[n]
            at = _covers(sep, fx.anchor, f, want)
            if at is None:
                continue
            for ctr, x in at.items():
                fx.counters[ctr] = min(fx.counters.get(ctr, x), x)
            fx.findings.append(f)
            joined = True
            break
        if not joined:
            fx = Fix("waitcnt", c, dict(want), findings=[f])
            if cfg is not None:
                at_pos, idx = in_block.setdefault(cfg.block_of[c], ([], []))
                at_pos.append(sep.pos[c])
                idx.append(len(waits))
                at_consumer[c] = len(waits)
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
