"""Attention backward for gfx950, the dQ/dK/dV kernel of aiter's fmha_v3_bwd pipeline: head dim 128,
bf16/f16, no mask / causal top-left (mask 1) / causal bottom-right (mask 2), dQ accumulated atomically
in fp32 (atomic32=1) or in q's dtype (atomic32=0), batch or group (varlen) mode, GQA at run time.

    k = build(dtype="bf16", mask=2, atomic32=True, group=False)     # dtype "bf16" or "fp16"
    # aiter's launch: grid (ceil(max_seqlen_k / 256) [halved, rounded up, when causal], nhead_q, batch),
    # 256 threads, the 704-byte fmha_bwd_dqdkdv_args (client/aiter_src/mha_bwd_v3_args.h)

Numerics (LSE in natural-log units, as the forward writes it; D = rowsum(dO∘O) from the pre kernel):
    S = Q·Kᵀ,  P = exp2(S·scale·log2e − LSE·log2e),  dP = dO·Vᵀ,  dS = P∘(dP − D),
    dVᵀ += dOᵀ·P,  dKᵀ += Qᵀ·dS (times scale at the store),  dQ += dS·K·scale (scaled before the atomics).
build(fold_scale=True) (the bf16 default) folds the scale into the exponent instead: P' = scale·P
(−log2 scale joins LSE·log2e), dS' = scale·dS, so dK and dQ need no multiply and dV is divided by scale
once at the store; f16 keeps the unscaled values (scale·P sinks into f16's subnormals on long rows).
One workgroup = 4 waves = 256 keys (aiter's ts); wave w keeps keys 64w..64w+63 of K·Vᵀ stationary:
its dKᵀ and dVᵀ accumulators fill the 256 AGPRs and Vᵀ sits in 64 VGPRs as the B operand of dP; K
stays in LDS (it is read twice per step: as Kᵀ for S and, transposed, as dQ's operand). Q and dO
stream through double-buffered LDS (LDS-DMA) in 32-row steps, LSE and D beside them. Every lane and
LDS address formula comes from kernels/fa_bwd_layouts.py (tested against the MFMA encodings and the
bank-conflict count in tests/test_fa_bwd_layouts.py). One 32-row step j, per wave (body()), is one
stream of 80 MFMAs with dQ one step behind (its dS in the other LDS buffer):

    S_j = Q_j·Kᵀ (16)  │ dP_j = dO_j·Vᵀ (16), dV_j += dO_jᵀ·P (16), dK_j += Q_jᵀ·dS (16), with one MFMA of
                       │ dQ_{j-1} = dS_{j-1}·K (16, the wave's 32 columns over the 256 keys) after every
                       │ second of dP_j and dV_j (dQ's transposing reads are the heaviest LDS traffic)
      ║ DMA of step j+1 into step j-1's buffers, L_j = LSE·log2e (− log2 scale)
      ║ (after S_j) the mask on boundary steps, P_j = exp2(S·c − L), packed into dV's B operands
      ║ (after dP_j) dS_j = P∘(dP − D), packed into dK's, written to LDS [key][q] (4 ds_write_b128)
      ║ (after dQ_{j-1}) its atomics into aiter's dq workspace
    ── 7 MFMAs before the end: step j+1's LSE/D (the wave's own DMA) and first K fragments read;
       3 before: every wave's dS_j written, Q_j / dO_j reads done, step j+1's DMA landed: s_barrier,
       then step j+1's first Q fragment ──

The shadows are one generator in dependency order, placed by schedule() in the issue turns each MFMA
leaves free (an MFMA keeps the pipe busy for 8 turns of its wave; its own reads and waits count),
with gates (not before MFMA n: hazard distances) and tokens (an MFMA whose packed operand is not out
yet drains the shadow up to it). The model-guided levers are class attributes of _Builder (AHEAD,
WAIT_SPAN, DMA_SPREAD, STATS_SPREAD, REREAD_DV, DQ_EVERY, BARRIER_EARLY, NEXT_EARLY, NEXT_K,
FEED_FIT, FEED_CARRY, SLOT; XCD_MAP, the workgroup -> work map) plus build(fold_scale=...).
benchmarks/sweep_fa_bwd.py ranks them;
benchmarks/vs_aiter_bwd.py prices the whole call against aiter's.

Why this split (the issue asks to argue): dK/dV stationary per workgroup and dQ atomic is aiter's own,
and the only one its host supports without a second launch (its dq workspace is what the post kernel
reads). Per step the 5 GEMMs are 80 MFMAs per wave; the LDS traffic (K twice, Q and dO twice, dS once)
is ~80 KiB per wave per step, half of what 4 waves x 80 MFMAs x 32 cycles can stream at 256 B/clk.
A separate dQ pass (dQ = dS·K per query tile, K/V streamed) would need dS again: recomputing S and dP
(2 more GEMMs of the 5) or storing dS to memory (2 B per (q, key): more bytes than the atomics).

dQ orientation: lanes along d (dQ [q x d]; 32 lanes cover 128 contiguous bytes per fp32 atomic). For
atomic16 neighbouring lanes pair up (even lane: row r, columns d, d+1; odd lane: row r+1, d-1, d) by
one DPP v_cndmask per register pair, so buffer_atomic_pk_add_bf16/f16 writes 4 lines per instruction
instead of the 32 of a lanes-along-q layout.

a16 workspace: aiter's allocation [batch, nhead_q, ceil16(max_seqlen_q), 128] in q's dtype, natural
row-major order (as the post kernel dq_shuffle, kernels/fa_bwd_post.py, reads it); a32: [batch, nhead_q,
seqlen_q, 128] fp32, group mode [nhead_q, total_q, 128] with rows at the sequence's physical start.

Supported: head dim 128; row strides multiples of 16 bytes; byte offsets of one (batch, head) slice
< 2^32; 1 <= seqlen_k, seqlen_q < 2^24. Keys past seqlen_k and queries past seqlen_q are masked by
the buffer ranges (reads give 0, dQ/dK/dV writes there are dropped) and by the mask on boundary steps.
A query that sees no key (bottom-right with seqlen_q > seqlen_k; LSE = -inf) contributes nothing.
"""
from __future__ import annotations

import sys
from pathlib import Path

from flyasm import Kernel, a, m0, s, v, vcc
from flyasm.aiter_bwd import DQDKDV_ARGS
from flyasm.plan import RegisterPlan

try:
    from . import fa_bwd_layouts as L
    from . import fa_grid as G
except ImportError:                      # loaded as a top-level module (tests put kernels/ on the path)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import fa_bwd_layouts as L
    import fa_grid as G

LOG2E = 1.4426950408889634
RSRC_WORD3 = 0x00020000        # raw buffer, 32-bit data format (gfx9 V# word 3)
FLT_MAX = 3.4028234663852886e38
BIG = 1 << 30                  # "key never visible" in the mask's per-lane limit
MASKS = {0: "none", 1: "top_left", 2: "bottom_right"}

# ---- the register plan (inclusive ranges) --------------------------------------------------------
#  region      registers       holds
#  ids         v[0:1]          workitem id, lane
#  lds_addr    v[2:17]         per-lane LDS bases (fa_bwd_layouts): b128 Q/dO (2), b128 K (2), tr Q/dO (2),
#                              tr K (4), tr dS (2), dS write (2), LSE/D, and the dQ atomic offset
#  dma_voff    v[18:25]        Q/dO DMA offsets (5), LSE/D DMA offset, mask limits per key block (2)
#  consts      v[26:31]        (log2e, log2e), (log2 scale or scale, ..), (scale*log2e, ..): v_pk_* operands
#  S           v[32:63]        S, then P (fp32, in place: dS needs it) (2 key blocks x 16)
#  dP          v[64:95]        dP, then dS packed in place (dK's B operands)
#  lse         v[96:111]       L = LSE*log2e (- log2 scale) of the accumulators' 16 query slots, then
#                              P packed (dV's B operands: LSE[8kb + 4kq..+3])
#  dd          v[112:127]      D of the 16 query slots
#  dQ          v[128:143]      the wave's 32x32 dQ tile of the previous step (lanes along d)
#  ring        v[144:183]      10 MFMA operands (4 VGPRs) read from LDS ahead of their MFMA; the last 5
#                              take the next step's first K and Q fragments around the barrier
#  tmp         v[184:191]      mask limit, -inf, scratch (a16 lane pairing)
#  vt          v[192:255]      Vᵀ: B operands of dP (2 key blocks x 8 head-dim steps), stationary
#  dv, dk      a[0:127], a[128:255]  dVᵀ, dKᵀ accumulators: 4 d blocks x 2 key blocks x 16
#  sys         s[0:4]          kernarg pointer, workgroup ids x (key tile), y (head), z (batch)
#  misc        s[5:7]          wave, two scratch SGPRs
#  rsrc        s[8:47]         buffer resources Q, dO, LSE, D, dq, K, V, dK, dV, and Q-or-dO (DMA 2)
#  args        s[48:73]        kernel arguments (u32), the K/V head; those dead after setup() hold the
#                              DMA offset increments, the Q-or-dO DMA offset, 512 * wave, lane masks
#  seq         s[74:81]        group-mode sequence pointers during setup; the mask's SGPR pairs after
#  loop        s[82:101]       pass, tile, step counters, DMA/atomic offsets, sequence bounds
PLAN_REGIONS = {
    "ids": v[0:1], "lds_addr": v[2:17], "dma_voff": v[18:25], "consts": v[26:31], "S": v[32:63],
    "dP": v[64:95], "lse": v[96:111], "dd": v[112:127], "dQ": v[128:143], "ring": v[144:183],
    "tmp": v[184:191], "vt": v[192:255], "dv": a[0:127], "dk": a[128:255],
    "sys": s[0:4], "misc": s[5:7], "rsrc": s[8:47], "args": s[48:73], "seq": s[74:81], "loop": s[82:101],
}
LANE = v[1]
QD_B128, K_B128, QD_TR = (v[2], v[3]), (v[4], v[5]), (v[6], v[7])
K_TR = ((v[8], v[9]), (v[10], v[11]))                   # [key half][t]
DS_TR, DS_WR, ST_RD, DQ_VOFF = (v[12], v[13]), (v[14], v[15]), v[16], v[17]
QD_DMA, ST_DMA, KEYREL = tuple(v[18 + i] for i in range(5)), v[23], (v[24], v[25])
LOG2E2, SCL2, C2 = v[26:27], v[28:29], v[30:31]      # SCL2: (log2 scale, ..) folded, else (scale, ..)
S, DP, LSE, DD, DQ, RING, VT = v[32:63], v[64:95], v[96:111], v[112:127], v[128:143], v[144:183], v[192:255]
MASK_T, NEG_INF, TMP = v[184], v[185], v[186:191]
DV_ACC, DK_ACC = a[0:127], a[128:255]
N_RING = 10
assert L.DS_BUF[0] == 0

WAVE, ST0, ST1 = s[5], s[6], s[7]
RS_Q, RS_DO, RS_LSE, RS_D, RS_DQ, RS_K, RS_V, RS_DK, RS_DV, RS_MIX = (s[8 + 4 * i:11 + 4 * i] for i in range(10))
MASK_SG = (vcc, s[74:75], s[76:77])
(TILE, PASS, K0, DIAG, Q_FIRST, N_STEPS, STEP, Q0, SOFF_Q, SOFF_DO, SOFF_ST, MASK_Q, NKT, QSTART, KSTART,
 SOFF_DQ, SEQ_Q, SEQ_K, SOFF_T, WAVE_1K) = (s[82 + i] for i in range(20))

# aiter's fmha_bwd_dqdkdv_args (flyasm.aiter_bwd.DQDKDV_ARGS: 44 fields in 16-byte slots, 704 bytes,
# strides in bytes). Pointers land in the low words of their buffer resource; u32 arguments in s[48:72].
PTR_SGPR = {"ptr_q": RS_Q, "ptr_do": RS_DO, "ptr_lse": RS_LSE, "ptr_d": RS_D, "ptr_dq": RS_DQ, "ptr_k": RS_K,
            "ptr_v": RS_V, "ptr_dk": RS_DK, "ptr_dv": RS_DV}
U32_ARGS = ["scalar", "seqlen_q", "Hs_q", "BAs_q", "Seqs_q", "ratio", "Hs_k", "BAs_k", "Seqs_k", "Seqs_dk",
            "seqlen_k", "nhead_q", "Hs_v", "BAs_v", "Seqs_v", "Hs_do", "BAs_do", "Seqs_do", "Hs_dk", "BAs_dk",
            "Hs_dv", "BAs_dv", "Seqs_dv", "Hs_lsed", "max_seqlen_dq"]
A = {n: s[48 + i] for i, n in enumerate(U32_ARGS)}
HK = s[73]
# loop constants in argument SGPRs that setup() leaves dead: per-step offset increments of the Q, dO and
# wave-dependent (Q or dO) DMAs, the latter's offset, 512 * wave (the wave's LSE/D slot)
INC_Q, INC_DO, INC_MIX, SOFF_MIX, WAVE_512 = A["Hs_q"], A["BAs_q"], A["ratio"], A["Hs_k"], A["BAs_k"]
EVEN_LANES, ODD_LANES = s[60:61], s[66:67]          # (Hs_v, BAs_v), (Hs_dk, BAs_dk): a16's lane-pair masks
SEQ_PTR = {"ptr_qseq": s[74:75], "ptr_kseq": s[76:77], "ptr_qseq_padded": s[78:79], "ptr_kseq_padded": s[80:81]}


DTYPES = {"bf16": "bf16", "fp16": "f16", "f16": "f16"}      # aiter's spelling (and fa_fwd's f16) -> MFMA type


def build_name(dtype="bf16", mask=0, atomic32=True, group=False) -> str:
    """One kernel per aiter key (dtype, mask, atomic32, mode); GQA, heads and lengths are run time."""
    m = {0: "", 1: "_causal_tl", 2: "_causal_br"}[mask]
    dt = "fp16" if DTYPES.get(dtype) == "f16" else dtype
    return f"fa_bwd_hd128_{dt}{m}_{'a32' if atomic32 else 'a16'}" + ("_group" if group else "")


class Frag:
    """An MFMA operand of 4 VGPRs read from LDS by `n` DS instructions: emit(regs) issues them."""

    def __init__(self, key, n, emit, regs=None):
        self.key, self.n, self.emit, self.regs = key, n, emit, regs


class _Builder:
    LEVERS = ("AHEAD", "WAIT_SPAN", "DMA_SPREAD", "STATS_SPREAD", "REREAD_DV", "DQ_EVERY", "BARRIER_EARLY",
              "NEXT_EARLY", "NEXT_K", "FEED_FIT", "FEED_CARRY", "SLOT", "XCD_MAP")

    def __init__(self, dtype, mask, atomic32, group, fold_scale=None, **levers):
        for n, val in levers.items():
            if n.upper() not in self.LEVERS:
                raise ValueError(f"{n!r} is not a lever of fa_bwd.build (they are {', '.join(x.lower() for x in self.LEVERS)})")
            setattr(self, n.upper(), val)
        if dtype not in DTYPES:
            raise ValueError(f"dtype is 'bf16' or 'fp16' (or 'f16'), not {dtype!r}")
        if mask not in MASKS:
            raise ValueError(f"mask is 0 (none), 1 (causal top-left) or 2 (causal bottom-right), not {mask!r}")
        if group and self.XCD_MAP:
            raise ValueError("xcd_map remaps batch mode's grid (key tiles, heads, batch); group mode's is not remapped")
        name = build_name(dtype, mask, atomic32, group) + "".join(
            f"_{n.lower()}{int(val)}" for n, val in sorted(levers.items()))   # variants of a sweep: distinct symbols
        dtype = DTYPES[dtype]
        self.dtype, self.mask, self.atomic32, self.group = dtype, mask, bool(atomic32), bool(group)
        self.causal = mask != 0
        # fold the softmax scale into P and dS (P' = scale·P: dV divided by scale once at the store) or
        # scale dQ per step and dK at the store (aiter's way). f16 keeps the unfolded values: scale·P and
        # scale·dS lose precision to f16's subnormals where P is small (long rows)
        self.fold = (dtype == "bf16") if fold_scale is None else bool(fold_scale)
        self.passes = 2 if self.causal else 1          # aiter halves the causal grid: tiles w and n-1-w
        self.plan = RegisterPlan(name, regions=PLAN_REGIONS, accum_offset=256, strict=True)
        self.k = Kernel(name, block=256, lds=160 * 1024, arg_layout="aiter", workgroup_ids="xyz", plan=self.plan)
        self.k.wg_map = G.xcd_item if self.XCD_MAP else None     # which workgroup computes which item (perf.predict)
        self.args = {n: self.k.arg(n, t) for n, t in DQDKDV_ARGS}
        self.mfma_name = f"v_mfma_f32_32x32x16_{dtype}"
        self.cvt_pk = f"v_cvt_pk_{dtype}_f32"
        self.atomic_pk = f"buffer_atomic_pk_add_{dtype}"
        self.wg_tile, self.wg_head, self.wg_batch = (self.k.workgroup_id(x) for x in "xyz")
        self._bal, self._gate, self._lds_done, self._read_at, self._prefetched = 0, 0, -1, {}, None
        self._scheduling, self._issued = False, 0

    SLOT = 28           # issue cycles after each MFMA for other instructions (32-cycle MFMA, 4 its own issue);
                        # 0: nothing under the MFMAs (the shadow runs only where an MFMA needs its output)
    XCD_MAP = False     # batch mode: workgroups remapped so each XCD runs whole heads (xcd_remap)
    FEED_FIT = False    # place a shadow instruction only where its cycles fit (else: while the slot has any left)
    FEED_CARRY = 0      # cycles a slot may pass on unused to the next

    def mfma(self, acc, a_, b_, c_):
        self.k.instr(self.mfma_name, acc, a_, b_, c_)

    # ---- prologue -----------------------------------------------------------------------------
    def load_args(self):
        k = self.k
        loads = [(PTR_SGPR[n][0:1], n) for n in PTR_SGPR] + [(A[n], n) for n in U32_ARGS]
        if self.group:
            loads += [(SEQ_PTR[n], n) for n in SEQ_PTR]
        with k.region("args", expect={"smem": len(loads)}):
            for i in range(0, len(loads), 12):          # at most 12 SMEM loads in flight per wait
                for reg, n in loads[i:i + 12]:
                    (k.s_load_dwordx2 if self.args[n].type == "ptr" else k.s_load_dword)(reg, k.kernarg_ptr,
                                                                                        self.args[n].offset)
                k.s_waitcnt(lgkmcnt=0)
        k.s_mov_b32(SEQ_Q, A["seqlen_q"])
        k.s_mov_b32(SEQ_K, A["seqlen_k"])
        if self.group:
            self.sequence_bounds()

    def sequence_bounds(self):
        """Group mode: this batch's lengths from the cumulative starts (ptr_qseq/ptr_kseq), its first
        rows from the padded starts (aiter passes the same array when unpadded)."""
        X = SEQ_PTR
        G.sequence_bounds(self.k, self.wg_batch, (X["ptr_qseq"], X["ptr_kseq"]),
                          (X["ptr_qseq_padded"], X["ptr_kseq_padded"]), (QSTART, KSTART), (SEQ_Q, SEQ_K),
                          (s[82:83], s[84:85]), ST0)                  # pairs: TILE, PASS, K0, DIAG (free here)

    def xcd_remap(self):
        """Batch mode: workgroup (x, y) of a batch computes fa_grid.xcd_item's work item (fa_grid.xcd_remap
        over aiter's grid: ceil(seqlen_k / 256) key tiles, halved rounding up when causal, x nhead_q).
        The ~32 workgroups an XCD runs at a time are then key tiles of one head: they stream the same
        Q, dO, LSE and D rows in step (the XCD's L2 holds them once) and add into the same dQ rows."""
        k = self.k
        G.tile_count(k, NKT, A["seqlen_k"], L.BLOCK_KV, pairs=self.passes > 1)   # key tiles or tile pairs
        G.xcd_remap(k, self.wg_tile, self.wg_head, NKT, A["nhead_q"], (TILE, PASS, K0), (TMP[0], TMP[1]),
                    ".Lxcd_end")

    def kv_head(self):
        """HK = head / ratio (aiter's GQA ratio, at run time: fa_grid.divmod_uniform)."""
        G.divmod_uniform(self.k, HK, ST0, self.wg_head, A["ratio"], (TMP[0], TMP[1]), (ST1, SOFF_T))

    def rsrc(self, dst, terms, rows, row_bytes):
        """dst = V#(pointer in dst[0:1] + Σ a*b (64-bit), num_records = rows * row_bytes (bytes))."""
        k = self.k
        lo, hi = dst[0], dst[1]
        k.s_mul_i32(dst[2], rows, row_bytes)
        for a_, b_ in terms:
            k.s_mul_i32(ST0, a_, b_)
            k.s_mul_hi_u32(ST1, a_, b_)
            k.s_add_u32(lo, lo, ST0)
            k.s_addc_u32(hi, hi, ST1)
        k.s_and_b32(hi, hi, 0xFFFF)
        k.s_mov_b32(dst[3], RSRC_WORD3)

    def resources(self):
        """Buffer resources of every tensor for this (batch, head): rows of this sequence only."""
        k, head, b = self.k, self.wg_head, self.wg_batch

        def first_row(t, q):
            # group mode: the sequence's physical first row * row stride; batch mode: batch * batch stride
            if self.group:
                return (QSTART if q else KSTART, A[f"Seqs_{t}"])
            return (b, A[f"BAs_{t}"])
        for rs, t, q, h in ((RS_Q, "q", True, head), (RS_DO, "do", True, head), (RS_K, "k", False, HK),
                            (RS_V, "v", False, HK), (RS_DK, "dk", False, head), (RS_DV, "dv", False, head)):
            self.rsrc(rs, [first_row(t, q), (h, A[f"Hs_{t}"])], SEQ_Q if q else SEQ_K, A[f"Seqs_{t}"])
        # LSE and D, float32 [B, Hq, Sq] (head stride lse_hs, batch stride nhead_q * lse_hs) or, group
        # mode, [Hq, total_q] at the sequence's physical start
        lterms = G.lse_terms(k, self.group, b, head, QSTART, A["nhead_q"], A["Hs_lsed"], SOFF_T)
        k.s_lshl_b32(ST1, SEQ_Q, 2)
        k.s_mov_b32(SOFF_DQ, ST1)
        for rs in (RS_LSE, RS_D):
            self.rsrc(rs, lterms, SOFF_DQ, 1)
        # the dq workspace (aiter's allocation, natural order): a32 [B, Hq, seqlen_q, 128] fp32 (group:
        # [Hq, total_q, 128], rows at the physical start), a16 [B, Hq, max_seqlen_dq, 128] in q's dtype
        if self.atomic32:
            k.s_lshl_b32(ST1, A["seqlen_q"], 9)                         # seqlen_q (total) * 512 B
            k.s_mov_b32(SOFF_DQ, ST1)
            if self.group:
                k.s_lshl_b32(SOFF_T, QSTART, 9)
                dterms = [(head, SOFF_DQ), (SOFF_T, 1)]
            else:
                dterms = [(SOFF_T, SOFF_DQ)]                            # (b * Hq + h) * seqlen_q * 512
            k.s_movk_i32(Q0, 512)
        else:
            k.s_mul_i32(SOFF_T, b, A["nhead_q"])
            k.s_add_u32(SOFF_T, SOFF_T, head)
            k.s_lshl_b32(SOFF_DQ, A["max_seqlen_dq"], 8)
            dterms = [(SOFF_T, SOFF_DQ)]
            k.s_movk_i32(Q0, 256)
        self.rsrc(RS_DQ, dterms, SEQ_Q, Q0)                                # Q0: the row bytes here
        # Q/dO DMA instruction 2: chunks 8, 9 of Q (waves 0, 1) or 0, 1 of dO (waves 2, 3)
        k.s_cmp_lt_u32(WAVE, 2)
        k.s_cselect_b64(RS_MIX[0:1], RS_Q[0:1], RS_DO[0:1])
        k.s_cselect_b64(RS_MIX[2:3], RS_Q[2:3], RS_DO[2:3])

    def setup(self):
        """Everything that does not depend on the key tile: ids, resources, LDS bases, DMA offsets."""
        k = self.k
        with k.region("setup"):
            k.v_readfirstlane_b32(WAVE, v[0])
            k.s_lshr_b32(WAVE, WAVE, 6)
            k.v_and_b32(LANE, 63, v[0])
            if self.XCD_MAP:
                self.xcd_remap()
            self.kv_head()
            self.resources()
            k.s_lshl_b32(WAVE_1K, WAVE, 10)
            k.s_lshl_b32(WAVE_512, WAVE, 9)
            k.s_lshl_b32(INC_Q, A["Seqs_q"], 5)                         # 32 rows
            k.s_lshl_b32(INC_DO, A["Seqs_do"], 5)
            k.s_cmp_lt_u32(WAVE, 2)
            k.s_cselect_b32(INC_MIX, INC_Q, INC_DO)
            for reg, bits in ((EVEN_LANES, 0x55555555), (ODD_LANES, 0xAAAAAAAA)):
                k.s_mov_b32(reg[0], bits)
                k.s_mov_b32(reg[1], bits)
            self.lds_bases()
            self.dma_offsets()
            self.consts()

    def lane_bits(self):
        """TMP[0] = lane % 32, TMP[1] = lane // 32."""
        k = self.k
        k.v_and_b32(TMP[0], 31, LANE)
        k.v_lshrrev_b32(TMP[1], 5, LANE)

    def swz(self, dst, row, slot):
        """dst = 16 * (slot ^ slot_xor(row)) (fa_bwd_layouts.slot_xor): row, slot VGPRs, dst may be slot."""
        k = self.k
        k.v_bfe_u32(TMP[5], row, 2, 2)
        k.v_xor_b32(dst, slot, TMP[5])
        k.v_lshlrev_b32(dst, 4, dst)

    def lds_bases(self):
        """Per-lane LDS bases (fa_bwd_layouts: b128_base, tr_base, ds_write_base, st_base)."""
        k = self.k
        self.lane_bits()
        lo, hi = TMP[0], TMP[1]
        # b128: row lane%32 (+ 64w for K), logical slot 2*parity + lane//32
        k.v_mul_u32_u24(TMP[2], L.ROW, lo)
        k.s_mul_i32(ST0, WAVE, 64 * L.ROW)
        for par in range(2):
            k.v_add_u32(TMP[3], 2 * par, hi)
            self.swz(TMP[3], lo, TMP[3])
            k.v_add_u32(QD_B128[par], TMP[2], TMP[3])
            k.v_add_u32(QD_B128[par], L.QD_BUF[0], QD_B128[par])
            k.v_add3_u32(K_B128[par], ST0, TMP[2], TMP[3])
            k.v_add_u32(K_B128[par], L.K_BASE, K_B128[par])
        # tr (fa_bwd_layouts.tr_base): reader lane 16g + 4r + c reads row 4(g//2) + 8t + r at slot
        # 2(g%2) + c//2, byte 8(c%2); dS rows hold pack_b's column order: slot 2(g%2) + c%2, byte 8(c//2)
        k.v_lshrrev_b32(TMP[2], 5, LANE)                               # g // 2
        k.v_lshlrev_b32(TMP[2], 2, TMP[2])
        k.v_bfe_u32(TMP[3], LANE, 2, 2)                                # r
        k.v_add_u32(TMP[2], TMP[2], TMP[3])                            # row for t = 0
        k.v_bfe_u32(TMP[3], LANE, 4, 1)                                # g % 2
        k.v_lshlrev_b32(TMP[3], 1, TMP[3])                             # 2 (g % 2)
        k.s_lshl_b32(ST0, WAVE, 6)                                     # the wave's 32-d block of K (dQ)
        for t in range(2):
            row = TMP[0] if t == 0 else TMP[1]
            if t:
                k.v_add_u32(TMP[1], 8, TMP[2])
            else:
                k.v_mov_b32(TMP[0], TMP[2])
            for packed in (False, True):                               # K, Q/dO columns; dS's (pack_b order)
                k.v_bfe_u32(TMP[4], LANE, 0 if packed else 1, 1)       # the column group's slot bit
                k.v_add_u32(TMP[4], TMP[3], TMP[4])
                self.swz(TMP[5], row, TMP[4])
                k.v_bfe_u32(TMP[4], LANE, 1 if packed else 0, 1)       # ... and its 8-byte half
                k.v_lshlrev_b32(TMP[4], 3, TMP[4])
                k.v_add_u32(TMP[5], TMP[5], TMP[4])                    # swizzled slot bytes + half
                if packed:
                    k.v_lshlrev_b32(DS_TR[t], 6, row)                   # dS rows: 64 bytes
                    k.v_add_u32(DS_TR[t], DS_TR[t], TMP[5])            # DS_BUF[0] = 0
                else:
                    k.v_mul_u32_u24(QD_TR[t], L.ROW, row)
                    k.v_add_u32(QD_TR[t], QD_TR[t], TMP[5])            # row*320 + slot part
                    k.v_add_u32(K_TR[0][t], ST0, QD_TR[t])
                    k.v_add_u32(K_TR[0][t], L.K_BASE, K_TR[0][t])
                    k.v_add_u32(K_TR[1][t], 128 * L.ROW, K_TR[0][t])
                    k.v_add_u32(QD_TR[t], L.QD_BUF[0], QD_TR[t])
        # dS writes: row = key (lane % 32, + 64w), logical slot 2kq + lane//32
        self.lane_bits()
        k.s_lshl_b32(ST0, WAVE, 12)                                    # 64 rows * 64 B
        for kq in range(2):
            k.v_add_u32(TMP[3], 2 * kq, TMP[1])
            self.swz(TMP[3], TMP[0], TMP[3])
            k.v_lshlrev_b32(DS_WR[kq], 6, TMP[0])
            k.v_add3_u32(DS_WR[kq], DS_WR[kq], TMP[3], ST0)
        # LSE/D reads: the wave's slot + 16 * lane//32
        k.s_mul_i32(ST0, WAVE, L.ST_SLOT)
        k.s_add_u32(ST0, ST0, L.ST_BASE)
        k.v_lshlrev_b32(ST_RD, 4, TMP[1])
        k.v_add_u32(ST_RD, ST0, ST_RD)
        # dQ atomics, lanes along d (d = 32w + lane % 32, rows 8g + 4h + e of the tile by soffset/imm):
        # a32 one fp32 per lane: 4 * 512 * lane//32 + 4 * (32w + lane % 32);
        # a16 one bf16/f16 pair per lane (even lane: row r, d and d+1; odd lane: row r+1, d-1 and d):
        # 256 * (4 * lane//32 + lane % 2) + 2 * (32w + lane % 32 & ~1)
        if self.atomic32:
            k.v_lshlrev_b32(DQ_VOFF, 11, TMP[1])
            k.v_lshlrev_b32(TMP[2], 2, TMP[0])
            k.s_lshl_b32(ST0, WAVE, 7)
        else:
            k.v_lshlrev_b32(DQ_VOFF, 2, TMP[1])
            k.v_and_b32(TMP[2], 1, LANE)
            k.v_add_u32(DQ_VOFF, DQ_VOFF, TMP[2])
            k.v_lshlrev_b32(DQ_VOFF, 8, DQ_VOFF)
            k.v_and_b32(TMP[2], 30, TMP[0])
            k.v_lshlrev_b32(TMP[2], 1, TMP[2])
            k.s_lshl_b32(ST0, WAVE, 6)
        k.v_add3_u32(DQ_VOFF, DQ_VOFF, TMP[2], ST0)

    def dma_voffset(self, dst, chunk_sgpr, stride):
        """dst = per-lane global offset of LDS-DMA chunk `chunk_sgpr` (fa_bwd_layouts.dma_voffset)."""
        k = self.k
        magic, shift = L.DIV20
        k.s_lshl_b32(ST1, chunk_sgpr, 6)
        k.v_add_u32(TMP[2], ST1, LANE)                        # slot t = 64 * chunk + lane
        k.v_mul_u32_u24(TMP[3], magic, TMP[2])
        k.v_lshrrev_b32(TMP[3], shift, TMP[3])                # row = t // 20
        k.v_mul_u32_u24(TMP[4], L.SLOTS, TMP[3])
        k.v_sub_u32(TMP[4], TMP[2], TMP[4])                   # LDS slot in the row
        k.v_cmp_gt_u32(vcc, 16, TMP[4])                       # a data slot (not padding)
        k.v_bfe_u32(TMP[5], TMP[3], 2, 2)
        k.v_xor_b32(TMP[4], TMP[4], TMP[5])                   # its global column
        k.v_lshlrev_b32(TMP[4], 4, TMP[4])
        k.v_mul_lo_u32(dst, TMP[3], stride)
        k.v_add_u32(dst, dst, TMP[4])
        k.v_cndmask_b32(dst, L.OUT_OF_RANGE - (1 << 32), dst, vcc)   # padding: nothing fetched, zeros written

    def dma_offsets(self):
        """Q/dO DMA instruction i of wave w loads chunk w + 4i of the step's 20 (Q 0..9, dO 10..19)."""
        k = self.k
        for i in range(L.QD_DMA):
            k.s_add_u32(ST0, WAVE, L.WAVES * i)
            if i == 2:                                        # waves 0, 1: Q chunks 8, 9; waves 2, 3: dO 0, 1
                k.s_sub_u32(ST1, ST0, L.Q_CHUNKS)
                k.s_cmp_lt_u32(ST0, L.Q_CHUNKS)
                k.s_cselect_b32(ST0, ST0, ST1)
                k.s_cselect_b32(SOFF_T, A["Seqs_q"], A["Seqs_do"])
                self.dma_voffset(QD_DMA[i], ST0, SOFF_T)
            else:
                if i > 2:
                    k.s_sub_u32(ST0, ST0, L.Q_CHUNKS)
                self.dma_voffset(QD_DMA[i], ST0, A["Seqs_q"] if i < 2 else A["Seqs_do"])
        k.v_and_b32(ST_DMA, 31, LANE)
        k.v_lshlrev_b32(ST_DMA, 2, ST_DMA)

    def consts(self):
        k = self.k
        k.v_mov_b32(LOG2E2[0], LOG2E)
        k.v_mov_b32(LOG2E2[1], LOG2E)
        if self.fold:
            k.v_log_f32(SCL2[0], A["scalar"])
        else:
            k.v_mov_b32(SCL2[0], A["scalar"])
        k.v_mov_b32(C2[0], A["scalar"])
        k.v_mul_f32(C2[0], LOG2E, C2[0])
        k.s_nop(0)                                                     # TRANS result -> VALU read
        k.v_mov_b32(SCL2[1], SCL2[0])
        k.v_mov_b32(C2[1], C2[0])
        k.v_mov_b32(NEG_INF, float("-inf"))

    # ---- one key tile (a pass) --------------------------------------------------------------------
    def select_tile(self):
        """TILE of this pass, or a jump to .Lpass_end: tile x, or with aiter's causal halving tiles x and
        n-1-x (n = this sequence's key tiles; fa_grid.select_tile)."""
        k = self.k
        G.tile_count(k, NKT, SEQ_K, L.BLOCK_KV)
        G.select_tile(k, TILE, NKT, self.wg_tile, PASS if self.passes > 1 else None, (ST0, ST1), ".Lpass_end")

    def pass_setup(self):
        """The key tile's query range, mask limits, zeroed accumulators."""
        k = self.k
        with k.region("pass_setup"):
            k.s_lshl_b32(K0, TILE, 8)
            if self.mask == 2:
                k.s_sub_u32(DIAG, SEQ_K, SEQ_Q)                      # query i sees keys <= i + DIAG
            else:
                k.s_mov_b32(DIAG, 0)
            # first step: the first 32-row block with a query that sees a key of the tile
            if self.causal:
                k.s_sub_u32(Q_FIRST, K0, DIAG)
                k.s_max_i32(Q_FIRST, Q_FIRST, 0)
                k.s_and_b32(Q_FIRST, Q_FIRST, -L.BLOCK_Q)
            else:
                k.s_mov_b32(Q_FIRST, 0)
            k.s_sub_u32(N_STEPS, SEQ_Q, Q_FIRST)
            k.s_max_i32(N_STEPS, N_STEPS, 0)
            k.s_add_u32(N_STEPS, N_STEPS, L.BLOCK_Q - 1)
            k.s_lshr_b32(N_STEPS, N_STEPS, 5)
            # the wave's keys kw..kw+63 need the mask on a step q0..q0+31 when some key >= seqlen_k, or
            # (causal) kw + 63 > q0 + DIAG: MASK_Q = INT_MAX, kw + 63 - DIAG or INT_MIN; mask iff q0 < MASK_Q
            k.s_lshl_b32(ST0, WAVE, 6)
            k.s_add_u32(ST0, ST0, K0)                                  # kw
            if self.causal:
                k.s_add_u32(MASK_Q, ST0, 63)
                k.s_sub_u32(MASK_Q, MASK_Q, DIAG)
            else:
                k.s_mov_b32(MASK_Q, -(1 << 31))
            k.s_add_u32(ST1, ST0, 64)
            k.s_cmp_gt_u32(ST1, SEQ_K)
            k.s_cselect_b32(MASK_Q, 0x7FFFFFFF, MASK_Q)
            # per-lane mask limit of key block kb: BIG past seqlen_k, else key - DIAG - 4 * lane//32
            # (causal) or -BIG: accumulator r is masked iff 8(r//4) + r%4 < KEYREL - q0
            self.lane_bits()
            k.v_add_u32(TMP[2], ST0, TMP[0])                           # key of block 0
            k.v_lshlrev_b32(TMP[3], 2, TMP[1])
            k.v_mov_b32(TMP[4], BIG)
            for kb in range(2):
                if kb:
                    k.v_add_u32(TMP[2], 32, TMP[2])
                if self.causal:
                    k.v_subrev_u32(KEYREL[kb], DIAG, TMP[2])
                    k.v_sub_u32(KEYREL[kb], KEYREL[kb], TMP[3])
                else:
                    k.v_mov_b32(KEYREL[kb], -BIG)
                k.v_cmp_gt_u32(vcc, SEQ_K, TMP[2])                     # key < seqlen_k
                k.s_nop(1)
                k.v_cndmask_b32(KEYREL[kb], TMP[4], KEYREL[kb], vcc)
        k.s_cmp_eq_u32(N_STEPS, 0)
        k.s_cbranch_scc1(k.L(".Lempty"))                             # no query sees the tile: dK = dV = 0

    def zero_acc(self):
        with self.k.region("zero_acc", expect={"valu": 256}):
            for i in range(256):
                self.k.v_accvgpr_write_b32(a[i], 0)

    def load_tile(self):
        """K tile -> LDS (20 DMAs per wave), Vᵀ -> VGPRs (16 loads), steps 0 and 1 -> QD buffers 0, 1."""
        k = self.k
        with k.region("load_kv", expect={"lds_dma": L.K_DMA, "vmem_load": 16}):
            k.s_mul_i32(SOFF_DQ, K0, A["Seqs_k"])
            for i in range(L.K_DMA):
                k.s_add_u32(ST0, WAVE, L.WAVES * i)
                self.dma_voffset(TMP[0], ST0, A["Seqs_k"])
                k.s_add_u32(m0, WAVE_1K, L.K_BASE + L.DMA_CHUNK * L.WAVES * i)
                k.s_nop(0)                                              # SALU m0 -> LDS-DMA
                k.buffer_load_dwordx4(TMP[0], RS_K, SOFF_DQ, offen=True, lds=True).lds_buffer = "k"
            # Vᵀ: B[k=d][j=key] of key block kb, head-dim step kk: row kw + 32kb + lane%32, bytes 32kk + 16h
            self.lane_bits()
            k.s_lshl_b32(ST0, WAVE, 6)
            k.v_add_u32(TMP[2], ST0, TMP[0])
            k.v_mul_lo_u32(TMP[2], TMP[2], A["Seqs_v"])
            k.v_lshlrev_b32(TMP[3], 4, TMP[1])
            k.v_add_u32(TMP[2], TMP[2], TMP[3])
            for kb in range(2):
                k.s_add_u32(ST0, K0, 32 * kb)
                k.s_mul_i32(SOFF_T, ST0, A["Seqs_v"])
                for kk in range(8):
                    f = 8 * kb + kk
                    k.buffer_load_dwordx4(VT[4 * f:4 * f + 3], TMP[2], RS_V, SOFF_T, offen=True, offset=32 * kk)
        with k.region("load_q0", expect={"lds_dma": L.QD_DMA + 2}):
            k.s_mov_b32(STEP, 0)
            k.s_mul_i32(SOFF_Q, Q_FIRST, A["Seqs_q"])
            k.s_mul_i32(SOFF_DO, Q_FIRST, A["Seqs_do"])
            k.s_cmp_lt_u32(WAVE, 2)
            k.s_cselect_b32(SOFF_MIX, SOFF_Q, SOFF_DO)
            k.s_lshl_b32(SOFF_ST, Q_FIRST, 2)
            self.fill(self.gen_dma(0))                               # step 0; each step loads the next

    def gen_dma(self, p):
        """Q, dO (5 DMAs) and LSE, D (2) of the next step to load (offsets SOFF_Q/DO/MIX/ST) into QD
        buffer p and the wave's ST slot p, then the offsets move 32 rows on (the DMA after the last step
        reads past the sequence: zeros, and every wave issues the same DMAs, so vmcnt stays uniform). A
        generator for an MFMA shadow: in a schedule an MFMA separates each m0 write from its DMA (the
        1 wait state SALU m0 -> LDS-DMA), and DMA_SPREAD MFMAs separate two DMAs (not with SLOT 0, whose
        shadows run only between MFMAs: there an s_nop)."""
        k = self.k
        spread = self._scheduling and self.SLOT > 0
        qd = [(RS_Q, SOFF_Q), (RS_Q, SOFF_Q), (RS_MIX, SOFF_MIX), (RS_DO, SOFF_DO), (RS_DO, SOFF_DO)]
        st = L.ST_BASE + L.WAVES * L.ST_SLOT * p
        dmas = [(k.buffer_load_dwordx4, QD_DMA[i], rs, so, WAVE_1K, L.QD_BUF[p] + L.DMA_CHUNK * L.WAVES * i, f"qd{p}")
                for i, (rs, so) in enumerate(qd)]
        dmas += [(k.buffer_load_dword, ST_DMA, rs, SOFF_ST, WAVE_512, st + off, f"st{p}")
                 for rs, off in ((RS_LSE, 0), (RS_D, L.D_OFF))]
        for load, voff, rs, so, wave_base, base, tag in dmas:
            yield 4
            k.s_add_u32(m0, wave_base, base)
            if spread:
                yield ("after", self._issued + 1)
            else:
                yield 4
                k.s_nop(0)
            yield 4
            load(voff, rs, so, offen=True, lds=True).lds_buffer = tag
            if spread:
                yield ("after", self._issued + self.DMA_SPREAD - 1)
        for so, inc in ((SOFF_Q, INC_Q), (SOFF_DO, INC_DO), (SOFF_MIX, INC_MIX)):
            yield 4
            k.s_add_u32(so, so, inc)
        yield 4
        k.s_add_u32(SOFF_ST, SOFF_ST, 4 * L.BLOCK_Q)

    # ---- operand reads and the scheduler ---------------------------------------------------------
    def frag_b128(self, key, base, imm, tag, regs=None):
        def emit(dst):
            self.k.ds_read_b128(dst, base, offset=imm).lds_buffer = tag
        return Frag(key, 1, emit, regs)

    def frag_tr(self, key, bases, imm, tag):
        def emit(regs):
            for t in range(2):
                self.k.ds_read_b64_tr_b16(regs[2 * t:2 * t + 1], bases[t], offset=imm).lds_buffer = tag
        return Frag(key, 2, emit)

    def wait_lds(self, index):
        """s_waitcnt lgkmcnt for the DS instruction at stream index `index`: the number of DS ops
        issued after it (DS ops complete in order), none if a wait already covered it."""
        if index <= self._lds_done:
            return
        st = self.k.stream
        younger = sum(1 for x in st[index + 1:] if x.info.get("family") == "DS")
        if younger < 16:                               # 16 or more younger: the counter (<= 15) forced it out
            self.k.s_waitcnt(lgkmcnt=min(15, younger))
        self._lds_done = index

    def schedule(self, ops, shadow=None, ahead=3, extra=(), wait_span=2, hooks=(), prefetched=None):
        """The MFMAs `ops` = [(emit, operands, needs)] in order (an operand a Frag read from LDS, or a
        register range; needs: tokens the shadow must have produced first). Each Frag is read `ahead`
        MFMAs before its first use into a ring slot (refilled only after the last MFMA reading it has
        issued) and waited for exactly (wait_lds), one wait covering the next `wait_span` MFMAs. An MFMA
        keeps the pipe busy for 8 issue turns of its wave (32 cycles): after each, the reads and waits
        placed there and then the shadow's instructions fill the other 7 (feed). The shadow, a generator
        in dependency order, yields each instruction's issue cycles, ("after", n): nothing more before
        MFMA n has issued, or ("token", name): what MFMAs needing `name` wait for (an MFMA whose token is
        not out yet drains the shadow up to it). What is left of the shadow follows the last MFMA.
        extra: (op index, Frag with its own registers) read right after that MFMA, waited for by
        whoever uses them (self._read_at). hooks = [(i, fn)]: fn() after MFMA i and its shadow share (no
        Frag read past the first hook's MFMA stays in PREFETCH_SLOTS: the hooks may fill them).
        prefetched: {key: (registers, stream index of its read)} of Frags an earlier schedule read."""
        k = self.k
        first, last, order = {}, {}, []
        for i, (_, opnds, _) in enumerate(ops):
            for f in opnds:
                if isinstance(f, Frag):
                    if f.key not in first:
                        first[f.key] = i
                        order.append(f)
                    last[f.key] = i
        slot_free, where, read_at = [-1] * N_RING, {}, {}
        for key, (regs, at) in (prefetched or {}).items():
            where[key], read_at[key] = regs, at
            if key in last and regs in self.RING_SLOTS:
                slot_free[self.RING_SLOTS.index(regs)] = last[key]
        reserve_after = min((h for h, _ in hooks), default=None)
        self._read_at = read_at
        self._shadow, self._tokens, self._gate, self._bal, self._issued = shadow, set(), 0, 0, 0
        self._op_at, self._scheduling, self._pending = {}, True, None
        rr, nxt = 0, 0
        extra_at = {}
        for i, f in extra:
            extra_at.setdefault(i, []).append(f)

        def issue_until(limit, after):
            nonlocal rr, nxt
            while nxt < len(order) and first[order[nxt].key] < limit:
                f = order[nxt]
                nxt += 1
                if f.key in read_at:                              # read by an earlier schedule
                    continue
                if f.regs is None:
                    for _ in range(N_RING):                       # the next slot whose last MFMA has issued
                        slot = rr % N_RING
                        rr += 1
                        if slot_free[slot] <= after and not (reserve_after is not None and slot in self.PREFETCH_SLOTS
                                                             and last[f.key] > reserve_after):
                            break
                    else:
                        raise AssertionError(f"no free ring slot for {f.key}: read fewer MFMAs ahead")
                    slot_free[slot] = last[f.key]
                    where[f.key] = RING[4 * slot:4 * slot + 3]
                else:
                    where[f.key] = f.regs
                f.emit(where[f.key])
                read_at[f.key] = len(k.stream) - 1
        self._slot_free = slot_free
        issue_until(ahead, -1)
        for i, (emit, opnds, needs) in enumerate(ops):
            for t in needs:
                self.shadow_until(t)
            mark = len(k.stream)
            need = [read_at[f.key] for f in opnds if isinstance(f, Frag)]
            if need and max(need) > self._lds_done:
                self.wait_lds(max([read_at[f.key] for _, fs, _ in ops[i:i + wait_span] for f in fs
                                   if isinstance(f, Frag) and f.key in read_at]))
            emit(*[where[f.key] if isinstance(f, Frag) else f for f in opnds])
            self._op_at[i] = len(k.stream) - 1
            self._issued = i + 1
            for f in extra_at.get(i, ()):
                f.emit(f.regs)
                read_at[f.key] = len(k.stream) - 1
            issue_until(i + 1 + ahead, i)
            self.feed(self.SLOT - 4 * (len(k.stream) - mark - 1))
            for h, fn in hooks:
                if h == i:
                    fn()
        assert nxt == len(order)
        self.shadow_until(None)
        self._scheduling = False

    def _peek(self):
        """The shadow's next item (markers taken on the way): the issue cycles of the instruction it
        emits when resumed, or None when it is done or waits for a later MFMA."""
        while self._shadow is not None:
            if self._pending is None:
                self._pending = next(self._shadow, None)
                if self._pending is None:
                    self._shadow = None
                    return None
            c = self._pending
            if isinstance(c, tuple):
                if c[0] == "after":
                    self._gate = c[1]
                    if self._issued < self._gate:
                        return None
                else:
                    self._tokens.add(c[1])
                self._pending = None
                continue
            return c if self._issued >= self._gate else None
        return None

    def feed(self, budget):
        """Place shadow instructions that fit this MFMA slot's `budget` cycles (a slot still empty takes
        one that does not; unused cycles do not accumulate), unless the shadow waits for a later MFMA.
        A shadow yields each instruction's cost before emitting it (resuming it emits)."""
        self._bal = min(self._bal + budget, budget + self.FEED_CARRY)
        fresh = True
        while True:
            c = self._peek()
            if c is None or self._bal <= 0 or (self.FEED_FIT and c > self._bal and not fresh):
                return
            self._pending, fresh = None, False
            self._bal -= c                       # resuming the generator emits the instruction

    def shadow_until(self, token):
        """Emit the shadow up to `token` (None: all of it) regardless of the budget."""
        while self._shadow is not None and (token is None or token not in self._tokens):
            if self._pending is None:
                self._pending = next(self._shadow, None)
                if self._pending is None:
                    self._shadow = None
                    break
            c = self._pending
            if isinstance(c, tuple):
                if c[0] == "after":
                    assert c[1] <= self._issued or token is None, f"the shadow waits for MFMA {c[1]}, which needs {token}"
                else:
                    self._tokens.add(c[1])
            self._pending = None
        assert token is None or token in self._tokens, f"the shadow never produces {token}"

    def settle(self, op, need=12):
        """s_nop so that `need` wait states separate MFMA `op` (an index of the current schedule) from
        what follows (an 8-pass XDL MFMA's D read by VALU or memory: 12, notes §4.2); yields its cycles."""
        from flyasm.report.stats import nop_wait_states
        yield 4                                                      # (an estimate: counted when emitted)
        ws = sum(nop_wait_states(x) if x.name == "s_nop" else 1 for x in self.k.stream[self._op_at[op] + 1:])
        if ws < need:
            self.k.s_nop(need - ws - 1)

    @staticmethod
    def fill(gen):
        for _ in gen or ():
            pass

    # ---- the five clusters of a step ------------------------------------------------------------------
    def ops_s(self, p):
        """S = Q·Kᵀ (16 MFMAs, the two key blocks alternating)."""
        qd = L.QD_BUF[p] - L.QD_BUF[0]
        ops = []
        for kk in range(8):
            qf = self.frag_b128(("q", kk), QD_B128[kk % 2], qd + L.b128_imm(kk), f"qd{p}")
            for kb in range(2):
                kf = self.frag_b128(("k", kb, kk), K_B128[kk % 2], L.b128_imm(kk, 32 * kb), "k")
                acc = S[16 * kb:16 * kb + 15]
                ops.append((lambda a_, b_, acc=acc, kk=kk: self.mfma(acc, a_, b_, 0 if kk == 0 else acc), [qf, kf], ()))
        return ops

    def ops_dp(self, p):
        """dP = dO·Vᵀ (16 MFMAs, Vᵀ stationary)."""
        qd = L.QD_BUF[p] - L.QD_BUF[0]
        ops = []
        for kk in range(8):
            of = self.frag_b128(("do", kk), QD_B128[kk % 2], qd + L.DO_OFF + L.b128_imm(kk), f"qd{p}")
            for kb in range(2):
                acc, f = DP[16 * kb:16 * kb + 15], 8 * kb + kk
                ops.append((lambda a_, b_, acc=acc, kk=kk: self.mfma(acc, a_, b_, 0 if kk == 0 else acc),
                            [of, VT[4 * f:4 * f + 3]], ()))
        return ops

    def ops_dq(self, p):
        """The wave's 32 columns of dQ (lanes along d) = dS·K over the 256 keys, dS from LDS buffer p."""
        ops = []
        for kk in range(16):
            fs = self.frag_tr(("ds", kk), DS_TR, L.DS_BUF[p] + L.tr_imm(0, kk, L.DS_ROW), f"ds{p}")
            fk = self.frag_tr(("kt", kk), K_TR[kk // 8], L.tr_imm(0, kk % 8), "k")
            ops.append((lambda a_, b_, kk=kk: self.mfma(DQ, a_, b_, 0 if kk == 0 else DQ), [fs, fk], ()))
        return ops

    def ops_grad(self, p, b_of, acc0, off, nm, token, reread=False):
        """dVᵀ += dOᵀ·P or dKᵀ += Qᵀ·dS (b_of(kb, kq): the packed B operand, made by the shadow as token
        (token, kb, kq)): 16 MFMAs by (kq, kb, d block), a transposing read of dOᵀ / Qᵀ serving both key
        blocks 4 MFMAs apart; reread: by (kb, kq, d block), key block 1's operands needed 8 MFMAs later
        (more time for its P) at the cost of reading each dOᵀ / Qᵀ fragment twice (8 more reads)."""
        qd = L.QD_BUF[p] - L.QD_BUF[0]
        ops = []
        for kq, kb in ([(0, 0), (1, 0), (0, 1), (1, 1)] if reread else [(0, 0), (0, 1), (1, 0), (1, 1)]):
            for db in range(4):
                f = self.frag_tr((nm, db, kq, kb if reread else 0), QD_TR, qd + off + L.tr_imm(db, kq), f"qd{p}")
                acc = acc0[16 * (2 * db + kb):16 * (2 * db + kb) + 15]
                ops.append((lambda a_, b_, acc=acc: self.mfma(acc, a_, b_, acc), [f, b_of(kb, kq)], ((token, kb, kq),)))
        return ops

    def stats_reads(self, p):
        """LSE and D of step p's 32 rows (8 ds_read_b128, fixed registers)."""
        return [self.frag_b128(("st", g, d), ST_RD, L.st_imm(p, g, d), f"st{p}", regs=dst[4 * g:4 * g + 3])
                for g in range(4) for d, dst in ((False, LSE), (True, DD))]

    # ---- VALU in the shadows (generators: each yields its instruction's VALU-port cycles) ---------
    def gen_lse(self, last_read):
        """L = LSE·log2e (− log2 scale): after the stats reads landed."""
        k = self.k
        yield 4
        self.wait_lds(self._read_at[last_read])
        for i in range(0, 16, 2):
            if self.fold:
                yield 4
                k.v_pk_fma_f32(LSE[i:i + 1], LSE[i:i + 1], LOG2E2, SCL2, neg_lo=[0, 0, 1], neg_hi=[0, 0, 1])
            else:
                yield 4
                k.v_pk_mul_f32(LSE[i:i + 1], LSE[i:i + 1], LOG2E2)

    def gen_exp_arg(self):
        """S·c − L in place for both key blocks (before P's packing reuses L's registers)."""
        k = self.k
        for kb in range(2):
            for r in range(0, 16, 2):
                x = S[16 * kb + r:16 * kb + r + 1]
                yield 4
                k.v_pk_fma_f32(x, x, C2, LSE[r:r + 1], neg_lo=[0, 0, 1], neg_hi=[0, 0, 1])

    def gen_exp(self, kb):
        """P = exp2(S·c − L) in place (fp32) for key block kb."""
        for i in range(16):
            yield 16
            self.k.v_exp_f32(S[16 * kb + i], S[16 * kb + i])

    def gen_pack(self, X, dst):
        """16 accumulators of a 32x32 tile (D[i=q][j=key]) -> two B operands (queries 16kq + K_ORDER) in
        dst[4kq:4kq+3]: fa_bwd_layouts.pack_b, a cvt per accumulator pair."""
        k = self.k
        for kq in range(2):
            for e in range(4):
                yield 4
                k.instr(self.cvt_pk, dst[4 * kq + e], X[8 * kq + 2 * e], X[8 * kq + 2 * e + 1])

    def gen_ds(self, p):
        """dS = P∘(dP − D) in dP's registers, packed in place (dK's B operands: tokens ("dS", kb, kq)),
        written to LDS buffer p."""
        k = self.k
        for kb in range(2):
            for r in range(0, 16, 2):
                y = DP[16 * kb + r:16 * kb + r + 1]
                yield 4
                k.v_pk_add_f32(y, y, DD[r:r + 1], neg_lo=[0, 1], neg_hi=[0, 1])
            for r in range(0, 16, 2):
                y = DP[16 * kb + r:16 * kb + r + 1]
                yield 4
                k.v_pk_mul_f32(y, y, S[16 * kb + r:16 * kb + r + 1])
            X = DP[16 * kb:16 * kb + 15]
            yield from self.gen_pack(X, [X[i] for i in (0, 1, 2, 3, 8, 9, 10, 11)])      # in place
            yield ("token", ("dS", kb, 0))
            yield ("token", ("dS", kb, 1))
            for kq in range(2):
                yield 4
                k.ds_write_b128(DS_WR[kq], DP[16 * kb + 8 * kq:16 * kb + 8 * kq + 3],
                                offset=L.DS_BUF[p] + L.ds_write_imm(0, kb)).lds_buffer = f"ds{p}"
        yield ("token", "dS written")

    def gen_atomics(self):
        """dQ of the previous step (the wave's 32 columns) into the workspace: a32 16 fp32 atomics, a16
        8 packed atomics after pairing neighbouring lanes (even lane: row r, d and d+1; odd lane: row
        r+1, d-1 and d: one DPP swap per register pair)."""
        k = self.k
        if not self.fold:
            for i in range(0, 16, 2):
                yield 4
                k.v_pk_mul_f32(DQ[i:i + 1], DQ[i:i + 1], SCL2)
            yield 8
            k.s_nop(1)
        if self.atomic32:
            for g in range(4):
                yield 4
                k.s_add_u32(SOFF_T, SOFF_DQ, 4096 * g)
                for e in range(4):
                    yield 4
                    k.buffer_atomic_add_f32(DQ[4 * g + e], DQ_VOFF, RS_DQ, SOFF_T, offen=True, offset=512 * e)
            return
        # lo = even ? r0 : r1 of the odd neighbour; hi = odd ? r1 : r0 of the even neighbour (one
        # v_cndmask with a DPP lane swap each), three pairs per switch of the lane mask in vcc
        pairs = [(g, m) for g in range(4) for m in range(2)]
        soff_g = None
        for c in range(0, len(pairs), 3):
            grp = pairs[c:c + 3]
            for half, lanes in ((0, EVEN_LANES), (1, ODD_LANES)):
                yield 4
                k.s_mov_b64(vcc, lanes)
                for n, (g, m) in enumerate(grp):
                    r0, r1 = DQ[4 * g + 2 * m], DQ[4 * g + 2 * m + 1]
                    src, keep = (r1, r0) if half == 0 else (r0, r1)
                    yield 4
                    k.v_cndmask_b32(TMP[2 * n + half], src, keep, vcc, quad_perm=[1, 0, 3, 2], row_mask=0xF,
                                    bank_mask=0xF)
            for n, (g, m) in enumerate(grp):
                r0 = DQ[4 * g + 2 * m]
                yield 4
                k.instr(self.cvt_pk, r0, TMP[2 * n], TMP[2 * n + 1])
            for n, (g, m) in enumerate(grp):
                if g != soff_g:
                    yield 4
                    k.s_add_u32(SOFF_T, SOFF_DQ, 2048 * g)
                    soff_g = g
                yield 4
                k.instr(self.atomic_pk, DQ[4 * g + 2 * m], DQ_VOFF, RS_DQ, SOFF_T, offen=True, offset=512 * m)

    def mask_tile(self):
        """S = -inf where the key is past seqlen_k or (causal) past the query's diagonal; L clamped to
        -FLT_MAX so a query that sees no key (L = -inf) gives exp2(-inf) = 0, not NaN."""
        k = self.k
        with k.region("mask", expect={"valu": 16 + 2 + 64}):
            for r in range(16):
                k.v_max_f32(LSE[r], -FLT_MAX, LSE[r])
            for kb in range(2):
                k.v_subrev_u32(MASK_T if kb == 0 else TMP[5], Q0, KEYREL[kb])
            order = [("cmp", i) for i in range(3)]
            for i in range(32):
                order.append(("sel", i))
                if i + 3 < 32:
                    order.append(("cmp", i + 3))
            for op, i in order:
                kb, r = divmod(i, 16)
                msk = MASK_SG[i % 3]
                if op == "cmp":
                    k.v_cmp_lt_i32(msk, 8 * (r // 4) + r % 4, MASK_T if kb == 0 else TMP[5])
                else:
                    k.v_cndmask_b32(S[i], S[i], NEG_INF, msk)

    # ---- one step ---------------------------------------------------------------------------------
    HAZARD_MFMAS = 3    # MFMAs after an MFMA before VALU/memory reads its D (then settle() pads to 12 wait states)

    def gen_step(self, p, dq_prev, at, st_key, label):
        """The step's non-MFMA work in dependency order, placed in the MFMA shadows by schedule():
        at = {"s_end", "dp_end", "dq_end": index of the MFMA after the last of each}."""
        k = self.k
        yield from self.gen_dma(1 - p)                               # step j+1 into step j-1's buffers
        yield from self.gen_lse(st_key)
        yield ("after", at["s_end"] + self.HAZARD_MFMAS)            # S_j done
        yield from self.settle(at["s_end"] - 1)
        yield 8                                                      # (boundary steps only: the branch)
        k.s_cmp_lt_i32(Q0, MASK_Q)
        k.s_cbranch_scc0(k.L(label))
        self.mask_tile()
        k.label(label)
        yield from self.gen_exp_arg()
        for kb in range(2):                                          # P_j -> dV's B operands LSE[8kb + 4kq..]
            yield from self.gen_exp(kb)
            yield from self.gen_pack(S[16 * kb:16 * kb + 15], [LSE[8 * kb + i] for i in range(8)])
            yield ("token", ("P", kb, 0))
            yield ("token", ("P", kb, 1))
        yield ("after", at["dp_end"] + self.HAZARD_MFMAS)           # dP_j done
        yield from self.settle(at["dp_end"] - 1)
        yield from self.gen_ds(p)
        if dq_prev:
            yield ("after", at["dq_end"] + self.HAZARD_MFMAS)       # dQ_{j-1} done
            yield from self.settle(at["dq_end"] - 1)
            yield from self.gen_atomics()

    def body(self, p, dq_prev):
        """Step j (Q_j/dO_j in QD buffer p, LSE_j/D_j in the wave's ST slot p), with dQ of step j-1 (dS
        in LDS buffer 1-p) when dq_prev. The MFMAs in order
            S_j (16) | dP_j (16), dV_j (16), one dQ_{j-1} MFMA after every second of them | dK_j (16)
        (dQ's transposing reads are the heaviest LDS traffic: spread, the LDS pipe stays below its
        rate), and in their shadows, as each input is ready: the DMA of step j+1 (into step j-1's
        buffers), L_j; the mask (boundary steps), P_j = exp2(S·c − L) packed into dV's B operands; dS_j
        = P∘(dP − D) packed into dK's and written to LDS buffer p; the atomics of dQ_{j-1}. Then every
        wave's dS_j is in LDS and its reads of Q_j / dO_j are done: s_barrier."""
        k = self.k
        sfx = "" if dq_prev else "_first"
        with k.region(f"step{p}{sfx}"):
            k.s_lshl_b32(Q0, STEP, 5)
            k.s_add_u32(Q0, Q0, Q_FIRST)
            st = self.stats_reads(p)
            ops = self.ops_s(p)
            at = {"s_end": len(ops)}
            mid = self.ops_dp(p) + self.ops_grad(p, lambda kb, kq: LSE[8 * kb + 4 * kq:8 * kb + 4 * kq + 3], DV_ACC,
                                                  L.DO_OFF, "dot", "P", reread=self.REREAD_DV)
            mid += self.ops_grad(p, lambda kb, kq: DP[16 * kb + 8 * kq:16 * kb + 8 * kq + 3], DK_ACC, 0, "qt", "dS")
            dq = self.ops_dq(1 - p) if dq_prev else []
            for m, op in enumerate(mid):                                   # dQ_{j-1}: one after every DQ_EVERY-th
                ops.append(op)
                if m == 15:
                    at["dp_end"] = len(ops)
                if dq and m % self.DQ_EVERY == self.DQ_EVERY - 1 and m // self.DQ_EVERY < 16:
                    ops.append(dq[m // self.DQ_EVERY])
                    if m // self.DQ_EVERY == 15:
                        at["dq_end"] = len(ops)
            pre, self._prefetched = self._prefetched, None
            extra = [] if pre else [(self.STATS_SPREAD * i, f) for i, f in enumerate(st)]   # else read in step j-1
            end = len(ops) - 1
            with k.region("mfma", expect={"mfma": 64 + 16 * dq_prev, "ds_read": 24 + 8 + 8 + 16 + 16 * self.REREAD_DV
                                          + 16 + 64 * dq_prev - len(pre or ()) + self.NEXT_READS,
                                          "ds_write": 4}):
                self.schedule(ops, self.gen_step(p, dq_prev, at, st[-1].key, f".Lskip_mask_{p}{sfx}"),
                              ahead=self.AHEAD, wait_span=self.WAIT_SPAN, prefetched=pre, extra=extra,
                              hooks=[(end - self.BARRIER_EARLY - self.NEXT_EARLY + i,
                                      lambda i=i: self.next_step_reads(p, i, self.NEXT_EARLY))
                                     for i in range(self.NEXT_EARLY)] + [(end - self.BARRIER_EARLY,
                                                                          lambda: self.step_barrier(p))])
            k.s_add_u32(STEP, STEP, 1)
            k.s_mul_i32(SOFF_DQ, Q0, 512 if self.atomic32 else 256)  # the atomics (next step) add dQ_j here
            k.s_cmp_lt_u32(STEP, N_STEPS)

    AHEAD = 4           # MFMAs ahead the LDS operands are read
    WAIT_SPAN = 2       # MFMAs whose operands one s_waitcnt covers
    DMA_SPREAD = 2      # MFMAs between two of the next step's DMA instructions
    STATS_SPREAD = 1    # MFMAs between two LSE/D reads
    REREAD_DV = True    # dV by key block, its dOᵀ fragments read twice (ops_grad)
    DQ_EVERY = 2        # dQ_{j-1}'s MFMAs: one after every DQ_EVERY-th of dP_j, dV_j, dK_j
    BARRIER_EARLY = 1   # the step's barrier precedes its last dK MFMAs: step j+1's first Q read flies under them
    NEXT_EARLY = 1      # ... and NEXT_EARLY MFMAs before it (one per MFMA), step j+1's LSE/D and first K reads
    NEXT_K = 2          # S_{j+1}'s k-steps whose two K fragments are read before the barrier
    RING_SLOTS = tuple(RING[4 * i:4 * i + 3] for i in range(N_RING))

    @property
    def PREFETCH_SLOTS(self):                                          # noqa: N802  K fragments, then Q(0)
        return tuple(range(N_RING - 2 * self.NEXT_K - 1, N_RING))

    @property
    def NEXT_READS(self):                                              # noqa: N802
        return 8 + 2 * self.NEXT_K + 1

    def next_step_reads(self, p, part, parts):
        """Before the barrier, in `parts` pieces one MFMA apart (a burst would queue the LDS pipe ahead
        of the reads after the barrier): step j+1's LSE and D (the wave's own DMA of them landed: vmcnt;
        L's and D's registers are free once dS_j is computed) and S_{j+1}'s first K fragments (K never
        changes), taken by the next schedule as prefetched."""
        k = self.k
        st = k.stream
        if part == 0:
            self.shadow_until("dS written")
            last_st_dma = max(i for i, x in enumerate(st) if x.is_lds_dma)    # gen_dma's last: D's
            k.s_waitcnt(vmcnt=sum(1 for x in st[last_st_dma + 1:] if x.info.get("unit") == "VMEM"))
            self._next = {}
            ks = [f for _, opnds, _ in self.ops_s(1 - p) for f in opnds if isinstance(f, Frag) and f.key[0] == "k"]
            self._next_reads = [(f, f.regs) for f in self.stats_reads(1 - p)] + \
                [(f, self.RING_SLOTS[slot]) for f, slot in zip(ks[:2 * self.NEXT_K], self.PREFETCH_SLOTS)]
        todo = self._next_reads
        n = -(-len(todo) // parts)
        for f, regs in todo[part * n:(part + 1) * n]:
            if regs in self.RING_SLOTS:
                slot = self.RING_SLOTS.index(regs)
                assert self._slot_free[slot] <= self._issued - 1, f"ring slot {slot} still in use"
            f.emit(regs)
            self._next[f.key] = (regs, len(st) - 1)

    def step_barrier(self, p):
        """Every wave's dS_j in LDS and its reads of Q_j / dO_j done (all of dK's were issued by now),
        step j+1's DMA (issued under S_j) landed: s_barrier; then S_{j+1}'s first Q fragment (into a
        ring slot the rest of dK does not use; the next schedule takes it as prefetched)."""
        k = self.k
        st = k.stream
        last_dma = max(i for i, x in enumerate(st) if x.is_lds_dma)
        k.s_waitcnt(vmcnt=sum(1 for x in st[last_dma + 1:] if x.info.get("unit") == "VMEM"), lgkmcnt=0)
        self._lds_done = len(st)
        k.s_barrier()
        q0 = next(f for _, opnds, _ in self.ops_s(1 - p) for f in opnds if isinstance(f, Frag) and f.key == ("q", 0))
        slot = self.PREFETCH_SLOTS[-1]                                  # the same slots in every step: the next
        assert self._slot_free[slot] <= self._issued - 1, f"ring slot {slot} still in use at the barrier"
        q0.emit(self.RING_SLOTS[slot])                                  # body is entered from several
        self._prefetched = {**self._next, q0.key: (self.RING_SLOTS[slot], len(st) - 1)}

    def tail(self, p):
        """dQ of the last step (dS in LDS buffer p) and its atomics."""
        k = self.k
        self._prefetched = None                                       # (the last step's prefetch: unused)
        with k.region(f"tail{p}", expect={"mfma": 16, "ds_read": 64}):
            self.schedule(self.ops_dq(p), ahead=3)
            k.s_nop(12)                                              # last dQ MFMA -> atomics' data
            self.fill(self.gen_atomics())

    def loop(self):
        k = self.k
        self.load_tile()
        self.zero_acc()                                               # while the loads fly
        k.s_waitcnt(vmcnt=0)                                          # K, Vᵀ and step 0 landed
        k.s_barrier()
        self._lds_done = len(k.stream)
        self._prefetched = None
        self.body(0, dq_prev=False)
        k.s_cbranch_scc0(k.L(".Ltail0"))
        k.label(".Lloop")
        self.body(1, dq_prev=True)
        k.s_cbranch_scc0(k.L(".Ltail1"))
        self.body(0, dq_prev=True)
        k.s_cbranch_scc1(k.L(".Lloop"))
        k.label(".Ltail0")
        self.tail(0)
        k.s_branch(k.L(".Lloop_end"))
        k.label(".Ltail1")
        self.tail(1)
        k.label(".Lloop_end")

    # ---- epilogue ----------------------------------------------------------------------------------
    def store(self):
        """dVᵀ / scale and dKᵀ -> rows of dV, dK (fa_layouts.pack_o: 8 consecutive d per lane after the
        swaps), one dwordx4 per (key block, d block, half)."""
        k = self.k
        k.label(".Lstore")
        with k.region("store"):
            if self.fold:
                k.v_rcp_f32(TMP[4], A["scalar"])                        # dV' = scale·dV
            else:
                k.v_mov_b32(TMP[4], A["scalar"])                        # dK = scale·Σ dSᵀ·Q
            self.lane_bits()
            k.s_lshl_b32(ST0, WAVE, 6)
            k.v_add_u32(TMP[2], ST0, TMP[0])                           # key - K0 of block 0
            k.v_lshlrev_b32(TMP[3], 4, TMP[1])                         # 16 * lane//32
            k.s_nop(0)
            for acc0, rs, ss, scale in ((DV_ACC, RS_DV, A["Seqs_dv"], self.fold), (DK_ACC, RS_DK, A["Seqs_dk"], not self.fold)):
                k.s_mul_i32(SOFF_T, K0, ss)
                for kb in range(2):
                    k.v_add_u32(TMP[5], 32 * kb, TMP[2])
                    k.v_mul_lo_u32(TMP[5], TMP[5], ss)
                    k.v_add_u32(TMP[5], TMP[5], TMP[3])
                    for db in range(4):
                        t = 2 * db + kb
                        X = S[0:15]
                        for i in range(16):
                            k.v_accvgpr_read_b32(X[i], acc0[16 * t + i])
                        if scale:
                            for i in range(0, 16, 2):
                                k.v_pk_mul_f32(X[i:i + 1], X[i:i + 1], TMP[4:5], op_sel_hi=[1, 0])
                        for c in range(2):
                            b0 = 8 * c
                            for e in range(4):
                                k.instr(self.cvt_pk, X[b0 + e], X[b0 + 2 * e], X[b0 + 2 * e + 1])
                            k.s_nop(1)
                            k.v_permlane32_swap_b32(X[b0], X[b0 + 2])
                            k.v_permlane32_swap_b32(X[b0 + 1], X[b0 + 3])
                            k.buffer_store_dwordx4(X[b0:b0 + 3], TMP[5], rs, SOFF_T, offen=True, offset=64 * db + 32 * c)
                        k.s_nop(1)

    def build(self):
        k = self.k
        self.load_args()
        self.setup()

        def one_tile():
            self.select_tile()
            self.pass_setup()
            self.loop()
            self.store()
        # the second tile: every wave past its last K read, its DMAs landed
        G.pass_loop(k, PASS, self.passes, one_tile, drain=True)
        k.s_endpgm()
        k.label(".Lempty")
        self.zero_acc()
        k.s_branch(k.L(".Lstore"))
        return k


def build(dtype="bf16", mask=0, atomic32=True, group=False, *, fold_scale=None, **levers) -> Kernel:
    """The dQ/dK/dV kernel of one aiter key (module docstring): dtype 'bf16' or 'fp16', mask 0 / 1
    (causal top-left) / 2 (causal bottom-right), atomic32 (fp32 dq workspace) or not (q's dtype),
    group (varlen: aiter's seqstart pointers). fold_scale and the schedule's levers (lower-case names
    of _Builder.LEVERS: ahead, wait_span, dma_spread, stats_spread, reread_dv, dq_every, barrier_early,
    next_early, next_k, feed_fit, feed_carry, slot; xcd_map, batch mode only: which workgroup computes
    which key tile and head, fa_grid.xcd_remap) change the instruction order only, never the results."""
    return _Builder(dtype, mask, atomic32, group, fold_scale, **levers).build()
