"""Infer a register plan from use: ranges that instructions read and write together become named
regions (`mfma_acc0`, `lds_dma_addr`, `kernarg_ptr`, ...).

Every multi-register operand is an interval of one register file; intervals that overlap are
merged (a tuple loaded as v[0:3] and used as part of an MFMA accumulator v[0:15] is one region).
Single registers that no tuple covers stay unnamed (`v[5]`): naming every scalar would be noise.
A region is named after the most telling role any of its operands plays, by the table's slot
names and units (never by guessing from mnemonics), numbered in register order per role.

Bound: O(operands log operands) to merge the tuples; RegionIndex.expr O(regions) once per
distinct register (at most the 512 + 104 of the files).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..isa.instruction import Instruction
from ..isa.operands import Mod, Reg

# Roles, most telling first: the name a region gets is that of its best role.
ROLE_ORDER = ("kernarg_ptr", "mfma_acc", "mfma_a", "mfma_b", "buf_rsrc", "lds_dma_addr", "global_base",
              "global_addr", "global_load", "global_store", "buf_load", "buf_store", "lds_read", "lds_write",
              "lds_addr", "kernargs", "smem_base", "smem_load", "exec_mask", "valu64", "salu64", "tmp")
_RANK = {r: i for i, r in enumerate(ROLE_ORDER)}


@dataclass
class PlanRegion:
    name: str
    reg: Reg
    roles: set


def role_of(inst: Instruction, slot: dict, reg: Reg, kernarg_ptr: Reg | None) -> str:
    name, unit, fam = slot["name"], inst.unit, inst.family
    acc = slot.get("access", "r")
    if unit == "MFMA":
        return {"vdst": "mfma_acc", "src2": "mfma_acc", "src0": "mfma_a", "src1": "mfma_b"}.get(name, "mfma_acc")
    if fam == "SMEM":
        if name == "sbase":
            return "kernarg_ptr" if kernarg_ptr is not None and reg == kernarg_ptr else "smem_base"
        if name == "sdata" and "w" in acc:
            base = inst.operand("sbase")
            return "kernargs" if kernarg_ptr is not None and base == kernarg_ptr else "smem_load"
        return "smem_base"
    if fam in ("MUBUF", "MTBUF"):
        if name == "srsrc":
            return "buf_rsrc"
        if name == "vaddr":
            return "lds_dma_addr" if inst.modifiers.get("lds") else "global_addr"
        return "buf_load" if "w" in acc else "buf_store"
    if fam in ("FLAT", "FLAT_GLBL", "FLAT_SCRATCH"):
        if name == "saddr":
            return "global_base"
        if name in ("addr", "vaddr"):
            return "lds_dma_addr" if "lds" in inst.mnemonic else "global_addr"
        return "global_load" if "w" in acc else "global_store"
    if fam == "DS":
        if name == "addr":
            return "lds_addr"
        return "lds_read" if "w" in acc else "lds_write"
    if reg.file == "s" and reg.count == 2 and name in ("sdst", "vdst") and "exec" in inst.mnemonic:
        return "exec_mask"
    if reg.file in ("v", "a"):
        return "valu64" if reg.count == 2 else "tmp"
    return "salu64" if reg.count == 2 else "tmp"


def _base(op):
    return op.base if isinstance(op, Mod) else op


def infer(stream: list[Instruction], kernarg_ptr: Reg | None = None) -> list[PlanRegion]:
    """Regions in file order (v, a, s), then register order."""
    uses: dict[str, list[tuple[Reg, str]]] = {"v": [], "a": [], "s": []}
    for inst in stream:
        if inst.mnemonic == ".long":
            continue
        try:
            slots = inst.slots
        except Exception:   # noqa: BLE001 - an operand form the tables do not describe: no role
            slots = [{"name": "?"}] * len(inst.operands)
        for op, slot in zip(inst.operands, slots):
            r = _base(op)
            if isinstance(r, Reg):
                uses[r.file].append((r, role_of(inst, slot, r, kernarg_ptr) if r.count > 1 else "tmp"))
    out: list[PlanRegion] = []
    for f in ("v", "a", "s"):
        spans = sorted(((r.index, r.last, role) for r, role in uses[f] if r.count > 1))
        merged: list[list] = []
        for lo, hi, role in spans:
            if merged and lo <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], hi)
                merged[-1][2].add(role)
            else:
                merged.append([lo, hi, {role}])
        for lo, hi, roles in merged:
            reg = Reg(f, lo, hi - lo + 1)
            if "kernarg_ptr" in roles and reg != kernarg_ptr:
                roles.discard("kernarg_ptr")      # the pointer's registers were reused for more
                roles.add("salu64")
            out.append(PlanRegion("", reg, roles))
    counters: dict[str, int] = {}
    for pr in out:
        best = min(pr.roles, key=lambda r: _RANK[r])
        if best == "tmp":
            best = f"{pr.reg.file}tmp"
        if best == "kernarg_ptr":
            pr.name = best
            continue
        n = counters.get(best, 0)
        counters[best] = n + 1
        pr.name = f"{best}_{n}" if best[-1].isdigit() else f"{best}{n}"
    return out


class RegionIndex:
    """Register -> the region holding it, for writing operands as region slices."""

    def __init__(self, regions: list[PlanRegion]):
        self.by_file: dict[str, list[PlanRegion]] = {"v": [], "a": [], "s": []}
        for pr in regions:
            self.by_file[pr.reg.file].append(pr)
        self._cache: dict[Reg, tuple[str, str] | None] = {}

    def expr(self, r: Reg) -> tuple[str, str] | None:
        """(region name, Python expression) for a register inside a region, else None."""
        if r in self._cache:
            return self._cache[r]
        hit = None
        for pr in self.by_file[r.file]:
            g = pr.reg
            if g.index <= r.index and r.last <= g.last:
                lo = r.index - g.index
                if r == g:
                    hit = (pr.name, pr.name)
                elif r.count == 1:
                    hit = (pr.name, f"{pr.name}[{lo}]")
                else:
                    hit = (pr.name, f"{pr.name}[{lo}:{lo + r.count - 1}]")
                break
        self._cache[r] = hit
        return hit
