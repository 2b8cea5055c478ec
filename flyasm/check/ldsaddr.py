"""LDS address ranges from a value analysis of the registers that form them.

Each register holds, per thread of the workgroup, a 32-bit value: an int64 array over the T
threads (an SGPR is the same value in every lane of a wave). Workitem ids are known from the
block shape (v0 packs x | y << 10 | z << 20 on gfx90a+, notes §5); kernel arguments, workgroup ids
and loaded data are unknown. A register may hold up to CAP alternative arrays (`s_cselect`, values
swapped each loop iteration, control-flow joins); more than that, or any operation the analysis
does not model, makes it unknown. The fixed point over the CFG joins alternatives, and the cap is
the widening, so loops terminate. SCC is tracked through `s_cmp_*`: a known SCC picks the
`s_cselect` value, and an `s_cbranch_scc*` on it splits the waves between its two edges, so a
branch on the wave id (each wave picking its own M0, say) joins wave by wave into one exact value,
and an access only some waves can reach has no bytes in the others (warp-specialised kernels).

From those values:
* an LDS-DMA (`buffer_load_* lds`, `global_load_lds_*`) writes, for each lane L,
  M0[17:0] + inst_offset + L*size (notes §3.3; size 16 for dwordx3/x4, else 4);
* a `ds_*` op touches addr + offset (+ offset0/offset1 scaled for read2/write2), modulo 2^32.

`relation(a, b, waves)` compares two footprints wave by wave (`waves="same"`: the checker's
per-wave counters), any wave against any wave ("any": author tags), or each wave against the
*other* waves ("other": a barrier orders waves, while one wave's own DS accesses execute in order
-- AMDGPUUsage, memory model GFX942: lgkmcnt(0) is needed "between wavefronts of a work-group, but
not between operations performed by the same wavefront") and answers "disjoint" (proven), "overlap" (known ranges meet) or "unknown" (a range is not known,
or only some of the alternatives meet).

Bound: the fixed point runs blocks in reverse postorder (a heap of ranks), a block again only
when its entry changes. A join keeps both sides' alternatives up to CAP and then forgets the
register (the widening), and a path's wave mask only gains waves, so an entry can change
O(registers × CAP) times; the per-wave merge after a branch on the wave id is not a plain union
and has no counter of its own -- measured on aiter's sample (80 objects): at most 6 runs of one
block. A step is O(threads × CAP²) array work on the registers that can reach an LDS address
(the others are only forgotten). relation(a, b) is O(CAP² × threads log threads) once per pair
asked (cached); the checker asks it once per (in-flight write, access) pair it reports on, or
per reader after a barrier.
"""
from __future__ import annotations

import heapq
import re
from functools import cached_property

import numpy as np

from ..isa.instruction import Instruction
from ..isa.operands import Imm, Reg, Special
from .cfg import CFG, build_cfg, is_label

CAP = 4              # alternatives per register before it becomes unknown (the widening)
WAVE = 64
M32 = 0xFFFFFFFF
M0 = ("spec", "m0")
EXEC = ("spec", "exec")
SCC = ("spec", "scc")
ROW = 1 << 36        # Footprint.flat: the shift between two waves' intervals, above any byte address
LIVE = "live"        # env key: per thread, whether its wave can be on this path (absent: every wave)


def _u(x):
    return x & M32


def _s24(x):
    x = x & 0xFFFFFF
    return np.where(x & 0x800000, x - (1 << 24), x)


def _sh(x):
    return x & 31


# name -> (function of the source arrays). Shifts use the low 5 bits of the amount, as hardware does.
ALU = {
    "s_mov_b32": lambda a: a, "s_movk_i32": lambda a: a, "v_mov_b32": lambda a: a,
    "s_add_u32": lambda a, b: a + b, "s_add_i32": lambda a, b: a + b,
    "s_sub_u32": lambda a, b: a - b, "s_sub_i32": lambda a, b: a - b,
    "s_mul_i32": lambda a, b: a * b, "s_addk_i32": None, "s_mulk_i32": None,
    "s_lshl_b32": lambda a, b: a << _sh(b), "s_lshr_b32": lambda a, b: a >> _sh(b),
    "s_and_b32": lambda a, b: a & b, "s_or_b32": lambda a, b: a | b, "s_xor_b32": lambda a, b: a ^ b,
    "s_lshl1_add_u32": lambda a, b: (a << 1) + b, "s_lshl2_add_u32": lambda a, b: (a << 2) + b,
    "s_lshl3_add_u32": lambda a, b: (a << 3) + b, "s_lshl4_add_u32": lambda a, b: (a << 4) + b,
    "s_min_u32": np.minimum, "s_max_u32": np.maximum,
    "v_add_u32": lambda a, b: a + b, "v_add_co_u32": lambda a, b: a + b,
    "v_sub_u32": lambda a, b: a - b, "v_sub_co_u32": lambda a, b: a - b,
    "v_subrev_u32": lambda a, b: b - a, "v_subrev_co_u32": lambda a, b: b - a,
    "v_mul_lo_u32": lambda a, b: a * b, "v_mul_u32_u24": lambda a, b: (a & 0xFFFFFF) * (b & 0xFFFFFF),
    "v_mul_i32_i24": lambda a, b: _s24(a) * _s24(b),
    "v_lshlrev_b32": lambda a, b: b << _sh(a), "v_lshrrev_b32": lambda a, b: b >> _sh(a),
    "v_and_b32": lambda a, b: a & b, "v_or_b32": lambda a, b: a | b, "v_xor_b32": lambda a, b: a ^ b,
    "v_min_u32": np.minimum, "v_max_u32": np.maximum,
    "v_lshl_add_u32": lambda a, b, c: _u(a << _sh(b)) + c, "v_add_lshl_u32": lambda a, b, c: _u(a + b) << _sh(c),
    "v_lshl_or_b32": lambda a, b, c: _u(a << _sh(b)) | c, "v_and_or_b32": lambda a, b, c: (a & b) | c,
    "v_or3_b32": lambda a, b, c: a | b | c, "v_add3_u32": lambda a, b, c: a + b + c,
    "v_bfe_u32": lambda a, b, c: (a >> _sh(b)) & ((1 << (c & 31)) - 1),
    "v_mad_u32_u24": lambda a, b, c: (a & 0xFFFFFF) * (b & 0xFFFFFF) + c,
}
ALU = {k: v for k, v in ALU.items() if v is not None}


def _signed(x):
    x = x & M32
    return np.where(x & 0x80000000, x - (1 << 32), x)


_CMP = {"eq": np.equal, "lg": np.not_equal, "gt": np.greater, "ge": np.greater_equal,
        "lt": np.less, "le": np.less_equal}
# s_cmp_<op>_<u32|i32> -> SCC as 0/1; the signed forms compare sign-extended values
SCMP = {f"s_cmp_{op}_{t}": (lambda f, sg: lambda a, b: f(_signed(a), _signed(b)) if sg else f(a, b))(f, t == "i32")
        for op, f in _CMP.items() for t in ("u32", "i32")}
_SOPK = {"s_addk_i32": lambda d, k: d + k, "s_mulk_i32": lambda d, k: d * k}
_SIZE = re.compile(r"_[bui](8|16|32|64|96|128)")


def ds_parts(i: Instruction) -> list[tuple[int, int]] | None:
    """(byte offset, bytes) of each per-lane access of a DS op, or None if not an LDS access."""
    if i.unit != "DS" or i.info.get("mem") not in ("load", "store", "atomic") or i.modifiers.get("gds"):
        return None
    m = _SIZE.search(i.name)
    size = int(m.group(1)) // 8 if m else 4
    mods = i.modifiers
    if "ds_read2" in i.name or "ds_write2" in i.name:
        scale = size * (64 if "st64" in i.name else 1)
        return [(mods.get("offset0", 0) * scale, size), (mods.get("offset1", 0) * scale, size)]
    return [(mods.get("offset", 0), size)]


def dma_step(i: Instruction) -> tuple[int, int]:
    """(lane stride, bytes per lane) of an LDS-DMA (notes §3.3)."""
    m = re.search(r"dwordx(\d)", i.name)
    n = int(m.group(1)) * 4 if m else (1 if re.search(r"byte", i.name) else 2 if "short" in i.name else 4)
    return (16 if n > 4 else 4), n


class Footprint:
    """The byte intervals [start, end) each wave touches, per alternative: `raw` (starts, ends),
    shape (waves, intervals), an empty interval being [-1, -1). Most pairs are told apart by
    their boxes; the sorted form is made only for a pair whose boxes meet."""

    def __init__(self, raw: list[tuple[np.ndarray, np.ndarray]]):
        self.raw = raw
        # per alternative, the first and one past the last byte any wave touches (None: none), a
        # test in plain ints that tells most pairs apart (the two buffers of a pipeline)
        self.box = []
        for s, e in raw:
            live = s >= 0
            self.box.append((int(s[live].min()), int(e[live].max())) if live.any() else None)
        self._union = None

    @cached_property
    def alts(self) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Per alternative: (starts, ends, running max of ends), each row sorted by start."""
        return [_sorted(s, e) for s, e in self.raw]

    @cached_property
    def flat(self) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Per alternative, the sorted rows laid end to end, row w shifted by w * ROW: one sorted
        array that a single searchsorted answers for every wave at once (see _meet)."""
        out = []
        for s, e, m in self.alts:
            shift = np.arange(s.shape[0], dtype=np.int64)[:, None] * ROW
            out.append(((s + shift).ravel(), (e + shift).ravel(), (m + shift).ravel()))
        return out

    def without(self, ranges) -> "Footprint":
        """The same accesses less the intervals that lie inside one of ranges ([lo, hi) bytes);
        a removed interval becomes the empty [-1, -1), which meets nothing."""
        raw = []
        for s, e in self.raw:
            drop = np.zeros(s.shape, bool)
            for lo, hi in ranges:
                drop |= (s >= lo) & (e <= hi)
            raw.append((np.where(drop, -1, s), np.where(drop, -1, e)))
        return Footprint(raw)

    def union_waves(self) -> "Footprint":
        if self._union is None:
            self._union = Footprint([(s.reshape(1, -1), e.reshape(1, -1)) for s, e in self.raw])
        return self._union


def _sorted(starts, ends):
    o = np.argsort(starts, axis=1, kind="stable")
    s, e = np.take_along_axis(starts, o, 1), np.take_along_axis(ends, o, 1)
    return s, e, np.maximum.accumulate(e, axis=1)


def _meet(a, b) -> bool:
    """Does any interval of a meet any interval of b in the same row (wave)? a, b: Footprint.flat
    entries. For each interval of b, the intervals of a starting before its end (up to index k)
    must reach past its start. Rows are ROW apart and every byte lies in [-1, 2^33), so an
    index k that falls in an earlier row gives an end below the start: no false meeting."""
    (s1, _, m1), (s2, e2, _) = a, b
    k = np.searchsorted(s1, e2, side="left") - 1
    ok = k >= 0
    return bool(np.any(m1[k[ok]] > s2[ok]))


def _meet_other_waves(a, b) -> bool:
    """Does an interval of some wave w in a (starts, ends per wave) meet an interval of a wave
    other than w in b?"""
    (sa, ea), (sb, eb) = a, b
    for w in range(sa.shape[0]):
        rest = np.arange(sb.shape[0]) != w
        s2, e2 = sb[rest].ravel(), eb[rest].ravel()
        o = np.argsort(s2, kind="stable")
        s2, m2 = s2[o], np.maximum.accumulate(e2[o])
        # as in _meet: the other waves' intervals starting before each end must reach past its start
        # (an empty [-1, -1) interval starts before nothing and ends before every start)
        k = np.searchsorted(s2, ea[w], side="left") - 1
        ok = k >= 0
        if np.any(m2[k[ok]] > sa[w][ok]):
            return True
    return False


class LdsAddressAnalysis:
    def __init__(self, items: list, block=None, cfg: CFG | None = None, scratch=()):
        self.items = items
        self.scratch = tuple(scratch)     # [lo, hi) byte ranges declared a DMA dump (Kernel.lds_scratch)
        self.cfg = cfg or build_cfg(items)
        self.block = (block, 1, 1) if isinstance(block, int) else (tuple(block) + (1, 1))[:3] if block else None
        self.foot: dict[int, Footprint | None] = {}
        self._addr: dict[int, tuple | None] = {}        # item -> per-thread start alternatives
        self._live: dict[int, np.ndarray] = {}          # item -> waves that can reach it (absent: all)
        self._rel: dict[tuple, str] = {}
        self._described: dict[int, str] = {}
        self.watched = self._watch = {i for i, it in enumerate(items) if not is_label(it) and (it.is_lds_dma or ds_parts(it))}
        if self.block is None:
            self.threads = 0
            self._addr = {i: None for i in self._watch}
            return
        bx, by, bz = self.block
        self.threads = bx * by * bz
        t = np.arange(self.threads, dtype=np.int64)
        self.lane = t % WAVE
        self.waves = (self.threads + WAVE - 1) // WAVE
        self._consts: dict = {}
        v0 = (t % bx) | ((t // bx % by) << 10) | ((t // (bx * by)) << 20)
        self._run({("v", 0): (v0,)})

    # ---- values -------------------------------------------------------------------------------
    def _const(self, x):
        return (np.full(self.threads, x & M32, np.int64),)

    def _val(self, env, op):
        key = self._src(op)
        return None if key is None else self._get(env, key)

    def _first_lane(self, vals):
        return tuple(np.repeat(v[::WAVE], WAVE)[:self.threads] for v in vals)

    def _combine(self, fn, args):
        out = [()]
        for a in args:
            out = [p + (x,) for p in out for x in a]
            if len(out) > CAP * CAP:
                return None
        return _dedupe([_u(fn(*p)) for p in out])

    def _compile(self, ins: Instruction):
        """What _step needs of an instruction, worked out once: (kind, dest key, sources, writes)."""
        name = ins.name
        srcs = tuple(self._src(op) for op, sl in zip(ins.operands, ins.slots)
                     if "r" in sl.get("access", "r") and sl["name"] not in ("sdst", "vdst"))
        dst = ins.operands[0] if ins.operands else None
        dkey = (dst.file, dst.index) if isinstance(dst, Reg) and dst.count == 1 else (
            M0 if isinstance(dst, Special) and dst.name == "m0" else None)
        kind = None
        if name in SCMP and None not in srcs:
            return name, SCC, srcs, (SCC,), None
        if dkey is not None and not ins.modifiers.get("clamp") and None not in srcs:
            if name == "s_cselect_b32" or name in _SOPK or name == "v_readfirstlane_b32" or name in ALU:
                kind = name
            elif name in ("v_mbcnt_lo_u32_b32", "v_mbcnt_hi_u32_b32") and srcs and srcs[0] == ("imm", M32):
                kind = name
        exec_full = None
        if EXEC in ins.writes:
            exec_full = name == "s_mov_b64" and isinstance(ins.operands[1], Imm) and ins.operands[1].value == -1
        return kind, dkey, srcs, tuple(r for r in ins.writes if r[0] != "spec" or r in (M0, EXEC, SCC)), exec_full

    def _src(self, op):
        if isinstance(op, Imm) and isinstance(op.value, int):
            return ("imm", op.value & M32)
        if isinstance(op, Reg) and op.count == 1:
            return (op.file, op.index)
        if isinstance(op, Special) and op.name == "m0":
            return M0
        return None

    def _get(self, env, key):
        if key[0] == "imm":
            c = self._consts.get(key[1])
            if c is None:
                c = self._consts[key[1]] = self._const(key[1])
            return c
        return env.get(key)

    def _step(self, env: dict, code) -> None:
        kind, dkey, srcs, writes, exec_full = code
        val = None
        if kind is not None:
            args = [self._get(env, k) for k in srcs]
            if None in args:
                pass
            elif kind == "s_cselect_b32":
                scc = env.get(SCC)
                val = (self._combine(lambda c, a, b: np.where(c != 0, a, b), [scc] + args) if scc
                       else _dedupe(list(args[0]) + list(args[1])))
            elif kind in SCMP:
                val = self._combine(SCMP[kind], args)
            elif kind in _SOPK:
                d = env.get(dkey)
                val = self._combine(_SOPK[kind], [d, args[-1]]) if d else None
            elif kind == "v_readfirstlane_b32":
                val = self._first_lane(args[0])
            elif kind.startswith("v_mbcnt"):
                below = np.minimum(self.lane, 32) if kind.endswith("lo_u32_b32") else np.maximum(self.lane - 32, 0)
                val = tuple(_u(below + x) for x in args[1])
            else:
                val = self._combine(ALU[kind], args)
            if val is not None and dkey[0] == "v" and not env.get("exec_full", True):
                val = None            # lanes outside EXEC keep their old values: not modelled
        for r in writes:
            env.pop(r, None)
        if val is not None:
            env[dkey] = val
        if exec_full is not None:
            env["exec_full"] = exec_full

    def _run(self, init: dict) -> None:
        cfg, items = self.cfg, self.items
        if not cfg.blocks:
            return
        codes = cfg.per_text(self._compile)     # unrolled code repeats its instructions: each text once
        steps = self._block_steps(codes, set(init))
        entry = {0: dict(init)}
        rank = cfg.rpo
        work, queued = [(rank[0], 0)], {0}
        while work:
            bid = heapq.heappop(work)[1]
            queued.discard(bid)
            env = dict(entry[bid])
            for _, code in steps[bid]:
                self._step(env, code)
            for s, out in self._edges(bid, env):
                new = _join(entry[s], out) if s in entry else out
                if s not in entry or not _same(new, entry[s]):
                    entry[s] = new
                    if s not in queued:
                        queued.add(s)
                        heapq.heappush(work, (rank[s], s))
        for bid, env in entry.items():
            env = dict(env)
            for i, code in steps[bid]:
                if i in self._watch:
                    self._addr[i] = self._starts(env, items[i])
                    if env.get(LIVE) is not None:
                        self._live[i] = env[LIVE]
                self._step(env, code)

    def _block_steps(self, codes: dict, init_keys: set) -> dict[int, list]:
        """Per block, the (item index, code) steps the fixed point takes. Values are computed only
        where they can reach an LDS address (M0, a DS address VGPR) or SCC, directly or through
        other computed registers: any other result is only forgotten, as it can never feed an
        address, while the fixed point no longer carries (nor goes round again on) data values
        such as loop counters. A run of instructions that then compute nothing and access no LDS
        is one step (index None) forgetting what they write, with the last EXEC verdict."""
        wanted = {M0, SCC} | {self._src(self.items[i].operand("addr")) for i in self._watch
                              if not self.items[i].is_lds_dma}
        computing = {c for c in set(codes.values()) if c[0] is not None}
        grew = True
        while grew:
            grew = False
            for kind, dkey, srcs, _, _ in computing:
                if dkey in wanted and not wanted.issuperset(srcs):
                    wanted.update(srcs)
                    grew = True
        dropped = {c: (None,) + c[1:] for c in computing if c[1] not in wanted}
        held = wanted | init_keys            # the only registers an env can hold
        out = {}
        for b in self.cfg.blocks:
            seq, kills, exec_full = [], set(), None
            for i in b.insts:
                code = dropped.get(codes[i], codes[i])
                if code[0] is None and i not in self._watch:
                    kills.update(r for r in code[3] if r in held)
                    exec_full = code[4] if code[4] is not None else exec_full
                    continue
                if kills or exec_full is not None:
                    seq.append((None, (None, None, (), tuple(kills), exec_full)))
                    kills, exec_full = set(), None
                seq.append((i, code))
            if kills or exec_full is not None:
                seq.append((None, (None, None, (), tuple(kills), exec_full)))
            out[b.id] = seq
        return out

    def _edges(self, bid: int, env: dict):
        """(successor, env on that edge). A conditional branch on an SCC known per wave splits the
        waves: each edge carries only the waves that take it, so a join can merge per wave."""
        b = self.cfg.blocks[bid]
        last = self.items[b.insts[-1]] if b.insts else None
        scc = env.get(SCC)
        if (last is None or last.name not in ("s_cbranch_scc0", "s_cbranch_scc1") or scc is None
                or len(scc) != 1 or len(b.succs) != 2):
            return [(s, env) for s in b.succs]
        taken = (scc[0] != 0) if last.name == "s_cbranch_scc1" else (scc[0] == 0)
        live = env.get(LIVE, np.ones(self.threads, bool))
        out = []
        for s, m in zip(b.succs, (taken, ~taken)):       # succs: [branch target, fallthrough]
            e = dict(env)
            e[LIVE] = live & m
            out.append((s, e))
        return out

    # ---- footprints ----------------------------------------------------------------------------
    def _starts(self, env, ins: Instruction) -> tuple | None:
        """Per-thread first byte of the access, one array per alternative (None: unknown)."""
        if ins.is_lds_dma:
            m0 = env.get(M0)
            if m0 is None:
                return None
            step, _ = dma_step(ins)
            off = ins.modifiers.get("offset", 0)
            return tuple((m & 0x3FFFF) + off + self.lane * step for m in m0)
        return self._val(env, ins.operand("addr"))

    def starts(self, i: int) -> tuple | None:
        """Per-thread first byte item i accesses, one int64 array per alternative (None: unknown)."""
        return self._addr.get(i)

    def footprint(self, i: int) -> Footprint | None:
        if i not in self.foot:
            starts, ins = self._addr.get(i), self.items[i]
            if starts is None:
                self.foot[i] = None
            else:
                parts = [(0, dma_step(ins)[1])] if ins.is_lds_dma else ds_parts(ins)
                pad = self.waves * WAVE - self.threads
                # A wave that no path brings here (a branch on its wave id went the other way)
                # touches nothing through it: its intervals become the empty [-1, -1).
                live = self._live.get(i)
                dead = None if live is None else ~live[::WAVE][:, None]
                alts = []
                for st in starts:
                    st = np.concatenate([st, np.repeat(st[-1:], pad)]).reshape(self.waves, WAVE)
                    ss = np.concatenate([_u(st + o) for o, _ in parts], axis=1)
                    ee = np.concatenate([_u(st + o) + n for o, n in parts], axis=1)
                    if dead is not None:
                        ss, ee = np.where(dead, -1, ss), np.where(dead, -1, ee)
                    alts.append((ss, ee))
                self.foot[i] = Footprint(alts)
        return self.foot[i]

    def relation(self, a: int, b: int, waves: str = "same", past_scratch: bool = False) -> str:
        """'disjoint', 'overlap' or 'unknown' for the LDS bytes of items a and b, compared within
        each wave, across "any" two waves, or each wave against the "other" waves (past_scratch:
        leaving out the declared scratch bytes)."""
        if waves not in ("same", "any", "other"):
            raise ValueError(f"waves is 'same', 'any' or 'other', not {waves!r}")
        key = (a, b, waves, past_scratch)
        if key not in self._rel:
            self._rel[key] = self._relation(a, b, waves, past_scratch)
        return self._rel[key]

    def _relation(self, a, b, waves, past_scratch=False) -> str:
        fa, fb = self.footprint(a), self.footprint(b)
        if fa is None or fb is None:
            return "unknown"
        if past_scratch and self.scratch:
            fa, fb = fa.without(self.scratch), fb.without(self.scratch)
        near = [(x, y) for x, ba in enumerate(fa.box) for y, bb in enumerate(fb.box)
                if ba is not None and bb is not None and ba[0] < bb[1] and bb[0] < ba[1]]
        if not near:
            return "disjoint"
        ua, ub = (fa, fb) if waves == "same" else (fa.union_waves(), fb.union_waves())
        near = [(x, y) for x, y in near if _meet(ua.flat[x], ub.flat[y])]
        if waves == "other":        # only the pairs that meet across waves (rare: checked last)
            near = [(x, y) for x, y in near if _meet_other_waves(fa.raw[x], fb.raw[y])]
        if not near:
            return "disjoint"
        return "overlap" if len(fa.raw) * len(fb.raw) == 1 else "unknown"

    def touches_scratch(self, i: int) -> tuple[int, int] | None:
        """The first declared scratch range that item i's proven bytes meet (None: none, or unknown)."""
        f = self.footprint(i)
        if f is None:
            return None
        for lo, hi in self.scratch:
            if any(np.any((s < hi) & (e > lo)) for s, e in f.raw):
                return lo, hi
        return None

    def described(self, i: int) -> str:
        """A short text of the proven byte range of item i (for messages)."""
        if i not in self._described:
            self._described[i] = self._describe(i)
        return self._described[i]

    def _describe(self, i: int) -> str:
        f = self.footprint(i)
        if f is None:
            return "unknown range"
        real = [(s[s >= 0], e[s >= 0]) for s, e in f.raw if (s >= 0).any()]   # -1: no access
        if not real:
            return "no bytes"
        lo = min(int(s.min()) for s, _ in real)
        hi = max(int(e.max()) for _, e in real)
        return f"bytes [0x{lo:x}, 0x{hi:x})"


def _dedupe(vals) -> tuple | None:
    out, seen = [], set()
    for v in vals:
        k = v.tobytes()
        if k not in seen:
            seen.add(k)
            out.append(v)
    return tuple(out) if len(out) <= CAP else None


def _join(a: dict, b: dict) -> dict:
    """The state where two paths meet. Where the paths carry wave masks (`_edges`), a value that
    agrees on the waves both may bring is merged per wave -- the value of the path each wave took;
    otherwise the alternatives of both sides are kept."""
    out = {}
    la, lb = a.get(LIVE), b.get(LIVE)
    if (la is None) != (lb is None):             # no mask: every wave
        la, lb = (np.ones_like(lb) if la is None else la), (np.ones_like(la) if lb is None else lb)
    split = la is not None and not (la & lb).all()   # all waves on both paths: only alternatives
    live = la | lb if la is not None else None
    # lanes of waves on neither path hold whatever their dead arms computed: zero them, or a loop
    # would keep changing them and the fixed point never settle
    dead = None if live is None or live.all() else ~live
    for k, va in a.items():
        vb = b.get(k)
        if vb is None or k == LIVE:
            continue
        if va is vb:
            out[k] = va
            continue
        if k == "exec_full":
            out[k] = va and vb
            continue
        j = _per_wave(va, vb, la, lb) if split else None
        if j is None:
            j = _dedupe(list(va) + list(vb))
        if j is not None and dead is not None:
            j = _dedupe([np.where(dead, 0, x) for x in j])
        if j is not None:
            out[k] = j
    if "exec_full" not in out:
        out["exec_full"] = a.get("exec_full", True) and b.get("exec_full", True)
    if live is not None:
        out[LIVE] = live
    return out


def _per_wave(va, vb, la, lb) -> tuple | None:
    """Every pairing of an alternative of each side, each wave taking its own path's value; None
    when a pair disagrees on a wave that may arrive by both paths (then only alternatives hold)."""
    both = la & lb
    merged = []
    for x in va:
        for y in vb:
            if not np.array_equal(x[both], y[both]):
                return None
            merged.append(np.where(la, x, y))
    return _dedupe(merged)


def _same(a: dict, b: dict) -> bool:
    if a.keys() != b.keys():
        return False
    for k, va in a.items():
        vb = b[k]
        if va is vb:
            continue
        if k == "exec_full":
            if va != vb:
                return False
        elif k == LIVE:
            if not np.array_equal(va, vb):
                return False
        elif len(va) != len(vb) or {x.tobytes() for x in va} != {x.tobytes() for x in vb}:
            return False
    return True
