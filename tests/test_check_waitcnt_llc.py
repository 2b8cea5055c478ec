"""Wait-counter checker vs LLVM's SIInsertWaitcnts (llc -run-pass=si-insert-waitcnts on paired MIR
probes, tests/oracles/waitcnt_probes.py).

For every probe (a random program without waits) llc says where it puts an ``s_waitcnt`` and with
which counts. Three comparisons:

(a) leave-one-out: the asm with all of llc's waits except the one before instruction i must give a
    flyasm finding at i (unless the difference is documented, see CATEGORIES), and every such
    finding's proposed count must be >= llc's on a counter that retires the producer (equal =
    agreement; larger = LLVM more conservative, categorised). A smaller count would be a checker bug.
    Also, in the asm with no waits at all, every llc wait position carries a finding.
(b) the asm with all of llc's waits must give no finding (except documented categories).

Difference categories (:func:`classify`; "/b" = found by (b)). None is a flyasm miss:
* ``llc_pending_flat`` (LLVM smaller N): while any FLAT op may be pending LLVM forces every
  vmcnt/lgkmcnt wait to 0 (FLAT may hit LDS and return early); flyasm keeps the in-order count
  of the other ops, sound because a FLAT is never counted as an ordered op after them.
* ``llc_smem_pending`` (LLVM smaller N): an SMEM op pending makes LLVM use lgkmcnt(0) for every
  lgkm wait, also for a DS producer with fewer DS ops after it; flyasm counts the DS ops only.
* ``llc_join`` (LLVM smaller N, at block joins / loop headers): LLVM merges score brackets by
  shifting one path's pending ops, which loses order information flyasm keeps per path.
* ``llc_ds_waw`` (LLVM waits, flyasm silent): a DS load overwriting registers of a pending DS
  load; DS returns in order so the later load lands last (flyasm drops same-queue WAW; LLVM only
  does that for VMEM loads of one type).
* ``llc_flat_both``: LLVM waits on both counters for a FLAT result (vmcnt(0) and lgkmcnt(0));
  flyasm's model takes a FLAT as complete once either counter retired it.
* ``llc_counter_limit``: > 63 VMEM (> 15 DS) ops: flyasm takes the oldest as complete (issue
  stalls while a counter is full), LLVM still waits (vmcnt(62) / lgkmcnt(14)).
* ``llc_gll_lgkm`` (flyasm SMALLER N, and /b findings with llc's waits): LLVM counts
  ``global_load_lds_*`` on lgkmcnt too (its pseudo has LGKM_CNT = 1), in order with DS ops, so
  llc's lgkmcnt(N) counts the DMA as one of the N later ops. The ISA notes (§3.4) say GLOBAL ops
  count on vmcnt only; flyasm does not rely on it, so its count is smaller (safe under either
  reading). Not changed without hardware evidence.
* ``flyasm_barrier/b``: LDS write / DMA outstanding at ``s_barrier`` with LDS read after it: flyasm's
  rule (gfx950 barriers do not wait); LLVM leaves this to the memory model (a fence before the
  barrier), so llc inserts nothing there.
* ``llc_only_other``: LLVM waits in a loop where flyasm's fixed point has nothing outstanding
  for the instruction (llc is more conservative at loop headers / around barriers); flyasm is
  clean on llc's output in these probes, so the direction is safe.
Any other flyasm-smaller count or finding on llc's output is reported as a checker bug.

Checker fix found with this oracle: a DS *write* after an LDS DMA (``buffer_load ... lds`` /
``global_load_lds``) was not a finding; LLVM waits vmcnt there (the DMA landing later would undo
the write): now rule ``lds_dma_write``.
"""
from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

import pytest

from flyasm.check import program_from_lines
from flyasm.check.waitcnt import check_waitcnt

sys.path.insert(0, str(Path(__file__).resolve().parent))
from oracles.waitcnt_probes import asm_with_waits, generate_probes, llc_waits, validate_asm  # noqa: E402

FLAT_OPS = ("flat_",)


def _ins_index(lines: list[str]) -> list[int | None]:
    """line index -> original instruction index (None: label or an inserted s_waitcnt)."""
    out, k = [], 0
    for line in lines:
        if line.endswith(":") or line.startswith("s_waitcnt"):
            out.append(None)
        else:
            out.append(k)
            k += 1
    return out


def findings_by_instruction(lines: list[str]) -> dict[int, list]:
    idx = _ins_index(lines)
    out: dict[int, list] = {}
    for f in check_waitcnt(program_from_lines(lines)):
        out.setdefault(idx[f.consumer.index], []).append(f)
    return out


def _fix_counts(f) -> dict[str, int]:
    """Counter -> count that flyasm's fix proposes; FLAT producers: 0 on either counter."""
    if f.producer.text.startswith(FLAT_OPS):
        return {"vm": 0, "lgkm": 0}
    return {c: int(n) for c, n in re.findall(r"(vm|lgkm)cnt\((\d+)\)", f.fix)}


def proposal(fs) -> dict[str, int]:
    """flyasm's combined proposal at one instruction: per counter the minimum over its findings."""
    out: dict[str, int] = {}
    for f in fs:
        for c, n in _fix_counts(f).items():
            if not f.producer.text.startswith(FLAT_OPS):
                out[c] = min(n, out.get(c, n))
    return out


def judge(f, wait: tuple) -> str:
    """'equal' / 'llc_smaller' / 'flyasm_smaller' (a checker bug): llc's wait vs one flyasm finding."""
    llc = {"vm": wait[0], "lgkm": wait[1]}
    best = None
    for c, n in _fix_counts(f).items():
        if llc[c] is not None and llc[c] <= n:
            best = "equal" if llc[c] == n else (best or "llc_smaller")
    return best or "flyasm_smaller"


def _insts(p):
    return [x for x in program_from_lines(p.asm) if not isinstance(x, str)]


def _regs(x, which: str) -> set:
    return {r for r in getattr(x, which) if r[0] in ("v", "s", "a")}


def classify(p, i: int, wait: tuple, kind: str, rule: str = "") -> str:
    """Category of a difference at instruction i (kind: 'llc_only', 'llc_smaller', 'flyasm_smaller',
    'with_waits'), by which ops of the program can explain LLVM's choice."""
    ins = _insts(p)
    me = ins[i]
    touched = _regs(me, "reads") | _regs(me, "writes")
    names = [x.name for x in ins]
    gll = any(n.startswith("global_load_lds") for n in names)
    if kind == "flyasm_smaller":
        return "llc_gll_lgkm" if gll and wait[1] is not None else "unexplained"
    if kind == "with_waits":
        return "llc_gll_lgkm" if gll and rule.startswith("lgkm") else "unexplained"
    flat_regs = set().union(*[_regs(x, "writes") for x in ins if x.name.startswith("flat_")])
    if kind == "llc_only":
        if p.shape.startswith("limit"):
            return "llc_counter_limit"
        if me.name.startswith("ds_read") and any(
                x.name.startswith("ds_read") and _regs(x, "writes") & _regs(me, "writes") for x in ins):
            return "llc_ds_waw"
        if touched & flat_regs:
            return "llc_flat_both"
        if gll and wait[1] is not None:
            return "llc_gll_lgkm"
        return "llc_only_other" if "loop" in p.shape else "unexplained"
    # llc_smaller: LLVM asks for a smaller count than flyasm
    if any(n.startswith("flat_") for n in names):
        return "llc_pending_flat"
    if wait[1] is not None and any(n.startswith("s_load") for n in names):
        return "llc_smem_pending"
    if gll and wait[1] is not None:
        return "llc_gll_lgkm"
    return "llc_join" if p.shape != "straight" else "llc_smaller_other"


def compare(p, waits) -> dict:
    """One probe: {'llc_waits', 'equal', 'diff': [(category, detail)], 'bugs': [...]}"""
    instrs = p.instructions
    res = {"llc_waits": 0, "equal": 0, "diff": [], "bugs": []}
    nowait = findings_by_instruction(list(p.asm))
    for i, w in enumerate(waits):
        if w == (None, None):
            continue
        res["llc_waits"] += 1
        fs = findings_by_instruction(asm_with_waits(p, waits, skip=i)).get(i, [])
        if not fs:
            cat = classify(p, i, w, "llc_only")
            msg = f"{p.name}[{i}] {instrs[i]}: llc {w} but flyasm has no finding"
            (res["bugs"].append(msg) if cat == "unexplained" else res["diff"].append((cat, msg)))
            continue
        if i not in nowait:
            res["bugs"].append(f"{p.name}[{i}]: finding with llc's other waits but none without any wait")
        verdicts = [judge(f, w) for f in fs]
        if "flyasm_smaller" in verdicts:
            f = fs[verdicts.index("flyasm_smaller")]
            cat = classify(p, i, w, "flyasm_smaller")
            msg = f"{p.name}[{i}] {instrs[i]}: llc {w}, flyasm {f.fix} ({f.producer.text})"
            (res["bugs"].append(msg) if cat == "unexplained" else res["diff"].append((cat, msg)))
        elif all(v == "equal" for v in verdicts) or proposal_equal(fs, w):
            res["equal"] += 1
        else:
            res["diff"].append((classify(p, i, w, "llc_smaller"),
                                f"{p.name}[{i}] {instrs[i]}: llc {w}, flyasm {proposal(fs)}"))
    full = asm_with_waits(p, waits)
    idx = _ins_index(full)
    for f in check_waitcnt(program_from_lines(full)):
        i = idx[f.consumer.index]
        if f.rule == "lds_write_before_barrier":
            cat = "flyasm_barrier"
        else:
            cat = classify(p, i, waits[i], "with_waits", f.rule)
        msg = f"{p.name}: with llc's waits: {f}"
        (res["bugs"].append(msg) if cat == "unexplained" else res["diff"].append((cat + "/b", msg)))
    return res


def proposal_equal(fs, w) -> bool:
    """The combined wait flyasm proposes at the instruction is exactly llc's (per counter)."""
    prop = proposal(fs)
    flat_only = not prop
    if flat_only:
        return 0 in (w[0], w[1])
    return all({"vm": w[0], "lgkm": w[1]}[c] == n for c, n in prop.items())


def compare_all(probes, waits) -> dict:
    tot = {"probes": len(probes), "llc_waits": 0, "equal": 0, "diff": [], "bugs": [], "agree_probes": 0}
    for p in probes:
        r = compare(p, waits[p.name])
        tot["llc_waits"] += r["llc_waits"]
        tot["equal"] += r["equal"]
        tot["diff"] += r["diff"]
        tot["bugs"] += r["bugs"]
        tot["agree_probes"] += not r["diff"] and not r["bugs"]
    return tot


def summary(t: dict) -> str:
    cats = Counter(c for c, _ in t["diff"])
    lines = [f"waitcnt probes: {t['probes']}, probes in full agreement {t['agree_probes']}; llc waits "
             f"{t['llc_waits']}, equal {t['equal']}; differences {dict(sorted(cats.items()))}; "
             f"checker bugs {len(t['bugs'])}"]
    for c in sorted(cats):
        lines += [f"  {c}: {d}" for cc, d in t["diff"] if cc == c][:3]
    lines += [f"  BUG {b}" for b in t["bugs"][:20]]
    return "\n".join(lines)


KNOWN = {"flyasm_barrier/b", "llc_ds_waw", "llc_flat_both", "llc_gll_lgkm", "llc_gll_lgkm/b", "llc_join",
         "llc_pending_flat", "llc_smem_pending", "llc_counter_limit", "llc_only_other", "llc_smaller_other"}


@pytest.fixture(scope="module")
def probes_and_waits(tmp_path_factory):
    probes = generate_probes(0)
    return probes, llc_waits(probes, cache_dir=tmp_path_factory.mktemp("llc_wc"))


def test_probes_assemble(probes_and_waits):
    probes, _ = probes_and_waits
    assert len(probes) >= 300
    assert validate_asm(probes) == {}


def test_checker_matches_llc(probes_and_waits, capsys):
    probes, waits = probes_and_waits
    t = compare_all(probes, waits)
    with capsys.disabled():
        print("\n" + summary(t))
    assert not t["bugs"], "\n".join(t["bugs"][:30])
    cats = Counter(c for c, _ in t["diff"])
    assert set(cats) <= KNOWN, cats
    assert t["equal"] >= 0.8 * t["llc_waits"], summary(t)
    assert cats["llc_only_other"] <= 0.02 * t["llc_waits"], summary(t)


def test_ds_write_after_lds_dma_waits_for_the_dma():
    """The fix this oracle found: LLVM waits vmcnt before a ds_write that could be overtaken by an
    earlier LDS DMA; flyasm now reports it (rule lds_dma_write) with the in-order vmcnt."""
    dma = ("s_mov_b32 m0, s20", "buffer_load_dword v1, s[8:11], 0 offen lds",
           "global_load_dword v5, v[10:11], off")
    f = check_waitcnt(program_from_lines([*dma, "ds_write_b32 v2, v3"]))
    assert [(x.rule, x.consumer.index, x.fix) for x in f] == [("lds_dma_write", 3, "s_waitcnt vmcnt(1)")]
    assert check_waitcnt(program_from_lines([*dma, "s_waitcnt vmcnt(1)", "ds_write_b32 v2, v3"])) == []
