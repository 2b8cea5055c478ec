"""Kernel-argument packing, shared by every backend (emu, hip).

Argument specs come from a code object's metadata (`.args`: offset, size, value_kind) or from a
Kernel's declared args (aiter 16-byte slots or natural packing: the offsets are already in Arg).
Values: torch tensors / numpy arrays (pointer args: the backend's `alloc` gives a device address),
Python ints / floats / numpy scalars (by-value args, packed little-endian by the arg's type).
"""
from __future__ import annotations

import struct
import sys
from dataclasses import dataclass

import numpy as np

from ..errors import KernelError

SCALAR_FMT = {"i32": "<i", "u32": "<I", "f32": "<f", "i64": "<q", "u64": "<Q", "f64": "<d", "i16": "<h",
              "u16": "<H", "f16": "<e"}


@dataclass(frozen=True)
class ArgSpec:
    name: str
    offset: int
    size: int
    kind: str            # global_buffer / by_value / hidden_*
    type: str | None = None   # flyasm type when known ('ptr', 'i32', 'f32', ...)


def specs_from_metadata(args: list[dict]) -> list[ArgSpec]:
    return [ArgSpec(a.get(".name", f"arg{i}"), a[".offset"], a[".size"], a[".value_kind"]) for i, a in enumerate(args)]


def specs_from_kernel(k) -> list[ArgSpec]:
    return [ArgSpec(a.name, a.offset, a.size, a.value_kind, a.type) for a in k.args]


def as_numpy(x):
    """A host array view of a tensor or array (no copy when possible)."""
    torch = sys.modules.get("torch")      # a tensor exists only if torch is already imported
    if torch is not None:
        if isinstance(x, torch.Tensor):
            t = x.detach()
            if t.dtype == torch.bfloat16:
                return t.contiguous().view(torch.int16).numpy().view(np.uint16)
            return t.contiguous().numpy()
    return np.ascontiguousarray(x)


def is_buffer(x) -> bool:
    if isinstance(x, np.ndarray):
        return True
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _scalar_bytes(spec: ArgSpec, v) -> bytes:
    if spec.type in SCALAR_FMT:
        fmt = SCALAR_FMT[spec.type]
        if fmt in ("<i", "<I", "<q", "<Q", "<h", "<H"):
            bits = 8 * struct.calcsize(fmt)
            return (int(v) & ((1 << bits) - 1)).to_bytes(bits // 8, "little")
        return struct.pack(fmt, float(v))
    if spec.type == "bf16":
        b = np.float32(v).view(np.uint32)
        return int((int(b) + 0x7FFF + ((int(b) >> 16) & 1)) >> 16).to_bytes(2, "little")
    if isinstance(v, np.generic):
        b = v.tobytes()
        if len(b) != spec.size:
            raise KernelError(f"argument '{spec.name}' takes {spec.size} bytes; {v!r} has {len(b)}")
        return b
    if isinstance(v, bool) or isinstance(v, int):
        return (int(v) & ((1 << (8 * spec.size)) - 1)).to_bytes(spec.size, "little")
    if isinstance(v, float):
        return struct.pack({4: "<f", 8: "<d", 2: "<e"}[spec.size], v)
    raise KernelError(f"argument '{spec.name}' is by value; pass an int or float, not {type(v).__name__}")


def pack_args(specs: list[ArgSpec], values, alloc, kernarg_size: int | None = None, *, grid=None, block=None) -> bytes:
    """The kernarg segment bytes. `alloc(value, spec) -> address` makes device buffers for pointer args.
    Hidden arguments (hidden_block_count_*, hidden_group_size_*, hidden_remainder_*) are filled from
    grid (in workgroups) and block (work-items per workgroup); others are 0."""
    explicit = [s for s in specs if not s.kind.startswith("hidden_")]
    if len(values) != len(explicit):
        names = ", ".join(s.name for s in explicit)
        raise KernelError(f"the kernel takes {len(explicit)} arguments ({names}); {len(values)} were given")
    end = max((s.offset + s.size for s in specs), default=0)
    buf = bytearray(max(end, kernarg_size or 0))
    for spec, v in zip(explicit, values):
        if spec.kind == "global_buffer" or spec.type == "ptr":
            if is_buffer(v):
                addr = alloc(v, spec)
            elif isinstance(v, int):
                addr = v                       # a raw device address
            else:
                raise KernelError(f"argument '{spec.name}' is a pointer; pass a tensor or array, not {type(v).__name__}")
            b = int(addr).to_bytes(8, "little")
        else:
            b = _scalar_bytes(spec, v)
        buf[spec.offset:spec.offset + len(b)] = b
    g = tuple(grid or (1, 1, 1))
    bl = tuple(block or (1, 1, 1))
    for s in specs:
        val = None
        for i, ax in enumerate("xyz"):
            if s.kind == f"hidden_block_count_{ax}":
                val = g[i]
            elif s.kind == f"hidden_group_size_{ax}":
                val = bl[i]
            elif s.kind == f"hidden_remainder_{ax}":
                val = 0                        # whole workgroups only: no partial group at the edge
        if val is not None:
            buf[s.offset:s.offset + s.size] = int(val).to_bytes(s.size, "little")
    return bytes(buf)
