"""The checker's definite wait-counter findings on aiter's shipped kernels (vm_raw, vm_waw, lgkm_raw)
are ones LLVM's own SIInsertWaitcnts would also fix.

For one real finding per rule and family, the window from the load to the instruction that uses
(or overwrites) its result is written as MIR with what decides the counters kept: the load, every
operation counting on vmcnt or lgkmcnt in between (as a load of the same kind into a register the
consumer does not touch: a counter counts operations, in order), every `s_waitcnt` in between as
written, and the consumer (a VALU reading, or writing, the loaded register). `llc
-run-pass=si-insert-waitcnts` (gfx950) must put a wait on the same counter right before the
consumer whose count retires the load: at most the count our finding proposes (LLVM may be more
conservative, never less)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from flyasm.isa.operands import Waitcnt

sys.path.insert(0, str(Path(__file__).resolve().parent))
from oracles import waitcnt_probes as wp  # noqa: E402
from oracles.aiter_findings import checked, first_probes  # noqa: E402
from oracles.hazard_probes import find_tool  # noqa: E402

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "aiter" / "gfx950"
pytestmark = [pytest.mark.skipif(not SHARED.exists(), reason=f"{SHARED} is absent (../shared is not here)"),
              pytest.mark.skipif(find_tool("llc") is None, reason="llc (LLVM 22) is not installed")]

PAIRS = [
    ("vm_raw", "fmoe/gelu/fmoe_bf16_pertokenFp8_g1u1_vs_tkw1_gelu_1tg_32x192.co"),
    ("vm_waw", "fmoe/gelu/fmoe_bf16_pertokenFp8_g1u1_vs_tkw1_gelu_1tg_32x192.co"),
    ("lgkm_raw", "fmoe/fmoe_fp8_blockscale_g1u1_novs_subGU_256.co"),
    ("lgkm_raw", "mla/MLA_A16W16_1TG_4W_16mx4_32nx1_Coex0_Msk1_QH16.co"),
]
LOADED = 20          # the probe's load writes v20 (or s20); fillers write v30+ / s30+


def _waitcnt(w: Waitcnt) -> wp.I:
    vm = wp.VM_MAX if w.vmcnt is None else w.vmcnt
    exp = wp.EXP_MAX if w.expcnt is None else w.expcnt
    lgkm = wp.LGKM_MAX if w.lgkmcnt is None else w.lgkmcnt
    imm = (vm & 0xF) | (vm >> 4) << 14 | exp << 4 | lgkm << 8
    return wp.I(f"s_waitcnt {w}", f"S_WAITCNT {imm}")


def _as_load(ins, dest: int) -> wp.I | None:
    """A load on the same counter as ins (None: ins counts on neither)."""
    if ins.counter == "vm":
        return wp.buffer_load(dest, 1)
    if ins.counter == "lgkm":
        return wp.ds_read(dest, 1)
    if ins.counter == "lgkm_smem":
        return wp.s_load(dest, 1)
    return None


def window_probe(items, f, name: str) -> wp.WaitProbe | None:
    lo, hi = f.producer.index, f.consumer.index
    window = items[lo:hi + 1]
    if lo >= hi or any(isinstance(x, str) for x in window) or any(x.name.startswith(("s_cbranch", "s_branch"))
                                                      for x in window[:-1]):
        return None                                  # one straight block only
    prod = _as_load(window[0], LOADED)
    if prod is None or window[0].counter == "lgkm_smem":
        return None
    body, filler = [prod], 30
    for x in window[1:-1]:
        if x.name == "s_waitcnt":
            body.append(_waitcnt(x.operands[0] if x.operands else Waitcnt()))
        elif (ld := _as_load(x, filler)) is not None:
            body.append(ld)
            filler += 1
            if filler > 90:
                return None
    body.append(wp.v_add(100, LOADED, 101) if f.rule.endswith("_raw") else wp.v_mov(LOADED, "v101"))
    body.append(wp.S_ENDPGM)
    asm = tuple(i.asm for i in body if not i.asm.startswith("s_waitcnt"))
    return wp.WaitProbe(name, "straight", asm, wp.mir_function(name, body))


@pytest.mark.slow       # checks one sample kernel per pair (seconds each) and runs llc
def test_llc_waits_where_our_definite_wait_findings_are(tmp_path):
    probes, asked = first_probes(PAIRS, lambda rel: checked(SHARED / rel), window_probe, "aiter_wait")
    got = wp.llc_waits(probes, cache_dir=tmp_path)
    for p in probes:
        f = asked[p.name]
        vm, lgkm = got[p.name][-2]                      # the wait right before the consumer
        ours = f.needed
        theirs = vm if f.rule.startswith("vm") else lgkm
        assert theirs is not None, (f.message, p.asm)
        assert theirs <= ours, (f.message, theirs)
