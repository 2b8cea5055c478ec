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
