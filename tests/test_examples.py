"""examples/: the training step through flyasm.attention runs (forward and backward in the emulator)
and its weight gradients agree with the same block on torch's SDPA in float64."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_attention_training_step(tmp_path, capsys):
    from flyasm.dispatch import build_set
    build_set(f"{REPO / 'kernels' / 'fa_fwd_set.py'}:SMALL", tmp_path / "fwd", jobs=2, progress=False)
    build_set(f"{REPO / 'kernels' / 'fa_bwd_set.py'}:SMALL", tmp_path / "bwd", jobs=2, progress=False)
    sys.path.insert(0, str(REPO / "examples"))
    import attention_training_step as ex
    losses = ex.main(2, kernels=tmp_path / "fwd", bwd_kernels=tmp_path / "bwd")
    assert losses[1] < losses[0]
    out = capsys.readouterr().out
    # the block's weights are bf16: its gradients differ from float64 SDPA's by the bf16 projections'
    # roundings (~1e-2 of the largest at most), an attention gradient error would show at O(1)
    for line in out.splitlines():
        diffs = [float(x.split()[-1]) for x in line.split(": ", 1)[1].split("grad|: ")[1].split(", ")]
        assert len(diffs) == 3 and max(diffs) < 3e-2, line
