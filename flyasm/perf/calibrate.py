"""Fit the few free constants of the timing model on measured rows, and score predictions.

A row is what the CU simulation gave (nominal-clock cycles, compulsory DRAM bytes) plus the
measured microseconds. The free constants (params.FITTED: launch overhead, sustained clock
fraction with every CU busy, achievable HBM fraction) enter after the simulation, so a fit never re-simulates. The
objective is the sum of squared log(pred/meas): relative error, symmetric in over/under.
The constants params.FITTED_SIMULATED (the placement's refetch_latency and wg_jitter, the L2's atomic
rate) act in the simulation; benchmarks/model_accuracy.py --fit-simulated searches a grid of them,
fitting these three for each point."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import params as P

# hbm_efficiency below 0.7 would not be a bandwidth any more but a stand-in for latency the CU model
# misses (thin GEMMs streaming B pull it there); 0.7-1.0 of peak is the physical range assumed.
BOUNDS = {"launch_us": (0.0, 20.0), "clock_derate": (0.3, 1.2), "hbm_efficiency": (0.7, 1.0)}


@dataclass
class Row:
    name: str            # how the row prints (table, kernel, shape)
    table: str
    cycles: float
    dram_bytes: float
    measured_us: float
    group: str = ""      # e.g. the seqlen, for cross-validation
    active: float = 1.0  # mean fraction of CU slots busy (model.GridRun.active: sets the clock)
    # the call's further launches (an attention backward is pre, main, post): (cycles, dram_bytes,
    # active) each, priced like the first and each paying one launch overhead
    extra: tuple = ()


def predict_us(rows, p: P.Params) -> np.ndarray:
    """Each launch: max(compute at its clock, compulsory DRAM traffic) + one launch overhead; a row's
    time is the sum over its call's launches."""
    first = [(r.cycles, r.dram_bytes, r.active) for r in rows]
    out = _launch_us(np.array(first, float).reshape(-1, 3), p)
    for i, r in enumerate(rows):
        if r.extra:
            out[i] += _launch_us(np.array(r.extra, float).reshape(-1, 3), p).sum()
    return out


def _launch_us(parts: np.ndarray, p: P.Params) -> np.ndarray:
    cyc, dram, act = parts.T
    return np.maximum(cyc / p.clock_mhz(act), dram / (p.hbm_tb_s * 1e6 * p.hbm_efficiency)) + p.launch_us


def fit(rows, base: P.Params | None = None) -> P.Params:
    from scipy.optimize import minimize
    base = base or P.Params()
    meas = np.log([r.measured_us for r in rows])
    names = list(P.FITTED)
    lo = np.array([BOUNDS[n][0] for n in names])
    hi = np.array([BOUNDS[n][1] for n in names])

    def unpack(x):
        return base.with_(**{n: float(v) for n, v in zip(names, np.clip(x, lo, hi))})

    def loss(x):
        return float(np.sum((np.log(predict_us(rows, unpack(x))) - meas) ** 2))

    x0 = np.array([getattr(base, n) for n in names], float)
    best = minimize(loss, x0, method="Nelder-Mead", options={"xatol": 1e-4, "fatol": 1e-8, "maxiter": 4000})
    return unpack(best.x)


def score(rows, pred: np.ndarray) -> dict:
    """median and 90th percentile of |pred - meas| / meas, Spearman rank correlation, worst rows."""
    from scipy.stats import spearmanr
    meas = np.array([r.measured_us for r in rows], float)
    err = np.abs(pred - meas) / meas
    rho = float(spearmanr(pred, meas).statistic) if len(rows) > 2 else float("nan")
    worst = [(rows[i].name, float(meas[i]), float(pred[i]), float(err[i])) for i in np.argsort(-err)[:5]]
    return {"n": len(rows), "median": float(np.median(err)), "p90": float(np.percentile(err, 90)),
            "spearman": rho, "worst": worst}
