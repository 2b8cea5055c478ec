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
