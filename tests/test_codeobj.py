"""Code-object reader: descriptor fields, metadata, disassembly -> IR, bad bytes."""
from __future__ import annotations

import re
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flyasm.asm.toolchain import find_toolchain
from flyasm.codeobj.descriptor import KernelDescriptor
from flyasm.codeobj.disasm import disassemble
from flyasm.codeobj.metadata import parse_yaml, to_yaml
from flyasm.codeobj.reader import read_code_object
from flyasm.errors import CodeObjectError
from flyasm.isa.operands import Label, s, v
from flyasm.kernel import Kernel


def test_descriptor_verified_example():
    # reference notes §5.1: next_free_vgpr 264, accum_offset 256 -> these words
    raw = bytearray(64)
    raw[44:48] = (0x3F).to_bytes(4, "little")
    raw[48:52] = (0x00AC0060).to_bytes(4, "little")
    raw[52:56] = (0x84).to_bytes(4, "little")
    raw[56:58] = (0x8).to_bytes(2, "little")
    kd = KernelDescriptor.decode(bytes(raw))
    f = kd.fields
    assert f["granulated_workitem_vgpr_count"] == 32 and kd.vgpr_alloc == 264
    assert f["granulated_wavefront_sgpr_count"] == 1
    assert f["enable_dx10_clamp"] == 1 and f["enable_ieee_mode"] == 1 and f["float_denorm_mode_16_64"] == 3
    assert f["float_denorm_mode_32"] == 0
    assert f["user_sgpr_count"] == 2 and f["enable_sgpr_workgroup_id_x"] == 1 and f["enable_sgpr_workgroup_id_y"] == 0
    assert kd.accum_offset == 256 and f["enable_sgpr_kernarg_segment_ptr"] == 1
    assert kd.inexpressible() == []
    raw[60] = 1
    assert KernelDescriptor.decode(bytes(raw)).inexpressible() == ["reserved bytes"]


def _objdump_kd(path, sym):
    """llvm-objdump's own decoding of a kernel descriptor (an independent reader)."""
    tc = find_toolchain()
    out = subprocess.run([str(tc.objdump), "-D", "--mcpu=gfx950", f"--disassemble-symbols={sym}.kd", str(path)],
                         capture_output=True, text=True, check=True).stdout
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"\.amdhsa_(\w+) (\d+)", out)}


def test_corpus_descriptors_match_llvm(corpus):
    checked = 0
    for name, ck in corpus.items():
        co = read_code_object(ck.path)
        assert co.mach == "gfx950" and co.code_object_version == 5 and co.abi_version == 3
        assert co.e_flags == 0x54F and co.target == "amdgcn-amd-amdhsa--gfx950"
        assert sorted(k.name for k in co.kernels) == sorted(ck.symbols)
        for k in co.kernels:
            llvm = _objdump_kd(ck.path, k.name)
            d = k.descriptor
            ours = {"group_segment_fixed_size": d.group_segment_fixed_size,
                    "private_segment_fixed_size": d.private_segment_fixed_size,
                    "kernarg_size": d.kernarg_size, "accum_offset": d.accum_offset}
            ours |= {direc: d.fields[f] for f, direc in __import__(
                "flyasm.codeobj.descriptor", fromlist=["DIRECTIVES"]).DIRECTIVES.items()}
            common = set(llvm) & set(ours)
            assert len(common) >= 25
            assert {c: ours[c] for c in common} == {c: llvm[c] for c in common}, name
            assert k.metadata is not None and k.metadata[".name"] == k.name
            assert k.metadata[".kernarg_segment_size"] == d.kernarg_size
            assert k.addr - k.kd_addr == d.kernel_code_entry_byte_offset
            checked += 1
        assert co.metadata == ck.metadata()
    assert checked >= 16


def test_disassembly_ir(corpus):
    ck = corpus["loop_divergent"]
    co = read_code_object(ck.path)
    mod = disassemble(co)
    k = mod.kernel("loop_divergent")
    assert sum(len(e) for e in k.encodings) == len(co.text)
    pcs = [i.pc for i in k.instructions]
    assert pcs[0] == k.addr == co.kernels[0].addr - co.text_addr and pcs == sorted(pcs)
    # the objdump reference listing agrees instruction by instruction over the symbol
    ref = ck.instructions("loop_divergent")
    body = [i for i in k.instructions if i.pc < k.addr + k.size]
    assert len(body) == len(ref)
    assert [i.name for i in body] == [re.sub(r"_e(32|64)$", "", r.mnemonic) for r in ref]
    branches = [(i, idx) for idx, i in enumerate(body) if i.operands and isinstance(i.operands[0], Label)]
    assert len(branches) >= 5
    backward = 0
    for inst, idx in branches:
        tgt = k.labels[inst.operands[0].name]
        simm = int.from_bytes(k.encodings[idx][0:2], "little", signed=True)
        assert k.instructions[tgt].pc == inst.pc + 4 + 4 * simm
        assert inst.operands[0].name == f".L_pc_0x{inst.pc + 4 + 4 * simm:x}"
        backward += tgt <= idx
    assert backward >= 2
    # padding after s_endpgm is kept exactly
    pad = k.instructions[len(body):]
    assert pad and all(i.name == "s_nop" for i in pad)


def test_metadata_yaml_round_trip():
    doc = {"amdhsa.version": [1, 2], "amdhsa.target": "amdgcn-amd-amdhsa--gfx950",
           "amdhsa.kernels": [{".name": "k", ".args": [{".size": 8, ".value_kind": "global_buffer"}, {}],
                               ".uses_dynamic_stack": False, ".reqd_workgroup_size": [64, 1, 1],
                               ".language": "123", ".odd": "it's: odd", ".f": 0.25, ".empty": []}]}
    assert parse_yaml(to_yaml(doc)) == doc


def _tiny_co() -> bytes:
    k = Kernel("tiny", block=64)
    p = k.arg("p", "ptr")
    k.s_load_dwordx2(s[4:5], k.kernarg_ptr, p.offset)
    k.v_mov_b32(v[1], 3)
    k.s_endpgm()
    return k.build().co


_TINY = None


def _tiny():
    global _TINY
    if _TINY is None:
        _TINY = _tiny_co()
    return _TINY


def test_bad_inputs_are_one_error(tmp_path):
    with pytest.raises(CodeObjectError, match="not an ELF"):
        read_code_object(b"hello")
    with pytest.raises(CodeObjectError, match="cannot read"):
        read_code_object(tmp_path / "missing.co")
    data = _tiny()
    with pytest.raises(CodeObjectError):
        read_code_object(data[:200])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_elf_bytes_never_crash(data):
    blob = bytearray(_tiny())
    kind = data.draw(st.sampled_from(["truncate", "flip", "splice"]))
    if kind == "truncate":
        blob = blob[:data.draw(st.integers(0, len(blob) - 1))]
    elif kind == "flip":
        for _ in range(data.draw(st.integers(1, 8))):
            i = data.draw(st.integers(0, len(blob) - 1))
            blob[i] = data.draw(st.integers(0, 255))
    else:
        i = data.draw(st.integers(0, len(blob) - 1))
        blob[i:i + 16] = data.draw(st.binary(min_size=16, max_size=16))
    try:
        co = read_code_object(bytes(blob))
    except CodeObjectError as e:
        assert "\n" not in str(e)
        return
    assert co.text is not None and isinstance(co.kernels, list)
    try:
        mod = disassemble(co)
    except CodeObjectError as e:
        assert "\n" not in str(e)
        return
    assert sum(len(e or b"") for k in mod.kernels for e in k.encodings) == len(co.text)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=6))
def test_random_text_words_disassemble_or_fail_cleanly(words):
    blob = bytearray(_tiny())
    co = read_code_object(bytes(blob))
    off = co.text_addr - [s_ for s_ in co.symbols if s_.name == "tiny"][0].value  # 0: .text starts at tiny
    base = bytes(blob).find(co.text)
    for i, w in enumerate(words):
        blob[base + off + 4 * i: base + off + 4 * i + 4] = w.to_bytes(4, "little")
    try:
        mod = disassemble(bytes(blob))
    except CodeObjectError as e:
        assert "\n" not in str(e)
        return
    assert sum(len(e or b"") for k in mod.kernels for e in k.encodings) == len(co.text)
