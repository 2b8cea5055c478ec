"""perf.placement against independent hand calculations: the XCD dispatch, interval unions, and the
L2/MALL levels of synthetic grids whose reuse distances are known (and an explicit LRU simulation)."""
from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

from flyasm.perf import placement as PL

MB = 1 << 20


def test_dispatch_rounds_and_tail():
    """8 XCDs of 32 slots: 1000 equal workgroups are 125 per XCD, 4 rounds; workgroup 256 (XCD 0's
    33rd) waits for XCD 0's first free slot; a grid smaller than the slots starts all at 0."""
    d = np.full(1000, 10.0)
    start = PL.dispatch(d, 8, 32)
    assert (start + d).max() == 10 * 4
    d = np.r_[np.full(256, 10.0), [50.0]]
    start = PL.dispatch(d, 8, 32)
    assert start[256] == 10 and (start + d).max() == 60
    assert (PL.dispatch(np.array([7.0, 3.0]), 8, 32) == 0).all()


def test_dispatch_is_per_xcd_not_global():
    """XCD 0 holds the long workgroups: its next one waits for them although XCD 1 has free slots."""
    d = np.array([100.0, 1.0] * 2 + [5.0, 5.0])      # ids 0, 2, 4 on XCD 0; 1, 3, 5 on XCD 1
    start = PL.dispatch(d, 2, 2)
    assert start[4] == 100.0 and start[5] == 1.0


@pytest.mark.parametrize("seed", range(5))
def test_union_per_key_matches_brute_force(seed):
    """Intervals on whole 128-byte lines (the resolution the union orders them at) against a
    cell-by-cell count."""
    rng = np.random.default_rng(seed)
    rows, n = 7, 12
    key = rng.integers(0, 3, (rows, n))
    lo = rng.uniform(0, 50, (rows, n)).round()
    hi = lo + rng.uniform(0, 20, (rows, n)).round()
    got = PL._union_per_key(key, lo * 128, hi * 128) / 128
    for r in range(rows):
        covered = 0
        for k in np.unique(key[r]):
            cells = np.zeros(200, bool)
            for a, b in zip(lo[r][key[r] == k], hi[r][key[r] == k]):
                cells[int(a):int(b)] = True
            covered += cells.sum()
        assert got[r] == covered


def _one_stream(keys, nbytes, span=(0.0, 1.0)):
    keys = np.asarray(keys, np.int64)[:, None]
    return PL.Streams(keys, np.full(keys.shape, float(nbytes)), np.array([span]))


def test_second_reader_on_the_same_xcd_hits_the_l2_the_first_is_cold():
    """Workgroups 0 and 8 (both XCD 0) read one 1 MB stream, 8 starting 1000 cycles later; nothing
    else touches XCD 0, so 8's stack distance is what 0 and 8 swept in between: < 4 MB."""
    n = 9
    keys = [0] + [100 + i for i in range(1, 8)] + [0]
    st = _one_stream(keys, 1 * MB)
    start = np.zeros(n)
    start[8] = 1000.0
    dur = np.full(n, 10_000.0)
    lv = PL.levels(st, start, dur, 8, 4 * MB, 256 * MB)
    assert lv[0, 0].tolist() == [0.0, 0.0, 0.0, 1.0]   # first touch anywhere: HBM, cold
    assert lv[8, 0].tolist() == [1.0, 0.0, 0.0, 0.0]   # L2 hit
    assert (lv[1:8, 0, PL.COLD] == 1.0).all()          # private streams: first touch


def test_a_reader_on_another_xcd_misses_its_l2_and_hits_the_mall():
    st = _one_stream([0, 0], 1 * MB)
    lv = PL.levels(st, np.array([0.0, 1000.0]), np.full(2, 10_000.0), 8, 4 * MB, 256 * MB)
    assert lv[1, 0].tolist() == [0.0, 1.0, 0.0, 0.0]


def test_a_reread_the_mall_no_longer_holds_is_an_hbm_refetch():
    """Workgroup 1 (XCD 1) rereads workgroup 0's 1 MB stream after 0 and five others (XCDs 2-6)
    have streamed 6 MB in between: more than a 4 MB MALL holds, so HBM serves it again."""
    keys = [0, 0, 1, 2, 3, 4, 5, 6]
    st = PL.Streams(np.array(keys, np.int64)[:, None], np.array([1.0] * 2 + [1.0] * 6)[:, None] * MB,
                    np.array([[0.0, 1.0]]))
    start = np.array([0.0, 5000.0, 1000, 1000, 1000, 1000, 1000, 1000])
    dur = np.full(8, 1000.0)
    lv = PL.levels(st, start, dur, 8, 4 * MB, 4 * MB)
    assert lv[1, 0].tolist() == [0.0, 0.0, 1.0, 0.0]


@pytest.mark.parametrize("others,l2_fraction", [(2, 1.0), (6, 0.25)])
def test_stack_distance_against_the_l2_capacity(others, l2_fraction):
    """XCD 0 runs workgroup 0 (stream A) and `others` workgroups streaming private data from cycle 0,
    and workgroup w (stream A again) from cycle 4000; every stream is 8 MB read over 8000 cycles. At
    A's evaluation points p = 1, 3, 5, 7 MB, w's previous read of p is workgroup 0's, 4000 cycles
    earlier; in that window A's two readers swept [max(0, p-4), min(8, p+4)] MB (5, 7, 7, 5 MB) and
    each other stream [p, min(8, p+4)] MB (4, 4, 3, 1 MB). Stack distances with 2 others: 13, 15, 13,
    7 MB, all under a 17 MB L2; with 6 others: 29, 31, 25, 11 MB, one point in four hits."""
    w = 8 * (others + 1)
    keys = np.arange(w + 1) + 1000
    keys[0] = keys[w] = 0
    start = np.zeros(w + 1)
    start[w] = 4000.0
    lv = PL.levels(_one_stream(keys, 8 * MB), start, np.full(w + 1, 8000.0), 8, 17 * MB, 256 * MB)
    assert lv[w, 0, PL.L2] == l2_fraction


def _lru_levels(keys, start, dur, nbytes, n_xcd, l2, mall, chunk):
    """An explicit LRU simulation at `chunk`-byte granularity: every workgroup reads its stream's
    chunks in order, evenly over its duration; per XCD an L2 of l2 bytes, device-wide a MALL of mall
    bytes seeing the L2 misses. Fractions of each workgroup's chunks served by L2 / MALL / HBM."""
    n = len(keys)
    nch = int(nbytes // chunk)
    ev = []
    for w in range(n):
        for c in range(nch):
            ev.append((start[w] + (c + 0.5) / nch * dur[w], w % n_xcd, keys[w], c, w))
    ev.sort()
    l2s = [OrderedDict() for _ in range(n_xcd)]
    mall_lru = OrderedDict()
    fetched = set()
    out = np.zeros((n, 4))
    for _, x, k, c, w in ev:
        line = (k, c)
        if line in l2s[x]:
            l2s[x].move_to_end(line)
            out[w, 0] += 1
            continue
        l2s[x][line] = 1
        if len(l2s[x]) > l2 // chunk:
            l2s[x].popitem(last=False)
        if line in mall_lru:
            mall_lru.move_to_end(line)
            out[w, 1] += 1
        else:
            mall_lru[line] = 1
            if len(mall_lru) > mall // chunk:
                mall_lru.popitem(last=False)
            out[w, 2 if line in fetched else 3] += 1
            fetched.add(line)
    return out / nch


@pytest.mark.parametrize("mapping", ["head_fast", "tile_fast"])
def test_levels_agree_with_an_explicit_lru_simulation(mapping):
    """An attention-like grid (16 heads x 16 tiles, each tile reading its head's 2 MB stream) on 8
    XCDs of 4 slots, durations jittered by 5%: the mean level fractions agree with an explicit LRU
    simulation within 0.03 (the analysis evaluates each reader at 4 points of its stream, the
    simulation at 64 chunks; the difference is that sampling)."""
    H, T = 16, 16
    ids = np.arange(H * T)
    keys = ids % H if mapping == "head_fast" else ids // T
    rng = np.random.default_rng(1)
    dur = 1000.0 * (1 + 0.05 * rng.standard_normal(H * T))
    start = PL.dispatch(dur, 8, 4)
    l2, mall, nbytes = 1 * MB, 8 * MB, 2 * MB
    lv = PL.levels(_one_stream(keys, nbytes), start, dur, 8, l2, mall)[:, 0].mean(0)
    ref = _lru_levels(keys, start, dur, nbytes, 8, l2, mall, nbytes // 64).mean(0)
    assert np.abs(lv - ref).max() < 0.03, (lv, ref)
