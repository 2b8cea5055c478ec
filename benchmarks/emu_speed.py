"""Emulator speed in wave-instructions/s (all waves whose PCs agree run in one numpy call).

    python benchmarks/emu_speed.py [--corpus DIR] [--repeat N] [--gemm-wg N] [--grid-in-items]

Kernels: corpus kernels (clang-built, `tests/corpus/build.py`; DIR defaults to $FLYASM_CORPUS_DIR
or /tmp/corpus) and a GEMM-like flyasm Kernel: 8 waves per workgroup, each loop iteration two
ds_read_b128, an lgkmcnt wait, two v_mfma_f32_32x32x16_bf16 and the loop SALU (256 workgroups =
2048 waves by default). Each timing is the best of --repeat runs after one warm-up (decoding
is cached per code object, so the warm-up pays it). --grid-in-items launches with grid counted in
work-items, for measuring trees from before grid counted workgroups. --no-fidelity measures the
core without the dynamic hazard and LDS race checks.

Measured (2-core shared machine, best of 5, M wave-instr/s, with / --no-fidelity), tree 5fffd94
vs 8ea3058 run back to back (float32 MFMA, dword-granule LDS race tracker, group-shared hazard
histories):
    mfma_16x16x32_f16_kloop   0.62 / 0.71  ->  1.30 / 1.35
    loop_divergent            3.12 / 5.08  ->  4.50 / 5.19
    lds_reduce_wg256          0.51 / 2.19  ->  1.39 / 2.25
    gemm_like 256wg x8w       0.15 / 0.38  ->  0.60 / 0.75

Tree b1911d5 vs b26d53e run back to back (DS reads: one take of dword-view rows, race tracking
without byte indices; MFMA: one take per operand, A rows in register order so D = P + C is one
contiguous add into the registers):
    mfma_16x16x32_f16_kloop   1.29 / 1.36  ->  1.45 / 1.48
    loop_divergent            4.73 / 5.16  ->  4.84 / 5.16
    lds_reduce_wg256          1.44 / 2.24  ->  1.67 / 2.68
    gemm_like 256wg x8w       0.63 / 0.78  ->  1.29 / 1.58
"""
from __future__ import annotations

import argparse
import glob
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # flyasm from this checkout
from flyasm.run import launch  # noqa: E402


def gemm_like(waves: int = 8):
    from flyasm import Kernel, s, v
    k = Kernel("gemm_like", block=64 * waves, lds=64 * waves * 16, arg_layout="natural")
    a, out, nk = k.arg("a", "ptr"), k.arg("out", "ptr"), k.arg("nk", "i32")
    k.s_load_dwordx4(s[4:7], k.kernarg_ptr, a.offset)
    k.s_load_dword(s[8], k.kernarg_ptr, nk.offset)
    k.v_lshlrev_b32(v[1], 4, v[0])
    k.s_waitcnt(lgkmcnt=0)
    k.global_load_dwordx4(v[2:5], v[1], s[4:5])
    for r in range(16, 48):
        k.v_mov_b32(v[r], 0)
    k.s_waitcnt(vmcnt=0)
    k.ds_write_b128(v[1], v[2:5])
    k.s_waitcnt(lgkmcnt=0)
    k.s_barrier()
    k.label("loop")
    k.ds_read_b128(v[8:11], v[1])
    k.ds_read_b128(v[12:15], v[1])
    k.s_waitcnt(lgkmcnt=0)
    k.v_mfma_f32_32x32x16_bf16(v[16:31], v[8:11], v[12:15], v[16:31])
    k.v_mfma_f32_32x32x16_bf16(v[32:47], v[12:15], v[8:11], v[32:47])
    k.s_sub_u32(s[8], s[8], 1)
    k.s_cmp_lg_u32(s[8], 0)
    k.s_cbranch_scc1(k.L("loop"))
    for _ in range(3):
        k.s_nop(7)
    k.global_store_dwordx4(v[1], v[16:19], s[6:7])
    k.s_endpgm()
    return k


def bench(label, co, grid, block, args, repeat, kernel=None):
    launch(co, grid, block, *args, kernel=kernel)          # warm-up: decoding, imports
    best, n = None, 0
    for _ in range(repeat):
        t = time.perf_counter()
        r = launch(co, grid, block, *args, kernel=kernel)
        dt = time.perf_counter() - t
        best, n = (dt if best is None else min(best, dt)), r.wave_instructions
    print(f"{label:36s} {n:9d} wave-instr  {best:7.3f} s  {n / best / 1e6:6.3f} M wave-instr/s", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=os.environ.get("FLYASM_CORPUS_DIR", "/tmp/corpus"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--gemm-wg", type=int, default=256)
    ap.add_argument("--gemm-iters", type=int, default=16)
    ap.add_argument("--grid-in-items", action="store_true")
    ap.add_argument("--no-fidelity", action="store_true",
                    help="Switch off the dynamic hazard check and LDS race detection (flyasm.emu.hazards.options).")
    o = ap.parse_args()
    if o.no_fidelity:
        from flyasm.emu.hazards import options
        options(hazards=None, races=False).set()
    co = lambda n: glob.glob(f"{o.corpus}/{n}-*.co")[0]  # noqa: E731
    gi = (lambda g, b: g * b) if o.grid_in_items else (lambda g, b: g)  # noqa: E731
    rng = np.random.default_rng(0)
    G = 256
    a = rng.integers(-4, 4, 512 * 64).astype(np.float16)
    bench("mfma_16x16x32_f16_kloop 256wg x1w", co("mfma_16x16x32_f16_kloop"), gi(G, 64), 64,
          (a, a, np.zeros(256, np.float32), np.zeros(256, np.float32), 64), o.repeat)
    n = 16
    x = rng.standard_normal(64 * G * n).astype(np.float32)
    bench("loop_divergent 256wg x1w", co("loop_divergent"), gi(G, 64), 64,
          (x, np.zeros(64 * G, np.float32), np.zeros(64 * G, np.float32), n), o.repeat)
    xi = rng.integers(0, 100, 256 * 64).astype(np.int32)
    bench("lds_reduce_wg256 64wg x4w", co("lds_reduce_wg256"), gi(64, 256), 256,
          (xi, np.zeros(256 * 64, np.int32), np.zeros(64, np.int32)), o.repeat)
    k = gemm_like()
    res = k.build()
    ab = (rng.standard_normal(512 * 8).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)  # bf16
    bench(f"gemm_like {o.gemm_wg}wg x8w, {o.gemm_iters} iters", res.co, gi(o.gemm_wg, 512), 512,
          (ab, np.zeros(512 * 4, np.float32), o.gemm_iters), o.repeat, kernel="gemm_like")


if __name__ == "__main__":
    main()
