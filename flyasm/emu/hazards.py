"""Dynamic hazard checking: the static checker's gfx950 rule table (flyasm/check/rules.py, notes
§4.2), evaluated on the instruction stream each wave actually executed.

Wait states are counted as the wave issued them (every instruction 1, `s_nop N` N+1; notes §4.1,
`check.hazards.wait_states`), so loops, taken/not-taken branches and divergent paths are measured
exactly instead of the static worst path. A consumer closer to its producer than the table allows
raises an EmuError naming both instructions, their pcs and the author's Python lines (`.loc`).

Modes: "verify" (LLVM's counting, the default), "strict" (ISA wording: only VALU and s_nop count,
ISA-only rows on), None/False (off). The search semantics follow `check.hazards.HazardAnalysis`:
rules sharing a (group, operand) key share one backward search, the nearest producer matching any
rule of the group decides, and a key expires once the distance reaches the largest wait count of
its rules. Not modelled: the soft-clause (XNACK replay) rule, which is not a wait-state hazard.

History is kept per wave in a ring of (instruction index, wait-state clock after it). While every
step runs all waves together (lockstep) one shared Python history is used; the first step that runs
a subset switches to per-wave numpy rings.
"""
from __future__ import annotations

from collections import deque

import numpy as np

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

    def match(self, pi: int, p) -> list:
        got = self.matches.get(pi)
        if got is None:
            got = []
            c = self.inst
            for k, ((_, tag, regs), rules) in enumerate(self.keys):
                for rule in rules:
                    if rule.applies(p, c, tag, regs):
                        got.append((k, rule.need(p, c, tag, regs), rule))
                        break
            self.matches[pi] = got
        return got


class HazardTracker:
    def __init__(self, program, n_waves: int, mode: str = "verify"):
        if mode not in MODES:
            raise ValueError(f"hazards is one of {MODES} or None, not {mode!r}")
        self.program = program
        self.insts = program.insts
        self.strict = mode == "strict"
        self.rules = [r for r in RULES if self.strict or not r.strict_only]
        self.W = n_waves
        # verify: every instruction >= 1 wait state, so MAX_WAITS + 1 entries always reach the limit;
        # strict: SALU/memory count 0 - a longer ring (a producer further back than it is not seen)
        self.H = MAX_WAITS + 2 if not self.strict else 128
        self.ws = [wait_states(i, self.strict) for i in self.insts]
        self.cons: list[_Consumer | None] = [None] * len(self.insts)
        self.lock = True                      # all waves executed every step so far
        self.hist: deque = deque(maxlen=self.H)
        self.clock = 0
        self.hi = self.hc = self.head = self.clk = None

    # ---- per-wave arrays (after the first divergent step) ----------------------------------------
    def _unlock(self):
        H, W = self.H, self.W
        self.hi = np.full((W, H), -1, np.int64)
        self.hc = np.zeros((W, H), np.int64)
        n = len(self.hist)
        for j, (p, c) in enumerate(self.hist):
            self.hi[:, j] = p
            self.hc[:, j] = c
        self.head = np.full(W, n, np.int64)
        self.clk = np.full(W, self.clock, np.int64)
        self.lock = False

    def consumer(self, p: int) -> _Consumer:
        c = self.cons[p]
        if c is None:
            c = self.cons[p] = _Consumer(self.insts[p], self.rules)
        return c

    def step(self, w, p: int):
        """Check instruction p as a consumer for waves w, then record that they issued it."""
        cons = self.cons[p] or self.consumer(p)
        full = isinstance(w, slice)
        if self.lock and not full:
            self._unlock()
        if self.lock:
            if cons.keys:
                now = self.clock
                self._walk(cons, p, [(pi, now - c) for pi, c in reversed(self.hist)], None)
            self.clock += self.ws[p]
            self.hist.append((p, self.clock))
            return
        ids = np.arange(self.W) if full else w
        head = self.head[ids]
        if cons.keys:
            order = (head[:, None] - 1 - np.arange(self.H)[None, :]) % self.H
            hi = np.take_along_axis(self.hi[ids], order, 1)
            dist = self.clk[ids][:, None] - np.take_along_axis(self.hc[ids], order, 1)
            rows = np.concatenate([hi, dist], 1)
            if (rows == rows[0]).all():
                uniq, first = rows[:1], np.zeros(1, np.int64)
            else:
                uniq, first = np.unique(rows, axis=0, return_index=True)
            for r, f in zip(uniq, first):
                self._walk(cons, p, list(zip(r[:self.H].tolist(), r[self.H:].tolist())), int(ids[f]))
        pos = head % self.H
        self.clk[ids] += self.ws[p]
        self.hi[ids, pos] = p
        self.hc[ids, pos] = self.clk[ids]
        self.head[ids] = head + 1

    def _walk(self, cons: _Consumer, p: int, hist, wave):
        pending = set(range(len(cons.keys)))
        limits = cons.limits
        insts = self.insts
        for pi, d in hist:
            if pi < 0 or d >= cons.maxlimit:
                break
            for k, need, rule in cons.match(pi, insts[pi]):
                if k in pending and d < limits[k]:
                    pending.discard(k)
                    if need > d:
                        self._raise(p, pi, d, need, rule, wave)
            if not pending:
                break

    def _raise(self, ci, pi, dist, need, rule, wave):
        from ..check.hazards import nops_for
        from .machine import where
        c, pr = self.insts[ci], self.insts[pi]
        unit = "VALU/s_nop wait states" if self.strict else "wait states"
        row = f"row {rule.row}" if rule.row is not None else "no row"
        nops = " + ".join(i.text() for i in nops_for(need - dist))
        who = f" (wave {wave})" if wave is not None else ""
        raise EmuError(f"hazard{who}: {where(c)} executes {dist} {unit} after {where(pr)} but "
                       f"{rule.title} needs {need} (notes §4.2 {row}, {rule.source}); add {nops} before it")


# ---- emulator fidelity options ------------------------------------------------------------------
OPTIONS = {"hazards": "verify", "races": True, "strict": True}


class options:
    """Defaults for the emulator's fidelity checks, as a context manager (or call .set()):

        with flyasm.emu.hazards.options(hazards=None, races=False, strict=False):
            launch(...)

    hazards: "verify" (LLVM wait-state counting, default), "strict" (ISA: only VALU/s_nop count) or
    None (off). races: LDS race detection between barriers. strict: ISA-required conditions raise
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


def setup_fidelity(m, hazards="default", races="default", strict="default"):
    """Attach the fidelity checks to a Machine (called from Machine.__init__)."""
    hazards = OPTIONS["hazards"] if hazards == "default" else hazards
    races = OPTIONS["races"] if races == "default" else races
    strict = OPTIONS["strict"] if strict == "default" else strict
    if hazards is True:
        hazards = "verify"
    m.hz = HazardTracker(m.program, m.W, hazards) if hazards else None
    if races and m.lds_size:
        from .races import LdsRaces
        m.races = LdsRaces(m.wg_of, m.lds_size, m.LDS.size)
    else:
        m.races = None
    m.strict = bool(strict)
    m.unaligned_lds = strict == "unaligned" or not strict
