"""Batched llvm-mc / llvm-objdump calls: encode many instruction lines in one process.

Used by the table tests and the builder property test: one llvm-mc call for thousands of lines
(a process per line would take minutes). llvm-mc keeps going after an error, prints one
`; encoding:` line per accepted instruction and reports each rejected one as `<file>:<line>:...`.
"""
from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import AssemblerError
from .toolchain import find_toolchain

_ENC = re.compile(r"^\s*(?P<text>.*?)\s*;\s*encoding: \[(?P<bytes>[^\]]*)\]")
_ERR = re.compile(r"^[^\n:]+:(?P<line>\d+):(?P<col>\d+): error: (?P<msg>.*)$", re.M)


@dataclass(frozen=True)
class Encoded:
    line: str                 # the input line
    bytes: bytes | None       # encoding, None when llvm-mc rejected it
    printed: str | None       # llvm-mc's canonical text
    error: str | None         # llvm-mc's message when rejected


def encode(lines: list[str], mcpu: str = "gfx950") -> list[Encoded]:
    """Encode each line (one instruction per line) with a single llvm-mc process."""
    tc = find_toolchain()
    errors: dict[int, str] = {}
    with tempfile.TemporaryDirectory(prefix="flyasm-mc-") as td:
        src = Path(td) / "batch.s"
        src.write_text("".join(l.strip() + "\n" for l in lines))
        r = subprocess.run([str(tc.mc), "-triple=amdgcn-amd-amdhsa", f"-mcpu={mcpu}", "-show-encoding", str(src)],
                           capture_output=True, text=True)
    for m in _ERR.finditer(r.stderr):
        errors.setdefault(int(m.group("line")), m.group("msg"))
    encs = []
    for out in r.stdout.splitlines():
        m = _ENC.match(out)
        if m:
            encs.append((m.group("text"), bytes(int(x, 16) for x in m.group("bytes").split(",") if x.strip())))
    ok = [i for i in range(len(lines)) if (i + 1) not in errors]
    if len(ok) != len(encs):
        raise AssemblerError(f"llvm-mc printed {len(encs)} encodings for {len(ok)} accepted lines "
                             f"(a line held more than one instruction?)", find_loc=False)
    res: list[Encoded] = [None] * len(lines)  # type: ignore[list-item]
    for i, (text, b) in zip(ok, encs):
        res[i] = Encoded(lines[i], b, re.sub(r"\s+", " ", text), None)
    for ln, msg in errors.items():
        if 1 <= ln <= len(lines):
            res[ln - 1] = Encoded(lines[ln - 1], None, None, msg)
    return res


def disassemble(chunks: list[bytes], mcpu: str = "gfx950") -> list[str]:
    """Disassemble each byte string (one instruction each) with one llvm-mc --disassemble call.

    llvm-mc's disassembler prints the same text as llvm-objdump (both use the AMDGPU
    InstPrinter); feeding each instruction on its own input line keeps the mapping 1:1.
    """
    tc = find_toolchain()
    text = "".join(" ".join(f"0x{b:02x}" for b in c) + "\n" for c in chunks)
    r = subprocess.run([str(tc.mc), "--disassemble", "-triple=amdgcn-amd-amdhsa", f"-mcpu={mcpu}"],
                       input=text, capture_output=True, text=True)
    outs = [re.sub(r"\s+", " ", l.split(";")[0].strip()) for l in r.stdout.splitlines()
            if l.strip() and not l.strip().startswith(".")]
    if len(outs) != len(chunks):
        raise AssemblerError(f"llvm-mc --disassemble gave {len(outs)} lines for {len(chunks)} instructions: "
                             f"{r.stderr.strip()[:200]}", find_loc=False)
    return outs


def objdump(lines: list[str], mcpu: str = "gfx950") -> list[str]:
    """Assemble accepted lines into one object and read them back with llvm-objdump -d.

    Returns one text per input line (llvm-objdump's spelling, comments stripped).
    """
    tc = find_toolchain()
    with tempfile.TemporaryDirectory(prefix="flyasm-od-") as td:
        src, obj = Path(td) / "x.s", Path(td) / "x.o"
        src.write_text("".join(l.strip() + "\n" for l in lines))
        r = subprocess.run([str(tc.mc), "-triple=amdgcn-amd-amdhsa", f"-mcpu={mcpu}", "-filetype=obj", str(src),
                            "-o", str(obj)], capture_output=True, text=True)
        if r.returncode:
            raise AssemblerError(f"llvm-mc rejected the batch: {r.stderr.strip()[:200]}", find_loc=False)
        r = subprocess.run([str(tc.objdump), "-d", "--no-show-raw-insn", "--no-leading-addr", f"--mcpu={mcpu}",
                            str(obj)], capture_output=True, text=True)
    outs = [re.sub(r"\s+", " ", l.split("//")[0].strip()) for l in r.stdout.splitlines() if l.startswith("\t")]
    if len(outs) != len(lines):
        raise AssemblerError(f"llvm-objdump gave {len(outs)} instructions for {len(lines)} lines", find_loc=False)
    return outs
