"""The checker's 13 definite `lds_write_before_barrier` findings on aiter's mla kernels are real
races, shown without the checker's LDS analysis: the addresses come from formulas read off the
kernel's own instructions (asserted here, so a reader can redo them), and LLVM's memory model says
what a workgroup barrier needs.

* The premise (LLVM as oracle): `llc` (gfx950) lowers a workgroup release fence before
  `s_barrier` -- what `__syncthreads()` is -- to `s_waitcnt lgkmcnt(0)` after a `ds_write` and
  `s_waitcnt vmcnt(0)` after an LDS DMA, but to no vmcnt wait after a plain global store: LDS
  operations of different waves may be reordered (AMDGPUUsage, memory model GFX942: "The LDS memory
  has multiple request queues shared by the SIMDs of a CU"), so a wave's LDS write still in flight
  at the barrier may land after another wave's read that follows it.
* mla_a8w8_qh16 (4 findings): the last two `ds_write_b32 v22` of each tile are still in flight at
  the barrier (`s_waitcnt lgkmcnt(4)` with only 3 DS ops after the first of them), and after it
  another wave's `ds_read_b128 v24` reads bytes they write.
* MLA_A16W16 (9 findings): with one KV tile (s71 == 1) the kernel issues the next tile's nine
  LDS DMAs, all still in flight at the barrier (`s_waitcnt vmcnt(10)` with exactly ten VMEM ops
  from the page-index load on), takes the one-tile exit (label_60E8) and stages its output in LDS
  with no barrier on the way: each wave's `s_waitcnt vmcnt(0)` retires only its own DMAs, and
  another wave's `ds_read_b128 v3` reads bytes those DMAs write."""
from __future__ import annotations

import subprocess
from collections import deque
from pathlib import Path

import numpy as np
import pytest

from flyasm.check.cfg import build_cfg, is_label
from flyasm.report.program import as_program

try:
    from tests.oracles.aiter_findings import checked
    from tests.oracles.hazard_probes import find_tool
except ImportError:  # pytest's default rootdir-less import mode puts tests/ on sys.path
    from oracles.aiter_findings import checked
    from oracles.hazard_probes import find_tool

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "aiter" / "gfx950"
A8W8 = SHARED / "mla" / "mla_a8w8_qh16_qseqlen2_gqaratio16_ps.co"
A16W16 = SHARED / "mla" / "MLA_A16W16_1TG_4W_16mx4_32nx1_Coex0_Msk1_QH16.co"
LLC = find_tool("llc")
needs_shared = pytest.mark.skipif(not SHARED.exists(), reason=f"{SHARED} is absent (../shared is not here)")
LANE = np.arange(64)


def _llc_waits_before_barrier(first: str, decl: str = "") -> list[str]:
    """The s_waitcnt lines llc (gfx950) puts between `first` and the s_barrier of a workgroup
    release fence + barrier."""
    ir = f"""
define amdgpu_kernel void @k(ptr addrspace(1) %g, ptr addrspace(3) %p, ptr addrspace(3) %q, ptr addrspace(1) %o) {{
  {first}
  fence syncscope("workgroup") release
  call void @llvm.amdgcn.s.barrier()
  fence syncscope("workgroup") acquire
  %v = load i32, ptr addrspace(3) %q
  store i32 %v, ptr addrspace(1) %o
  ret void
}}
declare void @llvm.amdgcn.s.barrier()
{decl}
"""
    asm = subprocess.run([str(LLC), "-mtriple=amdgcn-amd-amdhsa", "-mcpu=gfx950", "-o", "-"], input=ir,
                         capture_output=True, text=True, check=True).stdout
    body = [x.strip() for x in asm.splitlines() if x.startswith("\t") and not x.startswith("\t.")]
    start = next(k for k, x in enumerate(body) if x.startswith(("ds_write", "global_load_lds", "global_store")))
    end = body.index("s_barrier")
    return [x for x in body[start + 1:end] if x.startswith("s_waitcnt")]


@pytest.mark.skipif(LLC is None, reason="llc (LLVM 22) is not installed")
def test_llvm_waits_for_lds_writes_of_every_kind_before_a_workgroup_barrier():
    assert _llc_waits_before_barrier("store i32 1, ptr addrspace(3) %p") == ["s_waitcnt lgkmcnt(0)"]
    dma = _llc_waits_before_barrier(
        "call void @llvm.amdgcn.global.load.lds(ptr addrspace(1) %g, ptr addrspace(3) %p, i32 16, i32 0, i32 0)",
        "declare void @llvm.amdgcn.global.load.lds(ptr addrspace(1), ptr addrspace(3), i32, i32, i32)")
    assert len(dma) == 1 and "vmcnt(0)" in dma[0]
    assert _llc_waits_before_barrier("store i32 1, ptr addrspace(1) %g") == []     # global memory: no wait


def _texts(items, lo, hi) -> list[str]:
    return [items[i].text() for i in range(lo, hi + 1)]


def _cross_wave_meet(a_start, a_size, b_start, b_size) -> set[tuple[int, int]]:
    """(writer wave, reader wave) pairs, writer != reader, whose per-lane byte ranges meet;
    starts: arrays (wave, lane) of first bytes."""
    out = set()
    for wa in range(a_start.shape[0]):
        for wb in range(b_start.shape[0]):
            s1, s2 = a_start[wa][:, None], b_start[wb][None, :]
            if wa != wb and ((s1 < s2 + b_size) & (s2 < s1 + a_size)).any():
                out.add((wa, wb))
    return out


def _barrier_free_path(items, cfg, frm: int, to: int) -> list[int] | None:
    """Blocks of a path from item `frm` to item `to` on which no s_barrier runs (None: none)."""
    b0, bt = cfg.block_of[frm], cfg.block_of[to]
    prev, todo = {b0: None}, deque([b0])
    while todo:
        b = todo.popleft()
        insts = cfg.blocks[b].insts
        lo = insts.index(frm) + 1 if b == b0 else 0
        hi = insts.index(to) if b == bt else len(insts)
        if any(items[i].name == "s_barrier" for i in insts[lo:hi]):
            continue
        if b == bt:
            path = [b]
            while prev[path[-1]] is not None:
                path.append(prev[path[-1]])
            return path[::-1]
        for s in cfg.blocks[b].succs:
            if s not in prev:
                prev[s] = b
                todo.append(s)
    return None


def _findings(path, rule="lds_write_before_barrier"):
    items, found = checked(path)
    return items, [f for f in found if f.rule == rule and f.severity == "error"]


@needs_shared
@pytest.mark.slow       # checks the 4,635-instruction mla kernel (~10 s)
def test_mla_a8w8_tile_writes_in_flight_at_the_barrier_meet_another_waves_reads():
    items, found = _findings(A8W8)
    assert sorted((f.producer.index, f.consumer.index) for f in found) == [
        (2207, 2215), (2208, 2215), (2724, 2732), (2725, 2732)]
    # v22 and v24 from the workitem id (wave w = tid >> 6, s7 = w via v_readfirstlane; lane l):
    assert _texts(items, 451, 458) == [
        "v_lshrrev_b32_e32 v34, 4, v0", "v_mul_i32_i24_e32 v35, 0x100, v34", "v_and_b32_e32 v34, 15, v0",
        "v_mul_i32_i24_e32 v36, 1, v34", "v_add_u32_e32 v22, v36, v35", "s_mul_i32 s56, s7, 32",
        "v_add_u32_e32 v22, s56, v22", "v_lshlrev_b32_e32 v22, 2, v22"]
    assert _texts(items, 470, 482) == [
        "v_lshrrev_b32_e32 v34, 4, v0", "v_mul_i32_i24_e32 v35, 4, v34", "v_and_b32_e32 v34, 15, v0",
        "v_and_b32_e32 v36, 3, v34", "v_mul_i32_i24_e32 v36, 0x408, v36", "v_add_u32_e32 v24, v36, v35",
        "v_lshrrev_b32_e32 v34, 2, v34", "v_mul_i32_i24_e32 v34, 0x80, v34", "v_add_u32_e32 v24, v34, v24",
        "s_and_b32 s56, 1, s7", "s_mul_i32 s56, s56, 0x200", "v_add_u32_e32 v24, s56, v24",
        "v_lshlrev_b32_e32 v24, 2, v24"]
    w = np.arange(4)[:, None]
    v22 = 4 * ((LANE >> 4) * 0x100 + (LANE & 15) + 32 * w)
    v24 = 4 * ((LANE >> 4) * 4 + (LANE & 3) * 0x408 + ((LANE & 15) >> 2) * 0x80 + (w & 1) * 0x200)
    for f in found:
        p, bar = f.producer.index, f.consumer.index
        wr = items[p]
        assert wr.name == "ds_write_b32" and wr.text().startswith("ds_write_b32 v22,")
        # still in flight at the barrier: fewer DS ops after it than the lgkmcnt the kernel waits for
        later = sum(items[i].unit == "DS" for i in range(p + 1, bar))
        assert items[bar - 1].text() == "s_waitcnt lgkmcnt(4)" and later < 4
        reads = [i for i in range(bar + 1, bar + 20) if items[i].text().startswith("ds_read_b128")]
        assert all(items[i].text().split(",")[1].strip().startswith("v24") for i in reads)
        met = {(i, pair) for i in reads for pair in _cross_wave_meet(
            v22 + wr.modifiers.get("offset", 0), 4, v24 + items[i].modifiers.get("offset", 0), 16)}
        assert met, f.message          # another wave reads what this one still writes


@needs_shared
@pytest.mark.slow       # checks the 7,583-instruction mla kernel (~15 s)
def test_mla_a16w16_one_tile_exit_reads_lds_another_waves_dma_still_writes():
    items, found = _findings(A16W16)
    dmas = [568, 571, 574, 577, 580, 583, 586, 589, 592]
    assert sorted((f.producer.index, f.consumer.index) for f in found) == [(d, 629) for d in dmas]
    # the tile count and the branches that lead to the one-tile exit
    assert _texts(items, 557, 558) == ["s_cmp_lt_u32 s71, 1", "s_cbranch_scc1 label_8C5C"]
    assert items[113].text() == "s_mov_b32 s70, 0"
    assert _texts(items, 771, 773) == ["s_addk_i32 s70, 1", "s_cmp_eq_u32 s71, s70", "s_cbranch_scc1 label_60E8"]
    # s71 = the tile count (114..148: (s50 - s45) divided by the tile, rounded up), s70 the tiles done
    writers = [i for i in range(772) if not is_label(items[i]) and {("s", 70), ("s", 71)} & set(items[i].writes)]
    assert writers == [113, 114, 142, 148, 771]
    # the DMAs: M0 = 0x2000 + 0x2400 * wave, then + 0x3c0 before each next one; lane L writes 16
    # bytes at M0 + offset + 16 L (notes 3.3, LLVM AMDGPUDMAOperations.md)
    assert _texts(items, 565, 567) == ["s_mov_b32 s56, 0x2000", "s_mul_i32 s57, s7, 0x2400", "s_add_u32 m0, s56, s57"]
    assert items[628].text() == "s_waitcnt vmcnt(10)" and items[629].name == "s_barrier"
    assert sum(items[i].counter == "vm" for i in range(563, 629)) == 10        # #563 and the nine DMAs
    w = np.arange(4)[:, None]
    m0 = 0x2000 + 0x2400 * w
    dma = {}
    for j, d in enumerate(dmas):
        assert items[d].is_lds_dma and items[d].name == "buffer_load_dwordx4"
        assert items[d + 1].text() == "s_add_i32 m0, m0, 0x3c0"
        dma[d] = m0 + 0x3C0 * j + items[d].modifiers.get("offset", 0) + 16 * LANE
    # the read: v3 from the workitem id
    assert _texts(items, 6975, 6986) == [
        "v_lshrrev_b32_e32 v28, 5, v0", "v_mul_i32_i24_e32 v3, 4, v28", "v_and_b32_e32 v28, 31, v0",
        "v_lshrrev_b32_e32 v28, 2, v28", "v_mul_i32_i24_e32 v28, 8, v28", "v_add_u32_e32 v3, v28, v3",
        "v_and_b32_e32 v28, 31, v0", "v_mul_i32_i24_e32 v28, 64, v28", "v_add_u32_e32 v3, v28, v3",
        "s_mul_i32 s56, s7, 0x840", "v_add_u32_e32 v3, s56, v3", "v_lshlrev_b32_e32 v3, 2, v3"]
    v3 = 4 * ((LANE >> 5) * 4 + ((LANE & 31) >> 2) * 8 + (LANE & 31) * 64 + w * 0x840)
    reads = [i for i in range(7030, 7039) if items[i].text().startswith("ds_read_b128") and "v3" in items[i].text()]
    assert len(reads) == 8
    cfg = build_cfg(items)
    path = _barrier_free_path(items, cfg, 629, 7030)
    assert path is not None
    labels = [lab for b in path for lab in cfg.blocks[b].labels]
    assert labels[:2] == ["label_1070", "label_60E8"]          # the one-tile exit, no barrier on it
    for d in dmas:
        met = {pair for i in reads for pair in
               _cross_wave_meet(dma[d], 16, v3 + items[i].modifiers.get("offset", 0), 16)}
        assert met, f"DMA #{d} meets no other wave's read"
