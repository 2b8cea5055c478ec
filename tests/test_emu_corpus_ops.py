"""Formula tests for instructions aiter's production kernels use that the emulator gained for them
(issue 9): s_bfm_b64, SMEM stores and atomics, v_swap_b32, v_cvt_pk_u8_f32, v_cvt_pk_f32_fp8/bf8.
Every expected value is computed here from the ISA's description, with Python integers/floats."""
from __future__ import annotations

import math

import numpy as np
import pytest

from emu_snippet import poison, snippet
from test_emu_buffer import addresses

RNG = np.random.default_rng()
M32 = (1 << 32) - 1
POIS = 0xDEADBEEF


def test_s_bfm_b64():
    # S_BFM_B64: D = ((1 << S0[5:0]) - 1) << S1[5:0], 64 bits; the upper source bits are ignored
    a = [int(x) for x in RNG.integers(0, 2**32, 6)] + [63 | 0xFFC0, 0]
    b = [int(x) for x in RNG.integers(0, 2**32, 6)] + [0, 63]
    lines = [f"s_bfm_b64 s[{20 + 2 * i}:{21 + 2 * i}], s{2 + i}, s{10 + i}" for i in range(len(a))]
    sregs = {2 + i: v for i, v in enumerate(a)} | {10 + i: v for i, v in enumerate(b)}
    sregs |= {r: POIS for r in range(20, 20 + 2 * len(a))}
    m = snippet(lines, sregs=sregs)
    for i, (x, y) in enumerate(zip(a, b)):
        want = (((1 << (x & 63)) - 1) << (y & 63)) & ((1 << 64) - 1)
        got = int(m.S[0, 20 + 2 * i]) | (int(m.S[0, 21 + 2 * i]) << 32)
        assert got == want, (hex(x), hex(y), hex(got), hex(want))


@pytest.mark.parametrize("n", [1, 2, 4])
def test_s_store_dword(n):
    buf = np.full(64, POIS, np.uint32)
    (base,) = addresses(buf.nbytes)
    data = [int(x) for x in RNG.integers(0, 2**32, n)]
    name = "s_store_dword" + ("" if n == 1 else f"x{n}")
    d = "s20" if n == 1 else f"s[20:{19 + n}]"
    # one store at an SGPR offset, one at an immediate offset (bytes), one at a negative 21-bit one
    lines = [f"{name} {d}, s[2:3], s4 glc", f"{name} {d}, s[2:3], 0x40", f"{name} {d}, s[6:7], 0x1ffff0",
             "s_waitcnt lgkmcnt(0)"]
    sregs = {2: base & M32, 3: base >> 32, 4: 8, 6: (base + 160) & M32, 7: (base + 160) >> 32}
    sregs |= {20 + i: v for i, v in enumerate(data)}
    snippet(lines, sregs=sregs, buffers=[buf])
    want = np.full(64, POIS, np.uint32)
    for byte_off in (8, 0x40, 160 - 16):
        want[byte_off // 4: byte_off // 4 + n] = data
    assert np.array_equal(buf, want)


ATOMIC_REF = {   # the ISA's per-opcode pseudocode: new memory value from (old, data)
    "s_atomic_swap": lambda old, v: v,
    "s_atomic_add": lambda old, v: (old + v) % 2**32,
    "s_atomic_sub": lambda old, v: (old - v) % 2**32,
    "s_atomic_inc": lambda old, v: 0 if old >= v else old + 1,
    "s_atomic_dec": lambda old, v: v if (old == 0 or old > v) else old - 1,
}


@pytest.mark.parametrize("op", sorted(ATOMIC_REF))
def test_s_atomic(op):
    """Four waves hit one dword; with glc each gets the value before its own operation. The order of
    the waves is the scheduler's: it is recovered from the returned values (distinct data per wave),
    and the final memory must be that chain's end."""
    waves = 4
    init = int(RNG.integers(1, 6)) if op in ("s_atomic_dec", "s_atomic_inc") else int(RNG.integers(0, 2**32))
    data = RNG.permutation(np.arange(2, 9))[:waves] if op in ("s_atomic_dec", "s_atomic_inc") \
        else RNG.choice(2**32, waves, replace=False)
    buf = np.full(16, POIS, np.uint32)
    buf[3] = init
    (base,) = addresses(buf.nbytes)
    lines = [f"{op} s20, s[2:3], 0xc glc", "s_waitcnt lgkmcnt(0)", f"{op} s21, s[2:3], s4",
             "s_waitcnt lgkmcnt(0)"]
    sregs = {2: base & M32, 3: base >> 32, 4: 12, 20: [int(x) for x in data], 21: [int(x) for x in data]}
    m = snippet(lines, sregs=sregs, waves=waves, buffers=[buf])
    old = [int(x) for x in m.S[:, 20]]
    cur, left = init, set(range(waves))
    for _ in range(waves):
        nxt = [w for w in left if old[w] == cur]
        assert nxt, f"{op}: returned values {old} are no chain from {init}"
        w = nxt[0]
        left.remove(w)
        cur = ATOMIC_REF[op](cur, int(data[w]))
    for w in range(waves):                         # the second round, without glc: no return
        cur = ATOMIC_REF[op](cur, int(data[w]))
    assert int(buf[3]) == cur
    assert [int(x) for x in m.S[:, 21]] == [int(x) for x in data]
    assert (np.delete(buf, 3) == POIS).all()


def test_v_swap_b32():
    a, b = RNG.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32), \
        RNG.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
    ex = RNG.random(64) < 0.7
    m = snippet(["v_swap_b32 v5, v9"], {5: a, 9: b}, exec_mask=ex)
    assert np.array_equal(m.R[0, 5], np.where(ex, b, a))
    assert np.array_equal(m.R[0, 9], np.where(ex, a, b))


def test_v_cvt_pk_u8_f32():
    """Byte S1[1:0] of S2 := S0 converted to an unsigned byte: saturated to [0, 255], NaN -> 0,
    rounded to nearest even (inferred: the ISA says only "convert"; Python's round() is half-even)."""
    x = np.concatenate([RNG.uniform(-20, 280, 48), [np.nan, -np.inf, np.inf, 0.5, 1.5, 2.5, 254.5, 255.5,
                                                    -0.0, 3.49999, 7.5000005, 1e30, -1e30, 128.0, 0.49, 99.5]])
    x = x.astype(np.float32)
    sel = RNG.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
    c = RNG.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
    m = snippet(["v_cvt_pk_u8_f32 v4, v1, v2, v3", "v_cvt_pk_u8_f32 v5, v1, 2, v3"],
                {1: x.view(np.uint32), 2: sel, 3: c, 4: poison(), 5: poison()})
    for lane in range(64):
        xv = float(x[lane])
        u8 = 0 if math.isnan(xv) else int(min(255, max(0, round(xv)))) if math.isfinite(xv) else \
            (255 if xv > 0 else 0)
        for row, s in ((4, int(sel[lane]) & 3), (5, 2)):
            want = (int(c[lane]) & ~(0xFF << (8 * s)) & M32) | (u8 << (8 * s))
            assert int(m.R[0, row, lane]) == want, (lane, xv, s)


def minifloat(code: int, ebits: int, mbits: int, bias: int, ieee_specials: bool, nan_all_ones: bool) -> float:
    """Value of one minifloat code from its bit fields (OCP 8-bit FP spec: E4M3 has no infinities and
    S.1111.111 is NaN; E5M2 follows IEEE: exponent all ones is inf (mantissa 0) or NaN)."""
    s = -1.0 if (code >> (ebits + mbits)) & 1 else 1.0
    e = (code >> mbits) & ((1 << ebits) - 1)
    f = code & ((1 << mbits) - 1)
    if ieee_specials and e == (1 << ebits) - 1:
        return s * math.inf if f == 0 else math.nan
    if nan_all_ones and e == (1 << ebits) - 1 and f == (1 << mbits) - 1:
        return math.nan
    if e == 0:
        return s * math.ldexp(f, 1 - bias - mbits)
    return s * math.ldexp((1 << mbits) + f, e - bias - mbits)


FP8_FMT = {"fp8": (4, 3, 7, False, True), "bf8": (5, 2, 15, True, False)}


@pytest.mark.parametrize("kind", ["fp8", "bf8"])
def test_v_cvt_pk_f32_fp8(kind):
    """Every one of the 256 codes, in both bytes of both words (e32 reads the low word, SDWA
    src0_sel:WORD_1 the high one)."""
    codes = RNG.permutation(256).astype(np.uint32)
    lo = codes[:128].reshape(64, 2)
    hi = codes[128:].reshape(64, 2)
    word = lo[:, 0] | (lo[:, 1] << 8) | (hi[:, 0] << 16) | (hi[:, 1] << 24)
    m = snippet([f"v_cvt_pk_f32_{kind} v[4:5], v1", f"v_cvt_pk_f32_{kind}_sdwa v[6:7], v1 src0_sel:WORD_1"],
                {1: word, 4: poison(), 5: poison(), 6: poison(), 7: poison()})
    for row, pair in ((4, lo), (6, hi)):
        for j in range(2):
            got = m.R[0, row + j].view(np.float32).astype(np.float64)
            want = np.array([minifloat(int(c), *FP8_FMT[kind]) for c in pair[:, j]])
            assert np.array_equal(got, want, equal_nan=True), (row, j)


def fp4_nearest(v: float) -> int:
    """E2M1 code nearest to v: brute force over the 8 magnitudes decoded from their bit fields, a tie
    going to the even code (even mantissa), saturating at 6 (OCP MX v1.0 conversion with saturation)."""
    mags = [(minifloat(c, 2, 1, 1, False, False), c) for c in range(8)]
    a = abs(v)
    best = min(mags, key=lambda mc: (abs(a - mc[0]), mc[1] % 2))[1] if a < 6 else 7
    return best | (8 if math.copysign(1.0, v) < 0 else 0)


def test_v_cvt_scalef32_pk_fp4_f32():
    """Byte op_sel[2] | op_sel[3] << 1 of vdst := fp4(S0 / scale) | fp4(S1 / scale) << 4, the other
    bytes kept; scale a power of two (what every caller passes), per lane."""
    x = (RNG.standard_normal(64) * 3).astype(np.float32)
    y = (RNG.standard_normal(64) * 3).astype(np.float32)
    x[:6] = [0.25, 0.75, 2.5, 5.0, -100.0, 1.25]            # ties and saturation
    e = RNG.integers(-3, 4, 64)
    scale = (2.0 ** e).astype(np.float32)
    x *= scale                                               # same grid after the division
    y *= scale
    d0 = RNG.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
    lines, rows = [], {}
    for byte in range(4):
        lines.append(f"v_cvt_scalef32_pk_fp4_f32 v{10 + byte}, v1, v2, v3 op_sel:[0,0,{byte & 1},{byte >> 1}]")
        rows[10 + byte] = d0.copy()
    m = snippet(lines, {1: x.view(np.uint32), 2: y.view(np.uint32), 3: scale.view(np.uint32)} | rows)
    for byte in range(4):
        for lane in range(64):
            pair = fp4_nearest(float(x[lane]) / float(scale[lane])) | \
                (fp4_nearest(float(y[lane]) / float(scale[lane])) << 4)
            want = (int(d0[lane]) & ~(0xFF << (8 * byte)) & M32) | (pair << (8 * byte))
            assert int(m.R[0, 10 + byte, lane]) == want, (byte, lane, float(x[lane]), float(y[lane]))


@pytest.mark.parametrize("kind", ["short_d16", "short_d16_hi", "ubyte_d16", "ubyte_d16_hi", "sbyte_d16",
                                  "sbyte_d16_hi"])
def test_buffer_load_d16(kind):
    """D16 loads write one 16-bit half (the high one for _hi) and keep the other; bytes are zero- or
    sign-extended to 16 bits. Lanes past num_records read 0 (range checking) and inactive lanes keep
    the register."""
    from test_emu_buffer import sregs_vsharp, vsharp
    nbytes = 2 if "short" in kind else 1
    mem = RNG.integers(0, 256, 512, dtype=np.uint64).astype(np.uint8)
    (base,) = addresses(mem.nbytes)
    off = (RNG.integers(0, 250, 64) * nbytes).astype(np.uint32)
    off[:3] = [500, 510, 600]                               # the last in range / out of range
    ex = RNG.random(64) < 0.8
    old = RNG.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
    m = snippet([f"buffer_load_{kind} v5, v1, s[8:11], 0 offen", "s_waitcnt vmcnt(0)"], {1: off, 5: old},
                sregs=sregs_vsharp(8, vsharp(base, 0, 510)), buffers=[mem.copy()], exec_mask=ex)
    for lane in range(64):
        o = int(off[lane])
        v = int.from_bytes(bytes(mem[o:o + nbytes]), "little") if o < 510 else 0
        if kind.startswith("sbyte") and v >= 128:
            v = (v - 256) & 0xFFFF
        o32 = int(old[lane])
        want = ((o32 & 0xFFFF) | (v << 16)) if kind.endswith("_hi") else ((o32 & 0xFFFF0000) | v)
        assert int(m.R[0, 5, lane]) == (want if ex[lane] else o32), (lane, o)


@pytest.mark.parametrize("n", [1, 2])
def test_global_atomic_cmpswap(n):
    """MEM = (MEM == cmp) ? src : MEM, returning the old value (sc0); data = {src, cmp}. Half the lanes
    compare equal; two lanes share an address (lane order: the second sees the first's result)."""
    dt = np.uint32 if n == 1 else np.uint64
    mem = RNG.integers(0, 2**32, 64 * n, dtype=np.uint64).astype(np.uint32)
    (base,) = addresses(mem.nbytes)
    slots = RNG.permutation(64)
    slots[7] = slots[3]                                    # lanes 3 and 7 hit one slot
    cur = mem.view(dt).copy()
    src = RNG.integers(0, 2**32, 64 * n, dtype=np.uint64).astype(np.uint32).view(dt)
    cmp = RNG.integers(0, 2**32, 64 * n, dtype=np.uint64).astype(np.uint32).view(dt)
    eq = RNG.random(64) < 0.5
    cmp[eq] = cur[slots[eq]]
    cmp[7] = src[3]                                        # lane 7 matches what lane 3 may have written
    addr = (base + slots.astype(np.uint64) * 4 * n).astype(np.uint64)
    regs = {1: (addr & 0xFFFFFFFF).astype(np.uint32), 2: (addr >> 32).astype(np.uint32)}
    d = src.view(np.uint32).reshape(64, n)
    c = cmp.view(np.uint32).reshape(64, n)
    for q in range(n):
        regs[10 + q], regs[10 + n + q] = d[:, q].copy(), c[:, q].copy()
        regs[20 + q] = poison()
    name = "global_atomic_cmpswap" + ("_x2" if n == 2 else "")
    dst = "v20" if n == 1 else "v[20:21]"
    data = f"v[10:{10 + 2 * n - 1}]"
    buf = mem.copy()
    m = snippet([f"{name} {dst}, v[1:2], {data}, off sc0", "s_waitcnt vmcnt(0)"], regs, buffers=[buf])
    ref = cur.copy()
    want_old = np.empty(64, dt)
    for lane in range(64):                                 # lanes in order
        s = slots[lane]
        want_old[lane] = ref[s]
        if ref[s] == cmp[lane]:
            ref[s] = src[lane]
    assert np.array_equal(buf.view(dt), ref)
    got = m.R[0, 20:20 + n].T.copy().reshape(-1).view(dt)
    assert np.array_equal(got, want_old)


def test_v_cvt_scalef32_pk_f32_fp4():
    """D[0], D[1] = the low and high fp4 nibbles of byte op_sel[0] | op_sel[1] << 1 of S0, times the
    scale (a power of two per lane); every nibble value is decoded here from its bit fields."""
    src = RNG.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
    e = RNG.integers(-10, 11, 64)
    scale = (2.0 ** e).astype(np.float32)
    lines, regs = [], {1: src, 2: scale.view(np.uint32)}
    for byte in range(4):
        lines.append(f"v_cvt_scalef32_pk_f32_fp4 v[{10 + 2 * byte}:{11 + 2 * byte}], v1, v2 "
                     f"op_sel:[{byte & 1},{byte >> 1}]")
        regs[10 + 2 * byte], regs[11 + 2 * byte] = poison(), poison()
    m = snippet(lines, regs)
    for byte in range(4):
        for lane in range(64):
            b = (int(src[lane]) >> (8 * byte)) & 0xFF
            for half in (0, 1):
                want = minifloat((b >> (4 * half)) & 0xF, 2, 1, 1, False, False) * float(scale[lane])
                got = float(m.R[0, 10 + 2 * byte + half, lane:lane + 1].view(np.float32)[0])
                assert got == want and math.copysign(1, got) == math.copysign(1, want), (byte, lane, half)
