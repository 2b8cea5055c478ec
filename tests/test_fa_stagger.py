"""kernels/fa_fwd.py build(stagger=True): wave groups 0-3 and 4-7 half a phase apart.

The race-freedom argument is in fa_fwd.build()'s docstring; here the strict emulator checks it:
in-flight LDS/register checks, the LDS race detector per barrier epoch, seeded random wave
interleavings, and torch.  Tolerances as in tests/test_fa_fwd.py (bf16 1e-2, f16 2.5e-3 on O;
LSE 1e-4: the default path rounds no score).  The broken variants below build with zero static
findings (the checker models one wave, it cannot see the other group), so only the emulator can
catch them -- and must."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kernels"))
import fa_fwd  # noqa: E402

from flyasm.check import check_kernel  # noqa: E402
from flyasm.emu.memory import EmuError  # noqa: E402

TOL = {torch.bfloat16: 1e-2, torch.float16: 2.5e-3}


def _inputs(b, hq, hkv, sq, sk, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    mk = lambda *s: torch.randn(*s, generator=g).to(dtype)  # noqa: E731
    return mk(b, hq, sq, 128), mk(b, hkv, sk, 128), mk(b, hkv, sk, 128)


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
@pytest.mark.parametrize("causal", [False, True])
def test_stagger_builds_clean(dtype, causal):
    k = fa_fwd.build(dtype, causal, 8, 2, stagger=True)
    assert check_kernel(k) == []
    text = k.to_asm()
    assert "_stagger" in k.name and ".Lgroup_b" in text
    # default untouched: stagger=False is the very same stream as the plain build
    assert fa_fwd.build(dtype, causal, 8, 2, stagger=False).to_asm() == fa_fwd.build(dtype, causal, 8, 2).to_asm()


@pytest.mark.parametrize("dtype,causal,shape,seed", [
    # the longer two (1-2.5 min each) run under `make test-all`; the default run keeps causal batch 2
    pytest.param(torch.bfloat16, False, (1, 2, 1, 300, 200), 1, marks=pytest.mark.slow),  # GQA, ragged q and k
    pytest.param(torch.bfloat16, True, (1, 2, 1, 300, 300), 2, marks=pytest.mark.slow),   # causal GQA, 5 KV tiles
    (torch.float16, True, (2, 2, 2, 256, 192), 3),       # f16 causal MHA, batch 2
])
def test_stagger_matches_torch_seeded(dtype, causal, shape, seed):
    q, k, v = _inputs(*shape, dtype, seed=20 + seed)
    out, lse = fa_fwd.run(q, k, v, causal=causal, stagger=True, seed=seed)
    ref, ref_lse = fa_fwd.reference(q, k, v, causal=causal)
    assert torch.isfinite(out).all() and torch.isfinite(lse).all()          # outputs were NaN-poisoned
    torch.testing.assert_close(out.float(), ref, atol=TOL[dtype], rtol=TOL[dtype])
    torch.testing.assert_close(lse, ref_lse, atol=1e-4, rtol=0)


def test_stagger_barrier_counts_match(monkeypatch):
    """Every wave executes 2 + 2*n_tiles s_barriers, and the groups really are a barrier apart:
    wave 4's 2nd barrier is the extra one before the loop, wave 0's last is the one before the epilogue."""
    import flyasm.emu.trace as trace
    from flyasm.run import launch
    seen: dict[int, list[int]] = {}

    class Count(trace.Observer):
        def before(self, m, p, w):
            if m.program.insts[p].name == "s_barrier":
                for i in np.asarray(m.ids(w)).tolist():
                    seen.setdefault(i, []).append(p)

    monkeypatch.setattr(trace, "Observer", Count)
    q, k, v = _inputs(1, 1, 1, 256, 300, torch.bfloat16, seed=30)          # one workgroup, 5 KV tiles
    kern = fa_fwd.build("bf16", True, 1, 1, stagger=True)
    out = torch.full_like(q, float("nan"))
    lse = torch.full((1, 1, 256), float("nan"))
    launch(kern.build(), (1, 1, 1), (512, 1, 1), *fa_fwd.kernel_args(kern, q, k, v, out, lse, 128 ** -0.5, True),
           kernel=kern.name, progress=lambda n: None)
    ref, _ = fa_fwd.reference(q, k, v, causal=True)
    torch.testing.assert_close(out.float(), ref, atol=1e-2, rtol=1e-2)
    n_tiles = 4                                                              # causal: keys 0..255 only
    assert sorted(seen) == list(range(8))
    assert {len(x) for x in seen.values()} == {2 + 2 * n_tiles}
    a, b = seen[0], seen[4]
    assert all(seen[w] == a for w in range(4)) and all(seen[w] == b for w in range(4, 8))
    assert a[0] == b[0]                                    # the shared prologue barrier
    assert set(a[1:]).isdisjoint(b[1:])                    # then each group its own barrier instructions


def _broken(attr):
    bld = fa_fwd._Builder("bf16", False, 1, 1, False, True, True, False, stagger=True)
    setattr(bld, attr, False)
    k = bld.build()
    assert check_kernel(k) == []                           # invisible to the one-wave static checker
    return k


@pytest.mark.parametrize("attr,seed", [
    ("v_guard", None),        # group B's PV reads V buffer p after the barrier that lets A overwrite it
    ("v_guard", 4),
    ("b_waits", 5),           # group B's K_{j+2} may still fly when group A reads it
    ("b_wait_start", None),   # group B's K_1 may still fly at its extra barrier
])
def test_broken_stagger_is_caught(attr, seed):
    q, k, v = _inputs(1, 1, 1, 256, 192, torch.bfloat16, seed=31)
    with pytest.raises(EmuError, match=r"LDS race|will still write"):
        fa_fwd.run(q, k, v, kernel=_broken(attr), seed=seed)


def test_stagger_model_benchmark_runs():
    import json
    import subprocess
    root = Path(__file__).resolve().parents[1]
    r = subprocess.run([sys.executable, "benchmarks/fa_stagger_model.py", "--json"], capture_output=True, text=True,
                       cwd=root, timeout=300)
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["rows"]
    assert [(x["stagger"], x["loop"]) for x in rows] == [(False, ".Lloop"), (True, ".Lloop"), (True, ".Lloop_b")]
    # group A runs the unsplit loop body (build(split=False)), so the one-wave model must give it identical numbers
    assert {k: v for k, v in rows[0].items() if k not in ("kernel", "stagger", "group")} == \
        {k: v for k, v in rows[1].items() if k not in ("kernel", "stagger", "group")}
    assert rows[2]["ds_read_issue"] == rows[0]["ds_read_issue"] and rows[2]["mfma_busy"] == rows[0]["mfma_busy"]
