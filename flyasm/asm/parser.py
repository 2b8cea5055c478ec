"""Read whole gfx950 `.s` files into the IR: ours (writer.render), hand-written, clang's, and
`llvm-objdump -d` output.

    mod = parse_asm(text, "k.s")
    mod.kernels[0].instructions, mod.kernels[0].labels, mod.kernels[0].descriptor, mod.metadata

A kernel is a function symbol (`.type NAME,@function`, a `.amdhsa_kernel NAME` block, or an objdump
`<NAME>:` header); its instructions run until the next function. Labels map to the index of the
instruction they stand before. `.file`/`.loc` become `Instruction.loc`; `; region a/b` comments
restore `Instruction.region`; `.long` words with a `; text` comment become an instruction with `raw`.
In objdump text the `// ADDR: HEX` comment gives `pc` and the encoding. A branch's target comes
from its encoding, pc + 4 + 4*simm16 (CDNA4 ISA §4.5, s_branch; simm16 is the low half of a SOPP or
SOPK word), never from the label text objdump prints: objdump names a target after a symbol at
that address, and when two symbols share one address it prints one in the branch and the other
as the `<NAME>:` header (`_resolve_branches`). The target's label is the name objdump gave it,
when a header placed that name there; else a header label at the address; else `.L_pc_0x…`.
A target inside an instruction, or outside the branch's function, is a ParseError naming both.

Bound: one pass over the lines, O(lines); branch targets a dictionary lookup each.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from ..errors import FlyasmError, ParseError, SourceLoc
from ..isa.instruction import Instruction
from ..isa.operands import Expr, Imm, Label
from ..isa.syntax import parse_instruction, split_top, strip_comment

_LDS_TAG = re.compile(r";\s*lds:([A-Za-z0-9_.]+)")  # writer's note of Instruction.lds_buffer


@dataclass
class AsmKernel:
    name: str
    instructions: list[Instruction] = field(default_factory=list)
    labels: dict[str, int] = field(default_factory=dict)
    descriptor: dict[str, int] = field(default_factory=dict)      # .amdhsa_* values, without the prefix
    metadata: dict | None = None                                  # this kernel's entry of amdhsa.kernels
    encodings: list[bytes | None] = field(default_factory=list)   # per instruction, when known (objdump/.co)
    addr: int | None = None                                       # address of the first instruction (.co)
    size: int | None = None

    @property
    def args(self) -> list[dict]:
        return [{k.lstrip("."): v for k, v in a.items()} for a in (self.metadata or {}).get(".args", []) or []]


@dataclass
class AsmModule:
    kernels: list[AsmKernel] = field(default_factory=list)
    target: str | None = None
    metadata_text: str | None = None
    metadata: dict | None = None
    directives: list[tuple[int, str]] = field(default_factory=list)   # (line, text) of every other directive
    files: dict[int, str] = field(default_factory=dict)
    filename: str | None = None
    names: list[str] = field(default_factory=list)     # '; flyasm:' plan/region records (asm/names.py)

    def kernel(self, name: str) -> AsmKernel:
        for k in self.kernels:
            if k.name == name:
                return k
        raise ParseError(f"{self.filename or 'the assembly'} has no kernel '{name}'", find_loc=False)


_OBJDUMP_ADDR = re.compile(r"//\s*([0-9A-Fa-f]+):((?:\s+[0-9A-Fa-f]{8})+)\s*(<[^>]*>)?\s*$")
_OBJDUMP_SYM = re.compile(r"^([0-9A-Fa-f]{8,16}) <([^>]+)>:\s*$")
_LABEL = re.compile(r"^([A-Za-z_.$][\w.$@]*):(.*)$")
_REGION = re.compile(r"^;\s*(end )?region (\S+)\s*$")
_NAMES = re.compile(r"^;\s*flyasm:(\S+)\s*$")    # plan/region records (asm/names.py)


def branch_target(pc: int, simm16: int) -> int:
    """Byte address a SOPP branch at pc jumps to: pc + 4 + 4 * sign-extended simm16."""
    off = simm16 - 0x10000 if simm16 & 0x8000 else simm16
    return pc + 4 + 4 * off


def pc_label(off: int) -> str:
    return f".L_pc_0x{off:x}"


def _is_branch(inst: Instruction) -> bool:
    try:
        ops = inst.info["operands"]
    except FlyasmError:
        return False
    return any("label" in o.get("kinds", ()) for o in ops)


def read_asm(path) -> str:
    """The text of a `.s` file; a file that is not UTF-8 is a ParseError naming it and the first bad
    byte (llvm-mc reads bytes, we parse text: one sentence, not a traceback)."""
    from pathlib import Path
    raw = Path(path).read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise ParseError(f"{path}:{line}: not UTF-8 text (byte 0x{raw[e.start]:02x} at offset {e.start})",
                         find_loc=False) from None


def parse_asm(text: str, filename: str | None = None, *, text_base: int = 0,
              functions: set[str] | None = None, symbols: dict[str, int] | None = None) -> AsmModule:
    """Parse a whole .s file (see module doc). `text_base` is subtracted from objdump addresses so
    `pc` is an offset into .text. With `functions` (the FUNC symbols of a code object), objdump's
    `<NAME>:` headers for other symbols (non-.L labels that reached the symbol table) are labels.
    `symbols` (name -> offset into .text, from the symbol table) cross-checks the names objdump
    prints for branch targets."""
    fname = filename or "<asm>"
    mod = AsmModule(filename=filename)
    cur: AsmKernel | None = None
    kernels: dict[str, AsmKernel] = {}
    given_functions = functions is not None   # a code object's FUNC symbols: other headers are labels
    functions = set(functions or ())
    pending_labels: list[str] = []
    branches: list[tuple[AsmKernel, int, int, int]] = []   # (kernel, instruction, label slot, target pc)
    parsed: dict[str, tuple] = {}        # instruction text -> its parts (unrolled code repeats lines)
    region: tuple[str, ...] = ()
    loc: SourceLoc | None = None
    in_kd: str | None = None
    kd_vals: dict[str, dict] = {}
    meta_lines: list[str] | None = None
    objdump_mode = False
    lines = text.splitlines()

    def where(n: int) -> SourceLoc:
        return SourceLoc(fname, n)

    def kernel_named(name: str) -> AsmKernel:
        if name not in kernels:
            kernels[name] = AsmKernel(name)
            mod.kernels.append(kernels[name])
        return kernels[name]

    def start_function(name: str) -> None:
        nonlocal cur, pending_labels
        cur = kernel_named(name)
        pending_labels = []

    def place_labels() -> None:
        for lab in pending_labels:
            cur.labels[lab] = len(cur.instructions)
        pending_labels.clear()

    for n, line in enumerate(lines, 1):
        raw_line = line
        s = line.strip()
        if meta_lines is not None:
            if s.startswith(".end_amdgpu_metadata"):
                mod.metadata_text = "\n".join(meta_lines)
                meta_lines = None
            else:
                meta_lines.append(raw_line)
            continue
        if not s:
            continue
        if in_kd is not None:
            body = strip_comment(s)
            if not body:
                continue
            if body.startswith(".end_amdhsa_kernel"):
                in_kd = None
                continue
            parts = body.split()
            if not parts[0].startswith(".amdhsa_") or len(parts) != 2:
                raise ParseError(f"expected '.amdhsa_<field> <value>' inside .amdhsa_kernel, got '{body}'",
                                 where(n), find_loc=False)
            try:
                kd_vals[in_kd][parts[0][len(".amdhsa_"):]] = int(parts[1], 0)
            except ValueError:
                raise ParseError(f"{parts[0]} takes an integer, not '{parts[1]}'", where(n),
                                 find_loc=False) from None
            continue
        m = _REGION.match(s)
        if m:
            path = tuple(m.group(2).split("/"))
            region = path[:-1] if m.group(1) else path
            continue
        if s.startswith(";") or s.startswith("//") or s.startswith("#"):
            m = _NAMES.match(s)
            if m:
                mod.names.append(m.group(1))
            continue
        # llvm-objdump headers
        m = _OBJDUMP_SYM.match(s)
        if m:
            objdump_mode = True
            if given_functions and m.group(2) not in functions and cur is not None:
                pending_labels.append(m.group(2))
                continue
            start_function(m.group(2))
            if cur.addr is None:
                cur.addr = int(m.group(1), 16)
            continue
        if s.endswith("file format elf64-amdgpu") or s.startswith("Disassembly of section"):
            objdump_mode = True
            continue
        m = _LABEL.match(s)
        if m:
            name, rest = m.group(1), m.group(2).strip()
            if name in functions or (cur is None and not name.startswith(".L")):
                start_function(name)
            elif cur is not None:
                pending_labels.append(name)
            if strip_comment(rest):
                raise ParseError(f"put the instruction after label '{name}' on its own line",
                                 where(n), find_loc=False)
            continue
        if s.startswith("."):
            body = strip_comment(s)
            parts_ = body.split(None, 1)
            head = parts_[0].rstrip(",")
            arg = parts_[1].strip() if len(parts_) > 1 else ""
            if head == ".amdhsa_kernel":
                in_kd = arg
                kd_vals[arg] = {}
                continue
            if head == ".amdgpu_metadata":
                meta_lines = []
                continue
            if head == ".amdgcn_target":
                mod.target = arg.strip('"')
                continue
            if head == ".type":
                sym, _, kind = arg.partition(",")
                if "function" in kind:
                    functions.add(sym.strip())
                mod.directives.append((n, body))
                continue
            if head == ".file":
                try:
                    parts = shlex.split(arg)
                except ValueError:
                    parts = []
                if parts and parts[0].isdigit() and len(parts) >= 2:
                    path = parts[1] if len(parts) == 2 or parts[2].lower().startswith("md5") else \
                        (parts[2] if parts[2].startswith("/") else f"{parts[1].rstrip('/')}/{parts[2]}")
                    mod.files[int(parts[0])] = path
                    continue
                mod.directives.append((n, body))
                continue
            if head == ".loc":
                parts = arg.split()
                try:
                    fno, ln = int(parts[0]), int(parts[1])
                except (IndexError, ValueError):
                    raise ParseError(f".loc takes a file number and a line, not '{arg}'", where(n),
                                     find_loc=False) from None
                if fno not in mod.files:
                    raise ParseError(f".loc names file {fno}, which no .file declared", where(n),
                                     find_loc=False)
                loc = SourceLoc(mod.files[fno], ln)
                continue
            if head in (".long", ".word") and cur is not None and (";" in s or "//" in s):
                inst = _raw_instruction(s, fname, n)
                if inst is not None:
                    place_labels()
                    inst.loc, inst.region = loc, region
                    cur.instructions.append(inst)
                    cur.encodings.append(inst.raw)
                    continue
            mod.directives.append((n, body))
            continue
        # an instruction
        if cur is None:
            raise ParseError("instruction outside any function (no 'NAME:' label before it)",
                             where(n), find_loc=False)
        enc = None
        pc = None
        m = _OBJDUMP_ADDR.search(s)
        if m:
            objdump_mode = True
            pc = int(m.group(1), 16) - text_base
            words = m.group(2).split()
            enc = b"".join(int(w, 16).to_bytes(4, "little") for w in words)
            s = s[:m.start()]
        body = strip_comment(s)
        if not body:
            continue
        if body == "<unknown>" and enc is not None:
            inst = Instruction(".long", (), {}, raw=enc)
        else:
            try:
                inst = _parse_once(body, where(n), parsed)
            except ParseError as e:
                if enc is None:
                    raise ParseError(e.message, where(n), find_loc=False) from None
                # objdump printed something the IR cannot hold (e.g. an invalid register note):
                # keep the bytes, and the text as a comment
                head, _, rest = body.partition(" ")
                inst = Instruction(head, (Expr(rest.strip()),) if rest.strip() else (), {}, raw=enc,
                                   comment=f"unparsed: {e.message}")
        if enc is not None and pc is not None and inst.mnemonic != ".long" and _is_branch(inst):
            # the label slot is not always the first (s_call_b64 sdst, label; s_cbranch_i_fork sdst, label)
            at = next(i for i, o in enumerate(inst.info["operands"]) if "label" in o.get("kinds", ()))
            if at < len(inst.operands) and isinstance(inst.operands[at], (Imm, Label)):
                branches.append((cur, len(cur.instructions), at, branch_target(pc, int.from_bytes(enc[:2], "little"))))
        place_labels()
        inst.loc, inst.region, inst.pc = loc, region, pc   # .loc holds until the next one, as in DWARF
        tag = _LDS_TAG.search(s)
        if tag:
            inst.lds_buffer = tag.group(1)
        cur.instructions.append(inst)
        cur.encodings.append(enc)
    if in_kd is not None:
        raise ParseError(f"{fname}: .amdhsa_kernel {in_kd} has no .end_amdhsa_kernel", find_loc=False)
    if meta_lines is not None:
        raise ParseError(f"{fname}: .amdgpu_metadata has no .end_amdgpu_metadata", find_loc=False)
    if cur is not None:
        place_labels()
    if objdump_mode:
        _resolve_branches(branches, symbols or {}, fname, text_base)
    for name, vals in kd_vals.items():
        kernel_named(name).descriptor = vals
    if mod.metadata_text is not None:
        from ..codeobj.metadata import parse_yaml
        meta = parse_yaml(mod.metadata_text, f"{fname} .amdgpu_metadata")
        mod.metadata = meta if isinstance(meta, dict) else None
        for km in (mod.metadata or {}).get("amdhsa.kernels", []) or []:
            if isinstance(km, dict) and km.get(".name") in kernels:
                kernels[km[".name"]].metadata = km
    for k in mod.kernels:
        for inst in k.instructions:
            for op in inst.operands:
                if isinstance(op, Label) and not any(op.name in kk.labels or op.name == kk.name for kk in mod.kernels):
                    raise ParseError(f"{fname}: {k.name}: '{inst.text()}' jumps to '{op.name}', which is never defined",
                                     find_loc=False)
    return mod


def _parse_once(body: str, loc: SourceLoc, parsed: dict) -> Instruction:
    """parse_instruction, each distinct text once: a repeat is a new Instruction of the same
    (immutable) operands and a copy of the modifiers."""
    got = parsed.get(body)
    if got is None:
        inst = parse_instruction(body, loc)
        parsed[body] = (inst.mnemonic, inst.operands, inst.modifiers)
        return inst
    mnemonic, operands, modifiers = got
    return Instruction(mnemonic, operands, {k: list(v) if isinstance(v, list) else v for k, v in modifiers.items()},
                       loc)


def _raw_instruction(s: str, fname: str, n: int) -> Instruction | None:
    """`.long 0x..., 0x...  ; text` -> the instruction of the comment, carrying the raw words."""
    i = s.find(";")
    j = s.find("//")
    cut = min(x for x in (i, j) if x >= 0)
    words_text, comment = s[len(".long"):cut].strip(), s[cut:].lstrip(";/ ").strip()
    try:
        words = [int(w, 0) & 0xFFFFFFFF for w in split_top(words_text, ",")]
    except ValueError:
        return None
    raw = b"".join(w.to_bytes(4, "little") for w in words)
    if not comment:
        return None
    try:
        inst = parse_instruction(comment, SourceLoc(fname, n))
    except ParseError:
        return None
    inst.raw = raw
    return inst


def _resolve_branches(branches: list, symbols: dict[str, int], fname: str, base: int) -> None:
    """Point every branch objdump printed at the label of the instruction its encoding targets,
    in its own function (see the module doc for the name)."""
    spans: dict[int, tuple[int, int, dict[int, int]]] = {}      # kernel -> (start, end, pc -> index)
    for k, i, at, target in branches:
        if id(k) not in spans:
            at_pc = {inst.pc: n for n, inst in enumerate(k.instructions) if inst.pc is not None}
            last = max(at_pc)
            end = last + len(k.encodings[at_pc[last]] or b"")
            at_pc[end] = len(k.instructions)                   # a label after the last instruction
            spans[id(k)] = (min(at_pc), end, at_pc)
        start, end, at_pc = spans[id(k)]
        inst = k.instructions[i]
        idx = at_pc.get(target)
        if idx is None:
            where = (f"outside {k.name} [0x{start + base:x}, 0x{end + base:x})" if not start <= target < end else
                     f"into the middle of the instruction at "
                     f"0x{max(p for p in at_pc if p < target) + base:x}")
            raise ParseError(f"{fname}: '{inst.text()}' at 0x{inst.pc + base:x} jumps to 0x{target + base:x}, {where}",
                             find_loc=False)
        printed = inst.operands[at]
        name = printed.name if isinstance(printed, Label) else None
        if name is not None and name in symbols and symbols[name] != target:
            raise ParseError(f"{fname}: '{inst.text()}' at 0x{inst.pc + base:x} jumps to 0x{target + base:x} by its "
                             f"encoding, but objdump names it {name}, which is at 0x{symbols[name] + base:x}",
                             find_loc=False)
        if name is None or k.labels.get(name) != idx:
            here = [lab for lab, n in k.labels.items() if n == idx and not lab.startswith(".L_pc_0x")]
            name = here[0] if here and name is not None else pc_label(target)
        k.labels.setdefault(name, idx)
        ops = list(inst.operands)
        ops[at] = Label(name)
        inst.operands = tuple(ops)


__all__ = ["AsmKernel", "AsmModule", "parse_asm", "branch_target", "pc_label", "Expr"]
