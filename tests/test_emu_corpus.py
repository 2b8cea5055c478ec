"""Every clang-compiled corpus kernel runs in the emulator and matches its numpy formula
(tests/corpus/REFERENCE.md). Inputs are fresh random, outputs poisoned."""
from __future__ import annotations

import numpy as np
import pytest

from flyasm.run import launch

RNG = np.random.default_rng()
L = np.arange(64)


def frag_a(A):
    M, K = A.shape
    KL = K * M // 64
    l, e = np.arange(64)[:, None], np.arange(KL)[None, :]
    return A[l % M, KL * (l // M) + e]


def frag_b(B):
    K, N = B.shape
    KL = K * N // 64
    l, e = np.arange(64)[:, None], np.arange(KL)[None, :]
    return B[KL * (l // N) + e, l % N]


def cd_index(M):
    R = M * M // 64
    l, r = np.arange(64)[:, None], np.arange(R)[None, :]
    rows = 8 * (r // 4) + 4 * (l // 32) + r % 4 if M == 32 else 4 * (l // 16) + r
    return rows, np.broadcast_to(l % M, rows.shape)


def frag_cd(C):
    rows, cols = cd_index(C.shape[0])
    return C[rows, cols]


def unfrag_cd(buf, M):
    rows, cols = cd_index(M)
    D = np.empty((M, M), buf.dtype)
    D[rows, cols] = buf.reshape(64, -1)
    return D


def bf16_bits(x):
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_to_f32(bits):
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def e4m3_to_f32(byte):
    b = np.asarray(byte, np.uint8).astype(np.int64)
    s, e, m = b >> 7, (b >> 3) & 0xF, b & 7
    v = np.where(e == 0, m / 8.0 * 2.0 ** -6, (1 + m / 8.0) * 2.0 ** (e - 7))
    return np.where(s == 1, -v, v).astype(np.float32)


def ints(shape, lo=-4, hi=4):
    return RNG.integers(lo, hi + 1, shape).astype(np.float32)


def poison(n, dt=np.float32):
    return np.full(n, np.nan, dt) if dt == np.float32 else np.full(n, 0xDEADBEEF & np.iinfo(dt).max, dt)


@pytest.mark.parametrize("name,M,K,dt", [("mfma_32x32x16_bf16", 32, 16, "bf16"), ("mfma_16x16x32_bf16", 16, 32, "bf16")])
def test_mfma_bf16(corpus, name, M, K, dt):
    A, B, C = ints((M, K)), ints((K, M)), ints((M, M), -100, 100)
    d = poison(M * M)
    launch(corpus[name].path, 1, 64, bf16_bits(frag_a(A)).ravel(), bf16_bits(frag_b(B)).ravel(),
           frag_cd(C).ravel().astype(np.float32), d)
    assert np.array_equal(unfrag_cd(d, M), C + A @ B)   # small integers: every sum order is exact


def test_mfma_32x32x16_f16(corpus):
    A, B = ints((32, 16)) / 4, ints((16, 32)) / 2
    d = poison(1024)
    launch(corpus["mfma_32x32x16_f16"].path, 1, 64, frag_a(A).astype(np.float16).ravel(),
           frag_b(B).astype(np.float16).ravel(), d)
    assert np.array_equal(unfrag_cd(d, 32), A @ B)


@pytest.mark.parametrize("nk", [0, 3])
def test_mfma_kloop(corpus, nk):
    A, B, C = ints((16, 32 * max(nk, 1))), ints((32 * max(nk, 1), 16)), ints((16, 16), -50, 50)
    a = np.concatenate([frag_a(A[:, 32 * s:32 * s + 32]).ravel() for s in range(max(nk, 1))]).astype(np.float16)
    b = np.concatenate([frag_b(B[32 * s:32 * s + 32]).ravel() for s in range(max(nk, 1))]).astype(np.float16)
    d = poison(256)
    launch(corpus["mfma_16x16x32_f16_kloop"].path, 1, 64, a, b, frag_cd(C).ravel(), d, nk)
    assert np.array_equal(unfrag_cd(d, 16), C + A @ B if nk > 0 else C)


def test_mfma_cdna3_shapes(corpus):
    A0, B0, A1, B1 = ints((32, 8)), ints((8, 32)), ints((16, 16)), ints((16, 16))
    d0, d1 = poison(1024), poison(256)
    launch(corpus["mfma_cdna3_shapes"].path, 1, 64, bf16_bits(frag_a(A0)).ravel(), bf16_bits(frag_b(B0)).ravel(), d0,
           frag_a(A1).astype(np.float16).ravel(), frag_b(B1).astype(np.float16).ravel(), d1)
    assert np.array_equal(unfrag_cd(d0, 32), A0 @ B0)
    assert np.array_equal(unfrag_cd(d1, 16), A1 @ B1)


def test_mfma_i8(corpus):
    A = RNG.integers(-128, 128, (16, 64)).astype(np.int8)
    B = RNG.integers(-128, 128, (64, 16)).astype(np.int8)
    C = RNG.integers(-2**31, 2**31, (16, 16)).astype(np.int32)
    d = np.full(256, -559038737, np.int32)
    launch(corpus["mfma_16x16x64_i8"].path, 1, 64, frag_a(A).ravel(), frag_b(B).ravel(), frag_cd(C).ravel(), d)
    ref = (C.astype(np.int64) + A.astype(np.int64) @ B.astype(np.int64)).astype(np.int32)  # wrap-around
    assert np.array_equal(unfrag_cd(d, 16), ref)


def test_mfma_fp8(corpus):
    def bytes_(shape):   # avoid the NaN encodings 0x7F / 0xFF
        b = RNG.integers(0, 256, shape).astype(np.uint8)
        return np.where((b & 0x7F) == 0x7F, b - 1, b).astype(np.uint8)
    A8, B8 = bytes_((16, 32)), bytes_((32, 16))
    C = ints((16, 16))
    d = poison(256)
    launch(corpus["mfma_16x16x32_fp8"].path, 1, 64, frag_a(A8).ravel(), frag_b(B8).ravel(), frag_cd(C).ravel(), d)
    ref = C.astype(np.float64) + e4m3_to_f32(A8).astype(np.float64) @ e4m3_to_f32(B8).astype(np.float64)
    # fp8 products are exact in f32; tolerance K * 2^-23 * sum|A||B| for the unknown sum order
    tol = 32 * 2.0 ** -23 * (np.abs(e4m3_to_f32(A8)) @ np.abs(e4m3_to_f32(B8)) + np.abs(C))
    assert np.all(np.abs(unfrag_cd(d, 16) - ref) <= tol)


def test_ds_read_tr16(corpus):
    src = RNG.integers(0, 65536, 1024).astype(np.uint16)
    addr = (RNG.integers(0, 1784 // 8 + 1, 64) * 8).astype(np.int32)
    dst = np.full(512, 0xDEAD, np.uint16)
    launch(corpus["ds_read_tr16_b64"].path, 1, 64, src, addr, dst)

    def tr16(ad):
        IN = np.stack([src[a // 2:a // 2 + 4] for a in ad])
        OUT = np.empty((64, 4), np.uint16)
        for blk in range(4):
            for j in range(16):
                for r in range(4):
                    OUT[16 * blk + j, r] = IN[16 * blk + 4 * r + j // 4, j % 4]
        return OUT
    assert np.array_equal(dst[:256], tr16(addr).ravel())
    assert np.array_equal(dst[256:], tr16(addr + 256).ravel())


def test_permlane_swap(corpus):
    x, y = RNG.integers(0, 2**32, 64, dtype=np.uint32), RNG.integers(0, 2**32, 64, dtype=np.uint32)
    out = np.full(256, 0xDEADBEEF, np.uint32)
    launch(corpus["permlane_swap"].path, 1, 64, x, y, out)
    assert np.array_equal(out[0:64], np.r_[x[0:32], y[0:32]])
    assert np.array_equal(out[64:128], np.r_[x[32:64], y[32:64]])
    assert np.array_equal(out[128:192], np.r_[x[0:16], y[0:16], x[32:48], y[32:48]])
    assert np.array_equal(out[192:256], np.r_[x[16:32], y[16:32], x[48:64], y[48:64]])


@pytest.mark.parametrize("src_bytes,dst_bytes", [(128, 1440), (1024, 2048), (16, 16)])
def test_buffer_rw(corpus, src_bytes, dst_bytes):
    src = RNG.integers(0, 2**32, 256, dtype=np.uint32)
    dst = np.full(384, 0xDEADBEEF, np.uint32)
    launch(corpus["buffer_rw"].path, 1, 64, src, dst, src_bytes, dst_bytes)
    ref = np.full(384, 0xDEADBEEF, np.uint32)
    xv = np.where(4 * L + 4 <= src_bytes, src[L], 0).astype(np.uint32)
    v = np.where((16 * L + 16 <= src_bytes)[:, None], src[:256].reshape(64, 4), 0).astype(np.uint32)
    ok = 4 * L + 4 <= dst_bytes
    ref[L[ok]] = xv[ok]
    ok = 256 + 16 * L + 16 <= dst_bytes
    blk = ref[64:320].reshape(64, 4)
    blk[ok] = v[ok]
    ok = 1280 + 4 * L + 4 <= dst_bytes
    ref[320 + L[ok]] = (xv + L + 1).astype(np.uint32)[ok]
    assert np.array_equal(dst, ref)


def test_lds_dma(corpus):
    src = RNG.integers(0, 2**32, 1024, dtype=np.uint32)
    dst = np.full(1024, 0xDEADBEEF, np.uint32)
    launch(corpus["lds_dma"].path, 1, 128, src, dst, 4096)
    S16, t = src.reshape(256, 4), np.arange(128)
    LDS16 = np.zeros((256, 4), np.uint32)
    LDS16[t] = S16[(t * 7) & 127]
    LDS16[128 + t] = S16[128 + ((t * 5) & 127)]
    D16 = np.full((256, 4), 0xDEADBEEF, np.uint32)
    D16[t] = LDS16[(t + 64) & 127]
    D16[128 + t] = LDS16[255 - t]
    assert np.array_equal(dst.reshape(256, 4), D16)


def loop_divergent_ref(x, G, n):
    """tests/corpus/REFERENCE.md, loop_divergent (float32 step by step); NaN = untouched."""
    y, z = np.full(64 * G, np.nan, np.float32), np.full(64 * G, np.nan, np.float32)
    for g in range(64 * G):
        L, acc = g % 64, np.float32(0)
        for i in range(n):
            acc = np.float32(acc * np.float32(0.5)) + x[g * n + i]
        for _ in range(L & 7):
            acc = acc + np.float32(1)
        if L & 1:
            y[g] = -acc
        elif L < 16:
            y[g], z[g] = acc * np.float32(3), acc
        else:
            z[g] = acc + np.float32(2)
    return y, z


@pytest.mark.parametrize("G,n", [(2, 3), (1, 0)])
def test_loop_divergent(corpus, G, n):
    x = RNG.uniform(-4, 4, max(64 * G * n, 1)).astype(np.float32)
    y, z = poison(64 * G), poison(64 * G)
    launch(corpus["loop_divergent"].path, G, 64, x, y, z, n)
    yr, zr = loop_divergent_ref(x, G, n)
    assert np.array_equal(y, yr, equal_nan=True) and np.array_equal(z, zr, equal_nan=True)


def test_wave_dpp_scan(corpus):
    G = 2
    x = RNG.integers(-2**31, 2**31, 64 * G).astype(np.int32)
    idx = RNG.integers(0, 64, 64 * G).astype(np.int32)
    outs = [np.full(64 * G, -559038737, np.int32) for _ in range(5)]
    launch(corpus["wave_dpp_scan"].path, G, 64, x, idx, *outs)
    scan, quad, mirror, bperm, uni = outs
    for w in range(G):
        X, s = x[64 * w:64 * w + 64], slice(64 * w, 64 * w + 64)
        cs = np.cumsum(X.astype(np.int64)).astype(np.int32)
        assert np.array_equal(scan[s], cs)
        assert np.array_equal(quad[s], X[L ^ 3])
        assert np.array_equal(mirror[s], X[16 * (L // 16) + 15 - L % 16])
        assert np.array_equal(bperm[s], X[idx[s] & 63])
        assert np.all(uni[s] == np.int32((int(cs[63]) - int(X[0]) + 2**31) % 2**32 - 2**31))


def test_math_convert(corpus):
    G = 2
    mag = 2.0 ** RNG.uniform(-8, np.log2(20), 64 * G)
    x = (mag * RNG.choice([-1, 1], 64 * G)).astype(np.float32)
    h = (2.0 ** RNG.uniform(-4, 4, 6 * 64 * G) * RNG.choice([-1, 1], 6 * 64 * G)).astype(np.float16)
    f3, bf, hp = poison(3 * 64 * G), np.full(2 * 64 * G, 0xDEAD, np.uint16), np.full(4 * 64 * G, np.nan, np.float16)
    launch(corpus["math_convert"].path, G, 64, x, h, f3, bf, hp)
    ulp = lambda v: np.spacing(np.abs(v).astype(np.float32))
    for k, ref in enumerate([np.exp2(x), np.float32(1) / x, np.sqrt(np.abs(x))]):
        assert np.all(np.abs(f3[k::3] - ref) <= 2 * ulp(ref)), k
    assert np.array_equal(bf[0::2], bf16_bits(x))
    assert np.array_equal(bf[1::2], bf16_bits((x * np.float32(3)).astype(np.float32)))
    hh = h.astype(np.float64).reshape(-1, 3, 2)
    a, b, c = hh[:, 0], hh[:, 1], hh[:, 2]
    ref = np.stack([(a * b + c).astype(np.float16),
                    ((a * b).astype(np.float16).astype(np.float64) + c).astype(np.float16)], 1).reshape(-1)
    assert np.array_equal(hp, ref)


def test_lds_reduce_wg256(corpus):
    G = 3
    x = RNG.integers(-2**31, 2**31, 256 * G).astype(np.int32)
    rev, sums = np.full(256 * G, -1, np.int32), np.full(G, -1, np.int32)
    launch(corpus["lds_reduce_wg256"].path, G, 256, x, rev, sums, seed=int(RNG.integers(1 << 30)))
    t = np.arange(256)
    for w in range(G):
        S = x[256 * w:256 * w + 256].astype(np.int64)
        assert np.array_equal(rev[256 * w + t], (S[255 - t] + S[(t + 64) & 255]).astype(np.int32))
        assert sums[w] == np.int32((S.sum() + 2**31) % 2**32 - 2**31)


def test_atomic_fadd(corpus):
    G = 2
    x = (RNG.integers(-256, 257, 256 * G) / 4).astype(np.float32)
    acc = RNG.integers(-8, 9, 5).astype(np.float32)
    acc_in = acc.copy()
    launch(corpus["atomic_fadd"].path, G, 256, x, acc)
    g = np.arange(256 * G)
    assert acc[0] == acc_in[0] + x.sum()
    for k in range(4):
        assert acc[1 + k] == acc_in[1 + k] + x[g % 4 == k].sum()


def test_every_corpus_kernel_is_covered(corpus):
    import sys
    names = {n[5:] for n in dir(sys.modules[__name__]) if n.startswith("test_")}
    tested = {"mfma_32x32x16_bf16", "mfma_16x16x32_bf16", "mfma_32x32x16_f16", "mfma_16x16x32_f16_kloop",
              "mfma_cdna3_shapes", "mfma_16x16x64_i8", "mfma_16x16x32_fp8", "ds_read_tr16_b64", "permlane_swap",
              "buffer_rw", "lds_dma", "loop_divergent", "wave_dpp_scan", "math_convert", "lds_reduce_wg256",
              "atomic_fadd"}
    assert set(corpus) <= tested, set(corpus) - tested
    assert names
