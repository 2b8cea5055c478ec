"""Offline oracle of LLVM's gfx950 wait-counter insertion (SIInsertWaitcnts), as paired asm / MIR probes.

A :class:`WaitProbe` is a small random gfx950 program (VMEM / global / FLAT / DS / SMEM loads and
stores, LDS-DMA, VALU / store / MFMA / DS consumers, a few basic blocks with branches and a loop
back edge) written twice, without any ``s_waitcnt``: as assembly text (what flyasm's checker
reads) and as a one-function MIR file (what ``llc -mtriple=amdgcn -mcpu=gfx950
-run-pass=si-insert-waitcnts`` reads). :func:`llc_waits` runs LLVM's pass and returns, per asm
instruction, the wait llc put right before it as ``(vmcnt, lgkmcnt)`` (``None`` = that counter not
waited; a wait at the top of a block belongs to the block's first instruction).

Conventions
-----------
* ``WaitProbe.asm``: one item per line, llvm-mc syntax; labels ``.LBB0_N:`` start MIR block ``bb.N``.
* The MIR function is an entry function (``machineFunctionInfo: isEntryFunction: true``), so llc
  adds no wait at function entry; DS reads and LDS-DMA carry LDS memory operands (without them
  SIInsertWaitcnts does not relate a DS read to an earlier LDS DMA).
* Register plan: load/DMA addresses v[10:11] (global/flat), v12 (DS), v13 (offen), rsrc s[4:7],
  SMEM base s[0:1], m0 from s30, branch conditions s2/s3 -- none of them is ever written, so
  only the loaded data creates dependencies. Loads write v[20:59] and s[20:39]; VALU results
  go to v[60:69] (or into a load's registers: WAW); fillers use v[70:89] and s[50:69].

Run ``python tests/oracles/waitcnt_probes.py`` for the counts of the comparison with flyasm.
"""

from __future__ import annotations

import os
import random
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from oracles.hazard_probes import (  # noqa: E402
    HazardOracleError, _opcode, llc_batch, validate_asm,
)

__all__ = ["WaitProbe", "generate_probes", "llc_waits", "llc_raw", "decode_waitcnt", "asm_with_waits",
           "validate_asm", "LLC_ARGS", "default_cache_dir"]

LLC_ARGS = ("-mtriple=amdgcn", "-mcpu=gfx950", "-verify-machineinstrs", "-run-pass=si-insert-waitcnts")
VM_MAX, EXP_MAX, LGKM_MAX = 63, 7, 15


@dataclass(frozen=True)
class WaitProbe:
    name: str
    shape: str                 # "straight", "diamond", "loop", "loop_diamond", "limit_ds", "limit_vm"
    asm: tuple[str, ...]
    mir: str

    @property
    def instructions(self) -> list[str]:
        return [x for x in self.asm if not x.endswith(":")]


@dataclass(frozen=True)
class I:
    asm: str
    mir: str


@dataclass(frozen=True)
class L:
    n: int


_EX = "implicit $exec"
_MX = "implicit $mode, implicit $exec"


def _va(lo: int, n: int = 1) -> str:
    return f"v{lo}" if n == 1 else f"v[{lo}:{lo + n - 1}]"


def _vm(lo: int, n: int = 1) -> str:
    return "$" + "_".join(f"vgpr{i}" for i in range(lo, lo + n))


def _sa(lo: int, n: int = 1) -> str:
    return f"s{lo}" if n == 1 else f"s[{lo}:{lo + n - 1}]"


def _sm(lo: int, n: int = 1) -> str:
    return "$" + "_".join(f"sgpr{i}" for i in range(lo, lo + n))


_DW = {1: "dword", 2: "dwordx2", 3: "dwordx3", 4: "dwordx4"}
_RS = _sm(4, 4)
_LDS_LD = {1: "s32", 2: "s64", 4: "s128"}


# ---- producers
def buffer_load(d: int, n: int) -> I:
    op = f"buffer_load_{_DW[n]}"
    return I(f"{op} {_va(d, n)}, v13, s[4:7], 0 offen",
             f"{_vm(d, n)} = {op.upper()}_OFFEN $vgpr13, {_RS}, 0, 0, 0, 0, {_EX}")


def global_load(d: int, n: int) -> I:
    op = f"global_load_{_DW[n]}"
    return I(f"{op} {_va(d, n)}, v[10:11], off", f"{_vm(d, n)} = {op.upper()} $vgpr10_vgpr11, 0, 0, {_EX}")


def flat_load(d: int, n: int) -> I:
    op = f"flat_load_{_DW[n]}"
    return I(f"{op} {_va(d, n)}, v[10:11]",
             f"{_vm(d, n)} = {op.upper()} $vgpr10_vgpr11, 0, 0, {_EX}, implicit $flat_scr")


def ds_read(d: int, n: int) -> I:
    op = {1: "ds_read_b32", 2: "ds_read_b64", 4: "ds_read_b128"}[n]
    return I(f"{op} {_va(d, n)}, v12",
             f"{_vm(d, n)} = {op.upper()}_gfx9 $vgpr12, 0, 0, {_EX} :: (load ({_LDS_LD[n]}), addrspace 3)")


def ds_write(data: int, n: int) -> I:
    op = {1: "ds_write_b32", 2: "ds_write_b64", 4: "ds_write_b128"}[n]
    return I(f"{op} v12, {_va(data, n)}",
             f"{op.upper()}_gfx9 $vgpr12, {_vm(data, n)}, 0, 0, {_EX} :: (store ({_LDS_LD[n]}), addrspace 3)")


def s_load(d: int, n: int) -> I:
    op = f"s_load_{_DW[n]}"
    return I(f"{op} {_sa(d, n)}, s[0:1], 0x0", f"{_sm(d, n)} = {op.upper()}_IMM $sgpr0_sgpr1, 0, 0")


def lds_dma(kind: str) -> I:
    if kind == "buffer":
        return I("buffer_load_dword v13, s[4:7], 0 offen lds",
                 f"BUFFER_LOAD_DWORD_LDS_OFFEN $vgpr13, {_RS}, 0, 0, 0, 0, {_EX}, implicit $m0 "
                 ":: (load (s32), addrspace 1), (store (s32), addrspace 3)")
    if kind == "buffer4":
        return I("buffer_load_dwordx4 v13, s[4:7], 0 offen lds",
                 f"BUFFER_LOAD_DWORDX4_LDS_OFFEN $vgpr13, {_RS}, 0, 0, 0, 0, {_EX}, implicit $m0 "
                 ":: (load (s128), addrspace 1), (store (s128), addrspace 3)")
    return I("global_load_lds_dword v[10:11], off",
             f"GLOBAL_LOAD_LDS_DWORD $vgpr10_vgpr11, 0, 0, implicit $m0, {_EX} "
             ":: (load (s32), addrspace 1), (store (s32), addrspace 3)")


def buffer_store(data: int, n: int) -> I:
    op = f"buffer_store_{_DW[n]}"
    return I(f"{op} {_va(data, n)}, v13, s[4:7], 0 offen",
             f"{op.upper()}_OFFEN {_vm(data, n)}, $vgpr13, {_RS}, 0, 0, 0, 0, {_EX}")


def global_store(data: int, n: int) -> I:
    op = f"global_store_{_DW[n]}"
    return I(f"{op} v[10:11], {_va(data, n)}, off", f"{op.upper()} $vgpr10_vgpr11, {_vm(data, n)}, 0, 0, {_EX}")


# ---- consumers / fillers
def v_add(d: int, a: int, b: int) -> I:
    return I(f"v_add_f32_e32 v{d}, v{a}, v{b}", f"$vgpr{d} = V_ADD_F32_e32 $vgpr{a}, $vgpr{b}, {_MX}")


def v_mov(d: int, src: str) -> I:
    """src: 'v5', 's7' or an integer literal string."""
    m = src if src.isdigit() else ("$vgpr" if src[0] == "v" else "$sgpr") + src[1:]
    return I(f"v_mov_b32_e32 v{d}, {src}", f"$vgpr{d} = V_MOV_B32_e32 {m}, {_EX}")


def s_add(d: int, a: int, b: int) -> I:
    return I(f"s_add_u32 s{d}, s{a}, s{b}", f"$sgpr{d} = S_ADD_U32 $sgpr{a}, $sgpr{b}, implicit-def $scc")


def s_mov(d: str, src: str) -> I:
    md = "$m0" if d == "m0" else "$sgpr" + d[1:]
    return I(f"s_mov_b32 {d}, {src}", f"{md} = S_MOV_B32 $sgpr{src[1:]}")


def mfma(a: int, b: int) -> I:
    return I(f"v_mfma_f32_16x16x32_bf16 v[100:103], {_va(a, 4)}, {_va(b, 4)}, v[100:103]",
             f"$vgpr100_vgpr101_vgpr102_vgpr103 = V_MFMA_F32_16X16X32_BF16_vgprcd_e64 {_vm(a, 4)}, {_vm(b, 4)}, "
             f"$vgpr100_vgpr101_vgpr102_vgpr103, 0, 0, 0, {_MX}")


S_CMP = I("s_cmp_eq_u32 s2, s3", "S_CMP_EQ_U32 $sgpr2, $sgpr3, implicit-def $scc")
S_BARRIER = I("s_barrier", "S_BARRIER")
S_ENDPGM = I("s_endpgm", "S_ENDPGM 0")


def s_cbranch(cond: str, target: int) -> I:
    return I(f"s_cbranch_{cond} .LBB0_{target}", f"S_CBRANCH_{cond.upper()} %bb.{target}, implicit $scc")


def s_branch(target: int) -> I:
    return I(f"s_branch .LBB0_{target}", f"S_BRANCH %bb.{target}")


# --------------------------------------------------------------------------------------------
# MIR file
# --------------------------------------------------------------------------------------------

def mir_function(name: str, items: Sequence) -> str:
    blocks: list[list[I]] = [[]]
    for it in items:
        if isinstance(it, L):
            assert it.n == len(blocks), (name, it.n)
            blocks.append([])
        else:
            blocks[-1].append(it)
    out = ["---", f"name:            {name}", "tracksRegLiveness: false", "machineFunctionInfo:",
           "  isEntryFunction: true", "body:             |"]
    for i, blk in enumerate(blocks):
        out.append(f"  bb.{i}:")
        succ: list[int] = []
        last = blk[-1].mir if blk else ""
        if m := re.search(r"%bb\.(\d+)", last):
            succ.append(int(m.group(1)))
        if not last.startswith(("S_BRANCH", "S_ENDPGM")) and i + 1 < len(blocks):
            succ.append(i + 1)
        if succ:
            out.append("    successors: " + ", ".join(f"%bb.{n}" for n in dict.fromkeys(succ)))
        out.extend("    " + it.mir for it in blk)
        out.append("")
    out.append("...")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------------
# Random programs
# --------------------------------------------------------------------------------------------

V_LOAD = (20, 60)      # VGPRs written by loads
S_LOAD = (20, 40)      # SGPRs written by SMEM loads
V_RES = (60, 70)       # VALU results


class _Gen:
    def __init__(self, rng: random.Random):
        self.r = rng
        self.recent_v: list[tuple[int, int]] = []   # (lo, n) of VGPR load destinations
        self.recent_s: list[tuple[int, int]] = []
        self.dma = False

    def vdst(self, n: int) -> int:
        r = self.r
        if self.recent_v and r.random() < 0.25:      # reload into (part of) an earlier destination
            lo, m = r.choice(self.recent_v)
            base = lo + r.randrange(m)
        else:
            base = r.randrange(*V_LOAD)
        base -= base % (2 if n > 1 else 1)
        return min(base, V_LOAD[1] - n - (V_LOAD[1] - n) % 2)

    def sdst(self, n: int) -> int:
        base = self.r.randrange(*S_LOAD)
        base -= base % n
        return min(base, S_LOAD[1] - n)

    def pick_v(self, n: int = 1) -> int:
        """A VGPR (tuple) to consume: overlapping a recent load fully, partly, or not at all."""
        r = self.r
        x = r.random()
        if self.recent_v and x < 0.75:
            lo, m = r.choice(self.recent_v[-4:])
            if n == 1:
                return lo + r.randrange(m)
            base = lo + (r.choice([0, -2, 2]) if x > 0.5 else 0)
        else:
            base = r.randrange(*V_LOAD)
        base -= base % 2
        return max(V_LOAD[0], min(base, V_LOAD[1] - n))

    def pick_s(self) -> int:
        if self.recent_s and self.r.random() < 0.8:
            lo, m = self.r.choice(self.recent_s[-3:])
            return lo + self.r.randrange(m)
        return self.r.randrange(*S_LOAD)

    def producer(self) -> list[I]:
        r = self.r
        k = r.choices(["buf", "glb", "flat", "ds", "dsw", "smem", "dma", "bst", "gst"],
                      [5, 5, 1.2, 4, 2, 3, 2, 1.5, 1.5])[0]
        n = r.choice([1, 1, 2, 4])
        if k in ("buf", "glb", "flat", "ds"):
            if k == "flat" and n == 4:
                n = 2
            d = self.vdst(n)
            self.recent_v.append((d, n))
            return [{"buf": buffer_load, "glb": global_load, "flat": flat_load, "ds": ds_read}[k](d, n)]
        if k == "dsw":
            return [ds_write(self.pick_v(n), n)]
        if k == "smem":
            n = r.choice([1, 2, 4])
            d = self.sdst(n)
            self.recent_s.append((d, n))
            return [s_load(d, n)]
        if k == "dma":
            self.dma = True
            return [lds_dma(r.choice(["buffer", "buffer", "buffer4", "global"]))]
        if k == "bst":
            return [buffer_store(self.pick_v(n), n)]
        return [global_store(self.pick_v(n), n)]

    def consumer(self) -> list[I]:
        r = self.r
        k = r.choices(["add", "waw", "smov", "sadd", "swaw", "mfma", "st", "dsr", "bar"],
                      [6, 1.5, 1.5, 1, 0.7, 1, 1.5, 1.5 + 2 * self.dma, 0.4])[0]
        res = r.randrange(*V_RES)
        if k == "add":
            return [v_add(res, self.pick_v(), self.pick_v() if r.random() < 0.5 else r.randrange(70, 90))]
        if k == "waw":
            return [v_mov(self.pick_v(), "0")]
        if k == "smov":
            return [v_mov(res, f"s{self.pick_s()}")]
        if k == "sadd":
            return [s_add(r.randrange(40, 48), self.pick_s(), self.pick_s())]
        if k == "swaw":
            return [s_mov(f"s{self.pick_s()}", f"s{r.randrange(60, 70)}")]
        if k == "mfma":
            return [mfma(self.pick_v(4), self.pick_v(4))]
        if k == "st":
            n = r.choice([1, 2])
            return [r.choice([buffer_store, global_store, ds_write])(self.pick_v(n), n)]
        if k == "dsr":
            d = self.vdst(1)
            self.recent_v.append((d, 1))
            return [ds_read(d, 1)]
        return [S_BARRIER, ds_read(self.vdst(1), 1)]

    def filler(self) -> I:
        r = self.r
        if r.random() < 0.7:
            return v_mov(r.randrange(70, 80), f"v{r.randrange(80, 90)}")
        return s_mov(f"s{r.randrange(50, 60)}", f"s{r.randrange(60, 70)}")

    def block(self, n_ops: int) -> list[I]:
        out: list[I] = []
        for _ in range(n_ops):
            x = self.r.random()
            if x < 0.45:
                out += self.producer()
            elif x < 0.85:
                out += self.consumer()
            else:
                out += [self.filler() for _ in range(self.r.randint(1, 3))]
        return out


def _program(rng: random.Random, shape: str) -> list:
    g = _Gen(rng)
    ops = lambda: g.block(rng.randint(3, 9))  # noqa: E731
    head = [s_mov("m0", "s30")]
    if shape == "straight":
        return head + ops() + ops() + [S_ENDPGM]
    if shape == "diamond":
        # bb0 -> bb1 | bb2 ; bb1 -> bb3 ; bb2 -> bb3
        return (head + ops() + [S_CMP, s_cbranch("scc1", 2), L(1)] + ops() + [s_branch(3), L(2)] + ops()
                + [L(3)] + ops() + [S_ENDPGM])
    if shape == "loop":
        # bb0 -> bb1 ; bb1 (loop) -> bb1 | bb2
        return head + ops() + [L(1)] + ops() + ops() + [S_CMP, s_cbranch("scc0", 1), L(2)] + ops() + [S_ENDPGM]
    if shape == "loop_diamond":
        # bb0 -> bb1; bb1 -> bb2 | bb3; bb2 -> bb3; bb3 -> bb1 | bb4
        return (head + ops() + [L(1)] + ops() + [S_CMP, s_cbranch("scc1", 3), L(2)] + ops() + [L(3)] + ops()
                + [S_CMP, s_cbranch("scc0", 1), L(4)] + ops() + [S_ENDPGM])
    raise ValueError(shape)


def _limit_program(rng: random.Random, kind: str) -> list:
    """Many same-counter ops, then a consumer of the first: the counter limit (15 / 63) matters."""
    n = rng.choice([13, 14, 15, 16, 17, 20]) if kind == "ds" else rng.choice([60, 62, 63, 64, 66])
    out = [s_mov("m0", "s30")]
    for j in range(n):
        d = 20 + j % 40 if kind == "ds" else 100 + j
        out.append(ds_read(d, 1) if kind == "ds" else global_load(d, 1))
    first = 20 if kind == "ds" else 100
    out += [v_add(60, first, 70), v_add(61, 20 + (n - 1) % 40 if kind == "ds" else 100 + n - 1, 70), S_ENDPGM]
    return out


SHAPES = ("straight", "diamond", "loop", "loop_diamond")


def generate_probes(seed: int = 0, n: int = 320) -> list[WaitProbe]:
    """`n` random probes plus a few counter-limit probes, deterministic for `seed`."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        shape = SHAPES[i % len(SHAPES)]
        items = _program(rng, shape)
        out.append(_probe(f"wc{i}_{shape}", shape, items))
    for i in range(8):
        kind = "ds" if i % 2 == 0 else "vm"
        out.append(_probe(f"wclim{i}_{kind}", f"limit_{kind}", _limit_program(rng, kind)))
    return out


def _probe(name: str, shape: str, items: list) -> WaitProbe:
    asm = tuple(f".LBB0_{it.n}:" if isinstance(it, L) else it.asm for it in items)
    return WaitProbe(name, shape, asm, mir_function(name, items))


# --------------------------------------------------------------------------------------------
# A real kernel's counter skeleton (judging the checker's findings on foreign code)
# --------------------------------------------------------------------------------------------

LOADED = 20                    # the judged load writes v20; its consumer reads it
CONSUMER = v_add(100, LOADED, 101)
OVERWRITE = v_mov(LOADED, "v101")
CONTROL = v_add(100, 101, 101)     # a consumer touching nothing loaded
_FILL = {"vm": (30, 70), "lgkm": (102, 150), "lgkm_smem": (40, 60)}   # (first, how many) filler registers


def waitcnt(vm: int | None = None, lgkm: int | None = None, exp: int | None = None) -> I:
    """An `s_waitcnt` as written (None: that counter not waited)."""
    vm = VM_MAX if vm is None else vm
    exp = EXP_MAX if exp is None else exp
    lgkm = LGKM_MAX if lgkm is None else lgkm
    imm = (vm & 0xF) | (vm >> 4) << 14 | exp << 4 | lgkm << 8
    return I(waitcnt_text(vm if vm < VM_MAX else None, lgkm if lgkm < LGKM_MAX else None), f"S_WAITCNT {imm}")


def _counted(counter: str, reg: int) -> I | None:
    """An operation on the same counter(s) as a `counter` op, writing `reg` (None: counts on none)."""
    if counter == "vm":
        return buffer_load(reg, 1)
    if counter == "lgkm":
        return ds_read(reg, 1)
    if counter == "lgkm_smem":
        return s_load(reg, 1)
    if counter == "vm+lgkm":
        return flat_load(reg, 1)
    return None


def skeleton_probe(items, cfg, producer: int, consumer: int, name: str, *, control: bool = False,
                   overwrite: bool = False) -> WaitProbe | None:
    """A flyasm program (`items`, its `cfg`: flyasm.check.cfg) reduced to what decides its wait
    counters, as one MIR function with the program's basic blocks, branches and loop back edges:
    the load at item `producer` writes v20, item `consumer` becomes a VALU reading v20
    (`overwrite`: writing it; `control`: touching nothing loaded), every other op that counts becomes a load on the same counter(s)
    into a register nothing reads (rotating over enough registers that the counter limit retires
    one before it is reused), every `s_waitcnt` stays as written, everything else goes. LLVM's
    SIInsertWaitcnts, a fixed point over that CFG, then decides the wait the consumer needs on
    every path from the kernel's entry. None when the producer is not a VGPR/AGPR load on vmcnt or
    lgkmcnt."""
    from flyasm.check.cfg import ENDS, branch_target
    from flyasm.isa.operands import Waitcnt
    first = items[producer]
    if first.counter not in ("vm", "lgkm") or first.is_lds_dma or not any(r[0] in "va" for r in first.writes):
        return None                                       # (an AGPR load is judged as a VGPR one)
    out: list = []
    used = {c: 0 for c in _FILL}
    for b in cfg.blocks:
        if b.id:
            out.append(L(b.id))
        for i in b.insts:
            ins = items[i]
            if i == producer:
                out.append(_counted(ins.counter, LOADED))
            elif i == consumer:
                out.append(CONTROL if control else OVERWRITE if overwrite else CONSUMER)
            elif ins.name == "s_waitcnt":
                w = ins.operands[0] if ins.operands and isinstance(ins.operands[0], Waitcnt) else Waitcnt()
                out.append(waitcnt(w.vmcnt, w.lgkmcnt, w.expcnt))
            elif ins.counter in _FILL or ins.counter == "vm+lgkm":
                c = "vm" if ins.counter == "vm+lgkm" else ins.counter
                lo, n = _FILL[c]
                out.append(_counted(ins.counter, lo + used[c] % n))
                used[c] += 1
            elif ins.name in ENDS:
                out.append(S_ENDPGM)
            elif ins.name == "s_branch" or ins.name.startswith("s_cbranch_"):
                t = cfg.label_block.get(branch_target(ins))
                if t is not None and ins.name == "s_branch":
                    out.append(s_branch(t))
                elif t is not None:                       # which condition does not matter here
                    out += [S_CMP, s_cbranch("scc1", t)]
    if not out or not out[-1].mir.startswith(("S_ENDPGM", "S_BRANCH")):
        out.append(S_ENDPGM)                              # no block falls off the function
    asm = tuple(f".LBB0_{it.n}:" if isinstance(it, L) else it.asm for it in out
                if isinstance(it, L) or not it.mir.startswith("S_WAITCNT"))   # llc folds waits into the next
    return WaitProbe(name, "kernel", asm, mir_function(name, out))


def consumer_position(p: WaitProbe) -> int:
    """Index of a skeleton probe's consumer among its instructions (llc's output has one entry each)."""
    return next(k for k, x in enumerate(p.instructions) if x in (CONSUMER.asm, OVERWRITE.asm, CONTROL.asm))


def consumer_waits(p: WaitProbe, control: WaitProbe, got: dict) -> list[tuple[int, int | None, int | None]]:
    """The waits llc put into probe `p` and not into its `control` (same skeleton, consumer reading
    nothing loaded): [(instruction position, vmcnt, lgkmcnt)], the waits the consumer alone causes,
    wherever LLVM placed them (right before it, or hoisted into a loop preheader)."""
    a, b = got[p.name], got[control.name]
    if len(a) != len(b):
        raise HazardOracleError(f"{p.name}: {len(a)} instructions, its control {len(b)}")
    return [(k, x[1], x[2]) for k, (x, y) in enumerate(zip(a, b)) if x != y]


# --------------------------------------------------------------------------------------------
# llc
# --------------------------------------------------------------------------------------------

def decode_waitcnt(imm: int) -> tuple[int, int, int]:
    """GFX9 S_WAITCNT simm16 -> (vmcnt, expcnt, lgkmcnt)."""
    return (imm & 0xF) | ((imm >> 14) & 3) << 4, (imm >> 4) & 7, (imm >> 8) & 0xF


def default_cache_dir() -> Path:
    env = os.environ.get("FLYASM_ORACLE_CACHE")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / ".flyasm-cache" / "llc_waitcnt"


def _fold_waits(lines: list[str]) -> list[tuple[str, int | None, int | None]]:
    """[(opcode, vmcnt, lgkmcnt)] per non-wait instruction: the S_WAITCNTs right before it merged
    (None = that counter not waited)."""
    out, vm, lgkm = [], None, None
    for st in lines:
        op = _opcode(st)
        if op in ("S_WAITCNT", "S_WAITCNT_soft"):
            a, _e, c = decode_waitcnt(int(st.split()[1]))
            if a < VM_MAX:
                vm = a if vm is None else min(vm, a)
            if c < LGKM_MAX:
                lgkm = c if lgkm is None else min(lgkm, c)
            continue
        if op.startswith("S_WAITCNT"):
            raise HazardOracleError(f"unexpected wait {st!r}")
        out.append((op, vm, lgkm))
        vm, lgkm = None, None
    if vm is not None or lgkm is not None:
        out.append(("<end>", vm, lgkm))
    return out


def llc_raw(probes: Sequence[WaitProbe], llc: Path | None = None, cache_dir: Path | None = None,
            jobs: int | None = None) -> dict[str, list]:
    """{probe: [(opcode, vmcnt, lgkmcnt)]} from llc, cached by MIR text and llc --version."""
    got = llc_batch(probes, LLC_ARGS, _fold_waits, llc, cache_dir if cache_dir is not None else default_cache_dir(),
                    jobs)
    return {name: [tuple(t) for t in insts] for name, insts in got.items()}


def llc_waits(probes: Sequence[WaitProbe], llc: Path | None = None,
              cache_dir: Path | None = None) -> dict[str, list[tuple[int | None, int | None]]]:
    """Per probe, one (vmcnt, lgkmcnt) per asm instruction: the wait llc inserted right before it."""
    raw = llc_raw(probes, llc, cache_dir)
    out = {}
    for p in probes:
        got = raw[p.name]
        n = len(p.instructions)
        if len(got) != n:
            raise HazardOracleError(f"{p.name}: llc returned {len(got)} instructions for {n}: {[g[0] for g in got]}")
        out[p.name] = [(vm, lg) for _, vm, lg in got]
    return out


def waitcnt_text(vm: int | None, lgkm: int | None) -> str:
    parts = ([f"vmcnt({vm})"] if vm is not None else []) + ([f"lgkmcnt({lgkm})"] if lgkm is not None else [])
    return "s_waitcnt " + " ".join(parts)


def asm_with_waits(p: WaitProbe, waits: Sequence[tuple[int | None, int | None]], skip: int | None = None):
    """The probe's asm with llc's waits put back (except the one before instruction `skip`)."""
    out, k = [], 0
    for line in p.asm:
        if line.endswith(":"):
            out.append(line)
            continue
        vm, lg = waits[k]
        if (vm is not None or lg is not None) and k != skip:
            out.append(waitcnt_text(vm, lg))
        out.append(line)
        k += 1
    return out


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.test_check_waitcnt_llc import compare_all, summary  # noqa: E402
    probes = generate_probes(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    errs = validate_asm(probes)
    print("asm errors:", len(errs), list(errs.items())[:3])
    print(summary(compare_all(probes, llc_waits(probes))))
