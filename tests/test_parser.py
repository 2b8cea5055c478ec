"""The .s parser: our writer's output, clang's, llvm-objdump's; errors with file:line; .loc in DWARF."""
from __future__ import annotations

import inspect
import re
import subprocess

import pytest

from flyasm.asm.parser import parse_asm
from flyasm.asm.toolchain import find_toolchain
from flyasm.asm.writer import render
from flyasm.errors import ParseError
from flyasm.isa.operands import Special, Waitcnt, a, s, v
from flyasm.kernel import Kernel

m0 = Special("m0")


def build_demo() -> tuple[Kernel, dict[str, int]]:
    """A kernel whose builder lines we know (line numbers recorded with inspect)."""
    lines = {}
    k = Kernel("parse_demo", block=128, lds=512)
    x = k.arg("x", "ptr")
    k.arg("n", "i32")
    k.s_load_dwordx2(s[4:5], k.kernarg_ptr, x.offset); lines["load"] = inspect.currentframe().f_lineno
    k.s_waitcnt(Waitcnt(lgkmcnt=0))
    with k.region("outer"):
        k.v_add_f32(v[1], -v[2], abs(v[3])); lines["add"] = inspect.currentframe().f_lineno
        with k.region("inner"):
            k.v_mfma_f32_32x32x16_bf16(a[0:15], v[4:7], v[8:11], a[0:15], cbsz=2, abid=1, blgp=3)
            lines["mfma"] = inspect.currentframe().f_lineno - 1   # the call is the line above
        k.s_nop(1)   # VALU write -> DPP read needs 2 wait states
        k.v_mov_b32_dpp(v[5], v[1], row_shr=1, row_mask=0xF, bank_mask=0xF, bound_ctrl=1)
    k.label("top")
    k.s_sub_u32(s[6], s[6], 1)
    k.s_cbranch_scc0("top")
    k.s_endpgm(); lines["end"] = inspect.currentframe().f_lineno
    return k, lines


def test_parse_our_output_restores_the_ir():
    k, lines = build_demo()
    text, _ = render(k)
    mod = parse_asm(text, "demo.s")
    pk = mod.kernel("parse_demo")
    assert [i.key() for i in pk.instructions] == [i.key() for i in k.stream]
    assert [i.loc for i in pk.instructions] == [i.loc for i in k.stream]
    assert [i.region for i in pk.instructions] == [i.region for i in k.stream]
    assert pk.instructions[3].region == ("outer", "inner") and pk.instructions[2].region == ("outer",)
    assert pk.instructions[-1].region == ()
    assert pk.instructions[0].loc.line == lines["load"] and pk.instructions[0].loc.file == __file__
    assert pk.labels[".Ltop"] == k.labels[".Ltop"].index  # kernel labels are assembler-local
    d = k.descriptor()
    for key in ("group_segment_fixed_size", "kernarg_size", "next_free_vgpr", "accum_offset"):
        assert pk.descriptor[key] == d[key]
    assert [(x["name"], x["offset"], x["size"], x["value_kind"]) for x in pk.args] == \
        [(x.name, x.offset, x.size, x.value_kind) for x in k.args]
    assert mod.target == "amdgcn-amd-amdhsa--gfx950"
    assert mod.metadata["amdhsa.version"] == [1, 2]
    assert any(d_.startswith(".size parse_demo") for _, d_ in mod.directives)


def test_parse_clang_assembly(corpus, corpus_build, tmp_path):
    tc = find_toolchain()
    src = corpus["loop_divergent"].source
    out = tmp_path / "ld.s"
    # the corpus's own flags, so the code is the same as the corpus .co
    subprocess.run([str(tc.clang), *corpus_build.CLANG_FLAGS, "-g", "-S", str(src), "-o", str(out)], check=True)
    mod = parse_asm(out.read_text(), str(out))
    k = mod.kernel("loop_divergent")
    ref = corpus["loop_divergent"].instructions("loop_divergent")
    assert [re.sub(r"_e(32|64)$", "", i.mnemonic) for i in k.instructions] == \
        [re.sub(r"_e(32|64)$", "", r.mnemonic) for r in ref]
    assert k.descriptor["next_free_vgpr"] > 0 and k.descriptor["user_sgpr_kernarg_segment_ptr"] == 1
    assert len(k.args) == len(corpus["loop_divergent"].kernel_metadata()[".args"])
    assert any(i.loc and i.loc.file.endswith("loop_divergent.c") for i in k.instructions)
    # every branch names a label that exists
    for i in k.instructions:
        if i.name.startswith(("s_branch", "s_cbranch")):
            assert i.operands[0].name in k.labels


def test_parse_objdump_text(corpus):
    tc = find_toolchain()
    text = subprocess.run([str(tc.objdump), "-d", "--mcpu=gfx950", str(corpus["wave_dpp_scan"].path)],
                          capture_output=True, text=True, check=True).stdout
    mod = parse_asm(text, "dump.txt")
    k = mod.kernel("wave_dpp_scan")
    assert k.addr is not None and all(i.pc is not None for i in k.instructions)
    assert all(e is not None for e in k.encodings)
    assert any(i.is_dpp for i in k.instructions)


def test_long_words_with_comment_become_raw_instruction():
    text = ("k:\n\t.long 0xd1010a01, 0x00020702  ; v_add_f32_e64 v1, v2, |v3|\n\ts_endpgm\n")
    k = parse_asm(text, "raw.s").kernel("k")
    inst = k.instructions[0]
    assert inst.raw == bytes.fromhex("010a01d102070200") and inst.name == "v_add_f32"


@pytest.mark.parametrize("text, where, what", [
    ("k:\n\ts_mov_b32 s0, s1\n\tv_frobnicate v1\n", "bad.s:3", "frobnicate"),
    ("\ts_endpgm\n", "bad.s:1", "outside any function"),
    ("k:\n\t.loc 3 10 0\n\ts_endpgm\n", "bad.s:2", "file 3"),
    (".amdhsa_kernel k\n\t.amdhsa_kernarg_size lots\n.end_amdhsa_kernel\n", "bad.s:2", "integer"),
    ("k:\n\ts_branch nowhere\n", "bad.s", "never defined"),
    (".amdgpu_metadata\n---\n", "bad.s", "end_amdgpu_metadata"),
])
def test_errors_name_file_and_line(text, where, what):
    with pytest.raises(ParseError) as e:
        parse_asm(text, "bad.s")
    msg = str(e.value)
    assert where in msg and what in msg and "\n" not in msg


def test_loc_rows_point_at_builder_lines(tmp_path):
    k, lines = build_demo()
    res = k.build(tmp_path)
    tc = find_toolchain()
    out = subprocess.run([str(tc.bin / "llvm-dwarfdump"), "--debug-line", str(res.co_path)],
                         capture_output=True, text=True, check=True).stdout
    assert __file__.split("/")[-1] in out
    rows = [(int(m.group(1), 16), int(m.group(2))) for m in
            re.finditer(r"^0x([0-9a-f]{16})\s+(\d+)\s+\d+\s+\d+", out, re.M)]
    rows_lines = {ln for _, ln in rows}
    for key in ("load", "add", "mfma", "end"):
        assert lines[key] in rows_lines, (key, lines[key], sorted(rows_lines))
    # the first row is at the kernel entry and names the first builder line
    from flyasm.codeobj.reader import read_code_object
    co = read_code_object(res.co)
    first = min(rows)
    assert first == (co.kernels[0].addr, lines["load"])
