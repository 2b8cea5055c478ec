"""Findings grouped by the fix that clears them; `flyasm check` modes; citations users can open;
the small presentation bugs (DPP finding twice, parse location twice, click's source as the
location, BuildResult printing its bytes)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from flyasm.check import check_program, program_from_kernel, program_from_lines
from flyasm.check.fixes import apply_fixes, group_fixes
from flyasm.check.report import format_findings
from flyasm.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _loads_then_uses(n_loads=8, n_uses=4):
    lines = [f"global_load_dword v{10 + i}, v[2:3], off" for i in range(n_loads)]
    lines += [f"v_add_f32_e32 v{30 + i}, v{10 + i}, v{10 + i}" for i in range(n_uses)]
    return lines


def _with_wait(lines, at, wait):
    return program_from_lines(lines[:at] + [wait] + lines[at:])


def test_one_wait_for_four_consumers_is_the_weakest_that_clears_all():
    lines = _loads_then_uses()
    items = program_from_lines(lines)
    f = check_program(items)
    # each consumer alone would take vmcnt(7 - i): the first suggestion is vmcnt(7)
    assert sorted(x.fix for x in f) == [f"s_waitcnt vmcnt({n})" for n in (4, 5, 6, 7)]
    fixes = group_fixes(items, f)
    assert len(fixes) == 1 and fixes[0].text == "s_waitcnt vmcnt(4)" and fixes[0].anchor == 8
    # independently: vmcnt(4) before the first use clears everything, vmcnt(5) does not
    assert check_program(_with_wait(lines, 8, "s_waitcnt vmcnt(4)")) == []
    assert check_program(_with_wait(lines, 8, "s_waitcnt vmcnt(5)")) != []
    assert check_program(apply_fixes(items, fixes)) == []


def test_a_load_between_consumers_stays_separate():
    lines = _loads_then_uses(4, 1) + ["global_load_dword v20, v[2:3], off", "v_mov_b32 v40, v20"]
    items = program_from_lines(lines)
    fixes = group_fixes(items, check_program(items))
    # one wait before the first use cannot cover a load issued after it
    assert [fx.text for fx in fixes] == ["s_waitcnt vmcnt(3)", "s_waitcnt vmcnt(0)"]
    assert check_program(apply_fixes(items, fixes)) == []


def _gemm_without_barrier_wait():
    sys.path.insert(0, str(ROOT / "kernels"))
    import gemm_bf16
    items = program_from_kernel(gemm_bf16.build())
    at = next(i for i in range(len(items) - 1) if not isinstance(items[i], str)
              and items[i].text() == "s_waitcnt vmcnt(0)" and items[i + 1].name == "s_barrier")
    return items[:at] + items[at + 1:], at


def test_deleted_wait_in_gemm_is_one_fix_and_verbose_lists_all():
    items, at = _gemm_without_barrier_wait()
    f = check_program(items)
    assert len(f) > 10                      # each (consumer, DMA) pair is its own finding
    fixes = group_fixes(items, f)
    # the deleted wait is the first fix; the LDS address analysis may leave a few reads it cannot
    # prove disjoint from later DMAs, each group under one wait
    assert (fixes[0].text, fixes[0].anchor) == ("s_waitcnt vmcnt(0)", at) and len(fixes) <= 3 < len(f)
    text = format_findings(f, items)
    assert text.count("put s_waitcnt") == len(fixes) and "more (-v lists them)" in text
    full = format_findings(f, items, verbose=True)
    assert "more (-v" not in full and len(full.splitlines()) == len(f) + len(fixes)
    assert check_program(apply_fixes(items, fixes)) == []


DPP = ["v_max_f32 v5, v3, v4", "v_max_f32_dpp v5, v5, v5 quad_perm:[1,0,3,2] row_mask:0xf bank_mask:0xf"]


def test_dpp_hazard_reported_once_with_llvm_and_isa_citation():
    f = check_program(program_from_lines(DPP))
    assert [x.rule for x in f] == ["valu_vgpr_dpp"]
    assert "notes" not in f[0].message
    assert "GCNHazardRecognizer::checkDPPHazards" in f[0].message and "CDNA4 ISA §4.5" in f[0].message
    text = format_findings(f, program_from_lines(DPP))
    assert text.startswith("put s_nop 1 before") and "notes §" not in text


def _asm(tmp_path, body, name="k"):
    p = tmp_path / f"{name}.s"
    p.write_text(f"\t.amdgcn_target \"amdgcn-amd-amdhsa--gfx950\"\n\t.text\n{name}:\n"
                 + "".join(f"\t{x}\n" for x in body) + "\ts_endpgm\n")
    return p


def test_check_modes_insert_reports_fixes_writes_and_exits_nonzero(tmp_path):
    src = _asm(tmp_path, ["v_mov_b32 v3, 1.0", "v_mov_b32 v4, 2.0"] + DPP)
    r = _run("check", src)
    assert r.exit_code == 1 and "put s_nop 1 before" in r.output
    r = _run("check", "--mode", "insert", src)
    assert r.exit_code == 1 and "would insert 1 instruction" in r.output and "s_nop 1" in r.output
    assert "no findings" not in r.output
    fixed = tmp_path / "fixed.s"
    r = _run("check", "--mode", "insert", src, "-o", fixed)
    assert r.exit_code == 1 and fixed.exists()
    lines = [x.strip() for x in fixed.read_text().splitlines()]
    assert lines[lines.index("s_nop 1") + 1].startswith("v_max_f32_dpp")
    assert _run("check", fixed).exit_code == 0
    r = _run("check", "--mode", "insert", fixed)
    assert r.exit_code == 0 and "nothing to insert" in r.output
    assert _run("check", src, "-o", fixed).exit_code == 2       # -o only with insert


def test_check_help_explains_each_mode():
    out = _run("check", "--help").output
    for mode in ("verify", "isa", "insert"):
        assert f"  {mode}  " in out
    assert "-o" in out and "Exit 1" in out


def test_isa_mode_counts_only_nops_and_valu_as_wait_states(tmp_path):
    # VALU write v5 -> DPP read of v5 needs 2 wait states (notes §4.2); two SALU moves between them are two
    # wait states for LLVM's recogniser (verify) but none in the ISA guide's wording (isa)
    src = _asm(tmp_path, ["v_mov_b32 v3, 1.0", "v_mov_b32 v4, 2.0", DPP[0], "s_mov_b32 s0, 0", "s_mov_b32 s1, 0", DPP[1]])
    assert _run("check", src).exit_code == 0
    r = _run("check", "--mode", "isa", src)
    assert r.exit_code == 1 and "s_nop" in r.output
    assert _run("check", "--mode", "strict", src).exit_code == 2      # the old name is gone, not silently kept


def test_parse_error_names_the_location_once(tmp_path):
    src = _asm(tmp_path, ["v_bogus_f32 v1, v2"])
    r = _run("check", src)
    assert r.exit_code == 2
    assert r.output.count(f"{src}:4") == 1 and "v_bogus_f32" in r.output


def test_cli_error_does_not_point_at_click(tmp_path):
    p = tmp_path / "a.json"
    p.write_text("{}")
    for cmd in ("stats", "check"):
        r = _run(cmd, p)
        assert r.exit_code == 2 and "is not a .co, .s or .py file" in r.output
        assert "click" not in r.output and "core.py" not in r.output


@pytest.mark.usefixtures("tmp_path")
def test_build_result_prints_sizes_not_bytes(tmp_path):
    from flyasm import Kernel
    k = Kernel("tiny_repr", block=64)
    k.s_endpgm()
    res = k.build(tmp_path)
    text = repr(res)
    assert len(text) < 200 and "\\x" not in text and "tiny_repr" in text
    assert f"co={len(res.co)} bytes" in text
