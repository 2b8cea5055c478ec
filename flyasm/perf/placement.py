"""Where a grid's workgroups run, and which level of the memory hierarchy serves the data they share.

Facts (params.py cites them): the device dispatches workgroups round-robin over its 8 XCDs (the
linear workgroup id, x fastest, mod 8), 32 CUs each; an XCD's workgroups go in order to its
earliest-free slot. Each XCD has its own 4 MB L2; behind the L2s sits the 256 MB Infinity Cache
(MALL), then HBM.

A workgroup reads its data as streams: per slot (a buffer it loads from) a run of bytes it reads at
a steady pace over part of its lifetime (`Streams`). Workgroups whose slot holds the same key read
the same bytes in the same order (attention: every Q tile of a head reads the head's K and V; a
GEMM: every tile of a row of C reads the same rows of A). Which level serves a byte is an LRU
question: a read hits a cache when fewer distinct bytes than the cache holds were touched there
since the previous read of that byte (its stack distance). For readers at a steady pace the
previous read of byte p is the latest earlier reader's pass over p, and the bytes touched in
between are, per stream, the union of what every reader swept in that window. L2: per XCD, every
read. MALL: device-wide, the reads that missed their L2 (the MALL sees only those). Evaluated at
`POINTS` positions along each stream (a reader of a shorter prefix, a causal tile, reads the
points inside it); the first read of a byte on an XCD misses the L2; the first anywhere is COLD
(HBM, compulsory); a later one the MALL no longer holds is HBM again (a re-fetch).
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

L2, MALL, HBM, COLD = 0, 1, 2, 3   # COLD: the first read of the bytes anywhere (HBM, compulsory)
POINTS = 4            # positions per stream the stack distance is evaluated at
_CHUNK = 2048         # evaluations per vectorised window computation (at most)
_CELLS = 1 << 22      # (evaluation, reader) cells per window computation


@dataclass
class Streams:
    """What each workgroup (dispatch order) reads: key[w, j] the stream workgroup w reads in slot j
    (-1: none), nbytes[w, j] how many of its bytes (a prefix), span[j] = (a, b): it reads slot j
    at a steady pace from a to b (fractions of its duration); names[j]: what slot j is (a buffer)."""
    key: np.ndarray
    nbytes: np.ndarray
    span: np.ndarray
    names: tuple = ()


def dispatch(durations: np.ndarray, n_xcd: int, slots_per_xcd: int) -> np.ndarray:
    """Start cycle of each workgroup (dispatch order): workgroup i goes to XCD i mod n_xcd, and each
    XCD gives its next workgroup its earliest-free slot."""
    d = np.asarray(durations, float)
    start = np.zeros(len(d))
    for x in range(min(n_xcd, len(d))):
        idx = np.arange(x, len(d), n_xcd)
        dx = d[idx].tolist()
        heap = dx[:slots_per_xcd]            # the first slots_per_xcd start at 0: their end times
        heapq.heapify(heap)
        st = [0.0] * len(dx)
        for i in range(slots_per_xcd, len(dx)):
            t = heapq.heappop(heap)
            st[i] = t
            heapq.heappush(heap, t + dx[i])
        start[idx] = st
    return start


def levels(st: Streams, start: np.ndarray, dur: np.ndarray, n_xcd: int, l2_bytes: float,
           mall_bytes: float) -> np.ndarray:
    """[w, j, level]: the fraction of workgroup w's reads of slot j served by the L2, the MALL, HBM
    again (the bytes were read before and evicted) and HBM for the first time (COLD)."""
    nw, ns = st.key.shape
    start = np.asarray(start, float)
    dur = np.asarray(dur, float)
    a, b = st.span[:, 0], st.span[:, 1]
    # every (workgroup, slot) with a stream is a reader: where it runs, when it reads, how much
    w_of, j_of = np.nonzero(st.key >= 0)
    R = _Readers(np.unique(st.key[w_of, j_of], return_inverse=True)[1].reshape(-1), st.nbytes[w_of, j_of].astype(float),
                 start[w_of] + a[j_of] * dur[w_of], start[w_of] + b[j_of] * dur[w_of], (w_of % n_xcd))
    # evaluation points: POINTS positions along each stream's longest read, inside the reader's prefix
    longest = np.zeros(R.key.max() + 1 if len(R.key) else 0)
    np.maximum.at(longest, R.key, R.n)
    pos = (np.arange(POINTS) + 0.5) / POINTS
    er, ei = np.nonzero(pos[None, :] * longest[R.key][:, None] < R.n[:, None])
    ep = pos[ei] * longest[R.key[er]]
    et = R.time_at(er, ep)
    # L2: per XCD, the previous read of the same byte on the same XCD
    l2_miss = ~_hits(R, er, ei, et, R.xcd[er], R.xcd, l2_bytes, np.ones(len(R.key), bool))
    # MALL: device-wide, among the reads that missed their L2; readers that mostly missed take part
    miss_frac = np.bincount(er, l2_miss, len(R.key)) / np.maximum(np.bincount(er, None, len(R.key)), 1)
    sel = np.nonzero(l2_miss)[0]
    mall_hit = np.zeros(len(er), bool)
    cold = np.zeros(len(er), bool)
    if len(sel):
        mall_hit[sel], seen = _hits(R, er[sel], ei[sel], et[sel], np.zeros(len(sel), np.int64),
                                    np.zeros(len(R.key), np.int64), mall_bytes, miss_frac >= 0.5, earlier=True)
        cold[sel] = ~seen
    lvl = np.where(~l2_miss, L2, np.where(mall_hit, MALL, np.where(cold, COLD, HBM)))
    out = np.zeros((nw, ns, 4))
    np.add.at(out, (w_of[er], j_of[er], lvl), 1.0)
    tot = out.sum(-1, keepdims=True)
    return np.divide(out, tot, out=np.zeros_like(out), where=tot > 0)


class _Readers:
    """One (workgroup, slot) that reads a stream: key, bytes n, read window [t0, t1], XCD."""

    def __init__(self, key, n, t0, t1, xcd):
        self.key, self.n, self.t0, self.t1, self.xcd = key, n, t0, t1, xcd
        self.rate = n / np.maximum(t1 - t0, 1e-9)

    def time_at(self, r, p):
        return self.t0[r] + p / self.rate[r]

    def pos_at(self, r, t):
        return np.clip((t - self.t0[r]) * self.rate[r], 0.0, self.n[r])


def _hits(R: _Readers, er, ei, et, group, reader_group, capacity, takes_part, earlier=False):
    """Whether each evaluation (reader er at point ei, read at time et, in cache `group`) hits: an
    earlier evaluation of the same stream, point and group exists, and the bytes swept in between
    by the readers of that group that take part (union per stream) are fewer than `capacity`.
    earlier: also return whether that earlier evaluation exists."""
    n = len(er)
    hit = np.zeros(n, bool)
    if not n:
        return (hit, hit.copy()) if earlier else hit
    k = R.key[er]
    order = np.lexsort((et, ei, k, group))
    same = np.zeros(n, bool)
    same[1:] = (group[order][1:] == group[order][:-1]) & (k[order][1:] == k[order][:-1]) & \
        (ei[order][1:] == ei[order][:-1])
    prev_t = np.full(n, np.nan)
    prev_t[order[1:][same[1:]]] = et[order[:-1][same[1:]]]
    cand = np.nonzero(~np.isnan(prev_t))[0]
    seen = ~np.isnan(prev_t)
    if not len(cand):
        return (hit, seen) if earlier else hit
    # readers of each cache group that take part, sorted by start, for the window scans
    for g in np.unique(group[cand]):
        rg = np.nonzero((reader_group == g) & takes_part)[0]
        rg = rg[np.argsort(R.t0[rg], kind="stable")]
        t0s = R.t0[rg]
        span = float((R.t1[rg] - R.t0[rg]).max()) if len(rg) else 0.0
        ev = cand[group[cand] == g]
        lo_t, hi_t = prev_t[ev], et[ev]
        lo_i = np.searchsorted(t0s, lo_t - span, side="left")
        hi_i = np.searchsorted(t0s, hi_t, side="left")
        order_ev = np.argsort(hi_i - lo_i, kind="stable")
        widths = (hi_i - lo_i)[order_ev]
        c = 0
        while c < len(ev):                   # chunks of similar width, at most _CELLS cells each
            end = min(c + _CHUNK, len(ev))
            end = min(end, c + max(1, _CELLS // max(1, int(widths[end - 1]))))
            sel = order_ev[c:end]
            width = int(widths[end - 1])
            c = end
            if width <= 0:
                hit[ev[sel]] = True
                continue
            idx = lo_i[sel][:, None] + np.arange(width)[None, :]
            valid = idx < hi_i[sel][:, None]
            r = rg[np.minimum(idx, len(rg) - 1)]
            t_lo, t_hi = lo_t[sel][:, None], hi_t[sel][:, None]
            p_lo = R.pos_at(r, np.broadcast_to(t_lo, r.shape))
            p_hi = R.pos_at(r, np.broadcast_to(t_hi, r.shape))
            p_hi = np.where(valid, p_hi, p_lo)
            swept = _union_per_key(R.key[r], p_lo, p_hi)
            hit[ev[sel]] = swept < capacity
    return (hit, seen) if earlier else hit


def _union_per_key(key, lo, hi) -> np.ndarray:
    """Row-wise: total length of the union of intervals [lo, hi) that share a key, summed over keys.
    Keys are small non-negative ints; positions are bytes, ordered at 128-byte (line) resolution."""
    if key.shape[1] == 0:
        return np.zeros(key.shape[0])
    packed = (key.astype(np.int64) << 32) | np.minimum(lo // 128, (1 << 32) - 1).astype(np.int64)
    o = np.argsort(packed, axis=1)
    k = np.take_along_axis(key, o, 1)
    lo_s = np.take_along_axis(lo, o, 1)
    hi_s = np.take_along_axis(hi, o, 1)
    big = 2.0 * float(max(hi.max(), lo.max(), 1.0)) + 1.0
    rank = np.zeros(k.shape)
    rank[:, 1:] = np.cumsum(k[:, 1:] != k[:, :-1], axis=1)
    run = np.maximum.accumulate(hi_s + rank * big, axis=1) - rank * big     # running max of hi per key
    prev = np.full(k.shape, -np.inf)
    prev[:, 1:] = np.where(k[:, 1:] == k[:, :-1], run[:, :-1], -np.inf)
    return np.maximum(0.0, hi_s - np.maximum(lo_s, prev)).sum(1)
