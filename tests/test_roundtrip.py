"""Byte-exact round trips: foreign code objects through disasm -> .s -> asm, and our kernels
through IR -> text -> llvm-mc -> ld.lld -> .co -> llvm-objdump -> IR."""
from __future__ import annotations

import multiprocessing as mp

import pytest

from flyasm.asm.driver import assemble
from flyasm.codeobj.disasm import disassemble, disasm, render_module, verify_encodings
from flyasm.codeobj.reader import read_code_object
from flyasm.isa.operands import Label, Special, Waitcnt, a, s, v
from flyasm.kernel import Kernel

m0 = Special("m0")


def _assert_same_object(orig, back):
    assert back.text == orig.text, "the .text bytes differ"
    assert [k.name for k in back.kernels] == [k.name for k in orig.kernels]
    for ko, kb in zip(orig.kernels, back.kernels):
        assert kb.descriptor.raw == ko.descriptor.raw, f"{ko.name}: kernel descriptor bytes differ"
    assert back.metadata == orig.metadata
    assert back.e_flags == orig.e_flags and back.abi_version == orig.abi_version


def test_corpus_byte_exact(corpus):
    n_co = n_inst = n_raw = 0
    for name, ck in sorted(corpus.items()):
        orig = read_code_object(ck.path)
        mod = disassemble(orig)
        rep = verify_encodings(mod)
        text = render_module(mod, orig)
        back = read_code_object(assemble(text, orig.code_object_version, name=f"{name}.s"))
        _assert_same_object(orig, back)
        n_co += 1
        n_inst += rep.instructions
        n_raw += rep.raw
    print(f"\ncorpus round trip: {n_co} code objects, {n_inst} instructions, {n_raw} needed raw words")
    assert n_co == len(corpus) >= 16


def mix_kernel() -> Kernel:
    """VOP3 modifiers, DPP, SDWA, MFMA with cbsz/abid/blgp, buffer LDS DMA, branches and labels."""
    k = Kernel("rt_mix", block=256)
    out = k.arg("out", "ptr")
    n = k.arg("n", "i32")
    k.s_load_dwordx2(s[4:5], k.kernarg_ptr, out.offset)
    k.s_load_dword(s[6], k.kernarg_ptr, n.offset)
    k.s_waitcnt(Waitcnt(lgkmcnt=0))
    with k.region("math"):
        k.v_add_f32(v[1], -v[2], abs(v[3]))
        k.v_fma_f32(v[4], -abs(v[1]), v[2], 0.5, clamp=True)
        k.s_nop(1)   # VALU write -> DPP read needs 2 wait states
        k.v_mov_b32_dpp(v[5], v[1], quad_perm=[1, 0, 3, 2], row_mask=0xF, bank_mask=0xF)
        k.v_add_u32_sdwa(v[6], v[1], v[2], dst_sel="WORD_1", dst_unused="UNUSED_PAD", src0_sel="BYTE_0",
                         src1_sel="DWORD")
        with k.region("mfma"):
            k.v_mfma_f32_16x16x32_bf16(a[0:3], v[8:11], v[12:15], a[0:3], cbsz=1, abid=1, blgp=2)
    k.s_mov_b32(m0, s[6])
    k.s_nop(0)   # SALU m0 write -> LDS DMA needs 1 wait state
    k.buffer_load_dword(v[1], s[8:11], 0, offen=True, lds=True)
    k.s_cbranch_scc1("skip")
    k.label("loop")
    k.s_sub_u32(s[6], s[6], 1)
    k.s_cmp_eq_u32(s[6], 0)
    k.s_cbranch_scc0("loop")
    k.label("skip")
    k.v_mul_f32(v[7], 0x3FC00000, v[7])       # a literal
    k.s_endpgm()
    return k


def small_kernel(lds: int = 1024) -> Kernel:
    k = Kernel("rt_small", block=64, lds=lds, workgroup_ids="xy")
    k.v_lshlrev_b32(v[1], 2, v[0])
    k.ds_write_b32(v[1], v[0], offset=16)
    k.s_waitcnt(Waitcnt(lgkmcnt=0))
    k.ds_read_b32(v[2], v[1], offset=16)
    k.s_waitcnt(Waitcnt(lgkmcnt=0))
    k.v_permlane32_swap_b32(v[2], v[3])
    k.s_endpgm()
    return k


def _norm_keys(insts, labels: dict[str, int]):
    """Instruction keys with label operands replaced by the index they point at."""
    out = []
    for inst in insts:
        name, ops, mods = inst.key()
        ops = tuple(f"@{labels[o.name]}" if isinstance(o, Label) else t for o, t in zip(inst.operands, ops))
        out.append((name, ops, mods))
    return out


@pytest.mark.parametrize("make", [mix_kernel, small_kernel])
def test_own_kernel_ir_round_trip(make):
    k = make()
    res = k.build()
    co = read_code_object(res.co)
    mod = disassemble(co)
    dk = mod.kernel(k.name)
    body = dk.instructions[:len(k.stream)]
    assert all(i.name == "s_nop" for i in dk.instructions[len(k.stream):])   # only padding after the body
    ours = _norm_keys(k.stream, {n: d.index for n, d in k.labels.items()})
    theirs = _norm_keys(body, dk.labels)
    assert theirs == ours
    assert [i.pc for i in body] == sorted(i.pc for i in body)
    rep = verify_encodings(mod)
    assert rep.raw == 0, rep.mismatched
    back = read_code_object(assemble(render_module(mod, co)))
    _assert_same_object(co, back)


def test_inexpressible_encodings_become_long_words():
    # v_add_f32_e64 with |v3| written through a different abs bit, and an s_load with junk in the
    # unused soffset bits: llvm-objdump prints them, llvm-mc encodes that text differently.
    odd = ["0xD1010A01, 0x00020702", "0xC0020180, 0x10000010"]
    k = mix_kernel()
    from flyasm.asm.writer import render
    text, _ = render(k)
    text = text.replace("\ts_endpgm\n", "".join(f"\t.long {w}\n" for w in odd) + "\ts_endpgm\n", 1)
    co = read_code_object(assemble(text))
    mod = disassemble(co)
    rep = verify_encodings(mod)
    assert rep.raw == 2
    assert {bytes(m[2]).hex() for m in rep.mismatched} == {
        b"".join(int(w, 0).to_bytes(4, "little") for w in o.split(", ")).hex() for o in odd}
    out = render_module(mod, co)
    assert out.count(".long 0x") == 2
    _assert_same_object(co, read_code_object(assemble(out)))
    # without the raw words the bytes would not survive: proves the check is needed
    co2 = read_code_object(assemble(disasm(co, verify=False)))
    assert co2.text != co.text


def test_same_inputs_same_bytes(tmp_path, monkeypatch):
    monkeypatch.setenv("FLYASM_CACHE", str(tmp_path / "cache"))
    r1 = mix_kernel().build(tmp_path / "a")
    monkeypatch.setenv("FLYASM_CACHE", str(tmp_path / "cache2"))   # a cold cache must agree too
    r2 = mix_kernel().build(tmp_path / "b")
    assert r1.asm == r2.asm and r1.co == r2.co
    assert (tmp_path / "a" / "rt_mix.co").read_bytes() == (tmp_path / "b" / "rt_mix.co").read_bytes()


def _build_in_child(args):
    cache, out = args
    import os
    os.environ["FLYASM_CACHE"] = cache
    from flyasm.asm import driver
    res = small_kernel(lds=2048 + 4).build(out)   # an LDS size no other test uses: a fresh cache key
    return res.asm, res.co


def test_parallel_builds_agree(tmp_path):
    cache = str(tmp_path / "cache")
    ctx = mp.get_context("spawn")
    with ctx.Pool(2) as pool:
        results = pool.map(_build_in_child, [(cache, str(tmp_path / "p0")), (cache, str(tmp_path / "p1"))])
    (a1, c1), (a2, c2) = results
    assert a1 == a2 and c1 == c2 and c1[:4] == b"\x7fELF"
    cached = list((tmp_path / "cache" / "co").glob("*.co"))
    assert len(cached) == 1 and cached[0].read_bytes() == c1
    assert not list((tmp_path / "cache" / "co").glob(".*"))   # no temp files left behind


def test_code_object_v6_round_trip():
    k = Kernel("rt_v6", block=64, code_object=6)
    k.v_mov_b32(v[1], 7)
    k.s_endpgm()
    co = read_code_object(k.build().co)
    assert co.code_object_version == 6 and co.abi_version == 4
    back = read_code_object(assemble(disasm(co), 6))
    _assert_same_object(co, back)
