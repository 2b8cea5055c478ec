"""Branch targets come from the encoding (pc + 4 + 4·simm16), not from llvm-objdump's label text.

Why objdump's text cannot be trusted: when two symbols share an address, llvm-objdump sorts the
section's symbols by (address, name) and prints a `<NAME>:` header only for the last of them (a
symbol's range runs to the next symbol, so the earlier ones are empty and skipped), while the
AMDGPU symbolizer names a branch operand after the *first* untyped symbol at the target. Branch
and header then carry different names, and the branch's name is defined nowhere in the text.
aiter's hand-written kernels define such aliases (two labels at one place); the small kernel
below does the same.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from flyasm.asm.driver import assemble
from flyasm.asm.toolchain import find_toolchain
from flyasm.cli import main
from flyasm.codeobj.disasm import disassemble
from flyasm.codeobj.reader import read_code_object
from flyasm.isa.operands import Label

ROOT = Path(__file__).resolve().parents[1]
REPRO = ROOT.parent / "shared" / "aiter" / "repro" / "mla_a8w8_qh8_qseqlen1_gqaratio8_v3.co"

KD = """\t.rodata
\t.p2align 6
\t.amdhsa_kernel k
\t.amdhsa_next_free_vgpr 8
\t.amdhsa_next_free_sgpr 8
\t.amdhsa_accum_offset 4
\t.end_amdhsa_kernel
"""


def _object(tmp_path, body: str, name: str) -> Path:
    text = ("\t.amdgcn_target \"amdgcn-amd-amdhsa--gfx950\"\n\t.text\n\t.globl k\n\t.p2align 8\n\t.type k,@function\nk:\n"
            + body + ".Lk_end:\n\t.size k, .Lk_end-k\n" + KD)
    p = tmp_path / f"{name}.co"
    p.write_bytes(assemble(text))
    return p


def _objdump(path: Path) -> str:
    tc = find_toolchain()
    return subprocess.run([str(tc.objdump), "-d", "--mcpu=gfx950", "--section=.text", str(path)],
                          capture_output=True, text=True, check=True).stdout


def _run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _branch_words(co, kernel):
    """(instruction, target pc) of every branch, the target decoded from the bytes of .text."""
    for inst in kernel.instructions:
        if inst.operands and any(isinstance(o, Label) for o in inst.operands):
            word = int.from_bytes(co.text[inst.pc:inst.pc + 4], "little")
            simm = word & 0xFFFF
            yield inst, inst.pc + 4 + 4 * (simm - 0x10000 if simm & 0x8000 else simm)


def _assert_labels_match_bytes(co, kernel):
    n = 0
    for inst, target in _branch_words(co, kernel):
        label = next(o.name for o in inst.operands if isinstance(o, Label))
        assert kernel.instructions[kernel.labels[label]].pc == target, inst.text()
        n += 1
    return n


ALIASES = """\ts_cmp_eq_u32 s0, 0
\ts_cbranch_scc1 zz_join
\tv_mov_b32 v1, 1.0
zz_join:
aa_join:
\tv_mov_b32 v2, 2.0
\ts_cbranch_scc0 aa_join
\ts_endpgm
"""


def test_two_labels_at_one_address_make_objdump_name_the_branch_and_the_header_differently(tmp_path):
    co_path = _object(tmp_path, ALIASES, "aliases")
    text = _objdump(co_path)
    headers = set(re.findall(r"^[0-9a-f]+ <([^>]+)>:", text, re.M))
    operands = set(re.findall(r"s_cbranch_scc[01] (\w+)", text))
    # the cause, as llvm-objdump shows it: both branches name the first alias, the header the last
    assert operands == {"aa_join"} and "zz_join" in headers and "aa_join" not in headers
    co = read_code_object(co_path)
    at = {s.name: s.value for s in co.symbols if s.name.endswith("_join")}
    assert at["aa_join"] == at["zz_join"]                   # two names, one address
    k = disassemble(co).kernel("k")
    assert _assert_labels_match_bytes(co, k) == 2
    target = k.instructions[k.labels["zz_join"]]
    assert target.text() == "v_mov_b32_e32 v2, 2.0"
    assert [o.name for i in k.instructions for o in i.operands if isinstance(o, Label)] == ["zz_join", "zz_join"]
    r = _run("stats", co_path)
    assert r.exit_code == 0 and "never defined" not in r.output


# s_branch +1 skips one dword: into the second word of the 8-byte VOP3 after it; s_branch -16
# lands 60 bytes before the kernel
@pytest.mark.parametrize("word, where", [
    (0xBF820001, lambda k: f"jumps to 0x{k + 8:x}, into the middle of the instruction at 0x{k + 4:x}"),
    (0xBF82FFF0, lambda k: f"jumps to 0x{k + 4 - 64:x}, outside k [0x{k:x}, 0x{k + 16:x})")], ids=["inside", "outside"])
def test_a_bad_branch_target_is_one_error_naming_both_addresses(tmp_path, word, where):
    co_path = _object(tmp_path, f"\t.long 0x{word:08X}\n\tv_add_f32_e64 v1, v2, v3\n\ts_endpgm\n", "bad")
    base = read_code_object(co_path).kernel("k").addr
    for cmd in ("stats", "check"):
        r = _run(cmd, co_path)
        assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1
        assert f"at 0x{base:x} {where(base)}" in r.output


@pytest.mark.skipif(not REPRO.exists(), reason=f"{REPRO} is absent (../shared holds aiter's kernels)")
def test_aiter_mla_kernel_with_aliased_labels_reads():
    text = _objdump(REPRO)
    headers = set(re.findall(r"^[0-9a-f]+ <([^>]+)>:", text, re.M))
    printed = set(re.findall(r"s_c?branch\w* (label_\w+)", text))
    assert printed - headers, "the object no longer shows objdump's aliasing"
    co = read_code_object(REPRO)
    k = disassemble(co).kernel(co.kernels[0].name)
    assert _assert_labels_match_bytes(co, k) >= 10
    for cmd in ("stats", "check"):
        r = _run(cmd, REPRO)
        assert r.exit_code in (0, 1) and "error:" not in r.output, r.output[-300:]
