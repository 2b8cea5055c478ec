"""HIP backend: the ctypes call sequence and the packed argument bytes, checked with a fake
libamdhip64; the real launch runs only where an AMD GPU exists (skipped with the reason)."""
import ctypes
import struct

import pytest

from flyasm.run import hip


class FakeHip:
    """Records every call; reads pointers the way the real library would."""

    def __init__(self, lds_limit=163840, fail=None):
        self.calls = []
        self.lds_limit = lds_limit
        self.fail = fail or set()
        self.launched = None

    def _rec(self, name, *args):
        self.calls.append(name)
        return 100 if name in self.fail else 0

    def hipInit(self, flags):
        return self._rec("hipInit", flags)

    def hipGetErrorString(self, err):
        return b"hipErrorInvalidValue" if err == 100 else b"unknown"

    def hipGetDeviceCount(self, n):
        ctypes.cast(n, ctypes.POINTER(ctypes.c_int)).contents.value = 1
        return self._rec("hipGetDeviceCount")

    def hipDeviceGetAttribute(self, val, attr, dev):
        assert attr == 74
        ctypes.cast(val, ctypes.POINTER(ctypes.c_int)).contents.value = self.lds_limit
        return self._rec("hipDeviceGetAttribute")

    def hipModuleLoadData(self, handle, image):
        self.image = ctypes.string_at(image, 4)
        ctypes.cast(handle, ctypes.POINTER(ctypes.c_void_p)).contents.value = 0x1000
        return self._rec("hipModuleLoadData")

    def hipModuleGetFunction(self, fn, module, name):
        self.fn_name = name
        ctypes.cast(fn, ctypes.POINTER(ctypes.c_void_p)).contents.value = 0x2000
        return self._rec("hipModuleGetFunction")

    def hipStreamCreate(self, st):
        ctypes.cast(st, ctypes.POINTER(ctypes.c_void_p)).contents.value = 0x3000
        return self._rec("hipStreamCreate")

    def hipModuleLaunchKernel(self, fn, gx, gy, gz, bx, by, bz, lds, stream, params, extra):
        words = [extra[i] for i in range(5)]
        assert words[0] == hip.HIP_LAUNCH_PARAM_BUFFER_POINTER and words[2] == hip.HIP_LAUNCH_PARAM_BUFFER_SIZE
        assert words[4] == hip.HIP_LAUNCH_PARAM_END and params is None
        size = ctypes.cast(words[3], ctypes.POINTER(ctypes.c_size_t)).contents.value
        self.launched = dict(fn=fn.value, grid=(gx, gy, gz), block=(bx, by, bz), lds=lds, stream=stream.value,
                             kernarg=ctypes.string_at(words[1], size))
        return self._rec("hipModuleLaunchKernel")

    def hipStreamSynchronize(self, st):
        return self._rec("hipStreamSynchronize")


class FakeHipDevice(FakeHip):
    """FakeHip plus device memory (bytearrays at fake addresses; copies at any offset inside an
    allocation) and hipEvents on a fake clock, which a subclass's launch advances."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.dev, self.next, self.allocated = {}, 0x7000_0000_0000, []
        self.clock, self.stamps, self.next_event = 0.0, {}, 0x9000

    def hipMalloc(self, p, nbytes):
        ctypes.cast(p, ctypes.POINTER(ctypes.c_void_p)).contents.value = self.next
        self.dev[self.next] = bytearray(nbytes)
        self.allocated.append((self.next, nbytes))
        self.next += (nbytes + 0xFFFF) & ~0xFFFF
        return self._rec("hipMalloc")

    def hipFree(self, ptr):
        del self.dev[ptr.value]
        return self._rec("hipFree")

    def _at(self, addr, nbytes):
        base = max(b for b in self.dev if b <= addr)
        assert addr + nbytes <= base + len(self.dev[base]), "access outside an allocation"
        return self.dev[base], addr - base

    def read(self, addr, nbytes) -> bytes:
        buf, off = self._at(addr, nbytes)
        return bytes(buf[off:off + nbytes])

    def hipMemcpy(self, dst, src, nbytes, kind):
        if kind == hip.HIP_MEMCPY_H2D:
            buf, off = self._at(dst.value, nbytes)
            buf[off:off + nbytes] = ctypes.string_at(src.value, nbytes)
        else:
            ctypes.memmove(dst.value, self.read(src.value, nbytes), nbytes)
        return self._rec(f"hipMemcpy{kind}")

    def hipMemset(self, dst, byte, nbytes):
        buf, off = self._at(dst.value, nbytes)
        buf[off:off + nbytes] = bytes([byte]) * nbytes
        return self._rec("hipMemset")

    def hipEventCreate(self, ev):
        ctypes.cast(ev, ctypes.POINTER(ctypes.c_void_p)).contents.value = self.next_event
        self.next_event += 1
        return self._rec("hipEventCreate")

    def hipEventRecord(self, ev, stream):
        assert stream.value == 0x3000
        self.stamps[ev.value] = self.clock
        return self._rec("hipEventRecord")

    def hipEventSynchronize(self, ev):
        assert ev.value in self.stamps
        return self._rec("hipEventSynchronize")

    def hipEventElapsedTime(self, ms, a, b):
        ctypes.cast(ms, ctypes.POINTER(ctypes.c_float)).contents.value = self.stamps[b.value] - self.stamps[a.value]
        return self._rec("hipEventElapsedTime")

    def hipEventDestroy(self, ev):
        del self.stamps[ev.value]
        return self._rec("hipEventDestroy")


def test_call_sequence_and_argument_bytes():
    fake = FakeHip()
    rt = hip.HipRuntime(lib=fake)
    kernarg = struct.pack("<QxxxxxxxxQxxxxxxxxi", 0xDEAD0000, 0xBEEF0000, -7)  # aiter 16-byte slots
    hip.run_packed(b"\x7fELFxyz", "fa_fwd", (3, 2), (512,), kernarg, 160 * 1024, runtime=rt)
    assert fake.calls == ["hipInit", "hipDeviceGetAttribute", "hipModuleLoadData", "hipModuleGetFunction",
                          "hipStreamCreate", "hipModuleLaunchKernel", "hipStreamSynchronize"]
    assert fake.image == b"\x7fELF" and fake.fn_name == b"fa_fwd"
    got = fake.launched
    assert got["grid"] == (3, 2, 1) and got["block"] == (512, 1, 1) and got["lds"] == 160 * 1024
    assert got["kernarg"] == kernarg and got["fn"] == 0x2000 and got["stream"] == 0x3000


def test_lds_larger_than_device_is_refused():
    rt = hip.HipRuntime(lib=FakeHip(lds_limit=65536))
    with pytest.raises(hip.HipError, match="needs 98304 bytes of LDS but the device offers 65536"):
        hip.run_packed(b"\x7fELF", "k", (1,), (64,), b"", 98304, runtime=rt)


def test_hip_errors_are_one_sentence():
    rt = hip.HipRuntime(lib=FakeHip(fail={"hipModuleLoadData"}))
    with pytest.raises(hip.HipError, match=r"hipModuleLoadData failed with HIP error 100: hipErrorInvalidValue"):
        rt.load_module(b"\x7fELF")


def test_real_gpu_launch():
    ok, why = hip.available()
    if not ok:
        pytest.skip(f"no AMD GPU here: {why}")
    from flyasm import Kernel, s, v
    k = Kernel("fill7", block=64)
    out = k.arg("out", "ptr")
    k.s_load_dwordx2(s[4:5], k.kernarg_ptr, out.offset)
    k.v_lshlrev_b32(v[1], 2, v[0])
    k.v_mov_b32(v[2], 7)
    k.s_waitcnt(lgkmcnt=0)
    k.global_store_dword(v[1], v[2], s[4:5])
    k.s_endpgm()
    rt = hip.HipRuntime()
    buf = rt.malloc(256)
    hip.run_packed(k.build().co, "fill7", (1,), (64,), struct.pack("<Q8x", buf), 0, runtime=rt)
    assert struct.unpack("<64i", rt.from_device(buf, 256)) == (7,) * 64
    rt.free(buf)


# ---- launch(..., backend="hip") through the fake library ------------------------------------------
class FakeHipMem(FakeHip):
    """FakeHip with device memory: hipMalloc hands out fake addresses backed by bytearrays, and
    the 'kernel' writes out[i] = x[i] * alpha + n (f32) by reading its own kernarg bytes."""

    def __init__(self, layout_offsets, **kw):
        super().__init__(**kw)
        self.dev = {}
        self.next = 0x7000_0000_0000
        self.offs = layout_offsets      # (out, x, n, alpha) byte offsets in the kernarg segment

    def hipMalloc(self, p, nbytes):
        ctypes.cast(p, ctypes.POINTER(ctypes.c_void_p)).contents.value = self.next
        self.dev[self.next] = bytearray(nbytes)
        self.next += (nbytes + 0xFFFF) & ~0xFFFF
        return self._rec("hipMalloc")

    def hipFree(self, ptr):
        del self.dev[ptr.value]
        return self._rec("hipFree")

    def hipMemcpy(self, dst, src, nbytes, kind):
        if kind == hip.HIP_MEMCPY_H2D:
            self.dev[dst.value][:nbytes] = ctypes.string_at(src.value, nbytes)
        else:
            assert kind == hip.HIP_MEMCPY_D2H
            ctypes.memmove(dst.value, bytes(self.dev[src.value][:nbytes]), nbytes)
        return self._rec(f"hipMemcpy{kind}")

    def hipModuleLaunchKernel(self, *a):
        rc = super().hipModuleLaunchKernel(*a)
        ka = self.launched["kernarg"]
        o_out, o_x, o_n, o_alpha = self.offs
        out, x = (struct.unpack_from("<Q", ka, o)[0] for o in (o_out, o_x))
        n, = struct.unpack_from("<i", ka, o_n)
        alpha, = struct.unpack_from("<f", ka, o_alpha)
        if x in self.dev and out in self.dev:
            xs = np.frombuffer(bytes(self.dev[x]), np.float32)
            self.dev[out][:] = (xs * np.float32(alpha) + np.float32(n)).astype(np.float32).tobytes()
        return rc


import numpy as np  # noqa: E402


def _args_kernel(layout):
    from flyasm import Kernel, s, v
    k = Kernel(f"axpn_{layout}", block=64, arg_layout=layout)
    out = k.arg("out", "ptr")
    k.arg("x", "ptr")
    k.arg("n", "i32")
    k.arg("alpha", "f32")
    k.s_load_dwordx2(s[4:5], k.kernarg_ptr, out.offset)
    k.v_lshlrev_b32(v[1], 2, v[0])
    k.v_mov_b32(v[2], 7)
    k.s_waitcnt(lgkmcnt=0)
    k.global_store_dword(v[1], v[2], s[4:5])
    k.s_endpgm()
    return k


@pytest.mark.parametrize("layout,offsets,fmt", [("aiter", (0, 16, 32, 48), "<Q8xQ8xi12xf12x"),
                                                ("natural", (0, 8, 16, 20), "<QQif")])
def test_launch_hip_packs_args_and_copies_back(layout, offsets, fmt):
    from flyasm.codeobj.reader import read_code_object
    from flyasm.run import launch
    k = _args_kernel(layout)
    assert tuple(a.offset for a in k.args) == offsets
    co = k.build().co
    kd = read_code_object(co).kernel(k.name).descriptor
    fake = FakeHipMem(offsets)
    rt = hip.HipRuntime(lib=fake)
    rng = np.random.default_rng()
    x = rng.standard_normal(64).astype(np.float32)
    out = np.full(64, np.nan, np.float32)                  # poisoned
    n, alpha = int(rng.integers(-1000, 1000)), float(np.float32(rng.standard_normal()))
    r = launch(k, (3, 2), 64, out, x, n, alpha, backend="hip", runtime=rt)
    got = fake.launched
    assert got["grid"] == (3, 2, 1) and got["block"] == (64, 1, 1) and got["lds"] == 0   # grid in workgroups
    ka = got["kernarg"]
    assert ka == r.kernarg and len(ka) == max(struct.calcsize(fmt), kd.kernarg_size)
    p_out, p_x = struct.unpack_from("<Q", ka, offsets[0])[0], struct.unpack_from("<Q", ka, offsets[1])[0]
    assert p_out != p_x and p_out >= 0x7000_0000_0000 and p_x >= 0x7000_0000_0000
    assert ka[:struct.calcsize(fmt)] == struct.pack(fmt, p_out, p_x, n, alpha)
    assert not any(ka[struct.calcsize(fmt):])
    np.testing.assert_array_equal(out, x * np.float32(alpha) + np.float32(n))   # copied back into the caller's array
    assert fake.dev == {}                                   # every device buffer freed
    assert fake.calls.count("hipMalloc") == 2 and fake.calls.count(f"hipMemcpy{hip.HIP_MEMCPY_D2H}") == 2


def test_launch_hip_device_tensor_is_passed_by_pointer(monkeypatch):
    torch = pytest.importorskip("torch")
    import flyasm.run as run
    k = _args_kernel("natural")
    x = torch.randn(64)
    out = torch.full((64,), float("nan"))
    dev_like = {id(x)}
    monkeypatch.setattr(run, "_on_device", lambda v: id(v) in dev_like)   # x plays a ROCm tensor
    fake = FakeHipMem((0, 8, 16, 20))
    run.launch(k, 1, 64, out, x, 5, 0.5, backend="hip", runtime=hip.HipRuntime(lib=fake))
    assert struct.unpack_from("<Q", fake.launched["kernarg"], 8)[0] == x.data_ptr()
    assert fake.calls.count("hipMalloc") == 1          # only `out` got a device buffer
    assert torch.isnan(out).all()                      # the fake kernel could not see x: out keeps its copy


def test_launch_hip_checks_lds_against_device():
    from flyasm.run import launch
    k = _args_kernel("aiter")
    fake = FakeHipMem((0, 16, 32, 48), lds_limit=65536)
    x = np.ones(64, np.float32)
    with pytest.raises(hip.HipError, match="needs 98304 bytes of LDS but the device offers 65536"):
        launch(k, 1, 64, np.zeros(64, np.float32), x, 1, 1.0, backend="hip", lds=98304,
               runtime=hip.HipRuntime(lib=fake))
    assert fake.dev == {}                                  # buffers freed on the error path too
