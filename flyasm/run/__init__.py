"""Launch API: one call for every backend.

    launch(co_or_kernel, grid, block, *args, backend="emu", lds=None, kernel=None, seed=None)
    launch(co, grid, block, kernarg=BYTES, buffers={0x1000: q, ...}, backend="emu")

`grid` counts WORKGROUPS per dimension (HIP's gridDim, aiter's `(ceil(seqlen_q/256), heads, batch)`),
not work-items; `block` is the workgroup size in work-items. Arguments are torch tensors or numpy
arrays (pointer arguments) and Python scalars (by-value arguments); argument packing
(`args.pack_args`) is shared by all backends. Or the kernarg bytes a foreign host packed, with a map
from the pointer values inside them to tensors (`args.rebase_pointers`). Returns a LaunchResult.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from ..errors import FlyasmError
from .args import ArgSpec, as_numpy, pack_args, raw_kernarg, rebase_pointers, specs_from_kernel, specs_from_metadata

__all__ = ["launch", "LaunchResult", "pack_args", "ArgSpec", "dims"]


@dataclass
class LaunchResult:
    backend: str
    machine: object = None
    wave_instructions: int = 0
    kernarg: bytes = b""

    @property
    def report(self):
        """The emulator's violation report (flyasm.emu.report.Report): every distinct hazard / LDS
        race the run met in report mode or under a waiver, and the waivers that matched nothing."""
        return getattr(self.machine, "report", None)


def dims(x, what: str = "grid") -> tuple[int, int, int]:
    """An int or a 1-3 tuple as (x, y, z), each a positive int."""
    t = (x,) if isinstance(x, (int, np.integer)) else tuple(x)
    if not 1 <= len(t) <= 3 or not all(isinstance(v, (int, np.integer)) and v >= 1 for v in t):
        raise FlyasmError(f"{what} takes 1 to 3 positive integers, not {x!r}")
    return tuple(int(v) for v in t) + (1,) * (3 - len(t))


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
    p = Path(code)
    if not p.is_file():
        raise FlyasmError(f"code object {code} does not exist")
    return p.read_bytes(), kernel, None, None


def _copy_back(dst, host: np.ndarray):
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(dst, torch.Tensor):
        t = torch.from_numpy(host.copy())
        if dst.dtype == torch.bfloat16:
            t = t.view(torch.int16).view(torch.bfloat16)
        dst.copy_(t.view(dst.dtype).reshape(dst.shape))
        return
    dst[...] = host.view(dst.dtype).reshape(dst.shape)


def _on_device(v) -> bool:
    """A torch tensor that already lives in GPU memory (ROCm torch calls it 'cuda')."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(v, torch.Tensor) and v.device.type == "cuda"


def launch(code, grid, block, *args, backend: str = "emu", lds: int | None = None, kernel: str | None = None,
           seed: int | None = None, check_inflight: bool | str = True, max_steps: int = 50_000_000,
           runtime=None, progress=None, trace: int | None = None, hazards="default", races="default",
           strict="default", recorder=None, workgroups=None, kernarg=None, buffers=None,
           waive=()) -> LaunchResult:
    """Run a kernel once on `backend` ('emu' or 'hip').

    code: a Kernel, a BuildResult, code-object bytes or a path to a .co (`kernel=` picks one of
    several kernels). grid: WORKGROUPS per dimension (int or up to 3 ints, HIP's gridDim).
    block: work-items per workgroup (int or up to 3 ints). args: one per explicit kernel argument,
    in order; pointer arguments take numpy arrays / torch tensors (copied to device buffers and
    copied back after the run; ROCm tensors are passed by `data_ptr()`), by-value arguments take
    Python or numpy scalars. lds: dynamic LDS bytes on top of the kernel's static LDS.
    Emulator only: seed (random wave interleaving), check_inflight (True: reading a register an
    in-flight load will still write is an error; "land": the load lands there and result.report lists
    the read, for kernels that rely on timing; False: no check), max_steps, progress (a callable
    taking the number of wave-instructions executed so far), trace (wave id: print every executed
    instruction with its register deltas); hazards / races / strict relax the strict defaults for one
    run (see flyasm.emu.hazards.options: hazards=None turns the hazard check off, "strict" counts only
    s_nop and VALU; races=False; strict=False or "unaligned"); hazards="report" / races="report" run to
    the end and list every distinct violation in `result.report`; waive=[rule, (rule, pc), ...] accepts
    known violations and stays strict for the rest; recorder (called before every step: flyasm.perf
    records executed streams), workgroups (run only these (x, y, z) ids of the grid).
    hip only: runtime (a HipRuntime).
    kernarg / buffers: raw kernarg bytes (bytes or hex) instead of args, and {pointer value in those
    bytes: tensor}; each pointer into a mapped buffer is rebased onto its device copy, and every
    buffer is copied back after the run.
    """
    co, name, specs, kobj = _resolve(code, kernel)
    g, b = dims(grid, "grid"), dims(block, "block")
    if kernarg is not None:
        if args:
            raise FlyasmError("give either positional kernel arguments or kernarg= bytes, not both", find_loc=False)
        kernarg = raw_kernarg(kernarg)
    elif buffers:
        raise FlyasmError("buffers= maps the pointers inside kernarg= bytes; it needs kernarg=", find_loc=False)
    if backend == "hip":
        return _launch_hip(co, name, specs, g, b, args, lds, runtime, kernarg, buffers)
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

    copies = []

    def alloc(v, spec):
        name = getattr(spec, "name", spec)
        if _on_device(v):
            raise FlyasmError(f"argument '{name}' is a GPU tensor; the emulator takes CPU tensors or arrays")
        host = as_numpy(v)
        addr = mem.alloc(host.nbytes, host, name)
        copies.append((v, addr, host))
        return addr

    if kernarg is None:
        kernarg = pack_args(specs, args, alloc, prog.descriptor.kernarg_size, grid=g, block=b)
    else:
        kernarg = rebase_pointers(kernarg, buffers or {}, specs, alloc)
    # SMEM may read a whole s_load_dwordx8/x16 past the last argument: the runtime's kernarg
    # buffer is larger than the arguments, so pad it (zeros) rather than report a false error.
    padded = np.zeros((len(kernarg) + 64 + 255) // 256 * 256, np.uint8)
    padded[:len(kernarg)] = np.frombuffer(kernarg, np.uint8)
    ka = mem.alloc(padded.size, padded, "kernarg")
    mem.finalize()
    m = run_program(prog, g, b, ka, mem, lds=lds, seed=seed, check_inflight=check_inflight, max_steps=max_steps,
                    progress=progress, trace=trace, hazards=hazards, races=races, strict=strict,
                    recorder=recorder, workgroups=workgroups, waive=waive)
    for v, addr, host in copies:
        out = mem.read(addr, host.nbytes)
        _copy_back(v, out.view(host.dtype).reshape(host.shape) if host.dtype != np.uint8 else out.reshape(host.shape))
    return LaunchResult("emu", m, m.wave_instructions, kernarg)


def _launch_hip(co: bytes, name, specs, g, b, args, lds, runtime, kernarg=None, buffers=None) -> LaunchResult:
    from ..codeobj.reader import read_code_object
    from . import hip
    obj = read_code_object(co)
    names = [k.name for k in obj.kernels]
    if name is None:
        if len(names) != 1:
            raise FlyasmError(f"the code object holds {len(names)} kernels {names}; pass kernel=NAME")
        name = names[0]
    kc = obj.kernel(name)
    if specs is None:
        specs = specs_from_metadata(list((kc.metadata or {}).get(".args", []) or []))
    if b[0] * b[1] * b[2] > 1024:
        raise FlyasmError(f"block {b} has {b[0] * b[1] * b[2]} work-items; a workgroup holds at most 1024")
    rt = runtime or hip.HipRuntime()
    owned = []          # (caller's value, device pointer, host array) for buffers we allocated

    def alloc(v, spec):
        if _on_device(v):
            return int(v.data_ptr())
        host = as_numpy(v)
        ptr = rt.malloc(host.nbytes)
        owned.append((v, ptr, host))
        rt.to_device(ptr, host.tobytes())
        return ptr

    try:
        if kernarg is None:
            kernarg = pack_args(specs, args, alloc, kc.descriptor.kernarg_size, grid=g, block=b)
        else:
            kernarg = rebase_pointers(kernarg, buffers or {}, specs, alloc)
        total_lds = kc.descriptor.group_segment_fixed_size + (lds or 0)
        hip.run_packed(co, name, g, b, kernarg, total_lds, runtime=rt, dynamic_lds=lds or 0)
        for v, ptr, host in owned:
            data = np.frombuffer(rt.from_device(ptr, host.nbytes), np.uint8)
            _copy_back(v, data.view(host.dtype).reshape(host.shape) if host.dtype != np.uint8 else data.reshape(host.shape))
    finally:
        for _, ptr, _ in owned:
            rt.free(ptr)
    return LaunchResult("hip", None, 0, kernarg)

