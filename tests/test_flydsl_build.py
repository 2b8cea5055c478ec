"""benchmarks/flydsl_build.py: FlyDSL builds beyond the shipped ones.

The names it builds and looks up are the shipped files' names; a build it cannot make says why in one
sentence; with a FlyDSL checkout (FLYDSL_KERNELS_ROOT) a rebuild of a shipped object is byte-identical.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import flydsl_build as FB  # noqa: E402
import flydsl_launch as FL  # noqa: E402

needs_flydsl = pytest.mark.skipif(not FL.CO_DIR.is_dir(), reason=f"{FL.CO_DIR} is absent (../shared is not here)")


@needs_flydsl
def test_every_shipped_object_is_named_by_some_variant():
    shipped = {p.name for p in FL.CO_DIR.glob("*.co")}
    named = {FL.co_name(H, c, x) for H in (32, 64) for c in (False, True) for x in (False, True)}
    assert shipped and shipped <= named
    for name in shipped:
        assert FB.find(name) == FL.CO_DIR / name


def test_a_build_that_cannot_run_says_why(monkeypatch, tmp_path):
    monkeypatch.setattr(FB, "CACHE", tmp_path)
    monkeypatch.delenv("FLYDSL_KERNELS_ROOT", raising=False)
    with pytest.raises(FL.FlydslLaunchError, match=r"fa_fwd_bf16_d128_causal_h48_hkv6\.co .*FLYDSL_KERNELS_ROOT"):
        FB.build(48, 6, True)


def test_a_row_without_its_build_is_an_error_naming_the_build(monkeypatch, tmp_path):
    monkeypatch.setattr(FB, "CACHE", tmp_path)
    monkeypatch.delenv("FLYDSL_KERNELS_ROOT", raising=False)
    row = dict(batch=1, nhead_q=48, nhead_k=6, seqlen_q=512, seqlen_k=512, hdim_q=128, hdim_v=128, mask=0)
    with pytest.raises(FL.FlydslLaunchError, match=r"noncausal_h48_hkv6\.co"):
        FL.row_launch(row, {})


@needs_flydsl
@pytest.mark.skipif(FB.why_not_buildable(False) is not None, reason=f"no FlyDSL build here: {FB.why_not_buildable(False)}")
def test_a_rebuild_of_a_shipped_object_is_byte_identical(monkeypatch, tmp_path):
    name = FL.co_name(64, False, False)
    monkeypatch.setattr(FB, "CACHE", tmp_path)
    monkeypatch.setattr(FB, "find", lambda n: None)        # force the build
    assert FB.build(64, 64, False).read_bytes() == (FL.CO_DIR / name).read_bytes()
