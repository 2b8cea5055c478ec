"""benchmarks/flydsl_build.py: FlyDSL builds beyond the shipped ones.

The names it builds and looks up are the shipped files' names; a build it cannot make says why in one
sentence; with a FlyDSL checkout (FLYDSL_KERNELS_ROOT) a rebuild of a shipped object is byte-identical.
"""
from __future__ import annotations

import os
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


# ---- older kernel states (--commit) -------------------------------------------------------------
def test_a_build_of_another_kernel_state_says_its_commit():
    assert FL.co_name(64, True, False, commit="293b3b2b") == "fa_fwd_bf16_d128_causal_h64@293b3b2b.co"
    assert FL.co_name(64, False, True, 8, commit="293B3B2B0123") == "fa_fwd_bf16_d128_noncausal_h64_hkv8_xcdswz@293b3b2b.co"
    assert FL.co_name(64, True, False, commit=FL.SHIPPED_COMMIT) == FL.co_name(64, True, False)
    assert FL.commit_of("fa_fwd_bf16_d128_causal_h64@293b3b2b.co") == "293b3b2b"
    assert FL.commit_of(FL.co_name(64, True, False)) is None
    with pytest.raises(FL.FlydslLaunchError, match="not a FlyDSL commit hash"):
        FL.co_name(64, True, False, commit="main")


def test_the_wheel_of_a_kernel_state_is_the_release_before_it():
    from datetime import datetime
    assert FB.wheel_for(datetime.fromisoformat("2026-06-04T19:39:52+08:00")) == "0.2.0"     # 293b3b2b, #629
    assert FB.wheel_for(datetime.fromisoformat("2026-07-26T10:00:00+00:00")) == "0.2.4"     # cc141e85, #844
    with pytest.raises(FL.FlydslLaunchError, match="give --wheel"):
        FB.wheel_for(datetime.fromisoformat("2026-01-01T00:00:00+00:00"))


def test_a_kernel_state_without_its_repository_says_what_is_missing(monkeypatch, tmp_path):
    monkeypatch.setattr(FB, "CACHE", tmp_path)
    monkeypatch.delenv("FLYDSL_REPO", raising=False)
    with pytest.raises(FL.FlydslLaunchError, match=r"causal_h64@293b3b2b\.co is not here .*FLYDSL_REPO"):
        FB.build(64, 64, True, commit="293b3b2b")
    monkeypatch.setenv("FLYDSL_REPO", str(tmp_path))             # not a git repository
    row = dict(batch=1, nhead_q=64, nhead_k=64, seqlen_q=512, seqlen_k=512, hdim_q=128, hdim_v=128, mask=1,
               co_name="fa_fwd_bf16_d128_causal_h64@293b3b2b.co")
    with pytest.raises(FL.FlydslLaunchError, match="FLYDSL_REPO must name a FlyDSL git repository"):
        FL.row_launch(row, {})
    row["co_name"] = "fa_fwd_bf16_d128_causal_h32@293b3b2b.co"    # not this row's heads: never built for it
    with pytest.raises(FL.FlydslLaunchError, match=r"not the build of this row's heads and mask \(fa_fwd_bf16_d128_causal_h64@293b3b2b"):
        FL.row_launch(row, {})


@pytest.mark.skipif(not os.environ.get("FLYDSL_REPO"), reason="FLYDSL_REPO (a FlyDSL git repository) is not set")
def test_the_kernel_module_is_where_the_commit_has_it():
    full, module, when = FB.kernel_state("293b3b2b")
    assert full.startswith("293b3b2b") and module == "kernels/flash_attn_gfx950.py" and when.year == 2026
    assert FB.kernel_state("11c4174d")[1] == "kernels/attention/flash_attn_gfx950.py"
    with pytest.raises(FL.FlydslLaunchError, match="has no commit"):
        FB.kernel_state("0000000")
