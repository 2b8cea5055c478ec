"""kernels/vector_add.py and kernels/gemm_bf16.py: build, round trip, schedule facts, and a CPU-emulator run
against the torch reference (fresh random inputs, poisoned outputs)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kernels"))
import gemm_bf16  # noqa: E402
import vector_add  # noqa: E402

from flyasm.asm import mcbatch  # noqa: E402
from flyasm.isa.syntax import parse_instruction  # noqa: E402


@pytest.fixture(scope="module", params=["vector_add", "gemm_bf16"])
def built(request):
    mod = {"vector_add": vector_add, "gemm_bf16": gemm_bf16}[request.param]
    k = mod.build()
    return mod, k, k.build()


def test_builds_and_round_trips(built):
    """IR -> .s -> llvm-mc/ld.lld -> .co (in build) and each instruction's text -> llvm-objdump -> same key."""
    _, k, res = built
    assert res.co[:4] == b"\x7fELF"
    texts = [inst.text() for inst in k.stream if not any(isinstance(o, type(None)) for o in inst.operands)]
    plain = [t for t, inst in zip(texts, k.stream) if inst.info["unit"] != "BRANCH"]
    back = mcbatch.objdump(plain)
    for t, b in zip(plain, back):
        assert _key(parse_instruction(b)) == _key(parse_instruction(t)), (t, b)


def _key(inst):
    """Instruction.key() with 32-bit integers compared as bit patterns: llvm prints 0xfffffff0 as the
    inline constant -16 (same encoding)."""
    from flyasm.isa.operands import Imm
    name, _, mods = inst.key()
    ops = tuple(f"n:{o.value & 0xFFFFFFFF}" if isinstance(o, Imm) and isinstance(o.value, int) else str(o)
                for o in inst.operands)
    return name, ops, mods


def test_plan_covers_every_register(built):
    _, k, _ = built
    assert k.plan.strict
    d = k.descriptor()
    assert d["next_free_vgpr"] == k.plan.highest()["v"] + 1 or d["agprs"]
    assert d["next_free_sgpr"] >= k.plan.highest()["s"] + 1


def test_gemm_waits_and_nops():
    k = gemm_bf16.build("nt")          # the single-wave NT kernel: one MFMA per K step
    names = [i.name for i in k.stream]
    mfma = names.index("v_mfma_f32_32x32x16_bf16")
    # every load is waited for before its data is used
    assert names[mfma - 1] == "s_waitcnt" and str(k.stream[mfma - 1].operands[0]) == "lgkmcnt(0)"
    # MFMA D -> buffer_store: at least 12 wait states (8-pass XDL, notes §4.2)
    first_store = names.index("buffer_store_dword")
    nop = k.stream[first_store - 2]
    assert nop.name == "s_nop" and nop.operands[0].value + 1 >= 12
    lines = k.to_asm().splitlines()
    assert any(ln.strip() == "s_nop 11" for ln in lines)


def test_vector_add_runs_in_emulator():
    n = 256 * 3 + 77                                   # bounds through num_records: partial last workgroup
    x, y = torch.randn(n), torch.randn(n)
    out = vector_add.run(x, y)
    torch.testing.assert_close(out, vector_add.reference(x, y), rtol=0, atol=0)


def test_gemm_runs_in_emulator():
    m, n, kd = 64, 32, 48
    a = torch.randn(m, kd).to(torch.bfloat16)
    b = torch.randn(n, kd).to(torch.bfloat16)
    c = gemm_bf16.run(a, b, layout="nt")
    # inputs are exact bf16; products are exact in f32; the sums of 48 terms differ from torch only by
    # f32 rounding order: |err| <= 48 * eps32 * sum|a||b|
    ref = gemm_bf16.reference(a, b, layout="nt")
    bound = 48 * 2 ** -23 * (a.float().abs() @ b.float().abs().T) + 1e-6
    assert torch.all((c - ref).abs() <= bound), (c - ref).abs().max()
