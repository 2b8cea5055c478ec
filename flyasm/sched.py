"""Schedule helpers: instruction classes, region count assertions, MFMA-shadow interleaving.

    with k.region("qk", expect={"mfma": 8, "ds_read": (4, 8), "waitcnt": 1}):
        ...
    interleave(k, mfmas, others, pattern=(1, 2))   # MFMA, 2 others, MFMA, 2 others, ...

Classes come from the instruction tables (unit, family, mem kind), never from name guesses,
except where the class *is* a specific instruction (s_waitcnt, s_nop, s_barrier, v_exp_*).
"""
from __future__ import annotations

from .errors import KernelError, user_location
from .isa.instruction import Instruction

# Every class an expectation may name, with what it counts.
CLASSES = {
    "mfma": "MFMA/SMFMAC instructions (unit MFMA)",
    "valu": "all VALU instructions, transcendental ones included (unit VALU or TRANS)",
    "trans": "transcendental VALU (v_exp/log/rcp/rsq/sqrt/sin/cos...)",
    "exp": "v_exp_* only",
    "salu": "scalar ALU (unit SALU), s_waitcnt/s_nop/s_barrier excluded",
    "ds_read": "LDS loads (DS, mem load)",
    "ds_write": "LDS stores (DS, mem store)",
    "ds_atomic": "LDS atomics and other DS operations",
    "vmem_load": "buffer/global/flat/scratch loads into VGPRs",
    "vmem_store": "buffer/global/flat/scratch stores",
    "vmem_atomic": "buffer/global/flat atomics",
    "lds_dma": "VMEM loads that write LDS (… lds, global_load_lds_*)",
    "smem": "scalar memory (unit SMEM)",
    "waitcnt": "s_waitcnt",
    "nop": "s_nop",
    "barrier": "s_barrier",
    "branch": "branches (unit BRANCH) and s_endpgm*",
    "other": "anything else (SOPP control: s_setprio, s_sleep, s_sendmsg...)",
}


def classes_of(inst: Instruction) -> set[str]:
    """The classes an instruction counts in (one main class, plus 'trans'/'exp' inside 'valu')."""
    name, info = inst.name, inst.info
    unit, fam, mem = info["unit"], info["family"], info.get("mem")
    if name == "s_waitcnt":
        return {"waitcnt"}
    if name == "s_nop":
        return {"nop"}
    if name == "s_barrier":
        return {"barrier"}
    if unit == "MFMA":
        return {"mfma"}
    if unit in ("VALU", "TRANS"):
        out = {"valu"}
        if unit == "TRANS" or info.get("trans"):
            out.add("trans")
        if name.startswith("v_exp_"):
            out.add("exp")
        return out
    if unit == "SALU":
        return {"salu"}
    if unit == "SMEM":
        return {"smem"}
    if fam == "DS":
        return {{"load": "ds_read", "store": "ds_write"}.get(mem, "ds_atomic")}
    if unit in ("VMEM", "FLAT"):
        if inst.is_lds_dma:
            return {"lds_dma"}
        return {{"load": "vmem_load", "store": "vmem_store"}.get(mem, "vmem_atomic")}
    if unit == "BRANCH" or name.startswith("s_endpgm"):
        return {"branch"}
    return {"other"}


def count(stream) -> dict[str, int]:
    out: dict[str, int] = {}
    for inst in stream:
        for c in classes_of(inst):
            out[c] = out.get(c, 0) + 1
    return out


def check_expect(kernel, region) -> None:
    """Compare a region's instruction counts with its `expect` dict; KernelError on a mismatch."""
    found = count(kernel.stream[region.start:region.end])
    where = "/".join(region.path)
    for cls, want in region.expect.items():
        if cls not in CLASSES:
            raise KernelError(f"region '{where}' expects unknown class '{cls}' (classes: {', '.join(CLASSES)})",
                              region.loc)
        if isinstance(want, bool) or not (isinstance(want, int) or (isinstance(want, tuple) and len(want) == 2
                                                                     and all(isinstance(x, int) for x in want))):
            raise KernelError(f"region '{where}' expectation for '{cls}' must be an int or an inclusive (lo, hi) "
                              f"tuple, not {want!r}", region.loc)
        lo, hi = (want, want) if isinstance(want, int) else want
        got = found.get(cls, 0)
        if not (lo <= got <= hi):
            exp = str(lo) if lo == hi else f"{lo}..{hi}"
            raise KernelError(f"region '{where}' has {got} '{cls}' instructions, expected {exp}", region.loc)


def interleave(k, mfmas, others, pattern: tuple[int, int] = (1, 2)) -> list[Instruction]:
    """Emit groups of N MFMAs, each followed by up to M other instructions (pattern=(N, M)).

    `mfmas` and `others` are instructions built with flyasm.isa.builders.make (or callables that
    emit into k and return an Instruction). The order is fixed and visible in the .s: leftover
    others go after the last MFMA group; nothing is reordered or dropped.
    """
    n, m = pattern
    if not (isinstance(n, int) and isinstance(m, int) and n >= 1 and m >= 0):
        raise KernelError(f"interleave pattern is (MFMAs per group ≥ 1, others per group ≥ 0), not {pattern!r}")
    mfmas, others = list(mfmas), list(others)
    for inst in mfmas:
        if isinstance(inst, Instruction) and inst.unit != "MFMA":
            raise KernelError(f"interleave got {inst.mnemonic} among the MFMAs", inst.loc or user_location())
    out: list[Instruction] = []
    oi = 0
    for gi in range(0, len(mfmas), n):
        for inst in mfmas[gi:gi + n]:
            out.append(_emit(k, inst))
        for inst in others[oi:oi + m]:
            out.append(_emit(k, inst))
        oi += m
    for inst in others[oi:]:
        out.append(_emit(k, inst))
    return out


def _emit(k, inst):
    if isinstance(inst, Instruction):
        return k.emit(inst)
    if callable(inst):
        return inst()
    raise KernelError(f"interleave takes Instructions (builders.make(...)), not {inst!r}")
