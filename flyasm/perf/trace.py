"""Record what each wave executed, for the timing model: the emulator calls a Recorder before
every step (Machine(recorder=...)), while the step's operands still hold their values.

Per executed wave-instruction it keeps: the instruction index (control flow is the sequence
itself: a taken branch is a jump in it), the EXEC popcount, and a cost fact for memory
instructions:
  * DS (LDS) ops: the cycles the LDS needs for the access, from the lane byte addresses: 64 banks of
    4 bytes (CDNA4 ISA §11.1, notes §1.3); the lanes are served in phases (PHASES) and a phase takes
    as many cycles as the most distinct dwords any one bank holds (lanes reading the same dword
    share it, a broadcast).
  * VMEM ops: bytes moved for the active lanes, the distinct 128-byte lines they touch, how many of
    those no earlier access of the workgroup touched ('fresh': what the CU's L1 cannot hold yet, so a
    load must fill it from the L2), and the allocation (buffer) they fall in, so the timing model can
    tell which stream a load belongs to.
The recorder only reads machine state; it costs nothing when absent (Machine.recorder is None).
"""
from __future__ import annotations

import numpy as np

from ..emu.machine import vsrc
from ..emu.memory import BASE
from ..emu.ops_memory import buffer_address, global_address

BANKS = 64        # LDS banks of 4 bytes on gfx950 (CDNA4 ISA §11.1: 64 banks x 640 dwords)
LINE = 128        # bytes of one memory transaction line (L2 cache line of CDNA3/4)
VERSION = 3       # of what a recorded stream holds (part of perf.capture's cache key): 2 = PHASES, 3 = fresh


def _lanes(*runs) -> list[int]:
    return [lane for a, b in runs for lane in range(a, b + 1)]


# Which lanes of a wave one LDS phase serves, measured on gfx950 (MI355X) by HipKittens' pairwise
# bank-conflict probes (HipKittens, arXiv 2511.08083; its analysis/paper_experiments/phases/*/
# phase_results.txt, seen in the fork thebard85kigz/hipkittens at 4561d0e1): (read or write, bytes
# per lane) -> the phases of lanes 0-31; lanes 32-63 repeat them 32 higher. ds_read_b128 is not
# served in runs of 16 lanes: two kernels with the same bytes per bank can differ by a 2-way
# conflict. Accesses not measured there take runs of 256 / bytes-per-lane lanes (64 banks x 4 B).
PHASES = {
    ("read", 16): [_lanes((0, 3), (12, 15), (20, 27)), _lanes((4, 11), (16, 19), (28, 31))],
    ("read", 12): [_lanes((0, 3), (20, 23)), _lanes((4, 7), (16, 19)), _lanes((8, 11), (28, 31)),
                   _lanes((12, 15), (24, 27))],
    ("read", 8): [_lanes((0, 31))],
    ("write", 8): [_lanes((0, 15)), _lanes((16, 31))],
}


def phase_of_lane(write: bool, nbytes: int) -> np.ndarray:
    """The LDS phase (0, 1, ...) each of a wave's 64 lanes is served in, for one access of nbytes per lane."""
    groups = PHASES.get(("write" if write else "read", nbytes))
    if groups is None:
        return np.arange(64) // max(1, BANKS // max(1, (nbytes + 3) // 4))
    out = np.empty(64, np.int64)
    for ph, lanes in enumerate(groups):
        out[lanes] = ph
        out[[lane + 32 for lane in lanes]] = ph + len(groups)
    return out


def ds_parts(inst) -> list[tuple[int, int]]:
    """(byte offset, bytes per lane) of each address a DS instruction's lanes access."""
    name, mods = inst.name, inst.modifiers
    if name.startswith(("ds_read2", "ds_write2")):
        esz = 8 if name.endswith("b64") else 4
        scale = esz * (64 if "st64" in name else 1)
        return [(mods.get("offset0", 0) * scale, esz), (mods.get("offset1", 0) * scale, esz)]
    if "_tr_" in name:
        return [(mods.get("offset", 0), 8)]
    width = {"b128": 16, "b96": 12, "b64": 8}
    for suf, nb in width.items():
        if name.endswith(suf):
            return [(mods.get("offset", 0), nb)]
    return [(mods.get("offset", 0), 4)]


def lds_cycles(addr: np.ndarray, exec_: np.ndarray, nbytes: int, phase: np.ndarray | None = None) -> np.ndarray:
    """LDS cycles per wave for one access of nbytes per lane at byte addresses addr [k, 64]; `phase`:
    each lane's phase (default phase_of_lane for a read)."""
    k = addr.shape[0]
    ndw = max(1, (nbytes + 3) // 4)
    phase = phase_of_lane(False, nbytes) if phase is None else phase
    nph = int(phase.max()) + 1
    dw = (addr.astype(np.int64) >> 2)[..., None] + np.arange(ndw)          # [k, 64, ndw] dword addresses
    act = np.broadcast_to(exec_.astype(bool)[..., None], dw.shape)
    group = np.broadcast_to((np.arange(k)[:, None] * nph + phase[None, :])[..., None],
                            dw.shape)                                        # (wave, phase) of each dword
    # distinct dwords per (wave, phase): lanes reading the same dword share it (a broadcast)
    u = np.unique((group[act] << 40) | (dw[act] & ((1 << 40) - 1)))
    per_bank = np.bincount((u >> 40) * BANKS + (u & ((1 << 40) - 1)) % BANKS, minlength=k * nph * BANKS)
    return per_bank.reshape(k, nph, BANKS).max(-1).sum(-1)


class Recorder:
    """Callable recorder(m, p, w) for Machine; `streams()` gives each wave's executed stream."""

    def __init__(self):
        self._p: list[int] = []
        self._ids: list[np.ndarray] = []
        self._exec: list[np.ndarray] = []
        self._cost: list[np.ndarray | None] = []
        self._lines: list[np.ndarray | None] = []
        self._buf: list[np.ndarray | None] = []
        self._fresh: list[np.ndarray | None] = []
        self._seen: dict[int, set] = {}         # workgroup -> the 128-byte lines its waves touched so far
        self._fn: dict[int, object] = {}
        self.program = None
        self.touched: set[int] = set()          # distinct 128-byte lines any sampled wave touched

    def _compile(self, inst):
        u = inst.unit
        if u == "DS" and inst.operand("addr") is not None:
            write = inst.name.startswith(("ds_write", "ds_store"))
            parts = [(off, nb, phase_of_lane(write, nb)) for off, nb in ds_parts(inst)]
            ga = vsrc(inst.operand("addr"))

            def ds(m, w, ex):
                a = np.broadcast_to(ga(m, w), (m.nw(w), 64)).astype(np.int64)
                return sum(lds_cycles(a + off, ex, nb, ph) for off, nb, ph in parts), None
            return ds
        if u in ("VMEM", "FLAT") and inst.info.get("mem"):
            nbytes = _vmem_bytes(inst)
            af = buffer_address(inst) if inst.name.startswith("buffer_") else global_address(inst)

            def vm(m, w, ex):
                addr, ok = af(m, w, nbytes)
                act = ex if ok is None else ex & (ok if ok.ndim == 2 else ok.any(-1))
                first = addr.astype(np.int64) // LINE
                last = (addr.astype(np.int64) + nbytes - 1) // LINE
                per = [np.unique(np.r_[first[i][act[i]], last[i][act[i]]]) for i in range(len(first))]
                nl = np.array([len(x) for x in per])
                fresh = np.zeros(len(per), np.int64)      # lines no earlier access of the workgroup touched
                for i, (x, g) in enumerate(zip(per, m.wg_of[m.ids(w)].tolist())):
                    seen = self._seen.setdefault(g, set())
                    new = set(x.tolist()) - seen
                    fresh[i] = len(new)
                    seen |= new
                return act.sum(1) * nbytes, (nl, first[act], _allocation(m, addr, act), fresh)
            return vm
        return None

    def __call__(self, m, p, w):
        if self.program is None:
            self.program = m.program
        fn = self._fn.get(p, 0)
        if fn == 0:
            fn = self._fn[p] = self._compile(m.program.insts[p])
        ids = m.ids(w).copy()
        ex = m.execm[w]
        self._p.append(p)
        self._ids.append(ids)
        self._exec.append(ex.sum(1).astype(np.int8))
        if fn is None:
            self._cost.append(None)
            self._lines.append(None)
            self._buf.append(None)
            self._fresh.append(None)
            return
        cost, lines = fn(m, w, ex)
        self._cost.append(np.asarray(cost, np.int64))
        if lines is not None:
            nl, touched, buf, fresh = lines
            self._lines.append(nl)
            self._buf.append(buf)
            self._fresh.append(fresh)
            self.touched.update(np.unique(touched).tolist())
        else:
            self._lines.append(None)
            self._buf.append(None)
            self._fresh.append(None)

    def streams(self) -> list[dict]:
        """Per wave (in wave-id order): {'pc': instruction indices, 'exec': popcounts, 'cost': DS cycles
        or VMEM bytes (0 elsewhere), 'lines': VMEM 128-byte lines (0 elsewhere), 'fresh': those of them no
        earlier access of the workgroup touched (what the caches cannot already hold), 'buf': the index in
        the emulator's memory.allocs of the allocation a VMEM access falls in (-1 elsewhere)}."""
        if not self._p:
            return []
        n = np.array([len(i) for i in self._ids])
        wave = np.concatenate(self._ids)
        p = np.repeat(np.array(self._p, np.int32), n)
        ex = np.concatenate(self._exec)
        cost = np.concatenate([c if c is not None else np.zeros(k, np.int64) for c, k in zip(self._cost, n)])
        lines = np.concatenate([c if c is not None else np.zeros(k, np.int64) for c, k in zip(self._lines, n)])
        buf = np.concatenate([c if c is not None else np.full(k, -1, np.int16) for c, k in zip(self._buf, n)])
        fresh = np.concatenate([c if c is not None else np.zeros(k, np.int64) for c, k in zip(self._fresh, n)])
        order = np.argsort(wave, kind="stable")
        wave, p, ex, cost, lines, buf = wave[order], p[order], ex[order], cost[order], lines[order], buf[order]
        fresh = fresh[order]
        cuts = np.flatnonzero(np.diff(wave)) + 1
        out = []
        for a, b in zip(np.r_[0, cuts], np.r_[cuts, len(wave)]):
            out.append({"wave": int(wave[a]), "pc": p[a:b], "exec": ex[a:b], "cost": cost[a:b], "lines": lines[a:b],
                        "buf": buf[a:b], "fresh": fresh[a:b]})
        return out


def _allocation(m, addr: np.ndarray, act: np.ndarray) -> np.ndarray:
    """Per wave: the index in m.mem.allocs of the allocation holding its first active lane's address
    (-1: no active lane, or outside every allocation)."""
    first = np.where(act.any(1), addr.astype(np.int64)[np.arange(len(act)), act.argmax(1)], -1)
    starts = getattr(m.mem, "_starts", None)
    if starts is None or not len(starts):
        return np.full(len(act), -1, np.int16)
    off = first - BASE
    k = np.searchsorted(starts, off, side="right") - 1
    ok = (first >= 0) & (k >= 0) & (off < m.mem._ends[np.maximum(k, 0)])
    return np.where(ok, k, -1).astype(np.int16)


def _vmem_bytes(inst) -> int:
    """Bytes per lane of a VMEM/FLAT access, from its mnemonic."""
    name = inst.name
    for suf, nb in (("dwordx4", 16), ("dwordx3", 12), ("dwordx2", 8), ("dword", 4), ("ubyte", 1), ("sbyte", 1),
                    ("ushort", 2), ("sshort", 2), ("short", 2), ("byte", 1), ("b128", 16), ("b96", 12),
                    ("b64", 8), ("b32", 4), ("u16", 2), ("b16", 2), ("u8", 1), ("i8", 1), ("x2", 8)):
        if suf in name:
            return nb
    return 4


def loop_head(pc: np.ndarray) -> tuple[int | None, np.ndarray]:
    """(the hottest loop's head: the instruction index most often entered by a backward jump, or None
    without one; the stream positions entered by a backward jump)."""
    back = np.flatnonzero(pc[1:] <= pc[:-1]) + 1
    if not back.size:
        return None, back
    heads, counts = np.unique(pc[back], return_counts=True)
    return int(heads[counts.argmax()]), back


def scale_loops(stream: dict, factor: float, work=None) -> dict:
    """The stream a larger problem of the same kernel would execute: the hottest loop (the most
    frequent backward-branch target) gets more iterations, each a copy of one of its recorded middle
    iterations (their cost facts repeat: same instructions, same access shapes). Prologue, epilogue
    and other loops stay as recorded. factor >= 1.

    `factor` is the ratio of the problem's work (K / recorded K, seqlen / recorded seqlen). Without
    `work`, every run of the loop gets round(iterations x factor) iterations. With `work` (per
    instruction index, e.g. MFMA pipe cycles) the stream's total work grows by the factor instead:
    software-pipelined kernels peel iterations into prologue and epilogue (the recorded fp8 GEMM runs
    8 K-steps with only 4 in its loop), so multiplying the loop's iterations would under-count.
    Runs of the loop share the added iterations in proportion to their recorded iterations.
    Whole iterations are added, so the work grows by about the factor, not exactly: a caller that
    needs the exact growth measures it (stream_work) rather than assuming it."""
    pc = stream["pc"]
    if factor <= 1 or len(pc) < 3:
        return stream
    head, back = loop_head(pc)
    if head is None:
        return stream
    starts = back[pc[back] == head]                          # iteration starts (after the first)
    # runs: consecutive iteration starts with no visit outside the loop's pc span in between
    tail = int(pc[starts - 1].max())
    runs, run = [], [starts[0]]
    for s in list(starts[1:]) + [None]:
        if s is not None and np.all((pc[run[-1]:s] >= head) & (pc[run[-1]:s] <= tail)):
            run.append(s)
            continue
        runs.append(run)
        if s is not None:
            run = [s]
    spans = []                                               # per run: the repeated iteration [a, b)
    for run in runs:
        if len(run) >= 2:                                    # a whole middle iteration
            spans.append((run[len(run) // 2 - 1], run[len(run) // 2]))
        else:                                                # the last iteration: head .. its exit branch
            a = run[0]
            out_of = np.flatnonzero((pc[a:] < head) | (pc[a:] > tail))
            spans.append((a, a + int(out_of[0]) if out_of.size else len(pc)))
    iters = np.array([len(r) + 1 for r in runs], float)     # the first iteration was entered by fall-through
    w_it = None
    if work is not None:
        w = np.asarray(work, float)[pc]
        w_it = np.array([w[a:b].sum() for a, b in spans])
    if w_it is not None and np.all(w_it > 0):
        extra_work = w.sum() * (factor - 1) * iters / iters.sum()
        extras = [int(round(e / wi)) for e, wi in zip(extra_work, w_it)]
    else:
        extras = [int(round(n * factor)) - int(n) for n in iters]
    pieces, last = [], 0
    for (a, b), extra in zip(spans, extras):
        if extra > 0:
            pieces.append(slice(last, b))
            pieces.extend([slice(a, b)] * extra)
            last = b
    pieces.append(slice(last, len(pc)))
    out = dict(stream)
    for key in ("pc", "exec", "cost", "lines", "buf", "fresh"):
        if key in stream:
            out[key] = np.concatenate([stream[key][sl] for sl in pieces])
    return out


def stream_work(stream: dict, work) -> float:
    """The work (per instruction index, e.g. MFMA pipe cycles) a stream executes."""
    return float(np.asarray(work, float)[stream["pc"]].sum())
