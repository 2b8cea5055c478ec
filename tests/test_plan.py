"""RegisterPlan: declaration checks, instruction attribution, reports, and the Kernel hookup."""
from __future__ import annotations

import random

import pytest

from flyasm.errors import PlanError
from flyasm.isa import builders
from flyasm.isa.operands import a, s, v
from flyasm.kernel import Kernel
from flyasm.plan import RegisterPlan


def fa_plan(**kw):
    return RegisterPlan("fa_fwd", accum_offset=256, regions={
        "S": v[32:95], "O": v[96:159], "Q": v[160:191], "KV": v[192:255],
        "tid": v[0:0], "tmp": v[1:31], "kernarg": s[0:1], "wg": s[2:2], "sc": s[4:62],
        "dma_m0": s[63:67], "acc": a[0:127]}, aliases={"S_pong": ("S", v[64:95])}, **kw)


def test_declared_plan_reads_like_the_table():
    p = fa_plan(strict=True)
    assert p.S == v[32:95] and p["S_pong"] == v[64:95]
    text = str(p)
    lines = text.splitlines()
    assert lines[0] == "plan fa_fwd (accum_offset 256) strict"
    assert lines[1].split() == ["region", "file", "range", "size", "alias", "of"]
    row = next(line.split() for line in lines if line.startswith("S_pong"))
    assert row == ["S_pong", "VGPR", "v[64:95]", "32", "S"]
    assert next(line.split() for line in lines if line.startswith("acc ")) == ["acc", "AGPR", "a[0:127]", "128"]
    # rows ordered by file then start: VGPRs, AGPRs, SGPRs
    files = [line.split()[1] for line in lines[3:]]
    assert files == sorted(files, key=["VGPR", "AGPR", "SGPR"].index)


def test_highest_and_descriptor():
    p = fa_plan()
    assert p.highest() == {"v": 255, "a": 127, "s": 67}
    k = Kernel("k", plan=p)
    k.s_endpgm()
    d = k.descriptor()
    assert d["accum_offset"] == 256 and d["next_free_vgpr"] == 256 + 128
    assert d["next_free_sgpr"] == 68


def test_to_dict_and_diff():
    p = fa_plan()
    d = p.to_dict()
    assert d["regions"]["S_pong"] == {"file": "v", "first": 64, "last": 95, "size": 32, "alias_of": "S"}
    assert d["regions"]["dma_m0"]["size"] == 5
    q = RegisterPlan("fa_fwd2", accum_offset=256, regions={
        "S": v[32:95], "O": v[96:159], "Q": v[160:175], "KV": v[192:255],
        "tid": v[0:0], "tmp": v[1:31], "kernarg": s[0:1], "wg": s[2:2], "sc": s[4:62],
        "acc": a[0:127], "lse": v[176:191]}, aliases={"S_pong": ("S", v[64:95])})
    text = p.diff(q)
    assert "~ Q: v[160:191] -> v[160:175]" in text
    assert "- dma_m0: s[63:67]" in text
    assert "+ lse: v[176:191]" in text
    assert "S:" not in text.replace("S_pong", "")  # unchanged regions are not listed
    assert p.diff(fa_plan()) == ""


def test_random_plans_attribute_every_register():
    """Random disjoint plans: each register maps to exactly the region that holds it."""
    rng = random.Random()
    for _ in range(50):
        cuts = sorted(rng.sample(range(1, 255), 6))
        bounds = list(zip([0] + cuts, cuts + [256]))
        regions = {f"r{i}": v[lo:hi - 1] for i, (lo, hi) in enumerate(bounds)}
        p = RegisterPlan("rnd", regions=regions, strict=True)
        for _ in range(20):
            x = rng.randrange(256)
            want = next(n for n, r in regions.items() if r.index <= x <= r.last)
            assert p.region_of("v", x) == want
        assert p.highest()["v"] == 255


def test_check_instruction_attribution_and_uses():
    p = fa_plan(strict=True)
    k = Kernel("k", plan=p)
    k.v_mfma_f32_32x32x16_bf16(v[32:47], v[160:163], v[192:195], v[32:47])
    k.v_add_f32(v[1], v[2], v[3])
    assert p.uses["S"] == 1 and p.uses["Q"] == 1 and p.uses["KV"] == 1 and p.uses["tmp"] == 1
    with pytest.raises(PlanError) as e:
        k.v_mov_b32(v[1], v[95 + 0])  # allowed: v95 is in S
        k.v_mfma_f32_32x32x16_bf16(v[32:47], v[94:97], v[192:195], v[32:47])
    assert "straddles plan regions" in e.value.message and "O and S" in e.value.message


def test_unplanned_register_strict_vs_loose():
    loose = RegisterPlan("p", regions={"x": v[0:7]})
    k = Kernel("k", plan=loose)
    k.v_mov_b32(v[9], v[1])  # loose: allowed
    strict = RegisterPlan("p", regions={"x": v[0:7]}, strict=True)
    k2 = Kernel("k2", plan=strict)
    with pytest.raises(PlanError) as e:
        k2.v_mov_b32(v[9], v[1])
    assert "v9" in e.value.message and "strict" in e.value.message
    assert e.value.loc.file == __file__


def test_alignment_of_parsed_instructions():
    """Text parsed from elsewhere skips the builders; the plan still catches odd wide tuples."""
    from flyasm.isa.instruction import Instruction
    p = RegisterPlan("p", regions={"x": v[0:15]})
    inst = Instruction("v_pk_add_f32", (v[1:2], v[4:5], v[6:7]), {})
    with pytest.raises(PlanError) as e:
        p.check_instruction(inst)
    assert "v[1:2] in region 'x'" in e.value.message


@pytest.mark.parametrize("kw, words", [
    (dict(regions={"x": v[0:7], "y": v[4:9]}), "overlap"),
    (dict(regions={"x": v[0:300]}), "arch VGPRs end at v255"),
    (dict(regions={"x": v[0:127]}, accum_offset=64), "AGPRs start at accum_offset=64"),
    (dict(regions={"acc": a[0:255]}, accum_offset=260), "accum_offset=260"),
    (dict(regions={"acc": a[0:255]}, accum_offset=6), "accum_offset=6"),
    # 512 unified slots: with 256 AGPRs, arch VGPRs must end below accum_offset
    (dict(regions={"x": v[0:255], "acc": a[0:255]}, accum_offset=252), "AGPRs start at accum_offset=252"),
    (dict(regions={"x": s[96:103]}), "s101"),
    (dict(regions={"x": v[0:7]}, aliases={"y": ("x", v[6:9])}), "outside its parent"),
    (dict(regions={"x": v[0:7]}, aliases={"y": ("z", v[6:7])}), "does not declare"),
    (dict(regions={"x": 5}), "must be a register range"),
])
def test_declaration_errors(kw, words):
    with pytest.raises(PlanError) as e:
        RegisterPlan("bad", **kw)
    assert words in e.value.message
    assert e.value.loc.file == __file__  # points at this file's RegisterPlan(...) line


def test_full_unified_file_is_allowed():
    p = RegisterPlan("full", regions={"x": v[0:255], "acc": a[0:255]}, accum_offset=256)
    assert p.highest() == {"v": 255, "a": 255, "s": -1}


def test_aliases_overlap_only_their_parent():
    p = RegisterPlan("p", regions={"S": v[0:63], "O": v[64:127]},
                     aliases={"S_pong": ("S", v[32:63]), "S_lo": ("S", v[0:31]), "S_pong_hi": ("S_pong", v[48:63])})
    assert p.region_of("v", 50) == "S_pong_hi" and p.region_of("v", 40) == "S_pong" and p.region_of("v", 70) == "O"
    # builders check the same instruction the plan attributes
    inst = builders.make("v_pk_add_f32", v[48:49], v[0:1], v[64:65])
    p.check_instruction(inst)
    assert p.uses == {"S_pong_hi": 1, "S_lo": 1, "O": 1}
