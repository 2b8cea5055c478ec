"""Raw kernarg launches: `launch(co, grid, block, kernarg=BYTES, buffers={host pointer: tensor})`
rebases each pointer a foreign host packed onto the device copy of its buffer (emulator and, through
a fake libamdhip64, HIP), and `flyasm emu --kernarg --buffer` does the same from the command line."""
from __future__ import annotations

import struct

import numpy as np
import pytest
from click.testing import CliRunner

from flyasm.cli import main
from flyasm.errors import FlyasmError
from flyasm.kernel import Kernel
from flyasm.run import launch
from flyasm.run.args import ArgSpec, pointer_slots, rebase_pointers
from flyasm.run import hip
from test_emu_cli import _add_n_kernel  # out[i] = x[i] + n; natural layout: out @0, x @8, n @16
from test_hip_backend import FakeHipMem

RNG = np.random.default_rng()
OUT, X = 0x7A00_0000_1000, 0x7A00_0000_9000       # the host's pointer values (any integers)


@pytest.fixture(scope="module")
def add_n_co(tmp_path_factory):
    p = tmp_path_factory.mktemp("raw_kernarg") / "add_n.co"
    p.write_bytes(_add_n_kernel().build().co)
    return p


def _case(shift_words=None, n=None):
    """x (68 int32), poisoned out, n, and the kernarg bytes with x's pointer `shift` elements in."""
    shift = int(RNG.integers(0, 5)) if shift_words is None else shift_words
    x = RNG.integers(-1 << 30, 1 << 30, 68).astype(np.int32)
    out = np.full(64, -0x21524111, np.int32)                  # 0xDEADBEEF
    n = int(RNG.integers(-1000, 1000)) if n is None else n
    ka = struct.pack("<QQi4x", OUT, X + 4 * shift, n)
    return x, out, n, shift, ka


def test_emu_rebases_pointers_including_interior_ones(add_n_co):
    x, out, n, shift, ka = _case()
    r = launch(add_n_co, 1, 64, kernarg=ka, buffers={OUT: out, X: x})
    np.testing.assert_array_equal(out, x[shift:shift + 64] + np.int32(n))
    got = struct.unpack_from("<QQ", r.kernarg)
    assert got[0] != OUT and got[1] - got[0] != X + 4 * shift - OUT     # rebased onto the emulator's buffers
    assert r.kernarg[16:] == ka[16:]                                      # values untouched


def test_hex_kernarg_and_torch_tensors(add_n_co):
    torch = pytest.importorskip("torch")
    x, out, n, shift, ka = _case()
    xt, ot = torch.from_numpy(x.copy()), torch.from_numpy(out.copy())
    launch(add_n_co, 1, 64, kernarg=ka.hex(), buffers={OUT: ot, X: xt})
    np.testing.assert_array_equal(ot.numpy(), x[shift:shift + 64] + np.int32(n))


def test_a_value_equal_to_a_mapped_address_stays_a_value(add_n_co):
    # n's 8-byte word equals the address of a mapped buffer; the metadata says n is by value
    x, out, n, shift, ka = _case(n=0x3000)
    extra = np.zeros(16, np.int32)
    with pytest.raises(FlyasmError, match=r"no pointer argument of the kernarg bytes points into buffer\(s\) 0x3000"):
        launch(add_n_co, 1, 64, kernarg=ka, buffers={OUT: out, X: x, 0x3000: extra})
    specs = [ArgSpec("out", 0, 8, "global_buffer"), ArgSpec("x", 8, 8, "global_buffer"), ArgSpec("n", 16, 4, "by_value")]
    got = rebase_pointers(ka, {OUT: out, X: x}, specs, lambda val, name: 0x5000_0000 if val is out else 0x6000_0000)
    assert struct.unpack_from("<QQi", got) == (0x5000_0000, 0x6000_0000 + 4 * shift, 0x3000)


def test_a_host_pointer_in_a_slot_the_metadata_calls_values_is_rebased():
    """Stale metadata (aiter's group-mode backward kernels: 64-bit sequence-start pointers in slots
    declared as two u32): a buffer no declared pointer reaches is found in another aligned word when
    that word holds an address above 4 GiB, which no 32-bit field can; every such word is rebased
    (ptr_qseq and ptr_qseq_padded both point at the starts). A word below 4 GiB stays a value
    (the test above)."""
    a, starts = np.zeros(8, np.float32), np.arange(3, dtype=np.int32)
    host = 0x7F00_0000_4000
    specs = [ArgSpec("p", 0, 8, "global_buffer")] + [ArgSpec(f"v{i}", 8 + 4 * i, 4, "by_value") for i in range(6)]
    ka = struct.pack("<QQQQ", 0x9000, host + 4, 0x1234, host)
    dev = {id(a): 0x10_0000, id(starts): 0x20_0000}
    got = rebase_pointers(ka, {0x9000: a, host: starts}, specs, lambda val, name: dev[id(val)])
    assert struct.unpack("<QQQQ", got) == (0x10_0000, 0x20_0004, 0x1234, 0x20_0000)
    # a reached buffer is not looked for again: a by-value word equal to its address stays a value
    ka = struct.pack("<QQQQ", 0x7F00_0000_9000, 0x7F00_0000_9000, 0, 0)
    got = rebase_pointers(ka, {0x7F00_0000_9000: a}, specs, lambda val, name: 0x10_0000)
    assert struct.unpack("<QQQQ", got) == (0x10_0000, 0x7F00_0000_9000, 0, 0)


def test_without_metadata_every_aligned_word_is_a_candidate():
    assert pointer_slots(None, 28) == [0, 8, 16]
    assert pointer_slots([ArgSpec("p", 16, 8, "global_buffer"), ArgSpec("n", 0, 4, "by_value")], 24) == [16]
    # bytes past the declared arguments: the metadata says nothing there, every aligned word counts
    assert pointer_slots([ArgSpec("p", 16, 8, "global_buffer"), ArgSpec("n", 0, 4, "by_value"),
                          ArgSpec("m", 24, 4, "by_value")], 48) == [16, 32, 40]
    a = np.zeros(8, np.float32)
    ka = struct.pack("<QQQ", 7, 0x9000 + 12, 0x9000 + 32)          # 32 = one past the end: not inside
    got = rebase_pointers(ka, {0x9000: a}, None, lambda val, name: 0x100000)
    assert struct.unpack("<QQQ", got) == (7, 0x100000 + 12, 0x9000 + 32)


def test_bad_raw_launches_are_one_sentence(add_n_co):
    x, out, n, shift, ka = _case()
    cases = [
        (dict(kernarg=ka, buffers={OUT: out, 0x1234: x}), r"points into buffer\(s\) 0x1234"),
        (dict(kernarg="zz", buffers={}), r"not hex digits"),
        (dict(kernarg=ka, buffers=[out]), r"buffers takes a dict"),
        (dict(kernarg=ka, buffers={OUT: out, OUT + 16: x}), r"overlap"),
        (dict(kernarg=ka, buffers={0: out}), r"not a non-zero 64-bit address"),
        (dict(kernarg=ka, buffers={OUT: "out"}), r"give a tensor or array"),
        (dict(buffers={OUT: out}), r"buffers= maps the pointers inside kernarg= bytes"),
    ]
    for kw, msg in cases:
        with pytest.raises(FlyasmError, match=msg):
            launch(add_n_co, 1, 64, **kw)
    with pytest.raises(FlyasmError, match="either positional kernel arguments or kernarg="):
        launch(add_n_co, 1, 64, out, x, 3, kernarg=ka)


def test_hip_backend_copies_patches_and_copies_back():
    # the fake library's 'kernel' computes out = x * alpha + n from the kernarg bytes it receives
    k = Kernel("axpn_raw", block=64, arg_layout="natural")
    k.arg("out", "ptr"), k.arg("x", "ptr"), k.arg("n", "i32"), k.arg("alpha", "f32")
    k.s_endpgm()
    fake = FakeHipMem((0, 8, 16, 20))
    x = RNG.standard_normal(64).astype(np.float32)
    out = np.full(64, np.nan, np.float32)
    n, alpha = int(RNG.integers(-100, 100)), float(np.float32(RNG.standard_normal()))
    ka = struct.pack("<QQif", OUT, X, n, alpha)
    r = launch(k, (2, 1), 64, kernarg=ka, buffers={OUT: out, X: x}, backend="hip", runtime=hip.HipRuntime(lib=fake))
    sent = fake.launched["kernarg"]
    p_out, p_x = struct.unpack_from("<QQ", sent)
    assert p_out >= 0x7000_0000_0000 and p_x >= 0x7000_0000_0000 and p_out != p_x     # device pointers
    assert sent == r.kernarg and sent[16:] == ka[16:]
    np.testing.assert_array_equal(out, x * np.float32(alpha) + np.float32(n))
    assert fake.dev == {} and fake.calls.count("hipMalloc") == 2


def test_cli_kernarg_and_buffers(add_n_co, tmp_path):
    x, out, n, shift, ka = _case()
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "out.npy", out)
    (tmp_path / "ka.bin").write_bytes(ka)
    for spec in (f"@{tmp_path / 'ka.bin'}", ka.hex()):
        r = CliRunner().invoke(main, ["emu", str(add_n_co), "--block", "64", "--kernarg", spec,
                                      "--buffer", f"0x{X:x}=@{tmp_path / 'x.npy'}",
                                      "--buffer", f"{OUT}=@{tmp_path / 'out.npy'}",
                                      "--out", f"0x{OUT:x}={tmp_path / 'o.npy'}", "--no-progress"])
        assert r.exit_code == 0, r.output
        np.testing.assert_array_equal(np.load(tmp_path / "o.npy"), x[shift:shift + 64] + np.int32(n))
    bad = [(["--kernarg", "xyz"], "--kernarg takes @FILE.bin or hex digits, not 'xyz'"),
           (["--kernarg", ka.hex(), "--arg", "1"], "--arg or --kernarg"),
           (["--kernarg", ka.hex(), "--buffer", "nope"], "--buffer takes ADDRESS=VALUE"),
           (["--kernarg", ka.hex(), "--buffer", f"{OUT}=@{tmp_path / 'out.npy'}", "--buffer",
             f"{X}=@{tmp_path / 'x.npy'}", "--out", "0x1234=o.npy"], "--out 0x1234: not a --buffer address")]
    for extra, msg in bad:
        r = CliRunner().invoke(main, ["emu", str(add_n_co), "--block", "64", "--no-progress"] + extra)
        assert r.exit_code != 0 and msg in r.output and "Traceback" not in r.output, r.output
