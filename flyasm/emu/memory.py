"""Device memory: numpy bytes behind fake 64-bit addresses, with guard gaps between allocations.

Every access names the instruction when it leaves all allocations (no silent wild reads).
"""
from __future__ import annotations

import numpy as np

from ..errors import FlyasmError

BASE = 0x7F00_0000_0000          # fake device addresses start here (48-bit, like a real VA)
GUARD = 4096                     # unmapped bytes between allocations
ALIGN = 256


class EmuError(FlyasmError):
    """The emulated program did something silicon would not do correctly (or we cannot emulate)."""

    def __init__(self, message: str):
        super().__init__(message, find_loc=False)


class Memory:
    def __init__(self):
        self.allocs: list[tuple[int, int, str]] = []   # (offset in arena, size, name)
        self._chunks: list[bytes | np.ndarray] = []
        self._end = GUARD
        self.arena: np.ndarray | None = None

    def alloc(self, nbytes: int, data=None, name: str = "") -> int:
        """Reserve nbytes (filled with data's bytes if given); returns the device address."""
        off = (self._end + ALIGN - 1) // ALIGN * ALIGN
        self.allocs.append((off, nbytes, name))
        self._chunks.append(data)
        self._end = off + max(nbytes, 1) + GUARD
        if self.arena is not None:
            self._grow()
        return BASE + off

    def _grow(self):
        new = np.zeros((self._end + 3) // 4 * 4, np.uint8)
        if self.arena is not None:
            new[:self.arena.size] = self.arena
        for (off, n, _), data in zip(self.allocs, self._chunks):
            if data is not None:
                b = np.frombuffer(memoryview(data).cast("B"), np.uint8) if not isinstance(data, np.ndarray) \
                    else np.ascontiguousarray(data).reshape(-1).view(np.uint8)
                new[off:off + b.size] = b[:n]
        self._chunks = [None] * len(self._chunks)
        self.arena = new
        self._starts = np.array([a[0] for a in self.allocs], np.int64)
        self._ends = np.array([a[0] + a[1] for a in self.allocs], np.int64)

    def finalize(self):
        self._grow()

    def read(self, addr: int, nbytes: int) -> np.ndarray:
        off = addr - BASE
        return self.arena[off:off + nbytes].copy()

    def write(self, addr: int, data: np.ndarray):
        off = addr - BASE
        self.arena[off:off + data.size] = data.reshape(-1).view(np.uint8)

    def offsets(self, addr: np.ndarray, nbytes: int, what) -> np.ndarray:
        """Arena offsets of accesses [addr, addr+nbytes) (int64 array); raises if any leaves its allocation."""
        off = addr.astype(np.int64) - BASE
        if off.size:
            lo, hi = int(off.min()), int(off.max())
            k0 = int(np.searchsorted(self._starts, lo, side="right")) - 1
            if k0 >= 0 and hi + nbytes <= self._ends[k0]:
                return off                       # all inside one allocation (the common case)
            k = np.searchsorted(self._starts, off, side="right") - 1
            kk = np.maximum(k, 0)
            bad = (k < 0) | (off + nbytes > self._ends[kk])
            if bad.any():
                a = int(addr.reshape(-1)[np.argmax(bad.reshape(-1))])
                raise EmuError(f"{what()}: access of {nbytes} bytes at 0x{a:x} is outside every allocation "
                               f"({self.describe(a)})")
        return off

    def describe(self, addr: int) -> str:
        off = addr - BASE
        best = None
        for o, n, name in self.allocs:
            d = off - (o + n) if off >= o else o - off
            if best is None or d < best[0]:
                best = (d, o, n, name)
        if best is None:
            return "no allocations"
        _, o, n, name = best
        return f"nearest allocation {name or '?'} at 0x{BASE + o:x}..0x{BASE + o + n:x}"
