"""Violation reports of one emulator run: report mode and waivers for the fidelity checks.

The hazard tracker and the LDS race tracker hand every violation they find to `Report.hit`. In
the default strict mode that raises the EmuError at once (the first violation stops the run); a
check in report mode (`hazards="report"`, `races="report"`) records it and the run goes on, so the
answer is still computed and every DISTINCT violation is listed: one row per (kind, rule, pc) with
its source line, count, first wave / workgroup, and the two instructions of its first occurrence
(plus how many other producer pcs met the same consumer). Distinct at the granularity a waiver
names. Waivers (`waive=["salu_m0",
("valu_sgpr_valu_read", 0x1a4)]`) accept a rule everywhere or at one consumer pc, in either mode,
and leave every other violation strict; a waiver that matched nothing is listed as unused.

Not reportable: reads of registers an in-flight load will still write, and LDS bytes an
in-flight LDS-DMA will still write. Their values are undefined, so the run's answer would mean
nothing; they stay errors -- unless the run is told the kernel relies on timing for them
(check_inflight="land", flyasm/emu/machine.py): the load then lands at the read, and the read is
a "wait" row (rule inflight_read).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import FlyasmError
from .memory import EmuError

# LDS race kinds (flyasm/emu/races.py), as rule names next to the hazard rule ids
RACE_RULES = ("lds_read_after_write", "lds_write_after_read", "lds_write_after_write")
REPORT = "report"


@dataclass
class Violation:
    kind: str                 # "hazard" or "race"
    rule: str                 # hazard rule id (flyasm/check/rules.py) or one of RACE_RULES
    pc: int                   # the consumer (hazard) / the access that found the race
    loc: str | None           # its source line (.loc), when the code object has one
    inst: str
    other_pc: int | None      # the producer (hazard) / the other wave's access (race), first occurrence
    other: str
    count: int                # wave-executions that violated it
    wave: int                 # first offending wave (launch-wide id) and its workgroup
    workgroup: int
    message: str              # the error the first occurrence would have raised
    waived: bool = False
    other_pcs: set = field(default_factory=set)   # every producer / other access pc seen
    waiver: tuple | None = None                   # the waiver that accepted it

    def line(self) -> str:
        loc = f" ({self.loc})" if self.loc else ""
        other = f" / 0x{self.other_pc:x} '{self.other}'" if self.other_pc is not None else ""
        more = len(self.other_pcs - {self.other_pc})
        other += f" (+{more} other pc{'s' * (more > 1)})" if more else ""
        tag = " [waived]" if self.waived else ""
        return (f"{self.kind:6s} {self.rule:24s} pc 0x{self.pc:x}{loc} x{self.count} (first wave {self.wave}, "
                f"workgroup {self.workgroup}): '{self.inst}'{other}{tag}")


def _parse_waivers(waive, known) -> list[tuple[str, int | None]]:
    out = []
    for w in waive or ():
        if isinstance(w, str):
            rule, pc = w, None
        elif isinstance(w, (tuple, list)) and len(w) == 2 and isinstance(w[0], str) and isinstance(w[1], int):
            rule, pc = w[0], int(w[1])
        else:
            raise FlyasmError(f"a waiver is a rule name or (rule, pc), not {w!r}", find_loc=False)
        if rule not in known:
            raise FlyasmError(f"waiver {w!r}: '{rule}' is not a hazard rule or LDS race kind "
                              f"({', '.join(RACE_RULES)}, or an id in flyasm/check/rules.py)", find_loc=False)
        out.append((rule, pc))
    return out


@dataclass
class Report:
    """Distinct violations of one run and the waivers given to it."""
    report_kinds: frozenset = frozenset()          # kinds that record instead of raising
    waivers: list = field(default_factory=list)    # (rule, pc or None)
    violations: dict = field(default_factory=dict)
    waiver_hits: dict = field(default_factory=dict)

    @classmethod
    def create(cls, hazards_report: bool, races_report: bool, waive=()):
        from ..check.rules import RULES
        kinds = frozenset(k for k, on in (("hazard", hazards_report), ("race", races_report)) if on)
        ws = _parse_waivers(waive, {r.id for r in RULES} | set(RACE_RULES))
        return cls(kinds, ws, {}, {w: 0 for w in ws})

    def hit(self, kind: str, rule: str, inst, other, wave: int, workgroup: int, count: int, message):
        """One violation found by a check: record it (report mode or waived) or raise it. message:
        the error text, or a callable making it (only the first occurrence of a row needs it)."""
        key = (kind, rule, inst.pc)
        v = self.violations.get(key)
        opc = other.pc if other is not None else None
        if v is not None:                       # seen before: recorded, so reportable or waived
            v.count += count
            v.other_pcs.add(opc)
            if v.waived:
                self.waiver_hits[v.waiver] += count
            return
        waiver = next((w for w in self.waivers if w[0] == rule and w[1] in (None, inst.pc)), None)
        text = message() if callable(message) else message
        if waiver is None and kind not in self.report_kinds:
            raise EmuError(text)
        if waiver is not None:
            self.waiver_hits[waiver] += count
        v = self.violations[key] = Violation(kind, rule, inst.pc, inst.loc, inst.text(), opc,
                                             other.text() if other is not None else "", count, int(wave),
                                             int(workgroup), text, waiver is not None, {opc}, waiver)

    # ---- reading it ------------------------------------------------------------------------
    def rows(self, kind: str | None = None, include_waived: bool = True) -> list[Violation]:
        """Violations in (kind, pc) order."""
        return sorted((v for v in self.violations.values() if (kind is None or v.kind == kind)
                       and (include_waived or not v.waived)), key=lambda v: (v.kind, v.pc))

    def rules(self, include_waived: bool = True) -> dict[str, int]:
        """Rule -> number of distinct violations (consumer pcs)."""
        out: dict[str, int] = {}
        for v in self.rows(include_waived=include_waived):
            out[v.rule] = out.get(v.rule, 0) + 1
        return out

    @property
    def unused_waivers(self) -> list:
        return [(r if pc is None else (r, pc)) for (r, pc), n in self.waiver_hits.items() if n == 0]

    def __bool__(self) -> bool:
        return bool(self.violations) or bool(self.waivers)

    def text(self) -> str:
        rows = self.rows()
        head = f"{len(rows)} distinct violation(s)" + (
            f", {sum(v.waived for v in rows)} waived" if self.waivers else "")
        lines = [head] + ["  " + v.line() for v in rows]
        lines += [f"  unused waiver: {w!r}" for w in self.unused_waivers]
        return "\n".join(lines)
