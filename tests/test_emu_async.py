"""Strict asynchronous memory: a missing s_waitcnt is an error naming producer and consumer."""
from __future__ import annotations

import numpy as np
import pytest

from flyasm.emu import EmuError
from flyasm.isa.operands import s, v
from flyasm.kernel import Kernel
from flyasm.run import launch


def _copy_kernel(wait: bool, smem_wait: bool = True):
    k = Kernel("async_probe", block=64, arg_layout="natural")
    k.arg("src", "ptr"), k.arg("dst", "ptr")
    k.s_load_dwordx4(s[4:7], s[0:1], 0)
    if smem_wait:
        k.s_waitcnt(lgkmcnt=0)
    k.v_lshlrev_b32(v[1], 2, v[0])
    k.global_load_dword(v[2], v[1], s[4:5])
    if wait:
        k.s_waitcnt(vmcnt=0)
    k.v_add_u32(v[2], 1, v[2])
    k.global_store_dword(v[1], v[2], s[6:7])
    k.s_endpgm()
    return k


def _build_or_skip(k):
    try:
        return k.build(check=False).co
    except TypeError:
        return k.build().co


def test_with_wait_runs():
    x = np.random.default_rng().integers(0, 2**32, 64, dtype=np.uint32)
    out = np.full(64, 0xDEADBEEF, np.uint32)
    launch(_build_or_skip(_copy_kernel(True)), 1, 64, x, out)
    assert np.array_equal(out, x + np.uint32(1))


def test_missing_vmcnt_names_both():
    x = np.arange(64, dtype=np.uint32)
    with pytest.raises(EmuError) as e:
        launch(_build_or_skip(_copy_kernel(False)), 1, 64, x, np.zeros(64, np.uint32))
    msg = str(e.value)
    assert "v_add_u32" in msg and "global_load_dword" in msg and "vmcnt" in msg and "pc 0x" in msg


def test_missing_lgkmcnt_for_smem():
    with pytest.raises(EmuError) as e:
        launch(_build_or_skip(_copy_kernel(True, smem_wait=False)), 1, 64, np.arange(64, dtype=np.uint32),
               np.zeros(64, np.uint32))
    assert "s_load_dwordx4" in str(e.value) and "lgkmcnt" in str(e.value)
