"""What a lift starts from: one kernel of a code object (or of a `.s`, assembled first), as IR.

The instructions come from llvm-objdump (codeobj.disasm) with every encoding checked by llvm-mc:
those whose text does not give back their bytes keep `raw`. The words after the function's end
(the toolchain's padding) become `code_end`. Labels are named after their role (`loop_0x1c`,
`bb_0x40`), or keep the names a `.s` gave them.

Bound: one llvm-objdump run and one llvm-mc batch over the kernel, then O(I).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..asm.parser import parse_asm, read_asm
from ..codeobj.descriptor import KernelDescriptor
from ..codeobj.disasm import disassemble, verify_encodings
from ..codeobj.reader import CodeObject, read_code_object
from ..errors import FlyasmError
from ..isa.instruction import Instruction
from ..isa.operands import Label


class LiftError(FlyasmError):
    """A code object or .s that flyasm lift cannot turn into a builder."""

    def __init__(self, message: str):
        super().__init__(message, find_loc=False)


@dataclass
class LiftSource:
    name: str
    stream: list[Instruction]
    labels: dict[str, int]
    kd: KernelDescriptor
    metadata: dict | None                 # this kernel's amdhsa.kernels entry
    module_metadata: dict | None          # the rest of the metadata document
    target: str
    code_object: int
    code_end: list[int] = field(default_factory=list)
    origin: str = ""
    co: CodeObject | None = None
    sized: bool = True        # False: the symbol has st_size 0, and so must the rebuild
    whole: bool = True        # False: one kernel of several; the rebuild is compared kernel by kernel
    encodings: list = field(default_factory=list)   # per instruction: its bytes in the original


def _words(b: bytes) -> list[int]:
    return [int.from_bytes(b[i:i + 4], "little") for i in range(0, len(b), 4)]


def from_code_object(src, names_from=None, kernel: str | None = None) -> LiftSource:
    """One kernel of a code object (`kernel` names it when there are several). `names_from` (an
    AsmKernel) supplies label names and region paths when it has the same instruction count (a
    `.s` that was assembled into `src`). A kernel whose symbol has st_size 0 runs to the next
    function or the end of .text (codeobj.reader), and its rebuild keeps st_size 0."""
    co = src if isinstance(src, CodeObject) else read_code_object(src)
    where = co.path or "the code object"
    if co.code_object_version not in (5, 6):
        raise LiftError(f"{where} is code object v{co.code_object_version}; flyasm builds v5 and v6")
    if not co.kernels:
        raise LiftError(f"{where} holds no kernel descriptor (NAME.kd symbol)")
    if kernel is None and len(co.kernels) != 1:
        raise LiftError(f"{where} holds {len(co.kernels)} kernels ({', '.join(k.name for k in co.kernels)}); "
                        f"pick one with --kernel NAME")
    try:
        kc = co.kernel(kernel) if kernel is not None else co.kernels[0]
    except FlyasmError as e:
        raise LiftError(e.message) from None
    whole = len(co.kernels) == 1 and len(co.functions) == 1
    mod = disassemble(co)
    verify_encodings(mod)
    ak = mod.kernel(kc.name)
    if whole and ak.addr != 0:
        raise LiftError(f"{where}: .text holds {ak.addr} bytes before kernel {kc.name}, which a builder cannot place")
    entry = kc.addr - co.text_addr
    end = entry + kc.size
    n = sum(1 for i in ak.instructions if i.pc is not None and i.pc < end)
    body = ak.instructions[:n]
    pos = sum(len(e or b"") for e in ak.encodings[:n])
    if pos != kc.size:
        raise LiftError(f"{where}: kernel {kc.name} ends inside an instruction (at byte {kc.size})")
    if not body:
        raise LiftError(f"kernel {kc.name} has no instructions")
    labels = {lab: idx for lab, idx in ak.labels.items()}
    extent = n
    if not kc.sized:
        # the extent of a symbol without size takes in the alignment padding after s_endpgm:
        # those words are padding again in the rebuild (a builder ends a kernel at s_endpgm)
        n = _padding_start(body, labels)
        body = body[:n]
    # one kernel of several: the builder gives back that kernel, not the whole .text
    tail = ak.encodings[n:] if whole else ak.encodings[n:extent]
    code_end = _words(b"".join(e or b"" for e in tail))
    if any(idx > n for idx in labels.values()):
        raise LiftError(f"{where}: a branch jumps past the end of kernel {kc.name}")
    for inst in body:
        inst.loc = None
    _name_labels(body, labels, names_from)
    meta = co.metadata or {}
    module_meta = {k: v for k, v in meta.items() if k != "amdhsa.kernels"} if co.metadata is not None else None
    return LiftSource(kc.name, body, labels, kc.descriptor, kc.metadata, module_meta, co.target,
                      co.code_object_version, code_end, origin=co.path or "", co=co, sized=kc.sized,
                      whole=whole, encodings=list(ak.encodings[:n]))


PADDING = ("s_nop", "s_code_end")


def _padding_start(body: list[Instruction], labels: dict[str, int]) -> int:
    """Index where the trailing s_nop/s_code_end run after the last s_endpgm starts (len(body)
    when there is none, or when a label points into it)."""
    j = len(body)
    while j > 0 and body[j - 1].mnemonic in PADDING:
        j -= 1
    if j == len(body) or j == 0 or body[j - 1].mnemonic != "s_endpgm":
        return len(body)
    if any(j < idx <= len(body) for idx in labels.values()):
        return len(body)
    return j


def _name_labels(body: list[Instruction], labels: dict[str, int], names_from) -> None:
    """Rename objdump's `.L_pc_0x…` labels: to the `.s` names when known, else by role."""
    given: dict[int, str] = {}
    if names_from is not None and len(names_from.instructions) == len(body):
        for lab, idx in sorted(names_from.labels.items(), key=lambda kv: kv[1]):
            given.setdefault(idx, lab)
        for inst, src in zip(body, names_from.instructions):
            inst.region = tuple(src.region)
    backward = set()
    for i, inst in enumerate(body):
        for op in inst.operands:
            if isinstance(op, Label) and op.name in labels and labels[op.name] <= i:
                backward.add(op.name)
    rename = {}
    for lab, idx in labels.items():
        if idx in given:
            g = given[idx]
            # our writer turns label NAME into the local .LNAME: give the builder NAME back
            rename[lab] = g[2:] if g.startswith(".L") and (g[2:3].isalpha() or g[2:3] == "_") else g
        elif lab.startswith(".L_pc_0x"):
            rename[lab] = ("loop_" if lab in backward else "bb_") + lab[len(".L_pc_"):]
        else:
            rename[lab] = lab
    new = {rename[lab]: idx for lab, idx in labels.items()}
    labels.clear()
    labels.update(new)
    for inst in body:
        if any(isinstance(op, Label) and op.name in rename for op in inst.operands):
            inst.operands = tuple(Label(rename[op.name]) if isinstance(op, Label) and op.name in rename else op
                                  for op in inst.operands)


def from_asm_file(path, kernel: str | None = None) -> LiftSource:
    """A `.s` file: assembled with llvm-mc/ld.lld, then lifted from the code object, keeping the
    `.s` label names and region comments."""
    from ..asm.driver import assemble
    text = read_asm(path)
    mod = parse_asm(text, str(path))
    cov = 5
    for _, d in mod.directives:
        if d.startswith(".amdhsa_code_object_version"):
            cov = int(d.split()[1], 0)
    data = assemble(text, cov, name=Path(path).name)
    co = read_code_object(data)
    co.path = str(path)
    name = kernel if kernel is not None else (co.kernels[0].name if len(co.kernels) == 1 else None)
    names = mod.kernel(name) if name is not None and any(k.name == name for k in mod.kernels) else None
    return from_code_object(co, names, kernel)


def load(path, kernel: str | None = None) -> LiftSource:
    if isinstance(path, CodeObject):
        return from_code_object(path, kernel=kernel)
    p = Path(path)
    if not p.is_file():
        raise LiftError(f"{path} does not exist")
    if p.suffix.lower() == ".s":
        return from_asm_file(p, kernel)
    return from_code_object(p, kernel=kernel)
