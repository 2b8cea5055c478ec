"""diff(): change exactly one thing and the diff reports exactly that."""
from __future__ import annotations

import json

from flyasm import Kernel, a, s, v
from flyasm.plan import RegisterPlan
from flyasm.report.diff import diff, format_diff, is_empty


def kernel(extra_mul=False, lds=0, plan=None, out=v[40]):
    k = Kernel("d", block=256, lds=lds, plan=plan)
    with k.region("load"):
        k.s_load_dwordx2(s[4:5], k.kernarg_ptr, 0)
        k.s_waitcnt(lgkmcnt=0)
    with k.region("math"):
        k.v_add_f32(out, v[0], v[0])
        if extra_mul:
            k.v_mul_f32(v[2], v[1], v[1])
    k.s_endpgm()
    return k


def test_identical_kernels_have_no_diff():
    d = diff(kernel(), kernel())
    assert is_empty(d)
    assert format_diff(d).endswith("no differences")


def test_one_extra_instruction():
    d = diff(kernel(), kernel(extra_mul=True))
    assert d["mix"] == {"(whole program)": {"only_in": None, "changes": {"valu": [1, 2], "total": [4, 5]}},
                        "math": {"only_in": None, "changes": {"valu": [1, 2], "total": [1, 2]}}}
    assert set(d["layout"]["regions"]) == {"math"}
    assert d["layout"]["regions"]["math"]["added"] == "v[1:2]"
    assert d["layout"]["regions"]["math"]["removed"] == ""
    assert d["layout"]["owner_changes"] == [{"registers": "v[1:2]", "a": "(unused)", "b": "math"}]
    assert d["descriptor"] == {} and d["metadata"] == {}    # v41 still bounds the VGPRs
    json.loads(json.dumps(d))


def test_lds_size_only():
    d = diff(kernel(lds=1024), kernel(lds=2048))
    assert d["descriptor"] == {"lds": [1024, 2048]}
    assert d["descriptor_raw"] == {"group_segment_fixed_size": [1024, 2048]}
    assert d["mix"] == {} and not d["layout"]["regions"] and not d["layout"]["owner_changes"]


def test_register_moved_between_regions():
    d = diff(kernel(out=v[40]), kernel(out=v[48]))
    assert d["layout"]["regions"] == {"math": {"a": "v0 v40", "b": "v0 v48", "added": "v48", "removed": "v40",
                                               "size": [2, 2]}}
    assert d["mix"] == {}
    text = format_diff(d)
    assert "v40: math -> (unused)" in text and "v48: (unused) -> math" in text


def test_plan_diff():
    def plan(out):
        return RegisterPlan("p", regions={"tid": v[0:0], "out": out, "ptr": s[4:5], "acc": a[0:3]}, accum_offset=64)
    d = diff(kernel(plan=plan(v[40:41])), kernel(plan=plan(v[40:43]), out=v[40]))
    lay = d["layout"]
    assert lay["source"] == "plan"
    assert lay["changes"] == {"out.last": [41, 43], "out.size": [2, 4]}
    assert "out" in lay["text"] and "tid" not in lay["text"]


def test_code_objects(corpus):
    p1 = str(corpus["mfma_32x32x16_bf16"].path)
    p2 = str(corpus["mfma_32x32x16_f16"].path)
    assert is_empty(diff(p1, p1))
    d = diff(p1, p2)
    mix = d["mix"]["(whole program)"]["changes"]
    assert mix["v_mfma_f32_32x32x16_bf16"] == [1, 0] and mix["v_mfma_f32_32x32x16_f16"] == [0, 1]
    assert d["metadata"]["name"] == ["mfma_32x32x16_bf16", "mfma_32x32x16_f16"]
