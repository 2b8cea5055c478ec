"""LDS race detection between `s_barrier`s (per workgroup barrier epochs).

Within one epoch (from a barrier release of the workgroup to the next), each LDS byte remembers
the wave (index within its workgroup) that wrote it and a bitmask of the waves that read it. An
access is a race when its outcome depends on the order of two waves:
  * read-after-write: a wave reads bytes another wave wrote in this epoch;
  * write-after-write: a wave writes bytes another wave wrote in this epoch with a different value
    (two waves storing identical bytes - e.g. fa_fwd's clamped last DMA chunk - are order-independent);
  * write-after-read: a wave writes bytes another wave read in this epoch.
A race raises an EmuError naming the instruction, the pc, both waves and the byte range; with a
report (report mode or waivers, flyasm/emu/report.py) it is handed to the report instead, and the
access completes as if it had not raced. A report also needs the other wave's instruction, so
then each dword remembers the pc of its writer and, per wave of the workgroup, of its last reader
(kept only with a report: it costs a put per access). All bookkeeping is numpy over the flat LDS
indices the DS / LDS-DMA semantics already compute.

State is per byte (writer wave, reader bitmask, written value), so sub-dword accesses are exact.
Accesses of whole aligned dwords (every DS b32..b128, read2/write2, tr, dword LDS-DMA: the common
case) work on dword views of the same arrays: the writer bytes as one int32 (a wave's id repeated
4 times), the 4 reader masks as one uint64, the written bytes as one uint32, with gathers and plain
scatters - no ufunc.at. Reader bits are set per group of batch waves with the same index in their
workgroup, so no two elements of one scatter hit the same dword with different bits. Per-workgroup
flags (any write / any read in this epoch) skip the checks that cannot fire and the epoch resets
of untouched LDS. A dword check that finds a suspect re-runs the access on the byte path, which
decides and names the race exactly as before.
LDS-DMA writes count at issue (their landing is checked by the in-flight LDS check).
Waves that have ended are treated as ordered before later epochs (the barrier does not wait for
them on silicon either; their stores were issued before they ended).
"""
from __future__ import annotations

import numpy as np

from .memory import EmuError


_REP4 = np.int32(0x01010101)
_REP4_16 = np.uint64(0x0001000100010001)
_SHIFT = {1: 2, 2: 3, 4: 4}


class LdsRaces:
    def __init__(self, wg_of: np.ndarray, lds_size: int, arena_size: int, report=None, insts=()):
        self.wg_of = np.asarray(wg_of, np.int64)
        self.report = report
        self.lds_size = lds_size
        # index of each wave within its workgroup
        order = np.argsort(self.wg_of, kind="stable")
        local = np.empty_like(order)
        starts = np.searchsorted(self.wg_of[order], self.wg_of[order], side="left")
        local[order] = np.arange(len(order)) - starts
        self.local = local
        if local.size and local.max() >= 16:
            raise EmuError("LDS race tracking supports at most 16 waves per workgroup (1024 work-items)")
        # arrays padded to whole 16 bytes, then a 16-byte dummy region that inactive lanes of dword
        # accesses point at (its state is reset before every dword access and never reported)
        n = (arena_size + 15) // 16 * 16
        self.dummy = n
        size = n + 16
        self.writer = np.full(size, -1, np.int8)
        self.readers = np.zeros(size, np.uint16)
        self.wval = np.zeros(size, np.uint8)          # value the epoch's writer stored
        self.w32 = self.writer.view(np.int32)
        self.r64 = self.readers.view(np.uint64)
        self.v32 = self.wval.view(np.uint32)
        # granule views: an aligned access of g = 1, 2 or 4 dwords per lane is one row of g dwords
        # (gathered with take on [rows, g], scattered with put on a g-dword void view), so no
        # per-dword index array is built
        self.views = {}
        for key, flat in (("w", self.w32), ("r", self.r64), ("v", self.v32)):
            for g in (1, 2, 4):
                self.views[key, g] = (flat.reshape(-1, g), flat.view(np.dtype((np.void, g * flat.itemsize))))
        n_wg = int(self.wg_of.max()) + 1 if self.wg_of.size else 0
        self.n_wg = max(n_wg, (arena_size - 16) // lds_size if lds_size else 0)
        self.wrote = np.zeros(self.n_wg, bool)        # workgroup wrote LDS in this epoch
        self.read = np.zeros(self.n_wg, bool)         # workgroup read LDS in this epoch
        if report is not None:     # per dword: writer pc [ndw]; last reader pc per local wave [waves, ndw]
            nloc = int(local.max()) + 1 if local.size else 1
            self.wpc = np.full(size // 4, -1, np.int32)
            self.rpc = np.full((nloc, size // 4), -1, np.int32)
            self.by_pc = {i.pc: i for i in insts}
            for g in (1, 2, 4):
                self.views["wpc", g] = (self.wpc.reshape(-1, g), self.wpc.view(np.dtype((np.void, 4 * g))))

    def new_epoch(self, wgs):
        gs = np.unique(np.asarray(wgs))
        for flag, arr, empty in ((self.wrote, self.writer, -1), (self.read, self.readers, 0)):
            touched = gs[flag[gs]]
            if touched.size == 0:
                continue
            if touched.size == self.n_wg:
                arr[:self.n_wg * self.lds_size] = empty
            else:
                for g in touched.tolist():
                    arr[g * self.lds_size:(g + 1) * self.lds_size] = empty
            flag[touched] = False

    def _race(self, inst, waves, kind, other, flat, count=1, other_pc=None):
        g = int(self.wg_of[waves])
        prev = self.by_pc.get(other_pc) if self.report is not None else None

        def message():
            from .machine import where
            a = int(flat) - g * self.lds_size
            what = "wrote" if kind != "write-after-read" else "read"
            return (f"LDS race ({kind}) in workgroup {g}: {where(inst)} in wave {int(self.local[waves])} "
                    f"touches LDS byte {a} that wave {int(other)} {what}{f' with {where(prev)}' if prev else ''} "
                    f"since the last s_barrier; separate them with s_waitcnt lgkmcnt(0) + s_barrier")
        if self.report is None:
            raise EmuError(message())
        self.report.hit("race", "lds_" + kind.replace("-", "_"), inst, prev, int(waves), g, count, message)

    def _races(self, inst, kind, bad, wave_of, other, b, other_pc):
        """Every raced element of one access (bad [n] over flat bytes b): raise the first, or report
        one row per other instruction with the number of waves involved."""
        if self.report is None:
            j = int(np.argmax(bad))
            return self._race(inst, wave_of[j], kind, other[j], b[j])
        sel = np.nonzero(bad)[0]
        opc = other_pc[sel]
        for pc in np.unique(opc).tolist():
            js = sel[opc == pc]
            j = int(js[0])
            self._race(inst, wave_of[j], kind, other[j], b[j], int(np.unique(wave_of[js]).size), pc)

    def _mark_pcs(self, inst, ix, me=None):
        """Remember the pc of a dword access: as the writer (me None) or as wave me's last read."""
        if self.report is None:
            return
        i, g = ix
        if me is None:
            self._put("wpc", ix, np.int32(inst.pc))
        elif g:
            self.rpc[me].reshape(-1, g)[i] = inst.pc
        else:
            self.rpc[me][i] = inst.pc

    def access(self, inst, ids: np.ndarray, idx: np.ndarray, active: np.ndarray, write: bool, vals=None):
        """ids: wave ids [k]; idx: flat LDS byte indices [k, 64, n] (or [k, 64]), consecutive per lane
        (idx[..., j] == idx[..., 0] + j); active: [k, 64]; vals: the bytes a write stores, shaped like idx."""
        if idx.ndim == 2:
            idx = idx[..., None]
        ids = np.asarray(ids) if not isinstance(ids, np.ndarray) else ids
        n = idx.shape[-1]
        base = idx[..., 0]
        if n % 4 == 0 and base.size and not (base & 3).any() \
                and np.array_equal(idx[0, 0], base[0, 0] + np.arange(n)):
            if write:
                self._write_dwords(inst, ids, idx, base, n // 4, active, vals)
            else:
                self._read_dwords(inst, ids, idx, base, n // 4, active)
            return
        self._bytes(inst, ids, idx, active, write, vals)

    def access_range(self, inst, ids: np.ndarray, flat: np.ndarray, nbytes: int, active: np.ndarray,
                     write: bool, vals=None):
        """access() for lanes that each touch nbytes consecutive bytes from flat [k, 64]: aligned
        whole dwords never build the [k, 64, nbytes] byte index (callers may prefer this form)."""
        if nbytes % 4 == 0 and flat.size and not (flat & 3).any():
            if write:
                return self._write_dwords(inst, ids, _Lazy(flat, nbytes), flat, nbytes // 4, active, vals)
            return self._read_dwords(inst, ids, _Lazy(flat, nbytes), flat, nbytes // 4, active)
        self._bytes(inst, ids, flat[..., None] + np.arange(nbytes), active, write, vals)

    # ---- whole aligned dwords ----------------------------------------------------------------
    def _index(self, base, nd, active):
        """Index of each lane's dwords: (row index [.., 64], g) on the g-dword granule views when
        the addresses are aligned to them, else (dword index [.., 64, nd], 0)."""
        if not active.all():
            base = np.where(active, base, self.dummy)
        if nd in (1, 2, 4) and not (base & (4 * nd - 1)).any():
            return base >> _SHIFT[nd], nd
        return (base >> 2)[..., None] + np.arange(nd), 0

    def _get(self, key, ix):
        i, g = ix
        if g:
            return self.views[key, g][0].take(i, axis=0)
        return self.views[key, 1][0][i, 0]

    def _put(self, key, ix, vals):
        i, g = ix
        rows, void = self.views[key, g or 1]
        if g:
            vals = np.ascontiguousarray(np.broadcast_to(vals, i.shape + (g,)), rows.dtype)
            np.put(void, i, vals.view(void.dtype).reshape(i.shape))
        else:
            rows[i, 0] = vals

    @staticmethod
    def _dword_at(ix, r, lane, c):
        i, g = ix
        return int(i[r, lane]) * g + c if g else int(i[r, lane, c])

    def _reset_dummy(self):
        D = self.dummy
        self.writer[D:D + 16] = -1
        self.readers[D:D + 16] = 0

    def _read_dwords(self, inst, ids, idx, base, nd, active):
        wgs = self.wg_of[ids]
        me = self.local[ids]
        self._reset_dummy()
        check = self.wrote[wgs].any()
        groups = [(int(me[0]), slice(None))] if (me == me[0]).all() else \
            [(j, np.nonzero(me == j)[0]) for j in np.unique(me).tolist()]
        for j, rows in groups:
            ix = self._index(base[rows], nd, active[rows])
            if check:
                cur = self._get("w", ix)
                if ((cur != -1) & (cur != j * _REP4)).any():
                    # some dword holds another wave's bytes: decide and name it byte by byte
                    return self._bytes(inst, ids, idx, active, False, None)
            self._put("r", ix, self._get("r", ix) | (np.uint64(1 << j) * _REP4_16))
            self._mark_pcs(inst, ix, j)
        self.read[wgs] = True

    def _write_dwords(self, inst, ids, idx, base, nd, active, vals):
        wgs = self.wg_of[ids]
        me = self.local[ids]
        self._reset_dummy()
        k = len(ids)
        v = np.ascontiguousarray(vals, np.uint8).view(np.uint32).reshape(k, 64, nd)
        ix = self._index(base, nd, active)
        rep = (me.astype(np.int32) * _REP4)[:, None, None]
        if self.wrote[wgs].any():
            cur = self._get("w", ix)
            if ((cur != -1) & (cur != rep) & (self._get("v", ix) != v)).any():
                return self._bytes(inst, ids, idx, active, True, vals)
        if self.read[wgs].any():
            mine = ((np.uint64(1) << me.astype(np.uint64)) * _REP4_16)[:, None, None]
            if (self._get("r", ix) & ~mine).any():
                return self._bytes(inst, ids, idx, active, True, vals)
        self._put("w", ix, rep)
        self._put("v", ix, v)
        self._mark_pcs(inst, ix)
        if k > 1 and np.unique(wgs).size < k:
            # two waves of this batch writing the same dword: the last assignment wins, so a dword
            # whose recorded writer is not the wave that wrote it was written by two waves
            clash = (self._get("w", ix) != rep) & (self._get("v", ix) != v)
            if not active.all():
                clash &= active[..., None]
            if clash.any():
                r, lane, c = np.unravel_index(int(np.argmax(clash)), clash.shape)
                dw = self._dword_at(ix, r, lane, c)
                diff = self.wval[4 * dw:4 * dw + 4] != v[r, lane, c:c + 1].view(np.uint8)
                b = 4 * dw + int(np.argmax(diff))
                self._race(inst, ids[r], "write-after-write", self.writer[b], b, 1, inst.pc)
        self.wrote[wgs] = True

    # ---- any bytes (sub-dword or unaligned accesses; exact decisions and messages) -------------
    def _bytes(self, inst, ids, idx, active, write, vals):
        if isinstance(idx, _Lazy):
            idx = idx.build()
        wgs = self.wg_of[ids]
        (self.wrote if write else self.read)[wgs] = True
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
        dw = b >> 2
        if bad.any():
            self._races(inst, "write-after-write" if write else "read-after-write", bad, wave_of, cur, b,
                        self.wpc[dw] if self.report is not None else None)
        bit = (np.uint16(1) << me.astype(np.uint16)).astype(np.uint16)
        if write:
            rd = self.readers[b] & ~bit
            if rd.any():
                x = rd.astype(np.int64)
                other = np.where(rd != 0, np.log2(x & -x, where=x != 0, out=np.zeros(x.shape)).astype(np.int64), -1)
                opc = self.rpc[np.maximum(other, 0), dw] if self.report is not None else None
                self._races(inst, "write-after-read", rd != 0, wave_of, other, b, opc)
            self.writer[b] = me
            self.wval[b] = v
            if self.report is not None:
                self.wpc[dw] = inst.pc
            # two waves of this batch writing the same bytes: the last assignment wins, so a byte
            # whose recorded writer is not the wave that wrote it was written by two waves
            clash = (self.writer[b] != me) & (self.wval[b] != v)
            if clash.any():
                self._races(inst, "write-after-write", clash, wave_of, self.writer[b], b,
                            np.full(b.shape, inst.pc) if self.report is not None else None)
        else:
            np.bitwise_or.at(self.readers, b, bit)
            if self.report is not None:
                self.rpc[me, dw] = inst.pc


class _Lazy:
    """The byte index of access_range, built only if the byte path needs it."""
    __slots__ = ("flat", "n")

    def __init__(self, flat, n):
        self.flat, self.n = flat, n

    def build(self):
        return self.flat[..., None] + np.arange(self.n)
