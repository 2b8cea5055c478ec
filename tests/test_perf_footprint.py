"""perf.footprint: the streams each workgroup of a real grid reads, found by running its address
computation in the emulator."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from flyasm.perf.footprint import probe
from kernels import vector_add as va

FLYDSL = Path(__file__).resolve().parents[1].parent / "shared" / "flydsl"


def _groups(keys: np.ndarray) -> set:
    """The partition of workgroup ids by key, as a set of frozensets."""
    return {frozenset(np.nonzero(keys == k)[0].tolist()) for k in np.unique(keys)}


def test_private_tiles_get_private_keys_and_huge_buffers_cost_nothing():
    """vector_add: workgroup i reads x and y at [4096 i, 4096 i + 4096): every key differs. The
    buffers are declared 64 GiB (address space only: the probe never holds them)."""
    from flyasm.run.args import pack_args, specs_from_kernel
    k = va.build(4096, "f32")
    co = k.build().co
    n_wg = 6
    n = n_wg * 4096
    specs = specs_from_kernel(k)

    def kernarg(addrs):
        return pack_args(specs, [addrs["out"], addrs["x"], addrs["y"], n], None, grid=(n_wg, 1, 1), block=(256, 1, 1))
    fp = probe(co, k.name, (n_wg, 1, 1), 256, kernarg, {"out": 64 << 30, "x": 64 << 30, "y": 64 << 30},
               quota=4, cache=False)
    for name in ("x", "y"):
        assert (fp.key[name] >= 0).all() and len(np.unique(fp.key[name])) == n_wg
    assert not (fp.key["x"] == fp.key["y"]).any()


@pytest.mark.skipif(not FLYDSL.exists(), reason="needs ../shared/flydsl (FlyDSL's code objects)")
@pytest.mark.parametrize("build", ["fa_fwd_bf16_d128_noncausal_h64.co", "fa_fwd_bf16_d128_noncausal_h64_xcdswz.co"])
def test_flydsl_k_streams_follow_its_own_head_mapping(build):
    """FlyDSL's attention at B1 H64 S1024 (grid 64 x 4): the workgroups the probe finds reading one K
    stream are the Q tiles of one head as FlyDSL's source defines them (flash_attn_utils.
    _init_dualwave_thread_mapping): head = x in the plain build, (x + 64 y) // 4 in the XCD-mapping
    build, which reads the grid from hidden_block_count_y."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import flydsl_launch as FL
    co = (FLYDSL / "gfx950" / build).read_bytes()
    H, S = 64, 1024
    g = FL.grid(H, S, 1)
    bufs = {n: S * H * 128 * 2 for n in ("q", "k", "v", "o")}
    fp = probe(co, FL.KERNEL, g, FL.BLOCK, lambda a: FL.pack(co, a, 1, S, H, H, 128), bufs, quota=13, cache=False)
    ids = np.arange(g[0] * g[1])
    x, y = ids % g[0], ids // g[0]
    head = (x + H * y) // g[1] if "xcdswz" in build else x
    assert _groups(fp.key["k"]) == _groups(head) == _groups(fp.key["v"])
    assert len(np.unique(fp.key["q"])) == len(ids)          # every Q tile its own
