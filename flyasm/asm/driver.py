"""Drive llvm-mc and ld.lld: assembly text -> relocatable object -> HSA code object (.co).

Errors from llvm-mc are mapped back to the instruction and the Python line that emitted it.
Builds go through a content-keyed cache (asm text + code-object version + toolchain version):
identical inputs give identical bytes, writes are atomic, parallel builds are safe.
"""
from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import AssemblerError
from .toolchain import find_toolchain

CACHE_ENV = "FLYASM_CACHE"


def cache_dir() -> Path:
    d = Path(os.environ.get(CACHE_ENV, Path.home() / ".cache" / "flyasm"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def atomic_write(path: Path, data: bytes | str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


_MC_ERR = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?P<col>\d+): error: (?P<msg>.*)$", re.M)


def assemble(text: str, code_object: int = 5, line_map=None, stream=None, name: str = "input.s") -> bytes:
    """Assemble and link; returns the .co bytes. Cached by content."""
    tc = find_toolchain()
    key = hashlib.sha256(f"{tc.version}\0{code_object}\0{text}".encode()).hexdigest()
    cached = cache_dir() / "co" / f"{key}.co"
    if cached.exists():
        return cached.read_bytes()
    with tempfile.TemporaryDirectory(prefix="flyasm-") as td:
        src, obj, co = Path(td) / name, Path(td) / "x.o", Path(td) / "x.co"
        src.write_text(text)
        r = subprocess.run([str(tc.mc), "-triple=amdgcn-amd-amdhsa", "-mcpu=gfx950",
                            f"--amdhsa-code-object-version={code_object}", "-filetype=obj", str(src), "-o", str(obj)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise _mc_error(r.stderr, line_map, stream, text)
        r = subprocess.run([str(tc.lld), "-shared", "--no-undefined", str(obj), "-o", str(co)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise AssemblerError(f"ld.lld failed: {r.stderr.strip().splitlines()[0] if r.stderr.strip() else r.returncode}",
                                 find_loc=False)
        data = co.read_bytes()
    atomic_write(cached, data)
    return data


def _mc_error(stderr: str, line_map, stream, text: str) -> AssemblerError:
    m = _MC_ERR.search(stderr)
    if not m:
        return AssemblerError(f"llvm-mc failed: {stderr.strip()[:300]}", find_loc=False)
    line, msg = int(m.group("line")), m.group("msg")
    src_line = text.splitlines()[line - 1].strip() if line - 1 < len(text.splitlines()) else ""
    if line_map and stream is not None and line in line_map:
        inst = stream[line_map[line]]
        return AssemblerError(f"llvm-mc rejects '{inst.text()}': {msg}", inst.loc, find_loc=False)
    return AssemblerError(f"llvm-mc rejects line {line} '{src_line}': {msg}", find_loc=False)


@dataclass
class BuildResult:
    name: str
    asm: str
    co: bytes
    asm_path: Path | None = None
    co_path: Path | None = None

    def __repr__(self) -> str:     # not the code object's bytes
        where = f", co_path='{self.co_path}'" if self.co_path else ""
        return f"BuildResult(name='{self.name}', asm={len(self.asm.splitlines())} lines, co={len(self.co)} bytes{where})"


def build_kernel(k, out_dir=None, *, check: bool = True) -> BuildResult:
    from .writer import render
    text, line_map = render(k)
    if check:
        from ..check import check_kernel_stream
        check_kernel_stream(k)   # raises CheckError (a FlyasmError) listing the findings
    co = assemble(text, k.code_object, line_map, k.stream, name=f"{k.name}.s")
    res = BuildResult(k.name, text, co)
    if out_dir is not None:
        out = Path(out_dir)
        res.asm_path, res.co_path = out / f"{k.name}.s", out / f"{k.name}.co"
        atomic_write(res.asm_path, text)
        atomic_write(res.co_path, co)
    return res
