"""Which data each workgroup of a launch reads, from the code: every workgroup of the real grid runs
in the emulator only as far as its first access to each buffer, and the lines those accesses touch
name the stream it reads there.

Workgroups whose first accesses to a buffer touch the same lines read the same stream of it (the same
code walks on from the same place: every Q tile of a head reads the head's K from key 0; every tile
of a row of C reads the same rows of A); different lines, different data. This is the placement
model's input (perf.placement): it never assumes an author's workgroup -> tile mapping, it runs the
kernel's own address computation with the real grid and kernel arguments (FlyDSL's XCD-mapping
build reads hidden_block_count_y).

The real problem may be far too large to hold (K and V of a 64-head, 64K-token attention are 2 GiB
each), and only addresses matter here, so the buffers are address space without bytes: an access
inside one reads and writes a small scratch area (`_Memory`). A kernel whose addresses depend on the
data it loads (paged attention's block table) is probed wrongly; give such buffers as arrays, which
are mapped for real. Waves run batched (the emulator executes waves with equal pcs in one numpy call)
and stop at their quota of VMEM instructions or after one loop iteration. Cached by content.
"""
from __future__ import annotations

import hashlib
import os
import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..asm.driver import atomic_write
from ..emu.memory import BASE, EmuError, Memory
from .trace import LINE, _vmem_bytes

CACHE = Path(os.environ.get("FLYASM_CACHE", Path.home() / ".cache" / "flyasm")) / "perf_footprints"
VERSION = 1
VIRTUAL_AT = 1 << 40              # virtual buffers live this far above the real allocations
SCRATCH = 1 << 20                 # bytes an access to a virtual buffer lands in
BATCH_WAVES = 2048                # waves per emulator run (more: fewer numpy calls per wave; ~0.3 GB of registers)


@dataclass
class Footprint:
    """key[name][w]: the stream workgroup w (dispatch order, x fastest) reads of buffer `name`: a hash
    of the lines its waves' first accesses to that buffer touched (-1: it did not access it)."""
    grid: tuple
    key: dict
    nbytes: dict | None = None      # name -> the buffer's size (the probe's; None: not known)


class _Memory(Memory):
    """Real allocations (kernarg, explicit arrays) in a small arena; virtual buffers as address space
    whose accesses all land in a scratch area."""

    def __init__(self):
        super().__init__()
        self._virt_end = VIRTUAL_AT

    def alloc_virtual(self, nbytes: int, name: str) -> int:
        off = (self._virt_end + 4095) // 4096 * 4096
        self.allocs.append((off, nbytes, name))
        self._chunks.append(None)
        self._virt_end = off + max(nbytes, 1) + 4096
        return BASE + off

    def alloc(self, nbytes: int, data=None, name: str = "") -> int:
        real = [a for a in self.allocs if a[0] < VIRTUAL_AT]
        off = (max([o + n for o, n, _ in real], default=4096) + 4096 + 255) // 256 * 256
        if off + nbytes + 4096 >= VIRTUAL_AT:
            raise EmuError(f"a real allocation of {nbytes} bytes does not fit below the virtual buffers")
        self.allocs.append((off, nbytes, name))
        self._chunks.append(data)
        if self.arena is not None:
            self._grow()
        return BASE + off

    def _grow(self):
        order = np.argsort([a[0] for a in self.allocs], kind="stable")
        self.allocs = [self.allocs[i] for i in order]
        self._chunks = [self._chunks[i] for i in order]
        real_end = max([o + n for o, n, _ in self.allocs if o < VIRTUAL_AT], default=4096)
        self._scratch = (real_end + 4096 + 255) // 256 * 256
        old = self.arena
        new = np.zeros(self._scratch + SCRATCH + 4096, np.uint8)
        if old is not None:
            new[:min(old.size, self._scratch)] = old[:min(old.size, self._scratch)]
        for (off, n, _), data in zip(self.allocs, self._chunks):
            if data is not None and off < VIRTUAL_AT:
                b = np.ascontiguousarray(data).reshape(-1).view(np.uint8) if isinstance(data, np.ndarray) \
                    else np.frombuffer(memoryview(data).cast("B"), np.uint8)
                new[off:off + b.size] = b[:n]
        self._chunks = [None] * len(self._chunks)
        self.arena = new
        self._starts = np.array([a[0] for a in self.allocs], np.int64)
        self._ends = np.array([a[0] + a[1] for a in self.allocs], np.int64)

    def offsets(self, addr, nbytes, what):
        off = addr.astype(np.int64) - BASE
        virt = off >= self._scratch
        if virt.any():
            off = np.where(virt, self._scratch + (off & (SCRATCH - 1)) // 16 * 16, off)
        return off


class _Stop:
    """Recorder: keeps each wave's first access to each buffer (its lines) and stops the wave after
    `quota` VMEM instructions or its second backward jump (one loop iteration done)."""

    def __init__(self, quota: int):
        self.quota = quota
        self.first: dict = {}             # (wave, allocation) -> line array
        self.count = None
        self.back = None
        self.last = None
        self._fn: dict = {}

    def _vmem(self, inst):
        from ..emu.ops_memory import buffer_address, global_address
        if inst.unit not in ("VMEM", "FLAT") or not inst.info.get("mem"):
            return None
        nbytes = _vmem_bytes(inst)
        return nbytes, (buffer_address(inst) if inst.name.startswith("buffer_") else global_address(inst))

    def __call__(self, m, p, w):
        from ..emu.machine import DONE
        if self.count is None:
            self.count = np.zeros(m.W, np.int64)
            self.back = np.zeros(m.W, np.int64)
            self.last = np.full(m.W, -1, np.int64)
            self.seen = np.zeros((m.W, len(m.mem.allocs) + 1), bool)
        ids = m.ids(w)
        self.back[ids] += p <= self.last[ids]
        self.last[ids] = p
        fn = self._fn.get(p, 0)
        if fn == 0:
            fn = self._fn[p] = self._vmem(m.program.insts[p])
        if fn is not None:
            nbytes, af = fn
            addr, ok = af(m, w, nbytes)
            ex = m.execm[w]
            act = ex if ok is None else ex & (ok if ok.ndim == 2 else ok.any(-1))
            a64 = addr.astype(np.int64)
            has = act.any(1)
            lead = a64[np.arange(len(ids)), act.argmax(1)] - BASE       # one buffer per instruction and wave
            k = np.clip(np.searchsorted(m.mem._starts, lead, side="right") - 1, 0, self.seen.shape[1] - 1)
            new = np.nonzero(has & ~self.seen[ids, k])[0]
            for i in new.tolist():
                lanes = a64[i][act[i]]
                self.first[(int(ids[i]), int(k[i]))] = np.unique(np.r_[lanes // LINE, (lanes + nbytes - 1) // LINE])
            self.seen[ids[new], k[new]] = True
            self.count[ids] += 1
        stop = ids[(self.count[ids] >= self.quota) | (self.back[ids] >= 2)]
        if len(stop):
            m.status[stop] = DONE
            m.group_all = False
            m.release_barriers()


def probe(co: bytes, kernel: str | None, grid, block, kernarg, buffers: dict, quota: int,
          cache: bool = True) -> Footprint:
    """The streams every workgroup of `grid` reads. kernarg: bytes or a callable taking {buffer name:
    address} (the real problem's arguments); buffers: {name: byte count (virtual) or array (real)};
    quota: VMEM instructions each wave runs at most (enough to reach its first access to every buffer
    it loads from)."""
    from ..emu import load_program, run_program
    from .capture import _dims
    g, b = _dims(grid), _dims(block)
    prog = load_program(co, kernel)
    mem = _Memory()
    addrs = {}
    for name, n in buffers.items():
        addrs[name] = mem.alloc(n.nbytes, n, name) if isinstance(n, np.ndarray) else mem.alloc_virtual(int(n), name)
    ka = kernarg(addrs) if callable(kernarg) else bytes(kernarg)
    key = hashlib.sha256(repr((VERSION, hashlib.sha256(co).hexdigest(), prog.name, g, b, ka.hex(), quota,
                               sorted((n, v if isinstance(v, int) else hashlib.sha256(v.tobytes()).hexdigest())
                                      for n, v in buffers.items()))).encode()).hexdigest()[:32]
    path = CACHE / f"{key}.pkl"
    if cache and path.exists():
        return pickle.loads(path.read_bytes())
    padded = np.zeros((len(ka) + 64 + 255) // 256 * 256, np.uint8)
    padded[:len(ka)] = np.frombuffer(ka, np.uint8)
    ka_addr = mem.alloc(padded.size, padded, "kernarg")
    mem.finalize()
    wpg = -(-(b[0] * b[1] * b[2]) // 64)
    n_wg = g[0] * g[1] * g[2]
    per = max(1, BATCH_WAVES // wpg)
    hashes = {name: np.full(n_wg, -1, np.int64) for name in buffers}
    for lo in range(0, n_wg, per):
        ids = np.arange(lo, min(n_wg, lo + per))
        wgs = [(int(i % g[0]), int(i // g[0] % g[1]), int(i // (g[0] * g[1]))) for i in ids]
        rec = _Stop(quota)
        m = run_program(prog, g, b, ka_addr, mem, workgroups=wgs, hazards=None, races=False, check_inflight=False,
                        recorder=rec, strict=False)
        alloc_name = [a[2] for a in m.mem.allocs]
        per_wg: dict = {}
        for (wave, alloc), lines in rec.first.items():
            name = alloc_name[alloc] if 0 <= alloc < len(alloc_name) else None
            if name in hashes:
                per_wg.setdefault((wave // wpg, name), []).append(lines)
        for (wi, name), parts in per_wg.items():
            lines = np.unique(np.concatenate(parts))
            hashes[name][ids[wi]] = int.from_bytes(hashlib.blake2b(lines.tobytes(), digest_size=7).digest(), "little")
    fp = Footprint(g, hashes)
    if cache:
        atomic_write(path, pickle.dumps(fp))          # runs in other worktrees read the same cache
    return fp
