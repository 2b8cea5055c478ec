"""check_inflight="land": a register read while a load will still write it. Strict (the default),
the run stops; "land" is for kernels that rely on timing instead of a counter (aiter's fp8
attention reads ds_read_b64_tr_b8 results ~300 VALU instructions after issue with an s_waitcnt that
does not cover them): the wave's ops of that counter up to the producer land at the read, in issue
order (LDS returns in order), and the report lists the read as a "wait" row."""
from __future__ import annotations

import numpy as np
import pytest
from emu_snippet import snippet

from flyasm.emu.memory import EmuError

LINES = ["ds_write_b64 v1, v[6:7]", "s_waitcnt lgkmcnt(0)",
         "ds_read_b32 v3, v1", "ds_read_b32 v4, v1 offset:4",
         "v_add_u32 v5, v3, v3",            # pc 16: reads v3 before any wait
         "v_add_u32 v8, v4, v4",            # pc 20: v4 was not landed by the first read
         "s_waitcnt lgkmcnt(0)"]


def _regs():
    rng = np.random.default_rng()
    a, b = rng.integers(1, 1 << 30, 64, dtype=np.uint32), rng.integers(1, 1 << 30, 64, dtype=np.uint32)
    return a, b, {1: (np.arange(64) * 8).astype(np.uint32), 6: a, 7: b}


def test_strict_read_of_an_inflight_register_stops():
    _, _, regs = _regs()
    with pytest.raises(EmuError, match=r"v_add_u32 v5, v3, v3.*uses v3 while 'ds_read_b32 v3, v1'.*lgkmcnt"):
        snippet(LINES, regs, lds=1024)


def test_land_delivers_in_order_and_reports_each_read():
    a, b, regs = _regs()
    m = snippet(LINES, regs, lds=1024, check_inflight="land")
    assert np.array_equal(m.R[0, 5], 2 * a) and np.array_equal(m.R[0, 8], 2 * b)
    rows = m.report.rows("wait")
    assert [(r.rule, r.pc, r.other_pc) for r in rows] == [("inflight_read", 16, 8), ("inflight_read", 20, 12)]


def test_land_is_a_named_mode():
    _, _, regs = _regs()
    with pytest.raises(EmuError, match="check_inflight is True, False or 'land'"):
        snippet(LINES, regs, lds=1024, check_inflight="report")
