"""MFMA register layouts by the closed-form ISA formulas (notes §2), written here independently."""
from __future__ import annotations

import numpy as np
import pytest

from test_emu_ops import run

RNG = np.random.default_rng()


def bf16(x):
    b = x.astype(np.float32).view(np.uint32)
    return (b >> 16).astype(np.uint16)          # inputs are exact in bf16 (small integers)


@pytest.mark.parametrize("M,K,name", [(32, 16, "v_mfma_f32_32x32x16_bf16"), (16, 32, "v_mfma_f32_16x16x32_bf16")])
def test_layout_closed_form(M, K, name):
    A = RNG.integers(-8, 9, (M, K)).astype(np.float32)
    B = RNG.integers(-8, 9, (K, M)).astype(np.float32)
    C = RNG.integers(-99, 100, (M, M)).astype(np.float32)
    a = np.zeros((4, 64, 2), np.uint16)
    b = np.zeros((4, 64, 2), np.uint16)
    for lane in range(64):
        for vg in range(4):
            for h in range(2):
                k = 8 * (lane // M) + 2 * vg + h        # A/B: i (or j) = lane % M
                a[vg, lane, h] = bf16(A[lane % M, k])
                b[vg, lane, h] = bf16(B[k, lane % M])
    nreg = M * M // 64
    c = np.zeros((nreg, 64), np.float32)
    for lane in range(64):
        for r in range(nreg):
            i = 8 * (r // 4) + 4 * (lane // 32) + r % 4 if M == 32 else 4 * (lane // 16) + r
            c[r, lane] = C[i, lane % M]
    regs = {16 + v: a[v].view(np.uint32)[:, 0] for v in range(4)}
    regs.update({20 + v: b[v].view(np.uint32)[:, 0] for v in range(4)})
    regs.update({32 + r: c[r] for r in range(nreg)})
    m = run([f"{name} v[32:{31 + nreg}], v[16:19], v[20:23], v[32:{31 + nreg}]"], regs)
    D = C + A @ B
    for lane in range(64):
        for r in range(nreg):
            i = 8 * (r // 4) + 4 * (lane // 32) + r % 4 if M == 32 else 4 * (lane // 16) + r
            assert m.R[0, 32 + r, lane].view(np.float32) == D[i, lane % M]
