"""Compile one FlyDSL kernel state's gfx950 attention forward without a GPU and write its code object.
Run by benchmarks/flydsl_build.py with the python of a venv holding that state's flydsl wheel, in
FlyDSL's compile-only environment (ROCM_PATH with ld.lld, FLYDSL_GPU_ARCH=gfx950, COMPILE_ONLY=1):

    python flydsl_compile.py --root SRC --module kernels.flash_attn_gfx950 --H 64 --Hkv 64 --causal 1 --out X.co
    python flydsl_compile.py --root SRC --module kernels.flash_attn_generic --block-m 128 ... --out X.co

SRC holds the commit's kernels/ package. The dual-wave builder (build_flash_attn_dualwave_swp_module)
is called with the keywords its signature at that commit has: num_heads, head_dim, causal, dtype_str,
num_kv_heads, and _xcd_swizzle only when asked for (it exists from #1009 on). With --block-m the
generic kernel of flash_attn_generic.py is built instead (build_flash_attn_func_module_primary with
block_m and flat_work_group_size = 2 x block_m, as its _auto_launch builds its M=128 and M=256
launchers at 293b3b2b), called on flattened 1-D tensors as #629's benchmark
(tests/kernels/test_flash_attn_fwd.py) calls it. The launcher compiles on the first call (on empty
tensors; COMPILE_ONLY skips the launch), and the code object of that compile is taken out of the JIT
function's last artifact by ../shared/flydsl/build/extract_co.py, in place. When the compile leaves one
object per gpu target and they differ (the generic kernel: a plain gfx950 target and one with the
fast/unsafe-math flags its compile hints add), the first is kept: the one MLIR's default offloading
handler (#gpu.select_object: "selects the first object from the array") embeds for the launch.
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
GENERIC_BUILDER = "build_flash_attn_func_module_primary"
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
    ap.add_argument("--block-m", type=int, default=0, help="build the generic kernel with this BLOCK_M (0: dual-wave)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    sys.path[:0] = [a.root, str(EXTRACT_DIR)]
    import torch
    from extract_co import extract
    name = GENERIC_BUILDER if a.block_m else BUILDER
    build = getattr(importlib.import_module(a.module), name, None)
    if build is None:
        fail(f"{a.module} has no {name}")
    kw = dict(num_heads=a.H, head_dim=128, causal=bool(a.causal), dtype_str="bf16", num_kv_heads=a.Hkv)
    if a.xcd:
        if a.block_m or "_xcd_swizzle" not in inspect.signature(build).parameters:
            fail(f"{name} of this commit has no XCD mapping (_xcd_swizzle)")
        kw["_xcd_swizzle"] = True
    if a.block_m:
        kw.update(block_m=a.block_m, flat_work_group_size=2 * a.block_m)
    exe = build(**kw)
    B, S = 1, 256                       # the binary does not depend on batch or seqlen
    shape_q, shape_kv = (B, S, a.H, 128), (B, S, a.Hkv, 128)
    if a.block_m:                       # the generic launcher takes BSHD flattened to 1-D
        shape_q, shape_kv = (B * S * a.H * 128,), (B * S * a.Hkv * 128,)
    q = torch.empty(shape_q, dtype=torch.bfloat16)
    kv = torch.empty(shape_kv, dtype=torch.bfloat16)
    exe(q, kv, torch.empty_like(kv), torch.empty_like(q), B, S)
    jits = compiled_jit_functions(exe)
    if len(jits) != 1:
        fail(f"expected one compiled launcher in {name}'s closure, found {len(jits)}")
    with tempfile.TemporaryDirectory() as tmp:
        outs, _ = extract(jits[0], str(Path(tmp) / "fa"), save_host_ir=False)
        objs = [Path(p).read_bytes() for p, _, _ in outs]      # in the gpu.binary's order
    if not objs:
        fail("the compile left no code object")
    Path(a.out).write_bytes(objs[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
