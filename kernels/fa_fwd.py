"""Flagship attention forward for gfx950: head dim 128, bf16/f16, causal or not, MHA/GQA.

    k = build(dtype="bf16", causal=True, num_heads=8, num_kv_heads=2)
    out, lse = run(q, k, v, causal=True)          # q: [B, Hq, Sq, 128], k/v: [B, Hkv, Sk, 128]

One workgroup = 512 threads = 8 waves = a 256-row Q tile (32 rows per wave); K and V stream
through LDS in 64-key steps.  Every lane/offset formula comes from kernels/fa_layouts.py, whose
numpy model of this exact data movement is tested against plain attention
(tests/test_fa_layouts.py).

Default pipeline of one 64-key step j (head dim 128; per wave; S_j was computed a step earlier
and the first half of its softmax is done), four phases with a barrier after each:

    read K   16 ds_read_b128 (K_{j+1} -> all 16 KV slots)  ║ 3 DMA V_{j+1}
    Q·Kᵀ     16 MFMA  S_{j+1} = K_{j+1}·Qᵀ   ║ softmax_b(S_j): 16 exp2, row sum (v_pk_add_f32), pack P_j
    read V   32 ds_read_b64_tr_b16 (V_j -> KV)               ║ 3 DMA K_{j+3}; P_j's last packing,
             (uniform branch, only when the lazy max moved) O, l *= corr; mask S_{j+1} on boundary tiles
    P·V      16 MFMA  Oᵀ += V_jᵀ·P_jᵀ          ║ softmax_a(S_{j+1}): row max, lazy max, S·c - m
                                                  (v_pk_fma_f32), 16 exp2

Waves 4-7 run one phase behind waves 0-3 (wave w and w+4 share a SIMD), so in every phase one wave
of each SIMD runs its 16 MFMAs with half a softmax in their shadows while the other reads LDS: the
ping-pong of aiter's kernel, with fewer VALU cycles per MFMA (packed f32 ops, lazy rescale, corr's
exp2 only when the max moved, P packed without lane exchanges). A shadow is the 7 issue turns after
an MFMA's (the 32-cycle MFMA, 4 cycles a turn): one exp2 (a quarter-rate TRANS op: 4 turns) and
three other instructions, each placed by feed() in program order where it fits. build(pingpong=False)
keeps the split softmax with all waves in phase (one barrier per step), the loop of head dim 192
(4 waves: one per SIMD, no ping-pong; K four tiles deep in LDS); build(split=False) is the loop of
earlier versions (below), which stagger uses.

Loop of split=False, one 64-key step j (per wave; S_cur holds Sᵀ_j, computed one step earlier):

    mask       (only on boundary tiles)  v_cmp/v_cndmask of S_cur against seqlen_k / the diagonal
    ── wait K_{j+1} DMA, s_barrier ──
    qk_softmax 16 MFMA  S_nxt = K_{j+1}·Qᵀ      ║ 16 ds_read_b128 (K_{j+1})  ║ 6 DMA (K_{j+2}, V_{j+1})
               ║ softmax of S_cur in the MFMA shadows: row max (in-lane + permlane32),
               ║ lazy max update, exp2, row sum, pack P to bf16 -> Pᵀ operand (keys in fa_layouts.p_key order)
    rescale_o  (only when some row max grew by > 2^8: uniform branch)  O *= corr
    ── wait V_j DMA, s_barrier ──
    pv         16 MFMA  Oᵀ += V_jᵀ·P_jᵀ          ║ 32 ds_read_b64_tr_b16 (V_j)

so the softmax of step j runs under the Q·Kᵀ MFMAs of step j+1 (S ping-pongs between
v[32:63] and v[64:95], the loop is unrolled twice).  Online softmax runs in the exp2 domain:
by default scale·log2(e) is applied in the exponent, v_fma_f32(S, c, -m), at no extra cost;
q_prescale=True instead folds it into Q when Q is loaded (in-flight Q scaling, one rounding of
Q more: see build()).  The max is "lazy": the running max m used for
P = exp2(S - m) is only moved when some lane's tile max exceeds it by more than 8 (P ≤ 2^8 stays
exact enough in bf16 and far from fp32 overflow), so O is rarely rescaled.
build(split=False, stagger=True) runs waves 0-3 and 4-7 half a phase apart (race-freedom argument in build()).

Supported: head dim 128; 1 ≤ seqlen_q, seqlen_k < 2^24 with any remainder (masking); row strides
≥ 256 bytes and multiples of 16 bytes; byte offsets of one (batch, head) slice < 2^32 - 16; causal is
top-left aligned (query i sees keys 0..i), as torch's `is_causal`.
"""
from __future__ import annotations

import math
import sys
from collections import deque
from pathlib import Path

from flyasm import Kernel, a, m0, s, v, vcc
from flyasm.errors import SourceLoc
from flyasm.isa.builders import make
from flyasm.isa.operands import Special
from flyasm.plan import RegisterPlan
from flyasm.report.stats import nop_wait_states
from flyasm.sched import classes_of

try:
    from . import fa_grid as G
    from . import fa_layouts as L
except ImportError:                      # loaded as a top-level module (tests put kernels/ on the path)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import fa_grid as G
    import fa_layouts as L

exec_lo, exec_hi = Special("exec_lo"), Special("exec_hi")

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453
LAZY_THRESHOLD = 8.0           # log2 units: P = exp2(S - m_stale) ≤ 2^8
RSRC_WORD3 = 0x00020000        # raw buffer, 32-bit data format (gfx9 V# word 3)

# ---- the register plan (inclusive ranges) --------------------------------------------------------
#  region       registers      holds
#  ids          v[0:1]         workitem id (v0), lane id
#  lds_addr     v[2:5]         per-lane LDS read bases: K buf0, K buf1, V buf0, V buf1
#  dma_voff     v[6:11]        per-lane global offsets of the 3 K and 3 V DMA chunks (the tile's in soffset)
#  io_voff      v[13:15]       per-lane offsets of the Q load, O store, LSE store
#  softmax      v[16:25]       m (running max), l (lane-half row sum), corr, tile max, temps,
#                              mask limit, -inf, causal limit, 4*(lane//32)
#  tmp          v[26:31]       prologue scratch (Q scaling)
#  S            v[32:95]       Sᵀ ping-pong: S_ping v[32:63], S_pong v[64:95] (2 x 2 MFMA tiles)
#  O            v[96:159]      Oᵀ accumulators, 4 d blocks x 16
#  Q            v[160:191]     Q·scale·log2e as 8 B operands (persistent)
#  KV           v[192:255]     16 K fragments (4 VGPRs) or 16 V fragments read ahead of the MFMAs
#  sys          s[0:4]         kernarg pointer, workgroup ids x (Q tile), y (head), z (batch)
#  rsrc         s[8:27]        buffer resources Q, K, V, O, LSE
#  args         s[28:53]       kernel arguments
#  loop         s[54:62]       tile count, step, kbase, temps, lazy flag, DMA tile offsets, q0
#  dma_m0       s[64:75]       M0 for every DMA: (K buf0, K buf1, V buf0, V buf1) x 3 chunks
#  misc         s[76:85]       mask limit, mask SGPR pairs, GQA head, strides x 64, Q tiles, diagonal
#  aiter        s[86:101]      aiter-only arguments (gqa, heads, LSE head stride, sequence starts),
#                              Q tile and pass of the paired causal launch, this sequence's starts
# 12 M0 values, not 5: a DMA instruction fills 1 KiB of consecutive LDS (M0 + 16*lane), so each
# of the 3 chunks a wave fills per tile, in each of 2 buffers of 2 tensors, has its own M0.
PLAN_REGIONS = {
    "ids": v[0:1], "lds_addr": v[2:5], "dma_voff": v[6:11], "io_voff": v[13:15], "softmax": v[16:25],
    "tmp": v[26:31], "S": v[32:95], "O": v[96:159], "Q": v[160:191], "KV": v[192:255],
    "sys": s[0:4], "wave": s[5:7], "rsrc": s[8:27], "args": s[28:53], "loop": s[54:63], "dma_m0": s[64:75],
    "misc": s[76:85], "aiter": s[86:101],
}
PLAN_ALIASES = {"S_ping": ("S", v[32:63]), "S_pong": ("S", v[64:95])}
# Head dim 192 (Q/K; V and O stay 128): 4 waves of 32 rows (aiter launches 256 threads), so a wave
# may use the whole unified file: Q's 48 registers move to AGPRs (MFMA srcB and buffer loads may name
# AGPRs on gfx90a+/gfx950), and v[160:171] holds the 7 K + 5 V per-lane DMA offsets. dma_m0 s[64:68]: 1 KiB * wave, and M0 of the K chunk past which some waves dump (x4 buffers);
# lds_addr2 v[173:176]: LDS read bases of the K (then V) buffers past two (fa_layouts.HD192's stages).
PLAN_REGIONS_HD192 = dict(PLAN_REGIONS, Q=a[0:47], dma_voff=v[160:171], lds_addr2=v[173:176])

S = v[32:95]
O = v[96:159]
Q = v[160:191]
KV = v[192:255]
LANE = v[1]
K_ADDR = (v[2], v[3])
V_ADDR = (v[4], v[5])
K_DMA = (v[6], v[7], v[8])
V_DMA = (v[9], v[10], v[11])
Q_VOFF, O_VOFF, LSE_VOFF = v[13], v[14], v[15]
M_RUN, L_RUN, CORR, M_TILE, T0, T1, MASK_T, NEG_INF, QLIM, H4 = (v[i] for i in range(16, 26))
TMP = v[26:31]
SCALE_C = v[31]                # scale*log2(e), kept after the prologue (TMP[5])
ROW_SUM = (v[20:21], v[26:27])  # softmax_b's two row-sum pairs (T0:T1, TMP[0:1]): a packed write -> VALU read needs 1 wait state

RS_Q, RS_K, RS_V, RS_O, RS_LSE = s[8:11], s[12:15], s[16:19], s[20:23], s[24:27]
WAVE = s[5]
N_TILES, STEP, KBASE, ST0, ST1 = s[54], s[55], s[56], s[57], s[58]
LAZY = s[60:61]
K_TILE_OFF, V_TILE_OFF = s[59], s[62]
Q0 = s[63]
DMA_M0 = s[64:75]
WAVE_1K = DMA_M0[0]                  # head dim 192: 1 KiB * wave (the other M0s are this + a constant)
MASK_LIMIT = s[76]
MASK_SG = (vcc, s[78:79], s[80:81])
HK = s[77]
K_SS64, V_SS64 = s[82], s[83]
NQT, DIAG = s[84], s[85]             # Q tiles of this sequence; causal diagonal offset (0 or Sk - Sq)
TILE, PASS, QSTART, KSTART, LSE_ROW = s[98], s[99], s[100], s[101], s[89]

# aiter's fmha_fwd_v3_args (client/aiter_src/fmha_fwd_v3_args.h): 41 fields in 16-byte slots, 656 bytes;
# strides in bytes, s_gqa = nhead_q / nhead_k, group mode passes cumulative sequence starts.
AITER_ARGS = [("o", "ptr"), ("q", "ptr"), ("k", "ptr"), ("v", "ptr"), ("lse", "ptr"), ("scale", "f32"),
              ("seqlen_q", "u32"), ("q_ss", "u32"), ("q_ts", "u32"), ("q_hs", "u32"), ("q_bs", "u32"),
              ("gqa", "u32"), ("k_ss", "u32"), ("k_hs", "u32"), ("k_bs", "u32"), ("opt", "u32"),
              ("has_lse", "u32"), ("seqlen_k", "u32"), ("qk_head_dim", "u32"), ("v_head_dim", "u32"),
              ("q_head_num", "u32"), ("v_ss", "u32"), ("v_hs", "u32"), ("v_bs", "u32"), ("o_ss", "u32"),
              ("o_hs", "u32"), ("o_bs", "u32"), ("qseq", "ptr"), ("kseq", "ptr"), ("lse_hs", "u32"),
              ("qseq_pad", "ptr"), ("kseq_pad", "ptr"), ("q_descale", "ptr"), ("k_descale", "ptr"),
              ("v_descale", "ptr"), ("dq_bs", "u32"), ("dq_hs", "u32"), ("dk_bs", "u32"), ("dk_hs", "u32"),
              ("dv_bs", "u32"), ("dv_hs", "u32")]
NATURAL_ARGS = [("o", "ptr"), ("q", "ptr"), ("k", "ptr"), ("v", "ptr"), ("lse", "ptr"), ("scale", "f32"),
                ("seqlen_q", "u32"), ("seqlen_k", "u32"), ("q_ss", "u32"), ("q_hs", "u32"), ("q_bs", "u32"),
                ("k_ss", "u32"), ("k_hs", "u32"), ("k_bs", "u32"), ("v_ss", "u32"), ("v_hs", "u32"),
                ("v_bs", "u32"), ("o_ss", "u32"), ("o_hs", "u32"), ("o_bs", "u32"), ("has_lse", "u32")]
# Where each loaded argument lives (pointers take two SGPRs).
ARG_SGPR = {"o": s[28:29], "q": s[30:31], "k": s[32:33], "v": s[34:35], "lse": s[36:37], "scale": s[38],
            "seqlen_q": s[39], "seqlen_k": s[40], "q_ss": s[41], "q_hs": s[42], "q_bs": s[43], "k_ss": s[44],
            "k_hs": s[45], "k_bs": s[46], "v_ss": s[47], "v_hs": s[48], "v_bs": s[49], "o_ss": s[50],
            "o_hs": s[51], "o_bs": s[52], "has_lse": s[53]}
# ... and the aiter-only ones this kernel reads (s_Ts, s_opt, head dims, descales: see build()).
AITER_SGPR = {"gqa": s[86], "q_head_num": s[87], "lse_hs": s[88], "qseq": s[90:91], "kseq": s[92:93],
              "qseq_pad": s[94:95], "kseq_pad": s[96:97]}
FINITE_NEG = -1e30             # running-max start: a row with no valid key keeps exp2(S - m) = 0, not NaN
TRANS_CYCLES = 16              # a TRANS op (v_exp_f32) holds the VALU port 4 turns (quarter rate)


class _Made:
    """OP.<mnemonic>(...): an instruction made at the caller's line but not emitted. The softmax and
    DMA generators yield these; fill() and feed() emit them where they go in the MFMA shadows."""

    def __getattr__(self, mnemonic):
        def made(*operands, **modifiers):
            f = sys._getframe(1)
            return make(mnemonic, *operands, loc=SourceLoc(f.f_code.co_filename, f.f_lineno), **modifiers)
        return made


OP = _Made()


def port_cycles(inst) -> int:
    """Cycles of its wave's issue an instruction takes (4 per turn: one instruction per wave per turn,
    a TRANS op holds the VALU port 4 turns, s_nop N is N+1 turns): what feed() budgets per MFMA."""
    if "trans" in classes_of(inst):
        return TRANS_CYCLES
    return 4 * (nop_wait_states(inst) if inst.name == "s_nop" else 1)


class _Stream:
    """A generator of made instructions with one of lookahead: feed() sees an instruction's cycles
    before it places it, so an instruction that would overrun an MFMA's shadow waits for the next."""

    def __init__(self, gen):
        self._gen, self._head = iter(gen), None

    @classmethod
    def of(cls, gen):
        return gen if gen is None or isinstance(gen, cls) else cls(gen)

    def peek(self):
        if self._head is None:
            self._head = next(self._gen, None)
        return self._head

    def pop(self):
        inst, self._head = self.peek(), None
        return inst

    def __iter__(self):
        while (inst := self.pop()) is not None:
            yield inst


def streamed(gen_fn):
    """The generator function's generators as _Streams (what feed() takes)."""
    def stream(*args, **kw):
        return _Stream(gen_fn(*args, **kw))
    stream.__name__, stream.__doc__ = gen_fn.__name__, gen_fn.__doc__
    return stream


def interleave_exps(exps, fillers, per, doubles=0):
    """One program order for MFMA shadows: each exp2 of `exps` followed by up to `per` of `fillers`
    whose inputs are ready; the first `doubles` shadows hold two exp2s and nothing else (an MFMA
    issued 4 cycles late, not an exp2 left after the last MFMA: feed() places the second, marked
    `doubled`, beyond the budget). fillers: (need, instruction) in program order, `need` = how many
    of exps it reads (the first `need`); one waits until another instruction follows the last exp it
    reads (TRANS result -> VALU read: 1 wait state, an s_nop 0 once the exps are done)."""
    q = deque(fillers)
    for n, e in enumerate(exps, 1):
        yield e
        if n <= 2 * doubles:
            e.doubled = n % 2 == 0
            continue
        for _ in range(per):
            if not q or q[0][0] >= n:
                break
            yield q.popleft()[1]
    after_exp = bool(exps)
    for need, inst in q:
        if after_exp and need == len(exps):
            yield OP.s_nop(0)
        yield inst
        after_exp = False


def reference(q, k, v, causal=False, scale=None, align="top_left"):
    """torch float32 reference: q [B, Hq, Sq, D], k/v [B, Hkv, Sk, D] -> (out [B, Hq, Sq, D], lse [B, Hq, Sq]).
    causal: align="top_left" (torch's is_causal: query i sees keys 0..i) or "bottom_right" (CK/aiter
    mask 2: query i sees keys 0..i + Sk - Sq). A row that sees no key gives out 0 and lse -inf."""
    import torch
    q, k, v = (t.float() for t in (q, k, v))
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    sc = (q @ k.transpose(-1, -2)) * scale
    sq, sk = q.shape[2], k.shape[2]
    if causal:
        diag = sk - sq if align == "bottom_right" else 0
        keep = torch.ones(sq, sk, dtype=torch.bool).tril(diagonal=diag)
        sc = sc.masked_fill(~keep, float("-inf"))
    lse = torch.logsumexp(sc, dim=-1)
    p = torch.softmax(sc, dim=-1).nan_to_num(0.0)          # all-masked rows: softmax NaN -> 0
    return p @ v, lse


def default_align(aiter_args: bool, align: str | None = None) -> str:
    """The causal diagonal a kernel gets: the one asked for, else aiter's bottom-right (CK mask 2)
    with aiter's arguments and torch's top-left without."""
    return align or ("bottom_right" if aiter_args else "top_left")


def build_name(dtype="bf16", causal=False, num_heads=8, num_kv_heads=8, aiter_args=False, stagger=False,
               group=False, align=None, head_dim=128):
    """The kernel's symbol: aiter-convention kernels are one per aiter key (GQA and heads at run time)."""
    align = default_align(aiter_args, align)
    if aiter_args:
        mask = ("_causal" if align == "bottom_right" else "_causal_tl") if causal else ""
        hd = "hd128" if head_dim == 128 else f"hd{head_dim}_hd128"
        return f"fa_fwd_{hd}_{dtype}{mask}" + ("_group" if group else "") + ("_stagger" if stagger else "")
    return f"fa_fwd_d{head_dim}_{dtype}_{'causal' if causal else 'full'}_h{num_heads}kv{num_kv_heads}" + \
        ("_br" if causal and align == "bottom_right" else "") + ("_stagger" if stagger else "")


class _Builder:
    def __init__(self, dtype, causal, num_heads, num_kv_heads, aiter_args, lazy_rescale, setprio, q_prescale,
                 stagger=False, group=False, align=None, head_dim=128, split=None, pingpong=True, xcd_map=None):
        if dtype not in ("bf16", "f16"):
            raise ValueError(f"dtype is 'bf16' or 'f16', not {dtype!r}")
        if head_dim not in L.GEOMETRY:
            raise ValueError(f"head_dim (of Q and K; V's is 128) is 128 or 192, not {head_dim!r}")
        if head_dim != 128 and (stagger or q_prescale):
            raise ValueError("stagger and q_prescale exist for head dim 128 only")
        if num_heads % num_kv_heads:
            raise ValueError(f"num_heads ({num_heads}) must be a multiple of num_kv_heads ({num_kv_heads})")
        if group and not aiter_args:
            raise ValueError("group (varlen) mode takes aiter's arguments (aiter_args=True)")
        self.xcd_map = xcd_map = True if xcd_map is None else xcd_map
        align = default_align(aiter_args, align)
        if align not in ("top_left", "bottom_right"):
            raise ValueError(f"align is 'top_left' or 'bottom_right', not {align!r}")
        self.dtype, self.causal = dtype, causal
        self.aiter, self.group, self.align = aiter_args, group, align
        # aiter launches causal calls with tg_div = 2: each workgroup does Q tiles w and n-1-w
        self.passes = 2 if aiter_args and causal else 1
        self.gqa = num_heads // num_kv_heads
        self.num_heads = num_heads
        self.lazy_rescale, self.setprio, self.q_prescale = lazy_rescale, setprio, q_prescale
        self.stagger = stagger
        # split softmax (build()'s docstring): the default loop without stagger
        self.split = (not stagger and type(self) is _Builder) if split is None else split
        if self.split and stagger:
            raise ValueError("split=True exists without stagger only")
        # ping-pong pairs waves w and w+4 on a SIMD: 8 waves only
        self.pingpong = self.split and pingpong and L.GEOMETRY[head_dim].waves == 8
        self.v_guard = True           # stagger: group B reads V into VGPRs before its 2nd barrier (tests break it)
        self.b_waits = True           # stagger: group B's tighter DMA waits in the loop (tests break it)
        self.b_wait_start = True      # stagger: ... and before its extra barrier (tests break it)
        self.g = g = L.GEOMETRY[head_dim]
        self.q_shift = g.block_q.bit_length() - 1                  # row -> Q tile
        # per 64-key step, for the regions' expected counts (kernels/fa_fwd_fp8.py has others)
        self.q_loads, self.qk_reads, self.pv_mfmas, self.pv_reads = g.k_steps, 2 * g.k_steps, 16, 32
        self.O, self.n_db = O, g.d_v // 32                                 # Oᵀ accumulators: 16 per 32 d
        # V's DMAs first when V has fewer stages (V_{j+1} must land by step j's barrier; K_{j+k_stages} need not)
        self.dma_order = ("v", "k") if g.v_stages < g.k_stages else ("k", "v")
        self.in_flight = self._barrier_in_flight()
        self.softmax_valu = (136, 161)                                      # VALU of one softmax (expects)
        self.q_rows_pending = False   # load_q issued Q in rows16 order: q_permute fixes it once it has landed
        self.mask_loop = False        # split loop: a copy without mask code runs until the first masked step
        self.qk_drain = 0             # s_nop wait states between the first Q·Kᵀ and the split loop's mask (fp8: 16 passes)
        name = build_name(dtype, causal, num_heads, num_kv_heads, aiter_args, stagger, group, align, head_dim)
        self.plan = RegisterPlan(name, regions=PLAN_REGIONS if head_dim == 128 else PLAN_REGIONS_HD192,
                                 aliases=PLAN_ALIASES, strict=True)
        self.k = Kernel(name, block=64 * g.waves, lds=160 * 1024 if aiter_args else g.lds_bytes,
                        arg_layout="aiter" if aiter_args else "natural", workgroup_ids="xyz", plan=self.plan)
        self.k.lds_scratch(g.lds_dump, g.lds_bytes)    # the DMA dump slots (fa_layouts.dma_m0)
        # which workgroup computes which item (perf.predict)
        self.k.wg_map = (G.xcd_item_group if group else G.xcd_item) if xcd_map else None
        extra = iter(PLAN_REGIONS_HD192["lds_addr2"])
        self.K_ADDR = K_ADDR + tuple(next(extra) for _ in range(2, g.k_stages))
        self.V_ADDR = V_ADDR + tuple(next(extra) for _ in range(2, g.v_stages))
        if head_dim == 128:
            self.Q, self.K_DMA, self.V_DMA = Q, K_DMA, V_DMA
            self.m0_sgpr = {(t, b, i): DMA_M0[(2 * (t == "v") + b) * 3 + i]
                            for t in "kv" for b in range(2) for i in range(3)}
        else:
            dv = self.plan.regions["dma_voff"].reg
            self.Q = self.plan.regions["Q"].reg
            self.K_DMA = tuple(dv[i] for i in range(g.k_dma))
            self.V_DMA = tuple(dv[g.k_dma + i] for i in range(g.v_dma))
            # M0 in an SGPR only for chunks some wave dumps; the others are WAVE_1K + a constant
            sg = (DMA_M0[i] for i in range(1, 12))
            self.m0_sgpr = {(t, b, i): next(sg) for t, n, nd in (("k", g.k_chunks, g.k_dma), ("v", g.v_chunks, g.v_dma))
                            for i in range(nd) if g.waves * (i + 1) > n
                            for b in range(g.k_stages if t == "k" else g.v_stages)}
        self.args = {n: self.k.arg(n, t) for n, t in (AITER_ARGS if aiter_args else NATURAL_ARGS)}
        self.mfma = self.k.instr
        self.mfma_name = f"v_mfma_f32_32x32x16_{dtype}"
        self.cvt_pk = f"v_cvt_pk_{dtype}_f32"
        # workgroup ids: aiter's batch grid (tiles, heads, batch), group grid (heads, batch, tiles)
        x, y, z = (self.k.workgroup_id(a) for a in "xyz")
        self.wg_tile, self.wg_head, self.wg_batch = (z, x, y) if group else (x, y, z)

    # ---- small helpers ------------------------------------------------------------------------
    def rsrc(self, dst, ptr, terms, rows, row_stride):
        """dst = V#(ptr + Σ a*b, num_records = rows * row_stride): 64-bit base arithmetic on SALU."""
        k = self.k
        lo, hi = dst[0], dst[1]
        k.s_mul_i32(dst[2], rows, row_stride)
        k.s_mov_b32(lo, ptr[0])
        k.s_mov_b32(hi, ptr[1])
        for a_, b_ in terms:
            k.s_mul_i32(ST0, a_, b_)
            k.s_mul_hi_u32(ST1, a_, b_)
            k.s_add_u32(lo, lo, ST0)
            k.s_addc_u32(hi, hi, ST1)
        k.s_and_b32(hi, hi, 0xFFFF)              # stride 0: raw buffer, range check in bytes
        k.s_mov_b32(dst[3], RSRC_WORD3)

    def m0_op(self, tensor, buf, i):
        """M0 of DMA instruction i of this wave (fa_layouts.dma_m0)."""
        key = (tensor, buf, i)
        if key in self.m0_sgpr:
            return OP.s_mov_b32(m0, self.m0_sgpr[key])
        base = (self.g.lds_k if tensor == "k" else self.g.lds_v)[buf]   # chunk wave + waves*i exists for every wave
        return OP.s_add_u32(m0, WAVE_1K, base + L.DMA_CHUNK * self.g.waves * i)

    def set_m0(self, tensor, buf, i):
        self.k.emit(self.m0_op(tensor, buf, i))

    def dma_load_op(self, tensor, buf, i, tile_off):
        """The load of a DMA once M0 is set: the lane's chunk offset in VGPR, the tile's in soffset (SGPR),
        so no VALU add per DMA; the range check counts soffset in (num_records - soffset)."""
        inst = OP.buffer_load_dwordx4((self.K_DMA if tensor == "k" else self.V_DMA)[i], RS_K if tensor == "k" else RS_V,
                                      tile_off, offen=True, lds=True)
        inst.lds_buffer = f"{tensor}{buf}"
        return inst

    def dma_load(self, tensor, buf, i, tile_off):
        self.k.emit(self.dma_load_op(tensor, buf, i, tile_off))

    def dma_ops(self, tensor, buf, i, tile_off):
        """One LDS-DMA: chunk i of this wave's share of a K or V tile into buffer buf (M0, the wait
        state M0 -> LDS-DMA asks, the load), as made instructions."""
        yield self.m0_op(tensor, buf, i)
        yield OP.s_nop(0)
        yield self.dma_load_op(tensor, buf, i, tile_off)

    def dma(self, tensor, buf, i, tile_off):
        self.fill(self.dma_ops(tensor, buf, i, tile_off))

    # ---- prologue -----------------------------------------------------------------------------
    def load_args(self):
        k = self.k
        regs = dict(ARG_SGPR, **(AITER_SGPR if self.aiter else {}))
        with k.region("args", expect={"smem": len(regs)}):
            names = list(regs)
            for i in range(0, len(names), 12):        # at most 12 SMEM loads in flight per wait
                for n in names[i:i + 12]:
                    load = k.s_load_dwordx2 if self.args[n].type == "ptr" else k.s_load_dword
                    load(regs[n], k.kernarg_ptr, self.args[n].offset)
                k.s_waitcnt(lgkmcnt=0)
        if self.group:
            if self.xcd_map:
                self.xcd_remap()              # from the grid's tile count (seqlen_q still the longest)
            self.sequence_bounds()

    def sequence_bounds(self):
        """Group mode: this batch's lengths from the cumulative starts (ptr_qseq/ptr_kseq), its first
        rows from the padded starts (ptr_*seq_padding; aiter passes the same array when unpadded)."""
        A, X = ARG_SGPR, AITER_SGPR
        G.sequence_bounds(self.k, self.wg_batch, (X["qseq"], X["kseq"]), (X["qseq_pad"], X["kseq_pad"]),
                          (QSTART, KSTART), (A["seqlen_q"], A["seqlen_k"]), (s[84:85], s[82:83]), LSE_ROW)

    def kv_head(self):
        """HK = head / gqa: compiled in (natural arguments) or from s_gqa at run time (aiter)."""
        k, head = self.k, self.wg_head
        if self.aiter:
            G.divmod_uniform(k, HK, ST0, head, AITER_SGPR["gqa"], (TMP[0], TMP[1]), (ST1, KBASE))
        elif self.gqa == 1:
            k.s_mov_b32(HK, head)
        elif self.gqa & (self.gqa - 1) == 0:
            k.s_lshr_b32(HK, head, int(math.log2(self.gqa)))
        else:
            k.s_mul_hi_u32(HK, head, -(-(1 << 32) // self.gqa) & 0xFFFFFFFF)   # magic multiply, head < 2^16

    def xcd_remap(self):
        """Workgroup (x, y, z) computes fa_grid's work item. Batch mode (fa_grid.xcd_remap): each XCD runs
        whole heads, its L2 holds a head's K and V once. Group mode (fa_grid.xcd_remap_group): an XCD
        runs one head's tiles together."""
        k, A = self.k, ARG_SGPR
        heads = AITER_SGPR["q_head_num"] if self.aiter else self.num_heads
        G.tile_count(k, ST0, A["seqlen_q"], self.g.block_q, pairs=self.passes > 1)   # Q tiles or tile pairs
        remap = G.xcd_remap_group if self.group else G.xcd_remap
        remap(k, *((self.wg_head, self.wg_tile) if self.group else (self.wg_tile, self.wg_head)), ST0, heads,
              (ST1, KBASE, STEP), (TMP[0], TMP[1]), ".Lxcd_end")

    def setup(self):
        """Everything that does not depend on the Q tile: wave/lane ids, buffer resources, DMA M0s
        and offsets, LDS read bases."""
        k, A, g = self.k, ARG_SGPR, self.g
        head, batch = self.wg_head, self.wg_batch
        with k.region("setup"):
            k.v_readfirstlane_b32(WAVE, v[0])
            k.s_lshr_b32(WAVE, WAVE, 6)                          # wave = tid / 64, uniform
            k.v_and_b32(LANE, 63, v[0])
            if self.xcd_map and not self.group:
                self.xcd_remap()
            self.kv_head()
            # buffer resources; num_records = rows * row stride: rows past the end read 0 / drop stores
            if self.group:                                       # rows of this sequence: start row * stride
                qb, kb = (QSTART, A["q_ss"]), (KSTART, A["k_ss"])
                vb, ob = (KSTART, A["v_ss"]), (QSTART, A["o_ss"])
            else:
                qb, kb, vb, ob = ((batch, A[n]) for n in ("q_bs", "k_bs", "v_bs", "o_bs"))
            self.rsrc(RS_Q, A["q"], [qb, (head, A["q_hs"])], A["seqlen_q"], A["q_ss"])
            self.rsrc(RS_K, A["k"], [kb, (HK, A["k_hs"])], A["seqlen_k"], A["k_ss"])
            self.rsrc(RS_V, A["v"], [vb, (HK, A["v_hs"])], A["seqlen_k"], A["v_ss"])
            self.rsrc(RS_O, A["o"], [ob, (head, A["o_hs"])], A["seqlen_q"], A["o_ss"])
            # LSE, float32: natural [B, Hq, Sq] contiguous; aiter batch mode [B, Hq, Sq] with head stride
            # s_lse_Hs (batch stride Hq * s_lse_Hs: aiter passes none); group mode [Hq, total_q]
            if self.aiter:
                X = AITER_SGPR
                terms = G.lse_terms(k, self.group, batch, head, QSTART, X["q_head_num"], X["lse_hs"], LSE_ROW)
                self.rsrc(RS_LSE, A["lse"], terms, A["seqlen_q"], 4)
            else:
                k.s_mul_i32(ST1, batch, self.num_heads)
                k.s_add_u32(ST1, ST1, head)
                k.s_mul_i32(ST1, ST1, A["seqlen_q"])
                k.s_lshl_b32(ST1, ST1, 2)
                k.s_mov_b32(RS_LSE[0], A["lse"][0])
                k.s_mov_b32(RS_LSE[1], A["lse"][1])
                k.s_add_u32(RS_LSE[0], RS_LSE[0], ST1)
                k.s_addc_u32(RS_LSE[1], RS_LSE[1], 0)
                k.s_and_b32(RS_LSE[1], RS_LSE[1], 0xFFFF)
                k.s_lshl_b32(RS_LSE[2], A["seqlen_q"], 2)
                k.s_mov_b32(RS_LSE[3], RSRC_WORD3)
            k.s_lshl_b32(K_SS64, A["k_ss"], 6)
            k.s_lshl_b32(V_SS64, A["v_ss"], 6)
            # Q tiles of this sequence; causal diagonal: query i sees keys <= i + DIAG
            G.tile_count(k, NQT, A["seqlen_q"], g.block_q)
            if self.align == "bottom_right":
                k.s_sub_u32(DIAG, A["seqlen_k"], A["seqlen_q"])
            else:
                k.s_mov_b32(DIAG, 0)
            if ("k", 0, 0) not in self.m0_sgpr:
                k.s_lshl_b32(WAVE_1K, WAVE, 10)
            # M0 of every DMA: buffer base + 1 KiB * chunk (chunk = min(wave + waves*i, last))
            for tensor, bases, nch, ndma, cols in (("k", g.lds_k, g.k_chunks, g.k_dma, g.k_cols),
                                                   ("v", g.lds_v, g.v_chunks, g.v_dma, g.v_cols)):
                for i in range(ndma):
                    # fa_layouts.dma_m0: chunk wave + waves*i, or this wave's dump slot past the last chunk
                    k.s_add_u32(ST0, WAVE, g.waves * i)
                    if (tensor, 0, i) in self.m0_sgpr:
                        k.s_lshl_b32(ST1, ST0, 10)
                        for buf in range(len(bases)):
                            k.s_add_u32(self.m0_sgpr[tensor, buf, i], ST1, bases[buf])
                        k.s_cmp_ge_u32(ST0, nch)
                        k.s_cbranch_scc0(k.L(f".Lm0_{tensor}{i}"))
                        k.s_lshl_b32(ST1, WAVE, 10)
                        for buf in range(len(bases)):
                            k.s_add_u32(self.m0_sgpr[tensor, buf, i], ST1, g.lds_dump)
                        k.label(f".Lm0_{tensor}{i}")
                    dst = (self.K_DMA if tensor == "k" else self.V_DMA)[i]
                    self.dma_voffset(tensor, dst, cols)
                    if (tensor, 0, i) in self.m0_sgpr:                 # a dump DMA fetches nothing
                        k.s_add_u32(ST0, WAVE, g.waves * i)
                        k.s_cmp_lt_u32(ST0, nch)
                        k.s_cbranch_scc1(k.L(f".Lvoff_{tensor}{i}"))
                        k.v_mov_b32(dst, L.OUT_OF_RANGE)          # keeping vmcnt uniform costs no traffic
                        k.label(f".Lvoff_{tensor}{i}")
            self.lds_read_bases()
            k.v_mov_b32(NEG_INF, float("-inf"))

    def dma_voffset(self, tensor, dst, cols):
        """dst = per-lane global offset of the DMA chunk in ST0 (fa_layouts.dma_voffset)."""
        k, g = self.k, self.g
        slots = g.k_slots if tensor == "k" else g.v_slots
        magic, shift = L.DIV_MAGIC[slots]
        k.s_lshl_b32(ST1, ST0, 6)
        k.v_add_u32(TMP[0], ST1, LANE)                      # slot t = 64*chunk + lane
        k.v_mul_u32_u24(TMP[1], magic, TMP[0])
        k.v_lshrrev_b32(TMP[1], shift, TMP[1])              # row = t // slots
        k.v_mul_u32_u24(TMP[2], slots, TMP[1])
        k.v_sub_u32(TMP[2], TMP[0], TMP[2])                 # column slot
        k.v_cmp_le_u32(vcc, cols, TMP[2])                   # a padding slot: fetches nothing
        k.v_lshlrev_b32(TMP[2], 4, TMP[2])
        k.v_mul_lo_u32(dst, TMP[1], ARG_SGPR["k_ss" if tensor == "k" else "v_ss"])
        k.v_add_u32(dst, dst, TMP[2])
        k.v_mov_b32(TMP[4], L.OUT_OF_RANGE)
        k.v_cndmask_b32(dst, dst, TMP[4], vcc)

    def lds_read_bases(self):
        """Per-lane LDS read bases (fa_layouts.k_read_addr / v_read_addr); H4 = 4 * (lane // 32)."""
        k, g = self.k, self.g
        k.v_lshrrev_b32(H4, 5, LANE)
        k.v_lshlrev_b32(TMP[3], 4, H4)                              # 16 * (lane // 32)
        k.v_lshlrev_b32(H4, 2, H4)                                  # 4 * (lane // 32)
        k.v_and_b32(TMP[0], 31, LANE)
        k.v_mul_u32_u24(K_ADDR[0], g.k_stride, TMP[0])
        k.v_add_u32(K_ADDR[0], K_ADDR[0], TMP[3])
        k.v_add_u32(K_ADDR[1], g.lds_k[1], K_ADDR[0])
        k.v_lshrrev_b32(TMP[1], 5, LANE)                            # g // 2
        k.v_lshlrev_b32(TMP[1], 2, TMP[1])
        k.v_bfe_u32(TMP[2], LANE, 2, 2)                             # r
        k.v_add_u32(TMP[1], TMP[1], TMP[2])
        k.v_mul_u32_u24(V_ADDR[0], g.v_stride, TMP[1])
        k.v_bfe_u32(TMP[2], LANE, 4, 1)                             # g % 2
        k.v_lshlrev_b32(TMP[2], 5, TMP[2])
        k.v_and_b32(TMP[4], 3, LANE)                                # c
        k.v_lshlrev_b32(TMP[4], 3, TMP[4])
        k.v_add3_u32(V_ADDR[0], V_ADDR[0], TMP[2], TMP[4])
        k.v_add_u32(V_ADDR[1], g.lds_v[1], V_ADDR[0])
        for b in range(2, g.k_stages):
            k.v_add_u32(self.K_ADDR[b], g.lds_k[b], K_ADDR[0])
        for b in range(2, g.v_stages):
            k.v_add_u32(self.V_ADDR[b], g.lds_v[b], V_ADDR[0])
        k.v_add_u32(V_ADDR[0], g.lds_v[0], V_ADDR[0])

    def select_tile(self):
        """TILE of this pass, or a jump to .Lpass_end: one pass per workgroup (tile w), or with aiter's
        causal pairing (tg_div = 2, grid ceil(n/2)) tiles w and n-1-w (fa_grid.select_tile)."""
        G.select_tile(self.k, TILE, NQT, self.wg_tile, PASS if self.passes > 1 else None, (ST0, ST1), ".Lpass_end",
                      check_single=self.group)

    def tile_setup(self):
        """Per Q tile: first row, key-tile count, mask limits, per-lane Q/O/LSE offsets, softmax state."""
        k, A = self.k, ARG_SGPR
        with k.region("tile_setup"):
            k.s_lshl_b32(Q0, TILE, self.q_shift)
            k.s_lshl_b32(ST0, WAVE, 5)
            k.s_add_u32(Q0, Q0, ST0)                                    # q0 of this wave
            # number of 64-key tiles; causal: none fully past the tile's last row's diagonal (>= 1)
            k.s_add_u32(N_TILES, A["seqlen_k"], 63)
            k.s_lshr_b32(N_TILES, N_TILES, 6)
            if self.causal:
                k.s_lshl_b32(ST0, TILE, self.q_shift)
                k.s_add_u32(ST0, ST0, self.g.block_q)
                k.s_min_u32(ST0, ST0, A["seqlen_q"])
                k.s_add_i32(ST0, ST0, DIAG)
                k.s_max_i32(ST0, ST0, 1)
                k.s_add_u32(ST0, ST0, 63)
                k.s_lshr_b32(ST0, ST0, 6)
                k.s_min_u32(N_TILES, N_TILES, ST0)
                # a tile needs the mask when kbase + 64 > min(seqlen_k, q0 + 1 + DIAG) (signed)
                k.s_add_i32(ST0, Q0, 1)
                k.s_add_i32(ST0, ST0, DIAG)
                k.s_min_i32(MASK_LIMIT, A["seqlen_k"], ST0)
            else:
                k.s_mov_b32(MASK_LIMIT, A["seqlen_k"])
            k.s_max_u32(N_TILES, N_TILES, 1)                            # seqlen_k 0: one all-masked tile
            # per-lane query row and the Q / O / LSE offsets (fa_layouts.q_voffset / o_voffset)
            k.v_and_b32(TMP[0], 31, LANE)
            k.v_lshlrev_b32(TMP[3], 2, H4)                              # 16 * (lane // 32)
            k.v_add_u32(TMP[0], Q0, TMP[0])                             # q = q0 + lane % 32
            k.v_mul_lo_u32(Q_VOFF, TMP[0], A["q_ss"])
            k.v_add_u32(Q_VOFF, Q_VOFF, TMP[3])
            self.rows16_voffset(O_VOFF, A["o_ss"])
            k.v_lshlrev_b32(LSE_VOFF, 2, TMP[0])
            if self.causal:
                k.v_sub_u32(QLIM, TMP[0], H4)
                k.v_add3_u32(QLIM, 1, QLIM, DIAG)                        # key valid iff key <= q + DIAG
            k.v_mov_b32(M_RUN, FINITE_NEG)
            k.v_mov_b32(L_RUN, 0)
            k.v_mov_b32(TMP[5], A["scale"])
            k.v_mul_f32(TMP[5], LOG2E, TMP[5])                          # scale * log2(e)
        O, n_o = self.O, 16 * self.n_db
        with k.region("zero_o", expect={"valu": n_o}):
            for i in range(n_o):
                k.v_mov_b32(O[i], 0)
        g = self.g
        with k.region("load", expect={"vmem_load": self.q_loads,
                                      "lds_dma": g.k_stages * g.k_dma + (g.v_stages - 1) * g.v_dma}):
            self.load_q()
            # K_0 -> K buf0, K_min(1, n-1) -> K buf1, V_0 -> V buf0
            k.s_mov_b32(K_TILE_OFF, 0)
            for i in range(g.k_dma):
                self.dma("k", 0, i, K_TILE_OFF)
            k.s_min_u32(ST0, N_TILES, 2)
            k.s_sub_u32(ST0, ST0, 1)
            k.s_mul_i32(K_TILE_OFF, ST0, K_SS64)
            for i in range(g.k_dma):
                self.dma("k", 1, i, K_TILE_OFF)
            k.s_mov_b32(K_TILE_OFF, 0)
            for i in range(g.v_dma):
                self.dma("v", 0, i, K_TILE_OFF)
            for b in range(2, max(g.k_stages, g.v_stages)):     # deeper stages: K_min(b, n-1) -> K buf b, V_b-1 -> V buf b-1
                for tensor, tile, n, ss in (("k", b, g.k_dma, K_SS64), ("v", b - 1, g.v_dma, V_SS64)):
                    if tile + (tensor == "v") >= (g.k_stages if tensor == "k" else g.v_stages):
                        continue
                    k.s_min_u32(ST0, N_TILES, tile + 1)
                    k.s_sub_u32(ST0, ST0, 1)
                    k.s_mul_i32(K_TILE_OFF, ST0, ss)
                    for i in range(n):
                        self.dma(tensor, tile, i, K_TILE_OFF)
        if self.q_prescale:
            self.scale_q()
        self._first_qk()

    def rows16_voffset(self, dst, row_stride):
        """dst = fa_layouts.o_voffset: (q0 + lane % 16) * row_stride + 32 * ((lane // 16) % 2) + 16 * (lane // 32)
        (TMP[3] = 16 * (lane // 32) from tile_setup)."""
        k = self.k
        k.v_and_b32(TMP[1], 15, LANE)
        k.v_add_u32(TMP[1], Q0, TMP[1])                                 # q0 + lane % 16
        k.v_mul_lo_u32(dst, TMP[1], row_stride)
        k.v_bfe_u32(TMP[2], LANE, 4, 1)
        k.v_lshlrev_b32(TMP[2], 5, TMP[2])                              # 32 * ((lane // 16) % 2)
        k.v_add3_u32(dst, dst, TMP[2], TMP[3])

    def load_q(self):
        """Q as the B operand of Sᵀ = K·Qᵀ. Head dim 128: fa_layouts.load_q_regs, two dwordx4 per pair
        of k-steps (16 rows x 64 bytes each: half the 128-byte lines of one row per lane; q_permute puts
        the rows in place once they land); head dim 192 (Q in AGPRs, which permlanes cannot take): one
        dwordx4 per k-step at Q_VOFF (fa_layouts.q_voffset)."""
        k = self.k
        if self.g.d_qk != 128:
            for kk in range(self.g.k_steps):
                k.buffer_load_dwordx4(self.Q[4 * kk:4 * kk + 3], Q_VOFF, RS_Q, 0, offen=True, offset=L.q_imm(kk))
            return
        self.rows16_voffset(TMP[4], ARG_SGPR["q_ss"])
        k.s_lshl_b32(ST1, ARG_SGPR["q_ss"], 4)                           # set 1: 16 rows on
        for m in range(self.g.k_steps // 2):
            for st in range(2):
                k.buffer_load_dwordx4(self.Q[8 * m + 4 * st:8 * m + 4 * st + 3], TMP[4], RS_Q, ST1 if st else 0,
                                      offen=True, offset=L.o_imm(m))
        self.q_rows_pending = True

    def q_permute(self):
        """After load_q's loads landed (once): permlane16_swap of each pair of k-steps (load_q_regs)."""
        if not self.q_rows_pending:
            return
        self.q_rows_pending = False
        for m in range(self.g.k_steps // 2):
            for e in range(4):
                self.k.v_permlane16_swap_b32(self.Q[8 * m + e], self.Q[8 * m + 4 + e])

    def scale_q(self):
        """In-flight Q scaling: Q <- round(Q * scale*log2e), so S comes out in exp2 units."""
        k = self.k
        Q = self.Q
        with k.region("scale_q", expect={"valu": (160, 176)}):
            k.s_waitcnt(vmcnt=2 * self.g.k_dma + self.g.v_dma)          # Q landed
            self.q_permute()
            lo, hi = TMP[0], TMP[1]
            for i in range(32):
                if self.dtype == "bf16":
                    k.v_lshlrev_b32(lo, 16, Q[i])
                    k.v_and_b32(hi, 0xFFFF0000, Q[i])
                else:
                    k.v_cvt_f32_f16(lo, Q[i])
                    k.v_cvt_f32_f16_sdwa(hi, Q[i], src0_sel="WORD_1")
                k.v_mul_f32(lo, TMP[5], lo)
                k.v_mul_f32(hi, TMP[5], hi)
                k.instr(self.cvt_pk, Q[i], lo, hi)

    def _first_qk(self):
        k = self.k
        g = self.g
        k.s_waitcnt(vmcnt=(g.k_stages - 1) * g.k_dma + (g.v_stages - 1) * g.v_dma)    # K_0 landed (this wave's part)
        self.q_permute()                                                # (Q before it)
        k.s_barrier()                                                   # ... and every wave's
        with k.region("qk_first", expect={"mfma": 2 * g.k_steps, "ds_read": self.qk_reads}):
            self.qk_cluster(S[0:31], 0, softmax=None, dma=None)
        if self.split:                                                  # the split loop's entry state
            if self.qk_drain:
                k.s_nop(self.qk_drain)                                  # a longer MFMA's D -> the mask's VALU reads
            k.s_mov_b32(KBASE, 0)
            self.mask(S[0:31], "first")
            with k.region("softmax_first", expect={"exp": self.EXP_A}):
                k.s_nop(7)                                              # last Q·Kᵀ MFMA -> VALU reads of S
                self.fill(self.softmax_a(S[0:31]))
            k.s_waitcnt(vmcnt=(g.k_stages - 2) * g.k_dma + (g.v_stages - 2) * g.v_dma, lgkmcnt=0)   # K_1, V_0 landed
            k.s_barrier()
            if not self.pingpong:
                self.read_k_ahead(1)
            else:                                                       # K_min(2, n-1) -> K buffer 0
                k.s_min_u32(ST0, N_TILES, 3)
                k.s_sub_u32(ST0, ST0, 1)
                k.s_mul_i32(K_TILE_OFF, ST0, K_SS64)
                for i in range(g.k_dma):
                    self.dma("k", 0, i, K_TILE_OFF)

    # ---- clusters -----------------------------------------------------------------------------
    def qk_cluster(self, s_out, kbuf, softmax, dma, budget=0, preread=False):
        """2 x k_steps MFMAs Sᵀ = K·Qᵀ from K buffer kbuf (16 for head dim 128, 24 for 192); the K
        fragments are read 8 ahead into the 16 KV slots (slot f % 16: fragment f + 16 overwrites f
        after MFMA f has issued); `softmax` and `dma` are generators of independent instructions
        placed in the MFMA shadows. preread: the first 8 reads were issued already (pv_cluster's
        barrier hook)."""
        k, ks, Q = self.k, self.g.k_steps, self.Q
        if self.setprio:
            k.s_setprio(1)
        reads = [(kb, kk) for kb in range(2) for kk in range(ks)]
        n = len(reads)

        def read(f):
            self.read_k(reads[f], f % 16, kbuf)
        for f in range(0 if preread else 8):
            read(f)
        for f in range(n):
            issued = min(8 + f, n)
            k.s_waitcnt(lgkmcnt=issued - f - 1)
            kb, kk = reads[f]
            acc = s_out[16 * kb:16 * kb + 15]
            slot = KV[4 * (f % 16):4 * (f % 16) + 3]
            self.mfma(self.mfma_name, acc, slot, Q[4 * kk:4 * kk + 3], 0 if kk == 0 else acc)
            if f + 8 < n:
                read(f + 8)
            if f % self.DMA_EVERY == self.DMA_EVERY - 1:
                self.fill(dma, 3)
            if budget:
                self.feed(softmax, budget)    # budget: VALU-port cycles per MFMA
            else:
                self.fill(softmax, 144 // n)                # ~150 softmax instructions over the MFMAs
        self.fill(dma)
        self.fill(softmax)
        if self.setprio:
            k.s_setprio(0)

    def fill(self, gen, n=None):
        """Emit the next n made instructions of a generator (all that are left: n=None; no generator: nothing)."""
        gen = _Stream.of(gen)
        while gen is not None and (n is None or n > 0) and (inst := gen.pop()) is not None:
            self.k.emit(inst)
            n = None if n is None else n - 1

    def feed(self, gen, budget):
        """Emit instructions of `gen` (a _Stream) into the shadow of the MFMA just issued, in order, while
        their cycles (port_cycles) fit in `budget`; the first always goes (it fits no better later), and
        a second exp2 marked `doubled` (softmax_a, interleave_exps). An overrun delays the next MFMA,
        whose shadow is whole again: nothing carries over."""
        bal, placed = budget, False
        while (inst := gen.peek()) is not None:
            c = port_cycles(inst)
            if placed and c > bal and not getattr(inst, "doubled", False):
                return
            self.k.emit(gen.pop())
            bal -= c
            placed = True

    def read_k_op(self, frag, slot, kbuf):
        """K fragment (kb, kk) -> KV slot (one ds_read_b128), made."""
        kb, kk = frag
        inst = OP.ds_read_b128(KV[4 * slot:4 * slot + 3], self.K_ADDR[kbuf], offset=L.k_read_imm(kb, kk, self.g.k_stride))
        inst.lds_buffer = f"k{kbuf}"
        return inst

    def read_k(self, frag, slot, kbuf):
        self.k.emit(self.read_k_op(frag, slot, kbuf))

    PV_FRAGS = [(db, kk) for kk in range(4) for db in range(4)]   # alternate accumulators

    def read_v_ops(self, f, vbuf):
        """V fragment f (two ds_read_b64_tr_b16) into KV[4f:4f+3], made."""
        db, kk = self.PV_FRAGS[f]
        for t in range(2):
            inst = OP.ds_read_b64_tr_b16(KV[4 * f + 2 * t:4 * f + 2 * t + 1], self.V_ADDR[vbuf],
                                         offset=L.v_read_imm(db, kk, t))
            inst.lds_buffer = f"v{vbuf}"
            yield inst

    def read_v(self, f, vbuf):
        self.fill(self.read_v_ops(f, vbuf))

    def pv_cluster(self, p_regs, vbuf, prefetched=False, softmax=None, budget=0, hook=None, prio=True):
        """16 MFMAs Oᵀ += Vᵀ·Pᵀ; each V fragment is two ds_read_b64_tr_b16, read 7 fragments ahead
        (prefetched: all 16 already in KV, no LDS access here). hook = (f, fn): fn() is emitted after
        MFMA f (the split loop's barrier); prio=False: the caller sets the priority."""
        k = self.k
        if prio:
            self.prio(1)
        frags = self.PV_FRAGS
        ahead = 16 if prefetched else 7
        if not prefetched:
            for f in range(ahead):
                self.read_v(f, vbuf)
        for f in range(16):
            if not prefetched:
                issued = 2 * min(16, ahead + f)
                k.s_waitcnt(lgkmcnt=issued - 2 * f - 2)
            db, kk = frags[f]
            acc = O[16 * db:16 * db + 15]
            self.mfma(self.mfma_name, acc, KV[4 * f:4 * f + 3], p_regs[8 * kk:8 * kk + 3], acc)   # P_kk packed in place
            if f + ahead < 16:
                self.read_v(f + ahead, vbuf)
            if softmax is not None:
                self.feed(softmax, budget)    # split loop: softmax_a of the next tile
            if hook and f == hook[0]:
                hook[1]()
        self.fill(softmax)
        if prio:
            self.prio(0)

    # ---- softmax (generators of made instructions: OP, placed by the clusters) ------------------
    @streamed
    def softmax(self, X):
        yield from self.max_corr(X)
        yield from self.exp_args(X)
        yield OP.v_mul_f32(L_RUN, L_RUN, CORR)
        for i in range(32):
            yield OP.v_exp_f32(X[i], X[i])
        yield from self.row_sum(X)
        yield from self.pack_p(X)

    def exp_args(self, X):
        """S -> S*scale*log2e - m (or S - m with q_prescale), in place."""
        for i in range(32):
            if self.q_prescale:
                yield OP.v_sub_f32(X[i], X[i], M_RUN)
            else:
                yield OP.v_fma_f32(X[i], X[i], SCALE_C, -M_RUN)      # S*scale*log2e - m

    def row_sum(self, X):
        for i in range(32):
            yield OP.v_add_f32(L_RUN, L_RUN, X[i])

    def max_corr(self, X, exp_corr=True):
        """Row max of the tile X, then the lazy max update: m (exp2 units) moves, per row, only when the
        tile's max exceeds it by more than LAZY_THRESHOLD (any amount without lazy_rescale), to that
        max; LAZY != 0 when some row moved; CORR = m_new - m_old (0 where m stayed), exp_corr: CORR =
        exp2(m_old - m_new)."""
        # tile row max: one max3 chain over the lane's 32 accumulators, then the other lane half
        yield OP.v_max3_f32(T0, X[0], X[1], X[2])
        for i in range(3, 31, 2):
            yield OP.v_max3_f32(T0, T0, X[i], X[i + 1])
        yield OP.v_max_f32(M_TILE, T0, X[31])
        yield OP.v_max_f32(T0, T0, X[31])                            # a copy: the swap trades both
        yield OP.s_nop(1)                                            # VALU -> permlane: 2 wait states
        yield OP.v_permlane32_swap_b32(M_TILE, T0)                   # T0(lo) <- M(hi), M(hi) <- T0(lo)
        yield OP.v_max_f32(M_TILE, M_TILE, T0)                       # full row max in both halves
        if self.q_prescale:                                          # T0 = tile max - m, exp2 units
            yield OP.v_sub_f32(T0, M_TILE, M_RUN)
        else:
            yield OP.v_fma_f32(T0, M_TILE, SCALE_C, -M_RUN)
        yield OP.v_cmp_lt_f32(vcc, LAZY_THRESHOLD if self.lazy_rescale else 0.0, T0)
        if not self.q_prescale:
            yield OP.v_mul_f32(M_TILE, SCALE_C, M_TILE)              # to exp2 units (scale > 0)
        yield OP.s_mov_b64(LAZY, vcc if self.lazy_rescale else -1)   # the rescale branch's flag (no lazy: every step)
        if self.q_prescale:
            yield OP.s_nop(0)                                        # VALU writes VCC -> VALU reads it: 2 wait states
        # m moves to the tile max where it is above (m + threshold), not m + (tile max - m): with m at
        # FINITE_NEG the sum would cancel to 0
        yield OP.v_cndmask_b32(CORR, 0, T0, vcc)
        yield OP.v_cndmask_b32(M_RUN, M_RUN, M_TILE, vcc)
        if exp_corr:
            yield OP.v_exp_f32(CORR, -CORR)                          # corr = exp2(m_old - m_new)

    def pack_p(self, X):
        """P in place as the B operand of the P·V MFMAs (fa_layouts.pack_p): regs 8kk..8kk+3 become
        8 bf16 of keys, in the accumulators' key order (fa_layouts.p_key: V is read in it, so no lane
        exchange)."""
        for _, group in self.pack_groups(X):
            yield from group

    def pack_groups(self, X):
        """pack_p's instructions in groups (p, [instructions]) in order: a group reads X[0:2p+2] at most and
        writes only values the row sum has read once pair p (X[2p], X[2p+1]) is summed. Here one
        cvt_pk per group: X[8kk+e] <- pair 4kk+e, once that pair and X[8kk+e]'s own are summed."""
        return [(4 * kk + e, [getattr(OP, self.cvt_pk)(X[8 * kk + e], X[8 * kk + 2 * e], X[8 * kk + 2 * e + 1])])
                for kk in range(4) for e in range(4)]

    # ---- split softmax (the default loop of head dim 128): half a tile's softmax under each cluster --
    EXP_A = 16          # exp2s of a tile under the P·V cluster, the other 16 under Q·Kᵀ: VALU cycles balance

    @staticmethod
    def per_exp(budget):
        """VALU ops that fit beside one exp2 in an MFMA shadow of `budget` cycles."""
        return max(1, (budget - TRANS_CYCLES) // 4)

    @streamed
    def softmax_a(self, X, budget=28, shadows=None):
        """First half, under P·V of the previous tile, on a fresh (masked) Sᵀ tile X: row max, lazy
        max update, X = S*c - m two lanes' values per instruction, exp2 of X[0:EXP_A], each exp2 with
        the next exponent arguments beside it, two exp2s in a shadow when the row max leaves fewer
        `shadows` (MFMAs) than exp2s. Packed f32 VALU ops are full rate (MI355X data sheet: 157.3
        TFLOPS vector FP32 = 256 CU x 4 SIMD x 16 lanes x 2 (FMA) x 2 (packed) x 2.4 GHz)."""
        prefix = list(self.max_corr(X, exp_corr=False))      # corr's exp2 is in the (rare) rescale branch
        yield from prefix
        M2, SC2 = v[16:17], v[30:31]           # m = v16 (lo word), c = v31 (hi word), broadcast by op_sel
        if self.q_prescale:
            args = [OP.v_pk_add_f32(X[i:i + 1], X[i:i + 1], M2, op_sel_hi=[1, 0], neg_lo=[0, 1], neg_hi=[0, 1])
                    for i in range(0, 32, 2)]
        else:
            args = [OP.v_pk_fma_f32(X[i:i + 1], X[i:i + 1], SC2, M2, op_sel=[0, 1, 0], op_sel_hi=[1, 1, 0],
                                    neg_lo=[0, 0, 1], neg_hi=[0, 0, 1]) for i in range(0, 32, 2)]
        free = shadows - -(-sum(map(port_cycles, prefix)) // budget) if shadows else self.EXP_A
        doubles = max(0, min(self.EXP_A // 2, self.EXP_A - free))
        groups = [[2 * d, 2 * d + 1] for d in range(doubles)] + [[i] for i in range(2 * doubles, self.EXP_A)]
        per, done = self.per_exp(budget), 0
        if doubles:                            # the doubled exp2s' arguments first: nothing between the two
            yield from args[:doubles + 1]
            done = doubles + 1
        for g in groups:
            # the arguments of the group's exp2s out, and one more (a packed write -> VALU read: 1 wait state)
            while done < min(g[-1] // 2 + 2, 16):
                yield args[done]
                done += 1
            for n, i in enumerate(g):
                e = OP.v_exp_f32(X[i], X[i])
                e.doubled = n == 1
                yield e
            for _ in range(per if len(g) == 1 else 0):
                if done < 16:
                    yield args[done]
                    done += 1
        yield from args[done:]

    def sum_pack_ops(self, X):
        """The row sum (two lanes' values per v_pk_add_f32, alternating between the ROW_SUM pairs: pairs
        0+1 start the first, 2+3 the second) and the packing of P (pack_groups), in program order,
        each as (pairs it has read, instruction); pair p = X[2p], X[2p+1]."""
        acc, out = ROW_SUM, []
        groups = list(self.pack_groups(X))
        for p in range(1, 16):
            if p == 1:
                out.append((2, OP.v_pk_add_f32(acc[0], X[0:1], X[2:3])))
            elif p == 3:
                out.append((4, OP.v_pk_add_f32(acc[1], X[4:5], X[6:7])))
            elif p > 3:
                out.append((p + 1, OP.v_pk_add_f32(acc[p % 2], acc[p % 2], X[2 * p:2 * p + 1])))
            summed = 1 if p == 2 else p          # pairs 0..summed are in acc (pair 2 goes in with 3)
            while groups and groups[0][0] <= summed:
                out += [(p + 1, inst) for inst in groups.pop(0)[1]]
        return out

    @streamed
    def softmax_b(self, X, budget=28, shadows=None):
        """Second half, under the next tile's Q·Kᵀ: exp2 of X[EXP_A:32], each with up to per_exp(budget)
        of the row sum and P's packing (sum_pack_ops) whose inputs are out of earlier exp2s, two
        exp2s in each of the first shadows when there are more exp2s than `shadows` (MFMAs); then
        ROW_SUM folded into T0:T1 (added to l after the rescale branch)."""
        e0 = self.EXP_A
        fillers = [(max(0, 2 * pairs - e0), inst) for pairs, inst in self.sum_pack_ops(X)]
        fillers.append((32 - e0, OP.v_pk_add_f32(ROW_SUM[0], ROW_SUM[0], ROW_SUM[1])))
        doubles = max(0, 32 - e0 - shadows) if shadows else 0
        yield from interleave_exps([OP.v_exp_f32(X[i], X[i]) for i in range(e0, 32)], fillers, self.per_exp(budget), doubles)

    @streamed
    def dma_gen(self, kbuf, vbuf, order=("k", "v")):
        """K_{j+2} -> K buffer kbuf and V_{j+1} -> V buffer vbuf (tile offsets in SGPRs), in `order`."""
        bufs = {"k": (kbuf, K_TILE_OFF), "v": (vbuf, V_TILE_OFF)}
        for tensor in order:
            buf, off = bufs[tensor]
            for i in range(self.g.k_dma if tensor == "k" else self.g.v_dma):
                yield from self.dma_ops(tensor, buf, i, off)

    def mask(self, X, p, sfx=""):
        """S[key] = -inf where key >= seqlen_k or (causal) key > q: one compare per accumulator
        against t = min(seqlen_k - kbase, q + 1 - kbase) - 4*(lane//32) (fa_layouts.mask_const)."""
        k = self.k
        skip, partial = f".Lskip_mask_{p}{sfx}", f".Lpartial_mask_{p}{sfx}"
        k.s_add_u32(ST0, KBASE, 64)
        k.s_cmp_le_i32(ST0, MASK_LIMIT)                               # signed: bottom-right limits go < 0
        k.s_cbranch_scc1(k.L(skip))
        # no key of the tile is valid for any of the wave's rows (the last row's limit is the first's
        # + 31, or seqlen_k): the past-the-end steps and a causal wave's steps past its diagonal
        k.s_add_i32(ST0, MASK_LIMIT, 31)
        k.s_min_i32(ST0, ST0, ARG_SGPR["seqlen_k"])
        k.s_cmp_lt_i32(KBASE, ST0)
        k.s_cbranch_scc1(k.L(partial))
        with k.region("mask_all", expect={"valu": 16}):
            for i in range(0, 32, 2):                                 # S = (-inf, -inf): NEG_INF is v23, hi of v[22:23]
                k.v_pk_mov_b32(X[i:i + 1], v[22:23], v[22:23], op_sel=[1, 1])
        k.s_branch(k.L(skip))
        k.label(partial)
        self.mask_tile(X)
        k.label(skip)

    def mask_tile(self, X):
        """mask()'s compares and selects, unconditionally."""
        k = self.k
        with k.region("mask", expect={"valu": 64 + (3 if self.causal else 1)}):
            k.s_sub_u32(ST0, ARG_SGPR["seqlen_k"], KBASE)
            k.v_sub_u32(MASK_T, ST0, H4)
            if self.causal:
                k.v_subrev_u32(T0, KBASE, QLIM)
                k.v_min_i32(MASK_T, MASK_T, T0)
            cols = [(kb, r) for kb in range(2) for r in range(16)]
            # three mask registers in rotation: VALU SGPR write -> VALU read needs 2 wait states
            order = []
            for i in range(3):
                order.append(("cmp", i))
            for i in range(32):
                order.append(("sel", i))
                if i + 3 < 32:
                    order.append(("cmp", i + 3))
            for op, i in order:
                kb, r = cols[i]
                msk = MASK_SG[i % 3]
                if op == "cmp":
                    k.v_cmp_lt_i32(msk, L.mask_const(r, kb), MASK_T)
                else:
                    k.v_cndmask_b32(X[16 * kb + r], NEG_INF, X[16 * kb + r], msk)

    # ---- the loop -----------------------------------------------------------------------------
    def body(self, p, group_b=False):
        """One 64-key step with S_cur = S half p; K_{j+1} in K buffer 1-p, V_j in V buffer p.
        group_b: the lagging wave group of the staggered kernel (see build()): V_j is read into
        VGPRs before the 2nd barrier, and its DMAs must land half a phase earlier."""
        k = self.k
        sfx = "_b" if group_b else ""
        tight = group_b and self.b_waits
        guard = group_b and self.v_guard
        cur, nxt = S[32 * p:32 * p + 31], S[32 * (1 - p):32 * (1 - p) + 31]
        with k.region(f"step{p}"):
            k.s_lshl_b32(KBASE, STEP, 6)
            self.mask(cur, p, sfx)
            self.tile_offsets()         # DMA tiles of this step: K two ahead, V one ahead
            # K_{j+1} landed (V_j may still fly); group B: V_j too -- group A reads it after this
            # barrier, and so does B's own V prefetch before the next one
            nk, nv = self.g.k_dma, self.g.v_dma
            k.s_waitcnt(vmcnt=0 if tight or guard else nv)
            k.s_barrier()                     # every wave: K_{j+1} in LDS, done with step j-1's buffers
            exp_n, nqk = 33, 2 * self.g.k_steps
            with k.region("qk_softmax", expect={"mfma": nqk, "ds_read": self.qk_reads, "lds_dma": nk + nv, "exp": exp_n,
                                                 "valu": self.softmax_valu}):
                self.qk_cluster(nxt, 1 - p, softmax=self.softmax(cur), dma=self.dma_gen(p, 1 - p))
            if guard:                         # V_j -> KV now: after the barrier group A overwrites V buffer p
                with k.region("v_prefetch", expect={"ds_read": 32}):
                    for f in range(16):
                        self.read_v(f, p)
            skip = f".Lskip_rescale_{p}{sfx}"
            k.s_cmp_lg_u64(LAZY, 0)
            k.s_cbranch_scc0(k.L(skip))
            with k.region("rescale_o", expect={"valu": 64}):
                for i in range(64):
                    k.v_mul_f32(O[i], CORR, O[i])
            k.label(skip)
            if guard:
                k.s_waitcnt(lgkmcnt=0)        # the reads are done before anyone may overwrite V buffer p
            # V_j landed (K_{j+2}, V_{j+1} may still fly); group B: K_{j+2} too -- A reads it after this barrier
            k.s_waitcnt(vmcnt=nv if tight else nk + nv)
            k.s_barrier()
            with k.region("pv", expect={"mfma": self.pv_mfmas, "ds_read": 0 if guard else self.pv_reads}):
                self.pv_cluster(cur, p, prefetched=guard)
            k.s_add_u32(STEP, STEP, 1)
            k.s_cmp_lt_u32(STEP, N_TILES)

    # ---- the ping-pong loop (split softmax; the default of head dim 128) --------------------------
    BUDGET = 28         # VALU-port cycles placed after each MFMA of a cluster (32-cycle MFMA, 4 of them its issue)

    def loop_pp(self):
        """Group B (waves 4-7) runs one phase behind group A (waves 0-3): B passes one extra barrier
        before the loop, A one after it, so both pass 4 * n_tiles + 1 and A's barrier i meets B's
        barrier i-1. Waves w and w+4 share a SIMD: in every phase one of them runs an MFMA cluster
        while the other reads LDS (body_pp)."""
        k = self.k
        k.s_cmp_ge_u32(WAVE, 4)
        k.s_cbranch_scc0(k.L(".Lpp_a"))
        k.s_barrier()                         # B: meets A's first loop barrier
        k.label(".Lpp_a")
        self.loop()
        k.s_cmp_lt_u32(WAVE, 4)
        k.s_cbranch_scc0(k.L(".Lpp_end"))
        k.s_barrier()                         # A: meets B's last loop barrier
        k.label(".Lpp_end")

    def body_pp(self, p):
        """One 64-key step: S half p holds S_j (softmax_a done), K_{j+1} in K buffer 1-p, V_j in V
        buffer p. Four phases, a barrier after each:
            read K_{j+1} -> KV;  then DMA V_{j+1} -> V buffer 1-p
            Q·Kᵀ_{j+1} ║ softmax_b(S_j) -> P_j
            read V_j -> KV;  then DMA K_{j+3} -> K buffer 1-p;  P_j's last packing;  O, l *= corr_j
                (lazy), l += row sum of P_j;  mask S_{j+1}
            P·V_j ║ softmax_a(S_{j+1})
        An MFMA phase is its 16 MFMAs and the softmax half in their shadows, nothing after: what
        does not fit (the last exp2's row sum and packing), the rescale branch and the mask checks
        run in the wave's next phase, a read phase, where the wave has turns to spare, while the
        other wave's MFMAs run.
        A read phase issues its LDS reads before its DMAs: the reads are what the next phase's MFMAs
        wait for, while the DMAs land two read phases later; the four waves' DMAs queue on the CU's
        one vector-memory port, and issued first they held the reads behind them (in-order issue).
        Phases of the two groups (A one ahead): X = A's phase, B runs the phase before it.
          A: read K_{j+1} | QK_{j+1} | read V_j  | PV_j
          B: PV_{j-1}     | read K_{j+1} | QK_{j+1} | read V_j
        LDS: K_{j+1} is read in A's and B's read-K phases (phases 1 and 2 of step j) and refilled
        with K_{j+3} in the read-V phases (3 and 4); V_j is read in phases 3 and 4 of step j and
        refilled with V_{j+2} in phases 1 and 2 of step j+1. Every read phase ends with lgkmcnt(0)
        before its barrier. Landing: after each read phase a wave waits vmcnt(6), i.e. for what it
        DMA'd two read phases earlier: after read-K(j) its V_j (read by A after the next barrier,
        phase 3), after read-V(j) its K_{j+2} (read by A from phase 1 of step j+1). K_2 is DMA'd
        after the prologue's last barrier (its buffer held K_0)."""
        k = self.k
        cur, nxt = S[32 * p:32 * p + 31], S[32 * (1 - p):32 * (1 - p) + 31]
        nk, nv = self.g.k_dma, self.g.v_dma
        with k.region(f"step{p}", expect={"mfma": 32, "exp": 33, "ds_read": 48, "lds_dma": nk + nv}):   # exp: + corr's
            with k.region("read_k"):
                for f in range(16 - nv):
                    self.read_k((f // 8, f % 8), f, 1 - p)
                self.tile_offsets(k_ahead=3)
                for i, f in enumerate(range(16 - nv, 16)):     # a K read is the wait state M0 -> LDS-DMA
                    self.set_m0("v", 1 - p, i)
                    self.read_k((f // 8, f % 8), f, 1 - p)
                    self.dma_load("v", 1 - p, i, V_TILE_OFF)
                k.s_waitcnt(vmcnt=nk + nv, lgkmcnt=0)
            self.prio(1)                                       # the MFMA phase's priority, set while waiting
            k.s_barrier()
            rest = self.softmax_b(cur, self.BUDGET, shadows=16)
            with k.region("qk_softmax"):
                self.qk_regs(nxt, rest, prio=False)
            k.s_barrier()
            self.prio(0)                                       # dropped once past the barrier
            with k.region("read_v"):
                for f in range(16 - nk):
                    self.read_v(f, p)
                for i, f in enumerate(range(16 - nk, 16)):     # V reads: the wait state M0 -> LDS-DMA
                    self.set_m0("k", 1 - p, i)
                    self.read_v(f, p)
                    self.dma_load("k", 1 - p, i, K_TILE_OFF)
                self.fill(rest)                                # what did not fit under the MFMAs
                self.rescale_o_split(p)
                k.s_add_u32(ST0, STEP, 1)
                k.s_lshl_b32(KBASE, ST0, 6)
                self.mask(nxt, p)
                k.s_waitcnt(vmcnt=nk + nv, lgkmcnt=0)
            self.prio(1)
            k.s_barrier()
            with k.region("pv"):
                self.pv_cluster(cur, p, prefetched=True, softmax=self.softmax_a(nxt, self.BUDGET, shadows=16),
                                budget=self.BUDGET, prio=False)
            k.s_barrier()
            self.prio(0)
            k.s_add_u32(STEP, STEP, 1)
            k.s_cmp_lt_u32(STEP, N_TILES)

    def prio(self, level):
        """s_setprio (with setprio=True): 1 while a wave runs an MFMA cluster, so the other wave of its
        SIMD (reading LDS) takes the VALU port only where the MFMAs leave it free."""
        if self.setprio:
            self.k.s_setprio(level)

    def qk_regs(self, s_out, softmax, prio=True):
        """16 MFMAs Sᵀ = K·Qᵀ from the K fragments in KV (slot f = kb * 8 + kk), `softmax` in their
        shadows (what is left of it stays for the caller); prio=False: the caller sets the priority."""
        k, Q = self.k, self.Q
        if prio:
            self.prio(1)
        for f in range(16):
            kb, kk = f // 8, f % 8
            acc = s_out[16 * kb:16 * kb + 15]
            self.mfma(self.mfma_name, acc, KV[4 * f:4 * f + 3], Q[4 * kk:4 * kk + 3], 0 if kk == 0 else acc)
            self.feed(softmax, self.BUDGET)
        if prio:
            self.prio(0)

    def tile_offsets(self, k_ahead=2, v_ahead=1):
        """K_TILE_OFF / V_TILE_OFF: byte offsets of K_{j+k_ahead} and V_{j+v_ahead}, clamped to the last
        tile so every wave's vmcnt stays uniform."""
        k = self.k
        k.s_add_u32(ST0, STEP, k_ahead)
        k.s_sub_u32(ST1, N_TILES, 1)
        k.s_min_u32(ST0, ST0, ST1)
        k.s_mul_i32(K_TILE_OFF, ST0, K_SS64)
        k.s_add_u32(ST0, STEP, v_ahead)
        k.s_min_u32(ST0, ST0, ST1)
        k.s_mul_i32(V_TILE_OFF, ST0, V_SS64)

    def body_split(self, r, copy=None):
        """One 64-key step j of the split loop, r = j mod the loop's period: S half p = r % 2 holds S_j
        with softmax_a done (O not yet rescaled by its corr); with nk K and nv V buffers in LDS
        (fa_layouts.Geometry.k_stages, v_stages: two each for head dim 128), K_{j+1} is in K buffer
        (r+1) % nk and V_j in V buffer r % nv.
            Q·Kᵀ_{j+1} ║ softmax_b(S_j) -> P_j;  O *= corr_j (lazy);  mask S_{j+1};  P·V_j ║ softmax_a(S_{j+1})
        The Q·Kᵀ cluster DMAs K_{j+nk} into K_j's buffer r % nk and V_{j+nv-1} into V_{j-1}'s buffer
        (r+nv-1) % nv: both last read before the previous step's barrier.
        The last step's S_n (K clamped to the last tile) lies past every row's last key, so the mask
        sets it to -inf and its softmax_a leaves m, l and corr unchanged (corr = 1, no rescale).
        copy (mask_loop, see loop()): "hot" has no mask code and jumps to the "masked" copy's
        .Lmasked_p when S_{j+1} needs one; "masked" masks unconditionally from there on."""
        k, nks, nvs = self.k, self.g.k_stages, self.g.v_stages
        p = r % 2
        cur, nxt = S[32 * p:32 * p + 31], S[32 * (1 - p):32 * (1 - p) + 31]
        nk, nv = self.g.k_dma, self.g.v_dma
        nqk, ahead = 2 * self.g.k_steps, self.K_AHEAD
        with k.region(f"step{r}" + ("m" if copy == "masked" else "")):
            self.tile_offsets(nks, nvs - 1)
            with k.region("qk_softmax", expect={"mfma": nqk, "ds_read": self.qk_reads - ahead, "lds_dma": nk + nv,
                                                 "exp": 32 - self.EXP_A}):
                self.qk_cluster(nxt, (r + 1) % nks, softmax=self.softmax_b(cur, self.SPLIT_BUDGET[0]),
                                dma=self.dma_gen(r % nks, (r + nvs - 1) % nvs, self.dma_order),
                                budget=self.SPLIT_BUDGET[0], preread=True)
            self.rescale_o_split(r, "m" if copy == "masked" else "")
            k.s_add_u32(ST0, STEP, 1)
            k.s_lshl_b32(KBASE, ST0, 6)
            if copy is None:
                self.mask(nxt, r)
            elif copy == "hot":                                       # masks are monotone in the key tile
                k.s_add_u32(ST0, KBASE, 64)
                k.s_cmp_le_i32(ST0, MASK_LIMIT)
                k.s_cbranch_scc0(k.L(f".Lmasked_{r}"))
            else:
                k.label(f".Lmasked_{r}")
                self.mask_tile(nxt)
            with k.region("pv", expect={"mfma": self.pv_mfmas, "ds_read": self.pv_reads + ahead, "exp": self.EXP_A}):
                self.pv_cluster(cur, r % nvs, softmax=self.softmax_a(nxt, self.SPLIT_BUDGET[1]), budget=self.SPLIT_BUDGET[1],
                                hook=(self.PV_BARRIER, lambda: self.step_barrier((r + 2) % nks)))
            k.s_add_u32(STEP, STEP, 1)
            k.s_cmp_lt_u32(STEP, N_TILES)

    def _barrier_in_flight(self):
        """DMAs the split loop's barrier in step j lets fly: those issued after the last one of K_{j+2}
        and V_{j+1} (which the reads after it need), in issue order (steps j-3..j, dma_order in each)."""
        g = self.g
        seq = [(t == "k" and s + g.k_stages <= 2 or t == "v" and s + g.v_stages - 1 <= 1, g.k_dma if t == "k" else g.v_dma)
               for s in range(-3, 1) for t in self.dma_order]
        last = max(i for i, (need, _) in enumerate(seq) if need)
        return sum(n for _, n in seq[last + 1:])

    def rescale_o_split(self, p, sfx=""):
        """When the lazy max moved (uniform branch): corr = exp2(m_old - m_new), l and O *= corr (two
        accumulators per v_pk_mul_f32); then l += this tile's row sum (T0 + T1, from softmax_b)."""
        k = self.k
        skip = f".Lskip_rescale_{p}{sfx}"
        k.s_cmp_lg_u64(LAZY, 0)
        k.s_cbranch_scc0(k.L(skip))
        with k.region("rescale_o", expect={"valu": 34, "exp": 1}):
            k.v_exp_f32(CORR, -CORR)                                    # CORR = m_new - m_old (max_corr)
            k.s_nop(0)                                                  # TRANS result -> VALU read
            k.v_mul_f32(L_RUN, L_RUN, CORR)
            for i in range(0, 64, 2):
                k.v_pk_mul_f32(O[i:i + 1], O[i:i + 1], v[18:19], op_sel_hi=[1, 0])     # corr = v18
        k.label(skip)
        k.v_add_f32(L_RUN, L_RUN, T0)
        k.v_add_f32(L_RUN, L_RUN, T1)

    DMA_EVERY = 2             # qk_cluster issues one DMA (3 instructions) after every DMA_EVERY-th MFMA
    SPLIT_BUDGET = (28, 32)   # body_split's VALU-port cycles fed per MFMA under Q·Kᵀ and under P·V
    PV_BARRIER = 15     # the split loop's barrier follows this P·V MFMA: the K reads after it overlap the last 4
    K_AHEAD = 8         # ds_reads of the next Q·Kᵀ's K fragments issued after that barrier (read_k_ahead)

    def step_barrier(self, kbuf):
        """The split loop's one barrier per step, inside P·V_j: every wave's K_{j+2} and V_{j+1} DMAs
        landed (with deeper stages the later DMAs may fly: _barrier_in_flight) and its V_j reads done, so
        after it the next Q·Kᵀ may read K_{j+2} from K buffer kbuf (the first 8 fragments are read at
        once, under the last P·V MFMAs) and the next step's DMAs may refill K_{j+1}'s and V_j's buffers."""
        k = self.k
        k.s_waitcnt(vmcnt=self.in_flight, lgkmcnt=0)
        k.s_barrier()
        self.read_k_ahead(kbuf)

    def read_k_ahead(self, kbuf):
        """The first 8 K fragments of the next Q·Kᵀ (K_AHEAD reads) into KV slots 0..7."""
        for f in range(8):
            self.read_k((f // self.g.k_steps, f % self.g.k_steps), f, kbuf)

    def o_scale(self):
        """CORR = the factor O is multiplied by before the store (1 / row sum); a hook for fp8's V descale."""

    def epilogue(self):
        k = self.k
        with k.region("epilogue"):
            k.v_mov_b32(T0, L_RUN)
            k.s_nop(1)
            k.v_permlane32_swap_b32(L_RUN, T0)
            k.v_add_f32(L_RUN, L_RUN, T0)                               # row sum over both lane halves
            k.v_rcp_f32(CORR, L_RUN)
            k.v_cmp_eq_f32(vcc, 0, L_RUN)                              # a row with no valid key: O = 0
            k.s_nop(1)
            k.v_cndmask_b32(CORR, CORR, 0, vcc)
            self.o_scale()
            k.s_nop(8)                                                  # last PV MFMA -> VALU read of O
            O, nb = self.O, self.n_db
            for i in range(0, 16 * nb, 2):                              # two accumulators per op, CORR = v18 both
                k.v_pk_mul_f32(O[i:i + 1], O[i:i + 1], v[18:19], op_sel_hi=[1, 0])
            k.s_lshl_b32(ST1, ARG_SGPR["o_ss"], 4)                     # 16 rows: the second set's soffset
            with k.region("store_o", expect={"vmem_store": 2 * nb, "valu": 16 * nb}):
                for db in range(nb):                                    # fa_layouts.pack_o / o_voffset
                    sets = (O[16 * db:16 * db + 3], O[16 * db + 8:16 * db + 11])
                    for c in range(2):
                        base = 16 * db + 8 * c
                        for e in range(4):
                            k.instr(self.cvt_pk, O[base + e], O[base + 2 * e], O[base + 2 * e + 1])
                        k.s_nop(1)
                        k.v_permlane32_swap_b32(O[base], O[base + 2])
                        k.v_permlane32_swap_b32(O[base + 1], O[base + 3])
                    k.s_nop(1)
                    for e in range(4):                                  # set s: rows 16s..16s+15, 64 bytes each
                        k.v_permlane16_swap_b32(sets[0][e], sets[1][e])
                    for st in range(2):
                        k.buffer_store_dwordx4(sets[st], O_VOFF, RS_O, ST1 if st else 0, offen=True, offset=L.o_imm(db))
            k.s_cmp_eq_u32(ARG_SGPR["has_lse"], 0)
            k.s_cbranch_scc1(k.L(".Ldone"))
            with k.region("store_lse", expect={"vmem_store": 1}):
                k.v_log_f32(T0, L_RUN)
                k.s_nop(0)
                k.v_add_f32(T0, M_RUN, T0)
                k.v_mul_f32(T0, LN2, T0)                                 # natural-log LSE of scale*S
                k.s_mov_b32(exec_hi, 0)                                 # lanes 0..31 hold each query once
                k.buffer_store_dword(T0, LSE_VOFF, RS_LSE, 0, offen=True)
                if self.passes > 1:
                    k.s_mov_b32(exec_hi, -1)
            k.label(".Ldone")

    def loop(self, group_b=False):
        k, sfx = self.k, "_b" if group_b else ""
        k.s_mov_b32(STEP, 0)
        k.label(f".Lloop{sfx}")
        body = self.body_pp if self.pingpong else self.body_split if self.split else (lambda q: self.body(q, group_b))
        if self.mask_loop:
            body = lambda q: self.body_split(q, "hot")           # noqa: E731
        # S ping-pongs (period 2); the split loop's K and V buffers rotate with periods k_stages, v_stages
        phases = math.lcm(2, self.g.k_stages, self.g.v_stages) if self.split and not self.pingpong else 2
        assert phases == 2 or not self.mask_loop, "mask_loop's masked copy is two steps long"
        for r in range(phases - 1):
            body(r)
            k.s_cbranch_scc0(k.L(f".Ltail{sfx}"))
        body(phases - 1)
        k.s_cbranch_scc1(k.L(f".Lloop{sfx}"))
        if self.mask_loop:
            # the steps whose S_{j+1} needs the mask (the last ones: kbase only grows), entered mid-step
            k.s_branch(k.L(f".Ltail{sfx}"))
            k.label(".Lmloop")
            self.body_split(0, "masked")
            k.s_cbranch_scc0(k.L(f".Ltail{sfx}"))
            self.body_split(1, "masked")
            k.s_cbranch_scc1(k.L(".Lmloop"))
        k.label(f".Ltail{sfx}")
        if self.split and not self.pingpong:
            k.s_waitcnt(lgkmcnt=0)            # the last step's K reads ahead: done before LDS is reused

    def one_tile(self):
        k = self.k
        self.select_tile()
        self.tile_setup()
        if self.pingpong:
            self.loop_pp()
        elif not self.stagger:
            self.loop()
        else:
            # waves 0-3 (A) lead, waves 4-7 (B) lag one barrier: A's barrier n meets B's barrier n-1
            k.s_cmp_ge_u32(WAVE, 4)
            k.s_cbranch_scc1(k.L(".Lgroup_b"))
            self.loop()
            k.s_barrier()                     # A's extra barrier: meets B's last one
            k.s_branch(k.L(".Lepilogue"))
            k.label(".Lgroup_b")
            if self.b_wait_start:
                k.s_waitcnt(vmcnt=3)          # B's share of K_1 landed: A reads K_1 after this barrier
            k.s_barrier()                     # B's extra barrier: meets A's first loop barrier
            self.loop(group_b=True)
            k.label(".Lepilogue")
        self.epilogue()

    def build(self):
        k = self.k
        self.load_args()
        self.setup()
        # the second tile reuses LDS: every wave past its reads; a wave's DMAs into its own chunks land
        # in order, and a store has its data once issued, so nothing waits for memory between passes
        G.pass_loop(k, PASS, self.passes, self.one_tile, end_label=self.group)
        k.s_waitcnt(vmcnt=0)              # the last (clamped) LDS-DMAs land before the workgroup's LDS is freed
        k.s_endpgm()
        return k


def build(dtype="bf16", causal=False, num_heads=8, num_kv_heads=8, aiter_args=False, *, lazy_rescale=True,
          setprio=True, q_prescale=False, stagger=False, group=False, align=None, head_dim=128,
          split=None, pingpong=True, xcd_map=None) -> Kernel:
    """The attention forward kernel (see the module docstring for the pipeline and limits).

    head_dim: of Q and K, 128 or 192 (aiter's hd192/hd128 keys); V and O have head dim 128.  Head
    dim 192 runs 4 waves (256 threads, a 128-row Q tile: aiter's launch and ts_qo for that key),
    24 Q·Kᵀ MFMAs per 64 keys, Q in AGPRs; the rest of the pipeline is the same.

    aiter_args=True: aiter's calling convention (client/aiter_src/fmha_fwd_v3_args.h, the 656-byte
    struct, and mha_fwd_v3_host.inc's grid): every field that changes the result is read at run
    time -- byte strides of q/k/v/o (row, head, batch), s_gqa (num_heads/num_kv_heads are then
    ignored), s_seq_len / s_kv_seq_len, s_lse and s_lse_Hs (LSE [B, Hq, Sq] with batch stride
    s_q_head_num * s_lse_Hs; group mode [Hq, total_q]), scale.  Grid (ceil(n_tiles / tg_div), Hq, B);
    causal launches have tg_div = 2 and each workgroup w does Q tiles w and n-1-w.  group=True is
    aiter's varlen mode: grid (Hq, B, tiles), rows of sequence b start at ptr_*seq_padding[b] (or
    ptr_*seq[b]) and it has ptr_*seq[b+1] - ptr_*seq[b] of them.  s_Ts (= 256 * s_Seqs), s_opt (a
    tuning hint) and the head-dim fields (fixed at 128 here) are not needed.
    align: the causal diagonal, "top_left" (torch: query i sees keys 0..i) or "bottom_right" (CK
    mask 2: keys 0..i + Sk - Sq; a query that sees no key gives O = 0, LSE = -inf); the default is
    bottom_right with aiter_args (aiter's causal key is mask 2), top_left otherwise.

    xcd_map (default on): batch mode, workgroup (x, y) of a batch computes the work item fa_grid.xcd_item
    gives, so each XCD runs whole heads and its L2 holds a head's K and V once; group mode, the item
    fa_grid.xcd_item_group gives, so an XCD runs one head's tiles together (_Builder.xcd_remap); the
    grid stays aiter's. False: workgroup (x, y, z) computes tile x of head y (group mode: tile z of
    head x).

    q_prescale=True folds scale*log2(e) into Q when Q is loaded (Q rounded back to bf16/f16);
    the default applies it in the exponent instead, v_fma_f32(S, c, -m) in place of v_sub_f32(S, m):
    the same VALU count, without the extra rounding of Q (which costs ~u*|S| absolute in every
    score: 0.03 in log2 units for |S·log2e| ~ 20, see tests/test_fa_fwd.py).

    split (default: without stagger): the loop with the softmax split over both MFMA
    clusters (module docstring); pingpong (default True with split): its four-phase schedule with
    waves 4-7 a phase behind waves 0-3 (race-freedom argument in _Builder.body_pp); False: all waves
    in phase, one barrier per step (head dim 192: always, one wave per SIMD). split=False: the loop
    below (stagger).

    stagger=True (opt-in) runs the wave groups A = waves 0-3 and B = waves 4-7 half a phase apart:
    B passes one extra s_barrier before the loop, A one before the epilogue, so both execute
    1 + 2*n_tiles + 1 barriers and A's loop barrier n meets B's barrier n-1.  Waves w and w+4 share
    a SIMD, so one group's 16 PV MFMAs run beside the other's Q·Kᵀ MFMAs + softmax VALU.
    Barriers of step j: B1_j (before qk_softmax), B2_j (before pv).  Epochs between global
    barriers, with what each group reads (R) and what its DMA writes (W); Kb/Vb = K/V buffer:

      epoch                      group A                          group B
      B0 .. (A B1_0|B Bx)        R Kb0 (K_0)                      R Kb0 (K_0)
      X_j: (A B1_j|B B2_j-1) ..  qk_softmax_j: R Kb(j+1)%2         pv_j-1 MFMAs from VGPRs: no LDS
                                 W Kb j%2 (K_j+2), Vb(j+1)%2 (V_j+1)   (default pv would R Vb(j+1)%2: race)
      Y_j: (A B2_j|B B1_j) ..    pv_j: R Vb j%2                   qk_softmax_j: R Kb(j+1)%2, W Kb j%2,
                                                                  Vb(j+1)%2; then R Vb j%2 (V_j -> VGPRs)
      (A Bend|B B2_n-1) ..       epilogue: no LDS                 pv_n-1 from VGPRs: no LDS

    In every epoch the buffers read and written are disjoint, and each buffer's last read is a
    barrier before its next write, so the two K and two V buffers suffice; what changes is
      * V in VGPRs: in X_j A's DMA overwrites V buffer (j+1)%2, which B's pv_j-1 would still read,
        so B reads all 16 V fragments (the whole KV region, free after the Q·Kᵀ MFMAs) before B2_j-1,
        then s_waitcnt lgkmcnt(0); its pv cluster touches no LDS;
      * B's DMA waits: B issues DMAs half a phase after A, and A reads them one barrier earlier
        than in the default: B waits vmcnt(3) before B2_j (its K_j+2 landed: A reads it in X_j+1),
        vmcnt(0) before B1_j (its V_j landed: A reads it in Y_j, B's prefetch too), and vmcnt(3)
        before its extra barrier (K_1).  A's waits are the default ones (B reads A's tiles later).
    Group A runs the default loop body; the default kernel's instruction stream is unchanged."""
    return _Builder(dtype, causal, num_heads, num_kv_heads, aiter_args, lazy_rescale, setprio, q_prescale,
                    stagger, group, align, head_dim, split, pingpong, xcd_map).build()


def kernel_args(kern: Kernel, q, k, v, out, lse, scale, causal):
    """Natural-layout argument values in the kernel's declared order (strides in bytes)."""
    b16 = 2
    vals = {"o": out, "q": q, "k": k, "v": v, "lse": lse, "scale": float(scale),
            "seqlen_q": q.shape[2], "seqlen_k": k.shape[2],
            "q_ss": q.stride(2) * b16, "q_hs": q.stride(1) * b16, "q_bs": q.stride(0) * b16,
            "q_ts": 256 * q.stride(2) * b16, "gqa": q.shape[1] // k.shape[1],
            "k_ss": k.stride(2) * b16, "k_hs": k.stride(1) * b16, "k_bs": k.stride(0) * b16,
            "v_ss": v.stride(2) * b16, "v_hs": v.stride(1) * b16, "v_bs": v.stride(0) * b16,
            "o_ss": out.stride(2) * b16, "o_hs": out.stride(1) * b16, "o_bs": out.stride(0) * b16,
            "has_lse": 1, "opt": 0, "qk_head_dim": q.shape[3], "v_head_dim": v.shape[3], "q_head_num": q.shape[1]}
    return [vals[a.name] for a in kern.args]


def run(q, k, v, causal=False, scale=None, backend="emu", kernel=None, aiter_args=False, q_prescale=False,
        stagger=False, seed=None, align=None):
    """Launch on q [B, Hq, Sq, D], k [B, Hkv, Sk, D], v [B, Hkv, Sk, 128] (bf16 or f16, contiguous;
    D = 128 or 192).  Returns (out [B, Hq, Sq, 128] in q's dtype, lse [B, Hq, Sq] float32).
    aiter_args: aiter's struct and grid (causal then defaults to bottom-right, see build()).
    seed (emulator only): random wave interleaving."""
    import torch
    from flyasm.run import launch
    dtype = {torch.bfloat16: "bf16", torch.float16: "f16"}[q.dtype]
    B, Hq, Sq, D = q.shape
    if D not in L.GEOMETRY or k.shape[3] != D or v.shape[3] != 128:
        raise ValueError(f"head dims must be q/k 128 or 192 and v 128, not {D}, {k.shape[3]}, {v.shape[3]}")
    g = L.GEOMETRY[D]
    scale = 1.0 / math.sqrt(D) if scale is None else scale
    q, k, v = (t.contiguous() for t in (q, k, v))
    kern = kernel or build(dtype, causal, Hq, k.shape[1], aiter_args, q_prescale=q_prescale, stagger=stagger,
                           align=align, head_dim=D)
    out = torch.full((B, Hq, Sq, v.shape[3]), float("nan"), dtype=q.dtype)   # poisoned
    lse = torch.full((B, Hq, Sq), float("nan"), dtype=torch.float32)
    res = kern.build()                                           # static checks: zero findings or an error
    if aiter_args:
        from flyasm.dispatch import aiter_fwd_values, aiter_grid
        t = lambda x: x.transpose(1, 2)                          # noqa: E731  aiter's [B, S, H, D] views
        vals = aiter_fwd_values(t(q), t(k), t(v), t(out), lse, scale, ts_qo=g.block_q, causal=causal)
        vals.update(o=out, q=q, k=k, v=v)
        grid = aiter_grid(Sq, Hq, B, g.block_q, causal=bool(causal))
        args = [vals[a.name] for a in kern.args]
    else:
        grid = (-(-Sq // g.block_q), Hq, B)                      # workgroups (HIP gridDim)
        args = kernel_args(kern, q, k, v, out, lse, scale, causal)
    launch(res, grid, (64 * g.waves, 1, 1), *args, backend=backend, kernel=kern.name,
           **({} if seed is None else {"seed": seed}))
    return out, lse
