"""FlyDSL's gfx950 attention forward (../shared/flydsl/gfx950) launched our way
(benchmarks/flydsl_launch.py: kernarg bytes, grid, hidden arguments from the metadata) in the strict
emulator, against torch SDPA in float32.

The work items checked are the model's samples of the launch (perf.model.sample_plan with FlyDSL's
tile axis and, for the XCD-mapping builds, its workgroup -> (head, tile) map): the first, middle and
last Q tile (ragged), the last head and the last batch, each run at the workgroup the map names.
Their O rows must match torch within the derived bf16 bound, and every other O element must keep its
poison (NaN): that checks the pointers, shapes and strides, the batch stride and the map at once.

The causal build leaves ~160 VALU-writes-SGPR -> v_cndmask pairs at 1 wait state where LLVM's hazard
recogniser asks for 2 (test_flydsl_causal_hazard_finding); it runs strict with that one rule waived.
Run with -s to print the errors:  python3 -m pytest -s -m "slow or not slow" tests/test_emu_flydsl_fmha.py
"""
from __future__ import annotations

import math
import re
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import flydsl_build as FB  # noqa: E402
import flydsl_launch as FL  # noqa: E402
from test_emu_aiter_fmha import U_BF16, Shape, o_bound, reference  # noqa: E402

from flyasm.perf.model import sample_plan  # noqa: E402
from flyasm.run import launch  # noqa: E402

needs_flydsl = pytest.mark.skipif(not FL.CO_DIR.is_dir(), reason=f"{FL.CO_DIR} is absent (../shared is not here)")
D = 128
PTR = {"q": 0x7E00_0000_0000, "k": 0x7E01_0000_0000, "v": 0x7E02_0000_0000, "o": 0x7E03_0000_0000}
HAZARD = "valu_sgpr_valu_read"


def run_build(name: str | Path, B: int, S: int, seed: int | None = None) -> dict:
    """Run the sampled work items of build `name` (a shipped file's name, or a path) at batch B, seqlen
    S; return the errors."""
    path = FL.CO_DIR / name if isinstance(name, str) else name
    co, name = path.read_bytes(), path.name
    causal = "_causal" in name
    H = int(re.search(r"_h(\d+)", name).group(1))
    seed = int(np.random.default_rng(seed).integers(1 << 62))
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(B, S, H, D, generator=gen).to(torch.bfloat16) for _ in range(3))
    o = torch.full((B, S, H, D), float("nan"), dtype=torch.bfloat16)
    grid = FL.grid(H, S, B)
    wg_map = FL.xcd_wg_map if FL.has_xcd_mapping(co) else None
    items, wgs = sample_plan(grid, tile_axis=1, wg_map=wg_map)
    launch(co, grid, FL.BLOCK, kernel=FL.KERNEL, kernarg=FL.pack(co, PTR, B, S, H, H, D),
           buffers={PTR["q"]: q, PTR["k"]: k, PTR["v"]: v, PTR["o"]: o}, workgroups=wgs,
           waive=[HAZARD] if causal else ())
    o_ref, _, pav = reference(Shape(B, H, H, S, S, causal), q, k, v, 1.0 / math.sqrt(D))
    mine = torch.zeros(B, S, H, dtype=torch.bool)                 # the rows the items own
    for head, tile, b in items:
        mine[b, tile * FL.BLOCK_M:(tile + 1) * FL.BLOCK_M, head] = True
    of = o.float()
    err = (of - o_ref).abs()[mine]
    bound = o_bound(S, o_ref, pav)[mine]
    return dict(name=name, shape=f"B{B} H{H} S{S}", items=items, seed=seed, max_err=float(err.max()),
                worst_ratio=float((err / bound).max()), written=bool(torch.isfinite(of[mine]).all()),
                stray=int(torch.isfinite(of[~mine]).sum()), ok=bool((err <= bound).all()))


def _check(r):
    print(f"\n{r['name']} {r['shape']} items {r['items']}: max|dO| {r['max_err']:.3g}, "
          f"worst |dO|/bound {r['worst_ratio']:.3f} (seed {r['seed']})")
    assert r["written"], "an item's O rows kept their poison"
    assert r["stray"] == 0, f"{r['stray']} O elements outside the sampled items were written"
    assert r["ok"], r


@needs_flydsl
@pytest.mark.parametrize("name", ["fa_fwd_bf16_d128_noncausal_h64.co", "fa_fwd_bf16_d128_noncausal_h64_xcdswz.co",
                                  "fa_fwd_bf16_d128_causal_h64.co"])
def test_flydsl_matches_torch(name):
    # B2 S300: two Q tiles, the second ragged (44 rows), keys 4 x 64 + 44
    _check(run_build(name, 2, 300))


def older_build(commit: str, causal: bool) -> Path:
    """FlyDSL's h64 build at `commit` (flydsl_build's cache), built now when FLYDSL_REPO allows, else skip."""
    try:
        return FB.build(64, 64, causal, commit=commit)
    except FL.FlydslLaunchError as e:
        pytest.skip(str(e))


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "noncausal"])
def test_flydsl_629_matches_torch(causal):
    """PR #629's first dual-wave kernel (293b3b2b, its 5-slot kernarg), launched our way, at a seqlen
    of whole tiles (it takes no other). Its causal build has the shipped one's 160 valu_sgpr_valu_read
    findings (flyasm check), so the same waiver."""
    path = older_build("293b3b2b", causal)
    assert len(FL.kernarg_layout(path.read_bytes()).slots) == 5
    _check(run_build(path, 2, 512))


def run_generic(path: Path, B: int, S: int, seed: int | None = None) -> dict:
    """run_build for FlyDSL's generic kernel (#629's dispatch below seqlen 384): its 1-D grid, its block,
    the model's sampled items through GenericWgMap (item -> head, tile, batch), bf16 P truncated."""
    co, name = path.read_bytes(), path.name
    causal, H = "_causal" in name, int(re.search(r"_h(\d+)", name).group(1))
    bm = FL.generic_block_m(co)
    T = -(-S // bm)
    seed = int(np.random.default_rng(seed).integers(1 << 62))
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(B, S, H, D, generator=gen).to(torch.bfloat16) for _ in range(3))
    o = torch.full((B, S, H, D), float("nan"), dtype=torch.bfloat16)
    grid = FL.generic_grid(H, S, B, bm)
    items, wgs = sample_plan(grid, tile_axis=0, wg_map=FL.GenericWgMap(H, {grid[0]: T}))
    found = launch(co, grid, 2 * bm, kernel=FL.GENERIC_KERNEL, kernarg=FL.pack(co, PTR, B, S, H, H, D),
                   buffers={PTR["q"]: q, PTR["k"]: k, PTR["v"]: v, PTR["o"]: o}, workgroups=wgs)
    o_ref, _, pav = reference(Shape(B, H, H, S, S, causal), q, k, v, 1.0 / math.sqrt(D))
    mine = torch.zeros(B, S, H, dtype=torch.bool)
    owned = []
    for (x, _, _), (w, _, _) in zip(items, wgs):
        tile, rest = divmod(x, B * H)                        # the tile-major item
        b, head = divmod(rest, H)
        assert (w % H, (w // H) % T, w // (H * T)) == (head, tile, b)   # the kernel's own decode of w
        mine[b, tile * bm:(tile + 1) * bm, head] = True
        owned.append((head, tile, b))
    of = o.float()
    err = (of - o_ref).abs()[mine]
    # o_bound's derivation with P truncated to bf16 (bf16_trunc_pack_v8 keeps the upper 16 bits: a
    # relative error below 2^-7 = 2u, not RNE's u): its 2u (P|V| + |O|) term doubles
    bound = (o_bound(S, o_ref, pav) + 2 * U_BF16 * (pav + o_ref.abs()))[mine]
    return dict(name=name, shape=f"B{B} H{H} S{S}", items=owned, seed=seed, max_err=float(err.max()),
                worst_ratio=float((err / bound).max()), written=bool(torch.isfinite(of[mine]).all()),
                stray=int(torch.isfinite(of[~mine]).sum()), ok=bool((err <= bound).all()), result=found)


def generic_build(causal: bool, block_m: int) -> Path:
    """FlyDSL #629's generic h64 build (flydsl_build's cache), built now when FLYDSL_REPO allows, else skip."""
    try:
        return FB.build_generic(64, 64, causal, block_m, "293b3b2b")
    except FL.FlydslLaunchError as e:
        pytest.skip(str(e))


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "noncausal"])
def test_flydsl_629_generic_matches_torch(causal):
    """The kernel #629's dispatch ran for the flydsl#629-b row (B8 H64 S256: seqlen < 384, B*S < 4096):
    the generic BLOCK_M = 128 kernel (293b3b2b), launched our way, strict (no waiver), at B2 H64 S256:
    items of both tiles, both batches, the first and last head."""
    path = generic_build(causal, 128)
    assert FL.dispatch_293b3b2b(8, 256, 64) == 128 and FL.generic_block_m(path.read_bytes()) == 128
    r = run_generic(path, 2, 256)
    assert {t for _, t, _ in r["items"]} == {0, 1} and {b for _, _, b in r["items"]} == {0, 1}
    _check(r)


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "noncausal"])
def test_flydsl_629_generic_m256_matches_torch(causal):
    """The BLOCK_M = 256 generic kernel (8 waves), which #629's dispatch runs when B*S >= 4096 below
    seqlen 384 or at seqlens of 128 past a multiple of 256: at B2 H64 S640, its last tile ragged."""
    path = generic_build(causal, 256)
    assert FL.dispatch_293b3b2b(8, 640, 64) == 256 and FL.generic_block_m(path.read_bytes()) == 256
    r = run_generic(path, 2, 640)
    assert {t for _, t, _ in r["items"]} == {0, 1, 2}
    _check(r)


@needs_flydsl
@pytest.mark.slow
@pytest.mark.parametrize("name,B,S", [("fa_fwd_bf16_d128_noncausal_h32.co", 2, 300),
                                      ("fa_fwd_bf16_d128_noncausal_h32_xcdswz.co", 2, 300),
                                      ("fa_fwd_bf16_d128_noncausal_h32_xcdswz.co", 1, 1100),
                                      ("fa_fwd_bf16_d128_causal_h64.co", 1, 1100)])
def test_flydsl_matches_torch_more(name, B, S):
    _check(run_build(name, B, S))


@needs_flydsl
def test_xcd_mapping_runs_the_items_its_map_names():
    """Launched at the workgroups the plain build would use for the items, the XCD-mapping build
    writes other rows: the map is what the kernel does, not a no-op."""
    name = "fa_fwd_bf16_d128_noncausal_h64_xcdswz.co"
    co = (FL.CO_DIR / name).read_bytes()
    assert FL.has_xcd_mapping(co) and len(FL.pack(co, PTR, 1, 512, 64, 64)) == 864
    plain = (FL.CO_DIR / "fa_fwd_bf16_d128_noncausal_h64.co").read_bytes()
    assert not FL.has_xcd_mapping(plain) and len(FL.pack(plain, PTR, 1, 512, 64, 64)) == 608
    grid = FL.grid(64, 512, 1)
    items, wgs = sample_plan(grid, tile_axis=1, wg_map=FL.xcd_wg_map)
    assert wgs != items
    o = torch.full((1, 512, 64, D), float("nan"), dtype=torch.bfloat16)
    q, k, v = (torch.randn(1, 512, 64, D).to(torch.bfloat16) for _ in range(3))
    launch(co, grid, FL.BLOCK, kernel=FL.KERNEL, kernarg=FL.pack(co, PTR, 1, 512, 64, 64),
           buffers={PTR["q"]: q, PTR["k"]: k, PTR["v"]: v, PTR["o"]: o}, workgroups=[(63, 1, 0)])
    written = torch.isfinite(o.float()).any(-1)[0]               # [S, H]
    head, tile, _ = (int(a) for a in FL.xcd_wg_map(grid, 63, 1, 0))
    assert (head, tile) == ((63 + 64 * 1) // 2, (63 + 64) % 2)
    assert written[tile * 256:(tile + 1) * 256, head].all() and int(written.sum()) == 256


def test_dispatch_picks_the_xcd_build_as_flydsl_does():
    assert FL.build_name(64, 16384, False) == "fa_fwd_bf16_d128_noncausal_h64_xcdswz.co"
    assert FL.build_name(64, 64 * 256 - 255, False).endswith("_xcdswz.co")      # ceil(S/256) = 64
    assert FL.build_name(64, 63 * 256, False) == "fa_fwd_bf16_d128_noncausal_h64.co"
    assert FL.build_name(64, 16384, True) == "fa_fwd_bf16_d128_causal_h64.co"
    assert FL.build_name(12, 16384, False) == "fa_fwd_bf16_d128_noncausal_h12.co"     # H % 8 != 0
    assert FL.trace_seqlen(61380) == 964 and FL.trace_seqlen(16384) == 1024 and FL.trace_seqlen(300) == 300


# ---- the finding: the causal build's VALU-writes-SGPR -> v_cndmask pairs ---------------------------
CAUSAL = FL.CO_DIR / "fa_fwd_bf16_d128_causal_h64.co"


@needs_flydsl
def test_flydsl_causal_hazard_finding(tmp_path):
    """Our checker on the causal .co: every valu_sgpr_valu_read finding is a v_cmp_lt_i32_e64 writing
    an SGPR pair read by a v_cndmask_b32_e64 one wait state later, where the rule asks for 2; the
    non-causal builds have none. LLVM 22's post-RA hazard recogniser, given one such window as MIR,
    inserts the missing wait state (s_nop 0) before the v_cndmask: the finding is LLVM's too."""
    from oracles import hazard_probes as hp
    from oracles.aiter_findings import checked
    from test_check_aiter_llc import window_probe
    items, found = checked(CAUSAL)
    mine = [f for f in found if f.rule == HAZARD]
    shapes = Counter((items[f.producer.index].name, items[f.consumer.index].name, f.found, f.needed,
                      f.severity) for f in mine)
    print(f"\n{CAUSAL.name}: {len(mine)} {HAZARD} findings: {dict(shapes)}")
    assert shapes == {("v_cmp_lt_i32", "v_cndmask_b32", 1, 2, "error"): len(mine)}
    assert len(mine) >= 100 and len({f.consumer.pc for f in mine}) == len(mine)
    plain = FL.CO_DIR / "fa_fwd_bf16_d128_noncausal_h64.co"
    assert not [f for f in checked(plain)[1] if f.rule == HAZARD]
    llc = hp.find_tool("llc")
    if llc is None:
        pytest.skip("llc (LLVM 22) is not installed: the count is checked, llc's verdict is not")
    # the two window shapes: another v_cmp or another v_cndmask between producer and consumer
    probes = {}
    for f in mine:
        kind = items[f.producer.index + 1].name
        if kind not in probes and (p := window_probe(items, f)) is not None:
            probes[kind] = (p, f)
    assert set(probes) == {"v_cmp_lt_i32", "v_cndmask_b32"}, probes
    got = hp.llc_instructions([p for p, _ in probes.values()], llc, cache_dir=tmp_path)
    for p, f in probes.values():
        ws = got[p.name]
        print(f"llc on {p.asm}: wait states before each: {[w for _, w in ws]}")
        assert len(ws) == len(p.asm)
        assert ws[p.consumer] == ("V_CNDMASK_B32_e64", f.needed - f.found)


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "noncausal"])
def test_flydsl_629_generic_has_no_hazard_findings(causal):
    """Unlike the dual-wave causal build (its ~160 valu_sgpr_valu_read pairs), #629's generic BLOCK_M = 128
    kernel leaves nothing for our checker to find, so it runs strict without a waiver."""
    from oracles.aiter_findings import checked
    items, found = checked(generic_build(causal, 128))
    assert len(items) > 1000 and found == [], Counter(f.rule for f in found)
