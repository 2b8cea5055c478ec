"""Step observer: progress reports and a per-instruction trace of one wave with register deltas.

Installed as `Machine.observer` by `run_program(progress=..., trace=WAVE)`. Loads land at the wait
that retires them, so their register writes show up as deltas of that `s_waitcnt` (as on silicon,
where the data is not architecturally visible before).
"""
from __future__ import annotations

import sys

import numpy as np

from .machine import AOFF, S_EXEC, S_M0, S_SCC, S_VCC

_SNAMES = {S_VCC: "vcc_lo", S_VCC + 1: "vcc_hi", S_M0: "m0", S_SCC: "scc", S_EXEC: "exec_lo", S_EXEC + 1: "exec_hi"}


def _rname(r: int) -> str:
    return f"v{r}" if r < AOFF else f"a{r - AOFF}"


def _lanes(old: np.ndarray, new: np.ndarray, show: int = 4) -> str:
    ch = np.nonzero(old != new)[0]
    vals = " ".join(f"{int(l)}:0x{int(new[l]):08x}" for l in ch[:show])
    more = f" … (+{len(ch) - show} lanes)" if len(ch) > show else ""
    return f"[{len(ch)} lanes] {vals}{more}"


class Observer:
    def __init__(self, progress=None, trace: int | None = None, out=None, every: int = 64):
        self.progress = progress
        self.trace = trace
        self.out = out or sys.stdout
        self.every = every
        self._snap = None

    def _in(self, m, w) -> bool:
        if isinstance(w, slice):
            return True
        return bool((w == self.trace).any())

    def before(self, m, p, w):
        if self.trace is not None and self._in(m, w):
            t = self.trace
            self._snap = (m.R[t].copy(), m.S[t].copy(), int(m.pc[t]))
        else:
            self._snap = None

    def after(self, m, p, w):
        if self._snap is not None:
            self._print(m, p)
        if self.progress is not None and m.steps % self.every == 0:
            self.progress(m.wave_instructions)

    def _print(self, m, p):
        R0, S0, pc0 = self._snap
        t = self.trace
        inst = m.program.insts[p]
        parts = []
        rows = np.nonzero((R0 != m.R[t]).any(axis=1))[0]
        for r in rows:
            parts.append(f"{_rname(int(r))} {_lanes(R0[r], m.R[t, r])}")
        for si in np.nonzero(S0 != m.S[t])[0]:
            si = int(si)
            parts.append(f"{_SNAMES.get(si, f's{si}')} 0x{int(S0[si]):08x}->0x{int(m.S[t, si]):08x}")
        npc = int(m.pc[t])
        jump = f"  -> pc 0x{m.program.insts[npc].pc:04x}" if npc != pc0 + 1 and npc < len(m.program.insts) else ""
        print(f"[w{t}] {inst.pc or 0:04x}: {inst.text():<60s}{jump}".rstrip(), file=self.out)
        for part in parts:
            print(f"        {part}", file=self.out)
