"""aiter's shipped gfx950 attention forward kernels (fmha_v3_fwd/fwd_hd128_bf16{,_causal}.co) in the
emulator against torch SDPA in float32, launched with the kernarg bytes and grid that aiter's own
host code packs (`../shared/aiter/client/drop_in.sh SET_DIR pack ...`), in report mode.

The shipped kernels do not respect three documented gfx950 hazards (LLVM's post-RA hazard
recogniser inserts s_nops for the same sequences: GCNHazardRecognizer's VALU-SGPR -> VALU read
(`valu_sgpr_valu_read`), checkReadM0Hazards (`salu_m0`), checkPermlaneHazards
(`valu_write_permlane`)), and the causal kernel, whose workgroups handle two Q tiles, lets tile 2's
Q DMA overwrite LDS another wave read with ds_read_b64_tr_b16 for tile 1 after the last barrier.
The report must show exactly those; the answers must still match torch.

Reads ../shared/aiter in place (skips, saying why, when it is absent); needs aiter's host code
compiled by drop_in.sh (clang++ and pandas). Also the driver of benchmarks/aiter_fmha_emu.py.
"""
from __future__ import annotations

import json
import math
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from conftest import drop_in_missing, fp8_attention_bound

torch = pytest.importorskip("torch")

from flyasm.errors import FlyasmError  # noqa: E402
from flyasm.run import launch  # noqa: E402

AITER = Path(__file__).resolve().parents[1].parent / "shared" / "aiter"
SET = AITER / "gfx950" / "fmha_v3_fwd"
DROP_IN = AITER / "client" / "drop_in.sh"
D = 128
# host-side pointer values packed into the kernarg bytes (any distinct integers; launch() maps them)
PTR = {"q": 0x7E00_0000_0000, "k": 0x7E01_0000_0000, "v": 0x7E02_0000_0000, "o": 0x7E03_0000_0000,
       "lse": 0x7E04_0000_0000}
HAZARDS = {"valu_sgpr_valu_read", "salu_m0", "valu_write_permlane"}
U_BF16 = 2.0 ** -8           # unit roundoff of bf16: 8 significant bits, RNE errs by <= 2^-8 relative
U_F32 = 2.0 ** -24


def _why_not() -> str | None:
    return drop_in_missing(DROP_IN)


needs_aiter = pytest.mark.skipif(_why_not() is not None, reason=_why_not() or "")


@dataclass(frozen=True)
class Shape:
    batch: int
    nhead_q: int
    nhead_k: int
    seqlen_q: int
    seqlen_k: int
    causal: bool

    def __str__(self):
        return (f"{'causal' if self.causal else 'plain'}-b{self.batch}-h{self.nhead_q}/{self.nhead_k}-"
                f"q{self.seqlen_q}-k{self.seqlen_k}")


def pack(sh: Shape, scale: float) -> dict:
    """aiter's own answer for this call: kernel, grid and the exact kernarg bytes."""
    cmd = [str(DROP_IN), str(SET), "pack", "dtype=bf16", f"hdim_q={D}", f"hdim_v={D}", f"batch={sh.batch}",
           f"nhead_q={sh.nhead_q}", f"nhead_k={sh.nhead_k}", f"seqlen_q={sh.seqlen_q}", f"seqlen_k={sh.seqlen_k}",
           f"mask_type={2 if sh.causal else 0}", "has_lse=1", f"scale={scale!r}"]
    cmd += [f"{name}=0x{addr:x}" for name, addr in PTR.items()]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def inputs(sh: Shape, gen):
    """Fresh random bf16 Q, K, V in aiter's default [batch, seqlen, nhead, hdim]; O and LSE poisoned."""
    def rnd(s, h):
        return torch.randn(sh.batch, s, h, D, generator=gen).to(torch.bfloat16)
    q, k, v = rnd(sh.seqlen_q, sh.nhead_q), rnd(sh.seqlen_k, sh.nhead_k), rnd(sh.seqlen_k, sh.nhead_k)
    o = torch.full((sh.batch, sh.seqlen_q, sh.nhead_q, D), float("nan"), dtype=torch.bfloat16)
    lse = torch.full((sh.batch, sh.nhead_q, sh.seqlen_q), float("nan"), dtype=torch.float32)
    return q, k, v, o, lse


def reference(sh: Shape, q, k, v, scale: float):
    """torch SDPA in float32 on the bf16 inputs, CK's bottom-right causal mask (mask 2: key j is
    visible to query i when j <= i + seqlen_k - seqlen_q), K/V head h // (nhead_q / nhead_k) for GQA;
    LSE is the natural log of sum(exp(scale * q.k)) over the visible keys. Also returns P @ |V|
    (softmax weights times |V|), which bounds how far bf16 rounding of P can move O."""
    g = sh.nhead_q // sh.nhead_k
    qf = q.float().transpose(1, 2)                                   # [b, h, s, d]
    kf = k.float().transpose(1, 2).repeat_interleave(g, dim=1)
    vf = v.float().transpose(1, 2).repeat_interleave(g, dim=1)
    mask = None
    if sh.causal:
        i = torch.arange(sh.seqlen_q)[:, None]
        j = torch.arange(sh.seqlen_k)[None, :]
        mask = j <= i + (sh.seqlen_k - sh.seqlen_q)
    o = torch.nn.functional.scaled_dot_product_attention(qf, kf, vf, attn_mask=mask, scale=scale)
    s = (qf @ kf.transpose(-1, -2)) * scale
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p_abs_v = torch.softmax(s, dim=-1) @ vf.abs()
    return o.transpose(1, 2), lse, p_abs_v.transpose(1, 2)


def o_bound(seqlen_k: int, o_ref, p_abs_v):
    """Per-element bound on |O - O_ref| of a bf16 attention forward (derived in `errors`)."""
    return 2 * U_BF16 * (p_abs_v + o_ref.abs()) + U_BF16 * o_ref.abs() + seqlen_k * U_F32 * p_abs_v


def errors(sh: Shape, o, lse, o_ref, lse_ref, p_abs_v) -> dict:
    """max|dO|, max|dLSE| and whether each is inside its bound.

    O bound per element: P is rounded to bf16 before the P.V MFMA (relative error <= u = 2^-8 per
    weight), and the row sum may use the rounded or the unrounded weights: |dO| <= 2u (P|V| + |O|);
    the bf16 store of O adds u|O|; float32 accumulation over <= seqlen_k products adds
    seqlen_k * 2^-24 * P|V| (far below the rest). LSE bound: max + log of a float32 sum, each a few
    float32 roundings of values of size |LSE| + log(seqlen_k): 64 * 2^-24 * (|LSE| + log(seqlen_k))."""
    of = o.float()
    do = (of - o_ref).abs()
    o_tol = o_bound(sh.seqlen_k, o_ref, p_abs_v)
    dl = (lse - lse_ref).abs()
    l_tol = 64 * U_F32 * (lse_ref.abs() + math.log(sh.seqlen_k))
    written = bool(torch.isfinite(of).all() and torch.isfinite(lse).all())
    return dict(dO=float(do.max()), dLSE=float(dl.max()), written=written,
                o_ok=written and bool((do <= o_tol).all()), lse_ok=written and bool((dl <= l_tol).all()),
                o_tol=float(o_tol.max()), lse_tol=float(l_tol.max()))


def run_case(sh: Shape, seed: int | None = None, scale_error: float = 1.0, **opts):
    """Pack with aiter's host code (the packed scale times scale_error), run in the emulator,
    compare with the reference at the true scale. Returns (errors dict, LaunchResult, seconds)."""
    gen = torch.Generator().manual_seed(int(np.random.default_rng(seed).integers(1 << 62)))
    scale = 1.0 / math.sqrt(D)
    p = pack(sh, scale * scale_error)
    assert p["co_name"] == f"fmha_v3_fwd/fwd_hd128_bf16{'_causal' if sh.causal else ''}.co"
    q, k, v, o, lse = inputs(sh, gen)
    co = SET / Path(p["co_name"]).name
    opts = {"hazards": "report", "races": "report", **opts}
    t0 = time.process_time()
    res = launch(co, tuple(p["grid"]), 512, kernel=p["knl_name"], kernarg=p["kernarg_hex"],
                 buffers={PTR["q"]: q, PTR["k"]: k, PTR["v"]: v, PTR["o"]: o, PTR["lse"]: lse}, **opts)
    cpu = time.process_time() - t0
    o_ref, lse_ref, pav = reference(sh, q, k, v, scale)
    return errors(sh, o, lse, o_ref, lse_ref, pav), res, cpu, p


PLAIN = Shape(1, 2, 1, 300, 300, False)      # GQA 2, ragged: 2 Q tiles (256 + 44 rows), 5 K/V steps of 64 (4 + 44)
CAUSAL = Shape(1, 4, 1, 260, 300, True)      # GQA 4, bottom-right causal with seqlen_q < seqlen_k, 2 Q tiles per workgroup


def _assert_report(res, causal: bool):
    rep = res.report
    rules = rep.rules()
    assert set(rules) == HAZARDS | ({"lds_write_after_read"} if causal else set()), rep.text()
    for r in rep.rows():
        assert r.count > 0 and not r.waived and r.other_pc is not None and r.inst and r.other
    if causal:
        races = rep.rows("race")
        # tile 2's Q DMA (buffer_load ... lds) overwrites what another wave's tile-1 transposed reads used
        assert any(r.pc == 0x53C for r in races), rep.text()
        for r in races:
            assert r.inst.startswith("buffer_load_dwordx4") and r.inst.endswith(" lds")
            assert r.other.startswith("ds_read_b64_tr_b16")


@needs_aiter
@pytest.mark.parametrize("sh", [PLAIN, CAUSAL], ids=str)
def test_aiter_fmha_matches_torch_and_reports_its_hazards(sh):
    err, res, cpu, _ = run_case(sh)
    assert err["written"], "the kernel left poisoned O or LSE elements"
    assert err["o_ok"], err
    assert err["lse_ok"], err
    _assert_report(res, sh.causal)


@needs_aiter
def test_waivers_keep_the_run_strict_for_the_rest():
    # the first violation the plain kernel meets is salu_m0 at pc 0x788 (M0 written right before
    # the K DMA): waiving everything else still stops there, in strict mode
    with pytest.raises(FlyasmError, match=r"hazard.*buffer_load_dwordx4 .* lds' at pc 0x788 .*checkReadM0Hazards"):
        run_case(Shape(1, 1, 1, 256, 256, False), hazards="verify", races=True,
                 waive=["valu_sgpr_valu_read", "valu_write_permlane", ("salu_m0", 0x798)])


@needs_aiter
def test_five_percent_scale_error_is_caught():
    sh = Shape(1, 1, 1, 256, 256, False)
    err, res, _, _ = run_case(sh, scale_error=1.05, hazards=None, races=False)
    assert err["written"]
    assert not err["lse_ok"] and not err["o_ok"], err


@needs_aiter
@pytest.mark.slow
@pytest.mark.parametrize("sh", [Shape(2, 2, 1, 600, 600, False), Shape(2, 2, 1, 520, 600, True)], ids=str)
def test_aiter_fmha_larger_shapes(sh):
    err, res, cpu, _ = run_case(sh)
    assert err["written"] and err["o_ok"] and err["lse_ok"], err
    _assert_report(res, sh.causal)


# ---- aiter's fp8 kernel (fwd_hd128_fp8.co: fp8 Q/K/V, per-tensor descales, bf16 O) ----------------
# It pins the fp8bf16 convention kernels/fa_fwd_fp8.py follows: scores scale * dq * dk * q8·k8,
# O = dv * softmax · v8, LSE of those scores. It reads its transposed V (ds_read_b64_tr_b8) ~300
# VALU instructions after issue, past an s_waitcnt lgkmcnt(8) that does not cover them: timing,
# not a counter, so the run lands those loads at the read (check_inflight="land") and reports them.
FP8_PTR = dict(PTR, q_descale=0x7E05_0000_0000, k_descale=0x7E06_0000_0000, v_descale=0x7E07_0000_0000)
DESCALES = (0.7, 1.3, 0.45)             # distinct, non-unit: dropping or swapping one is an O(1) error


@needs_aiter
def test_aiter_fp8_kernel_matches_torch():
    sh = Shape(1, 1, 1, 100, 150, False)     # ragged Q tile (100 of 256) and K (2 x 64 + 22)
    scale = 1.0 / math.sqrt(D)
    cmd = [str(DROP_IN), str(SET), "pack", "dtype=fp8bf16", f"hdim_q={D}", f"hdim_v={D}", f"batch={sh.batch}",
           f"nhead_q={sh.nhead_q}", f"nhead_k={sh.nhead_k}", f"seqlen_q={sh.seqlen_q}", f"seqlen_k={sh.seqlen_k}",
           "mask_type=0", "has_lse=1", f"scale={scale!r}"] + [f"{n}=0x{a:x}" for n, a in FP8_PTR.items()]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    p = json.loads(r.stdout)
    assert p["co_name"] == "fmha_v3_fwd/fwd_hd128_fp8.co"
    gen = torch.Generator().manual_seed(int(np.random.default_rng().integers(1 << 62)))
    f8 = torch.float8_e4m3fn
    # randn * 2 spans E4M3's normal range around 1 (and some subnormals)
    q, k, v = ((2 * torch.randn(sh.batch, n, h, D, generator=gen)).to(f8)
               for n, h in ((sh.seqlen_q, sh.nhead_q), (sh.seqlen_k, sh.nhead_k), (sh.seqlen_k, sh.nhead_k)))
    o = torch.full((sh.batch, sh.seqlen_q, sh.nhead_q, D), float("nan"), dtype=torch.bfloat16)
    lse = torch.full((sh.batch, sh.nhead_q, sh.seqlen_q), float("nan"), dtype=torch.float32)
    ds = [torch.tensor([d], dtype=torch.float32) for d in DESCALES]
    res = launch(SET / "fwd_hd128_fp8.co", tuple(p["grid"]), 512, kernel=p["knl_name"], kernarg=p["kernarg_hex"],
                 buffers={FP8_PTR["q"]: q.view(torch.uint8), FP8_PTR["k"]: k.view(torch.uint8),
                          FP8_PTR["v"]: v.view(torch.uint8), FP8_PTR["o"]: o, FP8_PTR["lse"]: lse,
                          FP8_PTR["q_descale"]: ds[0], FP8_PTR["k_descale"]: ds[1], FP8_PTR["v_descale"]: ds[2]},
                 hazards="report", races="report", check_inflight="land")
    g = sh.nhead_q // sh.nhead_k
    dq, dk, dv = DESCALES
    qf = q.float().transpose(1, 2) * dq
    kf = (k.float().transpose(1, 2) * dk).repeat_interleave(g, dim=1)
    vf = (v.float().transpose(1, 2) * dv).repeat_interleave(g, dim=1)
    s = (qf @ kf.transpose(-1, -2)) * scale
    o_ref, lse_ref = torch.softmax(s, -1) @ vf, torch.logsumexp(s, -1)
    do = (o.float().transpose(1, 2) - o_ref).abs()
    bound = fp8_attention_bound(s, vf, o_ref)
    assert torch.isfinite(o.float()).all() and torch.isfinite(lse).all(), "poisoned outputs left"
    assert (do <= bound).all(), f"max|dO| {do.max():.3g}, worst dO/bound {(do / bound).max():.3g}"
    # LSE never sees the fp8 rounding of P: float32 roundings of |LSE| + log(seqlen_k), and of the
    # score constant scale*dq*dk*log2(e) (a few ulps of each |s|)
    l_tol = 64 * U_F32 * (lse_ref.abs() + math.log(sh.seqlen_k)) + 8 * U_F32 * s.abs().amax(-1)
    assert ((lse - lse_ref).abs() <= l_tol).all(), float((lse - lse_ref).abs().max())
    print(f"\naiter fwd_hd128_fp8 {sh}: max|dO| {do.max():.3g} (bound {bound.max():.3g}), "
          f"max|dLSE| {(lse - lse_ref).abs().max():.3g}; report rules {res.report.rules()}")
    waits = res.report.rows("wait")
    assert waits and all(w.other.startswith("ds_read_b64_tr_b8") for w in waits), res.report.text()
