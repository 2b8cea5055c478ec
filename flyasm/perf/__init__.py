"""Timing model of gfx950: emulator-recorded wave streams drive a cycle-level CU model.

trace.py      record each wave's executed stream in the emulator (opt-in Machine recorder)
capture.py    run a launch's sampled workgroups with the recorder; cache streams by content
cu.py         the cycle-level CU model (SIMDs, ports, MFMA pipe, LDS, VMEM, waits, barriers)
model.py      samples -> workgroup durations -> dispatch over the device -> microseconds
params.py     every constant: documented (cited), assumed (labelled) or fitted
calibrate.py  fit the free constants on measured rows; error and rank statistics
report.py     text report: time, TFLOPS, per-SIMD utilisation, stall table with .loc lines
cli.py        `flyasm perf`
sweep.py      `flyasm sweep --model perf`: sweep_predict(kernel, workload)
"""
from .model import PerfError, Prediction, predict
from .sweep import sweep_predict

__all__ = ["predict", "Prediction", "PerfError", "sweep_predict"]
