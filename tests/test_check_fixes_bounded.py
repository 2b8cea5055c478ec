"""The grouping of wait fixes in bounded time, with the same groups as before.

`group_fixes` used to ask, for every (finding, earlier wait) pair, two instruction-by-instruction
walks of the CFG; on aiter's backward kernels that was hours. Separation answers the same
questions on the block graph. The reference below is that earlier code, kept verbatim (the
instruction-level walk, every wait asked in order): on random programs with branches and loops
the new grouping must give the same fixes, anchors and members, and the block-level walk the same
values.
"""
from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flyasm.check import check_program, program_from_lines
from flyasm.check.cfg import build_cfg, is_label
from flyasm.check.fixes import Fix, _wanted, group_fixes, unique
from flyasm.check.separation import CYCLE, Separation
from flyasm.check.waitcnt import mem_op


# ---- the reference: flyasm/check/fixes.py before the block-level rewrite ---------------------------
def _ref_counts(items, producer, ctr):
    po = mem_op(items[producer], producer)
    if po is None or not po.ordered:
        return lambda j: False

    def counts(j):
        o = None if is_label(items[j]) else mem_op(items[j], j)
        return o is not None and o.ordered and o.cls == po.cls and ctr in o.counters
    return counts


def _ref_walk(cfg, start, stop, target, counts):
    memo = {}

    def go(bid, pos, active):
        key = (bid, pos)
        if key in memo:
            return memo[key]
        if key in active:
            return CYCLE
        active = active | {key}
        n = 0
        for j in cfg.blocks[bid].insts[pos:]:
            if j == target:
                memo[key] = n
                return n
            if j == stop:
                memo[key] = None
                return None
            n += counts(j)
        best = None
        for s in cfg.blocks[bid].succs:
            r = go(s, 0, active)
            if r is not None:
                best = n + r if best is None else max(best, n + r)
        memo[key] = best
        return best

    b = cfg.block_of[start]
    return go(b, cfg.blocks[b].insts.index(start), frozenset())


def _ref_covers(cfg, items, a, f, ctr, v):
    p, c = f.producer.index, f.consumer.index
    counts = _ref_counts(items, p, ctr)
    first = cfg.blocks[cfg.block_of[p]].insts
    nxt = first.index(p) + 1
    if nxt < len(first):
        bypass = _ref_walk(cfg, first[nxt], a, c, counts) if first[nxt] != a else None
    else:
        bypass = None
        for s in cfg.blocks[cfg.block_of[p]].succs:
            ins = cfg.blocks[s].insts
            if ins and ins[0] != a and _ref_walk(cfg, ins[0], a, c, counts) is not None:
                bypass = 0
    if bypass is not None or (a == c):
        return v if a == c else None
    between = _ref_walk(cfg, a, -1, c, counts)
    if between is None:
        return None
    return max(0, v - between)


def _ref_group_fixes(items, findings):
    cfg = build_cfg(items)
    fixes, by_consumer, waits = [], {}, []
    for f in sorted(unique(findings), key=lambda f: (f.consumer.index, f.rule)):
        c = f.consumer.index
        if f.kind != "waitcnt":
            fx = by_consumer.get(c)
            if fx is None:
                fx = by_consumer[c] = Fix("hazard", c)
                fixes.append(fx)
            fx.nops = max(fx.nops, f.needed - f.found)
            fx.findings.append(f)
            continue
        want = _wanted(f) or {"vm": f.needed}
        p = f.producer.index if f.producer else None
        joined = False
        for fx in waits if p is not None else ():
            at = {ctr: _ref_covers(cfg, items, fx.anchor, f, ctr, v) for ctr, v in want.items()}
            if any(x is None for x in at.values()):
                continue
            for ctr, x in at.items():
                fx.counters[ctr] = min(fx.counters.get(ctr, x), x)
            fx.findings.append(f)
            joined = True
            break
        if not joined:
            fx = Fix("waitcnt", c, dict(want), findings=[f])
            waits.append(fx)
            fixes.append(fx)
    return sorted(fixes, key=lambda fx: (fx.anchor, fx.kind != "waitcnt"))


# ---- random programs with branches, loops and memory ops ---------------------------------------------
REGS = (10, 11, 12, 13)
BODY = ["global_load_dword v{r}, v[0:1], off", "global_load_dword v{r}, v[0:1], off", "ds_read_b32 v{r}, v0",
        "s_load_dword s{r}, s[0:1], 0x0", "v_add_f32_e32 v20, v{r}, v{q}", "v_add_f32_e32 v{r}, v{q}, v{q}",
        "s_add_u32 s20, s{r}, 1", "s_waitcnt vmcnt(1)", "s_waitcnt lgkmcnt(0)", "v_mov_b32 v21, 0",
        "flat_load_dword v{r}, v[0:1]"]


def _program(rng: random.Random, blocks: int) -> list[str]:
    lines = []
    for b in range(blocks):
        lines.append(f"L{b}:")
        for _ in range(rng.randint(0, 5)):
            lines.append(rng.choice(BODY).format(r=rng.choice(REGS), q=rng.choice(REGS)))
        end = rng.random()
        target = rng.randrange(blocks + 1)          # backward targets make loops
        if end < 0.35:
            lines.append(f"s_cbranch_scc0 L{target}")
        elif end < 0.5:
            lines.append(f"s_branch L{target}")
    lines.append(f"L{blocks}:")
    lines.append("s_endpgm")
    return lines


def _shape(items, fixes):
    return [(fx.kind, fx.anchor, fx.text, [(f.rule, f.consumer.index, f.producer and f.producer.index)
                                           for f in fx.findings]) for fx in fixes]


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1), st.integers(1, 12))
def test_grouping_matches_the_instruction_level_reference(seed, blocks):
    items = program_from_lines(_program(random.Random(seed), blocks))
    found = check_program(items)
    assert _shape(items, group_fixes(items, found)) == _shape(items, _ref_group_fixes(items, found))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1), st.integers(1, 12))
def test_block_walk_matches_the_instruction_walk(seed, blocks):
    rng = random.Random(seed)
    items = program_from_lines(_program(rng, blocks))
    cfg = build_cfg(items)
    sep = Separation(cfg)
    insts = [i for i, it in enumerate(items) if not is_label(it)]
    loads = [i for i in insts if sep.kind(i, "vm") is not None] or insts
    for _ in range(20):
        start, target, p = rng.choice(insts), rng.choice(insts), rng.choice(loads)
        stop = rng.choice(insts + [-1])
        kind = sep.kind(p, "vm")
        want = _ref_walk(cfg, start, stop, target, _ref_counts(items, p, "vm"))
        got = sep.walk(start, stop, target, kind)
        # values past CYCLE only say "a loop on the way": the ops added to it do not matter
        assert (got is None, got is not None and got >= CYCLE) == (want is None, want is not None and want >= CYCLE)
        if want is not None and want < CYCLE:
            assert got == want
