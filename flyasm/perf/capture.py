"""Run a kernel (any .co + launch) in the emulator with a Recorder and keep the executed streams,
cached by content: the code-object bytes, kernel name, grid, block, kernarg bytes, buffer sizes, the
sampled workgroup ids and the recorder's trace.VERSION. A kernel whose stream depends on data sees
fresh random bf16-valued buffers (N(0,1) as bf16 in every 16-bit half: finite for bf16, f16 and f32
readers alike)."""
from __future__ import annotations

import hashlib
import os
import pickle
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..asm.driver import atomic_write
from ..errors import FlyasmError
from .trace import VERSION, Recorder

CACHE = Path(os.environ.get("FLYASM_CACHE", Path.home() / ".cache" / "flyasm")) / "perf_traces"


@dataclass
class Trace:
    """Executed streams of a sample of workgroups: `waves` is one dict per wave (trace.Recorder.streams)
    with its workgroup's sample index in 'wg'."""
    co_hash: str
    kernel: str
    grid: tuple
    block: tuple
    workgroups: list
    waves: list = field(default_factory=list)
    touched_lines: int = 0
    key: str = ""               # content key (the cache file name)
    buffers: list = field(default_factory=list)   # per allocation of the run (a wave's 'buf'): buffer name or None


def _dims(x):
    t = (x,) if isinstance(x, (int, np.integer)) else tuple(x)
    return tuple(int(v) for v in t) + (1,) * (3 - len(t))


def _fill(nbytes: int, rng) -> np.ndarray:
    vals = rng.standard_normal((nbytes + 1) // 2).astype(np.float32)
    return (vals.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8)[:nbytes].copy()


HOST_BASE = 0x7F00_0000_0000     # host addresses the kernarg bytes are packed with (launch rebases them)
TRACE_FORMAT = 2                 # of what a Trace records (2: the buffer of each VMEM access)


def capture(co: bytes, grid, block, kernarg, buffers: dict | None = None, workgroups=None, kernel: str | None = None,
            lds: int | None = None, cache: bool = True) -> Trace:
    """Streams of `workgroups` (default: all) of one launch. `kernarg` is bytes, or a callable taking
    {buffer name: address} and returning bytes packed with those addresses, which the launch maps
    onto the buffers of `buffers` = {name: byte count (random bf16-valued contents) or array}."""
    from ..emu import load_program
    from ..run import launch
    g, b = _dims(grid), _dims(block)
    prog = load_program(co, kernel)
    wgs = [(x, y, z) for z in range(g[2]) for y in range(g[1]) for x in range(g[0])] if workgroups is None \
        else [_dims(w) for w in workgroups]
    rng = np.random.default_rng(0x5EED)
    addrs, data = {}, {}
    at = HOST_BASE
    for name, n in (buffers or {}).items():      # an int: that many random bytes; an array: its bytes
        data[name] = np.ascontiguousarray(n).view(np.uint8).reshape(-1) if isinstance(n, np.ndarray) \
            else _fill(int(n), rng)
        addrs[name] = at
        at += -(-max(data[name].size, 1) // 4096) * 4096 + 4096
    ka = kernarg(addrs) if callable(kernarg) else kernarg
    if not isinstance(ka, (bytes, bytearray)):
        raise FlyasmError("kernarg must be bytes (or a callable returning bytes)")
    co_hash = hashlib.sha256(co).hexdigest()
    key = hashlib.sha256(repr((TRACE_FORMAT, co_hash, prog.name, g, b, bytes(ka).hex(), sorted((k, v if isinstance(v, int) else hashlib.sha256(np.ascontiguousarray(v).tobytes()).hexdigest())
                                      for k, v in (buffers or {}).items()),
                               wgs, lds, VERSION)).encode()).hexdigest()[:32]
    path = CACHE / f"{key}.pkl"
    if cache and path.exists():
        tr = pickle.loads(path.read_bytes())
        tr.key = key
        return tr
    rec = Recorder()
    res = launch(co, g, b, kernarg=bytes(ka), buffers={addrs[n]: data[n] for n in data} or None, kernel=prog.name,
           lds=lds, recorder=rec, workgroups=wgs, hazards=None, races=False,
           check_inflight="land")     # foreign code may read a load's target on timing, not a counter wait
    host_name = {f"buffer 0x{a:x}": n for n, a in addrs.items()}      # run.rebase_pointers' allocation names
    tr = Trace(co_hash, prog.name, g, b, wgs, touched_lines=len(rec.touched), key=key,
               buffers=[host_name.get(name) for _, _, name in res.machine.mem.allocs])
    wpg = -(-(b[0] * b[1] * b[2]) // 64)
    for s in rec.streams():
        s["wg"] = s["wave"] // wpg
        tr.waves.append(s)
    tr.program = prog
    if cache:
        prog_keep, tr.program = tr.program, None
        atomic_write(path, pickle.dumps(tr))          # runs in other worktrees read the same cache
        tr.program = prog_keep
    return tr
