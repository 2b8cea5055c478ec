"""What a check reports: one Finding per (rule, consumer, producer)."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from ..isa.instruction import Instruction


@dataclass(frozen=True)
class Site:
    index: int                 # position in the program (items, labels included)
    ins: Instruction

    @property
    def pc(self):
        return self.ins.pc

    @cached_property
    def text(self) -> str:
        """The instruction's text (worked out once: a kernel with many findings names the same
        instruction in thousands of them)."""
        return self.ins.text()

    @property
    def loc(self):
        return self.ins.loc

    def where(self) -> str:
        parts = []
        if self.loc is not None:
            parts.append(str(self.loc))
        if self.pc is not None:
            parts.append(f"pc 0x{self.pc:x}")
        parts.append(f"#{self.index}")
        return ", ".join(parts)

    @cached_property
    def _described(self) -> str:
        return f"'{self.text}' ({self.where()})"

    def describe(self) -> str:
        return self._described

    def to_dict(self) -> dict:
        return {"index": self.index, "pc": self.pc, "text": self.text,
                "loc": str(self.loc) if self.loc is not None else None}


@dataclass(frozen=True)
class Finding:
    rule: str
    message: str
    consumer: Site
    producer: Site | None
    found: int                 # wait states (hazards) / counter value (waits) that are there
    needed: int                # wait states the rule needs / counter value that would suffice
    fix: str
    row: int | None = None     # hazard-table row (notes §4.2), None for wait-counter rules
    kind: str = "hazard"       # "hazard" or "waitcnt"
    # "error": the rule is broken on the ranges/distances the checker proved; "unproven": the
    # checker cannot prove two LDS ranges disjoint (a race it could not rule out, not one it saw)
    severity: str = "error"

    def __str__(self) -> str:
        sev = "" if self.severity == "error" else f" ({self.severity})"
        return f"[{self.rule}]{sev} {self.message}"

    def to_dict(self) -> dict:
        return {"rule": self.rule, "row": self.row, "kind": self.kind, "message": self.message,
                "consumer": self.consumer.to_dict(),
                "producer": self.producer.to_dict() if self.producer else None,
                "found": self.found, "needed": self.needed, "fix": self.fix, "severity": self.severity}
