"""DS addresses wrap modulo 2^32: the hardware adds the instruction offset to the VGPR address in 32
bits, and LLVM relies on it on gfx9 (a negative VGPR plus a positive offset: `v_sub_u32 v3, 0, v0`
then `ds_read_b32 v1, v3 offset:400` for s[100 - t])."""
from __future__ import annotations

import subprocess

import numpy as np

from conftest import load_corpus_build
from emu_snippet import poison, snippet
from flyasm.run import launch

RNG = np.random.default_rng()

# A clang kernel written for this test (compiled at test time, as the corpus is).
REVERSE = """#include "corpus.h"
KERNEL(64) lds_reverse(const GLOBAL int *x, GLOBAL int *y) {
  LDS_ARRAY(int, s, 128);
  unsigned t = thread_id();
  s[t] = x[t];
  s[t + 64] = x[t + 64];
  workgroup_barrier();
  y[t] = s[100 - t];
}
"""


def test_ds_address_wraps_in_snippet():
    data = RNG.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
    four_t = (np.arange(64) * 4).astype(np.uint32)
    m = snippet(["ds_write_b32 v1, v2", "s_waitcnt lgkmcnt(0)",
                 "v_sub_u32 v6, 0, v1",                    # -4t: 2^32 - 4t as an unsigned VGPR
                 "ds_read_b32 v7, v6 offset:252",          # (2^32 - 4t + 252) mod 2^32 = 252 - 4t
                 "ds_read2_b32 v[8:9], v6 offset0:64 offset1:63",   # bytes 256 - 4t, 252 - 4t
                 "s_waitcnt lgkmcnt(0)"],
                {1: four_t, 2: data, 7: poison(), 8: poison(), 9: poison()}, lds=512)
    t = np.arange(64)
    assert np.array_equal(m.R[0, 7], data[63 - t])
    assert np.array_equal(m.R[0, 8, 1:], data[64 - t[1:]])     # lane 0 reads byte 256, never written
    assert np.array_equal(m.R[0, 9], data[63 - t])


def test_ds_address_wraps_in_clang_kernel(tmp_path):
    build = load_corpus_build()
    tools = build.find_clang_tools()
    src = tmp_path / "lds_reverse.c"
    src.write_text(REVERSE)
    co = tmp_path / "lds_reverse.co"
    cmd = build.compile_command(tools, src, co)
    cmd[1:1] = ["-I", str(build.KERNELS_DIR)]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    dis = subprocess.run([str(tools.objdump), "-d", "--mcpu=gfx950", str(co)], capture_output=True, text=True).stdout
    assert "v_sub_u32_e32" in dis and "offset:400" in dis, "clang no longer emits the wrapping address form"
    x = RNG.integers(-2**31, 2**31, 128).astype(np.int32)
    y = np.full(64, -1, np.int32)
    launch(co, 1, 64, x, y)
    assert np.array_equal(y, x[100 - np.arange(64)])
