"""`flyasm emu`: a corpus kernel with positional arguments (.npy in, .npy out), a flyasm kernel with
named arguments, the per-wave trace, and one-sentence errors."""
from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from flyasm.cli import main
from test_emu_corpus import loop_divergent_ref  # the REFERENCE.md formula, written once

RNG = np.random.default_rng()


def test_corpus_kernel_positional_args(corpus, tmp_path):
    G, n = 3, int(RNG.integers(1, 5))
    x = RNG.uniform(-4, 4, 64 * G * n).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "poison.npy", np.full(64 * G, np.nan, np.float32))
    r = CliRunner().invoke(main, ["emu", str(corpus["loop_divergent"].path), "--grid", str(G), "--block", "64",
                                  "--arg", f"@{tmp_path / 'x.npy'}", "--arg", f"@{tmp_path / 'poison.npy'}",
                                  "--arg", f"@{tmp_path / 'poison.npy'}", "--arg", str(n),
                                  "--out", f"1={tmp_path / 'y.npy'}", "--out", f"2={tmp_path / 'z.npy'}"])
    assert r.exit_code == 0, r.output
    assert f"{G} waves" in r.output
    y, z = np.load(tmp_path / "y.npy"), np.load(tmp_path / "z.npy")
    yr, zr = loop_divergent_ref(x, G, n)
    np.testing.assert_array_equal(y, yr)       # NaN where the kernel must not write
    np.testing.assert_array_equal(z, zr)


def _add_n_kernel():
    from flyasm import Kernel, s, v
    k = Kernel("add_n", block=64, arg_layout="natural")
    out, x, n = k.arg("out", "ptr"), k.arg("x", "ptr"), k.arg("n", "i32")
    k.s_load_dwordx4(s[4:7], k.kernarg_ptr, out.offset)
    k.s_load_dword(s[8], k.kernarg_ptr, n.offset)
    k.v_lshlrev_b32(v[1], 2, v[0])
    k.s_waitcnt(lgkmcnt=0)
    k.global_load_dword(v[2], v[1], s[6:7])
    k.s_waitcnt(vmcnt=0)
    k.v_add_u32(v[2], s[8], v[2])
    k.global_store_dword(v[1], v[2], s[4:5])
    k.s_endpgm()
    return k


@pytest.fixture(scope="module")
def add_n_co(tmp_path_factory):
    p = tmp_path_factory.mktemp("emu_cli") / "add_n.co"
    p.write_bytes(_add_n_kernel().build().co)
    return p


def test_named_args_zeros_and_trace(add_n_co, tmp_path):
    x = RNG.integers(-1 << 30, 1 << 30, 64).astype(np.int32)
    n = int(RNG.integers(-1000, 1000))
    np.save(tmp_path / "x.npy", x)
    r = CliRunner().invoke(main, ["emu", str(add_n_co), "--arg", f"n={n}", "--arg", "out=zeros:64xi32",
                                  "--arg", f"x=@{tmp_path / 'x.npy'}", "--out", f"out={tmp_path / 'o.npy'}",
                                  "--trace", "0"])
    assert r.exit_code == 0, r.output
    np.testing.assert_array_equal(np.load(tmp_path / "o.npy"), x + np.int32(n))
    lines = r.output.splitlines()
    assert lines[0].startswith("[w0] 0000: s_load_dwordx4")
    # the load lands at the wait: its register delta is printed under the s_waitcnt vmcnt(0)
    i = next(j for j, ln in enumerate(lines) if "s_waitcnt vmcnt(0)" in ln)
    assert lines[i + 1].strip().startswith("v2 [") and f"0:0x{int(x[0]) & 0xFFFFFFFF:08x}" in lines[i + 1]
    assert sum(ln.startswith("[w0]") for ln in lines) == 9            # every instruction once


@pytest.mark.parametrize("argv,msg", [
    (["--arg", "m=3"], "has no argument 'm'; its argument names are: out, x, n"),
    (["--arg", "out=zeros:64xi32", "--arg", "x=zeros:64xi32"], "missing --arg for n"),
    (["--arg", "out=5", "--arg", "x=zeros:64xi32", "--arg", "n=1"], "argument out is a pointer"),
    (["--arg", "out=zeros:64xq9", "--arg", "x=zeros:64xi32", "--arg", "n=1"], "is not zeros:SHAPExDTYPE"),
    (["--grid", "0", "--arg", "n=1"], "--grid takes 1 to 3 positive integers"),
])
def test_errors_are_one_sentence(add_n_co, argv, msg):
    r = CliRunner().invoke(main, ["emu", str(add_n_co), *argv])
    assert r.exit_code == 2 and msg in r.output and "Traceback" not in r.output
