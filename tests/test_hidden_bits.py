"""The scale MFMAs' ld_scale prefix: op_sel / op_sel_hi decoded from the bytes, against llvm-mc's
encodings of the same text with explicit values, and the third elements (bits 13 and 14, which
LLVM 22 neither prints nor assembles) carried by raw words that the IR still understands."""
from __future__ import annotations

import itertools

import pytest

from flyasm.asm import mcbatch
from flyasm.isa.hidden_bits import vop3px2_modifiers

MFMAS = ["v_mfma_scale_f32_16x16x128_f8f6f4 v[0:3], v[16:23], v[32:39], v[48:51], v64, v96",
         "v_mfma_scale_f32_32x32x64_f8f6f4 a[0:15], v[16:23], v[32:39], a[0:15], v65, v97"]


def _bit(enc: bytes, n: int) -> int:
    """Bit n of the little-endian 64-bit prefix (VOP3P: op_sel 11..13, op_sel_hi 59, 60, 14)."""
    return (int.from_bytes(enc[:8], "little") >> n) & 1


def test_decode_matches_llvm_encodings():
    cases = [(m, [a, b, 0], [c, d, 0]) for m in MFMAS
             for a, b, c, d in itertools.product((0, 1), repeat=4)]
    lines = [f"{m} op_sel:[{','.join(map(str, s))}] op_sel_hi:[{','.join(map(str, h))}]" for m, s, h in cases]
    encs = mcbatch.encode(lines)
    for (m, sel, hi), e in zip(cases, encs):
        assert e.bytes is not None and len(e.bytes) == 16, e.error
        assert vop3px2_modifiers(e.bytes) == {"op_sel": sel, "op_sel_hi": hi}, e.line
        # the independent formula, from the VOP3P field positions
        assert [_bit(e.bytes, 11), _bit(e.bytes, 12)] == sel[:2]
        assert [_bit(e.bytes, 59), _bit(e.bytes, 60)] == hi[:2]


def test_third_bits_are_decoded_and_survive_the_round_trip(tmp_path):
    """A kernel holding the prefix with bits 13/14 set (as aiter's fp4 GEMMs do) as raw words:
    disassembly gives the instruction with its true 3-element lists, and disasm -> asm gives back
    the bytes."""
    from flyasm.asm.driver import assemble
    from flyasm.codeobj.disasm import disassemble, disasm
    from flyasm.codeobj.reader import read_code_object
    from flyasm.kernel import Kernel

    base = mcbatch.encode([MFMAS[0] + " op_sel:[1,0,0] op_sel_hi:[0,1,0]"])[0].bytes
    w0 = int.from_bytes(base[:4], "little") | (1 << 13) | (1 << 14)
    enc = w0.to_bytes(4, "little") + base[4:]
    assert vop3px2_modifiers(enc) == {"op_sel": [1, 0, 1], "op_sel_hi": [0, 1, 1]}
    k = Kernel("hidden", block=64)
    k.raw(enc, MFMAS[0])
    k.s_endpgm()
    from flyasm.lift.verify import assemble_kernel
    co = read_code_object(assemble_kernel(k))
    mod = disassemble(co)
    inst = mod.kernels[0].instructions[0]
    assert inst.mnemonic.startswith("v_mfma_scale") and [str(o) for o in inst.operands][-2:] == ["v64", "v96"]
    assert inst.modifiers["op_sel"] == [1, 0, 1] and inst.modifiers["op_sel_hi"] == [0, 1, 1]
    back = read_code_object(assemble(disasm(co), name="hidden.s"))
    assert back.text == co.text
    # the .s says so: the words, with the true text as the comment
    line = next(ln for ln in disasm(co).splitlines() if "v_mfma_scale" in ln)
    assert line.lstrip().startswith(".long") and "op_sel:[1,0,1] op_sel_hi:[0,1,1]" in line


@pytest.mark.parametrize("enc", [b"", b"\0" * 8, b"\0" * 16])
def test_not_a_scale_prefix(enc):
    assert vop3px2_modifiers(enc) is None
