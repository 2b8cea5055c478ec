"""Compile one FlyDSL kernel state's gfx950 attention forward without a GPU and write its code object.
Run by benchmarks/flydsl_build.py with the python of a venv holding that state's flydsl wheel, in
FlyDSL's compile-only environment (ROCM_PATH with ld.lld, FLYDSL_GPU_ARCH=gfx950, COMPILE_ONLY=1):

    python flydsl_compile.py --root SRC --module kernels.flash_attn_gfx950 --H 64 --Hkv 64 --causal 1 --out X.co

SRC holds the commit's kernels/ package. The builder (build_flash_attn_dualwave_swp_module) is called
with the keywords its signature at that commit has: num_heads, head_dim, causal, dtype_str,
num_kv_heads, and _xcd_swizzle only when asked for (it exists from #1009 on). Its launcher compiles on
the first call (on empty tensors; COMPILE_ONLY skips the launch), and the code object of that compile
is taken out of the JIT function's last artifact by ../shared/flydsl/build/extract_co.py, in place.
A failure is one line on stderr and exit status 2.
"""
from __future__ import annotations

import argparse
import importlib
import inspect
import sys
import tempfile
from pathlib import Path

BUILDER = "build_flash_attn_dualwave_swp_module"
EXTRACT_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "flydsl" / "build"


def fail(msg: str) -> None:
    print(f"flydsl_compile: {msg}", file=sys.stderr)
    sys.exit(2)


def compiled_jit_functions(fn) -> list:
    """The @flyc.jit functions reachable through fn's closures that hold a compiled artifact."""
    found, todo, seen = [], [fn], set()
    while todo:
        f = todo.pop()
        if id(f) in seen:
            continue
        seen.add(id(f))
        for cell in getattr(f, "__closure__", None) or ():
            try:
                c = cell.cell_contents
            except ValueError:          # an empty cell
                continue
            if getattr(c, "_last_compiled", None) is not None:
                found.append(c)
            elif callable(c):
                todo.append(c)
    return found


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", required=True, help="the directory holding the commit's kernels/ package")
    ap.add_argument("--module", required=True, help="the kernel module, e.g. kernels.attention.flash_attn_gfx950")
    ap.add_argument("--H", type=int, required=True)
    ap.add_argument("--Hkv", type=int, required=True)
    ap.add_argument("--causal", type=int, default=0)
    ap.add_argument("--xcd", type=int, default=0)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    sys.path[:0] = [a.root, str(EXTRACT_DIR)]
    import torch
    from extract_co import extract
    build = getattr(importlib.import_module(a.module), BUILDER, None)
    if build is None:
        fail(f"{a.module} has no {BUILDER}")
    kw = dict(num_heads=a.H, head_dim=128, causal=bool(a.causal), dtype_str="bf16", num_kv_heads=a.Hkv)
    if a.xcd:
        if "_xcd_swizzle" not in inspect.signature(build).parameters:
            fail(f"{BUILDER} of this commit has no XCD mapping (_xcd_swizzle)")
        kw["_xcd_swizzle"] = True
    exe = build(**kw)
    B, S = 1, 256                       # the binary does not depend on batch or seqlen
    q = torch.empty(B, S, a.H, 128, dtype=torch.bfloat16)
    kv = torch.empty(B, S, a.Hkv, 128, dtype=torch.bfloat16)
    exe(q, kv, torch.empty_like(kv), torch.empty_like(q), B, S)
    jits = compiled_jit_functions(exe)
    if len(jits) != 1:
        fail(f"expected one compiled launcher in {BUILDER}'s closure, found {len(jits)}")
    with tempfile.TemporaryDirectory() as tmp:
        extract(jits[0], str(Path(tmp) / "fa"), save_host_ir=False)
        objs = {p.read_bytes() for p in Path(tmp).glob("*.co")}   # one per gpu target, the same bytes
    if len(objs) != 1:
        fail(f"the compile left {len(objs)} distinct code objects, not one")
    Path(a.out).write_bytes(objs.pop())
    return 0


if __name__ == "__main__":
    sys.exit(main())
