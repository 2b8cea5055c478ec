"""The real launch benchmarks/sweep_fa_fwd.perf_launch gives the placement model's probe: run by
perf.footprint over the whole grid, our kernel's own address computation (strides, XCD remap) must
find one K/V stream per (head, batch) and one Q tile per work item -- what the placement model needs
to place the shared reads. Wrong strides in the probe's arguments would merge or split streams."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT / "kernels")]


@pytest.mark.parametrize("causal", [False, True])
def test_perf_launch_probe_streams(causal):
    import fa_fwd
    import fa_grid
    import sweep_fa_fwd
    from flyasm.perf.footprint import probe
    batch, heads, seqlen = 2, 8, 2048           # 8 (causal: 4 pairs) x 8 x 2 workgroups: the remap is on
    k = fa_fwd.build("bf16", causal, 1, 1, aiter_args=True)
    assert k.wg_map is fa_grid.xcd_item
    co = k.build().co
    L = sweep_fa_fwd.perf_launch(k, causal, batch, heads, seqlen, probe=True)
    g = tuple(L["grid"])
    fp = probe(co, k.name, g, L["block"], L["probe"]["kernarg"], L["probe"]["buffers"], quota=64, cache=False)
    z, y, x = np.indices(g[::-1]).reshape(3, -1)             # dispatch order, x fastest
    tile, head, b = k.wg_map(g, x, y, z)
    assert sorted(zip(tile, head, b)) == sorted(zip(x, y, z))    # a bijection on the grid
    kv = head + heads * b
    item = tile + g[0] * kv
    for name, owner in (("k", kv), ("v", kv), ("q", item)):
        keys = fp.key[name]
        assert (keys >= 0).all(), f"a workgroup did not read {name}"
        # same stream exactly when the same owner: as many distinct keys as owners, one key per owner
        assert len(np.unique(keys)) == len(np.unique(owner)), name
        assert len(set(zip(keys.tolist(), owner.tolist()))) == len(np.unique(owner)), name
