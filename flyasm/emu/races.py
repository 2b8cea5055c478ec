"""LDS race detection between `s_barrier`s (per workgroup barrier epochs).

Within one epoch (from a barrier release of the workgroup to the next), each LDS byte remembers
the wave (index within its workgroup) that wrote it and a bitmask of the waves that read it. An
access is a race when its outcome depends on the order of two waves:
  * read-after-write: a wave reads bytes another wave wrote in this epoch;
  * write-after-write: a wave writes bytes another wave wrote in this epoch with a different value
    (two waves storing identical bytes - e.g. fa_fwd's clamped last DMA chunk - are order-independent);
  * write-after-read: a wave writes bytes another wave read in this epoch.
A race raises an EmuError naming the instruction, the pc, both waves and the byte range. All
bookkeeping is numpy over the flat LDS indices the DS / LDS-DMA semantics already compute.
LDS-DMA writes count at issue (their landing is checked by the in-flight LDS check).
Waves that have ended are treated as ordered before later epochs (the barrier does not wait for
them on silicon either; their stores were issued before they ended).
"""
from __future__ import annotations

import numpy as np

from .memory import EmuError


class LdsRaces:
    def __init__(self, wg_of: np.ndarray, lds_size: int, arena_size: int):
        self.wg_of = np.asarray(wg_of, np.int64)
        self.lds_size = lds_size
        # index of each wave within its workgroup
        order = np.argsort(self.wg_of, kind="stable")
        local = np.empty_like(order)
        starts = np.searchsorted(self.wg_of[order], self.wg_of[order], side="left")
        local[order] = np.arange(len(order)) - starts
        self.local = local
        if local.size and local.max() >= 16:
            raise EmuError("LDS race tracking supports at most 16 waves per workgroup (1024 work-items)")
        self.writer = np.full(arena_size, -1, np.int8)
        self.readers = np.zeros(arena_size, np.uint16)
        self.wval = np.zeros(arena_size, np.uint8)          # value the epoch's writer stored

    def new_epoch(self, wgs):
        for g in np.unique(np.asarray(wgs)).tolist():
            s = slice(g * self.lds_size, (g + 1) * self.lds_size)
            self.writer[s] = -1
            self.readers[s] = 0
            self.wval[s] = 0

    def _race(self, inst, waves, kind, other, flat):
        from .machine import where
        g = int(self.wg_of[waves])
        a = int(flat) - g * self.lds_size
        raise EmuError(f"LDS race ({kind}) in workgroup {g}: {where(inst)} in wave {int(self.local[waves])} "
                       f"touches LDS byte {a} that wave {int(other)} {'wrote' if kind != 'write-after-read' else 'read'} "
                       f"since the last s_barrier; separate them with s_waitcnt lgkmcnt(0) + s_barrier")

    def access(self, inst, ids: np.ndarray, idx: np.ndarray, active: np.ndarray, write: bool, vals=None):
        """ids: wave ids [k]; idx: flat LDS byte indices [k, 64, n] (or [k, 64]); active: [k, 64];
        vals: the bytes a write stores, shaped like idx."""
        if idx.ndim == 2:
            idx = idx[..., None]
        wl = np.broadcast_to(self.local[ids][:, None, None], idx.shape)
        act = np.broadcast_to(active[..., None], idx.shape)
        b = idx[act]
        if b.size == 0:
            return
        me = wl[act]
        wave_of = np.broadcast_to(np.asarray(ids)[:, None, None], idx.shape)[act]
        cur = self.writer[b]
        bad = (cur >= 0) & (cur != me)
        if write:
            v = np.asarray(vals, np.uint8).reshape(idx.shape)[act]
            bad &= self.wval[b] != v
        if bad.any():
            j = int(np.argmax(bad))
            self._race(inst, wave_of[j], "write-after-write" if write else "read-after-write", cur[j], b[j])
        bit = (np.uint16(1) << me.astype(np.uint16)).astype(np.uint16)
        if write:
            rd = self.readers[b] & ~bit
            if rd.any():
                j = int(np.argmax(rd != 0))
                x = int(rd[j])
                other = (x & -x).bit_length() - 1
                self._race(inst, wave_of[j], "write-after-read", other, b[j])
            self.writer[b] = me
            self.wval[b] = v
            # two waves of this batch writing the same bytes: the last assignment wins, so a byte
            # whose recorded writer is not the wave that wrote it was written by two waves
            clash = (self.writer[b] != me) & (self.wval[b] != v)
            if clash.any():
                j = int(np.argmax(clash))
                self._race(inst, wave_of[j], "write-after-write", self.writer[b[j]], b[j])
        else:
            np.bitwise_or.at(self.readers, b, bit)
