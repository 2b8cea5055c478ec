"""The one IR node: Instruction(mnemonic, operands, modifiers, loc).

Builders, the .s parser and the code-object disassembler all produce it; the checker, the
reports and the emulator consume it. Which registers it reads and writes comes from the tables.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from ..errors import SourceLoc
from . import tables
from .operands import Expr, Imm, Label, Mod, Operand, Reg, Special, Waitcnt, operand_reg_set

# Modifiers printed in hex, as llvm-mc prints them.
HEX_MODS = {"row_mask", "bank_mask"}
# Bare flags (no value).
FLAGS = {"offen", "idxen", "lds", "sc0", "sc1", "nt", "glc", "slc", "dlc", "clamp", "gds", "tfe", "lwe", "d16",
         "da", "r128", "a16", "unorm", "addr64", "row_mirror", "row_half_mirror", "high"}


def format_modifier(name: str, value) -> str:
    if value is True:
        return name
    if isinstance(value, (list, tuple)):
        return f"{name}:[{','.join(str(x) for x in value)}]"
    if isinstance(value, int) and name in HEX_MODS:
        return f"{name}:0x{value:x}"
    return f"{name}:{value}"


@dataclass(eq=False)
class Instruction:
    mnemonic: str
    operands: tuple[Operand, ...] = ()
    modifiers: dict = field(default_factory=dict)
    loc: SourceLoc | None = None
    region: tuple[str, ...] = ()
    comment: str | None = None
    raw: bytes | None = None      # exact encoding, written as .long words when text cannot express it
    pc: int | None = None         # byte offset in .text when it came from a code object
    # Which LDS buffer an LDS access touches, when the author knows it (double-buffered pipelines):
    # the wait-counter checker then orders it only against accesses of the same buffer. The writer
    # keeps it as a `; lds:NAME` comment so .s files carry it too.
    lds_buffer: str | None = None

    # ---- table facts -------------------------------------------------------------------------
    @cached_property
    def lookup(self) -> tables.Lookup:
        return tables.lookup(self.mnemonic)

    @cached_property      # derived from the cached lookup: fixed for the instruction's life
    def info(self) -> dict:
        return self.lookup.info

    @cached_property
    def name(self) -> str:
        """Canonical mnemonic without encoding suffix (what the instruction *is*)."""
        return self.lookup.canonical

    @property
    def suffix(self) -> str:
        return self.lookup.suffix

    @cached_property
    def unit(self) -> str:
        return self.info["unit"]

    @cached_property
    def family(self) -> str:
        return self.info["family"]

    @property
    def counter(self) -> str | None:
        return self.info.get("counter")

    @property
    def passes(self) -> int | None:
        return tables.passes(self.info, self.modifiers)

    @property
    def is_dpp(self) -> bool:
        return self.suffix == "_dpp" or any(m in self.modifiers for m in tables.DPP_CONTROLS)

    @property
    def is_sdwa(self) -> bool:
        return self.suffix == "_sdwa" or any(m in self.modifiers for m in ("dst_sel", "src0_sel", "src1_sel"))

    @property
    def is_lds_dma(self) -> bool:
        """A VMEM load whose data lands in LDS, not in VGPRs: `buffer_load_* … lds` and
        `global/scratch_load_lds_*` (notes §3.3). Tracked by vmcnt; reads M0."""
        return self.info.get("mem") == "load" and (
            (self.family == "MUBUF" and bool(self.modifiers.get("lds"))) or "_load_lds_" in self.name)

    @cached_property
    def slots(self) -> list[dict]:
        return tables.slots(self.info, self.modifiers, self.suffix, self.operands)

    # ---- registers -------------------------------------------------------------------------
    @cached_property
    def operand_access(self) -> tuple[tuple[str, str, frozenset], ...]:
        """(slot name, access "r"/"w"/"rw", registers) of each operand, worked out once (the
        checker's searches ask it of every instruction they pass)."""
        return tuple((slot["name"], slot.get("access", "r"), operand_reg_set(op))
                     for op, slot in zip(self.operands, self.slots))

    @cached_property
    def _rw(self) -> tuple[frozenset, frozenset]:
        reads, writes = set(), set()
        for _, acc, regs in self.operand_access:
            if "r" in acc:
                reads.update(regs)
            if "w" in acc:
                writes.update(regs)
        info = self.info
        for r in info.get("implicit_reads", ()):
            reads.add(("spec", r))
        for w in info.get("implicit_writes", ()):
            writes.add(("spec", w))
        if self.is_lds_dma:
            reads.add(("spec", "m0"))
        return frozenset(reads), frozenset(writes)

    @property
    def reads(self) -> frozenset:
        return self._rw[0]

    @property
    def writes(self) -> frozenset:
        return self._rw[1]

    def operand(self, slot_name: str) -> Operand | None:
        for op, slot in zip(self.operands, self.slots):
            if slot["name"] == slot_name:
                return op
        return None

    # ---- text ------------------------------------------------------------------------------
    def text(self) -> str:
        ops = ", ".join(str(o) for o in self.operands)
        mods = " ".join(format_modifier(k, v) for k, v in self.modifiers.items())
        return " ".join(x for x in (self.mnemonic, ops, mods) if x)

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return f"Instruction({self.text()!r})"

    def key(self) -> tuple:
        """Identity for round-trip comparison: canonical name, operand text, modifiers."""
        sfx = self.suffix if self.suffix in ("_dpp", "_sdwa") else ""
        mods = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in self.modifiers.items()))
        return (self.name + sfx, tuple(str(o) for o in self.operands), mods)


__all__ = ["Instruction", "format_modifier", "FLAGS", "Expr", "Imm", "Label", "Mod", "Reg", "Special", "Waitcnt"]
