"""One view of a kernel for the reports: instructions, labels, regions, descriptor, metadata, plan.

`as_program(x)` accepts a Kernel, a `.co` (path, bytes, CodeObject), a `.s` file, a `.py` file
exposing `build()`, or a Program, and gives the reports a single shape to read. The adapters are
thin: they reuse Kernel, the code-object reader and the `.s` parser, and only normalise names.

Bound: O(I + labels log labels) per view; basic_blocks and loops one pass each.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import FlyasmError
from ..isa.instruction import Instruction
from ..isa.operands import Label

VGPR_GRANULE = 8      # gfx90a+/gfx950 unified VGPR allocation granule (notes §5.1)
SGPR_GRANULE = 8      # compute_pgm_rsrc1 SGPR granule on GFX9 (notes §5.1)


class ReportError(FlyasmError):
    """A report cannot be made from this input."""


@dataclass
class Span:
    """A named range of instruction indices [start, end)."""
    name: str
    start: int
    end: int


@dataclass
class Program:
    name: str
    stream: list[Instruction]
    labels: dict[str, int] = field(default_factory=dict)
    regions: list[Span] = field(default_factory=list)
    descriptor: dict = field(default_factory=dict)    # normalised, see _norm_descriptor
    raw_descriptor: dict = field(default_factory=dict)
    metadata: dict = field(default_factory=dict)
    plan: object | None = None
    threads: int | None = None
    threads_is_bound: bool = False                    # True when only max_flat_workgroup_size is known
    source: str = "kernel"
    lds_scratch: list = field(default_factory=list)   # [(lo, hi)] LDS bytes declared a DMA dump

    def __len__(self) -> int:
        return len(self.stream)

    def check(self, mode: str = "verify", items: list | None = None) -> list:
        """The static checker's findings with what the program knows of its launch (workgroup size,
        declared DMA dumps): what `flyasm check` reports. items: this program's items, edited."""
        from ..check import check_program
        return check_program(self.items() if items is None else items, mode, self.threads, self.lds_scratch)

    def items(self) -> list:
        """Instructions with label names put back in place (the checker's program form)."""
        at: dict[int, list[str]] = {}
        for name, idx in self.labels.items():
            at.setdefault(idx, []).append(name)
        out: list = []
        for i, inst in enumerate(self.stream):
            out.extend(at.get(i, ()))
            out.append(inst)
        out.extend(at.get(len(self.stream), ()))
        return out


def _ceil_to(n: int, g: int) -> int:
    return max(g, (n + g - 1) // g * g)


def _regions_from_stream(stream: list[Instruction]) -> list[Span]:
    """Contiguous runs of every region path prefix ('a', 'a/b', ...), in order of first start."""
    out: list[Span] = []
    open_: dict[str, Span] = {}
    for i, inst in enumerate(stream + [None]):
        path = inst.region if inst is not None else ()
        names = {"/".join(path[:d + 1]) for d in range(len(path))}
        for n in list(open_):
            if n not in names:
                open_.pop(n).end = i
        for n in sorted(names, key=lambda n: n.count("/")):
            if n not in open_:
                sp = Span(n, i, i + 1)
                open_[n] = sp
                out.append(sp)
    return out


def _norm_descriptor(*, next_free_vgpr, accum_offset, next_free_sgpr, lds, scratch, kernarg_size,
                     arch_vgprs=None, agprs=None, sgpr_count=None) -> dict:
    return {
        "next_free_vgpr": next_free_vgpr,
        "vgpr_alloc": _ceil_to(next_free_vgpr, VGPR_GRANULE),
        "accum_offset": accum_offset,
        "arch_vgprs": arch_vgprs,
        "agprs": agprs,
        "next_free_sgpr": next_free_sgpr,
        "sgpr_count": sgpr_count if sgpr_count is not None else next_free_sgpr,
        "lds": lds,
        "scratch": scratch,
        "kernarg_size": kernarg_size,
    }


def from_kernel(k) -> Program:
    d = k.descriptor()
    # VCC sits above the named SGPRs when used (LLVM counts it in .sgpr_count).
    sgpr_count = d["next_free_sgpr"] + (2 if d["reserve_vcc"] else 0)
    desc = _norm_descriptor(next_free_vgpr=d["next_free_vgpr"], accum_offset=d["accum_offset"],
                            next_free_sgpr=d["next_free_sgpr"], lds=d["group_segment_fixed_size"],
                            scratch=d["private_segment_fixed_size"], kernarg_size=d["kernarg_size"],
                            arch_vgprs=d["arch_vgprs"], agprs=d["agprs"], sgpr_count=sgpr_count)
    regions = [Span("/".join(r.path), r.start, r.end if r.end is not None else len(k.stream)) for r in k.regions]
    meta = {"args": [{"name": a.name, "type": a.type, "offset": a.offset, "size": a.size} for a in k.args],
            "block": list(k.block)}
    return Program(k.name, list(k.stream), {n: ld.index for n, ld in k.labels.items()}, regions, desc, dict(d),
                   meta, k.plan, k.threads, False, "kernel", list(k.scratch_lds))


def _threads_from_meta(meta: dict) -> tuple[int | None, bool]:
    req = meta.get("reqd_workgroup_size")
    if req:
        n = 1
        for x in req:
            n *= int(x)
        return n, False
    mx = meta.get("max_flat_workgroup_size")
    return (int(mx), True) if mx else (None, False)


def _strip(meta: dict | None) -> dict:
    return {k.lstrip("."): v for k, v in (meta or {}).items()}


def codeobj_descriptor(kc) -> dict:
    """The normalised descriptor (registers, LDS, ...) of one kernel of a CodeObject: its kernel
    descriptor and metadata, no disassembly needed."""
    kd = kc.descriptor
    meta = _strip(kc.metadata)
    return _norm_descriptor(next_free_vgpr=kd.vgpr_alloc, accum_offset=kd.accum_offset, next_free_sgpr=kd.sgpr_alloc,
                            lds=kd.group_segment_fixed_size, scratch=kd.private_segment_fixed_size,
                            kernarg_size=kd.kernarg_size, arch_vgprs=meta.get("vgpr_count"),
                            agprs=meta.get("agpr_count"), sgpr_count=meta.get("sgpr_count", kd.sgpr_alloc))


def from_codeobj(co, kernel: str | None = None) -> Program:
    """A kernel of a CodeObject, disassembled into the IR by flyasm.codeobj (llvm-objdump)."""
    from ..codeobj.disasm import disassemble

    if not co.kernels:
        raise ReportError(f"{co.path or 'the code object'} holds no kernel descriptors")
    kc = co.kernel(kernel) if kernel else co.kernels[0]
    ak = disassemble(co).kernel(kc.name)
    # objdump also lists the s_nop padding after the symbol; keep what the FUNC symbol covers.
    end = kc.addr - co.text_addr + kc.size
    n = sum(1 for i in ak.instructions if i.pc is None or i.pc < end)
    if n == 0:
        raise ReportError(f"kernel {kc.name} in {co.path or 'the code object'} decodes to no instructions")
    stream = ak.instructions[:n]
    labels = {name: idx for name, idx in ak.labels.items() if idx <= n}
    kd = kc.descriptor
    meta = _strip(kc.metadata)
    desc = codeobj_descriptor(kc)
    threads, bound = _threads_from_meta(meta)
    plan, labels, scratch = _names(co.names, kc.name, stream, labels)
    return Program(kc.name, stream, labels, _regions_from_stream(stream), desc, kd.to_dict(), meta, plan,
                   threads, bound, "co", scratch)


def _names(records, kernel: str, stream, labels: dict):
    """The builder's plan, region and label names, when the .s/.co carries them (asm/names.py)."""
    from ..asm.names import apply_spans, decode, rename_labels
    plan, spans, named, scratch = decode(records, kernel)
    if spans and not any(i.region for i in stream):
        apply_spans(stream, spans)
    return plan, rename_labels(stream, labels, named), scratch


def from_asm(text: str, filename: str | None = None, kernel: str | None = None) -> Program:
    from ..asm.parser import parse_asm

    mod = parse_asm(text, filename)
    if not mod.kernels:
        raise ReportError(f"{filename or 'the assembly'} defines no kernel")
    ak = mod.kernel(kernel) if kernel else mod.kernels[0]
    d = ak.descriptor
    meta = _strip(ak.metadata)
    nfv = int(d.get("next_free_vgpr", 0))
    acc = int(d.get("accum_offset", _ceil_to(nfv, 4)))
    desc = _norm_descriptor(next_free_vgpr=nfv, accum_offset=acc, next_free_sgpr=int(d.get("next_free_sgpr", 0)),
                            lds=int(d.get("group_segment_fixed_size", 0)),
                            scratch=int(d.get("private_segment_fixed_size", 0)),
                            kernarg_size=int(d.get("kernarg_size", 0)), sgpr_count=meta.get("sgpr_count"))
    threads, bound = _threads_from_meta(meta)
    stream = list(ak.instructions)
    if not stream:
        raise ReportError(f"kernel {ak.name} in {filename or 'the assembly'} has no instructions")
    plan, labels, scratch = _names(mod.names, ak.name, stream, dict(ak.labels))
    return Program(ak.name, stream, labels, _regions_from_stream(stream), desc, dict(d), meta, plan,
                   threads, bound, "s", scratch)


def from_python(path: str, **params):
    """Import a kernel file and call its build(**params); the Kernel it returns."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"flyasm_report_{Path(path).stem}", path)
    if spec is None or spec.loader is None:
        raise ReportError(f"cannot import {path}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    if not callable(getattr(mod, "build", None)):
        raise ReportError(f"{path} has no build() function returning a Kernel")
    return mod.build(**params)


def as_program(x, kernel: str | None = None) -> Program:
    """Normalise any supported input to a Program (see module doc)."""
    from ..kernel import Kernel

    if isinstance(x, Program):
        return x
    if isinstance(x, Kernel):
        return from_kernel(x)
    if isinstance(x, (bytes, bytearray)):
        from ..codeobj.reader import read_code_object
        return from_codeobj(read_code_object(bytes(x)), kernel)
    if type(x).__name__ == "CodeObject":
        return from_codeobj(x, kernel)
    if isinstance(x, (str, os.PathLike)):
        p = Path(x)
        if not p.exists():
            raise ReportError(f"{p} does not exist")
        suf = p.suffix.lower()
        if suf in (".co", ".hsaco", ".o"):
            from ..codeobj.reader import read_code_object
            return from_codeobj(read_code_object(p), kernel)
        if suf == ".s":
            from ..asm.parser import read_asm
            return from_asm(read_asm(p), str(p), kernel)
        if suf == ".py":
            return from_kernel(from_python(str(p)))
        raise ReportError(f"{p} is not a .co, .s or .py file")
    raise ReportError(f"cannot make a report from a {type(x).__name__} (give a Kernel, .co, .s or .py)")


# ---- control flow: shared by stats and the model ------------------------------------------------

def is_branch(inst: Instruction) -> bool:
    return inst.unit == "BRANCH" or inst.name.startswith(("s_branch", "s_cbranch"))


def branch_target(p: Program, i: int) -> int | None:
    for op in p.stream[i].operands:
        if isinstance(op, Label) and op.name in p.labels:
            return p.labels[op.name]
    return None


def basic_blocks(p: Program) -> list[Span]:
    """Blocks split at labels and after branches / s_endpgm; named by their label or start index."""
    n = len(p.stream)
    at = {}
    for name, idx in sorted(p.labels.items(), key=lambda kv: (kv[1], kv[0])):
        at.setdefault(idx, name)
    leaders = {0} | {i for i in at if i < n}
    for i, inst in enumerate(p.stream):
        if (is_branch(inst) or inst.name == "s_endpgm") and i + 1 < n:
            leaders.add(i + 1)
    starts = sorted(x for x in leaders if x < n)
    return [Span(at.get(s_, f"bb@{s_}"), s_, (starts[j + 1] if j + 1 < len(starts) else n))
            for j, s_ in enumerate(starts)]


def loops(p: Program) -> list[Span]:
    """Loop bodies: [target, branch] for every branch that jumps backward (or to itself), named
    after the first label (by name) at the target."""
    first: dict[int, str] = {}
    for nm, idx in sorted(p.labels.items()):
        first.setdefault(idx, nm)
    out = []
    for i, inst in enumerate(p.stream):
        if is_branch(inst):
            t = branch_target(p, i)
            if t is not None and t <= i:
                out.append(Span(first.get(t, f"loop@{t}"), t, i + 1))
    return out
