"""The instruction reference generated from the tables: every method has a real docstring whose
example, written as a Python call, builds the same instruction llvm-mc encodes for the table's
assembly; `flyasm doc` prints it; help() shows operand names and modifiers."""
from __future__ import annotations

import inspect
import re

import pytest
from click.testing import CliRunner

import flyasm
from flyasm.asm.mcbatch import encode
from flyasm.asm.toolchain import find_toolchain
from flyasm.cli import main
from flyasm.isa import tables
from flyasm.isa.doc import doc, example
from flyasm.isa.operands import Expr

NAMES = sorted(n for n, e in tables.load()["instructions"].items() if "unsupported" not in e)


def _have_llvm() -> bool:
    try:
        find_toolchain()
        return True
    except flyasm.FlyasmError:
        return False


def test_every_method_has_a_docstring_with_operands_in_order():
    k = flyasm.Kernel("doc_k")
    for name in NAMES:
        d = getattr(k, name).__doc__
        ops = [o["name"] for o in tables.lookup(name).info.get("operands", [])]
        assert d.startswith(f"{name}: ") and "Encoding: " in d, name
        pos = [d.index(f"  {i + 1}. {o}: ") for i, o in enumerate(ops)]
        assert pos == sorted(pos), name            # the operands are listed in assembly order
        sig = inspect.signature(getattr(k, name))
        params = [re.sub(r"_\d+$", "", p.name) for p in sig.parameters.values()]   # vcc, vcc_2
        assert params[:len(ops)] == ops or name == "s_waitcnt", name


@pytest.mark.skipif(not _have_llvm(), reason="needs llvm-mc with gfx950 (tools/setup.sh installs it)")
def test_every_example_builds_and_encodes_like_the_table_assembly():
    ns = {n: getattr(flyasm, n) for n in ("v", "s", "a", "m0", "vcc", "exec_", "scc", "off", "sext")}
    ns["Expr"] = Expr
    ours, theirs, names = [], [], []
    for name in NAMES:
        ex = example(name)
        if ex is None:
            continue
        k = flyasm.Kernel("doc_k")
        eval(ex[0], {**ns, "k": k})                    # the Python line of the docstring
        assert len(k.stream) == 1, name
        ours.append(k.stream[0].text())
        theirs.append(tables.lookup(name).info["example"])
        names.append(name)
    assert len(names) > 1200
    a, b = encode(ours), encode(theirs)
    bad = [(n, x.line, x.error) for n, x in zip(names, a) if x.bytes is None]
    assert not bad, bad[:5]
    differ = [(n, x.line, y.line) for n, x, y in zip(names, a, b) if x.bytes != y.bytes]
    assert not differ, differ[:5]


def test_doc_command_prints_the_reference():
    r = CliRunner().invoke(main, ["doc", "v_permlane32_swap_b32"], catch_exceptions=False)
    assert r.exit_code == 0
    assert "1. vdst: v, 1 dword (read and written)" in r.output and "2. src0" in r.output
    assert "k.v_permlane32_swap_b32(v[0], v[16])" in r.output and "swap lanes 32..63" in r.output
    r = CliRunner().invoke(main, ["doc", "v_nosuch_f32"], catch_exceptions=False)
    assert r.exit_code == 2 and "no instruction 'v_nosuch_f32'" in r.output


def test_modifier_ranges_and_spellings_are_listed():
    d = doc("v_add_f32")
    for spelled in ("quad_perm=[a, b, c, d]", "row_mirror=True", "row_shr=1..15", "row_mask=0..15",
                    "dst_sel=", "clamp=True", "-x negates"):
        assert spelled in d, spelled
    assert "offset=0..4095" in doc("buffer_load_dwordx4") and "lds=True" in doc("buffer_load_dwordx4")
    assert "16x16x32" in doc("v_mfma_f32_16x16x32_bf16") and "4 passes" in doc("v_mfma_f32_16x16x32_bf16")
    assert "Kernel" in flyasm.Kernel.__doc__ and "help(k.v_add_f32)" in flyasm.Kernel.__doc__
    assert "bf16" in flyasm.Kernel.arg.__doc__
