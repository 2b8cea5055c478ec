"""Launch API: one call for every backend.

    launch(co_or_kernel, grid, block, *args, backend="emu", lds=None, kernel=None, seed=None)

`grid` counts work-items per dimension (HSA dispatch semantics, as tests/corpus/REFERENCE.md
writes launches: grid = block * number of workgroups); `block` is the workgroup size. Arguments
are torch tensors or numpy arrays (pointer arguments: copied to device buffers and copied back
after the run) and Python scalars (by-value arguments). Argument packing (`args.pack_args`) is
shared by all backends. Returns a LaunchResult (the emulator's machine for inspection).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import FlyasmError
from .args import ArgSpec, as_numpy, pack_args, specs_from_kernel, specs_from_metadata

__all__ = ["launch", "LaunchResult", "pack_args", "ArgSpec"]


@dataclass
class LaunchResult:
    backend: str
    machine: object = None
    wave_instructions: int = 0


def _dims(x) -> tuple[int, int, int]:
    t = (x,) if isinstance(x, int) else tuple(x)
    return tuple(t) + (1,) * (3 - len(t))


def _resolve(code, kernel):
    """(co bytes, kernel name, arg specs, Kernel or None)."""
    from ..kernel import Kernel
    if isinstance(code, Kernel):
        res = code.build()
        return res.co, code.name, specs_from_kernel(code), code
    if hasattr(code, "co") and isinstance(getattr(code, "co"), (bytes, bytearray)):
        return bytes(code.co), kernel or getattr(code, "name", None), None, None
    if isinstance(code, (bytes, bytearray)):
        return bytes(code), kernel, None, None
    from pathlib import Path
    return Path(code).read_bytes(), kernel, None, None


def _copy_back(dst, host: np.ndarray):
    try:
        import torch
        if isinstance(dst, torch.Tensor):
            t = torch.from_numpy(host.copy())
            if dst.dtype == torch.bfloat16:
                t = t.view(torch.int16).view(torch.bfloat16)
            dst.copy_(t.view(dst.dtype).reshape(dst.shape))
            return
    except ImportError:  # pragma: no cover
        pass
    dst[...] = host.view(dst.dtype).reshape(dst.shape)


def launch(code, grid, block, *args, backend: str = "emu", lds: int | None = None, kernel: str | None = None,
           seed: int | None = None, check_inflight: bool = True, max_steps: int = 50_000_000) -> LaunchResult:
    co, name, specs, kobj = _resolve(code, kernel)
    g, b = _dims(grid), _dims(block)
    if backend == "hip":
        raise FlyasmError("backend='hip' is not wired into launch() yet (flyasm.run.hip holds the ctypes runtime)")
    if backend != "emu":
        raise FlyasmError(f"backend is 'emu' or 'hip', not '{backend}'")
    from ..emu import Memory, load_program, run_program
    prog = load_program(co, name)
    if kobj is not None and len(kobj.stream) == len(prog.insts):
        for src, dst in zip(kobj.stream, prog.insts):       # the author's Python lines, for error messages
            if src.name == dst.name:
                dst.loc = src.loc
    if specs is None:
        specs = specs_from_metadata(prog.args)
    mem = Memory()
    buffers = []

    def alloc(v, spec):
        host = as_numpy(v)
        addr = mem.alloc(host.nbytes, host, spec.name)
        buffers.append((v, addr, host))
        return addr

    kernarg = pack_args(specs, args, alloc, prog.descriptor.kernarg_size, grid=g, block=b)
    # SMEM may read a whole s_load_dwordx8/x16 past the last argument: the runtime's kernarg
    # buffer is larger than the arguments, so pad it (zeros) rather than report a false error.
    padded = np.zeros((len(kernarg) + 64 + 255) // 256 * 256, np.uint8)
    padded[:len(kernarg)] = np.frombuffer(kernarg, np.uint8)
    ka = mem.alloc(padded.size, padded, "kernarg")
    mem.finalize()
    m = run_program(prog, g, b, ka, mem, lds=lds, seed=seed, check_inflight=check_inflight, max_steps=max_steps)
    for v, addr, host in buffers:
        out = mem.read(addr, host.nbytes)
        _copy_back(v, out.view(host.dtype).reshape(host.shape) if host.dtype != np.uint8 else out.reshape(host.shape))
    return LaunchResult("emu", m, m.wave_instructions)
