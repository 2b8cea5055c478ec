"""Operand model: registers and ranges, special registers, constants, labels, source modifiers.

Register ranges use assembly's *inclusive* notation, so Python reads like the ISA:
``v[32:95]`` is 64 VGPRs (v32..v95), ``s[63:67]`` five SGPRs, ``a[0:15]`` sixteen AGPRs.
A range can be sliced again, relative to its own start and inclusive: ``S = v[32:95]; S[0:15]``
is v[32:47].
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field

from ..errors import OperandError

# Inline constants (CDNA4 ISA §4.4.1 "Inline constants"): integers -16..64 and these floats.
INV_2PI = 0.15915494309189535
INLINE_FLOATS = {0.5: "0.5", -0.5: "-0.5", 1.0: "1.0", -1.0: "-1.0", 2.0: "2.0", -2.0: "-2.0",
                 4.0: "4.0", -4.0: "-4.0", INV_2PI: "0.15915494"}
INLINE_FLOAT_BITS = {struct.unpack("<I", struct.pack("<f", f))[0]: f for f in INLINE_FLOATS}

FILES = {"v": "VGPR", "a": "AGPR", "s": "SGPR"}
LIMITS = {"v": 512, "a": 256, "s": 106}


@dataclass(frozen=True)
class Reg:
    """A single register or a contiguous range in one register file ('v', 'a' or 's')."""

    file: str
    index: int
    count: int = 1

    def __post_init__(self):
        if self.index < 0 or self.count < 1 or self.index + self.count > LIMITS[self.file]:
            last = self.index + self.count - 1
            name = f"{self.file}{self.index}" if self.count == 1 else f"{self.file}[{self.index}:{last}]"
            raise OperandError(f"{name} is outside the {FILES[self.file]} file "
                               f"({self.file}0..{self.file}{LIMITS[self.file] - 1})")

    @property
    def last(self) -> int:
        return self.index + self.count - 1

    @property
    def kind(self) -> str:
        return {"v": "vgpr", "a": "agpr", "s": "sgpr"}[self.file]

    def __str__(self) -> str:
        return f"{self.file}{self.index}" if self.count == 1 else f"{self.file}[{self.index}:{self.last}]"

    __repr__ = __str__

    def __getitem__(self, key) -> "Reg":
        """Relative, inclusive sub-range: R[0:3] is the first four registers of R, R[5] the sixth."""
        if isinstance(key, slice):
            if key.step not in (None, 1):
                raise OperandError("register ranges take no step")
            lo, hi = key.start, key.stop
            if lo is None or hi is None:
                raise OperandError(f"write both ends of the range, inclusive, e.g. {self}[0:3]")
            if not (0 <= lo <= hi < self.count):
                raise OperandError(f"{self}[{lo}:{hi}] is outside {self} (indices 0..{self.count - 1}, inclusive)")
            return Reg(self.file, self.index + lo, hi - lo + 1)
        if not isinstance(key, int) or not (0 <= key < self.count):
            raise OperandError(f"{self}[{key}] is outside {self} (indices 0..{self.count - 1})")
        return Reg(self.file, self.index + key, 1)

    def __len__(self) -> int:
        return self.count

    def __iter__(self):
        return (Reg(self.file, self.index + i, 1) for i in range(self.count))

    def regs(self) -> range:
        return range(self.index, self.index + self.count)

    def overlaps(self, other: "Reg") -> bool:
        return self.file == other.file and self.index <= other.last and other.index <= self.last

    def __neg__(self) -> "Mod":
        return Mod(self, neg=True)

    def __abs__(self) -> "Mod":
        return Mod(self, abs=True)


class RegFile:
    """`v`, `a`, `s`: index with v[5] or an inclusive range v[32:95]."""

    def __init__(self, file: str):
        self.file = file

    def __getitem__(self, key) -> Reg:
        if isinstance(key, slice):
            if key.step not in (None, 1):
                raise OperandError("register ranges take no step")
            if key.start is None or key.stop is None:
                raise OperandError(f"write both ends of the range, inclusive, e.g. {self.file}[0:3]")
            if key.stop < key.start:
                raise OperandError(f"{self.file}[{key.start}:{key.stop}] ends before it starts "
                                   f"(ranges are inclusive: {self.file}[{key.stop}:{key.start}]?)")
            return Reg(self.file, key.start, key.stop - key.start + 1)
        if not isinstance(key, int):
            raise OperandError(f"{self.file}[...] takes an int or an inclusive range, not {key!r}")
        return Reg(self.file, key, 1)

    def __repr__(self) -> str:
        return self.file


v = RegFile("v")
a = RegFile("a")
s = RegFile("s")


@dataclass(frozen=True)
class Special:
    """A named special operand: m0, vcc, exec, scc, off, ttmp, src_* ... (as LLVM spells them)."""

    name: str

    # Which hardware register bits it aliases, for read/write tracking.
    @property
    def kind(self) -> str:
        n = self.name
        if n in ("vcc", "vcc_lo", "vcc_hi"):
            return "vcc"
        if n in ("exec", "exec_lo", "exec_hi"):
            return "exec"
        return n

    @property
    def dwords(self) -> int:
        return 2 if self.name in ("vcc", "exec", "flat_scratch", "xnack_mask") else 1

    def __str__(self) -> str:
        return self.name

    __repr__ = __str__

    def __neg__(self) -> "Mod":
        return Mod(self, neg=True)

    def __abs__(self) -> "Mod":
        return Mod(self, abs=True)


m0 = Special("m0")
vcc = Special("vcc")
vcc_lo = Special("vcc_lo")
vcc_hi = Special("vcc_hi")
exec_ = Special("exec")
exec_lo = Special("exec_lo")
exec_hi = Special("exec_hi")
scc = Special("scc")
off = Special("off")

SPECIAL_NAMES = {"m0", "vcc", "vcc_lo", "vcc_hi", "exec", "exec_lo", "exec_hi", "scc", "off", "vccz", "execz",
                 "flat_scratch", "flat_scratch_lo", "flat_scratch_hi", "xnack_mask", "xnack_mask_lo",
                 "xnack_mask_hi", "lds_direct", "src_shared_base", "src_shared_limit", "src_private_base",
                 "src_private_limit", "src_pops_exiting_wave_id", "src_execz", "src_vccz", "src_scc",
                 "pops_exiting_wave_id", "shared_base", "shared_limit", "private_base", "private_limit",
                 "tba", "tma", "tba_lo", "tba_hi", "tma_lo", "tma_hi"}


@dataclass(frozen=True)
class Imm:
    """An immediate: an int or a float. Inline when the hardware has it as a constant, else a literal."""

    value: int | float

    @property
    def inline(self) -> bool:
        x = self.value
        if isinstance(x, bool):
            return False
        if isinstance(x, int):
            return -16 <= x <= 64
        return x in INLINE_FLOATS or (isinstance(x, float) and x == 0.0 and not math.copysign(1, x) < 0)

    @property
    def kind(self) -> str:
        return "iconst" if self.inline else "literal"

    def __str__(self) -> str:
        x = self.value
        if isinstance(x, float):
            if x in INLINE_FLOATS:
                return INLINE_FLOATS[x]
            if x == 0.0 and math.copysign(1, x) > 0:
                return "0"
            return f"0x{struct.unpack('<I', struct.pack('<f', x))[0]:x}"
        if -16 <= x <= 64:
            return str(x)
        return f"0x{x & 0xFFFFFFFFFFFFFFFF:x}" if x < 0 else f"0x{x:x}"

    __repr__ = __str__

    def __neg__(self) -> "Mod":
        return Mod(self, neg=True)


@dataclass(frozen=True)
class Label:
    """A branch target by name."""

    name: str

    def __str__(self) -> str:
        return self.name

    __repr__ = __str__


def local_label(name: str) -> str:
    """Kernel labels are assembler-local (.L...): they never become symbols that look like functions."""
    return name if name.startswith(".L") else f".L{name}"


@dataclass(frozen=True)
class Expr:
    """Operand text kept verbatim: hwreg(...), sendmsg(...), a symbolic expression."""

    text: str
    kind: str = "expr"

    def __str__(self) -> str:
        return self.text

    __repr__ = __str__


@dataclass(frozen=True)
class Waitcnt:
    """s_waitcnt operand; None means 'do not wait on this counter'."""

    vmcnt: int | None = None
    expcnt: int | None = None
    lgkmcnt: int | None = None
    kind: str = field(default="waitcnt", init=False)

    def __post_init__(self):
        for name, lim in (("vmcnt", 63), ("expcnt", 7), ("lgkmcnt", 15)):
            val = getattr(self, name)
            if val is not None and not (isinstance(val, int) and 0 <= val <= lim):
                raise OperandError(f"{name}({val}) is out of range: gfx950 counts {name} 0..{lim}")

    @property
    def simm16(self) -> int:
        vm = 63 if self.vmcnt is None else self.vmcnt
        ex = 7 if self.expcnt is None else self.expcnt
        lg = 15 if self.lgkmcnt is None else self.lgkmcnt
        return (vm & 15) | (ex << 4) | (lg << 8) | ((vm >> 4) << 14)

    @classmethod
    def from_simm16(cls, x: int) -> "Waitcnt":
        vm = (x & 15) | (((x >> 14) & 3) << 4)
        ex, lg = (x >> 4) & 7, (x >> 8) & 15
        return cls(None if vm == 63 else vm, None if ex == 7 else ex, None if lg == 15 else lg)

    def __str__(self) -> str:
        parts = [f"{n}({getattr(self, n)})" for n in ("vmcnt", "expcnt", "lgkmcnt") if getattr(self, n) is not None]
        return " ".join(parts) if parts else "vmcnt(63) expcnt(7) lgkmcnt(15)"

    __repr__ = __str__


@dataclass(frozen=True)
class Mod:
    """A source operand with VOP3 input modifiers: -x, |x|, -|x|, sext(x)."""

    base: Reg | Special | Imm
    neg: bool = False
    abs: bool = False
    sext: bool = False

    @property
    def kind(self) -> str:
        return self.base.kind

    def __neg__(self) -> "Mod":
        return Mod(self.base, not self.neg, self.abs, self.sext)

    def __abs__(self) -> "Mod":
        return Mod(self.base, self.neg, True, self.sext)

    def __str__(self) -> str:
        t = str(self.base)
        if self.sext:
            t = f"sext({t})"
        if self.abs:
            t = f"|{t}|"
        if self.neg:
            t = f"-{t}"
        return t

    __repr__ = __str__


def sext(x) -> Mod:
    return Mod(x, sext=True)


Operand = Reg | Special | Imm | Label | Expr | Waitcnt | Mod


def as_operand(x) -> Operand:
    """Python values to operands: ints and floats become immediates, strings labels or specials."""
    if isinstance(x, (Reg, Special, Imm, Label, Expr, Waitcnt, Mod)):
        return x
    if isinstance(x, bool):
        raise OperandError(f"{x!r} is not an operand; pass an int, a float or a register")
    if isinstance(x, (int, float)):
        return Imm(x)
    if isinstance(x, str):
        if x in SPECIAL_NAMES:
            return Special(x)
        return Label(x)
    raise OperandError(f"{x!r} is not an operand (expected a register such as v[0:3], a special such as m0, "
                       f"an int or float, or a label name)")


_REG_SETS: dict[tuple, frozenset] = {}


def operand_reg_set(op: Operand) -> frozenset:
    """operand_regs as a frozenset, one shared object per register range (the checker asks it of
    every operand, and MFMA tuples name up to 16 registers)."""
    base = op.base if isinstance(op, Mod) else op
    if isinstance(base, Reg):
        key = (base.file, base.index, base.count)
        regs = _REG_SETS.get(key)
        if regs is None:
            regs = _REG_SETS[key] = frozenset(operand_regs(base))
        return regs
    return frozenset(operand_regs(op))


def operand_regs(op: Operand) -> list[tuple[str, int]]:
    """Hardware registers an operand names, as (file, index) pairs; specials as ('spec', name)."""
    if isinstance(op, Mod):
        op = op.base
    if isinstance(op, Reg):
        return [(op.file, i) for i in op.regs()]
    if isinstance(op, Special):
        k = op.kind
        if k in ("vcc", "exec"):
            return [("spec", k)]
        if op.name in ("m0", "scc"):
            return [("spec", op.name)]
    return []
