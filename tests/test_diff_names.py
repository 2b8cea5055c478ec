"""Plan, region and label names travel in our .s and .co (asm/names.py); `flyasm diff` takes
builder parameters per side, shows plan changes for .s/.co, and pairs changed instructions."""
from __future__ import annotations

import textwrap

from click.testing import CliRunner

from flyasm.cli import main
from flyasm.report.program import as_program, from_python

BUILDER = textwrap.dedent('''
    from flyasm import Kernel, v, s
    from flyasm.plan import RegisterPlan

    def build(n=40, imm=1, wide=False):
        plan = RegisterPlan("tiny", regions={"ptr": s[4:5], "acc": v[1:4] if wide else v[1:2], "tmp": v[8:9]})
        k = Kernel("names_k", block=64, plan=plan)
        p = k.arg("p", "ptr")
        with k.region("args"):
            k.s_load_dwordx2(s[4:5], k.kernarg_ptr, p.offset)
            k.s_waitcnt(lgkmcnt=0)
        k.label("loop")
        with k.region("body"):
            with k.region("adds"):
                for i in range(n):
                    k.v_add_u32(v[1], imm + i, v[1])
            k.s_cbranch_scc1(k.L("loop"))
        k.s_endpgm()
        return k
''')


def _run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _builder(tmp_path):
    p = tmp_path / "names_k.py"
    p.write_text(BUILDER)
    return p


def test_plan_regions_and_labels_survive_s_and_co(tmp_path):
    py = _builder(tmp_path)
    k = from_python(str(py), wide=True)
    res = k.build(tmp_path / "out")
    for path in (res.asm_path, res.co_path):
        p = as_program(path)
        assert p.plan is not None and p.plan.to_dict()["regions"] == k.plan.to_dict()["regions"], path
        assert [i.region for i in p.stream] == [i.region for i in k.stream], path
        (name, ld), = k.labels.items()
        assert p.labels.get(name) == ld.index and name.endswith("loop"), (path, p.labels)
        assert not any(n.startswith(".L_pc_") for n in p.labels), path
    out = _run("stats", res.co_path).output
    assert "body/adds" in out and ".Lloop" in out and "bb@0" in out


def test_diff_params_per_side_and_plan_change_for_co(tmp_path):
    py = _builder(tmp_path)
    r = _run("diff", py, py, "-pb", "wide=true")
    assert r.exit_code == 0 and "~ acc: v[1:2] -> v[1:4]" in r.output
    r2 = _run("diff", py, py, "-p", "B:wide=true")
    assert r2.output == r.output
    assert "no differences" in _run("diff", py, py, "-p", "wide=true").output
    a = from_python(str(py)).build(tmp_path / "a")
    b = from_python(str(py), wide=True).build(tmp_path / "b")
    for x, y in ((a.co_path, b.co_path), (a.asm_path, b.asm_path)):
        out = _run("diff", x, y).output
        assert "register plan:" in out and "~ acc: v[1:2] -> v[1:4]" in out, out
    r = _run("diff", a.co_path, b.co_path, "-pa", "wide=true")
    assert r.exit_code == 2 and "already built" in r.output


def test_changed_instructions_are_paired_not_truncated(tmp_path):
    py = _builder(tmp_path)
    out = _run("diff", py, py, "-pb", "imm=3").output
    # constants 1..40 -> 3..42: 38 align, the first two leave A and two new ones enter B
    ops = [ln.split()[0] for ln in out.splitlines() if ln.startswith("  ") and ln.split()[0] in "~-+"]
    assert ops == ["-", "-", "+", "+"], out
    out = _run("diff", py, py, "-pb", "n=100", "-pa", "n=10").output
    assert "90 added" in out and "... and 30 more rows (-v lists them)" in out
    full = _run("diff", py, py, "-pb", "n=100", "-pa", "n=10", "-v").output
    assert full.count("\n  + #") == 90 and "more rows" not in full


def test_replaced_stretch_reads_side_by_side(tmp_path):
    py = tmp_path / "rep.py"
    py.write_text(textwrap.dedent('''
        from flyasm import Kernel, v
        def build(shift=2):
            k = Kernel("rep_k", block=64)
            for i in range(50):
                k.v_lshlrev_b32(v[2 + i % 8], shift, v[1])
            k.s_endpgm()
            return k
    '''))
    out = _run("diff", py, py, "-pb", "shift=3").output
    changed = [ln for ln in out.splitlines() if ln.startswith("  ~ #")]
    assert len(changed) == 50 and "50 changed, 0 removed, 0 added" in out
    assert "v_lshlrev_b32 v2, 2, v1  =>  v_lshlrev_b32 v2, 3, v1" in changed[0]
