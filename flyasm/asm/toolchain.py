"""Find an LLVM toolchain that can assemble, link and disassemble for gfx950.

Search order: $FLYASM_LLVM_BIN, /opt/rocm/llvm/bin, /usr/lib/llvm-N/bin (highest N first), PATH.
A directory qualifies when its llvm-mc assembles a gfx950-only instruction.
"""
from __future__ import annotations

import functools
import glob
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..errors import ToolchainError

# v_permlane32_swap_b32 exists only on gfx950: a tool that assembles it knows gfx950.
_PROBE = "v_permlane32_swap_b32 v1, v2\n"
_FIX = ("install LLVM 20 or newer with AMDGPU support (Debian: `apt-get install llvm-22 lld-22 clang-22`), "
        "or ROCm, or point $FLYASM_LLVM_BIN at a directory holding llvm-mc, ld.lld and llvm-objdump")


@dataclass(frozen=True)
class Toolchain:
    bin: Path
    version: str

    def tool(self, name: str) -> Path:
        p = self.bin / name
        if not p.exists():
            raise ToolchainError(f"{name} is missing from {self.bin}; {_FIX}", find_loc=False)
        return p

    @property
    def mc(self) -> Path:
        return self.tool("llvm-mc")

    @property
    def lld(self) -> Path:
        return self.tool("ld.lld")

    @property
    def objdump(self) -> Path:
        return self.tool("llvm-objdump")

    @property
    def clang(self) -> Path:
        return self.tool("clang")

    @property
    def llc(self) -> Path:
        return self.tool("llc")

    def has(self, name: str) -> bool:
        return (self.bin / name).exists()


def _candidates() -> list[Path]:
    out: list[Path] = []
    env = os.environ.get("FLYASM_LLVM_BIN")
    if env:
        out.append(Path(env))
    out.append(Path("/opt/rocm/llvm/bin"))

    def ver(p: str) -> int:
        m = re.search(r"llvm-(\d+)", p)
        return int(m.group(1)) if m else 0

    out += [Path(p) / "bin" for p in sorted(glob.glob("/usr/lib/llvm-*"), key=ver, reverse=True)]
    mc = shutil.which("llvm-mc")
    if mc:
        out.append(Path(mc).resolve().parent)
    return out


def _probe(bindir: Path) -> str | None:
    mc = bindir / "llvm-mc"
    if not mc.exists():
        return None
    try:
        r = subprocess.run([str(mc), "-triple=amdgcn-amd-amdhsa", "-mcpu=gfx950", "-show-encoding"],
                           input=_PROBE, capture_output=True, text=True, timeout=30)
        if r.returncode != 0 or "encoding" not in r.stdout:
            return None
        v = subprocess.run([str(mc), "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"LLVM version (\S+)", v)
    return m.group(1) if m else "unknown"


@functools.lru_cache(maxsize=None)
def find_toolchain() -> Toolchain:
    """The first candidate directory whose llvm-mc knows gfx950 and that has ld.lld."""
    tried = []
    for d in _candidates():
        if d in tried:
            continue
        tried.append(d)
        v = _probe(d)
        if v and (d / "ld.lld").exists() and (d / "llvm-objdump").exists():
            return Toolchain(d, v)
    raise ToolchainError(f"no gfx950-capable LLVM found (looked in {', '.join(map(str, tried)) or 'nothing'}); "
                         f"{_FIX}", find_loc=False)


def describe() -> dict:
    """Versions and paths for `flyasm doctor`."""
    tc = find_toolchain()
    info = {"bin": str(tc.bin), "llvm": tc.version}
    for t in ("llvm-mc", "ld.lld", "llvm-objdump", "llvm-readelf", "llvm-dwarfdump", "clang", "llc"):
        info[t] = str(tc.bin / t) if tc.has(t) else None
    return info
