"""Wave64 machine state, operand access, the asynchronous memory queues and the wave scheduler.

State is batched: every array has a leading wave dimension, and one numpy call executes an
instruction for every wave whose program counter agrees (`w` is either `slice(None)` = all waves,
or an int array of wave ids). Instruction semantics live in the ops_* modules as small functions
registered in SEMANTICS (mnemonic -> compiler returning `fn(m, w)`).
"""
from __future__ import annotations

import numpy as np

from ..isa.operands import Imm, Mod, Reg, Special
from .memory import EmuError

NR = 768                 # R rows: v0..v511, then a0..a255 from AOFF (separate AGPR file)
AOFF = 512
NS = 128                 # S columns use the hardware operand encoding for the specials:
S_VCC, S_M0, S_SCC, S_EXEC = 106, 124, 125, 126   # vcc 106/107, m0 124, (scc kept at 125), exec 126/127
RUN, BAR, DONE = 0, 1, 2
LIMITS = {"vm": 63, "lgkm": 15}   # outstanding-op limits of s_waitcnt's counters (notes §3.4)

LANES = np.arange(64)
SEMANTICS: dict = {}      # canonical mnemonic -> compile(inst, ctx) -> fn(m, w) (None return = advance pc)
WRAPPERS: list = []       # wrap(program, inst, fn, ctx) -> fn: per-wave modes (ops_modes: VSKIP, GPR indexing)


def semantic(*names):
    def deco(f):
        for n in names:
            SEMANTICS[n] = f
        return f
    return deco


def where(inst) -> str:
    loc = f" ({inst.loc})" if inst.loc else ""
    pc = f"pc 0x{inst.pc:x}" if inst.pc is not None else "pc ?"
    return f"'{inst.text()}' at {pc}{loc}"


def not_emulated(inst, why: str = "") -> EmuError:
    return EmuError(f"not emulated: {inst.name} at pc 0x{(inst.pc or 0):x}{' (' + why + ')' if why else ''} "
                    f"in '{inst.text()}'")


# ---------------------------------------------------------------------------------------------
# Register indices
# ---------------------------------------------------------------------------------------------
SPECIAL_S = {"vcc": S_VCC, "vcc_lo": S_VCC, "vcc_hi": S_VCC + 1, "m0": S_M0, "scc": S_SCC, "src_scc": S_SCC,
             "exec": S_EXEC, "exec_lo": S_EXEC, "exec_hi": S_EXEC + 1}


def r_index(reg: Reg) -> int:
    return reg.index + (AOFF if reg.file == "a" else 0)


def s_index(op) -> int:
    if isinstance(op, Reg) and op.file == "s":
        return op.index
    if isinstance(op, Special) and op.name in SPECIAL_S:
        return SPECIAL_S[op.name]
    raise KeyError(op)


def regsets(inst):
    """(R rows, S columns) an instruction reads or writes, for the in-flight checks."""
    rr, ss = set(), set()
    for f, n in inst.reads | inst.writes:
        if f == "v":
            rr.add(n)
        elif f == "a":
            rr.add(AOFF + n)
        elif f == "s":
            ss.add(n)
        elif f == "spec" and n in ("vcc", "exec"):
            ss.update((SPECIAL_S[n], SPECIAL_S[n] + 1))
        elif f == "spec" and n == "m0":
            ss.add(S_M0)
    return np.array(sorted(rr), np.int64), np.array(sorted(ss), np.int64)


def register_rows(program) -> int:
    """R rows the program can touch: one past its highest VGPR/AGPR (AGPRs live from AOFF), so the
    state is [waves, rows, 64] with no dead rows (smaller, faster, fewer page faults than NR)."""
    nr = program.__dict__.get("_nrows")
    if nr is None:
        nr = 1                                   # v0 holds the workitem ids
        for inst in program.insts:
            for f, n in inst.reads | inst.writes:
                if f == "v":
                    nr = max(nr, n + 1)
                elif f == "a":
                    nr = max(nr, AOFF + n + 1)
            for op in inst.operands:
                op = getattr(op, "base", op)
                if isinstance(op, Reg) and op.file in "va":
                    nr = max(nr, r_index(op) + getattr(op, "count", 1))
        if any(i.name == "s_set_gpr_idx_on" for i in program.insts):
            nr = max(nr, AOFF)                   # M0-indexed VGPRs: any of v0..v511
        nr = min(NR, (nr + 7) // 8 * 8)
        program.__dict__["_nrows"] = nr
    return nr


# ---------------------------------------------------------------------------------------------
# Constants and f16/bf16 helpers
# ---------------------------------------------------------------------------------------------
def imm_bits(value, typ: str) -> int:
    """Immediate operand bits as the hardware supplies them for an operand of type typ."""
    if isinstance(value, float):
        if typ in ("f16", "b16", "i16", "u16"):
            return int(np.float16(value).view(np.uint16))
        if typ in ("f64", "b64", "u64", "i64"):
            return int(np.float64(value).view(np.uint64))
        if typ == "bf16":
            return int(np.float32(value).view(np.uint32)) >> 16
        return int(np.float32(value).view(np.uint32))
    if typ in ("b64", "u64", "i64", "f64"):
        if typ == "f64" and not (-16 <= value <= 64):
            return (value & 0xFFFFFFFF) << 32        # a 32-bit literal is the high half of an f64
        return value & 0xFFFFFFFFFFFFFFFF
    return value & 0xFFFFFFFF


def f32_to_bf16_rne(x: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bits (uint32 in [0, 0xFFFF]), round to nearest even; NaN -> quiet NaN."""
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint32)
    nan = np.isnan(np.asarray(x, np.float32))
    return np.where(nan, (b >> 16).astype(np.uint32) | 0x40, r) & 0xFFFF


class Ctx:
    """Compile-time context handed to semantic compilers."""

    def __init__(self, program, index: int):
        self.program = program
        self.index = index

    @property
    def target(self) -> int | None:
        return self.program.targets.get(self.index)


# ---------------------------------------------------------------------------------------------
# Queue records (asynchronous memory)
# ---------------------------------------------------------------------------------------------
class Rec:
    __slots__ = ("inst", "counter", "waves", "seq", "pending", "land", "rregs", "sregs", "smem", "lds")

    def __init__(self, inst, counter, waves, seq, land, rregs, sregs, smem, lds):
        self.inst, self.counter, self.waves, self.seq = inst, counter, waves, seq
        self.pending = np.ones(len(waves), bool)
        self.land, self.rregs, self.sregs, self.smem, self.lds = land, rregs, sregs, smem, lds


# ---------------------------------------------------------------------------------------------
# The machine
# ---------------------------------------------------------------------------------------------
class Machine:
    def __init__(self, program, n_waves: int, wg_of_wave: np.ndarray, n_wg: int, lds_size: int, memory,
                 seed: int | None = None, check_inflight: bool = True, *, hazards="default", races="default",
                 strict="default", recorder=None, waive=()):
        if not program.insts:
            raise EmuError(f"kernel '{program.name}' has no instructions: there is nothing to run")
        self.program = program
        self.W = W = n_waves
        nr = register_rows(program)
        self.R = np.zeros((W, nr, 64), np.uint32)
        self.S = np.zeros((W, NS), np.uint32)
        self.pc = np.zeros(W, np.int64)
        self.status = np.zeros(W, np.int8)
        self.execm = np.zeros((W, 64), bool)
        self.vskip = np.zeros(W, bool)          # S_SETVSKIP: vector instructions are not issued
        self.gpr_idx_en = np.zeros(W, bool)     # MODE.gpr_idx_en (S_SET_GPR_IDX_ON/OFF)
        self.wg_of = np.asarray(wg_of_wave, np.int64)
        self.waves_in_wg = np.bincount(self.wg_of, minlength=n_wg)
        self.lds_size = lds_size
        self.LDS = np.zeros(n_wg * lds_size + 16, np.uint8)
        self.lds_busy = np.zeros(self.LDS.size, np.int32)   # >0: bytes an in-flight LDS-DMA will write
        self.mem = memory
        self.rng = np.random.default_rng(seed) if seed is not None else None
        self.check_inflight = check_inflight
        from .hazards import setup_fidelity
        setup_fidelity(self, hazards, races, strict, waive)  # dynamic hazards, LDS races, strict ISA errors
        if check_inflight not in (True, False, "land"):
            raise EmuError(f"check_inflight is True, False or 'land', not {check_inflight!r}")
        if check_inflight == "land":
            self.report.report_kinds = self.report.report_kinds | {"wait"}
        self.busyR = np.zeros((W, nr), np.int16)
        self.busyS = np.zeros((W, NS), np.int16)
        self.issued = {"vm": np.zeros(W, np.int64), "lgkm": np.zeros(W, np.int64)}
        self.queues: dict[str, list[Rec]] = {"vm": [], "lgkm": []}
        self.n_pending = 0
        self.n_lds_busy = 0
        self.group_all = True
        self.wave_instructions = 0
        self.steps = 0
        # Compiled closures depend only on the instruction: shared through the (cached) Program.
        self.ops = getattr(program, "compiled", None) or [None] * len(program.insts)
        self.meta = program.__dict__.setdefault("_meta", [None] * len(program.insts))
        self.ids_all = np.arange(W)
        self.observer = None      # optional: .before(m, p, w) / .after(m, p, w) around every step (trace, progress)
        # optional: recorder(m, p, w) before each step, while the operands are still unchanged
        # (flyasm.perf.trace records each wave's executed stream for the timing model)
        self.recorder = recorder

    # ---- compile ------------------------------------------------------------------------
    def op(self, i: int):
        fn = self.ops[i]
        if fn is None:
            inst = self.program.insts[i]
            comp = SEMANTICS.get(inst.name)
            if comp is None:
                raise not_emulated(inst)
            self.meta[i] = regsets(inst)
            ctx = Ctx(self.program, i)
            fn = comp(inst, ctx)
            for wrap in WRAPPERS:
                fn = wrap(self.program, inst, fn, ctx)
            self.ops[i] = fn
        return fn

    # ---- wave ids ------------------------------------------------------------------------
    def ids(self, w) -> np.ndarray:
        return self.ids_all if isinstance(w, slice) else w

    def nw(self, w) -> int:
        return self.W if isinstance(w, slice) else len(w)

    # ---- scalar registers ---------------------------------------------------------------
    def sread(self, w, idx: int, n: int = 1) -> np.ndarray:
        if n == 1:
            return self.S[w, idx].astype(np.uint64)
        return self.S[w, idx].astype(np.uint64) | (self.S[w, idx + 1].astype(np.uint64) << np.uint64(32))

    def swrite(self, w, idx: int, val, n: int = 1):
        val = np.asarray(val)
        if val.dtype != np.uint64:
            val = val.astype(np.int64).astype(np.uint64) if val.dtype.kind in "ib" else val.astype(np.uint64)
        self.S[w, idx] = (val & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        if n == 2:
            self.S[w, idx + 1] = (val >> np.uint64(32)).astype(np.uint32)
        if idx <= S_EXEC + 1 and idx + n > S_EXEC:
            self.refresh_exec(w)

    def refresh_exec(self, w):
        e = np.ascontiguousarray(self.S[w, S_EXEC:S_EXEC + 2])
        self.execm[w] = np.unpackbits(e.view(np.uint8), axis=1, bitorder="little").astype(bool)

    def scc(self, w) -> np.ndarray:
        return self.S[w, S_SCC]

    def set_scc(self, w, val):
        self.S[w, S_SCC] = np.asarray(val).astype(np.uint32) & 1

    @staticmethod
    def pack_mask(mask: np.ndarray) -> np.ndarray:
        """bool [n, 64] -> uint64 [n]."""
        return np.packbits(mask, axis=1, bitorder="little").view(np.uint64).reshape(-1)

    def lane_mask(self, w, idx: int) -> np.ndarray:
        """A 64-bit SGPR pair (vcc, s[2:3], exec) as bool [n, 64]."""
        e = np.ascontiguousarray(self.S[w, idx:idx + 2])
        return np.unpackbits(e.view(np.uint8), axis=1, bitorder="little").astype(bool)

    # ---- vector registers ---------------------------------------------------------------
    def vwrite(self, w, row: int, val, mask):
        if mask is None:
            self.R[w, row] = val
        else:
            self.R[w, row] = np.where(mask, val, self.R[w, row])

    # ---- asynchronous memory ------------------------------------------------------------
    def issue(self, w, inst, counter: str, land, rregs=(), sregs=(), smem=False, lds=None):
        """Queue an operation whose results land at a wait; rregs/sregs are the registers it will write."""
        waves = self.ids(w).copy()
        ctr = self.issued[counter]
        seq = ctr[waves].copy()
        ctr[waves] += 1
        rregs = np.asarray(rregs, np.int64)
        sregs = np.asarray(sregs, np.int64)
        if rregs.size:
            self.busyR[np.ix_(waves, rregs)] += 1
        if sregs.size:
            self.busyS[np.ix_(waves, sregs)] += 1
        if not self.check_inflight:
            lds = None                  # in-flight LDS-DMA bytes are tracked only to report reads of them
        if lds is not None:
            np.add.at(self.lds_busy, lds[1], 1)
            self.n_lds_busy += 1
        self.queues[counter].append(Rec(inst, counter, waves, seq, land, rregs, sregs, smem, lds))
        self.n_pending += 1
        # The hardware counter saturates: issue stalls until the oldest op returns.
        lim = LIMITS[counter]
        if (ctr[waves] - self.retired_floor(counter, waves) > lim).any():
            self.wait(w, **{counter: lim})

    def retired_floor(self, counter, waves):
        # Outstanding = pending records per wave; cheap upper bound: issued minus landed count.
        cnt = np.zeros(self.W, np.int64)
        for rec in self.queues[counter]:
            np.add.at(cnt, rec.waves[rec.pending], 1)
        return self.issued[counter][waves] - cnt[waves]

    def wait(self, w, vm=None, lgkm=None):
        ids = self.ids(w)
        for counter, n in (("vm", vm), ("lgkm", lgkm)):
            q = self.queues[counter]
            if n is None or not q:
                continue
            thresh = np.full(self.W, -1, np.int64)
            thresh[ids] = self.issued[counter][ids] - n
            ingroup = np.zeros(self.W, bool)
            ingroup[ids] = True
            keep = []
            for rec in q:
                if rec.smem:
                    sel = rec.pending & ingroup[rec.waves] if n == 0 else np.zeros(len(rec.waves), bool)
                else:
                    sel = rec.pending & (rec.seq < thresh[rec.waves])
                if sel.any():
                    self.retire(rec, sel)
                if rec.pending.any():
                    keep.append(rec)
                else:
                    self.n_pending -= 1
            self.queues[counter] = keep

    def retire(self, rec: Rec, sel: np.ndarray):
        if rec.land is not None:
            rec.land(self, sel)
        waves = rec.waves[sel]
        if rec.rregs.size:
            self.busyR[np.ix_(waves, rec.rregs)] -= 1
        if rec.sregs.size:
            self.busyS[np.ix_(waves, rec.sregs)] -= 1
        if rec.lds is not None:
            pos, flat = rec.lds
            np.subtract.at(self.lds_busy, flat[np.isin(pos, np.nonzero(sel)[0])], 1)
            if not (rec.pending & ~sel).any():
                self.n_lds_busy -= 1
        rec.pending &= ~sel

    def drain(self, w):
        self.wait(w, vm=0, lgkm=0)

    def check_regs(self, w, i: int):
        rr, ss = self.meta[i]
        bad = None
        if rr.size:
            b = self.busyR[:, rr] if isinstance(w, slice) else self.busyR[np.ix_(w, rr)]
            if b.any():
                wi, ri = np.argwhere(b)[0]
                bad = (self.ids(w)[wi], "R", rr[ri])
        if bad is None and ss.size:
            b = self.busyS[:, ss] if isinstance(w, slice) else self.busyS[np.ix_(w, ss)]
            if b.any():
                wi, si = np.argwhere(b)[0]
                bad = (self.ids(w)[wi], "S", ss[si])
        if bad is None:
            return
        wave, f, reg = bad
        name = (f"v{reg}" if reg < AOFF else f"a{reg - AOFF}") if f == "R" else \
            {S_VCC: "vcc_lo", S_VCC + 1: "vcc_hi", S_M0: "m0", S_EXEC: "exec_lo", S_EXEC + 1: "exec_hi"}.get(reg, f"s{reg}")
        producer = None
        for q in self.queues.values():
            for rec in q:
                k = np.nonzero(rec.waves == wave)[0]
                if k.size and rec.pending[k[0]] and reg in (rec.rregs if f == "R" else rec.sregs):
                    producer = rec
        inst = self.program.insts[i]
        prod = where(producer.inst) if producer else "an in-flight load"
        ctr = producer.counter + "cnt" if producer else "the counter"
        msg = (f"{where(inst)} uses {name} while {prod} will still write it (wave {wave}): "
               f"add s_waitcnt {ctr}(...) before it")
        if self.check_inflight != "land" or producer is None:
            raise EmuError(msg)
        # "land": the kernel relies on the load having returned by now (timing, not a counter);
        # these waves' ops of that counter up to the producer land here, and the report says so
        self.report.hit("wait", "inflight_read", inst, producer.inst, wave, int(self.wg_of[wave]), 1, msg)
        ids = self.ids(w)
        seq = np.full(self.W, -1, np.int64)
        for rec in self.queues[producer.counter]:
            if rec is producer:
                seq[rec.waves] = rec.seq
        lim = self.issued[producer.counter][ids] - 1 - seq[ids]
        for n in sorted(set(lim[seq[ids] >= 0].tolist())):
            self.wait(ids[(seq[ids] >= 0) & (lim == n)], **{producer.counter: n})
        self.check_regs(w, i)

    def check_lds(self, inst, flat: np.ndarray):
        if self.n_lds_busy and self.lds_busy[flat].any():
            prod = None
            for rec in self.queues["vm"]:
                if rec.lds is not None and np.isin(flat, rec.lds[1]).any():
                    prod = rec
            raise EmuError(f"{where(inst)} accesses LDS bytes that {where(prod.inst) if prod else 'an LDS-DMA load'} "
                           f"will still write: add s_waitcnt vmcnt(...) (and s_barrier across waves) before it")

    # ---- barriers and end ---------------------------------------------------------------
    def release_barriers(self):
        arrived = np.bincount(self.wg_of[self.status != RUN], minlength=len(self.waves_in_wg))
        full = arrived == self.waves_in_wg
        rel = (self.status == BAR) & full[self.wg_of]
        if rel.any():
            self.status[rel] = RUN
            self.pc[rel] += 1
            if self.races is not None:
                self.races.new_epoch(self.wg_of[rel])

    # ---- run ------------------------------------------------------------------------------
    def run(self, max_steps: int = 50_000_000):
        W = self.W
        all_w = slice(None)
        rng = self.rng
        ninst = len(self.ops)
        check = self.check_inflight
        while True:
            if self.group_all and rng is None:
                w, n = all_w, W
                p = int(self.pc[0])
            else:
                run_mask = self.status == RUN
                if not run_mask.any():
                    if (self.status == DONE).all():
                        break
                    stuck = np.nonzero(self.status == BAR)[0]
                    raise EmuError(f"deadlock: waves {stuck.tolist()} wait at s_barrier forever")
                live = np.nonzero(run_mask)[0]
                pcs = self.pc[live]
                p = int(pcs.min() if rng is None else rng.choice(pcs))
                ids = live[pcs == p]
                if rng is not None and len(ids) > 1:    # random interleaving: a random subset goes first
                    ids = np.sort(rng.permutation(ids)[:int(rng.integers(1, len(ids) + 1))])
                n = len(ids)
                if n == W:
                    w = all_w
                    self.group_all = rng is None
                else:
                    w = ids
                    self.group_all = False
            if p >= ninst:
                raise EmuError(f"a wave ran past the end of the kernel (last instruction "
                               f"'{self.program.insts[-1].text()}')")
            fn = self.ops[p] or self.op(p)
            if self.hz is not None:
                self.hz.step(w, p)
            if check and self.n_pending:
                self.check_regs(w, p)
            if self.recorder is not None:
                self.recorder(self, p, w)
            obs = self.observer
            if obs is not None:
                obs.before(self, p, w)
            if fn(self, w) is None:
                self.pc[w] += 1
            self.wave_instructions += n
            self.steps += 1
            if obs is not None:
                obs.after(self, p, w)
            if self.steps > max_steps:
                raise EmuError(f"stopped after {max_steps} steps (an endless loop?) at {where(self.program.insts[p])}")
        return self


# ---------------------------------------------------------------------------------------------
# Operand readers (compiled once per instruction)
# ---------------------------------------------------------------------------------------------
def base_of(op):
    return op.base if isinstance(op, Mod) else op


def vsrc(op, typ: str = "b32", n: int = 1):
    """Reader of a vector-instruction source: fn(m, w) -> uint32 [k,64] / [k,1] (uint64 for 2 dwords)."""
    op = base_of(op)
    if isinstance(op, Reg) and op.file in "va":
        r = r_index(op)
        if n == 2:
            return lambda m, w: m.R[w, r].astype(np.uint64) | (m.R[w, r + 1].astype(np.uint64) << np.uint64(32))
        return lambda m, w: m.R[w, r]
    if isinstance(op, (Reg, Special)):
        try:
            si = s_index(op)
        except KeyError:
            raise EmuError(f"not emulated: operand {op}") from None
        if n == 2:
            return lambda m, w: m.sread(w, si, 2)[:, None]
        return lambda m, w: m.S[w, si][:, None]
    if isinstance(op, Imm):
        c = imm_bits(op.value, typ if n == 1 else ("f64" if typ == "f64" else "b64"))
        arr = np.array([[c]], np.uint64 if n == 2 else np.uint32)
        return lambda m, w: arr
    raise EmuError(f"not emulated: operand {op!r}")


def ssrc(op, n: int = 1, typ: str = "b32"):
    """Reader of a scalar source: fn(m, w) -> uint64 [k]."""
    op = base_of(op)
    if isinstance(op, Imm):
        c = np.uint64(imm_bits(op.value, "b64" if n == 2 else typ))
        return lambda m, w: np.full(m.nw(w), c, np.uint64)
    si = s_index(op)
    return lambda m, w: m.sread(w, si, n)
