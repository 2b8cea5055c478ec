"""Fast paths of the emulator's fidelity trackers against their simple forms.

LDS race tracker (flyasm/emu/races.py): the dword fast path (whole aligned dwords on dword views,
reader bits per wave group, per-workgroup epoch flags) must decide exactly like the byte path.

* differential: random access sequences (sizes 1..16 bytes, aligned and not, partial EXEC, random
  wave subsets of two workgroups, values from a tiny set so identical-value writes occur, barrier
  epochs) through the tracker and through a byte-only copy: the same race (same message) or none,
  and the same per-byte state after every access (through access() and access_range());
* as executed: sub-dword writes of different waves into one dword are not a race, a dword read over
  bytes of two writers is; a read broadcast to every wave of a batch records every reader.

Hazard tracker (flyasm/emu/hazards.py): histories shared by wave groups (split on partial steps,
merged on reconvergence) against one history per wave, over random steps of random wave subsets
through a program with MFMA, VALU->MFMA, trans, m0 and readfirstlane rows: the same verdict at the
same step, and each wave's group history equal to its own.
"""
from __future__ import annotations

import numpy as np
import pytest

from emu_snippet import snippet
from flyasm.emu import EmuError
from flyasm.emu.races import LdsRaces

RNG = np.random.default_rng()


class ByteOnly(LdsRaces):
    def access(self, inst, ids, idx, active, write, vals=None):
        if idx.ndim == 2:
            idx = idx[..., None]
        self._bytes(inst, np.asarray(ids), idx, active, write, vals)


class _Inst:
    loc = None
    pc = 0

    def __init__(self, i):
        self.i = i

    def text(self):
        return f"op{self.i}"


def _outcome(tr, *args):
    try:
        tr.access(*args)
    except EmuError as e:
        return str(e)
    return None


@pytest.mark.parametrize("trial", range(6))
def test_dword_path_decides_like_the_byte_path(trial):
    lds, n_wg, per = 256, 2, 4
    wg_of = np.repeat(np.arange(n_wg), per)
    arena = n_wg * lds + 16
    fast, ref = LdsRaces(wg_of, lds, arena), ByteOnly(wg_of, lds, arena)
    races = 0
    for step in range(300):
        if RNG.random() < 0.08:
            g = RNG.choice(n_wg, RNG.integers(1, n_wg + 1), replace=False)
            fast.new_epoch(g)
            ref.new_epoch(g)
            continue
        k = int(RNG.integers(1, n_wg * per + 1))
        ids = np.sort(RNG.choice(n_wg * per, k, replace=False))
        n = int(RNG.choice([1, 2, 4, 8, 12, 16]))
        align = int(RNG.choice([1, 4, n if n in (8, 16) else 4]))
        addr = RNG.integers(0, 8, (k, 64)) * max(align, 4) + (RNG.integers(0, 4, (k, 64)) if align == 1 else 0)
        addr = np.minimum(addr, lds - n)
        if RNG.random() < 0.5:                        # broadcast: every lane/wave the same few addresses
            addr[:] = addr[0, 0]
        active = RNG.random((k, 64)) < (1.0 if RNG.random() < 0.5 else 0.6)
        addr = np.where(active, addr, 0)
        idx = (addr + (wg_of[ids] * lds)[:, None])[..., None] + np.arange(n)
        write = bool(RNG.random() < 0.4)
        vals = RNG.integers(0, 2, (k, 64, n)).astype(np.uint8) if write else None
        inst = _Inst(step)
        if RNG.random() < 0.5:               # the same access in access_range form (no byte index)
            try:
                fast.access_range(inst, ids, idx[..., 0], n, active, write, vals)
                got = None
            except EmuError as e:
                got = str(e)
        else:
            got = _outcome(fast, inst, ids, idx, active, write, vals)
        want = _outcome(ref, inst, ids, idx, active, write, vals)
        assert got == want, (step, n, align, write)
        if want is not None:
            races += 1
            fast, ref = LdsRaces(wg_of, lds, arena), ByteOnly(wg_of, lds, arena)
            continue
        a = n_wg * lds
        assert np.array_equal(fast.writer[:a], ref.writer[:a]), step
        assert np.array_equal(fast.readers[:a], ref.readers[:a]), step
        wr = ref.writer[:a] >= 0
        assert np.array_equal(fast.wval[:a][wr], ref.wval[:a][wr]), step
    assert races > 0          # the sequences do exercise races


L = np.arange(64, dtype=np.uint32)
W = np.arange(4, dtype=np.uint32)[:, None]


def test_sub_dword_writes_of_two_waves_in_one_dword_are_not_a_race():
    # wave w writes byte w of dword L (ds_write_b8); after the barrier every wave reads the dword
    m = snippet(["ds_write_b8 v1, v2", "s_waitcnt lgkmcnt(0)", "s_barrier", "ds_read_b32 v3, v4",
                 "s_waitcnt lgkmcnt(0)"],
                {1: 4 * L + W, 2: np.broadcast_to(W + 0x10, (4, 64)), 4: np.broadcast_to(4 * L, (4, 64))},
                waves=4, lds=256)
    assert (m.R[:, 3] == 0x13121110).all()


def test_dword_read_over_bytes_of_two_writers_is_a_race():
    # wave 0 writes bytes 0-1 (ds_write_b16), wave 1 bytes 2-3; wave 1 then reads the whole dword
    regs = {1: 4 * L + 2 * W[:2], 2: np.broadcast_to(W[:2] + 7, (2, 64)), 4: np.broadcast_to(4 * L, (2, 64))}
    with pytest.raises(EmuError, match=r"read-after-write.*in wave 0 touches LDS byte 2 that wave 1 wrote"):
        snippet(["ds_write_b16 v1, v2", "s_waitcnt lgkmcnt(0)", "ds_read_b32 v3, v4"], regs, waves=2, lds=256)
    # its own half-written dword is no race
    snippet(["ds_write_b16 v1, v2", "s_waitcnt lgkmcnt(0)", "ds_read_b32 v3, v1"],
            {1: 4 * L, 2: L + 7}, waves=1, lds=256)


@pytest.mark.parametrize("writer,first_other", [(0, 1), (3, 0)])
def test_broadcast_read_records_every_reader(writer, first_other):
    # all 4 waves read dword 0 in one batch; then only one wave writes it (the others write their
    # own dwords): a write-after-read against the lowest other wave, which a lost reader bit (only
    # the first or only the last wave of the batch remembered) would miss
    own = np.where(W == writer, 0, 64 + 4 * W) + 0 * L
    with pytest.raises(EmuError, match=rf"write-after-read.*in wave {writer} touches LDS byte 0 that wave "
                                       rf"{first_other} read"):
        snippet(["ds_read_b32 v3, v4", "s_waitcnt lgkmcnt(0)", "ds_write_b32 v1, v2"],
                {1: own, 2: np.broadcast_to(W + 1, (4, 64)), 4: np.zeros(64, np.uint32)},
                waves=4, lds=256, exec_mask=L == 0)


# ---- hazard tracker: group-shared histories vs one history per wave ------------------------------
HZ_PROGRAM = ["v_mfma_f32_32x32x8_f16 v[0:15], v[16:17], v[18:19], v[0:15]", "v_add_f32 v20, v0, v1",
              "s_nop 3", "v_mov_b32 v16, v21", "v_exp_f32 v22, v23", "v_add_f32 v24, v22, v22",
              "s_add_u32 s0, s0, 1", "s_nop 7", "v_mfma_f32_16x16x16_f16 v[32:35], v[16:17], v[18:19], v[32:35]",
              "v_mov_b32 v33, v25", "s_mov_b32 m0, s1", "v_readfirstlane_b32 s2, v20"]


def _hz_program():
    from flyasm.emu.program import Descriptor, Program, resolve_branches
    from flyasm.isa.syntax import parse_instruction
    insts = []
    for i, t in enumerate(HZ_PROGRAM + ["s_endpgm"]):
        inst = parse_instruction(t)
        inst.pc = 4 * i
        insts.append(inst)
    return Program("hz", insts, Descriptor(0, 0, 0, 0, 0, 0, 0), [], {}, resolve_branches(insts))


@pytest.mark.parametrize("mode", ["verify", "strict"])
def test_hazard_groups_decide_like_per_wave_histories(mode):
    from collections import deque
    from flyasm.emu.hazards import HazardTracker
    prog, W = _hz_program(), 6
    n_inst = len(HZ_PROGRAM)
    hazards = 0
    for trial in range(40):
        fast = HazardTracker(prog, W, mode)
        ref = HazardTracker(prog, W, mode)
        per_wave = [deque(maxlen=ref.H) for _ in range(W)]
        for step in range(200):
            p = int(RNG.integers(0, n_inst))
            if RNG.random() < 0.4:
                w, waves = slice(None), list(range(W))
            else:
                waves = sorted(RNG.choice(W, int(RNG.integers(1, W + 1)), replace=False).tolist())
                w = np.array(waves)
            try:
                fast.step(w, p)
                got = None
            except EmuError as e:
                got = str(e)
            want = None
            cons = ref.consumer(p)
            for x in waves:
                try:
                    if cons.keys:
                        ref._walk(cons, p, per_wave[x], (0, np.array([x])))
                except EmuError as e:
                    want = want or str(e)
                per_wave[x].append(p)
            assert (got is None) == (want is None), (trial, step, got, want)
            if got is not None:
                hazards += 1
                break
            if fast.gid is not None:     # each wave's group history is its own history
                for x in range(W):
                    assert list(fast.hists[fast.gid[x]]) == list(per_wave[x]), (trial, step, x)
            else:
                assert all(list(fast.hists[0]) == list(h) for h in per_wave)
    assert hazards > 5
