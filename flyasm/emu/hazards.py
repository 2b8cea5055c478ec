"""Dynamic hazard checking: the static checker's gfx950 rule table (flyasm/check/rules.py, notes
§4.2), evaluated on the instruction stream each wave actually executed.

Wait states are counted as the wave issued them (every instruction 1, `s_nop N` N+1; notes §4.1,
`check.hazards.wait_states`), so loops, taken/not-taken branches and divergent paths are measured
exactly instead of the static worst path. A consumer closer to its producer than the table allows
raises an EmuError naming both instructions, their pcs and the author's Python lines (`.loc`).

Modes: "verify" (LLVM's counting, the default), "strict" (ISA wording: only VALU and s_nop count,
ISA-only rows on), "report" (verify's counting; every distinct hazard is listed in the run's
report and the run goes on, flyasm/emu/report.py), None/False (off). The search semantics follow `check.hazards.HazardAnalysis`:
rules sharing a (group, operand) key share one backward search, the nearest producer matching any
rule of the group decides, and a key expires once the distance reaches the largest wait count of
its rules. Not modelled: the soft-clause (XNACK replay) rule, which is not a wait-state hazard.

History is the sequence of instruction indices a wave issued (the last H of them): the distance
from a consumer back to an entry is the sum of the wait states of the entries issued after it, so
the sequence alone decides every check. Waves with the same sequence share one history (a group):
while every step runs all waves together (lockstep) there is one group and no per-wave state; a
step that runs part of a group splits it (the stepping waves get a copy of the sequence), groups
stepping in one batch whose sequences became equal again merge, and one group holding every wave
returns to the lockstep form. A step costs one backward search per group in the batch, whatever
the number of waves. Consumers and their producer matches are cached on the Program per mode.
"""
from __future__ import annotations

from collections import deque

import numpy as np

from ..check.citations import citation
from ..check.hazards import wait_states
from ..check.rules import RULES, SELECTORS, MAX_WAITS
from .memory import EmuError

MODES = ("verify", "strict")


class _Consumer:
    """Rule searches of one instruction as a consumer (keys, limits) and its lazily computed
    producer matches: producer index -> [(key number, wait states needed, rule)]."""
    __slots__ = ("keys", "limits", "maxlimit", "matches", "inst")

    def __init__(self, inst, rules):
        searches: dict[tuple, list] = {}
        for rule in rules:
            if rule.consumer(inst):
                for tag, regs in SELECTORS[rule.operands](inst):
                    searches.setdefault((rule.group, tag, regs), []).append(rule)
        self.inst = inst
        self.keys = list(searches.items())
        self.limits = []
        for _, rs in self.keys:
            self.limits.append(max(r.waits for r in rs) if all(isinstance(r.waits, int) for r in rs) else MAX_WAITS)
        self.maxlimit = max(self.limits, default=0)
        self.matches: dict[int, list] = {}

    def match(self, pi: int, p, produces) -> list:
        """produces: ids of the rules whose producer predicate holds for p (once per program)."""
        got = self.matches.get(pi)
        if got is None:
            got = []
            c = self.inst
            for k, ((_, tag, regs), rules) in enumerate(self.keys):
                for rule in rules:
                    if id(rule) in produces and rule.applies(p, c, tag, regs):
                        got.append((k, rule.need(p, c, tag, regs), rule))
                        break
            self.matches[pi] = got
        return got


class HazardTracker:
    def __init__(self, program, n_waves: int, mode: str = "verify", report=None, wg_of=None):
        if mode not in MODES:
            raise EmuError(f"hazards is one of {MODES}, 'report' or None, not {mode!r}")
        self.report = report          # a flyasm.emu.report.Report, or None: the first hazard raises
        self.wg_of = wg_of
        self.program = program
        self.insts = program.insts
        self.strict = mode == "strict"
        self.rules = [r for r in RULES if self.strict or not r.strict_only]
        self.W = n_waves
        # verify: every instruction >= 1 wait state, so MAX_WAITS + 1 entries always reach the limit;
        # strict: SALU/memory count 0 - a longer ring (a producer further back than it is not seen)
        self.H = MAX_WAITS + 2 if not self.strict else 128
        cache = program.__dict__.setdefault("_hazards", {})
        if mode not in cache:       # consumers and their producer matches depend only on program + mode
            cache[mode] = ([wait_states(i, self.strict) for i in self.insts], [None] * len(self.insts),
                           [None] * len(self.insts))
        self.ws, self.cons, self.prods = cache[mode]
        self.hists: list = [deque(maxlen=self.H)]     # group -> issued instruction indices (newest last)
        self.gid = None                               # wave -> group; None: one group of all waves
        self.count: list = [n_waves]                  # waves per group

    @property
    def lock(self) -> bool:
        """All waves share one history (every step so far ran them all, or they reconverged)."""
        return self.gid is None

    def produces(self, pi: int) -> frozenset:
        """Rules instruction pi can be the producer of: most (consumer, producer) pairs a search
        meets fail on the producer's kind, so that test runs once per instruction, not per pair."""
        got = self.prods[pi]
        if got is None:
            p = self.insts[pi]
            got = self.prods[pi] = frozenset(id(r) for r in self.rules if r.producer(p))
        return got

    def consumer(self, p: int) -> _Consumer:
        c = self.cons[p]
        if c is None:
            c = self.cons[p] = _Consumer(self.insts[p], self.rules)
        return c

    def step(self, w, p: int):
        """Check instruction p as a consumer for waves w, then record that they issued it."""
        cons = self.cons[p] or self.consumer(p)
        full = isinstance(w, slice)
        if self.gid is None:
            if full:
                h = self.hists[0]
                if cons.keys:
                    self._walk(cons, p, h, None)
                h.append(p)
                return
            self.gid = np.zeros(self.W, np.int64)
        gids = self.gid if full else self.gid[w]
        ids = None
        g0 = int(gids[0])
        if (gids == g0).all():
            parts = [(g0, len(gids), None)]
        else:
            ids = np.arange(self.W) if full else w
            ug, cnt = np.unique(gids, return_counts=True)
            parts = [(int(g), int(c), ids[gids == g]) for g, c in zip(ug, cnt)]
        stepped = []
        for g, n, members in parts:
            if n != self.count[g]:                  # part of the group steps: it gets its own copy
                if members is None:
                    members = np.arange(self.W)[w] if full else w
                g = self._new_group(self.hists[g], members, g)
            h = self.hists[g]
            if cons.keys:
                self._walk(cons, p, h, (g, members))
            h.append(p)
            stepped.append(g)
        if len(stepped) > 1:
            self._merge(stepped)

    def _first_wave(self, who):
        """The lowest wave of the stepping group who = (group, members or None = the whole group)."""
        if who is None:
            return None
        g, members = who
        return int(members[0]) if members is not None else int(np.argmax(self.gid == g))

    def _new_group(self, h, members, old):
        g = len(self.hists)
        for k, c in enumerate(self.count):            # reuse an empty slot
            if c == 0:
                g = k
                break
        if g == len(self.hists):
            self.hists.append(None)
            self.count.append(0)
        self.hists[g] = deque(h, maxlen=self.H)
        self.gid[members] = g
        self.count[g] = len(members)
        self.count[old] -= len(members)
        if self.count[old] == 0:
            self.hists[old] = None
        return g

    def _merge(self, groups):
        """Groups that just issued the same instruction merge when their histories are equal."""
        keep = {}
        for g in groups:
            h = self.hists[g]
            key = tuple(h)
            t = keep.get(key)
            if t is None:
                keep[key] = g
                continue
            self.gid[self.gid == g] = t
            self.count[t] += self.count[g]
            self.count[g] = 0
            self.hists[g] = None
            if self.count[t] == self.W:               # everyone again: back to the lockstep form
                self.hists, self.count, self.gid = [self.hists[t]], [self.W], None
                return

    def _walk(self, cons: _Consumer, p: int, hist, who):
        """Backward search from consumer p over the issued sequence hist (newest last); who names
        the waves for a message (None: all waves in lockstep)."""
        pending = set(range(len(cons.keys)))
        limits = cons.limits
        maxlimit = cons.maxlimit
        insts, ws, prods = self.insts, self.ws, self.prods
        d = 0
        for pi in reversed(hist):
            if d >= maxlimit:
                break
            for k, need, rule in cons.match(pi, insts[pi], prods[pi] or self.produces(pi)):
                if k in pending and d < limits[k]:
                    pending.discard(k)
                    if need > d:
                        self._raise(p, pi, d, need, rule, who)
            if not pending:
                break
            d += ws[pi]

    def _raise(self, ci, pi, dist, need, rule, who):
        c, pr = self.insts[ci], self.insts[pi]
        wave = self._first_wave(who)

        def message():
            from ..check.hazards import nops_for
            from .machine import where
            unit = "VALU/s_nop wait states" if self.strict else "wait states"
            nops = " + ".join(i.text() for i in nops_for(need - dist))
            return (f"hazard {rule.id}{f' (wave {wave})' if wave is not None else ''}: {where(c)} executes "
                    f"{dist} {unit} after {where(pr)} but {rule.title} needs {need} "
                    f"({citation(rule.id, rule.row)}); add {nops} before it")
        if self.report is None:
            raise EmuError(message())
        n = self.W if who is None else (self.count[who[0]] if who[1] is None else len(who[1]))
        w0 = 0 if wave is None else wave
        self.report.hit("hazard", rule.id, c, pr, w0, int(self.wg_of[w0]), n, message)


# ---- emulator fidelity options ------------------------------------------------------------------
OPTIONS = {"hazards": "verify", "races": True, "strict": True}


class options:
    """Defaults for the emulator's fidelity checks, as a context manager (or call .set()):

        with flyasm.emu.hazards.options(hazards=None, races=False, strict=False):
            launch(...)

    hazards: "verify" (LLVM wait-state counting, default), "strict" (ISA: only VALU/s_nop count),
    "report" (verify's counting, listed instead of raised) or None (off). races: LDS race detection
    between barriers (True), "report" or False. strict: ISA-required conditions raise
    (partial EXEC for MFMA / ds_read_*_tr / permlane swap, DS alignment, LDS-DMA beyond the
    allocation); strict="unaligned" keeps the rest but allows unaligned DS access (unaligned mode).
    Machine(..., hazards=, races=, strict=) overrides these per run."""

    def __init__(self, **kw):
        bad = set(kw) - set(OPTIONS)
        if bad:
            raise TypeError(f"unknown emulator option(s) {sorted(bad)}; known: {sorted(OPTIONS)}")
        self.kw = kw
        self.saved = None

    def set(self):
        OPTIONS.update(self.kw)
        return self

    def __enter__(self):
        self.saved = dict(OPTIONS)
        OPTIONS.update(self.kw)
        return self

    def __exit__(self, *exc):
        OPTIONS.clear()
        OPTIONS.update(self.saved)


def setup_fidelity(m, hazards="default", races="default", strict="default", waive=()):
    """Attach the fidelity checks and their violation report to a Machine (from Machine.__init__)."""
    from .report import REPORT, Report
    hazards = OPTIONS["hazards"] if hazards == "default" else hazards
    races = OPTIONS["races"] if races == "default" else races
    strict = OPTIONS["strict"] if strict == "default" else strict
    if hazards is True:
        hazards = "verify"
    if hazards not in (None, False, REPORT) + MODES:
        raise EmuError(f"hazards is one of {MODES}, '{REPORT}' or None, not {hazards!r}")
    if races not in (None, False, True, REPORT):
        raise EmuError(f"races is True, False or '{REPORT}', not {races!r}")
    m.report = Report.create(hazards == REPORT, races == REPORT, waive)
    rep = m.report if m.report.report_kinds or m.report.waivers else None
    m.hz = HazardTracker(m.program, m.W, "verify" if hazards == REPORT else hazards, rep, m.wg_of) if hazards else None
    if races and m.lds_size:
        from .races import LdsRaces
        m.races = LdsRaces(m.wg_of, m.lds_size, m.LDS.size, rep, m.program.insts)
    else:
        m.races = None
    m.strict = bool(strict)
    m.unaligned_lds = strict == "unaligned" or not strict
