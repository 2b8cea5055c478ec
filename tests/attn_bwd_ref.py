"""Attention backward reference and its error bounds, for the tests of aiter-convention backward
kernels (tests/test_drop_in_bwd.py, tests/test_fa_bwd_*.py, tests/test_attention_grad.py).

Layout: aiter's, one sequence at a time: q [S_q, H_q, D], k/v [S_k, H_k, D], do [S_q, H_q, D_v].
mask: 0 none, 1 top-left causal (query i sees keys 0..i), 2 bottom-right (keys 0..i + S_k - S_q).

`grads` differentiates torch's scaled_dot_product_attention in float64 (torch.autograd.grad) on the
inputs exactly as given (already rounded to bf16/fp16: that rounding is the test's input, not an
error), and computes the intermediate quantities of the backward (P, dP, D, dS) in float64 too.

`bounds` is a first-order bound on each element of |kernel - reference| for a kernel that follows
aiter's pipeline, from the roundings that pipeline must make (u = 2^-8 for bf16: 8 significant bits,
round to nearest even; 2^-11 for fp16; e = 2^-24 for fp32):
  * O arrives rounded (it is the forward's output in q's dtype): D = rowsum(dO∘O) is off by up to
    u·Σ|dO∘O| from the exact D the reference's autograd uses; the fp32 row sum adds D_v·e·Σ|dO∘O|.
  * lse arrives as fp32 (e·|lse|), P = exp2(s·scale·log2e − lse·log2e) in fp32: relative error
    ε_P = 8e·(1 + |s·scale| + |lse|) (argument rounding, exp2's ulp).
  * dV = Pᵀ·dO with P rounded to the MFMA's input type: u·Pᵀ|dO| (+ ε_P, + S_q·e for fp32 sums).
  * dP = dO·Vᵀ in fp32: D_v·e·|dO||V|ᵀ.  dS = P∘(dP − D): its error
    |δdS| ≤ P·(|δdP| + |δD|) + ε_P·|dS|, then dS rounded to the MFMA's input type: + u|dS|.
  * dK = scale·dSᵀ·Q, dQ = scale·dS·K: scale·|δdS|ᵀ|Q|, scale·|δdS||K| (+ S·e sums).
  * Outputs rounded to q's dtype: u·|x| each; dK/dV per query head are rounded, then the GQA sum
    (fp32, then rounded once): u·Σ_h|dK_h| + u·|dK|.
  * dQ accumulation: a32 adds fp32 partials atomically (any order: n·e of the partials' |sum|) and
    rounds once in dq_convert; a16 adds partials in q's dtype, rounding the running sum at every
    atomic add: up to `adds`·u·Σ|partials| (adds = the number of atomic adds into one dQ element: key
    blocks of the kernel that see the row), then the shuffle copies it.
fp16 also rounds values below its smallest normal (2^-14) onto a 2^-24 grid: every rounding to fp16
above (P, dS, the outputs, each a16 add) errs by up to SUB = 2^-25 absolute as well (bf16's subnormals
sit at 2^-133: nothing there), which matters where P is small (long rows) and for tiny outputs.
Second-order terms (u², u·e) are covered by a factor 1.01 and an absolute floor of 2^-30·max|x|.
"""
from __future__ import annotations

import math

import torch

U = {torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}
SUB = {torch.bfloat16: 0.0, torch.float16: 2.0 ** -25}    # absolute rounding error below the smallest normal
E32 = 2.0 ** -24


def visible(sq: int, sk: int, mask: int) -> torch.Tensor:
    """[S_q, S_k] bool: which keys each query sees."""
    if mask == 0:
        return torch.ones(sq, sk, dtype=torch.bool)
    return torch.ones(sq, sk, dtype=torch.bool).tril(diagonal=0 if mask == 1 else sk - sq)


def grads(q, k, v, do, scale: float, mask: int) -> dict:
    """Float64 reference for one sequence (layout above): o, lse [H_q, S_q], dq, dk/dv (summed over
    each GQA group) and dk_heads/dv_heads (per query head: [S_k, H_q, D]), and P, dP, D, dS
    [H_q, S_q, S_k]. Rows that see no key have o = 0, lse = -inf and zero gradients."""
    sq, hq, _ = q.shape
    sk, hk, _ = k.shape
    g = hq // hk
    keep = visible(sq, sk, mask)
    q64, k64, v64, do64 = (t.double().transpose(0, 1) for t in (q, k, v, do))       # [H, S, D]
    qa, ka, va = (t.clone().requires_grad_() for t in (q64, k64, v64))
    rows = keep.any(-1)
    # SDPA on the rows that see a key (a fully masked row is NaN in torch; the kernels give 0)
    o = torch.nn.functional.scaled_dot_product_attention(
        qa[:, rows], ka, va, attn_mask=keep[rows], scale=scale, enable_gqa=True)
    dq, dk, dv = torch.autograd.grad(o, (qa, ka, va), do64[:, rows])
    kk, vv = k64.repeat_interleave(g, 0), v64.repeat_interleave(g, 0)
    s = (q64 @ kk.transpose(-1, -2)) * scale
    s = s.masked_fill(~keep, -math.inf)
    lse = torch.logsumexp(s, -1)
    p = torch.exp(s - torch.where(torch.isfinite(lse), lse, 0)[..., None]).masked_fill(~keep, 0.0)
    out = p @ vv
    dp = do64 @ vv.transpose(-1, -2)
    d = (do64 * out).sum(-1)
    ds = p * (dp - d[..., None])
    dk_h = scale * ds.transpose(-1, -2) @ q64                       # per query head [H_q, S_k, D]
    dv_h = p.transpose(-1, -2) @ do64
    o_full = torch.zeros(hq, sq, v.shape[-1], dtype=torch.float64)
    o_full[:, rows] = o.detach()
    t = lambda x: x.transpose(0, 1)                                  # noqa: E731  [H, S, D] -> [S, H, D]
    return dict(o=t(o_full), lse=lse, dq=t(dq), dk=t(dk), dv=t(dv), dk_heads=t(dk_h), dv_heads=t(dv_h),
                dq_formula=t(scale * ds @ kk), p=p, dp=dp, d=d, ds=ds, s=s * 1.0)


def bounds(q, k, v, o, do, lse, ref: dict, scale: float, adds: int | None, o_err=None, lse_err=None) -> dict:
    """Per-element bounds on |kernel − ref| for dq, dk, dv, dk_heads, dv_heads, d (see the module
    docstring). o, lse: what the kernel is given (o rounded to q's dtype, lse fp32). adds: atomic adds
    into one dQ element for a16 (rounding in q's dtype each time); None for a32 (fp32 atomics).
    o_err [S_q, H_q, D_v], lse_err [H_q, S_q]: bounds on how far o and lse are from the exact ones
    when they come from a forward kernel rather than from rounding the exact ones (default u|O| and
    e|lse|): D moves by Σ|dO| o_err, every P by the relative lse_err."""
    u, sub = U[q.dtype], SUB[q.dtype]
    sq, hq, dqk = q.shape
    sk, hk, dvd = v.shape
    g = hq // hk
    q64, k64, v64, o64, do64 = (t.double().transpose(0, 1).abs() for t in (q, k, v, o, do))   # |.| [H, S, D]
    kk, vv = k64.repeat_interleave(g, 0), v64.repeat_interleave(g, 0)
    p, dp, d, ds = ref["p"], ref["dp"], ref["d"], ref["ds"]
    lse_abs = torch.where(torch.isfinite(lse), lse.double().abs(), 0)[..., None]
    s_abs = torch.where(torch.isfinite(ref["s"]), ref["s"].abs(), 0)
    eps_p = 8 * E32 * (1 + s_abs + lse_abs)                          # relative, per P element
    if lse_err is not None:
        eps_p = eps_p + lse_err.double()[..., None]
    sum_do_o = (do64 * o64).sum(-1)                                 # Σ|dO∘O| per row
    e_d = (u + dvd * E32) * sum_do_o                                # O's rounding, the fp32 row sum
    if o_err is not None:
        e_d = e_d + (do64 * o_err.double().transpose(0, 1)).sum(-1)
    e_dp = dvd * E32 * (do64 @ vv.transpose(-1, -2))
    live = (p > 0).double()                                          # masked elements are exact zeros
    e_ds = p * (e_dp + e_d[..., None]) + eps_p * ds.abs() + u * ds.abs() + sub * live
    pt_do = p.transpose(-1, -2) @ do64                               # Pᵀ|dO| [H, S_k, D_v]
    e_dv_h = (u + sq * E32) * pt_do + (eps_p * p + sub * live).transpose(-1, -2) @ do64
    e_dk_h = scale * (e_ds.transpose(-1, -2) @ q64) + sq * E32 * scale * (ds.abs().transpose(-1, -2) @ q64)
    part = scale * (ds.abs() @ kk)                                   # Σ|partials| of dQ [H, S_q, D]
    e_dq = scale * (e_ds @ kk) + (sk * E32 * part if adds is None else adds * (u * part + sub))
    t = lambda x: x.transpose(0, 1)                                  # noqa: E731
    dk_h, dv_h = ref["dk_heads"].abs(), ref["dv_heads"].abs()
    fold = lambda x: x.reshape(x.shape[0], hk, g, x.shape[-1]).sum(2)  # noqa: E731  [S, H_q, D] -> [S, H_k, D]

    def fin(err, val):
        return 1.01 * err + 2.0 ** -30 * max(float(val.abs().max()), 1.0)
    out = dict(d=fin(e_d, ref["d"]))
    out["dv_heads"] = fin(t(e_dv_h) + u * dv_h + sub, dv_h)
    out["dk_heads"] = fin(t(e_dk_h) + u * dk_h + sub, dk_h)
    out["dv"] = fin(fold(t(e_dv_h) + u * dv_h + sub) + u * ref["dv"].abs() + sub, ref["dv"])
    out["dk"] = fin(fold(t(e_dk_h) + u * dk_h + sub) + u * ref["dk"].abs() + sub, ref["dk"])
    out["dq"] = fin(t(e_dq) + u * ref["dq"].abs() + sub, ref["dq"])
    return out
