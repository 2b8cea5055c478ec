"""The sweep's perf ranker (`flyasm sweep --model perf`): one variant through the CU timing model.

A grid file's workload(**params) gives the launch the variant is priced on under the key "launch":
a dict of perf.predict() arguments (grid, block, kernarg, buffers and optionally trace_grid,
loop_scale, dram_bytes, lds, tile_axis, wg_map, probe), or a callable taking the built Kernel and returning that
dict (for kernarg bytes that depend on the kernel's argument offsets). With `probe` (the real launch's kernarg and
buffers) the variant is priced as perf.predict prices a probed launch: its reads placed in the L2/MALL/HBM and
the device's HBM queue; without it every read waits vmem_latency and stores their CU's share of HBM."""
from __future__ import annotations

from .model import PerfError, predict

_KEYS = {"grid", "block", "kernarg", "buffers", "trace_grid", "loop_scale", "dram_bytes", "lds", "tile_axis", "wg_map",
         "probe"}


def sweep_predict(kernel, workload: dict | None, co: bytes | None = None) -> dict:
    """Row fields of flyasm.sweep for `kernel` (a flyasm Kernel; `co` its code object when the caller
    has built it already): predicted µs and TFLOPS at the workload's FLOPs, the longest sampled
    workgroup's cycles and the mean MFMA busy fraction of its SIMDs."""
    spec = (workload or {}).get("launch")
    if spec is None:
        raise PerfError("the perf model needs the launch: the grid file's workload() returns no 'launch' "
                        "(grid, block, kernarg, buffers ...)")
    spec = spec(kernel) if callable(spec) else spec
    extra = set(spec) - _KEYS
    if extra or not {"grid", "block", "kernarg"} <= set(spec):
        raise PerfError(f"workload()['launch'] takes grid, block, kernarg and optionally "
                        f"{', '.join(sorted(_KEYS - {'grid', 'block', 'kernarg'}))}; got {', '.join(sorted(spec))}")
    co = co if co is not None else kernel.build(check=False).co
    p = predict(co, kernel=kernel.name, flops=(workload or {}).get("flops"), locs=[i.loc for i in kernel.stream],
                **spec)
    simd = list(p.simd.values())
    util = sum(s["mfma"] for s in simd) / len(simd) if simd else 0.0
    return {"loop_cycles": int(max(p.samples.values())), "mfma_util": util, "flops_per_cycle": None,
            "pred_us": p.us, "pred_tflops": p.tflops}
