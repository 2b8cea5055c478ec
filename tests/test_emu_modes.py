"""S_SETVSKIP and S_SET_GPR_IDX_* (per-wave modes that change later vector instructions), against
the ISA's description written here: VSKIP = S0[S1[4:0]] skips vector instructions; with
gpr_idx_en the VGPR operands of the enabled slots (M0[12] SRC0, [13] SRC1, [14] SRC2, [15] DST)
are offset by M0[7:0]; S_SET_GPR_IDX_ON writes M0[7:0] and M0[15:12] and keeps M0's other bits."""
from __future__ import annotations

import numpy as np

from emu_snippet import poison, snippet

RNG = np.random.default_rng()


def rnd():
    return RNG.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)


def test_setvskip_per_wave():
    waves = 4
    s2 = [int(x) for x in RNG.integers(0, 2**32, waves)]
    bit = int(RNG.integers(0, 32))
    s2[0] |= 1 << bit                      # at least one wave skips, one does not
    s2[1] &= ~(1 << bit)
    a, b = rnd(), rnd()
    lds = 256
    lines = [f"s_setvskip s2, {bit + 32 * int(RNG.integers(0, 4))}",   # only S1[4:0] counts
             "v_add_u32 v10, v1, v2",
             "v_mov_b32 v11, v1",
             "ds_write_b32 v3, v2",
             "s_waitcnt lgkmcnt(0)",
             "s_setvskip 0, 0",
             "s_barrier",
             "v_mov_b32 v12, v2",
             "ds_read_b32 v13, v3",
             "s_waitcnt lgkmcnt(0)"]
    per_wave_addr = (np.arange(64) * 4).astype(np.uint32)
    m = snippet(lines, {1: a, 2: b, 3: per_wave_addr, 10: poison(), 11: poison(), 12: poison(), 13: poison()},
                sregs={2: s2}, waves=waves, lds=lds)
    for wv in range(waves):
        skipped = (s2[wv] >> bit) & 1
        if skipped:
            assert (m.R[wv, 10] == 0xDEADBEEF).all() and (m.R[wv, 11] == 0xDEADBEEF).all()
        else:
            assert np.array_equal(m.R[wv, 10], a + b) and np.array_equal(m.R[wv, 11], a)
        assert np.array_equal(m.R[wv, 12], b)                # after s_setvskip 0, 0 every wave runs
    # all waves share one workgroup's LDS: it holds b iff some wave wrote (not all skipped)
    assert np.array_equal(m.R[1, 13], b)


def test_gpr_idx_dst_and_sources():
    waves = 3
    idx = [int(x) for x in RNG.integers(0, 40, waves)]
    m0_hi = int(RNG.integers(0, 2**16)) << 16                     # M0[31:16] must be kept
    src = {r: rnd() for r in range(100, 150)}
    lines = ["s_set_gpr_idx_on s4, gpr_idx(DST)",
             "v_mov_b32 v20, v1",                                 # writes v[20 + idx]
             "s_set_gpr_idx_off",
             "v_mov_b32 v70, v1",                                 # not indexed any more
             "s_set_gpr_idx_on s4, gpr_idx(SRC0,SRC2)",
             "v_add3_u32 v80, v100, v101, v102",                  # v[100+idx] + v101 + v[102+idx]
             "s_set_gpr_idx_mode gpr_idx(SRC1)",
             "s_set_gpr_idx_idx s5",                              # index now s5 & 0xff
             "v_add3_u32 v81, v100, v101, v102",                  # v100 + v[101+idx2] + v102
             "s_set_gpr_idx_off"]
    idx2 = [int(x) for x in RNG.integers(0, 40, waves)]
    regs = {1: rnd(), 70: poison(), 80: poison(), 81: poison()} | src
    regs |= {r: poison() for r in range(20, 64)}
    sregs = {4: [i | (int(RNG.integers(1, 2**24)) << 8) for i in idx],   # only S0[7:0] is the index
             5: [i | 0x300 for i in idx2], 124: m0_hi | 0x0A00}
    m = snippet(lines, regs, sregs=sregs, waves=waves)
    one = regs[1]
    for wv in range(waves):
        i, i2 = idx[wv], idx2[wv]
        assert np.array_equal(m.R[wv, 20 + i], one)
        untouched = [r for r in range(20, 64) if r != 20 + i]
        assert (m.R[wv, untouched] == 0xDEADBEEF).all()
        assert np.array_equal(m.R[wv, 70], one)
        want = (src[100 + i].astype(np.uint64) + src[101] + src[102 + i]) & 0xFFFFFFFF
        assert np.array_equal(m.R[wv, 80], want.astype(np.uint32))
        want2 = (src[100].astype(np.uint64) + src[101 + i2] + src[102]) & 0xFFFFFFFF
        assert np.array_equal(m.R[wv, 81], want2.astype(np.uint32))
        # M0: the last index and mode, the upper half kept, bits 11:8 kept (0xA from the start)
        assert int(m.S[wv, 124]) == m0_hi | (1 << 13) | 0x0A00 | i2
        assert not m.gpr_idx_en[wv]
