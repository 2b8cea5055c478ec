"""benchmarks/flydsl_build.py: FlyDSL builds beyond the shipped ones.

The names it builds and looks up are the shipped files' names; a build it cannot make says why in one
sentence; with a FlyDSL checkout (FLYDSL_KERNELS_ROOT) a rebuild of a shipped object is byte-identical.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
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
    monkeypatch.delenv("FLYDSL_REPO", raising=False)
    with pytest.raises(FL.FlydslLaunchError, match=r"fa_fwd_bf16_d128_causal_h48_hkv6\.co .*FLYDSL_KERNELS_ROOT"):
        FB.build(48, 6, True)


def test_a_row_without_its_build_is_an_error_naming_the_build(monkeypatch, tmp_path):
    monkeypatch.setattr(FB, "CACHE", tmp_path)
    monkeypatch.delenv("FLYDSL_KERNELS_ROOT", raising=False)
    monkeypatch.delenv("FLYDSL_REPO", raising=False)
    row = dict(batch=1, nhead_q=48, nhead_k=6, seqlen_q=512, seqlen_k=512, hdim_q=128, hdim_v=128, mask=0)
    with pytest.raises(FL.FlydslLaunchError, match=r"noncausal_h48_hkv6\.co"):
        FL.row_launch(row, {})


@pytest.mark.skipif(not os.environ.get("FLYDSL_REPO"), reason="FLYDSL_REPO (a FlyDSL git repository) is not set")
def test_the_shipped_kernel_state_comes_from_the_repository_too(monkeypatch, tmp_path):
    """Without FLYDSL_KERNELS_ROOT, the shipped commit's kernels/ is archived from FLYDSL_REPO into the
    cache (one variable serves every kernel state); a root that is not a checkout is not replaced."""
    monkeypatch.setattr(FB, "CACHE", tmp_path / "gfx950")
    monkeypatch.delenv("FLYDSL_KERNELS_ROOT", raising=False)
    root = Path(FB.kernels_root())
    assert (root / "kernels" / "attention" / "flash_attn_gfx950.py").is_file() and tmp_path in root.parents
    assert FB.why_not_buildable(False) is None
    monkeypatch.setenv("FLYDSL_KERNELS_ROOT", str(tmp_path / "nowhere"))
    assert FB.kernels_root() is None and "FLYDSL_KERNELS_ROOT" in FB.why_not_buildable(False)


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


# ---- FlyDSL #629's generic kernel: which rows run it, its build ------------------------------------
def test_629_dispatch_is_flash_attn_generic_at_293b3b2b():
    d = FL.DISPATCH["293b3b2b"]
    assert d(8, 256, 64) == 128                  # flydsl#629-b: seqlen < 384, B*S = 2048 < 4096
    assert d(8, 512, 64) == 0 and d(1, 1024, 64) == 0     # >= 384 and a multiple of 256: dual-wave
    assert d(16, 256, 64) == 256 and d(4, 1152, 64) == 256     # B*S >= 4096 (H >= 32)
    assert d(1, 640, 64) == 128                  # not a multiple of 256
    assert d(32, 256, 16) == 128                 # H < 32: only the BLOCK_M = 128 build exists


def test_a_row_names_its_kernel_state_by_the_tag_of_ROW_STATES():
    assert FL.row_state({"kernel_state": "first dual-wave version (#629)", "source": ""}) == "293b3b2b"
    assert FL.row_state({"kernel_state": "", "source": "FlyDSL PR #629 description (merged 293b3b2b)"}) == "293b3b2b"
    assert FL.row_state({"kernel_state": "#6290: another", "source": "PR #919"}) is None
    assert FL.row_state({}) is None


def test_generic_names_and_the_item_order_of_its_1d_grid():
    assert FL.generic_co_name(64, True, 128, "293b3b2b") == "fa_generic_m128_bf16_d128_causal_h64@293b3b2b.co"
    with pytest.raises(FL.FlydslLaunchError, match="not a shipped build"):
        FL.generic_co_name(64, True, 128, FL.SHIPPED_COMMIT)
    H, T, B = 4, 3, 2
    g = FL.generic_grid(H, 384, B, 128)
    assert g == (B * T * H, 1, 1)
    x = np.arange(g[0])
    items = FL.GenericWgMap(H, {g[0]: T})(g, x, 0, 0)[0]
    assert sorted(items) == list(range(g[0]))                       # a bijection
    head, tile, batch = x % H, (x // H) % T, x // (H * T)           # the kernel's decode of its block id
    assert (items == tile * B * H + batch * H + head).all()         # tile-major
    # causal: the recorded middle item is a tile after the first (whose one key block cannot be scaled)
    for S in (256, 640, 1152):
        S0 = FL.generic_trace_seqlen(S, True, 128)
        n0 = FL.generic_grid(64, S0, 1, 128)[0]
        assert ((n0 - 1) // 2) // 64 >= 1 and S0 % 128 == 0 and S0 <= max(FL.TRACE_SEQLEN, 384)
    assert FL.generic_trace_seqlen(256, False, 128) == 256 and FL.generic_trace_seqlen(128, True, 128) == 128


needs_table = pytest.mark.skipif(not (FL.SHARED / "measured").is_dir(), reason=f"{FL.SHARED}/measured is absent")


@needs_table
def test_the_629_rows_price_the_kernel_its_dispatch_ran_and_the_others_as_before():
    import measured
    rows = {r["run"] + ":" + measured.author(r): r for _, k, r in measured.read_tables([FL.SHARED / "measured"])
            if k == "fmha"}
    short = rows["flydsl#629-b:flydsl"]
    need = FB.needed([FL.SHARED / "measured"])      # what flydsl_build --table builds for them
    assert (64, 64, True, False, "293b3b2b", 128) in need and (64, 64, True, False, None, 0) in need
    assert FL.generic_of(short) == ("293b3b2b", 128) and FL.generic_of(rows["flydsl#629-a:flydsl"]) is None
    try:
        L = FL.row_launch(short, {})
    except FL.FlydslLaunchError as e:
        pytest.skip(str(e))
    assert L["kernel"] == FL.GENERIC_KERNEL and L["grid"] == (8 * 2 * 64, 1, 1) and L["block"] == 256
    assert "fa_generic_m128_bf16_d128_causal_h64@293b3b2b.co" in L["priced"] and L["tile_axis"] == 0
    # the samples: tile 0 as recorded, the last item scaled to real tile 1's 256 keys from recorded tile 2's 384
    tg = L["trace_grid"]
    assert [round(L["loop_scale"](i / (tg[0] - 1)), 4) for i in (0, tg[0] - 1)] == [1.0, round(256 / 384, 4)]
    for run in ("flydsl#629-a:flydsl", "flydsl#919-a:flydsl"):     # the dual-wave build the row names
        r = rows[run]
        L = FL.row_launch(r, {})
        assert L["kernel"] == FL.KERNEL and L["co"] == (FL.CO_DIR / r["co_name"]).read_bytes()
        assert L["priced"] == f"{FL.KERNEL} {r['co_name']}" and L["tile_axis"] == 1
