"""More of FlyDSL's gfx950 attention-forward code objects than ../shared/flydsl/gfx950 holds: other head
counts (GQA), causal or not, with or without the XCD mapping, built without a GPU by FlyDSL's own
compiler through ../shared/flydsl/build/build.sh, into a cache beside the timing model's.

    python3 benchmarks/flydsl_build.py --H 64 --Hkv 8 --causal 1       # one build
    python3 benchmarks/flydsl_build.py --table CSV [--table CSV ...]   # every build the rows need
    python3 benchmarks/flydsl_build.py --list                          # what is built / shipped
    python3 benchmarks/flydsl_build.py --commit 293b3b2b --H 64 --causal 1     # an older kernel state
    python3 benchmarks/flydsl_build.py --commit 293b3b2b --generic 128 --H 64 --causal 1   # its generic kernel

A FlyDSL binary depends on its head counts, causal and the XCD mapping only (../shared/flydsl/README.md),
so one build serves every batch and seqlen. What a build needs, none of it committed here:
  * FLYDSL_KERNELS_ROOT: a FlyDSL checkout at 11c4174d, its kernels/ package
    (git clone https://github.com/ROCm/FlyDSL && git -C FlyDSL archive 11c4174d kernels | tar -x -C DIR),
    or FLYDSL_REPO (below), from which that commit's kernels/ is archived into the cache;
  * the flydsl==0.4.2 wheel, which build.sh installs into its own venv (PyPI);
  * for an XCD-mapping build, AMD's device-library bitcode (Debian: apt install rocm-device-libs),
    found at /usr/lib/*/amdgcn or given as AMDGCN_BITCODE.
Rebuilt this way, the shipped noncausal_h64 and noncausal_h64_xcdswz objects come out byte-identical.

Older kernel states (--commit; a measured row names one as co_name, e.g. fa_fwd_bf16_d128_causal_h64@293b3b2b.co):
  * FLYDSL_REPO: a FlyDSL git repository (bare is fine) holding the commit; its kernels/ package is
    archived into the cache, and the kernel module is where that commit has it (kernels/ until #807,
    kernels/attention/ after);
  * the flydsl wheel released last before the commit (WHEELS; --wheel overrides), pip-installed into
    its own venv under the cache (system site packages visible, for torch);
  * our compile driver, benchmarks/flydsl_compile.py, run in that venv: it calls the commit's builder
    with the arguments its signature has (#629's has no _xcd_swizzle).
Built this way, each kernel state of LAYOUTS (causal h64), its metadata the layout LAYOUTS names:
293b3b2b #629, 90b999b2 #661 (flydsl 0.2.0), 81cfca71 #683, 523ca1c7 #704, 8057f0fc #711, b550fd70
#758, 4be56142 #845, cc141e85 #844, 4521c8cb #960 (the releases WHEELS picks), 9d7accfc #1009 (0.3.2,
WHEEL_PINS); #629's is the one run in the emulator against torch. A wheel too new or too old for a
commit fails in FlyDSL's import or compile: the error says which wheel; --wheel picks another.

--generic BLOCK_M builds the commit's generic kernel (flash_attn_generic.py, GENERIC_MODULES), which
#629's dispatch ran below seqlen 384 and at seqlens not a multiple of 256 (flydsl_launch.DISPATCH), as
fa_generic_m128_bf16_d128_causal_h64@293b3b2b.co; its exp2 is the device library's (__ocml_exp2_f32),
so it needs the bitcode as an XCD-mapping build does.
"""
from __future__ import annotations

import argparse
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import flydsl_launch as FL  # noqa: E402

BUILD_SH = FL.SHARED / "build" / "build.sh"
COMPILE_PY = Path(__file__).resolve().parent / "flydsl_compile.py"
CACHE = Path(os.environ.get("FLYASM_CACHE", Path.home() / ".cache" / "flyasm")) / "flydsl" / "gfx950"
KERNEL_MODULES = ("kernels/attention/flash_attn_gfx950.py", "kernels/flash_attn_gfx950.py")   # after / before #807
GENERIC_MODULES = ("kernels/attention/flash_attn_generic.py", "kernels/flash_attn_generic.py")
NEEDS_BITCODE = "apt install rocm-device-libs, or set AMDGCN_BITCODE"
# flydsl releases on PyPI (pypi.org/pypi/flydsl/json: first upload of each, UTC); dev builds left out
WHEELS = (("0.1.8", "2026-05-16T14:04"), ("0.2.0", "2026-06-04T02:13"), ("0.2.1", "2026-06-16T13:13"),
          ("0.2.2", "2026-06-17T10:04"), ("0.2.3", "2026-07-09T06:55"), ("0.2.4", "2026-07-12T13:40"),
          ("0.3.0", "2026-08-01T06:44"), ("0.3.1", "2026-08-09T14:26"), ("0.3.2", "2026-08-25T07:30"),
          ("0.4.0", "2026-10-14T07:46"), ("0.4.1", "2026-10-27T00:00"), ("0.4.2", "2026-11-04T04:15"),
          ("0.5.0", "2026-11-08T03:49"))
# kernel states the release-before rule picks a wheel too old for, and the one they build with
WHEEL_PINS = {"9d7accfc": "0.3.2"}    # #1009 imports flydsl.runtime.device.get_warp_size, absent in 0.3.1


def find(co_name: str) -> Path | None:
    """A FlyDSL code object by file name: shipped (../shared/flydsl/gfx950) first, then built here."""
    for d in (FL.CO_DIR, CACHE):
        if (d / co_name).is_file():
            return d / co_name
    return None


def _bitcode() -> str | None:
    if os.environ.get("AMDGCN_BITCODE"):
        return os.environ["AMDGCN_BITCODE"]
    hits = sorted(Path("/usr/lib").glob("*/amdgcn/bitcode/ockl.bc")) + sorted(Path("/opt/rocm").glob("amdgcn/bitcode/ockl.bc"))
    return str(hits[0].parent.parent) if hits else None


def kernels_root() -> str | None:
    """A directory holding FlyDSL's kernels/ package at the shipped commit: FLYDSL_KERNELS_ROOT, else
    that commit archived from FLYDSL_REPO into the cache (as an older kernel state is), else None."""
    root = os.environ.get("FLYDSL_KERNELS_ROOT")
    if root and (Path(root) / "kernels" / "attention" / "flash_attn_gfx950.py").is_file():
        return root
    if root or not os.environ.get("FLYDSL_REPO"):
        return None
    try:
        return str(_sources(kernel_state(FL.SHIPPED_COMMIT)[0]))
    except FL.FlydslLaunchError:
        return None


def why_not_buildable(xcd: bool, root: str | None = None) -> str | None:
    """None when a build can run here, else the one sentence saying what is missing (root: kernels_root()
    when the caller has it already)."""
    if (root or kernels_root()) is None:
        return ("FLYDSL_KERNELS_ROOT must name a FlyDSL checkout at 11c4174d (its kernels/ package), or "
                "FLYDSL_REPO a FlyDSL git repository holding that commit: git clone https://github.com/ROCm/FlyDSL")
    if not BUILD_SH.is_file():
        return f"{BUILD_SH} is absent (../shared is not here)"
    if xcd and _bitcode() is None:
        return f"an XCD-mapping build needs AMD's device-library bitcode ({NEEDS_BITCODE})"
    return None


def build(H: int, Hkv: int, causal: bool, xcd: bool = False, commit: str | None = None,
          wheel: str | None = None) -> Path:
    """The code object of this variant (of FlyDSL at `commit`, default the shipped 11c4174d), building it
    into CACHE when it is neither shipped nor built."""
    name = FL.co_name(H, causal, xcd, Hkv, commit=commit)
    hit = find(name)
    if hit:
        return hit
    if "@" in name:
        return _build_at(name, commit, H, Hkv, causal, xcd, wheel)
    root = kernels_root()                  # from FLYDSL_REPO: git runs, so once
    why = why_not_buildable(xcd, root)
    if why:
        raise FL.FlydslLaunchError(f"FlyDSL build {name} is not here and cannot be built: {why}")
    env = dict(os.environ, FLYDSL_KERNELS_ROOT=root)
    if xcd:
        env["AMDGCN_BITCODE"] = _bitcode()
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:    # build.sh writes its .co and host IR here, then we keep the .co
        r = subprocess.run(["bash", str(BUILD_SH), tmp, "--causal", str(int(causal)), "--H", str(H), "--Hkv", str(Hkv),
                            "--xcd_swizzle", str(int(xcd))], env=env, capture_output=True, text=True)
        out = Path(tmp) / name
        if r.returncode or not out.is_file():
            tail = (r.stderr or r.stdout).strip().splitlines()[-3:]
            raise FL.FlydslLaunchError(f"FlyDSL build {name} failed (build.sh exit {r.returncode}): " + " | ".join(tail))
        os.replace(out, CACHE / name)
    return CACHE / name


# ---- older kernel states: FlyDSL at a commit, its wheel, our compile driver ------------------------
def _git(repo: str, *args, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", repo, *args], capture_output=True, **kw)


def wheel_for(when: datetime) -> str:
    """The flydsl release published last before `when` (a commit's date)."""
    before = [v for v, t in WHEELS if datetime.fromisoformat(t + "+00:00") < when]
    if not before:
        raise FL.FlydslLaunchError(f"no flydsl release in WHEELS predates {when:%Y-%m-%d}; give --wheel")
    return before[-1]


def kernel_state(commit: str, modules: tuple = KERNEL_MODULES) -> tuple[str, str, datetime]:
    """(full hash, kernel module path, commit date) of `commit` in FLYDSL_REPO; the module is the first
    of `modules` the commit has."""
    repo = os.environ.get("FLYDSL_REPO")
    if shutil.which("git") is None:
        raise FL.FlydslLaunchError("building a FlyDSL commit needs git (apt install git)")
    if not repo or _git(repo, "rev-parse", "--git-dir").returncode:
        raise FL.FlydslLaunchError("FLYDSL_REPO must name a FlyDSL git repository "
                                   "(git clone https://github.com/ROCm/FlyDSL)")
    r = _git(repo, "show", "-s", "--format=%H %cI", f"{commit}^{{commit}}", text=True)
    if r.returncode:
        raise FL.FlydslLaunchError(f"FLYDSL_REPO ({repo}) has no commit {commit} (git -C {repo} fetch)")
    full, date = r.stdout.split()
    module = next((m for m in modules if not _git(repo, "cat-file", "-e", f"{full}:{m}").returncode), None)
    if module is None:
        raise FL.FlydslLaunchError(f"FlyDSL at {commit} has no gfx950 attention forward ({' or '.join(modules)})")
    return full, module, datetime.fromisoformat(date)


def _sources(full: str) -> Path:
    """The commit's kernels/ package, archived into the cache once."""
    src = CACHE.parent / "src" / full
    if not (src / "kernels").is_dir():
        r = _git(os.environ["FLYDSL_REPO"], "archive", full, "kernels")
        if r.returncode:
            raise FL.FlydslLaunchError(f"git archive {full[:8]} kernels failed: {r.stderr.decode().strip()}")
        src.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=src.parent))       # whole or not at all: renamed into place
        tarfile.open(fileobj=io.BytesIO(r.stdout)).extractall(tmp, filter="data")
        os.replace(tmp, src)
    return src


def _venv(wheel: str) -> Path:
    """The python of a venv holding flydsl==wheel (system site packages visible: torch, numpy)."""
    venv = CACHE.parent / f"venv-{wheel}"
    py = venv / "bin" / "python"
    if not (venv / ".flydsl-ok").is_file():
        for cmd in ([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                    [str(py), "-m", "pip", "install", "-q", f"flydsl=={wheel}"]):
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode:
                shutil.rmtree(venv, ignore_errors=True)       # no half-made venv left to be taken for one
                tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["?"]
                raise FL.FlydslLaunchError(f"cannot install the flydsl=={wheel} wheel into {venv} "
                                           f"({' '.join(cmd[2:4])}): {tail[0]}")
        (venv / ".flydsl-ok").touch()
    return py


def _compile_env(tmp: Path, bitcode: bool) -> dict:
    """FlyDSL's compile-only environment: ROCM_PATH a directory with llvm/bin/ld.lld (the toolchain
    flyasm itself found: ROCm's or Debian's LLVM) and, for the XCD mapping and the generic kernel,
    amdgcn/ (the device-library bitcode)."""
    from flyasm.asm.toolchain import find_toolchain
    from flyasm.errors import ToolchainError
    try:
        lld = find_toolchain().lld
    except ToolchainError as e:
        raise FL.FlydslLaunchError(str(e)) from None
    (tmp / "llvm" / "bin").mkdir(parents=True)
    (tmp / "llvm" / "bin" / "ld.lld").symlink_to(lld)
    if bitcode:
        (tmp / "amdgcn").symlink_to(_bitcode())
    return dict(os.environ, ROCM_PATH=str(tmp), FLYDSL_GPU_ARCH="gfx950", ARCH="gfx950", COMPILE_ONLY="1",
                FLYDSL_RUNTIME_ENABLE_CACHE="0")


def build_generic(H: int, Hkv: int, causal: bool, block_m: int, commit: str, wheel: str | None = None) -> Path:
    """The code object of FlyDSL's generic kernel at `commit` with this BLOCK_M (128 or 256), building it
    into CACHE when it is not built."""
    name = FL.generic_co_name(H, causal, block_m, commit, Hkv)
    return find(name) or _build_at(name, commit, H, Hkv, causal, False, wheel, block_m)


def _build_at(name: str, commit: str, H: int, Hkv: int, causal: bool, xcd: bool, wheel: str | None,
              block_m: int = 0) -> Path:
    if (xcd or block_m) and _bitcode() is None:
        what = "the generic kernel" if block_m else "an XCD-mapping build"
        raise FL.FlydslLaunchError(f"FlyDSL build {name}: {what} needs AMD's device-library bitcode ({NEEDS_BITCODE})")
    try:
        full, module, when = kernel_state(commit, GENERIC_MODULES if block_m else KERNEL_MODULES)
        wheel = wheel or WHEEL_PINS.get(full[:8]) or wheel_for(when)
        src, py = _sources(full), _venv(wheel)
    except FL.FlydslLaunchError as e:
        raise FL.FlydslLaunchError(f"FlyDSL build {name} is not here and cannot be built: {e}") from None
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / name
        r = subprocess.run([str(py), str(COMPILE_PY), "--root", str(src), "--module",
                            module.removesuffix(".py").replace("/", "."), "--H", str(H), "--Hkv", str(Hkv),
                            "--causal", str(int(causal)), "--xcd", str(int(xcd)), "--block-m", str(block_m),
                            "--out", str(out)],
                           env=_compile_env(Path(tmp) / "rocm", xcd or bool(block_m)), capture_output=True, text=True)
        if r.returncode or not out.is_file():
            tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["no output"]
            raise FL.FlydslLaunchError(f"FlyDSL build {name} with flydsl {wheel} failed ({tail[0]}); --wheel picks another")
        os.replace(out, CACHE / name)
    return CACHE / name


def needed(tables, error=None) -> list[tuple[int, int, bool, bool, str | None, int]]:
    """(H, Hkv, causal, xcd, commit, generic BLOCK_M or 0) of the build each attention row of the tables
    runs: a row of a kernel state with a dispatch (flydsl_launch.DISPATCH) the kernel that dispatch picks
    when it is the generic one; else the build FlyDSL's dispatch picks, of the kernel state a FlyDSL
    row's co_name names (none: the shipped one). error: as measured.read_tables."""
    import measured
    out = []
    for _, kind, r in measured.read_tables(tables, error):
        if kind != "fmha":
            continue
        H, Hkv, S, causal = int(r["nhead_q"]), int(r["nhead_k"]), int(r["seqlen_q"]), bool(int(r["mask"]))
        fly = measured.author(r) == "flydsl"
        generic = FL.generic_of(r) if fly else None
        if generic:
            v = (H, Hkv, causal, False, *generic)
        else:
            v = (H, Hkv, causal, FL.build_name(H, S, causal, Hkv).endswith("_xcdswz.co"),
                 FL.commit_of(r.get("co_name") or "") if fly else None, 0)
        if v not in out:
            out.append(v)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--H", type=int)
    ap.add_argument("--Hkv", type=int)
    ap.add_argument("--causal", type=int, default=0)
    ap.add_argument("--xcd", action="store_true", help="the XCD-mapping build")
    ap.add_argument("--commit", help="FlyDSL's kernel state at this commit (needs FLYDSL_REPO)")
    ap.add_argument("--generic", type=int, default=0, metavar="BLOCK_M",
                    help="the commit's generic kernel with this BLOCK_M (128 or 256), not the dual-wave one")
    ap.add_argument("--wheel", help="the flydsl version to build --commit with (default: WHEELS' pick)")
    ap.add_argument("--table", action="append", default=[], help="build what these measured rows need")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args(argv)
    if a.list:
        for d in (FL.CO_DIR, CACHE):
            for p in sorted(d.glob("*.co")) if d.is_dir() else []:
                print(f"{p.name:<56} {d}")
        return 0
    if a.generic and (not a.commit or a.xcd or a.generic not in (128, 256)):
        ap.error("--generic takes 128 or 256, with --commit and without --xcd")
    todo = needed(a.table, ap.error) if a.table else \
        [(a.H, a.Hkv or a.H, bool(a.causal), a.xcd, a.commit, a.generic)] if a.H else []
    if not todo:
        ap.error("give --H (and --Hkv, --causal, --xcd, --commit, --generic) or --table")
    rc = 0
    for H, Hkv, causal, xcd, commit, block_m in todo:
        try:
            if block_m:
                name, path = FL.generic_co_name(H, causal, block_m, commit, Hkv), build_generic(H, Hkv, causal, block_m, commit, a.wheel)
            else:
                name, path = FL.co_name(H, causal, xcd, Hkv, commit=commit), build(H, Hkv, causal, xcd, commit, a.wheel)
            print(f"{name:<56} {path}")
        except FL.FlydslLaunchError as e:
            print(f"error: {e}", file=sys.stderr)
            rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
