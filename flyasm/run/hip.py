"""HIP backend: load a code object and launch it on an AMD GPU through libamdhip64 (ctypes).

The library is loaded lazily; on a machine without ROCm or without an AMD GPU, `available()`
says why and nothing else is touched. Kernel arguments arrive already packed (the same bytes the
emulator receives, from flyasm.run.args) and are passed with HIP_LAUNCH_PARAM_BUFFER_POINTER, as
aiter-style launchers do.

Constants (hip_runtime_api.h, ROCm 6): HIP_LAUNCH_PARAM_BUFFER_POINTER = 0x01,
HIP_LAUNCH_PARAM_BUFFER_SIZE = 0x02, HIP_LAUNCH_PARAM_END = 0x03; hipMemcpyHostToDevice = 1,
hipMemcpyDeviceToHost = 2; hipDeviceAttributeMaxSharedMemoryPerBlock = 74 (the enum is ordered
from hipDeviceAttributeCudaCompatibleBegin = 0; vLLM's csrc/cuda_utils_kernels.cu notes the 74).
Events (hip_runtime_api.h): hipEventCreate(hipEvent_t*), hipEventRecord(hipEvent_t, hipStream_t),
hipEventSynchronize(hipEvent_t), hipEventElapsedTime(float* ms, hipEvent_t start, hipEvent_t stop),
hipEventDestroy(hipEvent_t); the elapsed time is in milliseconds, measured on the device.
hipMemset(void* dst, int value, size_t sizeBytes) sets bytes.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
from dataclasses import dataclass

from ..errors import FlyasmError

HIP_LAUNCH_PARAM_BUFFER_POINTER = 0x01
HIP_LAUNCH_PARAM_BUFFER_SIZE = 0x02
HIP_LAUNCH_PARAM_END = 0x03
HIP_MEMCPY_H2D = 1
HIP_MEMCPY_D2H = 2
HIP_ATTR_MAX_SHARED_PER_BLOCK = 74
HIP_ATTR_WALL_CLOCK_RATE = 10017      # hipDeviceAttributeWallClockRate (hip_runtime_api.h's AMD-specific range)

_LIB_CANDIDATES = ("libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.7", "/opt/rocm/lib/libamdhip64.so")


class HipError(FlyasmError):
    """A HIP runtime call failed, or no AMD GPU is present."""


def _find_library() -> str | None:
    env = os.environ.get("FLYASM_HIP_LIB")
    if env:
        return env
    for name in _LIB_CANDIDATES:
        try:
            ctypes.CDLL(name)
            return name
        except OSError:
            continue
    return ctypes.util.find_library("amdhip64")


@dataclass
class Module:
    handle: ctypes.c_void_p
    image: ctypes.Array  # keep the code-object bytes alive while the module is loaded


class HipRuntime:
    """Thin ctypes wrapper. `lib` may be injected (tests pass a fake with the same functions)."""

    def __init__(self, lib=None):
        if lib is None:
            path = _find_library()
            if path is None:
                raise HipError("libamdhip64 was not found (install ROCm or set FLYASM_HIP_LIB)", find_loc=False)
            lib = ctypes.CDLL(path)
            self._declare(lib)
        self.lib = lib
        self._check(self.lib.hipInit(0), "hipInit")

    @staticmethod
    def _declare(lib) -> None:
        vp, sz, i, u = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_uint
        lib.hipGetErrorString.restype = ctypes.c_char_p
        lib.hipGetErrorString.argtypes = [i]
        lib.hipModuleLaunchKernel.argtypes = [vp, u, u, u, u, u, u, u, vp, ctypes.POINTER(vp), ctypes.POINTER(vp)]
        lib.hipModuleLoadData.argtypes = [ctypes.POINTER(vp), vp]
        lib.hipModuleGetFunction.argtypes = [ctypes.POINTER(vp), vp, ctypes.c_char_p]
        lib.hipMalloc.argtypes = [ctypes.POINTER(vp), sz]
        lib.hipMemcpy.argtypes = [vp, vp, sz, i]
        lib.hipMemset.argtypes = [vp, i, sz]
        lib.hipFree.argtypes = [vp]
        lib.hipDeviceGetAttribute.argtypes = [ctypes.POINTER(i), i, i]
        lib.hipStreamCreate.argtypes = [ctypes.POINTER(vp)]
        lib.hipStreamSynchronize.argtypes = [vp]
        lib.hipEventCreate.argtypes = [ctypes.POINTER(vp)]
        lib.hipEventRecord.argtypes = [vp, vp]
        lib.hipEventSynchronize.argtypes = [vp]
        lib.hipEventElapsedTime.argtypes = [ctypes.POINTER(ctypes.c_float), vp, vp]
        lib.hipEventDestroy.argtypes = [vp]

    def _check(self, err: int, what: str) -> None:
        if err != 0:
            msg = self.lib.hipGetErrorString(err)
            msg = msg.decode() if isinstance(msg, bytes) else str(msg)
            raise HipError(f"{what} failed with HIP error {err}: {msg}", find_loc=False)

    # ---- devices ---------------------------------------------------------------------------
    def device_count(self) -> int:
        n = ctypes.c_int(0)
        self._check(self.lib.hipGetDeviceCount(ctypes.byref(n)), "hipGetDeviceCount")
        return n.value

    def max_lds(self, device: int = 0) -> int:
        val = ctypes.c_int(0)
        self._check(self.lib.hipDeviceGetAttribute(ctypes.byref(val), HIP_ATTR_MAX_SHARED_PER_BLOCK, device),
                    "hipDeviceGetAttribute(MaxSharedMemoryPerBlock)")
        return val.value

    def wall_clock_khz(self, device: int = 0) -> int:
        """The fixed rate of the counter s_memrealtime reads (hipDeviceAttributeWallClockRate, kHz)."""
        val = ctypes.c_int(0)
        self._check(self.lib.hipDeviceGetAttribute(ctypes.byref(val), HIP_ATTR_WALL_CLOCK_RATE, device),
                    "hipDeviceGetAttribute(WallClockRate)")
        return val.value

    # ---- modules and launches --------------------------------------------------------------
    def load_module(self, co: bytes) -> Module:
        image = ctypes.create_string_buffer(co, len(co))
        handle = ctypes.c_void_p()
        self._check(self.lib.hipModuleLoadData(ctypes.byref(handle), ctypes.cast(image, ctypes.c_void_p)),
                    "hipModuleLoadData")
        return Module(handle, image)

    def get_function(self, module: Module, name: str) -> ctypes.c_void_p:
        fn = ctypes.c_void_p()
        self._check(self.lib.hipModuleGetFunction(ctypes.byref(fn), module.handle, name.encode()),
                    f"hipModuleGetFunction({name})")
        return fn

    def stream(self) -> ctypes.c_void_p:
        st = ctypes.c_void_p()
        self._check(self.lib.hipStreamCreate(ctypes.byref(st)), "hipStreamCreate")
        return st

    def launch(self, fn, grid: tuple, block: tuple, kernarg: bytes, lds: int = 0, stream=None) -> None:
        """hipModuleLaunchKernel with the packed kernel-argument buffer."""
        buf = ctypes.create_string_buffer(kernarg, max(len(kernarg), 1))
        size = ctypes.c_size_t(len(kernarg))
        extra = (ctypes.c_void_p * 5)(HIP_LAUNCH_PARAM_BUFFER_POINTER, ctypes.cast(buf, ctypes.c_void_p).value,
                                      HIP_LAUNCH_PARAM_BUFFER_SIZE, ctypes.cast(ctypes.pointer(size), ctypes.c_void_p).value,
                                      HIP_LAUNCH_PARAM_END)
        g = tuple(grid) + (1,) * (3 - len(grid))
        b = tuple(block) + (1,) * (3 - len(block))
        self._check(self.lib.hipModuleLaunchKernel(fn, g[0], g[1], g[2], b[0], b[1], b[2], lds,
                                                   stream, None, extra), "hipModuleLaunchKernel")

    def synchronize(self, stream=None) -> None:
        self._check(self.lib.hipStreamSynchronize(stream), "hipStreamSynchronize")

    # ---- events: device-side timing ------------------------------------------------------------
    def event(self) -> ctypes.c_void_p:
        ev = ctypes.c_void_p()
        self._check(self.lib.hipEventCreate(ctypes.byref(ev)), "hipEventCreate")
        return ev

    def record(self, event, stream=None) -> None:
        self._check(self.lib.hipEventRecord(event, stream), "hipEventRecord")

    def event_synchronize(self, event) -> None:
        self._check(self.lib.hipEventSynchronize(event), "hipEventSynchronize")

    def elapsed_ms(self, start, stop) -> float:
        """Device time between two recorded (and completed) events, in milliseconds."""
        ms = ctypes.c_float(0.0)
        self._check(self.lib.hipEventElapsedTime(ctypes.byref(ms), start, stop), "hipEventElapsedTime")
        return ms.value

    def destroy_event(self, event) -> None:
        self._check(self.lib.hipEventDestroy(event), "hipEventDestroy")

    # ---- memory ----------------------------------------------------------------------------
    def malloc(self, nbytes: int) -> int:
        p = ctypes.c_void_p()
        self._check(self.lib.hipMalloc(ctypes.byref(p), max(nbytes, 1)), "hipMalloc")
        return p.value

    def free(self, ptr: int) -> None:
        self._check(self.lib.hipFree(ctypes.c_void_p(ptr)), "hipFree")

    def to_device(self, ptr: int, data: bytes) -> None:
        src = ctypes.create_string_buffer(data, len(data))
        self._check(self.lib.hipMemcpy(ctypes.c_void_p(ptr), ctypes.cast(src, ctypes.c_void_p), len(data),
                                       HIP_MEMCPY_H2D), "hipMemcpy(HtoD)")

    def memset(self, ptr: int, byte: int, nbytes: int) -> None:
        """Every byte of [ptr, ptr + nbytes) set to `byte` on the device (no host buffer of that size)."""
        self._check(self.lib.hipMemset(ctypes.c_void_p(ptr), byte, nbytes), "hipMemset")

    def from_device(self, ptr: int, nbytes: int) -> bytes:
        dst = ctypes.create_string_buffer(nbytes)
        self._check(self.lib.hipMemcpy(ctypes.cast(dst, ctypes.c_void_p), ctypes.c_void_p(ptr), nbytes,
                                       HIP_MEMCPY_D2H), "hipMemcpy(DtoH)")
        return dst.raw


def available() -> tuple[bool, str]:
    """Whether a HIP launch can work here, and if not, why (for test skips and the CLI)."""
    try:
        rt = HipRuntime()
        n = rt.device_count()
    except HipError as e:
        return False, e.message
    except OSError as e:
        return False, f"libamdhip64 could not be loaded: {e}"
    if n == 0:
        return False, "HIP found no AMD GPU on this machine"
    return True, f"{n} AMD GPU(s)"


def run_packed(co: bytes, kernel: str, grid, block, kernarg: bytes, lds: int, runtime: HipRuntime | None = None,
               dynamic_lds: int | None = None):
    """Load `co`, check LDS against the device, launch `kernel` once and wait for it.
    `grid` counts workgroups (hipModuleLaunchKernel's gridDim). `lds` is the workgroup's whole LDS
    (checked against the device); `dynamic_lds` the part passed as sharedMemBytes (default: lds)."""
    rt = runtime or HipRuntime()
    limit = rt.max_lds()
    if lds > limit:
        raise HipError(f"kernel {kernel} needs {lds} bytes of LDS but the device offers {limit} per workgroup",
                       find_loc=False)
    mod = rt.load_module(co)
    fn = rt.get_function(mod, kernel)
    st = rt.stream()
    rt.launch(fn, grid, block, kernarg, lds if dynamic_lds is None else dynamic_lds, st)
    rt.synchronize(st)
    return rt
