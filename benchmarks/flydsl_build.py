"""More of FlyDSL's gfx950 attention-forward code objects than ../shared/flydsl/gfx950 holds: other head
counts (GQA), causal or not, with or without the XCD mapping, built without a GPU by FlyDSL's own
compiler through ../shared/flydsl/build/build.sh, into a cache beside the timing model's.

    python3 benchmarks/flydsl_build.py --H 64 --Hkv 8 --causal 1       # one build
    python3 benchmarks/flydsl_build.py --table CSV [--table CSV ...]   # every build the rows need
    python3 benchmarks/flydsl_build.py --list                          # what is built / shipped

A FlyDSL binary depends on its head counts, causal and the XCD mapping only (../shared/flydsl/README.md),
so one build serves every batch and seqlen. What a build needs, none of it committed here:
  * FLYDSL_KERNELS_ROOT: a FlyDSL checkout at 11c4174d, its kernels/ package
    (git clone https://github.com/ROCm/FlyDSL && git -C FlyDSL archive 11c4174d kernels | tar -x -C DIR);
  * the flydsl==0.4.2 wheel, which build.sh installs into its own venv (PyPI);
  * for an XCD-mapping build, AMD's device-library bitcode (Debian: apt install rocm-device-libs),
    found at /usr/lib/*/amdgcn or given as AMDGCN_BITCODE.
Rebuilt this way, the shipped noncausal_h64 and noncausal_h64_xcdswz objects come out byte-identical.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import flydsl_launch as FL  # noqa: E402

BUILD_SH = FL.SHARED / "build" / "build.sh"
CACHE = Path(os.environ.get("FLYASM_CACHE", Path.home() / ".cache" / "flyasm")) / "flydsl" / "gfx950"


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


def why_not_buildable(xcd: bool) -> str | None:
    """None when a build can run here, else the one sentence saying what is missing."""
    root = os.environ.get("FLYDSL_KERNELS_ROOT")
    if not root or not (Path(root) / "kernels" / "attention" / "flash_attn_gfx950.py").is_file():
        return ("FLYDSL_KERNELS_ROOT must name a FlyDSL checkout at 11c4174d (its kernels/ package): "
                "git clone https://github.com/ROCm/FlyDSL && git -C FlyDSL archive 11c4174d kernels | tar -x -C DIR")
    if not BUILD_SH.is_file():
        return f"{BUILD_SH} is absent (../shared is not here)"
    if xcd and _bitcode() is None:
        return "an XCD-mapping build needs AMD's device-library bitcode (apt install rocm-device-libs, or set AMDGCN_BITCODE)"
    return None


def build(H: int, Hkv: int, causal: bool, xcd: bool = False) -> Path:
    """The code object of this variant, building it into CACHE when it is neither shipped nor built."""
    name = FL.co_name(H, causal, xcd, Hkv)
    hit = find(name)
    if hit:
        return hit
    why = why_not_buildable(xcd)
    if why:
        raise FL.FlydslLaunchError(f"FlyDSL build {name} is not here and cannot be built: {why}")
    env = dict(os.environ)
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


def needed(tables) -> list[tuple[int, int, bool, bool]]:
    """(H, Hkv, causal, xcd) of the build each attention row of the tables runs under FlyDSL's dispatch."""
    import measured
    out = []
    for _, kind, r in measured.read_tables(tables):
        if kind != "fmha":
            continue
        H, Hkv, S, causal = int(r["nhead_q"]), int(r["nhead_k"]), int(r["seqlen_q"]), bool(int(r["mask"]))
        v = (H, Hkv, causal, FL.build_name(H, S, causal, Hkv).endswith("_xcdswz.co"))
        if v not in out:
            out.append(v)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--H", type=int)
    ap.add_argument("--Hkv", type=int)
    ap.add_argument("--causal", type=int, default=0)
    ap.add_argument("--xcd", action="store_true", help="the XCD-mapping build")
    ap.add_argument("--table", action="append", default=[], help="build what these measured rows need")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args(argv)
    if a.list:
        for d in (FL.CO_DIR, CACHE):
            for p in sorted(d.glob("*.co")) if d.is_dir() else []:
                print(f"{p.name:<48} {d}")
        return 0
    todo = needed(a.table) if a.table else [(a.H, a.Hkv or a.H, bool(a.causal), a.xcd)] if a.H else []
    if not todo:
        ap.error("give --H (and --Hkv, --causal, --xcd) or --table")
    rc = 0
    for H, Hkv, causal, xcd in todo:
        try:
            print(f"{FL.co_name(H, causal, xcd, Hkv):<48} {build(H, Hkv, causal, xcd)}")
        except FL.FlydslLaunchError as e:
            print(f"error: {e}", file=sys.stderr)
            rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
