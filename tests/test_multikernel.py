"""Code objects holding several kernels, some without `.size` (st_size 0, as in aiter's hand-written
objects): every command picks one with --kernel, reads it to the next function (or .text's end),
and a kernel with no instructions is one error, never an empty report or an IndexError."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from flyasm.asm.driver import assemble
from flyasm.cli import main
from flyasm.codeobj.reader import read_code_object

# first: has .size; second and third: none (st_size 0). Padding between them is llvm-mc's s_nop.
MULTI_S = """\
\t.amdgcn_target "amdgcn-amd-amdhsa--gfx950"
\t.text
\t.p2align 8
\t.globl first
\t.type first,@function
first:
\ts_load_dwordx2 s[2:3], s[0:1], 0
\tv_lshlrev_b32 v1, 2, v0
\ts_waitcnt lgkmcnt(0)
\tglobal_store_dword v1, v0, s[2:3]
\ts_endpgm
.Lfirst_end:
\t.size first, .Lfirst_end-first
\t.p2align 8
\t.globl second
\t.type second,@function
second:
\ts_mov_b32 s4, 3
.Lloop:
\ts_sub_u32 s4, s4, 1
\ts_cmp_eq_u32 s4, 0
\ts_cbranch_scc0 .Lloop
\ts_endpgm
\t.p2align 8
\t.globl third
\t.type third,@function
third:
\tv_mov_b32 v1, 1.0
\ts_endpgm
\t.rodata
""" + "".join(f"""\t.p2align 6
\t.amdhsa_kernel {name}
\t\t.amdhsa_user_sgpr_kernarg_segment_ptr {kp}
\t\t.amdhsa_next_free_vgpr 2
\t\t.amdhsa_next_free_sgpr 8
\t\t.amdhsa_accum_offset 4
\t.end_amdhsa_kernel
""" for name, kp in (("first", 1), ("second", 0), ("third", 0))) + """\t.amdgpu_metadata
---
amdhsa.kernels:
""" + "".join(f"""  - .name: {name}
    .symbol: {name}.kd
    .kernarg_segment_size: {ks}
    .kernarg_segment_align: 8
    .group_segment_fixed_size: 0
    .private_segment_fixed_size: 0
    .wavefront_size: 64
    .sgpr_count: 8
    .vgpr_count: 2
    .max_flat_workgroup_size: 64
""" + ("""    .args:
      - .name: out
        .offset: 0
        .size: 8
        .value_kind: global_buffer
        .address_space: global
""" if ks else "") for name, ks in (("first", 8), ("second", 0), ("third", 0))) + """amdhsa.version:
  - 1
  - 2
...
\t.end_amdgpu_metadata
"""

NAMES = ("first", "second", "third")


@pytest.fixture(scope="module")
def multi(tmp_path_factory):
    p = tmp_path_factory.mktemp("multi") / "multi.co"
    p.write_bytes(assemble(MULTI_S, name="multi.s"))
    return p


def _run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_reader_extents(multi):
    co = read_code_object(multi)
    ks = {k.name: k for k in co.kernels}
    assert list(ks) == list(NAMES)
    assert ks["first"].sized and ks["first"].size == 5 * 4 + 2 * 4   # s_load and global_store are 8 bytes
    assert not ks["second"].sized and ks["second"].size == ks["third"].addr - ks["second"].addr
    assert not ks["third"].sized and ks["third"].addr + ks["third"].size == co.text_addr + len(co.text)
    assert len(ks["third"].code) == 8    # v_mov_b32 with an inline constant, s_endpgm


def test_every_command_picks_a_kernel(multi, tmp_path):
    from flyasm.emu.program import load_program
    from flyasm.report.program import as_program
    first_op = {"first": "s_load_dwordx2", "second": "s_mov_b32", "third": "v_mov_b32"}
    for name in NAMES:
        r = _run("info", multi, "--kernel", name)
        assert r.exit_code == 0 and f"kernel {name} " in r.output
        assert sum(f"kernel {n} " in r.output for n in NAMES) == 1, r.output
        p = as_program(multi, name)
        assert p.name == name and p.stream[0].name == first_op[name]
        assert any(i.name == "s_endpgm" for i in p.stream)
        for cmd in ("stats", "check", "plan"):
            r = _run(cmd, multi, "--kernel", name)
            assert r.exit_code == 0, (cmd, name, r.output)
        r = _run("stats", multi, "--kernel", name, "--json")
        assert r.exit_code == 0 and f'"{name}"' in r.output
        prog = load_program(multi.read_bytes(), name)
        assert prog.insts[0].name == first_op[name] and prog.insts[0].pc == 0
        r = _run("diff", multi, multi, "--kernel", name)
        assert r.exit_code == 0, r.output
    # second's loop branches back to its own second instruction
    prog = load_program(multi.read_bytes(), "second")
    assert prog.targets == {3: 1}


def test_unknown_kernel_is_one_line(multi):
    for cmd in ("info", "stats", "check", "plan", "disasm", "lift"):
        r = _run(cmd, multi, "--kernel", "nope")
        assert r.exit_code == 2 and r.output.count("\n") == 1, (cmd, r.output)
        assert "nope" in r.output and "Traceback" not in r.output
    r = _run("lift", multi)
    assert r.exit_code == 2 and "holds 3 kernels" in r.output and "--kernel" in r.output


def test_disasm_round_trip_whole_and_per_kernel(multi, tmp_path):
    orig = read_code_object(multi)
    r = _run("disasm", multi, "-o", tmp_path / "all.s")
    assert r.exit_code == 0
    back = read_code_object(assemble((tmp_path / "all.s").read_text(), name="all.s"))
    assert back.text == orig.text
    assert [(k.name, k.sized, k.descriptor.raw, k.metadata) for k in back.kernels] == \
        [(k.name, k.sized, k.descriptor.raw, k.metadata) for k in orig.kernels]
    for name in NAMES:
        out = tmp_path / f"{name}.s"
        assert _run("disasm", multi, "--kernel", name, "-o", out).exit_code == 0
        one = read_code_object(assemble(out.read_text(), name=out.name))
        ko, kb = orig.kernel(name), one.kernel(name)
        assert [k.name for k in one.kernels] == [name]
        assert kb.code == ko.code and kb.sized == ko.sized and kb.metadata == ko.metadata


@pytest.mark.parametrize("name", NAMES)
def test_lift_each_kernel(multi, tmp_path, name):
    out = tmp_path / f"{name}_k.py"
    r = _run("lift", multi, "--kernel", name, "-o", out)
    assert r.exit_code == 0 and "gives back the same bytes" in r.output, r.output
    if name != "first":
        assert "sized=False" in out.read_text()


def test_kernel_that_decodes_to_nothing_is_an_error(multi, monkeypatch):
    """The decode level refuses an empty kernel (the reader already refuses a zero extent; this
    guards the report and emulator decoders themselves)."""
    from flyasm.codeobj import reader
    from flyasm.emu import program as emu_program
    from flyasm.errors import FlyasmError
    from flyasm.report.program import from_codeobj

    co = read_code_object(multi)
    co.kernel("third").size = 0
    with pytest.raises(FlyasmError, match="third .*no instructions"):
        from_codeobj(co, "third")

    real = reader.read_code_object

    def emptied(src):
        c = real(src)
        c.kernel("third").size = 0
        return c
    monkeypatch.setattr(reader, "read_code_object", emptied)
    emu_program.clear_cache()
    with pytest.raises(FlyasmError, match="third decodes to no instructions"):
        emu_program.load_program(multi.read_bytes(), "third")
    emu_program.clear_cache()
