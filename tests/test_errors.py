"""User mistakes: each raises a FlyasmError of one sentence that starts with THIS file's path:line.

Each case is a small function; the line marked `# BAD` is the one the message must name.
"""
from __future__ import annotations

import inspect

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flyasm.errors import FlyasmError, ParseError
from flyasm.isa.builders import make
from flyasm.isa.operands import a, s, v
from flyasm.isa.syntax import parse_instruction
from flyasm.kernel import Kernel
from flyasm.plan import RegisterPlan
from flyasm.sched import interleave


def wrong_operand_kind():
    make("v_add_f32", v[1], a[2], v[3])  # BAD


def misaligned_tuple():
    make("v_mfma_f32_32x32x16_bf16", v[0:15], v[17:20], v[20:23], v[0:15])  # BAD


def misaligned_sgpr_pair():
    make("s_load_dwordx2", s[5:6], s[0:1], 0)  # BAD


def immediate_out_of_range():
    make("s_setprio", 4)  # BAD


def s_nop_16():
    make("s_nop", 16)  # BAD


def vmcnt_64():
    make("s_waitcnt", vmcnt=64)  # BAD


def lgkmcnt_16():
    k = Kernel("k")
    k.s_waitcnt(lgkmcnt=16)  # BAD


def literal_where_only_inline():
    make("v_mfma_f32_32x32x16_bf16", v[0:15], v[16:19], v[20:23], 1234)  # BAD


def offset_out_of_range():
    make("buffer_load_dword", v[1], v[2], s[4:7], 0, offen=True, offset=5000)  # BAD


def modifier_without_value():
    make("buffer_load_dword", v[1], v[2], s[4:7], 0, offen=True, offset=True)  # BAD


def bad_modifier():
    make("v_add_f32", v[1], v[2], v[3], offset=4)  # BAD


def wrong_operand_count():
    make("v_add_f32", v[1], v[2])  # BAD


def wrong_register_width():
    make("ds_read_b128", v[0:1], v[4])  # BAD


def unknown_mnemonic_did_you_mean():
    k = Kernel("k")
    k.v_mfma_f32_32x32x16_bf61(v[0:15], v[16:19], v[20:23], v[0:15])  # BAD


def register_outside_file():
    make("v_mov_b32", v[600], v[1])  # BAD


def reversed_range():
    make("v_mov_b32", v[5:3], v[1])  # BAD


def two_literals():
    make("s_add_u32", s[1], 0x1234, 0x5678)  # BAD


def mfma_c_d_files_differ():
    make("v_mfma_f32_32x32x16_bf16", a[0:15], v[16:19], v[20:23], v[32:47])  # BAD


def vop3_literal():
    make("v_cmp_eq_u32", s[4:5], 0x1234, v[1])  # BAD


def overlapping_plan_regions():
    RegisterPlan("p", regions={"S": v[32:95], "O": v[90:159]})  # BAD


def vgpr_agpr_over_512():
    RegisterPlan("p", accum_offset=252, regions={"x": v[0:255], "acc": a[0:255]})  # BAD


def bad_accum_offset():
    RegisterPlan("p", accum_offset=130, regions={"x": v[0:15]})  # BAD


def alias_outside_parent():
    RegisterPlan("p", regions={"S": v[0:31]}, aliases={"S_hi": ("S", v[16:47])})  # BAD


def unplanned_register_strict():
    k = Kernel("k", plan=RegisterPlan("p", regions={"x": v[0:7]}, strict=True))
    k.v_mov_b32(v[9], v[1])  # BAD


def operand_straddles_regions():
    k = Kernel("k", plan=RegisterPlan("p", regions={"x": v[0:7], "y": v[8:15]}))
    k.v_pk_add_f32(v[6:7], v[6:7], v[8:9])
    k.ds_read_b128(v[6:9], v[0])  # BAD


def lds_over_160k():
    Kernel("k", lds=160 * 1024 + 4)  # BAD


def bad_arg_type():
    k = Kernel("k")
    k.arg("x", "ptr32")  # BAD


def duplicate_arg():
    k = Kernel("k")
    k.arg("x", "ptr")
    k.arg("x", "i32")  # BAD


def duplicate_label():
    k = Kernel("k")
    k.label("loop")
    k.s_nop(0)
    k.label("loop")  # BAD


def undefined_label():
    k = Kernel("k")
    k.s_branch("nowhere")  # BAD
    k.s_endpgm()
    k.validate()


def kernel_not_ending_in_endpgm():
    k = Kernel("k")
    k.v_mov_b32(v[1], v[2])  # BAD
    k.validate()


def bad_kernel_name():
    Kernel("my kernel")  # BAD


def block_too_big():
    Kernel("k", block=2048)  # BAD


def workgroup_id_not_enabled():
    k = Kernel("k", workgroup_ids="x")
    k.workgroup_id("y")  # BAD


def region_expect_mismatch():
    k = Kernel("k")
    with k.region("qk", expect={"mfma": 2}):  # BAD
        k.v_mfma_f32_32x32x16_bf16(v[0:15], v[16:19], v[20:23], v[0:15])


def interleave_non_mfma():
    k = Kernel("k")
    interleave(k, [make("v_add_f32", v[1], v[2], v[3])], [])  # BAD


def waitcnt_both_forms():
    make("s_waitcnt", 0, vmcnt=0)  # BAD


def not_an_operand():
    make("v_mov_b32", v[1], [2])  # BAD


CASES = [wrong_operand_kind, misaligned_tuple, misaligned_sgpr_pair, immediate_out_of_range, s_nop_16, vmcnt_64,
         lgkmcnt_16, literal_where_only_inline, offset_out_of_range, modifier_without_value, bad_modifier,
         wrong_operand_count, wrong_register_width, unknown_mnemonic_did_you_mean, register_outside_file,
         reversed_range, two_literals, mfma_c_d_files_differ, vop3_literal, overlapping_plan_regions,
         vgpr_agpr_over_512, bad_accum_offset, alias_outside_parent, unplanned_register_strict,
         operand_straddles_regions, lds_over_160k, bad_arg_type, duplicate_arg, duplicate_label, undefined_label,
         kernel_not_ending_in_endpgm, bad_kernel_name, block_too_big, workgroup_id_not_enabled,
         region_expect_mismatch, interleave_non_mfma, waitcnt_both_forms, not_an_operand]

# Words each message must contain (it says what is wrong, not just that something is).
WORDS = {
    "wrong_operand_kind": "a2", "misaligned_tuple": "even", "misaligned_sgpr_pair": "multiple of 2",
    "immediate_out_of_range": "0..3", "s_nop_16": "0..15", "vmcnt_64": "vmcnt(64)", "lgkmcnt_16": "lgkmcnt(16)",
    "literal_where_only_inline": "inline constants", "offset_out_of_range": "0..4095",
    "modifier_without_value": "needs a value", "bad_modifier": "no modifier 'offset'",
    "wrong_operand_count": "takes 3 operands", "wrong_register_width": "4 registers wide",
    "unknown_mnemonic_did_you_mean": "did you mean v_mfma_f32_32x32x16_bf16", "register_outside_file": "v600",
    "reversed_range": "ends before it starts", "two_literals": "2 different literals",
    "mfma_c_d_files_differ": "VGPRs or both AGPRs", "vop3_literal": "no literal",
    "overlapping_plan_regions": "overlap", "vgpr_agpr_over_512": "accum_offset=252", "bad_accum_offset": "130",
    "alias_outside_parent": "outside its parent", "unplanned_register_strict": "v9",
    "operand_straddles_regions": "straddles", "lds_over_160k": "160 KiB", "bad_arg_type": "ptr32",
    "duplicate_arg": "twice", "duplicate_label": "defined twice", "undefined_label": "nowhere",
    "kernel_not_ending_in_endpgm": "s_endpgm", "bad_kernel_name": "identifier", "block_too_big": "2048",
    "workgroup_id_not_enabled": "workgroup id y", "region_expect_mismatch": "expected 2",
    "interleave_non_mfma": "among the MFMAs", "waitcnt_both_forms": "not both", "not_an_operand": "not an operand",
}


def one_sentence(msg: str) -> bool:
    body = msg.rstrip(".")
    return "\n" not in msg and ". " not in body.replace("e.g. ", "").replace("..", "") and len(msg) < 300


def bad_line(fn) -> int:
    lines, first = inspect.getsourcelines(fn)
    marked = [first + i for i, line in enumerate(lines) if line.rstrip().endswith("# BAD")]
    assert len(marked) == 1, fn.__name__
    return marked[0]


def test_at_least_30_cases():
    assert len(CASES) >= 30 and set(WORDS) == {f.__name__ for f in CASES}


@pytest.mark.parametrize("case", CASES, ids=lambda f: f.__name__)
def test_user_mistake_is_one_sentence_at_the_bad_line(case):
    with pytest.raises(FlyasmError) as e:
        case()
    err = e.value
    assert str(err).startswith(f"{__file__}:{bad_line(case)}: "), str(err)
    assert one_sentence(err.message), err.message
    assert WORDS[case.__name__] in err.message, err.message


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(codec="ascii"), max_size=60)
       | st.builds(lambda m, t: f"{m} {t}", st.sampled_from(["v_add_f32", "s_waitcnt", "buffer_load_dword",
                                                             "v_mfma_f32_32x32x16_bf16", "ds_read_b64", "s_nop"]),
                   st.text(alphabet="va s[]:0123456789,-|()x.offen set:", max_size=40)))
def test_random_text_raises_only_flyasm_errors(text):
    try:
        parse_instruction(text)
    except (ParseError, FlyasmError):
        pass
