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


def nbytes(x) -> int:
    """Bytes of a tensor or array (a GPU tensor's without copying it to the host)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        return x.numel() * x.element_size()
    return int(as_numpy(x).nbytes)


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


# ---- raw kernarg bytes (a foreign host's packing) -----------------------------------------------
def raw_kernarg(kernarg) -> bytes:
    """Kernarg bytes given as bytes / bytearray / a numpy uint8 array / a hex string."""
    if isinstance(kernarg, str):
        try:
            return bytes.fromhex(kernarg.strip())
        except ValueError:
            raise KernelError("kernarg is a string but not hex digits (give bytes or a hex string)") from None
    if isinstance(kernarg, np.ndarray):
        return kernarg.astype(np.uint8, copy=False).tobytes()
    if isinstance(kernarg, (bytes, bytearray, memoryview)):
        return bytes(kernarg)
    raise KernelError(f"kernarg takes bytes or a hex string, not {type(kernarg).__name__}")


def pointer_slots(specs: list[ArgSpec] | None, size: int) -> list[int]:
    """Offsets of the 8-byte pointers in a kernarg segment: the metadata's global_buffer arguments
    when it declares any (a by-value size or stride that happens to equal a mapped address then
    stays a value), else every 8-byte-aligned word. Past the last declared argument the metadata
    says nothing, so every aligned word there is a candidate too (hosts pack fields a kernel's
    metadata does not list, e.g. aiter's split-K semaphore after a bf16 GEMM's arguments)."""
    declared = [s.offset for s in specs or () if s.kind == "global_buffer" and s.size == 8]
    if declared:
        end = max(s.offset + s.size for s in specs)
        return [o for o in declared if o + 8 <= size] + list(range(-(-end // 8) * 8, size - 7, 8))
    return list(range(0, size - 7, 8))


def rebase_pointers(kernarg: bytes, buffers: dict, specs: list[ArgSpec] | None, alloc) -> bytes:
    """Patch the host's pointer values in `kernarg` onto device buffers. `buffers` maps the address
    the bytes were packed with to a tensor/array; `alloc(value, name) -> address` makes its device
    copy. A pointer anywhere inside a mapped buffer keeps its offset; other words are left alone."""
    if not isinstance(buffers, dict):
        raise KernelError("buffers takes a dict {address the kernarg bytes hold: tensor or array}")
    ranges = []
    for addr, v in buffers.items():
        if not isinstance(addr, (int, np.integer)) or not 0 < int(addr) < 1 << 64:
            raise KernelError(f"buffers key {addr!r} is not a non-zero 64-bit address")
        if not is_buffer(v):
            raise KernelError(f"buffers[0x{int(addr):x}] is a {type(v).__name__}; give a tensor or array")
        ranges.append((int(addr), nbytes(v), v))
    ranges.sort(key=lambda r: r[0])
    for (a0, n0, _), (a1, _, _) in zip(ranges, ranges[1:]):
        if a0 + n0 > a1:
            raise KernelError(f"buffers 0x{a0:x} ({n0} bytes) and 0x{a1:x} overlap")
    dev = [alloc(v, f"buffer 0x{a:x}") for a, _, v in ranges]
    out = bytearray(kernarg)
    used = [False] * len(ranges)
    starts = [a for a, _, _ in ranges]

    def target(off):
        val = int.from_bytes(out[off:off + 8], "little")
        k = int(np.searchsorted(starts, val, side="right")) - 1
        return (k, val) if k >= 0 and val < ranges[k][0] + max(ranges[k][1], 1) else (None, val)
    slots = pointer_slots(specs, len(out))
    for off in slots:
        k, val = target(off)
        if k is not None:
            out[off:off + 8] = (dev[k] + val - ranges[k][0]).to_bytes(8, "little")
            used[k] = True
    # Metadata can be stale: aiter's group-mode backward kernels load 64-bit sequence-start pointers
    # from slots their metadata calls two 32-bit values. A buffer no declared pointer reaches is looked
    # for in the other aligned words, taking only a value above 4 GiB, which no 32-bit field holds.
    unreached = {k for k, u in enumerate(used) if not u}
    for off in sorted(set(range(0, len(out) - 7, 8)) - set(slots)):
        k, val = target(off)
        if k in unreached and val >> 32:
            out[off:off + 8] = (dev[k] + val - ranges[k][0]).to_bytes(8, "little")
            used[k] = True
    unused = [f"0x{a:x}" for (a, _, _), u in zip(ranges, used) if not u]
    if unused:
        where = "argument" if specs and any(s.kind == "global_buffer" for s in specs) else "8-byte-aligned word"
        raise KernelError(f"no pointer {where} of the kernarg bytes points into buffer(s) {', '.join(unused)}")
    return bytes(out)
