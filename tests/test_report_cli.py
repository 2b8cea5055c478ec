"""flyasm stats / diff / plan on files."""
from __future__ import annotations

import json

from click.testing import CliRunner

from flyasm.cli import main


def test_stats_diff_plan(corpus, tmp_path):
    a = str(corpus["mfma_16x16x32_f16_kloop"].path)
    b = str(corpus["mfma_16x16x32_bf16"].path)
    r = CliRunner().invoke(main, ["stats", a, "--json", "--model"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["counts"]["mfma"] == 1 and d["model"]["spans"][0]["mfma_busy"] == 16
    r = CliRunner().invoke(main, ["stats", a, "--model"])
    assert r.exit_code == 0 and "not a measurement" in r.output and "occupancy" in r.output
    r = CliRunner().invoke(main, ["diff", a, b, "--json"])
    assert r.exit_code == 0
    assert json.loads(r.output)["mix"]["(whole program)"]["changes"]["v_mfma_f32_16x16x32_f16"] == [1, 0]
    html, svg = tmp_path / "m.html", tmp_path / "m.svg"
    r = CliRunner().invoke(main, ["plan", a, "--html", str(html), "--svg", str(svg)])
    assert r.exit_code == 0, r.output
    assert html.read_text().startswith("<!DOCTYPE html>") and svg.read_text().startswith("<svg")


def test_missing_file_is_one_line_error(tmp_path):
    p = tmp_path / "x.txt"
    p.write_text("hello")
    r = CliRunner().invoke(main, ["stats", str(p)])
    assert r.exit_code == 2 and "is not a .co, .s or .py file" in r.output
