"""What the emulator runs: the decoded instructions of one kernel in a code object, plus its
descriptor and metadata.

`load_program()` is the single entry point. Until flyasm.codeobj's reader lands it uses a small
private adapter (pyelftools + msgpack for the ELF, llvm-objdump text -> parse_instruction for the
code); the adapter is confined to this module so swapping it out touches nothing else.
"""
from __future__ import annotations

import io
import re
import struct
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import CodeObjectError
from ..isa.instruction import Instruction
from ..isa.operands import Imm

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
    def from_bytes(cls, b: bytes) -> "Descriptor":
        if len(b) < 64:
            raise CodeObjectError("kernel descriptor is shorter than 64 bytes", find_loc=False)
        gs, _ps, ks = struct.unpack_from("<III", b, 0)
        rsrc3, rsrc1, rsrc2 = struct.unpack_from("<III", b, 44)
        props, preload = struct.unpack_from("<HH", b, 56)
        return cls(gs, ks, rsrc1, rsrc2, rsrc3, props, preload)


@dataclass
class Program:
    name: str
    insts: list[Instruction]
    descriptor: Descriptor
    args: list[dict]                    # metadata .args entries (may be empty)
    metadata: dict = field(default_factory=dict)
    targets: dict[int, int] = field(default_factory=dict)   # instruction index -> branch target index


_INSN_RE = re.compile(r"^\s+(.*?)\s*//\s*([0-9a-fA-F]+):((?:\s+[0-9a-fA-F]{8})+)(?:\s+<[^>]*>)?\s*$")
_SYM_RE = re.compile(r"^([0-9a-fA-F]+) <(.+)>:$")


def _objdump_text(co: bytes) -> str:
    from ..asm.toolchain import find_toolchain
    tc = find_toolchain()
    objdump = Path(tc.mc).parent / "llvm-objdump"
    with tempfile.NamedTemporaryFile(suffix=".co") as f:
        f.write(co)
        f.flush()
        r = subprocess.run([str(objdump), "-d", "--mcpu=gfx950", f.name], capture_output=True, text=True)
    if r.returncode != 0:
        raise CodeObjectError(f"llvm-objdump failed: {r.stderr.strip()}", find_loc=False)
    return r.stdout


def _read_elf(co: bytes):
    import msgpack
    from elftools.elf.elffile import ELFFile
    elf = ELFFile(io.BytesIO(co))
    syms = {}
    for sec in elf.iter_sections():
        if sec.header.sh_type == "SHT_SYMTAB":
            for s in sec.iter_symbols():
                syms[s.name] = (s["st_value"], s["st_size"], s["st_info"]["type"])
    meta = {}
    for sec in elf.iter_sections():
        if sec.header.sh_type == "SHT_NOTE":
            for note in sec.iter_notes():
                if note.n_name == "AMDGPU" and note.n_type in (32, "NT_AMDGPU_METADATA"):
                    desc = note.n_desc
                    meta = msgpack.unpackb(desc.encode("latin-1") if isinstance(desc, str) else desc, raw=False)

    def read_vaddr(addr, n):
        for seg in elf.iter_segments():
            if seg.header.p_type == "PT_LOAD" and seg.header.p_vaddr <= addr < seg.header.p_vaddr + seg.header.p_filesz:
                off = seg.header.p_offset + addr - seg.header.p_vaddr
                return co[off:off + n]
        raise CodeObjectError(f"address 0x{addr:x} is not in a loaded segment", find_loc=False)
    return syms, meta, read_vaddr


def load_program(code_object, symbol: str | None = None) -> Program:
    """A kernel of a code object (path or bytes) as a Program."""
    co = Path(code_object).read_bytes() if isinstance(code_object, (str, Path)) else bytes(code_object)
    syms, meta, read_vaddr = _read_elf(co)
    kds = sorted(n[:-3] for n in syms if n.endswith(".kd"))
    if not kds:
        raise CodeObjectError("the code object has no kernel descriptor (NAME.kd symbol)", find_loc=False)
    if symbol is None:
        if len(kds) != 1:
            raise CodeObjectError(f"the code object holds {len(kds)} kernels {kds}; pass kernel=NAME", find_loc=False)
        symbol = kds[0]
    if symbol not in kds:
        raise CodeObjectError(f"kernel '{symbol}' is not in the code object (it has {kds})", find_loc=False)
    kd_addr = syms[symbol + ".kd"][0]
    kd_bytes = read_vaddr(kd_addr, 64)
    desc = Descriptor.from_bytes(kd_bytes)
    entry = kd_addr + struct.unpack_from("<q", kd_bytes, 16)[0]
    size = syms.get(symbol, (entry, 0, ""))[1] or (1 << 30)
    mk = next((k for k in meta.get("amdhsa.kernels", []) if k.get(".name") == symbol), {})
    insts = []
    for line in _objdump_text(co).splitlines():
        m = _INSN_RE.match(line)
        if not m:
            continue
        pc = int(m.group(2), 16)
        if not (entry <= pc < entry + size):
            continue
        from ..isa.syntax import parse_instruction
        inst = parse_instruction(m.group(1))
        inst.pc = pc - entry
        inst.raw = b"".join(struct.pack("<I", int(w, 16)) for w in m.group(3).split())
        insts.append(inst)
    # Trailing s_nop padding after the last s_endpgm is not part of the kernel.
    while insts and insts[-1].name == "s_nop" and any(i.name == "s_endpgm" for i in insts):
        insts.pop()
    return Program(symbol, insts, desc, list(mk.get(".args", [])), mk, resolve_branches(insts))


def resolve_branches(insts: list[Instruction]) -> dict[int, int]:
    """Branch target of each SOPP branch, as an instruction index: pc + 4 + 4*simm16 (signed)."""
    by_pc = {inst.pc: i for i, inst in enumerate(insts)}
    out = {}
    for i, inst in enumerate(insts):
        if inst.name in BRANCHES:
            op = inst.operands[0]
            if not isinstance(op, Imm):
                continue
            simm = op.value & 0xFFFF
            simm -= (simm & 0x8000) << 1
            tgt = inst.pc + 4 + 4 * simm
            if tgt not in by_pc:
                raise CodeObjectError(f"{inst.text()} at pc 0x{inst.pc:x} jumps to 0x{tgt:x}, not an instruction",
                                      find_loc=False)
            out[i] = by_pc[tgt]
    return out
