"""Build the test corpus: small C kernels compiled by clang for gfx950 into HSA code objects.

The corpus is "code nobody here wrote": LLVM chose the registers, the waits and the NOPs. The
assembler round-trip, the static checker and the emulator test themselves against it. Nothing
built here is committed; every test session compiles (or reuses its cache) at test time.

Each `kernels/*.c` file describes itself in `// @key: value` header lines:

    @kernel        symbol of a kernel in the file (repeat for several)
    @description   one line saying what the kernel exists for
    @launch        expected launch geometry, e.g. `block=64 grid=64*G`
    @expect        regex that must match an instruction of the kernel (repeatable);
                   matched against the instruction text as llvm-objdump prints it, without
                   the trailing `// address: encoding` comment
    @expect-backward-branch
                   regex for a branch mnemonic that must occur with a backward target

Exact compile command (one per file, clang links with lld into a loadable ET_DYN object):

    <llvm-22>/bin/clang -x c -std=c17 --target=amdgcn-amd-amdhsa -mcpu=gfx950
        -mcode-object-version=5 -nogpulib -O2 -ffp-contract=off -Wall -Wextra -Werror
        kernels/NAME.c -o NAME.co

Usage: python tests/corpus/build.py OUTDIR   (builds and prints a table of what each contains)
"""
from __future__ import annotations

import functools
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

KERNELS_DIR = Path(__file__).resolve().parent / "kernels"

CLANG_FLAGS: tuple[str, ...] = (
    "-x", "c", "-std=c17",
    "--target=amdgcn-amd-amdhsa", "-mcpu=gfx950", "-mcode-object-version=5",
    "-nogpulib", "-O2", "-ffp-contract=off",
    "-Wall", "-Wextra", "-Werror",
)
MIN_CLANG_MAJOR = 20  # first LLVM release with gfx950
COMPILE_TIMEOUT_S = 120
DEFAULT_JOBS = 2
# Bumped when the way a .co is produced changes in a way the hash inputs do not show.
_CACHE_SCHEMA = "1"


class CorpusBuildError(RuntimeError):
    """The corpus cannot be built: no usable clang, a bad kernel header, or a failed compile."""


# ------------------------------------------------------------------------------------------------
# Toolchain
# ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ClangTools:
    clang: Path
    version: str            # first line of `clang --version`
    objdump: Path
    readelf: Path


def _clang_version(clang: Path) -> tuple[int, str] | None:
    try:
        out = subprocess.run([str(clang), "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    first = out.stdout.splitlines()[0] if out.stdout else ""
    m = re.search(r"clang version (\d+)", first)
    return (int(m.group(1)), first.strip()) if m else None


def _sibling_tool(clang: Path, name: str) -> Path | None:
    """An LLVM tool from clang's own directory (never PATH: /usr/bin/llvm-objdump may be old)."""
    for d in (clang.parent, clang.resolve().parent):
        p = d / name
        if p.exists():
            return p
    return None


def _clang_candidates() -> list[Path]:
    out: list[Path] = []
    if os.environ.get("FLYASM_CLANG"):
        out.append(Path(os.environ["FLYASM_CLANG"]))
    if os.environ.get("FLYASM_LLVM_BIN"):
        out.append(Path(os.environ["FLYASM_LLVM_BIN"]) / "clang")
    out.append(Path("/opt/rocm/llvm/bin/clang"))

    def major(p: str) -> int:
        m = re.search(r"llvm-(\d+)", p)
        return int(m.group(1)) if m else 0

    for d in sorted(glob.glob("/usr/lib/llvm-*"), key=major, reverse=True):
        out.append(Path(d) / "bin" / "clang")
    for name in ("clang-22", "clang-21", "clang-20", "clang"):
        w = shutil.which(name)
        if w:
            out.append(Path(w))
    return out


def find_clang_tools(clang: Path | str | None = None) -> ClangTools:
    """clang (given, or the newest found) plus llvm-objdump and llvm-readelf from the same LLVM."""
    hint = ("install clang, lld and llvm 20 or newer with the AMDGPU target "
            "(Debian: `apt-get install clang-22 lld-22 llvm-22`), or pass clang=..., "
            "or set $FLYASM_CLANG")
    if clang is not None:
        candidates = [Path(clang)]
    else:
        candidates = _clang_candidates()
    tried: list[str] = []
    for c in candidates:
        if str(c) in tried:
            continue
        tried.append(str(c))
        if not c.exists():
            continue
        v = _clang_version(c)
        if v is None or v[0] < MIN_CLANG_MAJOR:
            continue
        objdump, readelf = _sibling_tool(c, "llvm-objdump"), _sibling_tool(c, "llvm-readelf")
        if objdump is None or readelf is None:
            continue
        return ClangTools(c, v[1], objdump, readelf)
    what = f"the given clang {clang}" if clang is not None else "clang"
    raise CorpusBuildError(
        f"no usable clang for the gfx950 corpus: {what} is missing, older than "
        f"{MIN_CLANG_MAJOR}, or has no llvm-objdump/llvm-readelf beside it "
        f"(tried: {', '.join(tried) or 'nothing'}); {hint}")


# ------------------------------------------------------------------------------------------------
# Kernel headers
# ------------------------------------------------------------------------------------------------

_HEADER_RE = re.compile(r"^//\s*@([a-z-]+):\s*(.*?)\s*$")
_SINGLE_KEYS = {"description", "launch"}
_MULTI_KEYS = {"kernel", "expect", "expect-backward-branch"}


@dataclass(frozen=True)
class KernelHeader:
    symbols: tuple[str, ...]
    description: str
    launch: str
    expect: tuple[str, ...]
    expect_backward_branch: tuple[str, ...]


def parse_header(src: Path) -> KernelHeader:
    """Read the `// @key: value` lines at the top of a kernel file and check them."""
    vals: dict[str, list[str]] = {k: [] for k in _SINGLE_KEYS | _MULTI_KEYS}
    for lineno, line in enumerate(src.read_text().splitlines(), 1):
        if not line.startswith("//"):
            break
        m = _HEADER_RE.match(line)
        if not m:
            continue
        key, value = m.group(1), m.group(2)
        if key not in vals:
            raise CorpusBuildError(f"{src}:{lineno}: unknown header key @{key}")
        if key in _SINGLE_KEYS and vals[key]:
            raise CorpusBuildError(f"{src}:{lineno}: @{key} given twice")
        if key.startswith("expect"):
            try:
                re.compile(value)
            except re.error as e:
                raise CorpusBuildError(f"{src}:{lineno}: bad regex in @{key}: {e}") from None
        vals[key].append(value)
    for key in ("kernel", "description", "launch"):
        if not vals[key]:
            raise CorpusBuildError(f"{src}: header has no @{key} line")
    if not vals["expect"] and not vals["expect-backward-branch"]:
        raise CorpusBuildError(f"{src}: header has no @expect line (what is the kernel for?)")
    return KernelHeader(tuple(vals["kernel"]), vals["description"][0], vals["launch"][0],
                        tuple(vals["expect"]), tuple(vals["expect-backward-branch"]))


# ------------------------------------------------------------------------------------------------
# Disassembly
# ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class DisasmLine:
    address: int
    text: str           # e.g. "v_mfma_f32_32x32x16_bf16 v[2:17], v[18:21], v[22:25], 0"
    words: tuple[int, ...]
    target: str | None = None   # branch target as objdump names it, e.g. "atomic_fadd+0x38"

    @property
    def mnemonic(self) -> str:
        return self.text.split(None, 1)[0]


_SYM_RE = re.compile(r"^([0-9a-fA-F]+) <(.+)>:$")
_INSN_RE = re.compile(r"^\s+(.*?)\s*//\s*([0-9a-fA-F]+):((?:\s+[0-9a-fA-F]{8})+)(?:\s+<([^>]*)>)?\s*$")


def parse_objdump(text: str) -> dict[str, list[DisasmLine]]:
    """llvm-objdump -d output → instructions per symbol (everything objdump shows under it)."""
    out: dict[str, list[DisasmLine]] = {}
    cur: list[DisasmLine] | None = None
    for line in text.splitlines():
        m = _SYM_RE.match(line)
        if m:
            cur = out.setdefault(m.group(2), [])
            continue
        m = _INSN_RE.match(line)
        if m and cur is not None:
            cur.append(DisasmLine(int(m.group(2), 16), m.group(1),
                                  tuple(int(w, 16) for w in m.group(3).split()), m.group(4)))
    return out


def _symbol_ranges(readelf: Path, co: Path) -> dict[str, tuple[int, int]]:
    """FUNC symbols of a code object → (address, size) from its symbol table."""
    r = subprocess.run([str(readelf), "--syms", "--wide", str(co)], capture_output=True,
                       text=True, timeout=60)
    if r.returncode != 0:
        raise CorpusBuildError(f"llvm-readelf failed on {co}: {r.stderr.strip()}")
    out: dict[str, tuple[int, int]] = {}
    for line in r.stdout.splitlines():
        f = line.split()
        if len(f) >= 8 and f[0].endswith(":") and f[3] == "FUNC":
            out[f[7]] = (int(f[1], 16), int(f[2], 0))
    return out


# ------------------------------------------------------------------------------------------------
# Corpus kernels
# ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CorpusKernel:
    name: str                      # file stem, e.g. "mfma_32x32x16_bf16"
    path: Path                     # the built .co (ET_DYN, gfx950, code object v5)
    symbols: tuple[str, ...]       # kernel symbols in it (their descriptors are `<sym>.kd`)
    source: Path                   # the .c file
    description: str
    launch: str                    # e.g. "block=64 grid=64*G"; details in REFERENCE.md
    expect: tuple[str, ...] = ()
    expect_backward_branch: tuple[str, ...] = ()
    tools: ClangTools | None = field(default=None, repr=False, compare=False)

    @property
    def symbol(self) -> str:
        """The kernel symbol, for files that hold exactly one kernel."""
        if len(self.symbols) != 1:
            raise ValueError(f"{self.name} has {len(self.symbols)} kernels: {self.symbols}")
        return self.symbols[0]

    def _tools(self) -> ClangTools:
        return self.tools if self.tools is not None else find_clang_tools()

    @functools.cached_property
    def disassembly(self) -> str:
        """Full `llvm-objdump -d --mcpu=gfx950` text of the code object."""
        t = self._tools()
        r = subprocess.run([str(t.objdump), "-d", "--mcpu=gfx950", str(self.path)],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise CorpusBuildError(f"llvm-objdump failed on {self.path}: {r.stderr.strip()}")
        return r.stdout

    @functools.cached_property
    def symbol_ranges(self) -> dict[str, tuple[int, int]]:
        return _symbol_ranges(self._tools().readelf, self.path)

    @functools.cached_property
    def _parsed(self) -> dict[str, list[DisasmLine]]:
        return parse_objdump(self.disassembly)

    def instructions(self, symbol: str | None = None) -> list[DisasmLine]:
        """Decoded instructions of one kernel, cut at the symbol's size (no s_nop padding)."""
        sym = symbol or self.symbol
        lines = self._parsed.get(sym)
        if lines is None:
            raise KeyError(f"{sym} is not in the disassembly of {self.path}")
        start, size = self.symbol_ranges[sym]
        return [ln for ln in lines if start <= ln.address < start + size]

    def metadata(self) -> dict:
        """The decoded NT_AMDGPU_METADATA note (msgpack) of the code object."""
        import msgpack
        from elftools.elf.elffile import ELFFile

        with open(self.path, "rb") as fh:
            elf = ELFFile(fh)
            for sec in elf.iter_sections():
                if sec.header.sh_type != "SHT_NOTE":
                    continue
                for note in sec.iter_notes():
                    if note.n_name == "AMDGPU" and note.n_type in (32, "NT_AMDGPU_METADATA"):
                        desc = note.n_desc
                        if isinstance(desc, str):
                            desc = desc.encode("latin-1")
                        return msgpack.unpackb(desc, raw=False)
        raise CorpusBuildError(f"{self.path} has no NT_AMDGPU_METADATA note")

    def kernel_metadata(self, symbol: str | None = None) -> dict:
        sym = symbol or self.symbol
        for k in self.metadata()["amdhsa.kernels"]:
            if k[".name"] == sym:
                return k
        raise KeyError(f"{sym} is not in the metadata of {self.path}")


# ------------------------------------------------------------------------------------------------
# Build
# ------------------------------------------------------------------------------------------------

def compile_command(tools: ClangTools, src: Path, out: Path) -> list[str]:
    return [str(tools.clang), *CLANG_FLAGS, str(src), "-o", str(out)]


def _cache_key(tools: ClangTools, src: Path, headers: list[Path]) -> str:
    h = hashlib.sha256()
    for part in (_CACHE_SCHEMA, tools.version, " ".join(CLANG_FLAGS)):
        h.update(part.encode() + b"\0")
    for p in [src, *headers]:
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def _check_elf(co: Path) -> None:
    head = co.read_bytes()[:20]
    if head[:4] != b"\x7fELF":
        raise CorpusBuildError(f"{co} is not an ELF file")
    e_type = int.from_bytes(head[16:18], "little")
    e_machine = int.from_bytes(head[18:20], "little")
    if e_type != 3 or e_machine != 224:
        raise CorpusBuildError(f"{co} is not a linked AMDGPU shared object "
                               f"(e_type {e_type}, e_machine {e_machine}; want ET_DYN=3, EM_AMDGPU=224)")


def _build_one(tools: ClangTools, src: Path, headers: list[Path], out_dir: Path) -> CorpusKernel:
    hdr = parse_header(src)
    key = _cache_key(tools, src, headers)
    co = out_dir / f"{src.stem}-{key[:16]}.co"
    if not (co.exists() and co.stat().st_size > 0):
        fd, tmp_name = tempfile.mkstemp(prefix=f".{src.stem}-", suffix=".co.tmp", dir=out_dir)
        os.close(fd)
        tmp = Path(tmp_name)
        try:
            cmd = compile_command(tools, src, tmp)
            try:
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                raise CorpusBuildError(f"clang timed out after {COMPILE_TIMEOUT_S} s on {src}") from None
            if r.returncode != 0:
                raise CorpusBuildError(f"clang failed on {src} (exit {r.returncode}):\n"
                                       f"$ {' '.join(cmd)}\n{r.stderr.strip()}")
            _check_elf(tmp)
            funcs = _symbol_ranges(tools.readelf, tmp)
            missing = [s for s in hdr.symbols if s not in funcs]
            if missing:
                raise CorpusBuildError(f"{src}: @kernel {', '.join(missing)} not found in the built "
                                       f"code object (it has {', '.join(sorted(funcs)) or 'no functions'})")
            os.replace(tmp, co)
        finally:
            tmp.unlink(missing_ok=True)
    return CorpusKernel(name=src.stem, path=co, symbols=hdr.symbols, source=src,
                        description=hdr.description, launch=hdr.launch, expect=hdr.expect,
                        expect_backward_branch=hdr.expect_backward_branch, tools=tools)


def build_corpus(out_dir: Path, clang: Path | None = None, *, kernels_dir: Path | None = None,
                 jobs: int = DEFAULT_JOBS) -> list[CorpusKernel]:
    """Compile every kernels/*.c into out_dir/<name>-<hash>.co (reused when the hash matches).

    The hash covers the source, the shared headers, the flags and the clang version line, so a
    stale object is never reused. Compiles run `jobs` at a time. Returns kernels sorted by name.
    Raises CorpusBuildError when clang is missing or too old, or a kernel does not compile.
    """
    kdir = Path(kernels_dir) if kernels_dir is not None else KERNELS_DIR
    sources = sorted(kdir.glob("*.c"))
    if not sources:
        raise CorpusBuildError(f"no kernel sources (*.c) in {kdir}")
    headers = sorted(kdir.glob("*.h"))
    tools = find_clang_tools(clang)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [pool.submit(_build_one, tools, s, headers, out_dir) for s in sources]
        kernels = [f.result() for f in futures]
    return sorted(kernels, key=lambda k: k.name)


# ------------------------------------------------------------------------------------------------
# Report
# ------------------------------------------------------------------------------------------------

# (column, regex on instruction text)
FEATURES: tuple[tuple[str, str], ...] = (
    ("mfma", r"^v_mfma_"),
    ("tr_b16", r"^ds_read_b64_tr_b16\b"),
    ("permlane", r"^v_permlane"),
    ("lds_dma", r"^(buffer|global)_load_(lds_)?dword\S*\b.*\blds$|^global_load_lds_"),
    ("ds", r"^ds_"),
    ("dpp", r"_dpp\b|\brow_|\bquad_perm:"),
    ("s_nop", r"^s_nop\b"),
    ("s_waitcnt", r"^s_waitcnt\b"),
    ("barrier", r"^s_barrier\b"),
)


def branch_target(line: DisasmLine) -> int | None:
    """Address an s_branch / s_cbranch_* jumps to (simm16 counts dwords after the branch)."""
    if not re.match(r"s_c?branch", line.text):
        return None
    imm = int(line.text.split()[-1], 0) & 0xFFFF
    return line.address + 4 + 4 * (imm - 0x10000 if imm & 0x8000 else imm)


def feature_counts(lines: list[DisasmLine]) -> dict[str, int]:
    out = {name: sum(1 for ln in lines if re.search(rx, ln.text)) for name, rx in FEATURES}
    out["back_br"] = sum(1 for ln in lines
                         if (t := branch_target(ln)) is not None and t <= ln.address)
    return out


def format_table(kernels: list[CorpusKernel]) -> str:
    names = [n for n, _ in FEATURES] + ["back_br"]
    cols = ["kernel", "insts"] + names + ["mfma / special mnemonics"]
    rows = []
    for k in kernels:
        for sym in k.symbols:
            lines = k.instructions(sym)
            fc = feature_counts(lines)
            special = sorted({ln.mnemonic for ln in lines
                              if re.match(r"v_mfma_|ds_read_b64_tr|v_permlane|global_load_lds|"
                                          r"global_atomic|ds_bpermute|v_readfirstlane|"
                                          r"v_cvt_pk_bf16|v_pk_|v_exp_|v_rcp_|v_sqrt_|"
                                          r"v_readlane|\S+_dpp\b", ln.text)
                              or ln.text.endswith(" lds")})
            rows.append([sym, str(len(lines))] + [str(fc[n] or "") for n in names]
                        + [" ".join(special)])
    widths = [max(len(r[i]) for r in [cols] + rows) for i in range(len(cols))]
    fmt = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    return "\n".join([fmt(cols), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows])


def main(argv: list[str] | None = None) -> int:
    import argparse
    import time

    ap = argparse.ArgumentParser(description="Build the clang-compiled gfx950 test corpus.")
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--clang", type=Path, default=None)
    ap.add_argument("-j", "--jobs", type=int, default=DEFAULT_JOBS)
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    try:
        kernels = build_corpus(a.out_dir, a.clang, jobs=a.jobs)
    except CorpusBuildError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    dt = time.perf_counter() - t0
    tools = kernels[0].tools
    print(f"{len(kernels)} kernels in {a.out_dir} ({dt:.1f} s) with {tools.version if tools else '?'}")
    print("$ " + " ".join(compile_command(tools, Path("kernels/NAME.c"), Path("NAME.co"))))
    print()
    print(format_table(kernels))
    return 0


if __name__ == "__main__":
    sys.exit(main())
