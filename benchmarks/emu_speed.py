"""Emulator speed in wave-instructions/s: python benchmarks/emu_speed.py [--corpus DIR]"""
from __future__ import annotations

import glob
import sys
import time

import numpy as np

from flyasm.run import launch


def bench(label, co, grid, block, *args):
    launch(co, grid, block, *args)          # warm-up: disassembly, imports
    from flyasm.emu import program
    t = time.perf_counter()
    r = launch(co, grid, block, *args)
    dt = time.perf_counter() - t
    print(f"{label:28s} {r.wave_instructions:9d} wave-instr  {dt:7.3f} s  {r.wave_instructions / dt / 1e6:6.2f} M/s")


def main():
    d = sys.argv[sys.argv.index("--corpus") + 1] if "--corpus" in sys.argv else "/tmp/corpus"
    co = lambda n: glob.glob(f"{d}/{n}-*.co")[0]
    rng = np.random.default_rng(0)
    G = 256
    a = rng.integers(-4, 4, 512 * 64).astype(np.float16)
    bench("mfma_16x16x32_f16_kloop x256wg", co("mfma_16x16x32_f16_kloop"), G, 64, a, a,
          np.zeros(256, np.float32), np.zeros(256, np.float32), 64)
    n = 16
    x = rng.standard_normal(64 * G * n).astype(np.float32)
    bench("loop_divergent x256wg", co("loop_divergent"), G, 64, x, np.zeros(64 * G, np.float32),
          np.zeros(64 * G, np.float32), n)
    xi = rng.integers(0, 100, 256 * 64).astype(np.int32)
    bench("lds_reduce_wg256 x64wg", co("lds_reduce_wg256"), 64, 256, xi, np.zeros(256 * 64, np.int32),
          np.zeros(64, np.int32))


if __name__ == "__main__":
    main()
