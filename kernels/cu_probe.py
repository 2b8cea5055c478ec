"""cu_probe: microbenchmarks of one compute unit's issue rules, each timing a repeated instruction
pattern with the shader clock inside the kernel (s_memtime), to settle on silicon what the timing
model (flyasm.perf.cu) assumes and what issue 20's rejected hypotheses assumed instead.

    k = build("valu_indep", waves=4)          # one workgroup of 4 waves: one wave per SIMD
    rec = run(k, iters=64)                    # emulator; run(k, iters, backend="hip") on an AMD GPU

Every wave: loads its arguments, meets the others at a barrier, reads s_memtime and s_memrealtime,
runs `iters` rounds of the pattern (UNROLL copies a round, then a 3-instruction scalar loop tail),
reads both counters again, and lane 0 writes one record of RECORD dwords to out[workgroup, wave]:
shader-clock ticks, real-time ticks (both 64-bit, end - start), the pattern's check value (the
bits of its check register, whose value after the run each pattern states: `expected_bits`), and the
real time its timed loop began.
s_memtime counts the shader clock and s_memrealtime a fixed-frequency counter (LLVM: the former
backs __builtin_readcyclecounter on gfx9, the latter __builtin_amdgcn_s_memrealtime, 100 MHz on
gfx9 parts), so their ratio is the clock the pattern ran at.

The chase patterns time memory latency instead: each unit is a load whose address the previous load
returned (`chain`: one random cycle over a buffer's 128-byte lines), sized to stay in the L2, in the
Infinity Cache, or in neither.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from flyasm import Kernel, s, v
from flyasm.isa.operands import exec_
from flyasm.plan import RegisterPlan

UNROLL = 64               # pattern copies a loop round (its 3-instruction tail: 12/64 cycles a unit)
RECORD = 8                # dwords a wave: ticks lo/hi, real-time ticks lo/hi, check value, start
                          # real time lo/hi (when the wave's timed loop began, on the device's clock), 1 unused
RSRC_WORD3 = 0x00020000   # gfx9 V# word 3: raw buffer, 32-bit data format (as kernels/vector_add.py)

# ---- the register plan (inclusive ranges) --------------------------------------------------------
#  region      registers    holds
#  tid         v0           workitem id
#  addr        v1           this wave's record offset (bytes)
#  store       v[2:5]       the store patterns' lane offsets (spread over lines, contiguous) and data
#  work        v[8:39]      the pattern's independent accumulators (8 chains; pairs for packed ops)
#  consts      v[40:47]     0.0, 1.0, 2.0 and, at v[44:45], the packed pair (1.0, 1.0) the patterns read
#  rec         v[48:55]     the record lane 0 stores
#  mfma_ab     v[56:63]     MFMA A and B (8 bf16 a lane each, all 1.0)
#  acc         v[64:95]     two 32x32 f32 MFMA accumulators
#  ring        v[96:159]    the load patterns' destinations, LOAD_RING pairs in turn
#  kernarg/wg  s[0:2]       kernarg pointer, workgroup id x
#  args        s[4:6]       out pointer, iters
#  rsrc        s[8:11]      V# of out
#  t0 / t1     s[12:15]     s_memtime at start / end;  r0 / r1  s[16:19]  s_memrealtime
#  count       s[20]        rounds left;  scalar  s[21]  the SALU pattern's counter
#  mask        s[22:23]     the compare pattern's lane mask
#  wave        s[24:25]     this wave's index in the workgroup, record base (bytes)
#  chain_ptr   s[26:27]     the chase patterns' buffer;  rsrc_chain  s[28:31]  its V#
PLAN = dict(regions={
    "tid": v[0:0], "addr": v[1:1], "store": v[2:5], "work": v[8:39], "consts": v[40:47], "rec": v[48:55],
    "mfma_ab": v[56:63], "acc": v[64:95], "ring": v[96:159],
    "kernarg": s[0:1], "wg": s[2:2], "out_ptr": s[4:5], "iters": s[6:6], "rsrc": s[8:11],
    "t0": s[12:13], "t1": s[14:15], "r0": s[16:17], "r1": s[18:19], "count": s[20:20], "scalar": s[21:21],
    "mask": s[22:23], "wave": s[24:25], "chain_ptr": s[26:27], "rsrc_chain": s[28:31]}, strict=True)
ZERO, ONE, TWO = v[40], v[41], v[42]
ONES = v[44:45]
A, B = v[56:59], v[60:63]
ACC = (v[64:79], v[80:95])
SCALAR, MASK, RSRC_CHAIN = s[21], s[22:23], s[28:31]
SPREAD, CONTIG, SDATA = v[2], v[3], v[4:5]
RING = 96                 # first VGPR of the load patterns' destination ring (the plan's 'ring')
STORE_BYTES = 4096        # the store patterns' target: 32 lines the waves rewrite
WORK = 8                  # independent chains


def _w(i: int):
    return v[8 + i % WORK]


@dataclass(frozen=True)
class Pattern:
    """One unit of a probe's loop body and what each account of the hardware says it costs a wave
    running alone on its SIMD. unit: what the costs count (e.g. one VALU op); body(k, i): emits unit i;
    cycles: the CU model's rule (flyasm.perf.cu), why: where the rule comes from; alternatives:
    {hypothesis: cycles} for issue 20's tested and rejected accounts; expected(n, words): the check
    register's value after n units (v8, or the first accumulator for the MFMA patterns: a float, or
    uint32 bits), words being the buffer the pattern uses; chain_bytes: that buffer's size (0: none)."""
    unit: str
    body: object
    cycles: float
    why: str
    expected: object
    alternatives: dict = field(default_factory=dict)
    check: object = v[8]
    chain_bytes: int = 0


def _valu_dep(k, i):
    k.v_add_f32(v[8], 1.0, v[8])


def _valu_indep(k, i):
    k.v_add_f32(_w(i), 1.0, _w(i))


def _pk_add(k, i):
    j = 8 + 2 * (i % WORK)
    k.v_pk_add_f32(v[j:j + 1], v[j:j + 1], ONES)


def _exp(k, i):
    k.v_exp_f32(_w(i), ZERO)                 # 2^0 = 1.0 into each chain, no dependency between units


def _exp_valu(k, i):
    k.v_exp_f32(v[16 + i % 4], ZERO)
    for j in range(3):
        k.v_add_f32(_w(3 * i + j), 1.0, _w(3 * i + j))


def _nop(n):
    def body(k, i):
        k.s_nop(n)
    return body


def _salu_valu(k, i):
    k.v_add_f32(_w(i), 1.0, _w(i))
    k.s_add_u32(SCALAR, SCALAR, 1)


def _cmp_cndmask(k, i):
    """FlyDSL's generic-kernel idiom: a VALU compare writes an SGPR pair that v_cndmask reads as its
    lane mask, with the s_nop the hazard needs between them (LLVM: 2 wait states)."""
    k.v_cmp_gt_f32_e64(MASK, TWO, ONE)              # 2 > 1: every lane true
    k.s_nop(1)
    k.v_cndmask_b32_e64(v[9], ZERO, _w(0), MASK)
    k.v_add_f32(v[8], 1.0, v[8])


def _mfma(k, i):
    """Two accumulators in turn; A x B (all 1.0, K = 16) adds 16 to every element."""
    a = ACC[i % 2]
    k.v_mfma_f32_32x32x16_bf16(a, A, B, a)


def _mfma_valu(k, i):
    a = ACC[i % 2]
    k.v_mfma_f32_32x32x16_bf16(a, A, B, a)
    for j in range(7):                        # 4 issue cycles + 7 x 4: exactly the MFMA's 32
        k.v_add_f32(_w(7 * i + j), 1.0, _w(7 * i + j))


def _chase(k, i):
    """One load whose address is the value the previous one returned, then the wait for it."""
    k.buffer_load_dword(v[8], v[8], RSRC_CHAIN, 0, offen=True)
    k.s_waitcnt(vmcnt=0)


LOAD_RING = 32            # the load patterns' destination pairs (UNROLL is a multiple: the ring wraps whole)
IN_FLIGHT = LOAD_RING - 1  # memory ops the load and store patterns keep in flight: 31 cover the model's
                           # 800-cycle latency at 4 waves' 8-clock ports (32 a unit) (vmcnt counts 63)


def _store(offsets):
    """One 8-byte store a lane (512 bytes a wave); every 16th also waits until at most IN_FLIGHT are
    in flight, so the wave never has more outstanding than vmcnt counts (63)."""
    def body(k, i):
        k.buffer_store_dwordx2(SDATA, offsets, RSRC_CHAIN, 0, offen=True)
        if i % 16 == 15:
            k.s_waitcnt(vmcnt=IN_FLIGHT)
    return body


def _load(offsets):
    """One 8-byte load a lane from the lines the workgroup already read, into 16 register pairs in turn,
    each after a wait that leaves IN_FLIGHT in flight: the pair's previous load has landed."""
    def body(k, i):
        j = RING + 2 * (i % LOAD_RING)
        k.s_waitcnt(vmcnt=IN_FLIGHT)
        k.buffer_load_dwordx2(v[j:j + 1], offsets, RSRC_CHAIN, 0, offen=True)
    return body


LINE = 128                # bytes: each load of a chase touches a line no other load of the cycle does


def chain(nbytes: int, seed: int = 0) -> np.ndarray:
    """uint32 words of a chase buffer: one random cycle through all its 128-byte lines, each line's
    first word holding the byte offset of the next line (so no stride repeats for a prefetcher)."""
    lines = nbytes // LINE
    order = np.random.default_rng(seed).permutation(lines)
    words = np.zeros(nbytes // 4, np.uint32)
    words[order * (LINE // 4)] = np.roll(order, -1).astype(np.uint32) * LINE
    return words


def chased(words: np.ndarray, n: int) -> np.uint32:
    """The byte offset n loads of the chase reach from offset 0."""
    off = 0
    for _ in range(n):
        off = int(words[off // 4])
    return np.uint32(off)


def _chased(n: int, words: np.ndarray) -> np.uint32:
    return chased(words, n)


def _chains(per_unit: int):
    """Value of v8 after n units that spread per_unit increments of 1.0 over the WORK chains."""
    return lambda n, w: float(-(-(per_unit * n) // WORK))


TURN = "a wave issues one instruction a 4-cycle turn (ROCm Compute Profiler's scheduler)"
PATTERNS = {
    "valu_dep": Pattern("VALU op", _valu_dep, 4, "a wave64 VALU op holds the 16-lane SIMD 4 cycles; the next, "
                        "dependent, issues on the wave's next turn", lambda n, w: float(n),
                        {"VALU result latency of 8 cycles": 8}),
    "valu_indep": Pattern("VALU op", _valu_indep, 4, "as valu_dep: independence gains nothing", _chains(1),
                          {"dual issue: a wave pairs independent VALU ops": 2,
                           "co-issue with the SIMD's other wave (Params.valu_coissue): at 2 waves a SIMD": 4}),
    "pk_add_f32": Pattern("v_pk_add_f32", _pk_add, 4, "two f32 a lane in one 4-cycle pass", _chains(1),
                          {"packed f32 in two passes": 8}),
    "exp": Pattern("v_exp_f32", _exp, 16, "TRANS at a quarter of the VALU rate (LLVM SISchedule)", lambda n, w: 1.0,
                   {"TRANS at half rate": 8}),
    "exp_valu": Pattern("v_exp_f32 + 3 VALU ops", _exp_valu, 28, "TRANS holds the VALU 16 cycles, then 3 x 4",
                        _chains(3), {"a separate TRANS pipe: the VALU ops run under the exp": 16}),
    "nop0": Pattern("s_nop 0", _nop(0), 4, "one wait state is one turn; " + TURN, lambda n, w: 0.0,
                    {"a wait state is 1 cycle": 1}),
    "nop7": Pattern("s_nop 7", _nop(7), 32, "8 wait states, 8 turns", lambda n, w: 0.0,
                    {"a wait state is 1 cycle": 8}),
    "salu_valu": Pattern("VALU op + SALU op", _salu_valu, 8, TURN, _chains(1),
                         {"one wave's VALU and SALU op issue in the same turn": 4}),
    "cmp_cndmask": Pattern("v_cmp_e64, s_nop 1, v_cndmask, v_add", _cmp_cndmask, 20,
                           "3 VALU turns, 2 wait-state turns, the v_add's turn", lambda n, w: float(n),
                           {"a wait state is 1 cycle": 14}),
    "chase_l2": Pattern("dependent load + wait", _chase, 808, "vmem_latency (800, HBM-miss order, one number for "
                        "every read) after the load's turn and its line at the port, to the next turn; a 1 MiB "
                        "cycle stays in the XCD's 4 MB L2", _chased,
                        {"an L2 hit at 500 cycles (tested in session 11)": 500}, chain_bytes=1 << 20),
    "chase_mall": Pattern("dependent load + wait", _chase, 808, "as chase_l2; a 64 MiB cycle misses the L2 and "
                          "stays in the 256 MB Infinity Cache", _chased, {}, chain_bytes=64 << 20),
    "chase_hbm": Pattern("dependent load + wait", _chase, 808, "as chase_l2; a 1 GiB cycle misses the Infinity "
                         "Cache too", _chased, {}, chain_bytes=1 << 30),
    "store_lines": Pattern("buffer_store_dwordx2 over 32 lines", _store(SPREAD), 128,
                           "the CU's one port looks up a 128-byte line a clock (ROCm Compute Profiler's vL1D); "
                           "like FlyDSL's O stores, a wave's 512 bytes fall in 32 lines, 16 bytes each: 32 "
                           "clocks a store, and the 4 waves' stores take turns", lambda n, w: 0.0,
                           {"a store holds the port for its bytes (512 B at 64 B a clock)": 32},
                           chain_bytes=STORE_BYTES),
    "store_contig": Pattern("buffer_store_dwordx2, 4 whole lines", _store(CONTIG), 32,
                            "its 512 bytes at the port's 64 bytes a clock, the 4 waves' stores in turn",
                            lambda n, w: 0.0, {}, chain_bytes=STORE_BYTES),
    "load_lines": Pattern("buffer_load_dwordx2 over 32 lines", _load(SPREAD), 128,
                          "as store_lines: a partial line read again costs its lookup, not another fill "
                          "(session 10's partial-line port pricing; like FlyDSL's Q loads)",
                          lambda n, w: w[0], {"a load holds the port for its bytes": 32}, check=v[RING],
                          chain_bytes=STORE_BYTES),
    "load_contig": Pattern("buffer_load_dwordx2, 4 whole lines", _load(CONTIG), 32,
                           "its 512 bytes at the port's 64 bytes a clock", lambda n, w: w[0], {}, check=v[RING],
                           chain_bytes=STORE_BYTES),
    "mfma": Pattern("v_mfma_f32_32x32x16_bf16", _mfma, 32, "8 passes x 4 cycles (LLVM SISchedule gfx950)",
                    lambda n, w: 16.0 * -(-n // 2), check=ACC[0][0]),
    "mfma_valu": Pattern("MFMA + 7 VALU ops", _mfma_valu, 32, "the VALU ops co-execute under the 32-cycle MFMA, "
                         "which takes the VALU port for its 4 issue cycles", lambda n, w: 16.0 * -(-n // 2),
                         {"no VALU during an 8-pass MFMA's first 2 passes (ROCm/llvm-project PR 2838)": 36},
                         check=ACC[0][0]),
}
WAVES = (4, 8)            # the workgroup sizes the probes run: one and two waves a SIMD


def build(pattern: str, waves: int = 4) -> Kernel:
    """One probe kernel: `waves` waves a workgroup (4: one a SIMD, 8: two)."""
    if pattern not in PATTERNS:
        raise ValueError(f"pattern is one of {sorted(PATTERNS)}, not {pattern!r}")
    if waves not in (1, 2, 4, 8, 12, 16):
        raise ValueError(f"waves is 1, 2, 4, 8, 12 or 16, not {waves}")
    pat = PATTERNS[pattern]
    name = f"cu_probe_{pattern}_w{waves}"
    plan = RegisterPlan(name, **PLAN)
    k = Kernel(name, block=64 * waves, plan=plan, arg_layout="natural")
    out, iters, chain_arg = k.arg("out", "ptr"), k.arg("iters", "u32"), k.arg("chain", "ptr")
    P = plan
    with k.region("args"):
        k.s_load_dwordx2(P.out_ptr, k.kernarg_ptr, out.offset)
        k.s_load_dword(P.iters, k.kernarg_ptr, iters.offset)
        k.s_load_dwordx2(P.chain_ptr, k.kernarg_ptr, chain_arg.offset)
        k.s_waitcnt(lgkmcnt=0)
        k.s_mov_b32(P.rsrc[0], P.out_ptr[0])
        k.s_and_b32(P.rsrc[1], P.out_ptr[1], 0xFFFF)
        k.s_mov_b32(P.rsrc[2], 0x7FFFFFFF)
        k.s_mov_b32(P.rsrc[3], RSRC_WORD3)
        k.s_mov_b32(P.rsrc_chain[0], P.chain_ptr[0])
        k.s_and_b32(P.rsrc_chain[1], P.chain_ptr[1], 0xFFFF)
        k.s_mov_b32(P.rsrc_chain[2], 0xFFFFFFFF)
        k.s_mov_b32(P.rsrc_chain[3], RSRC_WORD3)
    with k.region("record address"):
        # record of wave w of workgroup g: byte (g * waves + w) * RECORD * 4
        k.v_readfirstlane_b32(P.wave[0], k.workitem_id)
        k.s_lshr_b32(P.wave[0], P.wave[0], 6)
        k.s_mul_i32(P.wave[1], k.workgroup_id("x"), waves)
        k.s_add_u32(P.wave[1], P.wave[1], P.wave[0])
        k.s_mul_i32(P.wave[1], P.wave[1], RECORD * 4)
        k.v_mov_b32(P.addr, P.wave[1])
    with k.region("init"):
        for i in range(WORK * 4):
            k.v_mov_b32(v[8 + i], 0.0)
        for r, x in ((ZERO, 0.0), (ONE, 1.0), (TWO, 2.0), (ONES[0], 1.0), (ONES[1], 1.0)):
            k.v_mov_b32(r, x)
        for r in list(A) + list(B):
            k.v_mov_b32(r, 0x3F803F80)                      # two bf16 1.0 a register
        for a in ACC:
            for r in a:
                k.v_mov_b32(r, 0.0)
        # lane l: spread = (l % 32) x 128 + (l / 32) x 8 (32 lines, 16 bytes each); contig = 8 l
        k.v_and_b32(CONTIG, 63, k.workitem_id)
        k.v_and_b32(SPREAD, 31, CONTIG)
        k.v_lshlrev_b32(SPREAD, 7, SPREAD)
        k.v_lshrrev_b32(SDATA[0], 5, CONTIG)
        k.v_lshl_or_b32(SPREAD, SDATA[0], 3, SPREAD)
        k.v_lshlrev_b32(CONTIG, 3, CONTIG)
        k.v_mov_b32(SDATA[0], CONTIG)                      # the data: each lane's own offset, twice
        k.v_mov_b32(SDATA[1], CONTIG)
        k.s_mov_b32(P.scalar, 0)
        k.s_mov_b32(P.count, P.iters)
        k.s_barrier()
    with k.region("timed"):
        k.s_memtime(P.t0)
        k.s_memrealtime(P.r0)
        k.s_cmp_eq_u32(P.count, 0)
        k.s_cbranch_scc1(k.L("timed_end"))
        k.label("round")
        for i in range(UNROLL):
            pat.body(k, i)
        k.s_sub_u32(P.count, P.count, 1)
        k.s_cmp_lg_u32(P.count, 0)
        k.s_cbranch_scc1(k.L("round"))
        k.label("timed_end")
        k.s_memtime(P.t1)
        k.s_memrealtime(P.r1)
        k.s_waitcnt(vmcnt=0, lgkmcnt=0)                    # the stamps, and the memory patterns' last ops
    with k.region("record"):
        k.s_sub_u32(P.t1[0], P.t1[0], P.t0[0])
        k.s_subb_u32(P.t1[1], P.t1[1], P.t0[1])
        k.s_sub_u32(P.r1[0], P.r1[0], P.r0[0])
        k.s_subb_u32(P.r1[1], P.r1[1], P.r0[1])
        for j, r in enumerate((P.t1[0], P.t1[1], P.r1[0], P.r1[1])):
            k.v_mov_b32(P.rec[j], r)
        k.v_mov_b32(P.rec[4], pat.check)
        k.v_mov_b32(P.rec[5], P.r0[0])
        k.v_mov_b32(P.rec[6], P.r0[1])
        k.v_mov_b32(P.rec[7], 0)
        k.s_mov_b64(exec_, 1)                               # lane 0 writes the wave's record
        k.buffer_store_dwordx4(P.rec[0:3], P.addr, P.rsrc, 0, offen=True)
        k.buffer_store_dwordx4(P.rec[4:7], P.addr, P.rsrc, 0, offen=True, offset=16)
    k.s_endpgm()
    return k


def kernarg(k: Kernel, out: int, iters: int, chain: int) -> bytes:
    """Probe k's kernarg bytes for device addresses out and chain, laid out as the kernel declares its
    arguments (flyasm.run.args.pack_args)."""
    from flyasm.run.args import pack_args, specs_from_kernel
    return pack_args(specs_from_kernel(k), [out, iters, chain], None, k.kernarg_size)


def records(out: np.ndarray) -> dict:
    """{ticks, realtime, check, start} arrays (one entry a wave) from the out buffer's uint32 words."""
    r = np.asarray(out, np.uint32).reshape(-1, RECORD)
    return {"ticks": r[:, 0].astype(np.uint64) | (r[:, 1].astype(np.uint64) << np.uint64(32)),
            "realtime": r[:, 2].astype(np.uint64) | (r[:, 3].astype(np.uint64) << np.uint64(32)),
            "check": r[:, 4].copy(),
            "start": r[:, 5].astype(np.uint64) | (r[:, 6].astype(np.uint64) << np.uint64(32))}


def expected_bits(pattern: str, n: int, words: np.ndarray | None = None) -> np.uint32:
    """The check register's bits after n units of the pattern (words: the buffer it used)."""
    v = PATTERNS[pattern].expected(n, words)
    return np.float32(v).view(np.uint32) if isinstance(v, float) else np.uint32(v)


def run(k: Kernel, iters: int, grid: int = 1, backend: str = "emu", chain_words=None, **launch_kw) -> dict:
    """Run a probe (`grid` workgroups) and return its records (`records`). The out buffer starts
    poisoned (all ones), so a wave that writes no record shows. chain_words: the chase buffer
    (`chain`), for the chase patterns."""
    from flyasm.run import launch
    out = np.full(grid * (k.threads // 64) * RECORD, 0xFFFFFFFF, np.uint32)
    words = np.zeros(LINE // 4, np.uint32) if chain_words is None else chain_words
    launch(k, grid, k.threads, out, np.uint32(iters), words, backend=backend, **launch_kw)
    return records(out)
