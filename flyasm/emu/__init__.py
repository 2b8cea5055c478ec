"""CPU emulator of the gfx950 subset (wave64, numpy). Entry point: `run_program` (used by flyasm.run)."""
from __future__ import annotations

import numpy as np

from . import ops_memory, ops_mfma, ops_modes, ops_mx, ops_scalar, ops_vector  # noqa: F401  (register semantics)
from .machine import SEMANTICS, Machine
from .memory import EmuError, Memory
from .program import Program, load_program

__all__ = ["run_program", "load_program", "Program", "Memory", "EmuError", "SEMANTICS", "Machine"]


def _dims(x) -> tuple[int, int, int]:
    t = (x,) if isinstance(x, int) else tuple(x)
    return tuple(t) + (1,) * (3 - len(t))


def run_program(program: Program, grid, block, kernarg_addr: int, memory: Memory, lds: int | None = None,
                seed: int | None = None, check_inflight: bool = True, max_steps: int = 50_000_000,
                progress=None, trace: int | None = None, hazards="default", races="default",
                strict="default", recorder=None, workgroups=None, waive=()) -> Machine:
    """Run every workgroup of a dispatch. `grid` counts workgroups per dimension (HIP's gridDim),
    `block` work-items per workgroup. `workgroups` (optional, a list of (x, y, z) ids inside the
    grid) runs only those, e.g. a timing model's sample; `recorder(m, p, w)` is called before every
    step (Machine.recorder)."""
    g, b = _dims(grid), _dims(block)
    if min(g) < 1 or min(b) < 1:
        raise EmuError(f"grid {g} and block {b} need at least one workgroup and one work-item per dimension")
    d = program.descriptor
    if d.kernarg_preload & 0x7F:
        raise EmuError("not emulated: kernarg preload (.amdhsa_user_sgpr_kernarg_preload_length)")
    lds_size = d.group_segment_fixed_size + (lds or 0)
    if lds_size > 160 * 1024:
        raise EmuError(f"the launch needs {lds_size} bytes of LDS; gfx950 has 160 KiB per workgroup")
    nwg = list(g)
    threads = b[0] * b[1] * b[2]
    if threads > 1024:
        raise EmuError(f"block {b} has {threads} work-items; a workgroup holds at most 1024")
    wpg = -(-threads // 64)
    wg_list = [(x, y, z) for z in range(nwg[2]) for y in range(nwg[1]) for x in range(nwg[0])]
    if workgroups is not None:
        wg_list = [tuple(int(c) for c in _dims(wg)) for wg in workgroups]
        bad = [wg for wg in wg_list if not all(0 <= c < n for c, n in zip(wg, nwg))]
        if bad or not wg_list:
            raise EmuError(f"workgroups {bad or '[]'} are not ids inside the grid {g}")
    # Work-items of each wave (x fastest) and whether they exist (partial workgroups at the grid edge).
    t = np.arange(wpg * 64)
    tx, ty, tz = t % b[0], (t // b[0]) % b[1], t // (b[0] * b[1])
    waves, wg_of, execs, tids = [], [], [], []
    for wi, (x, y, z) in enumerate(wg_list):
        valid = t < threads
        for k in range(wpg):
            v = valid[64 * k:64 * k + 64]
            if not v.any():
                continue
            waves.append((x, y, z))
            wg_of.append(wi)
            execs.append(v)
            tids.append((tx[64 * k:64 * k + 64] | (ty[64 * k:64 * k + 64] << 10) | (tz[64 * k:64 * k + 64] << 20)))
    m = Machine(program, len(waves), np.array(wg_of), len(wg_list), lds_size, memory, seed, check_inflight,
                hazards=hazards, races=races, strict=strict, recorder=recorder, waive=waive)
    # Initial state (AMDGPUUsage "Initial Kernel Execution State"; notes §5): user SGPRs, then workgroup ids.
    lay = d.user_sgpr_layout()
    if "kernarg_segment_ptr" in lay:
        i = lay["kernarg_segment_ptr"]
        m.S[:, i] = kernarg_addr & 0xFFFFFFFF
        m.S[:, i + 1] = kernarg_addr >> 32
    if "dispatch_ptr" in lay:
        pkt = np.zeros(64, np.uint8)
        pkt[4:10] = np.array(b, np.uint16).view(np.uint8)
        pkt[12:24] = np.array([g[i] * b[i] for i in range(3)], np.uint32).view(np.uint8)   # work-items
        pkt[28:32] = np.array([lds_size], np.uint32).view(np.uint8)
        pkt[40:48] = np.array([kernarg_addr], np.uint64).view(np.uint8)
        addr = memory.alloc(64, pkt, "dispatch packet")
        memory.finalize()
        i = lay["dispatch_ptr"]
        m.S[:, i], m.S[:, i + 1] = addr & 0xFFFFFFFF, addr >> 32
    unsupported = set(lay) - {"kernarg_segment_ptr", "dispatch_ptr"}
    if unsupported:
        raise EmuError(f"not emulated: user SGPR inputs {sorted(unsupported)}")
    s = d.user_sgpr_count
    wgid = np.array(waves, np.uint32)
    for axis, on in enumerate(d.workgroup_id_enable):
        if on:
            m.S[:, s] = wgid[:, axis]
            s += 1
    if d.workgroup_info:
        raise EmuError("not emulated: workgroup info SGPR")
    m.R[:, 0, :] = np.array(tids, np.uint32)
    ex = np.array(execs, bool)
    m.S[:, 126:128] = np.packbits(ex, axis=1, bitorder="little").view(np.uint32)
    m.refresh_exec(slice(None))
    if progress is not None or trace is not None:
        from .trace import Observer
        if trace is not None and not 0 <= trace < m.W:
            raise EmuError(f"--trace {trace}: the launch has waves 0..{m.W - 1}")
        m.observer = Observer(progress, trace)
    m.run(max_steps)
    return m
