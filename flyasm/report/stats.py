"""ISA statistics of one kernel: registers, LDS, scratch, occupancy, instruction mix by class,
per region, per basic block and per loop body.

    d = stats(kernel_or_path_or_codeobj);  print(format_stats(d));  json.dumps(d)

Register counts come from two places and both are shown: the kernel descriptor (what the
hardware allocates) and the instruction stream (the highest register any instruction reads or
writes, derived from the instruction tables).

Occupancy on gfx950 (waves per SIMD; a CU has 4 SIMDs):
- VGPRs: one unified file of 512 VGPR+AGPR entries per lane per SIMD, allocated in granules of 8
  (reference notes §5.1: ``GRANULATED_WORKITEM_VGPR_COUNT = ceil(next_free_vgpr/8) - 1``, unified
  512-entry file; RegisterPlan VGPR_FILE). ``alloc = ceil(next_free_vgpr / 8) * 8`` and
  ``waves_vgpr = min(8, floor(512 / alloc))``; 8 is gfx950's wave-slot limit per SIMD
  (project brief, issue "Static checker, ISA reports", item 5; LLVM FeatureMaxWavesPerEU8 for gfx90a+).
- SGPRs: LLVM ``AMDGPUBaseInfo getOccupancyWithNumSGPRs`` for GFX8/GFX9: <=80 -> 10, <=88 -> 9,
  <=100 -> 8, else 7 waves (capped by the 8 above, so only kernels above 100 SGPRs incl. VCC lose).
- LDS: 160 KiB per CU on gfx950 (notes §5.1: group_segment_fixed_size <= 163840; Kernel.LDS_LIMIT)
  shared by the workgroups on it: ``workgroups_lds = floor(163840 / lds)`` (unlimited when lds=0).
- Workgroup: ``waves_per_wg = ceil(threads / 64)`` (wave64); the waves of one workgroup are spread
  over the CU's 4 SIMDs, so the CU holds ``floor(4 * min(waves_vgpr, waves_sgpr) / waves_per_wg)``
  workgroups by registers; ``workgroups_per_cu = min(that, workgroups_lds)`` and the resulting
  ``waves_per_simd = workgroups_per_cu * waves_per_wg / 4`` (an average over the 4 SIMDs).
  When only ``max_flat_workgroup_size`` is known (clang code objects) it is used and flagged.
Not modelled: scratch, barrier slots and the workgroup-count limit per CU.

Bound: one pass over the stream for the mix and the registers, O(I × registers per
instruction), plus the mix of each region, block and loop body: O(I × region/loop depth).
"""
from __future__ import annotations

import json
import math
from collections import Counter

from ..isa.instruction import Instruction
from ..isa.operands import Imm
from .program import Program, Span, as_program, basic_blocks, loops

VGPR_FILE = 512
MAX_WAVES_PER_SIMD = 8
SIMDS_PER_CU = 4
LDS_PER_CU = 160 * 1024
WAVE = 64

# Count classes, in display order. Every instruction falls in exactly one primary class.
CLASSES = ("mfma", "valu", "trans", "salu", "smem", "ds_read", "ds_write", "ds_atomic", "vmem_load",
           "vmem_store", "vmem_atomic", "lds_dma", "flat", "s_waitcnt", "s_nop", "s_barrier", "s_setprio",
           "branch", "s_endpgm", "other")
# Extra counts that overlap the classes.
EXTRAS = ("permlane", "dpp", "nop_wait_states", "mfma_cycles")


def classify(inst: Instruction) -> str:
    u, mem, n = inst.unit, inst.info.get("mem"), inst.name
    if u == "MFMA":
        return "mfma"
    if u == "TRANS":
        return "trans"
    if u == "VALU":
        return "valu"
    if u == "SALU":
        return "salu"
    if u == "SMEM":
        return "smem"
    if u == "DS":
        return {"load": "ds_read", "store": "ds_write"}.get(mem, "ds_atomic")
    if u == "VMEM":
        if inst.is_lds_dma:
            return "lds_dma"
        return {"load": "vmem_load", "store": "vmem_store", "atomic": "vmem_atomic"}.get(mem, "other")
    if u == "FLAT":
        return "flat"
    if u == "BRANCH":
        return "branch"
    if n in ("s_waitcnt", "s_nop", "s_barrier", "s_setprio", "s_endpgm"):
        return n
    return "other"


def nop_wait_states(inst: Instruction) -> int:
    """`s_nop N` is N+1 wait states (notes §4.1, SIInstrInfo::getNumWaitStates)."""
    for op in inst.operands:
        if isinstance(op, Imm) and isinstance(op.value, int):
            return op.value + 1
    return 1


def mfma_shape(inst: Instruction) -> str:
    return inst.name


def counts(stream: list[Instruction]) -> dict:
    """Instruction counts by class plus the overlapping extras and MFMA detail."""
    c = Counter({k: 0 for k in CLASSES + EXTRAS})
    by_shape: dict[str, dict] = {}
    for inst in stream:
        cls = classify(inst)
        c[cls] += 1
        if cls == "s_nop":
            c["nop_wait_states"] += nop_wait_states(inst)
        if "permlane" in inst.name:
            c["permlane"] += 1
        if inst.is_dpp:
            c["dpp"] += 1
        if cls == "mfma":
            p = inst.passes or 0
            c["mfma_cycles"] += 4 * p       # one pass = 4 cycles (notes §1.2)
            e = by_shape.setdefault(mfma_shape(inst), {"count": 0, "passes": p, "cycles": 0})
            e["count"] += 1
            e["cycles"] += 4 * p
    out = {k: c[k] for k in CLASSES + EXTRAS}
    out["total"] = len(stream)
    out["mfma_by_shape"] = dict(sorted(by_shape.items()))
    return out


def register_use(stream: list[Instruction]) -> dict:
    """Highest register + 1 and distinct registers touched, per file, from the tables' reads/writes."""
    hi = {"v": -1, "a": -1, "s": -1}
    seen = {"v": set(), "a": set(), "s": set()}
    for inst in stream:
        for f, i in inst.reads | inst.writes:
            if f in hi:
                hi[f] = max(hi[f], i)
                seen[f].add(i)
    return {"vgpr": hi["v"] + 1, "agpr": hi["a"] + 1, "sgpr": hi["s"] + 1,
            "vgpr_distinct": len(seen["v"]), "agpr_distinct": len(seen["a"]), "sgpr_distinct": len(seen["s"])}


def sgpr_waves(sgprs: int) -> int:
    """LLVM getOccupancyWithNumSGPRs, GFX8/GFX9 branch."""
    if sgprs <= 80:
        return 10
    if sgprs <= 88:
        return 9
    if sgprs <= 100:
        return 8
    return 7


def occupancy(vgpr_alloc: int, sgprs: int, lds: int, threads: int | None) -> dict:
    """Waves per SIMD and workgroups per CU on gfx950 (formulas in the module docstring)."""
    wpw = math.ceil((threads or WAVE) / WAVE)
    w_vgpr = min(MAX_WAVES_PER_SIMD, VGPR_FILE // max(vgpr_alloc, 8))
    w_sgpr = min(MAX_WAVES_PER_SIMD, sgpr_waves(sgprs))
    wg_lds = LDS_PER_CU // lds if lds else None
    wg_regs = (SIMDS_PER_CU * min(w_vgpr, w_sgpr)) // wpw
    wg = wg_regs if wg_lds is None else min(wg_regs, wg_lds)
    waves = wg * wpw / SIMDS_PER_CU
    limits = {"vgpr": w_vgpr, "sgpr": w_sgpr,
              "lds": (MAX_WAVES_PER_SIMD if wg_lds is None else min(MAX_WAVES_PER_SIMD, wg_lds * wpw / SIMDS_PER_CU))}
    lowest = min(limits.values())
    return {
        "waves_per_simd": waves, "workgroups_per_cu": wg, "waves_per_workgroup": wpw,
        "waves_per_simd_by_vgpr": w_vgpr, "waves_per_simd_by_sgpr": w_sgpr,
        "workgroups_per_cu_by_lds": wg_lds, "workgroups_per_cu_by_registers": wg_regs,
        "limited_by": (sorted(k for k, v in limits.items() if v == lowest) if lowest < MAX_WAVES_PER_SIMD
                       else ["wave slots"]),
        "fits": wg >= 1,
    }


def _span_dict(p: Program, sp: Span) -> dict:
    return {"name": sp.name, "start": sp.start, "end": sp.end, **counts(p.stream[sp.start:sp.end])}


def stats(x, kernel: str | None = None) -> dict:
    """The statistics dict of a Kernel, Program, CodeObject or .co/.s/.py path (JSON-serialisable)."""
    p = as_program(x, kernel)
    d = p.descriptor
    use = register_use(p.stream)
    used_unified = (d["accum_offset"] + use["agpr"]) if use["agpr"] else use["vgpr"]
    occ = occupancy(d["vgpr_alloc"], d["sgpr_count"], d["lds"], p.threads)
    occ["threads"] = p.threads
    occ["threads_is_max_flat_workgroup_size"] = p.threads_is_bound
    return {
        "name": p.name,
        "source": p.source,
        "registers": {
            "descriptor": {k: d[k] for k in ("next_free_vgpr", "vgpr_alloc", "accum_offset", "arch_vgprs", "agprs",
                                             "next_free_sgpr", "sgpr_count")},
            "used": {**use, "unified": used_unified},
        },
        "lds": d["lds"],
        "scratch": d["scratch"],
        "kernarg_size": d["kernarg_size"],
        "occupancy": occ,
        "counts": counts(p.stream),
        "regions": [_span_dict(p, r) for r in p.regions],
        "blocks": [_span_dict(p, b) for b in basic_blocks(p)],
        "loops": [_span_dict(p, lp) for lp in loops(p)],
        "metadata": _jsonable(p.metadata),
    }


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, bytes):
        return x.hex()
    return x


def to_json(d: dict) -> str:
    return json.dumps(d, indent=2, sort_keys=False)


# ---- text ----------------------------------------------------------------------------------------

_SHORT = {"mfma": "mfma", "valu": "valu", "trans": "trans", "salu": "salu", "smem": "smem", "ds_read": "ds_rd",
          "ds_write": "ds_wr", "ds_atomic": "ds_at", "vmem_load": "vm_ld", "vmem_store": "vm_st",
          "vmem_atomic": "vm_at", "lds_dma": "ldsdma", "flat": "flat", "s_waitcnt": "wait", "s_nop": "nop",
          "s_barrier": "barr", "s_setprio": "prio", "branch": "br", "s_endpgm": "end", "other": "other", "permlane": "perml",
          "dpp": "dpp", "nop_wait_states": "nopws", "mfma_cycles": "mfmacyc"}


def _table(head: list[str], rows: list[list]) -> list[str]:
    cells = [head] + [[str(c) for c in r] for r in rows]
    w = [max(len(r[i]) for r in cells) for i in range(len(head))]
    fmt = lambda r: "  ".join(c.rjust(w[i]) if i else c.ljust(w[i]) for i, c in enumerate(r)).rstrip()  # noqa: E731
    return [fmt(cells[0]), fmt(["-" * x for x in w])] + [fmt(r) for r in cells[1:]]


def _mix_table(spans: list[dict]) -> list[str]:
    cols = [k for k in CLASSES + EXTRAS if any(s_[k] for s_ in spans)]
    head = ["name", "range", "total"] + [_SHORT[k] for k in cols]
    rows = [[s_["name"], f"{s_['start']}-{s_['end'] - 1}", s_["total"]] + [s_[k] or "" for k in cols] for s_ in spans]
    return _table(head, rows)


def format_stats(d: dict) -> str:
    """A readable multi-table text of a stats() dict."""
    r, o, c = d["registers"], d["occupancy"], d["counts"]
    rd, ru = r["descriptor"], r["used"]
    lines = [f"kernel {d['name']}  ({d['source']})", ""]
    lines += _table(["registers", "descriptor", "used by instructions"], [
        ["VGPR (arch)", rd["arch_vgprs"] if rd["arch_vgprs"] is not None else "-", f"{ru['vgpr']} (v0..v{ru['vgpr'] - 1}, "
         f"{ru['vgpr_distinct']} distinct)" if ru["vgpr"] else "0"],
        ["AGPR", rd["agprs"] if rd["agprs"] is not None else "-",
         f"{ru['agpr']} ({ru['agpr_distinct']} distinct)" if ru["agpr"] else "0"],
        ["unified VGPR+AGPR", f"{rd['next_free_vgpr']} -> alloc {rd['vgpr_alloc']}", ru["unified"]],
        ["accum_offset", rd["accum_offset"], ""],
        ["SGPR", f"{rd['next_free_sgpr']} (count {rd['sgpr_count']})", f"{ru['sgpr']} ({ru['sgpr_distinct']} distinct)"],
    ])
    thr = o["threads"]
    thr_s = "unknown (1 wave assumed)" if thr is None else (f"<= {thr} (max_flat_workgroup_size)"
                                                            if o["threads_is_max_flat_workgroup_size"] else str(thr))
    lines += ["", f"LDS {d['lds']} B   scratch {d['scratch']} B   kernarg {d['kernarg_size']} B   workgroup {thr_s} "
              f"threads = {o['waves_per_workgroup']} waves",
              f"occupancy: {o['waves_per_simd']:g} waves/SIMD, {o['workgroups_per_cu']} workgroups/CU "
              f"(VGPR limit {o['waves_per_simd_by_vgpr']}, SGPR limit {o['waves_per_simd_by_sgpr']}, "
              f"LDS limit {o['workgroups_per_cu_by_lds'] if o['workgroups_per_cu_by_lds'] is not None else '-'} wg/CU; "
              f"limited by {', '.join(o['limited_by'])})" + ("" if o["fits"] else "  ** a workgroup does not fit on a CU **"),
              ""]
    lines += _table(["class", "count"], [[k, c[k]] for k in CLASSES + EXTRAS if c[k]] + [["total", c["total"]]])
    if c["mfma_by_shape"]:
        lines += [""] + _table(["mfma", "count", "passes", "cycles"],
                               [[k, v["count"], v["passes"], v["cycles"]] for k, v in c["mfma_by_shape"].items()])
    for title, key in (("regions", "regions"), ("loop bodies", "loops"), ("basic blocks", "blocks")):
        if d[key]:
            lines += ["", title] + _mix_table(d[key])
    md = d.get("metadata") or {}
    keep = {k: v for k, v in md.items() if k not in ("args",) and not isinstance(v, (dict, list))}
    if keep:
        lines += ["", "metadata: " + ", ".join(f"{k}={v}" for k, v in sorted(keep.items()))]
    return "\n".join(lines)
