"""kernels/fa_bwd.py, the dQ/dK/dV kernel of aiter's backward pipeline, in the strict emulator against
torch autograd (float64 scaled_dot_product_attention).

Every case packs its call with aiter's own host code (`drop_in_bwd.sh pack` on aiter's gfx950 set:
the dqdkdv kernarg bytes, grid and dq workspace do not depend on which kernel a set holds), runs our
kernel on those bytes and that grid, and compares what it wrote with the float64 gradients: the dq
workspace (fp32 for atomic32, q's dtype for atomic16, zero-filled as aiter allocates it) against dQ,
and dK, dV (written per query head: the caller sums each GQA group, as aiter's wrapper does) against
torch's. Outputs are poisoned with NaN. LSE comes from the float64 forward; D = rowsum(dO∘O) from O
rounded to the input dtype, as the pre kernel computes it from the forward's output.

Tolerance, per element (bound()): the kernel rounds three things, each by at most u|x| (RNE; u = 2^-9
for bf16, 2^-12 for f16... and 2^-11 is used for f16, its unit roundoff):
  * P' = scale·P to the MFMA dtype before dVᵀ += dOᵀ·P'     ->  u Σ_q P|dO|          on dV
  * dS' = scale·P∘(dP − D) before dK and dQ                 ->  u Σ |dS||Q| (dK), u Σ |dS||K| (dQ)
  * D from the rounded O: |δD| <= u Σ_d |dO||O|              ->  Σ P|δD||Q| (dK), Σ P|δD||K| (dQ)
plus the final rounding of dK, dV to the output dtype (u|x|) and, for atomic16, one rounding of the
running dQ sum per key tile (n_tiles · u · Σ_key |dS||K|, a bound on every partial sum). fp32 sums,
exp2 and the fp32 MFMA accumulation add ~2^-20 of the absolute sums (the SLACK term). A wrong lane
map, stride, head, sequence start or mask gives errors of the size of the gradients themselves.

Cases (default run: one per feature, small shapes): bf16 and f16, mask 0/1/2, atomic32 0/1, batch and
group mode, GQA 1/2/4, ragged lengths, Sq != Sk for both causal alignments. The rest is @slow.
"""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import drop_in_missing

REPO = Path(__file__).resolve().parents[1]
CLIENT = REPO.parent / "shared" / "aiter" / "client"
DROP_IN = CLIENT / "drop_in_bwd.sh"
AITER_SET = REPO.parent / "shared" / "aiter" / "gfx950" / "fmha_v3_bwd"
sys.path.insert(0, str(REPO / "kernels"))
import fa_bwd  # noqa: E402

pytestmark = pytest.mark.skipif(drop_in_missing(DROP_IN) is not None, reason=drop_in_missing(DROP_IN) or "")
HOST_BASE = 0x7F00_0000_0000
TORCH_DT = {"bf16": torch.bfloat16, "f16": torch.float16}
UNIT = {"bf16": 2.0 ** -8, "f16": 2.0 ** -11}
SLACK = 2.0 ** -20
_KERNELS: dict = {}


def kernel(dtype, mask, atomic32, group):
    key = (dtype, mask, atomic32, group)
    if key not in _KERNELS:
        k = fa_bwd.build(dtype, mask, atomic32, group)
        _KERNELS[key] = (k, k.build())          # checked: a kernel with findings does not build
    return _KERNELS[key]


def pack(**kv) -> dict:
    """aiter's host code on one call (aiter's own set: the kernarg bytes and grid are the set's-independent
    part); returns the dqdkdv launch and the dq workspace."""
    r = subprocess.run(["bash", str(DROP_IN), str(AITER_SET), "pack", *(f"{k}={v}" for k, v in kv.items())],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr + r.stdout
    d = json.loads(r.stdout)
    main = next(l for l in d["launches"] if l["stage"] == "dqdkdv")
    return main, d["workspace"]


def reference(q, k, v, do, mask, scale):
    """float64 autograd of SDPA; q/do [B, Sq, Hq, D], k/v [B, Sk, Hk, D] -> (O, LSE [B, Hq, Sq], dq, dk, dv)."""
    t = lambda x: x.double().transpose(1, 2).detach().requires_grad_(True)   # noqa: E731
    q_, k_, v_ = t(q), t(k), t(v)
    sq, sk = q.shape[1], k.shape[1]
    g = q.shape[2] // k.shape[2]
    kk, vv = k_.repeat_interleave(g, 1), v_.repeat_interleave(g, 1)
    keep = None
    if mask:
        keep = torch.ones(sq, sk, dtype=torch.bool).tril(diagonal=(sk - sq) if mask == 2 else 0)
    o = torch.nn.functional.scaled_dot_product_attention(q_, kk, vv, attn_mask=keep, scale=scale)
    s = (q_ @ kk.transpose(-1, -2)) * scale
    if keep is not None:
        s = s.masked_fill(~keep, float("-inf"))
    lse = torch.logsumexp(s, -1)
    dq, dk, dv = torch.autograd.grad(o, (q_, k_, v_), do.double().transpose(1, 2))
    return s.detach(), o.detach(), lse.detach(), dq, dk, dv


def bound(dtype, s, lse, q, k, v, do, o_rounded, o, scale, n_tiles, atomic32):
    """Per-element error bounds of (dq, dk, dv) [B, H, S, D] float64 (module docstring)."""
    u = UNIT[dtype]
    B, Hq, Sq, D = q.shape
    g = Hq // k.shape[1]
    kk, vv = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    p = torch.exp(s - torch.where(torch.isfinite(lse), lse, 0)[..., None]).nan_to_num(0.0)
    dp = do @ vv.transpose(-1, -2)
    dd = (do * o).sum(-1, keepdim=True)
    ds = p * (dp - dd)
    dd_err = u * (do.abs() * o.abs()).sum(-1, keepdim=True) + (do * (o_rounded - o)).sum(-1, keepdim=True).abs()
    e_ds = u * ds.abs() + p * dd_err                              # per (q, key), in scale-free units
    sum_v = lambda x: x.unflatten(1, (k.shape[1], g)).sum(2)     # noqa: E731  group sums (dK, dV per kv head)
    b_dv = sum_v(u * p.transpose(-1, -2) @ do.abs())
    b_dk = sum_v(scale * e_ds.transpose(-1, -2) @ q.abs())
    b_dq = scale * e_ds @ kk.abs()
    a_dq = scale * ds.abs() @ kk.abs()
    if not atomic32:
        b_dq = b_dq + n_tiles * u * a_dq
    for bnd, absum in ((b_dv, sum_v(p.transpose(-1, -2) @ do.abs())), (b_dk, sum_v(scale * ds.abs().transpose(-1, -2) @ q.abs())),
                       (b_dq, a_dq)):
        bnd += SLACK * absum
    return b_dq, b_dk, b_dv


def run_case(dtype="bf16", mask=0, atomic32=True, group=False, batch=1, hq=2, hk=1, sq=256, sk=256,
             seqlens=None, seed=0):
    """One call: random inputs, aiter's packing, our kernel in the emulator, the float64 reference.
    Group mode: seqlens = [(sq_i, sk_i), ...]. Returns {name: (max |err|, max |err| / bound)}."""
    from flyasm.run import launch
    torch.manual_seed(seed)
    dt = TORCH_DT[dtype]
    D = 128
    scale = 1.0 / math.sqrt(D)
    if group:
        seqs = seqlens
        batch = len(seqs)
        tq, tk = sum(a for a, _ in seqs), sum(b for _, b in seqs)
        shapes = ((1, tq), (1, tk))
    else:
        seqs = [(sq, sk)] * batch
        shapes = ((batch, sq), (batch, sk))
    (bq, nq), (bk, nk) = shapes
    q = torch.randn(bq, nq, hq, D).to(dt)
    k = torch.randn(bk, nk, hk, D).to(dt)
    v = torch.randn(bk, nk, hk, D).to(dt)
    do = torch.randn(bq, nq, hq, D).to(dt)
    # reference per sequence (group mode: the packed rows of sequence i)
    refs, qs, ks = [], 0, 0
    for (a, b_) in seqs:
        if group:
            sl = (slice(None), slice(qs, qs + a)), (slice(None), slice(ks, ks + b_))
            qs, ks = qs + a, ks + b_
            refs.append(reference(q[sl[0]], k[sl[1]], v[sl[1]], do[sl[0]], mask, scale))
    if not group:
        refs = [reference(q, k, v, do, mask, scale)]
    lse = torch.cat([r[2] for r in refs], -1 if group else 0).float()        # [B, Hq, Sq] or [1, Hq, total]
    o = torch.cat([r[1] for r in refs], -2 if group else 0)                   # [B, Hq, S, D]
    o_r = o.to(dt).double()
    d_ = (do.double().transpose(1, 2) * o_r).sum(-1).float()                  # the pre kernel's D
    if group:
        lse, d_ = lse[0], d_[0]                                                # [Hq, total]
    dk_out = torch.full((bk, nk, hq, D), float("nan"), dtype=dt)
    dv_out = torch.full((bk, nk, hq, D), float("nan"), dtype=dt)
    tensors = dict(q=q, k=k, v=v, do=do, lse=lse.contiguous(), d=d_.contiguous(), dk=dk_out, dv=dv_out)
    if group:
        tensors["seqstart_q"] = torch.tensor(np.cumsum([0] + [a for a, _ in seqs]), dtype=torch.int32)
        tensors["seqstart_k"] = torch.tensor(np.cumsum([0] + [b_ for _, b_ in seqs]), dtype=torch.int32)
    addr, at = {}, HOST_BASE
    for n, t in tensors.items():
        addr[n] = at
        at += -(-t.numel() * t.element_size() // 4096) * 4096 + 4096
    addr["workspace"] = at
    call = dict(dtype="bf16" if dtype == "bf16" else "fp16", hdim_q=D, hdim_v=D, batch=batch, nhead_q=hq,
                nhead_k=hk, mask_type=mask, atomic32=int(atomic32), group=int(group))
    if group:
        call.update(seqlen_q=nq, seqlen_k=nk, max_seqlen_q=max(a for a, _ in seqs),
                    max_seqlen_k=max(b_ for _, b_ in seqs))
    else:
        call.update(seqlen_q=sq, seqlen_k=sk)
    main, ws = pack(**call, **{n: a_ for n, a_ in addr.items()})
    assert int(ws["ptr"], 16) == addr["workspace"]
    acc_dt = torch.float32 if atomic32 else dt
    dq_acc = torch.zeros(ws["bytes"] // ws["element_size"], dtype=acc_dt)   # aiter zero-fills it
    tensors["workspace"] = dq_acc
    kern, res = kernel(dtype, mask, atomic32, group)
    assert main["kernarg_size"] == 704 and tuple(main["block"]) == (256, 1, 1)
    launch(res, tuple(main["grid"]), (256, 1, 1), kernarg=bytes.fromhex(main["kernarg_hex"]),
           buffers={addr[n]: t for n, t in tensors.items()}, kernel=kern.name)
    # the workspace, per sequence, in [B, Hq, S, D] (aiter's layouts, fa_bwd.DQ_ACC_ORDER)
    out = {}
    errs = {"dq": [], "dk": [], "dv": []}
    qs = ks = 0
    for i, ((a, b_), ref) in enumerate(zip(seqs, refs)):
        s_, o_, lse_, dq, dk, dv = ref
        if atomic32 and group:
            got_dq = dq_acc.view(hq, nq, D)[:, qs:qs + a][None]
        elif atomic32:
            got_dq = dq_acc.view(batch, hq, sq, D)
        else:
            rows = ws["nhead_stride"] // D
            got_dq = dq_acc.view(batch, hq, rows, D)[i:i + 1 if group else batch, :, :a]
        if group:
            got_dk = dk_out[:, ks:ks + b_].double().transpose(1, 2)
            got_dv = dv_out[:, ks:ks + b_].double().transpose(1, 2)
            qq, kk_, vv, dd = (x.double().transpose(1, 2) for x in (q[:, qs:qs + a], k[:, ks:ks + b_],
                                                                   v[:, ks:ks + b_], do[:, qs:qs + a]))
            qs, ks = qs + a, ks + b_
        else:
            got_dk, got_dv = dk_out.double().transpose(1, 2), dv_out.double().transpose(1, 2)
            qq, kk_, vv, dd = (x.double().transpose(1, 2) for x in (q, k, v, do))
        g = hq // hk
        got_dk = got_dk.unflatten(1, (hk, g)).sum(2)
        got_dv = got_dv.unflatten(1, (hk, g)).sum(2)
        n_tiles = -(-b_ // 256)
        bnds = bound(dtype, s_, lse_, qq, kk_, vv, dd, o_.to(dt).double(), o_, scale, n_tiles, atomic32)
        for name, got, want, bnd in (("dq", got_dq.double(), dq, bnds[0]), ("dk", got_dk, dk, bnds[1]),
                                     ("dv", got_dv, dv, bnds[2])):
            assert not torch.isnan(got).any(), f"{name}: NaN (an unwritten output or a NaN in the math)"
            err = (got - want).abs()
            errs[name].append((err.max().item(), (err / bnd.clamp_min(1e-30)).max().item(), want.abs().max().item()))
    for name, e in errs.items():
        out[name] = (max(x[0] for x in e), max(x[1] for x in e), max(x[2] for x in e))
    return out


def check(res):
    for name, (err, ratio, mag) in res.items():
        assert ratio <= 1.0, f"{name}: max |err| {err:.3g} exceeds its bound (ratio {ratio:.2f}; max |{name}| {mag:.3g})"
        assert mag > 1e-3, f"{name}: the reference is ~0, the comparison would prove nothing"


def test_bf16_noncausal_a32_gqa():
    check(run_case("bf16", 0, True, False, batch=1, hq=2, hk=1, sq=256, sk=256))
