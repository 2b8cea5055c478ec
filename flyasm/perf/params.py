"""Every number of the timing model: documented figures (with their source) and fitted ones.

Fitted values are set by perf.calibrate on aiter's measured MI355X rows (../shared/aiter/measured)
and stored in params.json beside this file; `FITTED` names them. Nothing here is per kernel."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

FITTED = ("launch_us", "clock_derate", "hbm_efficiency")
# fitted too, but in the simulation (they move the timeline, the latencies, the atomics' pace): set by
# a search over their values (benchmarks/model_accuracy.py --fit-simulated), not by the post-simulation fit
FITTED_SIMULATED = ("refetch_latency", "wg_jitter", "l2_atomic_dwords_per_clk")
STORE = Path(__file__).with_name("params.json")


@dataclass(frozen=True)
class Params:
    # ---- documented -------------------------------------------------------------------------
    clock_ghz: float = 2.4          # MI355X peak engine clock (AMD Instinct MI355X data sheet, 2025)
    n_cu: int = 256                 # MI355X compute units (same data sheet)
    hbm_tb_s: float = 8.0           # MI355X HBM3E bandwidth, 8 TB/s (same data sheet)
    # MFMA passes come from isa_tables (LLVM SISchedule.td SIDPGFX950FullSpeedModel), one pass =
    # 4 cycles (notes §1.2); check: 256 CU x 4 SIMD x 32x32x16x2 flop / 32 cycles x 2.4 GHz =
    # 2.52 PFLOPS, the data sheet's dense bf16 peak.
    lds_bytes_per_clk: int = 256    # 64 banks x 4 bytes (CDNA4 ISA §11.1; notes §1.3)
    # cycles between two issue turns of one SIMD: the scheduler serves the CU's 4 SIMDs round-robin,
    # one per cycle, at most one instruction per wave per turn (ROCm Compute Profiler, "Pipeline
    # descriptions: Scheduler"); a wait state (s_nop) is one turn
    issue_turn: int = 4
    # cycles after an XDL MFMA's last pass before a VALU, memory op or MFMA SrcA/B may read its D:
    # LLVM GCNHazardRecognizer asks NP + 4 wait states (NP >= 4 passes; notes §4.2 rows 1-3) after
    # issue, = NP x 4 pipe cycles + 16 at a 4-cycle wait state
    mfma_writeback: int = 16
    # Placement (perf.placement). MI355X: 256 CUs in 8 XCDs of 32, each XCD with its own 4 MiB L2,
    # 256 MiB Infinity Cache (ROCm "AMD GPU specifications" table, MI355X row: "256 (32 per XCD)" CUs,
    # L2 "32 (4 per XCD)" MiB, L3 256 MiB; https://rocm.docs.amd.com/en/latest/reference/gpu-specs.html).
    # Workgroups go round-robin over the XCDs, linear id mod 8 (HipKittens, arXiv:2511.08083, on
    # MI355X's chiplets; FlyDSL's flash_attn_utils.NUM_XCD_GFX950 and CK's XCD remapping rely on it).
    n_xcd: int = 8
    l2_bytes: int = 4 << 20         # per XCD
    mall_bytes: int = 256 << 20     # device-wide, behind every XCD's L2
    # ---- assumptions (not fitted; printed with every prediction) ---------------------------------
    trans_cycles: int = 16          # TRANS issue: quarter rate (LLVM SISchedule.td, WriteTrans32 on gfx9)
    trans_latency: int = 4          # extra cycles before a TRANS result can be read (notes §4 row 14: 1 wait state)
    lds_latency: int = 64           # DS issue to data (report.model's LATENCY["ds"])
    smem_latency: int = 200         # SMEM issue to data (report.model's LATENCY["smem"])
    barrier_cycles: int = 1
    # VALU co-issue, off (an experiment, benchmarks/model_accuracy.md session 12): a SIMD issues a
    # second VALU op of another wave in the first's turn when neither is packed, TRANS or cross-lane.
    # gfx950 counts "quad-cycles two VALU instructions are issued" per SIMD (SQ_ACTIVE_INST_VALU2, ROCm
    # Compute Profiler counter_defs.yaml); when it happens is not documented. Measured by
    # benchmarks/cu_probes.py (valu_indep at two waves a SIMD)
    valu_coissue: bool = False
    taken_branch: int = 4           # refetch after a taken branch (one issue slot)
    wg_stagger: int = 64            # cycles between dispatches of co-resident workgroups on a CU
    # device L2 bytes/cycle: 8 XCDs x 16 channels x 128 B/clk (CDNA3 white paper's L2; assumed for CDNA4)
    l2_hit_bytes_per_clk: float = 16384.0
    # ---- fitted -----------------------------------------------------------------------------
    vmem_latency: int = 800         # VMEM issue to data at no load (cycles; ~330 ns, HBM-miss order)
    cu_bytes_per_clk: float = 64.0  # one CU's vector-memory port (64 B/clk, the GCN/CDNA L1 fill rate)
    # dword read-modify-writes per cycle the device's L2s perform for VMEM atomics (they bypass the L1:
    # LLVM AMDGPUUsage; atomic requests go from the vL1D to the L2: ROCm Compute Profiler), shared by
    # every busy CU: 8 XCDs x 16 L2 channels (CDNA3 white paper; assumed for CDNA4) at a rate per
    # channel that is fitted (192 = 1.5 dwords per channel per cycle): aiter's fp32-atomic attention
    # backward and its split-K GEMMs' atomic epilogues (benchmarks/model_accuracy.md)
    l2_atomic_dwords_per_clk: float = 192.0
    cu_atomic_dwords_per_clk: float | None = None   # one CU's share; None: every CU busy (model sets it)
    cu_hbm_bytes_per_clk: float | None = None       # one CU's share of HBM for its stores; None: every CU busy
    # a store completes when the L2 has taken it (it writes back: the device's HBM queue, perf.hbm,
    # carries the bytes on); the model sets False only for a launch without a timeline of its memory
    # traffic (no probe), where stores wait for their CU's share of HBM instead
    stores_complete_at_l2: bool = True
    # ---- fitted in the simulation (FITTED_SIMULATED) -----------------------------------------
    # cycles a read of shared data waits beyond vmem_latency when HBM serves it again (the MALL
    # evicted what an earlier workgroup fetched). L2 and MALL hits and first reads (GEMM operands,
    # Q tiles) keep vmem_latency: the GEMM rows leave no room for more (model_accuracy.md)
    refetch_latency: int = 2800
    # relative spread (standard deviation) of workgroup durations: real workgroups of equal work do not
    # finish together (memory contention, clocks), which desynchronises the readers of a stream; the
    # placement model's timeline draws it (a fixed pseudo-random draw per workgroup)
    wg_jitter: float = 0.04
    # ---- fitted (perf.calibrate) ------------------------------------------------------------
    launch_us: float = 3.0          # launch + first-wave + last-write overhead of one dispatch
    clock_derate: float = 1.0       # sustained / peak clock with every CU busy (power management)
    hbm_efficiency: float = 0.8     # achievable / peak HBM bandwidth

    def clock_mhz(self, active):
        """Sustained clock (MHz) when a fraction `active` of the CUs is busy (a number or an array).
        Assumption: a power-limited part boosts when CUs idle, so the clock falls linearly from the
        peak (nothing busy) to clock_derate x peak (all busy). Seen in aiter's measured rows: a grid
        filling half the CUs (attention b1 h32 s1024, 128 workgroups) runs a workgroup about 20%
        faster than one filling them all (b8, 1024 workgroups), with the same per-workgroup work."""
        return self.clock_ghz * 1e3 * (1.0 - (1.0 - self.clock_derate) * active)

    @property
    def hbm_bytes_per_clk(self) -> float:
        """HBM bytes per engine cycle, the data sheet's 8 TB/s at its 2.4 GHz peak clock: 3333. The
        simulation counts cycles before the fitted clock applies; at a sustained clock below the peak
        a cycle moves more, so stores are priced at the slowest pace the share can have."""
        return self.hbm_tb_s * 1e3 / self.clock_ghz

    def to_dict(self) -> dict:
        return asdict(self)

    def with_(self, **kw) -> "Params":
        return replace(self, **kw)


def load() -> Params:
    """The calibrated parameters (params.json when present, else the defaults above)."""
    if STORE.exists():
        d = json.loads(STORE.read_text())
        names = {f.name for f in fields(Params)}
        return Params(**{k: v for k, v in d.get("params", {}).items() if k in names})
    return Params()
