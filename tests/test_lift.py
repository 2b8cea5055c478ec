"""flyasm lift: code objects (and .s files) into editable builder files whose build() gives back
the same .text, kernel descriptor and metadata; the checker and `flyasm diff` follow edits."""
from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from flyasm import Kernel, a, m0, s, v
from flyasm.asm.driver import assemble
from flyasm.asm.writer import render
from flyasm.check import check_program
from flyasm.cli import main
from flyasm.codeobj.disasm import disasm
from flyasm.codeobj.reader import read_code_object
from flyasm.errors import FlyasmError
from flyasm.isa.operands import Waitcnt
from flyasm.lift import lift
from flyasm.lift.verify import assemble_kernel, differences, load_kernel, verify
from flyasm.report.diff import diff, format_diff, is_empty
from flyasm.report.program import as_program

ROOT = Path(__file__).resolve().parents[1]


def _load_by_path(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _lift(src, tmp_path: Path, **kw):
    res = lift(src, **kw)
    out = tmp_path / f"{kw.get('stem') or res.name + '_kernel'}.py"
    res.write(out)
    return res, out


def _verdict(x) -> list[tuple[str, int, int]]:
    """Findings as (rule, consumer index, producer index): comparable between a .co and a Kernel."""
    return [(f.rule, f.consumer.index, f.producer.index if f.producer else -1)
            for f in check_program(as_program(x).items())]


def _same(orig_co, k) -> list[str]:
    return differences(read_code_object(orig_co), read_code_object(assemble_kernel(k)))


# ---- exactness -------------------------------------------------------------------------------

def test_corpus_lifts_byte_exact_with_the_same_verdict(corpus, tmp_path):
    n_co = n_inst = n_raw = 0
    for name, ck in sorted(corpus.items()):
        res, out = _lift(ck.path, tmp_path)
        k = load_kernel(out)
        assert _same(ck.path, k) == [], name
        assert _verdict(ck.path) == _verdict(k), name
        text = out.read_text()
        assert "k.set_foreign(" in text and "def build():" in text and "RegisterPlan(" in text
        n_co, n_inst, n_raw = n_co + 1, n_inst + res.instructions, n_raw + res.raw
    print(f"\nlift: {n_co} corpus code objects, {n_inst} instructions ({n_raw} raw), byte-exact")
    assert n_co == len(corpus) >= 16


def _own_kernel() -> Kernel:
    """Regions, a loop, AGPR MFMA, DPP, SDWA, LDS DMA with m0, a literal: our own writer's output."""
    k = Kernel("lift_own", block=256, lds=4096)
    out = k.arg("out", "ptr")
    n = k.arg("n", "i32")
    k.s_load_dwordx2(s[4:5], k.kernarg_ptr, out.offset)
    k.s_load_dword(s[6], k.kernarg_ptr, n.offset)
    k.s_waitcnt(Waitcnt(lgkmcnt=0))
    with k.region("math"):
        k.v_add_f32(v[1], -v[2], abs(v[3]))
        k.s_nop(1)
        k.v_mov_b32_dpp(v[5], v[1], quad_perm=[1, 0, 3, 2], row_mask=0xF, bank_mask=0xF)
        k.v_add_u32_sdwa(v[6], v[1], v[2], dst_sel="WORD_1", dst_unused="UNUSED_PAD", src0_sel="BYTE_0",
                         src1_sel="DWORD")
        with k.region("mfma"):
            k.v_mfma_f32_16x16x32_bf16(a[0:3], v[8:11], v[12:15], a[0:3], cbsz=1, abid=1, blgp=2)
    k.s_mov_b32(m0, s[6])
    k.s_nop(0)
    k.buffer_load_dword(v[1], s[8:11], 0, offen=True, lds=True)
    k.label("loop")
    with k.region("loop"):
        k.s_sub_u32(s[6], s[6], 1)
        k.s_cmp_eq_u32(s[6], 0)
        k.s_cbranch_scc0("loop")
    k.v_mul_f32(v[7], 0x3FC00000, v[7])
    k.s_nop(4)
    k.global_store_dwordx4(v[1], a[0:3], s[4:5])
    k.s_endpgm()
    return k


def test_own_kernel_from_co_and_from_s(tmp_path):
    k = _own_kernel()
    res0 = k.build(tmp_path / "own", check=False)
    res, out = _lift(res0.co_path, tmp_path)
    assert _same(res0.co_path, load_kernel(out)) == []
    # From our .s: the region comments come back as regions, label names are kept.
    res_s, out_s = _lift(res0.asm_path, tmp_path, stem="from_s")
    text = out_s.read_text()
    assert 'with k.region("math"):' in text and 'with k.region("mfma"):' in text and 'k.label("loop")' in text
    ks = load_kernel(out_s)
    assert _same(res0.co_path, ks) == []
    assert [r.path for r in ks.regions] == [r.path for r in k.regions]


def test_flagship_kernel_lifts_byte_exact(tmp_path):
    path = ROOT / "kernels" / "fa_fwd.py"
    if not path.exists():
        pytest.skip("kernels/fa_fwd.py is not in this tree")
    fa = _load_by_path("flyasm_test_lift_fa_fwd", path)
    co = tmp_path / "fa.co"
    co.write_bytes(assemble_kernel(fa.build()))
    res, out = _lift(co, tmp_path)
    k = load_kernel(out)
    assert _same(co, k) == []
    assert _verdict(co) == _verdict(k)
    assert res.functions > 3 and any(r.name.startswith("mfma_acc") for r in res.plan)


def test_raw_words_survive(tmp_path):
    # Two encodings llvm-mc would write differently from their text (see test_roundtrip).
    odd = ["0xD1010A01, 0x00020702", "0xC0020180, 0x10000010"]
    text, _ = render(_own_kernel())
    text = text.replace("\ts_endpgm\n", "".join(f"\t.long {w}\n" for w in odd) + "\ts_endpgm\n", 1)
    co = tmp_path / "odd.co"
    co.write_bytes(assemble(text))
    res, out = _lift(co, tmp_path)
    src = out.read_text()
    assert res.raw == 2
    assert "k.raw([0xd1010a01, 0x00020702], 'v_add_f32_e64" in src
    assert _same(co, load_kernel(out)) == []


def test_foreign_descriptor_and_metadata_from_s(corpus, tmp_path):
    """User SGPRs, kernarg preload, private segment, float modes and extra metadata keys that
    flyasm never writes for its own kernels come back exactly."""
    text = disasm(corpus["buffer_rw"].path)
    repl = {"user_sgpr_count": 8, "user_sgpr_dispatch_ptr": 1, "user_sgpr_queue_ptr": 1,
            "user_sgpr_kernarg_preload_length": 2, "user_sgpr_kernarg_preload_offset": 0,
            "enable_private_segment": 1, "private_segment_fixed_size": 48, "float_round_mode_32": 2,
            "float_denorm_mode_16_64": 1, "ieee_mode": 0, "fp16_overflow": 1}
    for key, val in repl.items():
        text, nsub = re.subn(rf"(\.amdhsa_{key}) \d+", rf"\g<1> {val}", text)
        assert nsub == 1, key
    text = text.replace("    .wavefront_size: 64", "    .wavefront_size: 64\n    .language: OpenCL C\n"
                        "    .uniform_work_group_size: 1", 1)
    s_path = tmp_path / "foreign.s"
    s_path.write_text(text)
    expected = read_code_object(assemble(text))
    assert expected.kernels[0].metadata[".language"] == "OpenCL C"
    res, out = _lift(s_path, tmp_path, stem="foreign_kernel")
    lifted = out.read_text()
    for key in ("user_sgpr_dispatch_ptr", "user_sgpr_queue_ptr", "user_sgpr_kernarg_preload_length",
                "enable_private_segment", "float_round_mode_32", "fp16_overflow"):
        assert f"'{key}': " in lifted, key
    assert "'.language': 'OpenCL C'" in lifted
    k = load_kernel(out)
    assert differences(expected, read_code_object(assemble_kernel(k))) == []
    # Our own kernels never carry a foreign record, so their text is unchanged by the option.
    assert _own_kernel().foreign is None


def test_foreign_register_counts_grow_with_an_edit(corpus, tmp_path):
    from flyasm.isa.builders import make
    res, out = _lift(corpus["mfma_32x32x16_bf16"].path, tmp_path)
    k = load_kernel(out)
    k.stream[-1:-1] = [make("v_mov_b32", v[200], v[0]), make("s_mov_b32", s[90], 0)]
    co = read_code_object(assemble_kernel(k))
    kd, meta = co.kernels[0].descriptor, co.kernels[0].metadata
    assert kd.vgpr_alloc >= 201 and meta[".vgpr_count"] == 201
    assert kd.sgpr_alloc >= 91 and meta[".sgpr_count"] >= 91
    orig = read_code_object(corpus["mfma_32x32x16_bf16"].path).kernels[0]
    assert orig.descriptor.vgpr_alloc < 201 and orig.descriptor.sgpr_alloc < 91


# ---- editing round trip ----------------------------------------------------------------------

def _edit(out: Path, tmp_path: Path, name: str, fn) -> tuple[Path, Path]:
    """Apply fn to the lifted text; write NAME.py and build NAME.co."""
    p = tmp_path / f"{name}.py"
    p.write_text(fn(out.read_text()))
    co = tmp_path / f"{name}.co"
    co.write_bytes(assemble_kernel(load_kernel(p)))
    return p, co


def test_edits_show_in_checker_and_diff(corpus, tmp_path):
    orig = corpus["mfma_32x32x16_bf16"].path
    res, out = _lift(orig, tmp_path)
    assert _verdict(orig) == []
    text = out.read_text()
    mfma = next(ln for ln in text.splitlines() if "k.v_mfma_f32_32x32x16_bf16(" in ln)
    acc = re.search(r"\((\w+),", mfma).group(1)

    # 1. Move the last store (it reads the MFMA result) into the MFMA shadow, before the s_nop.
    stores = [ln for ln in text.splitlines() if "k.global_store_dwordx4(" in ln]

    def move(t):
        t = t.replace(stores[-1] + "\n", "", 1)
        return t.replace(mfma + "\n", mfma + "\n" + stores[-1] + "\n", 1)
    p1, co1 = _edit(out, tmp_path, "moved", move)
    v_py, v_co = _verdict(p1), _verdict(co1)
    assert v_py == v_co and v_py, "the checker must flag the read in the MFMA shadow, in .py and .co alike"
    found = check_program(as_program(co1).items())
    assert all("v_mfma_f32_32x32x16_bf16" in f.producer.text and "global_store_dwordx4" in f.consumer.text
               for f in found)
    d = diff(str(orig), str(co1))
    assert d["stream"]["removed"] == [] and d["stream"]["added"] == []
    assert len(d["stream"]["moved"]) == 1 and "global_store_dwordx4" in d["stream"]["moved"][0]["text"]
    assert d["mix"] == {} and d["descriptor"] == {} and d["metadata"] == {}
    assert "moved #" in format_diff(d)

    # 2. Rename a register region: same bytes, same verdict; the plan diff names exactly it.
    p2, co2 = _edit(out, tmp_path, "renamed", lambda t: re.sub(rf"\b{acc}\b", "acc_tile", t))
    assert differences(read_code_object(orig), read_code_object(co2)) == []
    assert _verdict(p2) == []
    d2 = diff(str(out), str(p2))
    assert d2["layout"]["source"] == "plan"
    assert set(d2["layout"]["changes"]) == {f"{acc}.{f}" for f in ("file", "first", "last", "size")} | \
        {f"acc_tile.{f}" for f in ("file", "first", "last", "size")}
    assert d2["mix"] == {} and d2["stream"] == {"removed": [], "added": [], "changed": [], "moved": [], "rows": []}
    assert is_empty(diff(str(orig), str(co2)))

    # 3. Delete the wait before the MFMA: the checker names the MFMA and a load; diff shows the wait.
    wait = next(ln for ln in text.splitlines() if "k.s_waitcnt(vmcnt=0)" in ln)
    p3, co3 = _edit(out, tmp_path, "nowait", lambda t: t.replace(wait + "\n", "", 1))
    v3 = _verdict(co3)
    assert v3 and v3 == _verdict(p3)
    found = check_program(as_program(co3).items())
    assert any("v_mfma_f32_32x32x16_bf16" in f.consumer.text and "global_load_dwordx4" in f.producer.text
               for f in found)
    d3 = diff(str(orig), str(co3))
    assert d3["stream"]["added"] == [] and d3["stream"]["moved"] == []
    assert [r["text"] for r in d3["stream"]["removed"]] == ["s_waitcnt vmcnt(0)"]
    assert d3["mix"]["(whole program)"]["changes"] == {"s_waitcnt": [2, 1], "total": [18, 17]}
    assert d3["descriptor"] == {} and d3["metadata"] == {}


# ---- big kernels -------------------------------------------------------------------------------

def _synthetic():
    return _load_by_path("flyasm_bench_lift_speed", ROOT / "benchmarks" / "lift_speed.py").synthetic_kernel


def test_big_kernel_splits_into_files(tmp_path):
    k = _synthetic()(2000, loops=3)
    co = tmp_path / "big.co"
    co.write_bytes(assemble_kernel(k))
    res, out = _lift(co, tmp_path, stem="big_kernel", func_limit=100, file_limit=600)
    parts = sorted((tmp_path / "big_kernel_parts").glob("part_*.py"))
    assert len(parts) >= 3 and res.functions >= 20
    assert all(len(p.read_text().splitlines()) < 1200 for p in parts)
    main_text = out.read_text()
    assert 'F = load_parts(__file__, "big_kernel_parts")' in main_text
    assert 'with k.region("loop_' in main_text
    assert _same(co, load_kernel(out)) == []


@pytest.mark.slow
def test_30k_instruction_kernel_lifts_byte_exact(tmp_path):
    k = _synthetic()(30000)
    co = tmp_path / "big30k.co"
    co.write_bytes(assemble_kernel(k))
    res, out = _lift(co, tmp_path, stem="big30k")
    assert res.instructions > 29000
    verify(out, co)


# ---- CLI and errors ----------------------------------------------------------------------------

def test_cli_lift(corpus, tmp_path):
    out = tmp_path / "x_kernel.py"
    r = CliRunner().invoke(main, ["lift", str(corpus["lds_dma"].path), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "build() gives back the same bytes" in r.output and out.exists()
    r = CliRunner().invoke(main, ["check", str(out)])
    assert r.exit_code == 0 and "no findings" in r.output


def test_cli_lift_errors_are_one_line(tmp_path):
    junk = tmp_path / "junk.co"
    junk.write_bytes(b"not an elf at all")
    for args in (["lift", str(junk)], ["lift", str(tmp_path / "missing.co")]):
        r = CliRunner().invoke(main, args)
        assert r.exit_code == 2 and r.output.count("\n") == 1 and "Traceback" not in r.output, r.output
    with pytest.raises(FlyasmError, match="holds 2 kernels .*--kernel NAME"):
        lift(_two_kernels(tmp_path))


def _two_kernels(tmp_path) -> Path:
    k1, k2 = Kernel("first"), Kernel("second")
    for k in (k1, k2):
        k.v_mov_b32(v[1], 7)
        k.s_endpgm()
    t1, t2 = (re.sub(r"(?m)^\t\.(file|loc) .*\n", "", render(x)[0]) for x in (k1, k2))
    body2 = t2.split("\t.text\n", 1)[1]
    kd2 = body2[body2.index("\t.rodata"):body2.index("\t.amdgpu_metadata")]
    text = t1.replace("\t.rodata\n", body2[:body2.index("\t.rodata")] + "\t.rodata\n", 1)
    text = text.replace("\t.amdgpu_metadata", kd2.replace("\t.rodata\n", "") + "\t.amdgpu_metadata", 1)
    p = tmp_path / "two.co"
    p.write_bytes(assemble(text))
    return p
