"""Hazard checking and s_nop insertion over a program's CFG.

Wait states are counted as LLVM's hazard recogniser counts them (notes §4.1,
`getWaitStatesSince` / `SIInstrInfo::getNumWaitStates`): every instruction is 1, `s_nop N` is N+1,
labels are 0, walking backwards through predecessor blocks and loop back edges; the distance to a
producer is the minimum over paths (we take the worst need over all paths). Strict mode counts
only `s_nop` and VALU instructions, as the ISA text words it, and adds rows 26/30/31.

Unlike LLVM (notes §4.3) the search is not cut at 19 wait states: a 16-pass XDL result needs 20.

Bound: per consumer, its backward searches walk predecessor blocks until every rule's horizon
(at most MAX_WAITS = 20 wait states) is passed; a (block, searches still open) state is walked
again only with fewer wait states than before, so at most MAX_WAITS + 1 times. In verify mode
every instruction is a wait state: a search ends within 21 instructions of the consumer on every
path, O(21 × blocks within that reach) per consumer. In ISA mode only VALU and s_nop count, so a
search may walk further, still each (block, open searches) at most 21 times. A soft clause is
scanned back over its own instructions only. No slices of blocks are copied per consumer.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ..isa.instruction import Instruction
from ..isa.operands import Imm
from ..isa.syntax import parse_instruction
from .cfg import CFG, build_cfg, is_label
from .citations import citation
from .findings import Finding, Site
from .rules import MAX_WAITS, RELATION_REGS, RULES, SELECTORS, Rule, is_valu

MODES = ("verify", "insert", "strict")
# Not a row of the notes' table: LLVM breaks memory clauses that would be unsafe to replay with XNACK.
SOFT_CLAUSE = Rule("soft_clause", None, "a VMEM/SMEM clause must not write a register it reads (XNACK replay)",
                   "clause", lambda c: False, "none", lambda p: False, "any", 1, source="checkSoftClauseHazards")
MAX_NOP = 16          # s_nop 15 = 16 wait states on gfx950


def nop_waits(ins: Instruction) -> int:
    op = ins.operands[0] if ins.operands else None
    return (int(op.value) if isinstance(op, Imm) else 0) + 1


def wait_states(ins: Instruction, strict: bool = False) -> int:
    if ins.name == "s_nop":
        return nop_waits(ins)
    if strict:
        return 1 if is_valu(ins) else 0
    return 1


@dataclass(frozen=True)
class Hit:
    rule: Rule
    producer: int          # item index
    distance: int          # wait states between producer and consumer (worst path)
    waits: int             # wait states the rule needs

    @property
    def need(self) -> int:
        return self.waits - self.distance


def _rule_max(rules: list[Rule]) -> int:
    if all(isinstance(r.waits, int) for r in rules):
        return max(r.waits for r in rules)
    return MAX_WAITS


class HazardAnalysis:
    def __init__(self, items: list, strict: bool = False, cfg: CFG | None = None):
        self.items = items
        self.strict = strict
        self.cfg = cfg or build_cfg(items)
        self.rules = [r for r in RULES if strict or not r.strict_only]
        self.extra: dict[int, int] = {}      # item index -> wait states of s_nops to insert before it
        # per item, the wait states it adds to a search walking back past it: its own and those of
        # the s_nops planned before it (lists: the walks read them for every instruction they pass)
        self._ws = [0 if is_label(it) else wait_states(it, strict) for it in items]
        # Per instruction, worked out once: a bit mask of the rules it can be the producer of and,
        # per such rule, the registers its relation compares (None: any). A rule whose relation
        # names no register of the producer can never match it, so it is left out of the mask:
        # the backward searches then step over most instructions on one integer test.
        self._bit = {r.id: 1 << n for n, r in enumerate(self.rules)}
        # What an instruction is as producer and as consumer depends only on what it says: both
        # are worked out once per distinct text (CFG.keys).
        self._key = self.cfg.keys
        self._prod_mask = [0] * len(items)
        self._prod_regs: list[dict | None] = [None] * len(items)
        for j, (mask, regs) in self.cfg.per_text(self._producer).items():
            self._prod_mask[j], self._prod_regs[j] = mask, regs
        self._pos = {i: n for b in self.cfg.blocks for n, i in enumerate(b.insts)}
        self._plans: dict[tuple, tuple] = {}
        self._limit_mask: dict[tuple, tuple] = {}

    def _producer(self, it: Instruction) -> tuple[int, dict]:
        """(mask of the rules `it` can be the producer of, {rule id: registers its relation
        compares (None: any)})."""
        mask, regs, rel, is_producer = 0, {}, {}, {}
        for r in self.rules:
            ok = is_producer.get(r.producer)
            if ok is None:
                ok = is_producer[r.producer] = r.producer(it)
            if ok:
                if r.relation not in rel:
                    rel[r.relation] = RELATION_REGS[r.relation](it)
                rr = rel[r.relation]
                if rr is None or rr:
                    mask |= self._bit[r.id]
                    regs[r.id] = rr
        return mask, regs

    def _mask(self, rules: list[Rule]) -> int:
        m = 0
        for r in rules:
            m |= self._bit[r.id]
        return m

    @staticmethod
    def _pending_state(pending, wanted, limit) -> tuple[int, int]:
        """The rules any pending search may stop at (a mask) and the nearest limit."""
        m, h = 0, MAX_WAITS + 1
        for k in pending:
            m |= wanted[k]
            if limit[k] < h:
                h = limit[k]
        return m, h

    def _searches(self, ci: int) -> tuple:
        """(searches, limit, wanted, keys) of the consumer at item ci: the backward searches it
        starts, one per (group, operand tag, registers), each with its rules in table order, the
        farthest wait states it looks and the rules it may stop at (a mask)."""
        ck = self._key[ci]
        plan = self._plans.get(ck)
        if plan is not None:
            return plan
        searches: dict[tuple, list[Rule]] = {}
        selected: dict[str, list] = {}
        is_consumer: dict = {}          # many rules share one consumer predicate: ask it once
        c = self.items[ci]
        for rule in self.rules:
            pred = rule.consumer
            ok = is_consumer.get(pred)
            if ok is None:
                ok = is_consumer[pred] = pred(c)
            if ok:
                sel = selected.get(rule.operands)
                if sel is None:
                    sel = selected[rule.operands] = SELECTORS[rule.operands](c)
                for tag, regs in sel:
                    searches.setdefault((rule.group, tag, regs), []).append(rule)
        limit, wanted = {}, {}
        for k, rules in searches.items():
            ids = tuple(r.id for r in rules)
            lm = self._limit_mask.get(ids)
            if lm is None:
                lm = self._limit_mask[ids] = (_rule_max(rules), self._mask(rules))
            limit[k], wanted[k] = lm
        plan = self._plans[ck] = (searches, limit, wanted, frozenset(searches))
        return plan

    def hits(self, ci: int) -> list[Hit]:
        """Every rule whose nearest producer is too close to the consumer at item `ci`."""
        c = self.items[ci]
        searches, limit, wanted, keys = self._searches(ci)
        if not searches:
            clause = self.clause_hit(ci)
            return [clause] if clause else []
        best: dict[tuple, Hit] = {}
        cfg, items, ws_of = self.cfg, self.items, self._ws
        prod_mask, prod_regs = self._prod_mask, self._prod_regs
        seen: dict[tuple, int] = {}
        stack = [(cfg.block_of[ci], self._pos[ci], self.extra.get(ci, 0), keys)]
        while stack:
            bid, pos, ws, pending = stack.pop()
            insts = cfg.blocks[bid].insts
            any_wanted, horizon = self._pending_state(pending, wanted, limit)
            for q in range(pos - 1, -1, -1):          # no slice: a long block is not copied per consumer
                j = insts[q]
                done = ()
                if prod_mask[j] & any_wanted:          # else no pending search can stop here
                    p = items[j]
                    regs_of = prod_regs[j]
                    done = set()
                    for key in pending:
                        if not prod_mask[j] & wanted[key]:
                            continue
                        _, tag, regs = key
                        for rule in searches[key]:
                            if rule.id not in regs_of:
                                continue
                            rr = regs_of[rule.id]
                            if (rr is None or rr & regs) and (rule.when is None or rule.when(p, c, tag, regs)):
                                h = Hit(rule, j, ws, rule.need(p, c, tag, regs))
                                if key not in best or h.need > best[key].need:
                                    best[key] = h
                                done.add(key)
                                break
                ws += ws_of[j]
                if not done and ws < horizon:
                    continue
                pending = frozenset(k for k in pending if k not in done and ws < limit[k])
                if not pending:
                    break
                any_wanted, horizon = self._pending_state(pending, wanted, limit)
            else:
                for pred in cfg.blocks[bid].preds:
                    st = (pred, pending)
                    if st in seen and seen[st] <= ws:
                        continue
                    seen[st] = ws
                    stack.append((pred, len(cfg.blocks[pred].insts), ws, pending))
        out = [h for h in best.values() if h.need > 0]
        clause = self.clause_hit(ci)
        return out + [clause] if clause else out

    def clause_hit(self, ci: int) -> Hit | None:
        """Soft clause (checkSoftClauseHazards, XNACK replay): consecutive VMEM (or SMEM) ops may be
        replayed, so none may write a register another one in the clause reads; a store ends it.
        One wait state (the s_nop LLVM puts between) breaks the clause."""
        c = self.items[ci]
        kind = "smem" if c.unit == "SMEM" else "vmem" if c.unit in ("VMEM", "FLAT") else None
        if kind is None or self.extra.get(ci, 0):
            return None
        insts = self.cfg.blocks[self.cfg.block_of[ci]].insts
        defs, uses, first = set(), set(), None
        for q in range(self._pos[ci] - 1, -1, -1):
            j = insts[q]
            p = self.items[j]
            pk = "smem" if p.unit == "SMEM" else "vmem" if p.unit in ("VMEM", "FLAT") else None
            if pk != kind or self.extra.get(j, 0) and j != ci:
                if pk == kind:        # nops inserted before p: p starts the clause
                    defs |= p.writes; uses |= p.reads; first = j
                break
            defs |= p.writes
            uses |= p.reads
            first = j
        if first is None or not defs:
            return None
        if c.info.get("mem") in ("store", "atomic") or (defs | c.writes) & (uses | c.reads):
            return Hit(SOFT_CLAUSE, first, 0, 1)
        return None

    def needed(self, ci: int) -> int:
        return max((h.need for h in self.hits(ci)), default=0)

    def instruction_indices(self) -> list[int]:
        return [i for i, it in enumerate(self.items) if not is_label(it)]

    def plan_nops(self) -> dict[int, int]:
        """Wait states to add before each instruction, in program order (as LLVM's recogniser does:
        nops placed earlier count for later consumers)."""
        for ci in self.instruction_indices():
            n = self.needed(ci)
            if n > 0:
                self._ws[ci] += n - self.extra.get(ci, 0)
                self.extra[ci] = n
        return dict(self.extra)


def nops_for(n: int) -> list[Instruction]:
    out = []
    while n > 0:
        k = min(n, MAX_NOP)
        out.append(parse_instruction(f"s_nop {k - 1}"))
        n -= k
    return out


@lru_cache(maxsize=None)
def _nops_text(n: int) -> str:
    return " + ".join(i.text() for i in nops_for(n))


def _finding(items, h: Hit, ci: int, strict: bool) -> Finding:
    c, p = Site(ci, items[ci]), Site(h.producer, items[h.producer])
    nops = _nops_text(h.need)
    unit = "VALU/s_nop wait states" if strict else "wait states"
    msg = (f"{c.describe()} is {h.distance} {unit} after {p.describe()} but {h.rule.title} needs "
           f"{h.waits} ({citation(h.rule.id, h.rule.row)}); add {nops} right before it")
    return Finding(h.rule.id, msg, c, p, h.distance, h.waits, f"insert {nops} before #{ci}", h.rule.row, "hazard")


def check_hazards(items: list, mode: str = "verify", cfg: CFG | None = None) -> list[Finding]:
    if mode not in MODES:
        raise ValueError(f"mode is one of {MODES}, not {mode!r}")
    strict = mode == "strict"
    ha = HazardAnalysis(items, strict, cfg)
    out = []
    for ci in ha.instruction_indices():
        seen = set()
        for h in sorted(ha.hits(ci), key=lambda h: (-h.need, h.producer)):
            # one finding per (rule, producer): two sources naming the same VGPR are one hazard
            if (h.rule.id, h.producer) not in seen:
                seen.add((h.rule.id, h.producer))
                out.append(_finding(items, h, ci, strict))
    return out


def insert_nops(items: list, strict: bool = False) -> list:
    """A new program with the fewest s_nops that clear every hazard: each consumer gets exactly
    what it lacks, merged with an s_nop right before it, split at 16 wait states per s_nop."""
    ha = HazardAnalysis(items, strict)
    extra = ha.plan_nops()
    out: list = []
    for i, it in enumerate(items):
        n = extra.get(i, 0)
        if n > 0:
            if out and not is_label(out[-1]) and out[-1].name == "s_nop":
                n += nop_waits(out.pop())
            out.extend(nops_for(n))
        out.append(it)
    return out


def inserted_wait_states(items: list, strict: bool = False) -> list[int]:
    """Wait states insert mode adds before each instruction (labels skipped)."""
    ha = HazardAnalysis(items, strict)
    extra = ha.plan_nops()
    return [extra.get(i, 0) for i in ha.instruction_indices()]
