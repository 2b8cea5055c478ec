"""Read an HSA code object (.co): ELF header flags, symbols, kernel descriptors, metadata, .text.

pyelftools parses the ELF; the NT_AMDGPU_METADATA note (type 32, owner "AMDGPU") is msgpack.
Anything malformed becomes a CodeObjectError with one sentence, never another exception.

Bound: O(sections + symbols log symbols) and one copy of .text.
"""
from __future__ import annotations

import io
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import CodeObjectError
from .descriptor import KD_SIZE, KernelDescriptor
from .metadata import NT_AMDGPU_METADATA, decode_msgpack

EM_AMDGPU = 224
ELFOSABI_AMDGPU_HSA = 64
# EI_ABIVERSION for ELFOSABI_AMDGPU_HSA -> code object version (AMDGPUUsage "ELF Header").
ABI_TO_COV = {1: 3, 2: 4, 3: 5, 4: 6}
# EF_AMDGPU_MACH values (llvm/include/llvm/BinaryFormat/ELF.h).
MACH = {0x2c: "gfx900", 0x2f: "gfx906", 0x30: "gfx908", 0x3f: "gfx90a", 0x40: "gfx940", 0x4b: "gfx941",
        0x4c: "gfx942", 0x4f: "gfx950"}
_FEATURE = {0: None, 1: "any", 2: "off", 3: "on"}   # EF_AMDGPU_FEATURE_{XNACK,SRAMECC}_V4 states


@dataclass(frozen=True)
class Symbol:
    name: str
    value: int
    size: int
    type: str      # FUNC / OBJECT / NOTYPE ...
    bind: str
    section: str | None


@dataclass
class KernelCode:
    name: str
    addr: int                  # address of the first instruction
    size: int                  # bytes of code: st_size, or the extent to the next function when that is 0
    kd_addr: int
    descriptor: KernelDescriptor
    code: bytes                # the symbol's bytes of .text
    metadata: dict | None = None
    sized: bool = True         # False: st_size was 0 and `size` runs to the next function or .text's end

    @property
    def text_offset(self) -> int:
        return self.addr


@dataclass
class CodeObject:
    raw: bytes
    e_flags: int
    abi_version: int
    code_object_version: int | None
    mach: str
    xnack: str | None
    sramecc: str | None
    symbols: list[Symbol]
    text: bytes
    text_addr: int
    kernels: list[KernelCode]
    metadata: dict | None
    metadata_raw: bytes | None
    path: str | None = None
    functions: list[Symbol] = field(default_factory=list)   # FUNC symbols in .text, by address
    lds_tags: dict[tuple[str, int], str] = field(default_factory=dict)  # (kernel, ordinal) -> LDS buffer
    names: list[str] = field(default_factory=list)      # flyasm plan/region records (asm/names.py)

    @property
    def target(self) -> str:
        t = f"amdgcn-amd-amdhsa--{self.mach}"
        feats = []
        if self.sramecc in ("on", "off"):
            feats.append(f"sramecc{'+' if self.sramecc == 'on' else '-'}")
        if self.xnack in ("on", "off"):
            feats.append(f"xnack{'+' if self.xnack == 'on' else '-'}")
        return t + "".join(":" + f for f in feats)

    def kernel(self, name: str) -> KernelCode:
        for k in self.kernels:
            if k.name == name:
                return k
        raise CodeObjectError(f"the code object has no kernel '{name}' (it has {', '.join(k.name for k in self.kernels)})",
                              find_loc=False)

    def summary(self) -> dict:
        return {
            "path": self.path, "target": self.target, "code_object_version": self.code_object_version,
            "abi_version": self.abi_version, "e_flags": f"0x{self.e_flags:x}",
            "text_bytes": len(self.text),
            "kernels": [{"name": k.name, "addr": f"0x{k.addr:x}", "size": k.size,
                         "descriptor": k.descriptor.to_dict(),
                         "args": [{kk.lstrip("."): vv for kk, vv in a.items()}
                                  for a in (k.metadata or {}).get(".args", [])],
                         "metadata": {kk.lstrip("."): vv for kk, vv in (k.metadata or {}).items() if kk != ".args"}}
                        for k in self.kernels],
        }


def read_code_object(src) -> CodeObject:
    """Read a code object from bytes or a path."""
    path = None
    if isinstance(src, (str, os.PathLike)):
        path = str(src)
        try:
            data = Path(src).read_bytes()
        except OSError as e:
            raise CodeObjectError(f"cannot read {src}: {e.strerror}", find_loc=False) from None
    elif isinstance(src, (bytes, bytearray, memoryview)):
        data = bytes(src)
    else:
        raise CodeObjectError(f"read_code_object takes bytes or a path, not {type(src).__name__}", find_loc=False)
    try:
        co = _read(data)
    except CodeObjectError:
        raise
    except Exception as e:  # noqa: BLE001 - pyelftools raises many types on corrupt input
        raise CodeObjectError(f"{path or 'the code object'} is not a readable ELF code object "
                              f"({type(e).__name__}: {str(e)[:120]})", find_loc=False) from None
    co.path = path
    return co


def _read(data: bytes) -> CodeObject:
    from elftools.elf.elffile import ELFFile

    if data[:4] != b"\x7fELF":
        raise CodeObjectError("not an ELF file (no \\x7fELF magic)", find_loc=False)
    elf = ELFFile(io.BytesIO(data))
    h = elf.header
    if h["e_machine"] != "EM_AMDGPU" and h["e_machine"] != EM_AMDGPU:
        raise CodeObjectError(f"not an AMDGPU code object (e_machine {h['e_machine']})", find_loc=False)
    abi = h["e_ident"]["EI_ABIVERSION"]
    flags = h["e_flags"]
    mach = MACH.get(flags & 0xFF, f"mach_0x{flags & 0xff:x}")
    cov = ABI_TO_COV.get(abi)
    xnack = _FEATURE[(flags >> 8) & 3] if cov and cov >= 4 else None
    sramecc = _FEATURE[(flags >> 10) & 3] if cov and cov >= 4 else None

    secnames = {}
    text_sec = None
    for i, sec in enumerate(elf.iter_sections()):
        secnames[i] = sec.name
        if sec.name == ".text":
            text_sec = sec
    if text_sec is None:
        raise CodeObjectError("the code object has no .text section", find_loc=False)
    text = text_sec.data()
    text_addr = text_sec["sh_addr"]
    if len(text) != text_sec["sh_size"]:
        raise CodeObjectError(".text runs past the end of the file", find_loc=False)

    symbols: list[Symbol] = []
    symtab = elf.get_section_by_name(".symtab") or elf.get_section_by_name(".dynsym")
    if symtab is not None and hasattr(symtab, "iter_symbols"):
        for sym in symtab.iter_symbols():
            if not sym.name:
                continue
            shndx = sym["st_shndx"]
            symbols.append(Symbol(sym.name, sym["st_value"], sym["st_size"], sym["st_info"]["type"].replace("STT_", ""),
                                  sym["st_info"]["bind"].replace("STB_", ""),
                                  secnames.get(shndx) if isinstance(shndx, int) else None))

    meta_raw = None
    for sec in elf.iter_sections():
        if sec.header["sh_type"] != "SHT_NOTE":
            continue
        for note in sec.iter_notes():
            if note["n_name"] == "AMDGPU" and note["n_type"] in (NT_AMDGPU_METADATA, "NT_AMDGPU_METADATA"):
                desc = note["n_desc"]
                meta_raw = desc if isinstance(desc, bytes) else bytes(desc, "latin-1")
    metadata = decode_msgpack(meta_raw) if meta_raw is not None else None

    by_name = {s.name: s for s in symbols}
    kernel_meta = {}
    if metadata:
        for km in metadata.get("amdhsa.kernels", []) or []:
            if isinstance(km, dict) and isinstance(km.get(".symbol"), str):
                kernel_meta[km[".symbol"]] = km

    code_starts = _code_starts(symbols, text_addr, len(text))
    kernels: list[KernelCode] = []
    for sym in symbols:
        if not sym.name.endswith(".kd") or sym.type != "OBJECT":
            continue
        if sym.size != KD_SIZE:
            raise CodeObjectError(f"kernel descriptor {sym.name} is {sym.size} bytes, not {KD_SIZE}", find_loc=False)
        kd = KernelDescriptor.decode(_bytes_at(elf, sym.value, KD_SIZE, sym.name))
        name = sym.name[:-3]
        entry = sym.value + kd.kernel_code_entry_byte_offset
        fsym = by_name.get(name)
        if fsym is None or fsym.type != "FUNC":
            raise CodeObjectError(f"kernel descriptor {sym.name} has no function symbol {name}", find_loc=False)
        if fsym.value != entry:
            raise CodeObjectError(f"{sym.name} says the code starts at 0x{entry:x} but {name} is at 0x{fsym.value:x}",
                                  find_loc=False)
        off = entry - text_addr
        if off < 0 or off + fsym.size > len(text):
            raise CodeObjectError(f"kernel {name} lies outside .text", find_loc=False)
        size = fsym.size or _extent(entry, code_starts, text_addr + len(text))
        if size <= 0:
            raise CodeObjectError(f"kernel {name} has no code: its entry 0x{entry:x} is at the end of .text",
                                  find_loc=False)
        kernels.append(KernelCode(name, entry, size, sym.value, kd, text[off:off + size],
                                  kernel_meta.get(sym.name), sized=bool(fsym.size)))
    kernels.sort(key=lambda k: k.addr)
    seen, funcs = set(), []
    for s_ in sorted(symbols, key=lambda s_: (s_.value, s_.name)):
        if s_.type == "FUNC" and s_.section == ".text" and s_.name not in seen:
            seen.add(s_.name)
            funcs.append(s_)
    return CodeObject(data, flags, abi, cov, mach, xnack, sramecc, symbols, text, text_addr, kernels, metadata,
                      meta_raw, functions=funcs, lds_tags=_lds_tags(elf), names=_names(elf))


def _code_starts(symbols: list[Symbol], text_addr: int, text_len: int) -> list[int]:
    """Addresses in .text where a function starts: the ends of code for symbols without a size."""
    return sorted({s_.value for s_ in symbols if s_.type == "FUNC" and s_.section == ".text"
                   and text_addr <= s_.value < text_addr + text_len})


def _extent(entry: int, starts: list[int], text_end: int) -> int:
    """Bytes from `entry` to the next function start, or to the end of .text. Hand-written
    assembly without `.size` directives (aiter's kernels) leaves st_size 0."""
    return min((a for a in starts if a > entry), default=text_end) - entry


def _lds_tags(elf) -> dict[tuple[str, int], str]:
    """flyasm's LDS-buffer annotations: NUL-separated "KERNEL:INDEX:BUFFER" strings."""
    sec = elf.get_section_by_name(".flyasm.lds")
    if sec is None:
        return {}
    tags = {}
    for rec in sec.data().split(b"\0"):
        if not rec:
            continue
        try:
            kname, index, tag = rec.decode("ascii").rsplit(":", 2)
            tags[(kname, int(index))] = tag
        except (UnicodeDecodeError, ValueError):
            raise CodeObjectError(f"the .flyasm.lds section has a malformed record {rec[:40]!r}",
                                  find_loc=False) from None
    return tags


def _names(elf) -> list[str]:
    """flyasm's plan and region records: NUL-separated ASCII strings (decoded by asm/names.py)."""
    sec = elf.get_section_by_name(".flyasm.names")
    if sec is None:
        return []
    try:
        return [r.decode("ascii") for r in sec.data().split(b"\0") if r]
    except UnicodeDecodeError:
        raise CodeObjectError("the .flyasm.names section is not ASCII", find_loc=False) from None


def _bytes_at(elf, addr: int, size: int, what: str) -> bytes:
    for sec in elf.iter_sections():
        a, n = sec["sh_addr"], sec["sh_size"]
        if sec["sh_type"] != "SHT_NOBITS" and a <= addr and addr + size <= a + n and a:
            d = sec.data()
            return d[addr - a:addr - a + size]
    raise CodeObjectError(f"{what} at 0x{addr:x} is not inside any section", find_loc=False)
