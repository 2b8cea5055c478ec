"""Run a few instructions directly in the emulator (decoded IR, no assembler): one workgroup of
`waves` waves, registers set per wave, optional LDS and device buffers. Shared by the emulator
fidelity tests (test_emu_valu/salu/lds/buffer/fidelity/mfma_modifiers).

Coverage registry: every snippet() that runs to completion records the mnemonics it executed
(canonical names, bookkeeping like s_nop/s_waitcnt left out) under the calling test file; with
FLYASM_EMU_COVERAGE=<path> set, the records are appended to <path> as JSON lines at exit
(tools/emu_coverage.py runs the formula test files that way and counts)."""
from __future__ import annotations

import atexit
import json
import os
import sys

import numpy as np

from flyasm.emu import Memory
from flyasm.emu.machine import AOFF, Machine
from flyasm.emu.program import Descriptor, Program, resolve_branches
from flyasm.isa.syntax import parse_instruction

__all__ = ["snippet", "AOFF", "poison", "EXECUTED"]

POISON = np.uint32(0xDEADBEEF)
BOOKKEEPING = {"s_nop", "s_endpgm", "s_waitcnt", "s_waitcnt_vmcnt", "s_waitcnt_lgkmcnt"}
EXECUTED: dict[str, set[str]] = {}     # test file name -> canonical mnemonics run by its snippets


def _caller_file():
    f = sys._getframe(2)
    while f is not None and os.path.basename(f.f_code.co_filename) == "emu_snippet.py":
        f = f.f_back
    return os.path.basename(f.f_code.co_filename) if f is not None else "?"


@atexit.register
def _dump():
    path = os.environ.get("FLYASM_EMU_COVERAGE")
    if path and EXECUTED:
        with open(path, "a") as fh:
            for k, v in sorted(EXECUTED.items()):
                fh.write(json.dumps({"file": k, "mnemonics": sorted(v)}) + "\n")


def poison(n=64):
    return np.full(n, POISON, np.uint32)


def snippet(lines, vregs=None, sregs=None, waves=1, lds=0, exec_mask=None, buffers=(), per_wave=None, **opts):
    """lines: instruction texts (s_endpgm appended). vregs {row: [64] or [waves, 64]} (AGPR rows are
    AOFF + n), sregs {index: int or [waves]}. buffers: numpy arrays placed in device memory; their
    addresses are returned in m.addrs (and copied back into the arrays after the run).
    opts: Machine options (hazards=, races=, strict=, seed=)."""
    insts = []
    for i, t in enumerate(list(lines) + ["s_endpgm"]):
        inst = parse_instruction(t)
        inst.pc = 4 * i
        insts.append(inst)
    prog = Program("snippet", insts, Descriptor(lds, 0, 0, 0, 0, 0, 0), [], {}, resolve_branches(insts))
    mem = Memory()
    addrs = [mem.alloc(b.nbytes, b, f"buf{i}") for i, b in enumerate(buffers)]
    mem.finalize()
    seed = opts.pop("seed", None)
    m = Machine(prog, waves, np.zeros(waves, np.int64), 1, lds, mem, seed, **opts)
    ex = np.ones((waves, 64), bool) if exec_mask is None else np.broadcast_to(np.asarray(exec_mask, bool),
                                                                                  (waves, 64))
    m.S[:, 126:128] = np.packbits(ex, axis=1, bitorder="little").view(np.uint32)
    m.refresh_exec(slice(None))
    m.R[:, 0, :] = np.arange(64, dtype=np.uint32)
    for r, val in (vregs or {}).items():
        m.R[:, r] = np.broadcast_to(np.asarray(val).view(np.uint32), (waves, 64))
    for r, val in (sregs or {}).items():
        m.S[:, r] = np.asarray(val, np.uint64).astype(np.uint32)
    m.addrs = addrs
    m.run()
    EXECUTED.setdefault(_caller_file(), set()).update(i.name for i in insts if i.name not in BOOKKEEPING)
    for b, a in zip(buffers, addrs):
        b[...] = mem.read(a, b.nbytes).view(b.dtype).reshape(b.shape)
    return m
