"""docs/: every spelling in the modifier guide builds the assembly written beside it and llvm-mc
accepts it; the worked row-softmax example (DPP and permlane reductions) passes the checker and
matches torch.softmax in the emulator."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import flyasm
from flyasm.asm.mcbatch import encode
from flyasm.check import check_kernel
from flyasm.run import launch

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _guide_lines():
    text = (DOCS / "modifiers.md").read_text()
    out = []
    for block in re.findall(r"```python\n(.*?)```", text, re.S):
        for line in block.splitlines():
            if line.startswith("k.") and "  # " in line:
                call, asm = line.split("  # ", 1)
                out.append((call.strip(), asm.strip()))
    return out


def test_guide_spellings_build_their_assembly_and_assemble():
    lines = _guide_lines()
    assert len(lines) >= 15
    ns = {n: getattr(flyasm, n) for n in ("v", "s", "a", "m0", "vcc", "exec_")}
    texts = []
    for call, asm in lines:
        k = flyasm.Kernel("guide")
        eval(call, {**ns, "k": k})
        assert k.stream[0].text() == asm, call
        texts.append(asm)
    try:
        enc = encode(texts)
    except flyasm.FlyasmError as e:
        pytest.skip(f"no gfx950 llvm-mc: {e}")
    assert [x.error for x in enc if x.bytes is None] == []


def _softmax():
    sys.path.insert(0, str(DOCS / "examples"))
    import row_softmax
    return row_softmax


def test_row_softmax_example_matches_torch_in_the_emulator():
    m = _softmax()
    k = m.build()
    assert check_kernel(k) == []
    names = [i.mnemonic for i in k.stream]
    assert {"v_permlane16_swap_b32", "v_permlane32_swap_b32"} <= set(names)
    assert sum(1 for i in k.stream if i.is_dpp) == 8          # 4 DPP steps for the max, 4 for the sum
    rows = 6
    g = torch.Generator().manual_seed(int(np.random.SeedSequence().entropy % (1 << 31)))
    x = torch.randn(rows, m.COLS, generator=g) * 6 + torch.randn(rows, 1, generator=g) * 20
    out = torch.full((rows, m.COLS), float("nan"))
    launch(k, rows, 64, out, x)
    ref = m.reference(x)
    # float32 throughout: the 256-term sum is added in a different order than torch's (relative
    # error up to ~256 * 2^-24 = 1.5e-5), v_exp_f32 and v_rcp_f32 each add about 1 ulp.
    torch.testing.assert_close(out, ref, rtol=3e-5, atol=1e-7)
    torch.testing.assert_close(out.sum(-1), torch.ones(rows), rtol=0, atol=1e-5)


def test_row_softmax_without_a_dpp_nop_is_one_finding():
    m = _softmax()
    k = m.build()
    at = next(i for i, ins in enumerate(k.stream) if ins.is_dpp) - 1
    assert k.stream[at].mnemonic == "s_nop"
    del k.stream[at]
    for r in k.regions:                       # the stream shrank by one before these indices
        r.start -= r.start > at
        r.end = None if r.end is None else r.end - (r.end > at)
    f = check_kernel(k)
    assert [x.rule for x in f] == ["valu_vgpr_dpp"] and "checkDPPHazards" in f[0].message
