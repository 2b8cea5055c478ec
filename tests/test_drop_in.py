"""kernels/fa_fwd_set.py as a drop-in for aiter's gfx950 fmha_v3_fwd, judged by aiter's own host code.

`../shared/aiter/client/drop_in.sh SET lookup|pack` runs aiter's manifest codegen, compiles aiter's
host lookup / init_fmha_fwd_v3_args / get_grid_dim against the generated table, and prints what aiter
would launch: kernel, grid and the exact 656-byte kernarg. Here every case packs with it (pointer
values = the emulator's addresses of our buffers), runs the selected .co in the strict emulator on
those bytes and aiter's grid, and compares with a float32 torch reference (kernels/fa_fwd.reference:
bottom-right causal = CK mask 2; a query that sees no key -> O = 0, LSE = -inf).

Tolerances (the derivation of tests/test_fa_fwd.py, same arithmetic): bf16 unit roundoff u = 2^-9;
P is rounded to bf16 before P·V (u relative per term, averaging over keys), O to bf16 at the end
(u relative, |O| < 1 -> 0.002); exp2/rcp/fp32 MFMA sums add ~1e-6. Below 1e-2: atol = rtol = 1e-2.
LSE sees no rounding beyond the inputs (scale applied in fp32, fp32 sums, 1-ulp exp2/log2): 1e-4.
A wrong stride, head, sequence start, tile pairing or diagonal gives O(0.1..1) errors, and an
unwritten output stays NaN (outputs are poisoned).
"""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import drop_in_missing, fp8_attention_bound
import torch

REPO = Path(__file__).resolve().parents[1]
CLIENT = REPO.parent / "shared" / "aiter" / "client"
DROP_IN = CLIENT / "drop_in.sh"
sys.path.insert(0, str(REPO / "kernels"))
import fa_fwd  # noqa: E402


def _why_not() -> str | None:
    return drop_in_missing(DROP_IN)


# one worker builds the 16-kernel set once (under `-n 2 --dist loadgroup` each worker running a test of
# this module would otherwise build its own copy of the module fixture)
pytestmark = [pytest.mark.skipif(_why_not() is not None, reason=_why_not() or ""),
              pytest.mark.xdist_group("drop_in_set")]
ATOL = RTOL = 1e-2
LSE_ATOL = 1e-4


@pytest.fixture(scope="module")
def kset(tmp_path_factory):
    from flyasm.dispatch import build_set
    out = tmp_path_factory.mktemp("fa_set")
    build_set(f"{REPO / 'kernels' / 'fa_fwd_set.py'}:KEYS", out, jobs=2, progress=False)
    return out


def drop_in(set_dir, *args) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(DROP_IN), str(set_dir), *map(str, args)], capture_output=True, text=True,
                          timeout=600)


def pack(set_dir, **kv) -> dict:
    r = drop_in(set_dir, "pack", *(f"{k}={v}" for k, v in kv.items()))
    assert r.returncode == 0, r.stderr + r.stdout
    return json.loads(r.stdout)


def test_lookup_resolves_all_16_keys_to_our_kernels(kset):
    r = drop_in(kset, "lookup")
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 16, r.stdout + r.stderr
    want = {"mask 0 mode 0": "", "mask 2 mode 0": "_causal", "mask 0 mode 1": "_group", "mask 2 mode 1": "_causal_group"}
    for dims, hd, ts_qo in (("128/128", "hd128", 256), ("192/128", "hd192_hd128", 128)):
        for key, sfx in want.items():
            knl = f"fa_fwd_{hd}_bf16{sfx}"
            line = next(ln for ln in lines if ln.startswith(f"bf16 hdim {dims} {key} "))
            assert line.endswith(f"-> {knl} fmha_v3_fwd/{knl}.co ts_qo={ts_qo}"), line
    for d in (128, 256):
        for key, sfx in want.items():
            knl = f"fa_fwd_hd{d}_fp8bf16{sfx}"
            line = next(ln for ln in lines if ln.startswith(f"fp8bf16 hdim {d}/{d} {key} "))
            assert line.endswith(f"-> {knl} fmha_v3_fwd/{knl}.co ts_qo=256"), line
    assert r.returncode == 0, "every one of aiter's 16 keys resolves to one of our kernels"
    # no resolved key names a missing object or symbol (drop_in.sh prints those lines itself)
    assert "missing" not in r.stdout and "has no symbol" not in r.stdout


def test_codegen_rejects_nothing_and_extra_params_stay_out_of_the_csv(kset):
    from flyasm.dispatch import Dispatcher
    header = (kset / "fmha_fwd.csv").read_text().splitlines()[0]
    assert header == "dtype,hdim_q,hdim_v,mask,mode,bf16_cvt,ts_qo,ts_kv,knl_name,co_name"
    d = Dispatcher(kset)                                  # sidecar: build parameters for each row
    e = d.select(dtype="bf16", hdim_q=128, mask=2, mode=1)
    assert e.params == {"aiter_args": True, "causal": True, "dtype": "bf16", "group": True}
    assert e.block == (512,)
    e = d.select(dtype="bf16", hdim_q=192, hdim_v=128, mask=0, mode=0)
    assert e.params == {"aiter_args": True, "causal": False, "dtype": "bf16", "group": False, "head_dim": 192}
    assert e.block == (256,) and e.row["ts_qo"] == "128"
    e = d.select(dtype="fp8bf16", hdim_q=128, mask=2, mode=0)
    assert e.params == {"aiter_args": True, "causal": True, "dtype": "fp8bf16", "group": False}
    assert e.block == (512,) and e.row["ts_qo"] == "256"
    e = d.select(dtype="fp8bf16", hdim_q=256, hdim_v=256, mask=0, mode=1)
    assert e.params == {"aiter_args": True, "causal": False, "dtype": "fp8bf16", "group": True, "head_dim": 256}
    assert e.block == (512,) and e.row["ts_qo"] == "256"


# ---- running aiter's bytes in the emulator ------------------------------------------------------
HOST_BASE = 0x7F00_0000_0000                              # where a host allocator might have put them


def aiter_block(hdim_q: int, hdim_v: int) -> int:
    """aiter's workgroup size for a call (client/aiter_src/csrc/mha_fwd.cu, fmha_fwd_v3: bdx);
    drop_in.sh pack prints the grid but not this."""
    return 256 if (hdim_q, hdim_v) == (192, 128) else 512


def run_aiter_call(set_dir, tensors: dict, **call):
    """Give tensors (name -> torch tensor) host addresses, let aiter's host pack a call with them, run
    the kernel it picks on its grid and block through launch(kernarg=, buffers=) (each pointer is
    rebased onto the tensor's device copy, which is copied back); returns (pack json, {name: tensor after})."""
    from flyasm.codeobj.reader import read_code_object
    from flyasm.run import launch
    addr, at = {}, HOST_BASE
    for n, t in tensors.items():
        addr[n] = at
        at += -(-t.numel() * t.element_size() // 4096) * 4096 + 4096   # page-aligned, a gap between
    p = pack(set_dir, **call, **addr)
    ka = bytes.fromhex(p["kernarg_hex"])
    assert len(ka) == p["kernarg_size"] == 656
    co = (Path(set_dir) / p["co_name"].split("/")[-1]).read_bytes()
    bdx = aiter_block(int(call.get("hdim_q", 128)), int(call.get("hdim_v", 128)))
    md = next(kk.metadata for kk in read_code_object(co).kernels if kk.name == p["knl_name"])
    assert md[".max_flat_workgroup_size"] == bdx, "the kernel is built for aiter's workgroup size"
    after = {n: t.clone() for n, t in tensors.items()}
    launch(co, tuple(p["grid"]), (bdx, 1, 1), kernarg=ka, buffers={addr[n]: after[n] for n in tensors},
           kernel=p["knl_name"])
    return p, after


def _rand(g, *shape):
    return torch.randn(*shape, generator=g).bfloat16()


def _assert_close(out, lse, ref, ref_lse, what=""):
    assert not torch.isnan(out).any(), "some output rows were never written"
    fin = torch.isfinite(ref_lse)
    print(f"\n{what}: max|dO| = {(out.float() - ref).abs().max().item():.2e}"
          + (f", max|dLSE| = {(lse[fin] - ref_lse[fin]).abs().max().item():.2e}" if lse is not None else ""))
    torch.testing.assert_close(out.float(), ref, atol=ATOL, rtol=RTOL)
    if lse is not None:
        assert torch.equal(torch.isfinite(lse), fin), "LSE is -inf exactly where a query sees no key"
        torch.testing.assert_close(lse[fin], ref_lse[fin], atol=LSE_ATOL, rtol=0)


BATCH_CASES = {
    # name: (batch, hq, hkv, sq, sk, mask, layout, hdim_q)   layout bhsd = [B, H, S, D] via aiter's strides;
    # V and O have head dim 128; hdim_q 192 runs 128-row Q tiles (ts_qo 128)
    "gqa4_ragged_bhsd": (1, 4, 1, 200, 130, 0, "bhsd", 128),
    "gqa8_short": (1, 8, 1, 40, 70, 0, "bshd", 128),
    "causal_sk_gt_sq_batch2": (2, 2, 1, 300, 400, 2, "bshd", 128),
    "causal_sq_gt_sk_odd_tiles": (1, 1, 1, 520, 300, 2, "bshd", 128),
    "hd192_gqa4_ragged_bhsd": (1, 4, 1, 140, 90, 0, "bhsd", 192),
    "hd192_causal_gqa2_batch2": (2, 2, 1, 300, 170, 2, "bshd", 192),
}
SLOW_CASES = {"hd192_gqa4_ragged_bhsd", "hd192_causal_gqa2_batch2", "hd192_three_seqs_gqa4"}


def _cases(cases):
    return [pytest.param(c, marks=pytest.mark.slow) if c in SLOW_CASES else c for c in cases]


@pytest.mark.parametrize("case", _cases(BATCH_CASES))
def test_batch_mode_against_torch(kset, case):
    b, hq, hkv, sq, sk, mask, layout, dq = BATCH_CASES[case]
    g = torch.Generator().manual_seed(sum(map(ord, case)))
    shape = (lambda s, h, d=128: (b, h, s, d)) if layout == "bhsd" else (lambda s, h, d=128: (b, s, h, d))
    q, k, v = _rand(g, *shape(sq, hq, dq)), _rand(g, *shape(sk, hkv, dq)), _rand(g, *shape(sk, hkv))
    o = torch.full(shape(sq, hq), float("nan")).bfloat16()
    lse = torch.full((b, hq, sq), float("nan"))
    scale = 0.9 / math.sqrt(dq)                          # not the default: the kernel reads `scalar`
    strides = {}
    if layout == "bhsd":                                 # element strides (seq, head, batch) as aiter takes them
        for n, (s_, h_), d in (("q", (sq, hq), dq), ("k", (sk, hkv), dq), ("v", (sk, hkv), 128), ("o", (sq, hq), 128)):
            strides.update({f"stride_{n}": d, f"nhead_stride_{n}": s_ * d, f"batch_stride_{n}": h_ * s_ * d})
    has_lse = 0 if case == "gqa8_short" else 1
    p, got = run_aiter_call(kset, dict(q=q, k=k, v=v, o=o, lse=lse), dtype="bf16", batch=b, nhead_q=hq,
                            nhead_k=hkv, seqlen_q=sq, seqlen_k=sk, mask_type=mask, scale=scale, has_lse=has_lse,
                            hdim_q=dq, hdim_v=128, **strides)
    tiles = -(-sq // (256 if dq == 128 else 128))
    assert p["grid"] == [-(-tiles // 2) if mask else tiles, hq, b]
    to_bhsd = (lambda t: t) if layout == "bhsd" else (lambda t: t.transpose(1, 2))
    ref, ref_lse = fa_fwd.reference(to_bhsd(q), to_bhsd(k), to_bhsd(v), causal=bool(mask), scale=scale,
                                    align="bottom_right")
    _assert_close(to_bhsd(got["o"]), got["lse"] if has_lse else None, ref, ref_lse, f"{p['knl_name']} {case}")
    if not has_lse:
        assert torch.isnan(got["lse"]).all(), "s_lse = 0: the LSE buffer is not written"


GROUP_CASES = {
    # name: (hq, hkv, q lengths, k lengths, mask, hdim_q)
    "three_seqs_gqa2": (2, 1, [100, 300, 37], [70, 260, 129], 0, 128),
    "causal_three_seqs": (1, 1, [520, 64, 200], [600, 40, 150], 2, 128),
    "hd192_three_seqs_gqa4": (4, 1, [90, 200, 37], [70, 150, 129], 0, 192),
    # Sq > Sk (rows that see no key), Sq < Sk, and a 3-tile sequence (odd tile pairing)
    "hd192_causal_three_seqs_gqa2": (2, 1, [300, 64, 130], [170, 100, 200], 2, 192),
    # 8 heads: the XCD map's group remap is on (fa_grid.xcd_remap_group; 3 tiles, 2 causal pairs)
    "eight_heads_remapped_gqa4": (8, 2, [520, 40, 300], [300, 100, 513], 0, 128),
    "causal_eight_heads_remapped": (8, 8, [600, 130], [520, 257], 2, 128),
    "hd192_causal_eight_heads_remapped": (8, 4, [300, 130], [200, 257], 2, 192),
}


@pytest.mark.parametrize("case", _cases(GROUP_CASES))
def test_group_mode_against_torch(kset, case):
    hq, hkv, lq, lk, mask, dq = GROUP_CASES[case]
    g = torch.Generator().manual_seed(sum(map(ord, case)))
    sq_starts = torch.tensor(np.concatenate([[0], np.cumsum(lq)]), dtype=torch.int32)
    sk_starts = torch.tensor(np.concatenate([[0], np.cumsum(lk)]), dtype=torch.int32)
    tq, tk = sum(lq), sum(lk)
    q, k, v = _rand(g, tq, hq, dq), _rand(g, tk, hkv, dq), _rand(g, tk, hkv, 128)
    o = torch.full((tq, hq, 128), float("nan")).bfloat16()
    lse = torch.full((hq, tq), float("nan"))             # group mode LSE: [nhead, total_q]
    scale = 1.1 / math.sqrt(dq)
    p, got = run_aiter_call(kset, dict(q=q, k=k, v=v, o=o, lse=lse, seqstart_q=sq_starts, seqstart_k=sk_starts),
                            dtype="bf16", group=1, batch=len(lq), nhead_q=hq, nhead_k=hkv, seqlen_q=max(lq),
                            seqlen_k=max(lk), mask_type=mask, scale=scale, nhead_stride_lse=tq, hdim_q=dq, hdim_v=128,
                            stride_q=hq * dq, nhead_stride_q=dq, batch_stride_q=0,
                            stride_k=hkv * dq, nhead_stride_k=dq, batch_stride_k=0,
                            stride_v=hkv * 128, nhead_stride_v=128, batch_stride_v=0,
                            stride_o=hq * 128, nhead_stride_o=128, batch_stride_o=0)
    tiles = -(-max(lq) // (256 if dq == 128 else 128))
    assert p["grid"] == [hq, len(lq), -(-tiles // 2) if mask else tiles]
    for i in range(len(lq)):
        qs, ks = slice(int(sq_starts[i]), int(sq_starts[i + 1])), slice(int(sk_starts[i]), int(sk_starts[i + 1]))
        bh = lambda t: t.permute(1, 0, 2)[None]          # noqa: E731  [S, H, D] -> [1, H, S, D]
        ref, ref_lse = fa_fwd.reference(bh(q[qs]), bh(k[ks]), bh(v[ks]), causal=bool(mask), scale=scale,
                                        align="bottom_right")
        _assert_close(bh(got["o"][qs]), got["lse"][:, qs][None], ref, ref_lse, f"{p['knl_name']} {case} seq {i}")


# ---- fp8bf16: fp8 Q/K/V with descales, bf16 O (kernels/fa_fwd_fp8.py) ------------------------------
# Inputs: randn * 2 quantised to OCP E4M3 (torch.float8_e4m3fn, gfx950's fp8: the f8f6f4 MFMA's
# format 0) -- that quantisation is the test's input, not an error. The reference dequantises with
# the descales and computes in float32; the kernel's one extra rounding (P to E4M3 before P·V) is
# bounded per element by conftest.fp8_attention_bound. LSE never sees it: LSE_ATOL as for bf16.
F8 = torch.float8_e4m3fn
FP8_CASES = {
    # name: (batch, hq, hkv, q lengths, k lengths, mask, descales, head dim); one length each = batch
    # mode (bhsd strides), several = group mode
    "fp8_gqa4_ragged_bhsd": (1, 4, 1, [200], [130], 0, (0.7, 1.3, 0.45), 128),
    "fp8_causal_sq_gt_sk_batch2": (2, 2, 1, [300], [170], 2, (1.9, 0.6, 2.5), 128),
    "fp8_three_seqs_gqa2": (3, 2, 1, [100, 300, 37], [70, 260, 129], 0, (0.35, 1.7, 1.2), 128),
    # Sq > Sk (rows that see no key), Sq < Sk, and a 2-tile sequence (both tiles of one workgroup)
    "fp8_causal_three_seqs_gqa2": (3, 2, 1, [300, 64, 130], [170, 100, 200], 2, (1.4, 0.8, 0.6), 128),
    "fp8_hd256_gqa2_ragged_bhsd": (1, 2, 1, [150], [200], 0, (0.6, 1.5, 0.8), 256),
    "fp8_hd256_causal_sq_lt_sk": (1, 1, 1, [100], [230], 2, (1.2, 0.9, 1.7), 256),
    "fp8_hd256_three_seqs_gqa4": (3, 4, 1, [40, 90, 17], [70, 50, 129], 0, (0.5, 2.1, 0.9), 256),
    "fp8_hd256_causal_three_seqs_gqa2": (3, 2, 1, [300, 30, 70], [170, 60, 140], 2, (1.3, 0.7, 1.1), 256),
    # 8 heads: the group remap is on (fa_grid.xcd_remap_group), 2 tiles
    "fp8_eight_heads_remapped": (2, 8, 2, [300, 40], [260, 100], 0, (0.8, 1.1, 0.9), 128),
}
FP8_SLOW = {"fp8_gqa4_ragged_bhsd", "fp8_causal_sq_gt_sk_batch2", "fp8_three_seqs_gqa2", "fp8_hd256_gqa2_ragged_bhsd",
            "fp8_hd256_causal_sq_lt_sk", "fp8_hd256_three_seqs_gqa4"}


def _check_fp8(o, lse, q8, k8, v8, ds, causal, scale, what):
    """o/lse from the kernel; q8/k8/v8 [1|B, H, S, D]; asserts the fp8 bound and the LSE tolerance."""
    dq, dk, dv = ds
    g = q8.shape[1] // k8.shape[1]
    q, k, v = q8.float() * dq, (k8.float() * dk).repeat_interleave(g, 1), (v8.float() * dv).repeat_interleave(g, 1)
    sc = (q @ k.transpose(-1, -2)) * scale
    if causal:
        sq, sk = sc.shape[-2:]
        sc = sc.masked_fill(~torch.ones(sq, sk, dtype=torch.bool).tril(diagonal=sk - sq), float("-inf"))
    ref, ref_lse = fa_fwd.reference(q8.float() * dq, k8.float() * dk, v8.float() * dv, causal=causal, scale=scale,
                                    align="bottom_right")
    bound = fp8_attention_bound(sc, v, ref)
    assert not torch.isnan(o.float()).any(), "some output rows were never written"
    do = (o.float() - ref).abs()
    fin = torch.isfinite(ref_lse)
    dl = (lse[fin] - ref_lse[fin]).abs().max().item() if fin.any() else 0.0
    print(f"\n{what}: max|dO| = {do.max().item():.2e} (max bound {bound.max().item():.2e}, "
          f"worst dO/bound {(do / bound.clamp_min(1e-30)).max().item():.2f}), max|dLSE| = {dl:.2e}")
    assert (do <= bound).all(), f"worst dO/bound {(do / bound.clamp_min(1e-30)).max().item():.3g}"
    assert torch.equal(torch.isfinite(lse), fin), "LSE is -inf exactly where a query sees no key"
    torch.testing.assert_close(lse[fin], ref_lse[fin], atol=LSE_ATOL, rtol=0)


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.slow) if c in FP8_SLOW else c
                                  for c in FP8_CASES])
def test_fp8_against_torch(kset, case):
    b, hq, hkv, lq, lk, mask, ds, d = FP8_CASES[case]
    g = torch.Generator().manual_seed(sum(map(ord, case)))
    q8f = lambda *sh: (2 * torch.randn(*sh, generator=g)).to(F8)        # noqa: E731
    scale = 1.05 / math.sqrt(d)
    desc = {n: torch.tensor([d], dtype=torch.float32) for n, d in zip(("q_descale", "k_descale", "v_descale"), ds)}
    if len(lq) == 1:                                     # batch mode, [B, H, S, D] through aiter's strides
        sq, sk = lq[0], lk[0]
        q8, k8, v8 = q8f(b, hq, sq, d), q8f(b, hkv, sk, d), q8f(b, hkv, sk, d)
        o = torch.full((b, hq, sq, d), float("nan")).bfloat16()
        lse = torch.full((b, hq, sq), float("nan"))
        strides = {}
        for n, (s_, h_) in (("q", (sq, hq)), ("k", (sk, hkv)), ("v", (sk, hkv)), ("o", (sq, hq))):
            strides.update({f"stride_{n}": d, f"nhead_stride_{n}": s_ * d, f"batch_stride_{n}": h_ * s_ * d})
        p, got = run_aiter_call(kset, dict(q=q8.view(torch.uint8), k=k8.view(torch.uint8), v=v8.view(torch.uint8),
                                           o=o, lse=lse, **desc),
                                dtype="fp8bf16", batch=b, nhead_q=hq, nhead_k=hkv, seqlen_q=sq, seqlen_k=sk,
                                mask_type=mask, scale=scale, hdim_q=d, hdim_v=d, **strides)
        tiles = -(-sq // 256)
        assert p["grid"] == [-(-tiles // 2) if mask else tiles, hq, b]
        _check_fp8(got["o"], got["lse"], q8, k8, v8, ds, bool(mask), scale, f"{p['knl_name']} {case}")
        return
    sq_starts = torch.tensor(np.concatenate([[0], np.cumsum(lq)]), dtype=torch.int32)
    sk_starts = torch.tensor(np.concatenate([[0], np.cumsum(lk)]), dtype=torch.int32)
    tq, tk = sum(lq), sum(lk)
    q8, k8, v8 = q8f(tq, hq, d), q8f(tk, hkv, d), q8f(tk, hkv, d)
    o = torch.full((tq, hq, d), float("nan")).bfloat16()
    lse = torch.full((hq, tq), float("nan"))
    p, got = run_aiter_call(kset, dict(q=q8.view(torch.uint8), k=k8.view(torch.uint8), v=v8.view(torch.uint8), o=o,
                                       lse=lse, seqstart_q=sq_starts, seqstart_k=sk_starts, **desc),
                            dtype="fp8bf16", group=1, batch=len(lq), nhead_q=hq, nhead_k=hkv, seqlen_q=max(lq),
                            seqlen_k=max(lk), mask_type=mask, scale=scale, nhead_stride_lse=tq, hdim_q=d, hdim_v=d,
                            stride_q=hq * d, nhead_stride_q=d, batch_stride_q=0,
                            stride_k=hkv * d, nhead_stride_k=d, batch_stride_k=0,
                            stride_v=hkv * d, nhead_stride_v=d, batch_stride_v=0,
                            stride_o=hq * d, nhead_stride_o=d, batch_stride_o=0)
    tiles = -(-max(lq) // 256)
    assert p["grid"] == [hq, len(lq), -(-tiles // 2) if mask else tiles]
    bh = lambda t: t.permute(1, 0, 2)[None]              # noqa: E731  [S, H, D] -> [1, H, S, D]
    for i in range(len(lq)):
        qs, ks = slice(int(sq_starts[i]), int(sq_starts[i + 1])), slice(int(sk_starts[i]), int(sk_starts[i + 1]))
        _check_fp8(bh(got["o"][qs]), got["lse"][:, qs][None], bh(q8[qs]), bh(k8[ks]), bh(v8[ks]), ds, bool(mask),
                   scale, f"{p['knl_name']} {case} seq {i}")


def test_python_packing_matches_aiter_bytes(kset):
    """flyasm.attention packs aiter's struct itself (dispatch.aiter_fwd_values): the same bytes."""
    from flyasm.dispatch import aiter_fwd_values
    from flyasm.run.args import pack_args, specs_from_kernel
    kern = fa_fwd.build(aiter_args=True, causal=True)
    b, hq, hkv, sq, sk = 2, 6, 3, 300, 500
    q, out = torch.zeros(b, hq, sq, 128).bfloat16(), torch.zeros(b, hq, sq, 128).bfloat16()
    k, v = torch.zeros(b, hkv, sk, 128).bfloat16(), torch.zeros(b, hkv, sk, 128).bfloat16()
    lse = torch.zeros(b, hq, sq)
    ptr = {"q": 0x1000, "k": 0x2000, "v": 0x3000, "o": 0x4000, "lse": 0x5000}
    vals = aiter_fwd_values(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), out.transpose(1, 2), lse, 0.125,
                            causal=True)
    ours = pack_args(specs_from_kernel(kern), [vals[a.name] for a in kern.args], lambda t, s: ptr[s.name],
                     kern.kernarg_size)
    p = pack(kset, dtype="bf16", batch=b, nhead_q=hq, nhead_k=hkv, seqlen_q=sq, seqlen_k=sk, mask_type=2,
             scale=0.125, stride_q=128, nhead_stride_q=sq * 128, batch_stride_q=hq * sq * 128, stride_k=128,
             nhead_stride_k=sk * 128, batch_stride_k=hkv * sk * 128, stride_v=128, nhead_stride_v=sk * 128,
             batch_stride_v=hkv * sk * 128, stride_o=128, nhead_stride_o=sq * 128, batch_stride_o=hq * sq * 128,
             **ptr)
    assert ours.hex() == p["kernarg_hex"]
