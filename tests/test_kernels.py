"""kernels/vector_add.py and kernels/gemm_bf16.py: every variant builds with zero static-check
findings, survives the byte-exact round trip (.co -> disasm -> llvm-mc/ld.lld -> same .text), and
matches torch in the strict CPU emulator (fresh random inputs, NaN-poisoned outputs).

Tolerances:
  * vector_add: one IEEE add per element, the same single rounding torch does -> exact (atol=rtol=0).
  * gemm_bf16, f32 C: bf16 inputs have 8 significant bits, so every product a·b is exact in fp32
    (16 bits); only the order of the K additions differs from torch's. Each order is within
    (K-1)·u·Σ|a||b| of the exact sum (u = 2^-24), so |C - ref| ≤ 2K·2^-24·(|A|·|B|).
  * gemm_bf16, bf16 C: plus one round-to-nearest to bf16 (u = 2^-8 relative): 2^-8·|ref| on top.
A wrong fragment layout, LDS address or missed K step gives errors of O(|A|·|B|), far above these.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kernels"))
import gemm_bf16  # noqa: E402
import vector_add  # noqa: E402

from flyasm.asm.driver import assemble  # noqa: E402
from flyasm.check import check_kernel  # noqa: E402
from flyasm.codeobj.disasm import disasm  # noqa: E402
from flyasm.codeobj.reader import read_code_object  # noqa: E402

VARIANTS = {
    "vector_add_f32_1024": lambda: vector_add.build(1024, "f32"),
    "vector_add_f32_4096": lambda: vector_add.build(4096, "f32"),
    "vector_add_f16_8192": lambda: vector_add.build(8192, "f16"),
    "gemm_nn_f32": lambda: gemm_bf16.build("nn", "f32"),
    "gemm_nn_bf16": lambda: gemm_bf16.build("nn", "bf16"),
    "gemm_nt": lambda: gemm_bf16.build("nt"),
}


def _gen(seed):
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_builds_clean_and_round_trips(name):
    k = VARIANTS[name]()
    assert check_kernel(k) == []                 # no missing waits, no hazards (verify mode)
    if name != "gemm_nt":                        # ours also pass the conservative mode (only s_nop/VALU
        assert check_kernel(k, "strict") == []   # count as wait states); the nt kernel relies on SALU ones
    res = k.build()                              # build() runs the same checker and fails on findings
    co = read_code_object(res.co)
    back = read_code_object(assemble(disasm(co), k.code_object))
    assert back.text == co.text
    assert [x.descriptor.raw for x in back.kernels] == [x.descriptor.raw for x in co.kernels]


def test_gemm_nn_schedule_facts():
    """The parts of the design the docstring promises, read off the instruction stream."""
    k = gemm_bf16.build("nn")
    names = [i.name for i in k.stream]
    assert names.count("v_mfma_f32_32x32x16_bf16") == 8                  # 4 per step, loop unrolled twice
    assert names.count("ds_read_b64_tr_b16") == 16 and names.count("ds_read_b128") == 8
    dma = [i for i in k.stream if i.name == "buffer_load_dwordx4"]
    assert len(dma) == 12 and all(i.modifiers.get("lds") for i in dma)  # 4 first + 4 per unrolled step
    assert names.count("s_barrier") == 2 and names.count("buffer_store_dwordx4") == 4
    assert any(i.info["unit"] == "BRANCH" and i.name.startswith("s_cbranch") for i in k.stream)
    d = k.descriptor()
    assert d["group_segment_fixed_size"] == 32 * 1024 and d["arch_vgprs"] == 64 and d["agprs"] == 0


@pytest.mark.parametrize("n,npb,dtype", [(10_007, 4096, torch.float32), (10_007, 1024, torch.float32),
                                         (4096, 4096, torch.float32), (3, 4096, torch.float32),
                                         (10_007, 8192, torch.float16), (9_001, 2048, torch.float16)])
def test_vector_add_matches_torch(n, npb, dtype):
    g = _gen(n + npb)
    x, y = torch.randn(n, generator=g).to(dtype), torch.randn(n, generator=g).to(dtype)
    out = vector_add.run(x, y, n_per_block=npb)
    torch.testing.assert_close(out, vector_add.reference(x, y), rtol=0, atol=0)


def _gemm_check(M, N, K, out_dtype="f32", seed=None):
    g = _gen(M * 1_000_003 + N * 1009 + K)
    a = torch.randn(M, K, generator=g).to(torch.bfloat16)
    b = torch.randn(K, N, generator=g).to(torch.bfloat16)
    c = gemm_bf16.run(a, b, layout="nn", out_dtype=out_dtype, seed=seed)
    ref = gemm_bf16.reference(a, b, layout="nn")
    mag = a.float().abs() @ b.float().abs()
    bound = 2 * K * 2.0 ** -24 * mag
    if out_dtype == "bf16":
        bound = bound + 2.0 ** -8 * ref.abs()
    err = (c.float() - ref).abs()
    assert not torch.isnan(c).any(), "poisoned C elements left unwritten"
    assert torch.all(err <= bound), f"max err {err.max().item():.3g}, worst err/bound {(err / bound).max().item():.3g}"
    return err.max().item()


@pytest.mark.parametrize("M,N,K", [(64, 64, 192), (128, 128, 256), (100, 64, 64), (64, 128, 320)])
def test_gemm_nn_f32_matches_torch(M, N, K):
    _gemm_check(M, N, K)


def test_gemm_nn_bf16_out_matches_torch():
    _gemm_check(128, 64, 192, "bf16")


def test_gemm_nn_random_wave_interleaving():
    """Seeded runs interleave random wave subsets: the double-buffered LDS must stay race-free."""
    for seed in (1, 2):
        _gemm_check(64, 64, 256, seed=seed)


def test_gemm_nn_rejects_unsupported_shapes():
    a = torch.zeros(64, 96, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="multiple of 64"):
        gemm_bf16.run(a, torch.zeros(96, 64, dtype=torch.bfloat16), layout="nn")
    with pytest.raises(ValueError, match="multiple of 64"):
        gemm_bf16.run(torch.zeros(64, 64, dtype=torch.bfloat16), torch.zeros(64, 48, dtype=torch.bfloat16),
                      layout="nn")


@pytest.mark.slow
def test_gemm_nn_larger():
    _gemm_check(256, 256, 1024)
    _gemm_check(192, 320, 512, "bf16")
