"""What the emulator runs: the decoded instructions of one kernel in a code object, plus its
descriptor and metadata.

`load_program(co, symbol)` reads the code object with the shared reader (`flyasm.codeobj`:
pyelftools + msgpack for the ELF, llvm-objdump text -> the `.s` parser -> IR with pcs and labels)
and keeps the result per (content hash, kernel) for the life of the process, so repeated launches
of the same bytes decode once. The compiled instruction closures (`Program.compiled`) are cached
with it: they depend only on the instruction, never on a machine.
"""
from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import CodeObjectError
from ..isa.instruction import Instruction
from ..isa.operands import Imm, Label

BRANCHES = {"s_branch", "s_cbranch_scc0", "s_cbranch_scc1", "s_cbranch_vccz", "s_cbranch_vccnz",
            "s_cbranch_execz", "s_cbranch_execnz"}


@dataclass
class Descriptor:
    """The fields of the 64-byte kernel descriptor the emulator needs (notes §5.1)."""
    group_segment_fixed_size: int
    kernarg_size: int
    rsrc1: int
    rsrc2: int
    rsrc3: int
    code_props: int
    kernarg_preload: int

    @property
    def user_sgpr_count(self) -> int:
        return (self.rsrc2 >> 1) & 0x1F

    @property
    def workgroup_id_enable(self) -> tuple[bool, bool, bool]:
        return tuple(bool((self.rsrc2 >> b) & 1) for b in (7, 8, 9))

    @property
    def workgroup_info(self) -> bool:
        return bool((self.rsrc2 >> 10) & 1)

    @property
    def accum_offset(self) -> int:
        return ((self.rsrc3 & 0x3F) + 1) * 4

    def user_sgpr_layout(self) -> dict[str, int]:
        """SGPR index of each enabled user SGPR input, in hardware order (AMDGPUUsage 'Initial Kernel
        Execution State')."""
        order = [("private_segment_buffer", 4), ("dispatch_ptr", 2), ("queue_ptr", 2),
                 ("kernarg_segment_ptr", 2), ("dispatch_id", 2), ("flat_scratch_init", 2),
                 ("private_segment_size", 1)]
        out, i = {}, 0
        for bit, (name, n) in enumerate(order):
            if (self.code_props >> bit) & 1:
                out[name] = i
                i += n
        return out

    @classmethod
    def from_kd(cls, kd) -> "Descriptor":
        """From flyasm.codeobj's decoded KernelDescriptor."""
        return cls(kd.group_segment_fixed_size, kd.kernarg_size, kd.compute_pgm_rsrc1, kd.compute_pgm_rsrc2,
                   kd.compute_pgm_rsrc3, kd.kernel_code_properties, kd.kernarg_preload)


@dataclass
class Program:
    name: str
    insts: list[Instruction]
    descriptor: Descriptor
    args: list[dict]                    # metadata .args entries (may be empty)
    metadata: dict = field(default_factory=dict)
    targets: dict[int, int] = field(default_factory=dict)   # instruction index -> branch target index
    labels: dict[str, int] = field(default_factory=dict)    # label -> instruction index
    compiled: list = field(default=None, repr=False)        # per instruction: fn(m, w), filled lazily

    def __post_init__(self):
        if self.compiled is None:
            self.compiled = [None] * len(self.insts)


def resolve_branches(insts: list[Instruction], labels: dict[str, int] | None = None) -> dict[int, int]:
    """Branch target of each SOPP branch as an instruction index: a label operand (decoded code
    objects, the `.s` parser) or a numeric simm16 (pc + 4 + 4*simm16, signed)."""
    by_pc = {inst.pc: i for i, inst in enumerate(insts)}
    out = {}
    for i, inst in enumerate(insts):
        if inst.name not in BRANCHES or not inst.operands:
            continue
        op = inst.operands[0]
        if isinstance(op, Label):
            if labels is None or op.name not in labels:
                raise CodeObjectError(f"{inst.text()} at pc 0x{inst.pc or 0:x} jumps to label {op.name}, which is "
                                      f"not in the kernel", find_loc=False)
            out[i] = labels[op.name]
        elif isinstance(op, Imm):
            simm = op.value & 0xFFFF
            simm -= (simm & 0x8000) << 1
            tgt = inst.pc + 4 + 4 * simm
            if tgt not in by_pc:
                raise CodeObjectError(f"{inst.text()} at pc 0x{inst.pc:x} jumps to 0x{tgt:x}, not an instruction",
                                      find_loc=False)
            out[i] = by_pc[tgt]
    return out


_CACHE: dict[tuple[str, str | None], Program] = {}
_LOCK = threading.Lock()


def content_hash(co: bytes) -> str:
    return hashlib.sha256(co).hexdigest()


def load_program(code_object, symbol: str | None = None) -> Program:
    """A kernel of a code object (path or bytes) as a Program; decoded once per content hash."""
    co = Path(code_object).read_bytes() if isinstance(code_object, (str, Path)) else bytes(code_object)
    key = (content_hash(co), symbol)
    prog = _CACHE.get(key)
    if prog is None:
        prog = _decode(co, symbol)
        with _LOCK:
            _CACHE[key] = prog
            _CACHE.setdefault((key[0], prog.name), prog)
    return prog


def clear_cache() -> None:
    with _LOCK:
        _CACHE.clear()


def _decode(co: bytes, symbol: str | None) -> Program:
    from ..codeobj.disasm import disassemble
    from ..codeobj.reader import read_code_object
    obj = read_code_object(co)
    names = [k.name for k in obj.kernels]
    if not names:
        raise CodeObjectError("the code object has no kernel descriptor (NAME.kd symbol)", find_loc=False)
    if symbol is None:
        if len(names) != 1:
            raise CodeObjectError(f"the code object holds {len(names)} kernels {names}; pass kernel=NAME",
                                  find_loc=False)
        symbol = names[0]
    if symbol not in names:
        raise CodeObjectError(f"kernel '{symbol}' is not in the code object (it has {names})", find_loc=False)
    kc = obj.kernel(symbol)
    mod = disassemble(obj)
    ak = next((k for k in mod.kernels if k.name == symbol), None)
    if ak is None:
        raise CodeObjectError(f"the disassembly of the code object has no function {symbol}", find_loc=False)
    entry = kc.addr - obj.text_addr          # parser pcs are offsets into .text
    insts: list[Instruction] = []
    for inst in ak.instructions:
        if inst.pc is None or not (entry <= inst.pc < entry + kc.size):
            continue                           # alignment padding after the function's end
        inst.pc -= entry                       # the emulator's pcs are relative to the kernel entry
        insts.append(inst)
    if not insts:
        raise CodeObjectError(f"kernel {symbol} decodes to no instructions", find_loc=False)
    labels = {lab: i for lab, i in ak.labels.items() if i <= len(insts)}
    mk = kc.metadata or {}
    return Program(symbol, insts, Descriptor.from_kd(kc.descriptor), list(mk.get(".args", []) or []), mk,
                   resolve_branches(insts, labels), labels)
