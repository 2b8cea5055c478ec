"""kernels/fa_bwd.py, the dQ/dK/dV kernel of aiter's backward pipeline, in the strict emulator against
torch autograd (float64 scaled_dot_product_attention).

Every case packs its call with aiter's own host code (`drop_in_bwd.sh pack` on aiter's gfx950 set:
the dqdkdv kernarg bytes, grid and dq workspace do not depend on which kernel a set holds), runs our
kernel on those bytes and that grid, and compares what it wrote with the float64 gradients: the dq
workspace (fp32 for atomic32, q's dtype for atomic16, zero-filled as aiter allocates it) against dQ,
and dK, dV (written per query head: the caller sums each GQA group, as aiter's wrapper does) against
torch's. Outputs are poisoned with NaN. LSE comes from the float64 forward; D = rowsum(dO∘O) from O
rounded to the input dtype, as the pre kernel computes it from the forward's output.

Tolerance, per element (bound()): the kernel rounds three things, each by at most u|x| (round to nearest
even; unit roundoff u = 2^-8 for bf16, 2^-11 for f16, plus 2^-25 absolute below f16's smallest normal):
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
        k.fold = dtype == "bf16"                # fa_bwd's default fold_scale (the bound depends on it)
        _KERNELS[key] = (k, k.build())          # checked: a kernel with findings does not build
    return _KERNELS[key]


def pack(**kv) -> dict:
    """aiter's host code on one call (aiter's own set: the kernarg bytes and grid are the set's-independent
    part); returns the dqdkdv launch and the dq workspace."""
    r = subprocess.run(["bash", str(DROP_IN), str(AITER_SET), "pack", *(f"{k}={v}" for k, v in kv.items())],
                       capture_output=True, text=True, timeout=600)
    # the script also checks that the set holds the .co files it names; ../shared holds only some of
    # aiter's, which does not change the bytes (exit 1 with one sentence per missing file, then the JSON)
    problems = [ln for ln in r.stdout.splitlines() if ln.startswith("drop_in_bwd.sh:")]
    assert r.returncode in (0, 1) and all("which is not in SET_DIR" in ln for ln in problems), r.stderr + r.stdout
    d = json.loads(r.stdout[r.stdout.index("\n{") if problems else 0:])
    assert d["fmha_v3_bwd_returned"] == 0, "aiter's host refused the call"
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


def bound(dtype, s, lse, q, k, v, do, o_rounded, o, scale, n_tiles, atomic32, fold):
    """Per-element error bounds of (dq, dk, dv) [B, H, S, D] float64 (module docstring)."""
    u = UNIT[dtype]
    # f16 rounds values below 2^-14 on a 2^-24 grid: an absolute error of up to 2^-25 per rounded P or
    # dS (in the units of the unscaled P when the kernel rounds scale·P)
    t = (2.0 ** -25 / (scale if fold else 1.0)) if dtype == "f16" else 0.0
    t_out = 2.0 ** -25 if dtype == "f16" else 0.0                 # ... and so does every f16 output value
    B, Hq, Sq, D = q.shape
    g = Hq // k.shape[1]
    kk, vv = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    p = torch.exp(s - torch.where(torch.isfinite(lse), lse, 0)[..., None]).nan_to_num(0.0)
    dp = do @ vv.transpose(-1, -2)
    dd = (do * o).sum(-1, keepdim=True)
    ds = p * (dp - dd)
    dd_err = u * (do.abs() * o.abs()).sum(-1, keepdim=True) + (do * (o_rounded - o)).sum(-1, keepdim=True).abs()
    live = (p > 0).double()                                        # masked elements are exact zeros
    e_ds = u * ds.abs() + t * live + p * dd_err                   # per (q, key), in scale-free units
    sum_v = lambda x: x.unflatten(1, (k.shape[1], g)).sum(2)     # noqa: E731  group sums (dK, dV per kv head)
    # + the rounding of each query head's dK, dV to the output dtype (before the caller's group sum)
    b_dv = sum_v((u * p + t * live).transpose(-1, -2) @ do.abs() + u * (p.transpose(-1, -2) @ do).abs() + t_out)
    b_dk = sum_v(scale * e_ds.transpose(-1, -2) @ q.abs() + u * scale * (ds.transpose(-1, -2) @ q).abs() + t_out)
    b_dq = scale * e_ds @ kk.abs()
    a_dq = scale * ds.abs() @ kk.abs()
    if not atomic32:
        b_dq = b_dq + n_tiles * (u * a_dq + t_out)
    for bnd, absum in ((b_dv, sum_v(p.transpose(-1, -2) @ do.abs())), (b_dk, sum_v(scale * ds.abs().transpose(-1, -2) @ q.abs())),
                       (b_dq, a_dq)):
        bnd += SLACK * absum
    return b_dq, b_dk, b_dv


def run_case(dtype="bf16", mask=0, atomic32=True, group=False, batch=1, hq=2, hk=1, sq=256, sk=256,
             seqlens=None, seed=0) -> dict:
    """One call: random inputs, aiter's packing, our kernel in the emulator. Group mode: seqlens =
    [(sq_i, sk_i), ...]. Returns the case (inputs, outputs, the workspace) for compare()."""
    from flyasm.run import launch
    torch.manual_seed(seed)
    dt = TORCH_DT[dtype]
    D = 128
    if group:
        seqs, batch = list(seqlens), len(seqlens)
        (bq, nq), (bk, nk) = (1, sum(a for a, _ in seqs)), (1, sum(b for _, b in seqs))
    else:
        seqs = [(sq, sk)] * batch
        (bq, nq), (bk, nk) = (batch, sq), (batch, sk)
    q, do = (torch.randn(bq, nq, hq, D).to(dt) for _ in range(2))
    k, v = (torch.randn(bk, nk, hk, D).to(dt) for _ in range(2))
    case = dict(dtype=dtype, mask=mask, atomic32=atomic32, group=group, hq=hq, hk=hk, seqs=seqs,
                q=q, k=k, v=v, do=do, scale=1.0 / math.sqrt(D))
    # LSE and D as the forward and the pre kernel give them: LSE in float32, D from O in the input dtype
    lse, d_ = [], []
    for sl_q, sl_k in slices(case):
        _, o, l_, *_ = reference(q[sl_q], k[sl_k], v[sl_k], do[sl_q], mask, case["scale"])
        lse.append(l_.float())
        d_.append((do[sl_q].double().transpose(1, 2) * o.to(dt).double()).sum(-1).float())
    lse, d_ = (torch.cat(x, -1)[0] if group else torch.cat(x, 0) for x in (lse, d_))   # [Hq, total] / [B, Hq, Sq]
    dk_out, dv_out = (torch.full((bk, nk, hq, D), float("nan"), dtype=dt) for _ in range(2))   # poisoned
    tensors = dict(q=q, k=k, v=v, do=do, lse=lse.contiguous(), d=d_.contiguous(), dk=dk_out, dv=dv_out)
    if group:
        tensors["seqstart_q"] = torch.tensor(np.cumsum([0] + [a for a, _ in seqs]), dtype=torch.int32)
        tensors["seqstart_k"] = torch.tensor(np.cumsum([0] + [b for _, b in seqs]), dtype=torch.int32)
    addr, at = {}, HOST_BASE
    for n, t in tensors.items():
        addr[n] = at
        at += -(-t.numel() * t.element_size() // 4096) * 4096 + 4096
    addr["workspace"] = at
    call = dict(dtype="bf16" if dtype == "bf16" else "fp16", hdim_q=D, hdim_v=D, batch=batch, nhead_q=hq,
                nhead_k=hk, mask_type=mask, atomic32=int(atomic32), group=int(group), seqlen_q=nq, seqlen_k=nk)
    if group:
        call.update(max_seqlen_q=max(a for a, _ in seqs), max_seqlen_k=max(b for _, b in seqs))
    main, ws = pack(**call, **addr)
    assert int(ws["ptr"], 16) == addr["workspace"] and ws["zero_init"]
    assert main["kernarg_size"] == 704 and tuple(main["block"]) == (256, 1, 1)
    dq_acc = torch.zeros(ws["bytes"] // ws["element_size"], dtype=torch.float32 if atomic32 else dt)
    tensors["workspace"] = dq_acc
    kern, res = kernel(dtype, mask, atomic32, group)
    launch(res, tuple(main["grid"]), (256, 1, 1), kernarg=bytes.fromhex(main["kernarg_hex"]),
           buffers={addr[n]: t for n, t in tensors.items()}, kernel=kern.name)
    case.update(dk_out=dk_out, dv_out=dv_out, dq_acc=dq_acc, ws=ws, fold=kern.fold, grid=tuple(main["grid"]))
    return case


def slices(case):
    """(query rows, key rows) of each sequence in the [B, S, H, D] tensors (group mode: packed rows)."""
    if not case["group"]:
        return [((slice(None), slice(None)), (slice(None), slice(None)))]
    out, qs, ks = [], 0, 0
    for a, b in case["seqs"]:
        out.append(((slice(None), slice(qs, qs + a)), (slice(None), slice(ks, ks + b))))
        qs, ks = qs + a, ks + b
    return out


def workspace_dq(case, i, sl_q):
    """Sequence i's rows of the dq workspace as [B, Hq, S, 128] (aiter's layouts, fa_bwd.DQ_ACC_ORDER)."""
    acc, ws, hq = case["dq_acc"], case["ws"], case["hq"]
    rows = ws["nhead_stride"] // 128
    if case["atomic32"] and case["group"]:                     # [Hq, total_q, 128]
        return acc.view(hq, rows, 128)[:, sl_q[1]][None]
    n = len(case["seqs"]) if case["group"] else case["q"].shape[0]
    full = acc.view(n, hq, rows, 128)
    a = case["seqs"][i][0]
    return full[i:i + 1, :, :a] if case["group"] else full[:, :, :a]


def compare(case, mask=None) -> dict:
    """{dq, dk, dv: (max |err|, max |err| / bound, max |reference|)} against the float64 reference for
    `mask` (default: the case's own)."""
    mask = case["mask"] if mask is None else mask
    dt, hq, hk, scale = TORCH_DT[case["dtype"]], case["hq"], case["hk"], case["scale"]
    errs = {"dq": [], "dk": [], "dv": []}
    for i, (sl_q, sl_k) in enumerate(slices(case)):
        q, k, v, do = case["q"][sl_q], case["k"][sl_k], case["v"][sl_k], case["do"][sl_q]
        s_, o_, lse_, dq, dk, dv = reference(q, k, v, do, mask, scale)
        got_dq = workspace_dq(case, i, sl_q).double()
        got_dk, got_dv = (case[n][sl_k].double().transpose(1, 2).unflatten(1, (hk, hq // hk)).sum(2)
                          for n in ("dk_out", "dv_out"))            # the caller's GQA group sum
        t = lambda x: x.double().transpose(1, 2)                    # noqa: E731
        n_tiles = -(-k.shape[1] // 256)
        bnds = bound(case["dtype"], s_, lse_, t(q), t(k), t(v), t(do), o_.to(dt).double(), o_, scale, n_tiles,
                     case["atomic32"], case["fold"])
        for name, got, want, bnd in (("dq", got_dq, dq, bnds[0]), ("dk", got_dk, dk, bnds[1]), ("dv", got_dv, dv, bnds[2])):
            assert not torch.isnan(got).any(), f"{name}: NaN (an unwritten output or a NaN in the math)"
            err = (got - want).abs()
            errs[name].append((err.max().item(), (err / bnd.clamp_min(1e-30)).max().item(), want.abs().max().item()))
    return {n: tuple(max(x[j] for x in e) for j in range(3)) for n, e in errs.items()}


def check(res):
    for name, (err, ratio, mag) in res.items():
        assert ratio <= 1.0, f"{name}: max |err| {err:.3g} exceeds its bound (ratio {ratio:.2f}; max |{name}| {mag:.3g})"
        assert mag > 1e-2, f"{name}: the reference is ~0, the comparison would prove nothing"


# ---- the default run: every feature once (mask 0/1/2, a32/a16, batch/group, GQA 1/2/4, bf16/f16) --------
def test_bf16_no_mask_a32_batch_gqa2_ragged():
    check(compare(run_case("bf16", 0, True, False, batch=2, hq=4, hk=2, sq=200, sk=300)))


def test_f16_bottom_right_a16_gqa4_rows_that_see_no_key():
    """Sq > Sk bottom-right: queries 0..99 see no key (LSE -inf: no contribution, no NaN). The same
    outputs against the top-left reference fail: the comparison sees the diagonal."""
    case = run_case("f16", 2, False, False, batch=1, hq=4, hk=1, sq=300, sk=200)
    check(compare(case))
    assert max(r for _, r, _ in compare(case, mask=1).values()) > 10


def test_bf16_top_left_a32_group_three_sequences():
    check(compare(run_case("bf16", 1, True, True, hq=2, hk=2, seqlens=[(100, 300), (37, 20), (260, 257)])))


# ---- @slow: every key of the 24, GQA 8, longer and more ragged shapes ----------------------------------
KEYS = [(dt, m, a32, g) for dt in ("bf16", "f16") for m in (0, 1, 2) for a32 in (True, False) for g in (False, True)]


@pytest.mark.slow
@pytest.mark.parametrize("dtype,mask,atomic32,group", KEYS,
                         ids=[f"{d}-mask{m}-{'a32' if a else 'a16'}-{'group' if g else 'batch'}" for d, m, a, g in KEYS])
def test_every_key(dtype, mask, atomic32, group):
    if group:
        case = run_case(dtype, mask, atomic32, True, hq=4, hk=2, seqlens=[(130, 290), (300, 64), (1, 1), (257, 520)])
    else:
        case = run_case(dtype, mask, atomic32, False, batch=2, hq=2, hk=1, sq=520 if mask == 2 else 190,
                        sk=190 if mask == 2 else 520, seed=mask)
    check(compare(case))


@pytest.mark.slow
def test_gqa8_both_alignments_long_rows():
    for mask in (1, 2):
        check(compare(run_case("bf16", mask, False, False, batch=1, hq=8, hk=1, sq=600, sk=800, seed=7)))
