"""Emulator strictness: hazards counted as executed (shared gfx950 rule table), LDS races between
barriers, ISA-required conditions (EXEC, alignment, LDS bounds) as errors naming the instruction."""
from __future__ import annotations

import functools

import numpy as np
import pytest

from emu_snippet import snippet
from flyasm.emu import EmuError
from flyasm.emu.hazards import options
from flyasm.isa.operands import s, v
from flyasm.kernel import Kernel
from flyasm.run import launch

RNG = np.random.default_rng()
ONES_BF16 = 0x3F803F80          # two bf16 1.0
MFMA = "v_mfma_f32_16x16x32_bf16 v[32:35], v[16:19], v[20:23], 0"    # 4 passes: VALU read needs 8


# ---- hazards ----------------------------------------------------------------------------------
def _mfma_kernel(nop: int | None):
    k = Kernel("hazard_probe", block=64, arg_layout="natural")
    k.arg("out", "ptr")
    k.s_load_dwordx2(s[4:5], s[0:1], 0)
    for r in range(16, 24):
        k.v_mov_b32(v[r], ONES_BF16)
    k.s_nop(1)                                       # VALU write -> MFMA read: 2 (row 9)
    k.v_mfma_f32_16x16x32_bf16(v[32:35], v[16:19], v[20:23], 0)
    if nop is not None:
        k.s_nop(nop)
    k.v_add_f32(v[36], v[32], v[33])                 # reads D: 8 wait states (row 1)
    k.v_lshlrev_b32(v[1], 2, v[0])
    k.s_waitcnt(lgkmcnt=0)
    k.global_store_dword(v[1], v[36], s[4:5])
    k.s_endpgm()
    k.build = functools.partial(k.build, check=False)    # launch builds it; keep the hazard in
    return k


def test_missing_nop_after_mfma_names_both_with_lines():
    out = np.full(64, 0xDEADBEEF, np.uint32).view(np.float32)
    with pytest.raises(EmuError) as e:
        launch(_mfma_kernel(6), 1, 64, out)          # 7 wait states < 8
    msg = str(e.value)
    assert "v_mfma_f32_16x16x32_bf16" in msg and "v_add_f32" in msg and "needs 8" in msg
    assert msg.count("pc 0x") == 2 and msg.count("test_emu_fidelity.py:") == 2, msg
    assert "executes 7 wait states" in msg and "s_nop 0" in msg


def test_with_the_nop_passes_and_computes():
    out = np.full(64, 0xDEADBEEF, np.uint32).view(np.float32)
    launch(_mfma_kernel(7), 1, 64, out)
    assert np.all(out == 64.0)        # D = 32 (K ones) in every element; v36 = D[r0] + D[r1]


def test_dynamic_path_only_the_short_path_fails():
    # s_cbranch_scc1 skips the s_nop when s10 == 0: 2 wait states instead of 9
    prog = [MFMA, "s_cmp_eq_u32 s10, 0", "s_cbranch_scc1 1", "s_nop 6", "v_add_f32 v36, v32, v32"]
    regs = {r: np.full(64, ONES_BF16, np.uint32) for r in range(16, 24)}
    m = snippet(prog, regs, sregs={10: 1})
    assert np.all(m.R[0, 36].view(np.float32) == 64.0)
    with pytest.raises(EmuError, match=r"v_add_f32 v36.*pc 0x10.*executes 2 wait states after 'v_mfma"):
        snippet(prog, regs, sregs={10: 0})


def test_loop_carried_hazard_second_iteration():
    prog = ["v_add_f32 v36, v32, v32", MFMA, "s_sub_u32 s10, s10, 1", "s_cmp_lg_u32 s10, 0", "s_cbranch_scc1 -5"]
    snippet(prog, sregs={10: 1})                      # one iteration: nothing produced before the read
    with pytest.raises(EmuError, match=r"pc 0x0.*executes 3 wait states after 'v_mfma.*pc 0x4"):
        snippet(prog, sregs={10: 2})


def test_strict_counting_only_valu_and_nops():
    prog = [MFMA] + ["s_mov_b32 s11, 1"] * 8 + ["v_add_f32 v36, v32, v32"]
    snippet(prog)                                      # LLVM counting: 8 SALU = 8 wait states
    with pytest.raises(EmuError, match="0 VALU/s_nop wait states"):
        snippet(prog, hazards="strict")
    snippet(prog[:1] + prog[2:], hazards=None)         # relaxed: no check at all
    with pytest.raises(EmuError, match="hazard"):
        snippet(prog[:1] + prog[2:])
    with options(hazards=None):
        snippet(prog[:1] + prog[2:])


def test_trans_and_m0_rows():
    with pytest.raises(EmuError, match="TRANS"):
        snippet(["v_exp_f32_e32 v1, v2", "v_add_f32_e32 v3, v1, v1"])
    snippet(["v_exp_f32_e32 v1, v2", "s_nop 0", "v_add_f32_e32 v3, v1, v1"])
    # VALU write -> permlane swap reads: 2; named by rule id and LLVM function, as the checker names it
    with pytest.raises(EmuError, match=r"hazard valu_write_permlane: .* needs 2 "
                                       r"\(LLVM GCNHazardRecognizer::checkPermlaneHazards; CDNA4 ISA") as ei:
        snippet(["v_mov_b32_e32 v1, 1", "v_nop", "v_permlane32_swap_b32_e32 v1, v2"])
    assert "row" not in str(ei.value) and "notes" not in str(ei.value)


# ---- LDS races ----------------------------------------------------------------------------------
L = np.arange(64, dtype=np.uint32)
W2 = np.arange(2, dtype=np.uint32)[:, None]


def _regs(own, other, data):
    return {1: own, 4: other, 2: data}


def test_race_free_exchange_through_a_barrier():
    own, other = 4 * L + 256 * W2, 4 * L + 256 * (1 - W2)
    data = RNG.integers(0, 2**32, (2, 64), dtype=np.uint32)
    m = snippet(["ds_write_b32 v1, v2", "s_waitcnt lgkmcnt(0)", "s_barrier", "ds_read_b32 v3, v4",
                 "s_waitcnt lgkmcnt(0)"], _regs(own, other, data), waves=2, lds=512)
    assert np.array_equal(m.R[0, 3], data[1]) and np.array_equal(m.R[1, 3], data[0])


def test_read_after_write_without_barrier_is_a_race():
    own, other = 4 * L + 256 * W2, 4 * L + 256 * (1 - W2)
    data = RNG.integers(0, 2**32, (2, 64), dtype=np.uint32)
    with pytest.raises(EmuError, match=r"LDS race \(read-after-write\).*ds_read_b32 v3, v4' at pc 0x8 in wave 0 "
                                       r"touches LDS byte 256 that wave 1 wrote"):
        snippet(["ds_write_b32 v1, v2", "s_waitcnt lgkmcnt(0)", "ds_read_b32 v3, v4", "s_waitcnt lgkmcnt(0)"],
                _regs(own, other, data), waves=2, lds=512)


def test_write_after_read_and_write_after_write():
    own, other = 4 * L + 256 * W2, 4 * L + 256 * (1 - W2)
    data = RNG.integers(0, 2**32, (2, 64), dtype=np.uint32)
    with pytest.raises(EmuError, match="write-after-read"):
        snippet(["ds_read_b32 v3, v4", "s_waitcnt lgkmcnt(0)", "ds_write_b32 v1, v2"],
                _regs(own, other, data), waves=2, lds=512)
    same = np.broadcast_to(4 * L, (2, 64))
    with pytest.raises(EmuError, match="write-after-write"):
        snippet(["ds_write_b32 v1, v2"], _regs(same, same, data), waves=2, lds=512)
    # identical bytes from both waves are order-independent: not a race
    snippet(["ds_write_b32 v1, v2"], _regs(same, same, np.broadcast_to(data[0], (2, 64))), waves=2, lds=512)
    # the same wave rewriting its own bytes is fine; the next epoch starts clean
    snippet(["ds_write_b32 v1, v2", "ds_write_b32 v1, v4", "s_waitcnt lgkmcnt(0)", "s_barrier",
             "ds_read_b32 v3, v4", "s_waitcnt lgkmcnt(0)", "s_barrier", "ds_write_b32 v4, v2"],
            _regs(own, other, data), waves=2, lds=512)


def test_seeded_interleaving_exposes_order_dependence():
    # every wave writes its id to the same bytes: the value read after the barrier is whichever
    # wave went last. Race checking off, random interleavings give different winners.
    W4 = np.arange(4, dtype=np.uint32)[:, None]
    prog = ["ds_write_b32 v1, v2", "s_waitcnt lgkmcnt(0)", "s_barrier", "ds_read_b32 v3, v1", "s_waitcnt lgkmcnt(0)"]
    regs = {1: np.broadcast_to(4 * L, (4, 64)), 2: np.broadcast_to(W4 + 100, (4, 64))}
    winners = {int(snippet(prog, regs, waves=4, lds=256, races=False, seed=sd).R[0, 3, 0]) for sd in range(12)}
    assert len(winners) > 1 and winners <= {100, 101, 102, 103}
    with pytest.raises(EmuError, match="write-after-write"):
        snippet(prog, regs, waves=4, lds=256, seed=3)


# ---- strict ISA conditions ----------------------------------------------------------------------
def test_ds_read_tr_needs_8_byte_alignment_and_full_exec():
    with pytest.raises(EmuError, match="not 8-byte aligned"):
        snippet(["ds_read_b64_tr_b16 v[2:3], v1", "s_waitcnt lgkmcnt(0)"], {1: 8 * L + 4}, lds=1024)
    with pytest.raises(EmuError, match="not 8-byte aligned"):     # even in unaligned DS mode
        snippet(["ds_read_b64_tr_b16 v[2:3], v1", "s_waitcnt lgkmcnt(0)"], {1: 8 * L + 4}, lds=1024,
                strict="unaligned")
    ex = np.ones(64, bool)
    ex[63] = False
    with pytest.raises(EmuError, match="EXEC must be all ones"):
        snippet(["ds_read_b64_tr_b16 v[2:3], v1", "s_waitcnt lgkmcnt(0)"], {1: 8 * L}, lds=1024, exec_mask=ex)


def test_ds_alignment_rule_and_unaligned_mode():
    data = RNG.integers(0, 256, 2048).astype(np.uint8)
    prog = ["ds_write_b32 v5, v6", "s_waitcnt lgkmcnt(0)", "ds_read_b128 v[8:11], v1", "s_waitcnt lgkmcnt(0)"]
    with pytest.raises(EmuError, match="ds_read_b128.*not 16-byte aligned"):
        snippet(prog, {1: 16 * L + 8, 5: 4 * L, 6: L}, lds=2048)
    m = snippet(prog, {1: 16 * L + 8, 5: 4 * L, 6: L}, lds=2048, strict="unaligned")
    lds = np.zeros(2048, np.uint8)
    lds[:256] = L.view(np.uint8)
    want = np.stack([lds[16 * ln + 8:16 * ln + 24] for ln in range(64)]).view(np.uint32).T
    assert np.array_equal(m.R[0, 8:12], want)
    with pytest.raises(EmuError, match="ds_write_b64.*not 8-byte aligned"):
        snippet(["ds_write_b64 v1, v[2:3]"], {1: 8 * L + 4}, lds=1024)
    with pytest.raises(EmuError, match="ds_read2_b32.*not 4-byte aligned"):
        snippet(["ds_read2_b32 v[2:3], v1 offset1:1"], {1: 4 * L + 2}, lds=1024)
    del data


def test_lds_beyond_the_allocation():
    with pytest.raises(EmuError, match="beyond the workgroup's 256 bytes"):
        snippet(["ds_write_b32 v1, v2"], {1: 4 * L + 4}, lds=256)
    ex = np.zeros(64, bool)
    ex[:63] = True               # the lane that would be out of range is inactive: fine
    snippet(["ds_write_b32 v1, v2"], {1: 4 * L + 4}, lds=256, exec_mask=ex)


def test_permlane_swap_partial_exec():
    ex = np.ones(64, bool)
    ex[7] = False
    with pytest.raises(EmuError, match="v_permlane16_swap_b32 at pc 0x0 with EXEC not all ones"):
        snippet(["v_permlane16_swap_b32_e32 v1, v2"], exec_mask=ex)


def test_launch_can_relax_the_hazard_check_for_one_run():
    # The same short-nop kernel that raises above runs when the caller turns hazards off for one
    # launch, and the default is strict again afterwards.
    out = np.full(64, 0xDEADBEEF, np.uint32).view(np.float32)
    launch(_mfma_kernel(6), 1, 64, out, hazards=None)
    assert np.all(np.isfinite(out))
    with pytest.raises(EmuError, match="needs 8"):
        launch(_mfma_kernel(6), 1, 64, np.zeros(64, np.float32))
