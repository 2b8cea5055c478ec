"""Shared pytest fixtures."""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

_TESTS_DIR = Path(__file__).resolve().parent


def load_corpus_build():
    """tests/corpus/build.py as a module (loaded by path: `tests` is not a package)."""
    name = "flyasm_tests_corpus_build"
    mod = sys.modules.get(name)
    if mod is None:
        spec = importlib.util.spec_from_file_location(name, _TESTS_DIR / "corpus" / "build.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod  # before exec: dataclasses look their module up
        spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session")
def corpus_build():
    """The corpus build module (build_corpus, CorpusKernel, parse_objdump, ...)."""
    return load_corpus_build()


@pytest.fixture(scope="session")
def corpus(tmp_path_factory, corpus_build):
    """The clang-compiled gfx950 corpus: {name: CorpusKernel}, built once per session.

    Each CorpusKernel has .path (the .co), .symbols, .source, .description, .launch,
    .instructions(symbol), .disassembly, .metadata(); tests/corpus/REFERENCE.md says what each
    kernel computes. Set $FLYASM_CORPUS_DIR to keep the build cache between sessions.
    A missing or too-old clang is an error (the toolchain is part of the test setup), not a skip.
    """
    cache = os.environ.get("FLYASM_CORPUS_DIR")
    out = Path(cache) if cache else tmp_path_factory.mktemp("corpus")
    return {k.name: k for k in corpus_build.build_corpus(out)}


def drop_in_missing(drop_in: Path) -> str | None:
    """Why aiter's drop_in.sh cannot run here (None: it can): the script, pandas for aiter's
    codegen, and a C++ compiler for aiter's host code."""
    import shutil
    if not drop_in.is_file():
        return f"aiter's host code is not at {drop_in.parent} (../shared is absent)"
    try:
        import pandas  # noqa: F401  (aiter's hsa/codegen.py, run by drop_in.sh)
    except ImportError:
        return "pandas is not installed (aiter's codegen in drop_in.sh needs it)"
    if not (list(Path("/usr/lib").glob("llvm-*/bin/clang++")) or shutil.which("clang++") or shutil.which("g++")):
        return "no C++ compiler for aiter's host code (install clang-22: tools/setup.sh)"
    return None


def fp8_attention_bound(s, v, o_ref):
    """Per-element bound on |O - O_ref| for an fp8 attention kernel that rounds P to OCP E4M3 before
    P·V and divides by the row sum of the unrounded P (aiter's fp8bf16 convention; kernels/fa_fwd_fp8.py).

    s: the reference's scores [.., Sq, Sk] (scale * dq * dk * q·k, -inf where masked, float32),
    v: the dequantised V [.., Sk, D], o_ref: the float32 reference O.  With p_j = exp(s_j - max s)
    (so max p = 1 and sum p >= 1 on a row that sees a key), a kernel rounds P = p_j * 2^delta,
    delta >= 0 (its exponent is taken against a running max no larger than the true one); E4M3 RNE
    errs by at most 2^-4 P for P >= 2^-6 (3 fraction bits) and by min(2^-10, P) below (subnormal
    spacing 2^-9), so in the true max's units the error is e(p) = max(2^-4 p, min(2^-10, p)):
        |dO| <= sum_j e(p_j) |v_j| / sum_j p_j  +  2^-8 |O|   (bf16 store of O, RNE)
                + 2^-16 * sum_j p_j |v_j| / sum_j p_j        (fp32 exp / sums / the rounded score
                                                             constant: |s| 2^-22-ish relative, << this)
    A row with no visible key has O = 0 exactly (bound 0 there)."""
    import torch
    mx = s.amax(-1, keepdim=True)
    p = torch.exp(s - torch.where(torch.isfinite(mx), mx, 0)).nan_to_num(0.0)
    den = p.sum(-1, keepdim=True)
    e = torch.maximum(2.0 ** -4 * p, torch.minimum(torch.full_like(p, 2.0 ** -10), p))
    pv = p @ v.abs()
    bound = (e @ v.abs() + 2.0 ** -16 * pv) / torch.where(den > 0, den, 1) + 2.0 ** -8 * o_ref.abs()
    return bound
