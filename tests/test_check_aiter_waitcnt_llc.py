"""The checker's definite wait-counter findings on aiter's shipped kernels (vm_raw, vm_waw, lgkm_raw)
are ones LLVM's own SIInsertWaitcnts would also fix.

For one real finding per rule and family, and one per distinct pattern of the vm_raw findings on pa
and mla (whose windows run 19-31 VMEM ops, across forward branches and the loop back edge), the
kernel is reduced to what decides its wait counters and written as one MIR function with its own
basic blocks, branches and back edges (oracles/waitcnt_probes.skeleton_probe): the finding's load,
every other operation counting on vmcnt or lgkmcnt (as a load of the same kind into a register
nothing reads: a counter counts operations, in order), every `s_waitcnt` as written, and the
consumer (a VALU reading, or writing, the loaded register). `llc -run-pass=si-insert-waitcnts`
(gfx950) is a fixed point over that CFG from the kernel's entry. The same skeleton with a consumer
that touches nothing loaded is the control: every wait llc puts into the probe and not into the
control is one the consumer alone causes. There must be exactly one, right before the consumer, on
the finding's counter, asking the same count our finding proposes (for the vm_raw patterns) or at
most it (LLVM may be more conservative, never less)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from flyasm.check.cfg import build_cfg, is_label

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
# The vm_raw findings on pa (192) and mla (36), one per distinct pattern and window shape:
# pa: `buffer_load_dword vN` (the kernel's per-block value) read by `v_mov_b32_dpp vX, vN
# row_newbcast:K` 31 VMEM ops later; mla: `buffer_load_dword v22..v25` (page indices) read by
# `v_mul_*_u32* v32, vN, s68` 19 VMEM ops later, the load issued in the previous loop iteration.
PATTERNS = [
    ("pa/pa_bf16_noquant_gqa16_1tg_4w.co", "straight"),
    ("pa/pa_fp16_noquant_gqa8_1tg_4w_mtp_msk1.co", "branches"),
    ("mla/MLA_A16W16_1TG_4W_16mx4_32nx1_Coex0_Msk1_QH16.co", "back_edge"),
    ("mla/mla_a16w16_qh64_qseqlen1_gqaratio64_lse_v3_ps.co", "back_edge"),
]


def window_shape(items, f) -> str:
    """'back_edge' (the load comes later in the code: the consumer sees it around the loop),
    'branches' (labels or branches between them), else 'straight'."""
    lo, hi = f.producer.index, f.consumer.index
    if lo > hi:
        return "back_edge"
    inside = items[lo + 1:hi]
    return "branches" if any(is_label(x) or x.name.startswith(("s_branch", "s_cbranch")) for x in inside) else "straight"


def _skeleton(items, f, name: str) -> tuple[wp.WaitProbe, wp.WaitProbe] | None:
    cfg = build_cfg(items)
    waw = f.rule.endswith("_waw")
    p = wp.skeleton_probe(items, cfg, f.producer.index, f.consumer.index, name, overwrite=waw)
    if p is None:
        return None
    return p, wp.skeleton_probe(items, cfg, f.producer.index, f.consumer.index, name + "_control", control=True)


def _llc_verdicts(pairs, tmp_path) -> dict:
    """{probe name: [(position, vmcnt, lgkmcnt)] of the waits the consumer alone causes, consumer position}."""
    got = wp.llc_raw([x for pc in pairs for x in pc], cache_dir=tmp_path)
    return {p.name: (wp.consumer_waits(p, c, got), wp.consumer_position(p)) for p, c in pairs}


@pytest.mark.slow       # checks one sample kernel per pair (seconds each) and runs llc
def test_llc_waits_where_our_definite_wait_findings_are(tmp_path):
    probes, asked = first_probes(PAIRS, lambda rel: checked(SHARED / rel), _skeleton, "aiter_wait")
    verdicts = _llc_verdicts(probes, tmp_path)
    for p, _ in probes:
        f = asked[p.name]
        caused, at = verdicts[p.name]
        assert [k for k, *_ in caused] == [at], (f.message, caused)
        _, vm, lgkm = caused[0]
        theirs = vm if f.rule.startswith("vm") else lgkm
        assert theirs is not None and theirs <= f.needed, (f.message, caused)


@pytest.mark.slow       # checks four sample kernels (~10 s each) and runs llc on their skeletons
def test_llc_asks_our_vmcnt_on_every_pa_and_mla_vm_raw_pattern(tmp_path):
    pairs, asked = [], {}
    for n, (rel, shape) in enumerate(PATTERNS):
        items, found = checked(SHARED / rel)
        mine = [f for f in found if f.rule == "vm_raw" and f.severity == "error" and window_shape(items, f) == shape]
        assert mine, f"no {shape} vm_raw finding on {rel}"
        f = mine[0]
        pc = _skeleton(items, f, f"pattern{n}_{shape}")
        assert pc is not None, f.message
        pairs.append(pc)
        asked[pc[0].name] = f
    verdicts = _llc_verdicts(pairs, tmp_path)
    for p, _ in pairs:
        f = asked[p.name]
        caused, at = verdicts[p.name]
        assert [(k, vm) for k, vm, _ in caused] == [(at, f.needed)], (f.message, caused)
