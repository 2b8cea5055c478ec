"""The CU probes (kernels/cu_probe.py, benchmarks/cu_probes.py): each runs in the emulator with the
value its pattern must leave, the emulator's time stamps count what ran between them, the timing model
prices each pattern by the rule the probe table states, the script prints the model's table and says
why nothing was measured without an AMD GPU, and its GPU path runs end to end on a fake HIP library
whose device is the emulator."""
from __future__ import annotations

import ctypes
import json
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "kernels"), str(ROOT / "benchmarks")]

import cu_probe as CP  # noqa: E402
import cu_probes as CU  # noqa: E402

from flyasm import Kernel, s, v  # noqa: E402
from flyasm.check import CheckError  # noqa: E402
from flyasm.emu.memory import EmuError  # noqa: E402
from flyasm.isa.operands import exec_  # noqa: E402
from flyasm.perf import params as P  # noqa: E402
from flyasm.run import hip, launch  # noqa: E402
from test_hip_backend import FakeHipDevice  # noqa: E402

TAIL = 3        # the probe loop's s_sub, s_cmp, s_cbranch a round


def _round(name: str) -> int:
    """Instructions one round's UNROLL units of the pattern emit (counted on a scratch kernel)."""
    k = Kernel("count", block=64)
    for i in range(CP.UNROLL):
        CP.PATTERNS[name].body(k, i)
    return len(k.stream)


def _stamp_kernel(between: int, read_early: bool = False) -> Kernel:
    k = Kernel("stamps", block=128)
    out = k.arg("out", "ptr")
    k.s_load_dwordx2(s[4:5], k.kernarg_ptr, out.offset)
    k.s_memtime(s[6:7])
    if read_early:
        k.s_mov_b32(s[12], s[6])                 # before the wait: the stamp has not landed
    for _ in range(between):
        k.v_add_f32(v[1], 1.0, v[1])
    k.s_memrealtime(s[8:9])
    k.s_waitcnt(lgkmcnt=0)
    k.s_sub_u32(s[10], s[8], s[6])
    k.v_mov_b32(v[2], s[10])
    k.v_mov_b32(v[3], 0)
    k.s_mov_b64(exec_, 1)
    k.global_store_dword(v[3], v[2], s[4:5])
    k.s_endpgm()
    return k


@pytest.mark.parametrize("between", [0, 5, 17])
def test_the_emulators_time_stamps_count_the_wave_instructions_between_them(between):
    """s_memtime / s_memrealtime return the machine's executed wave-instructions: between the two
    stamps ran the first stamp and `between` VALU ops, on each of the 2 waves."""
    out = np.full(1, 0xFFFFFFFF, np.uint32)
    launch(_stamp_kernel(between), 1, 128, out)
    assert int(out[0]) == 2 * (1 + between)


def test_a_time_stamp_read_before_its_wait_is_an_error():
    """It lands like an SMEM load, at the lgkm wait: the checker says where the wait goes, and the
    emulator, given the object anyway, stops at the read."""
    k = _stamp_kernel(3, read_early=True)
    with pytest.raises(CheckError, match="lgkm_raw"):
        k.build()
    with pytest.raises(EmuError, match="s6"):
        launch(k.build(check=False).co, 1, 128, np.zeros(1, np.uint32))


@pytest.mark.parametrize("name", sorted(CP.PATTERNS))
def test_every_probe_runs_and_leaves_its_patterns_value(name):
    """Each probe at one and two waves a SIMD, a random round count: every wave writes its record
    (the buffer starts all ones), the check register holds the pattern's value, and the ticks are the
    wave-instructions the workgroup ran between the stamps (stamp, real-time stamp, s_cmp, s_cbranch,
    then per round the units and the loop tail; see the emulator test above)."""
    rng = np.random.default_rng()
    words = CP.chain(64 << 10, seed=int(rng.integers(1 << 30))) if CP.PATTERNS[name].chain_bytes else None
    for waves in CP.WAVES:
        iters = int(rng.integers(1, 4))
        rec = CP.run(CP.build(name, waves), iters, chain_words=words)
        want = CP.expected_bits(name, iters * CP.UNROLL, words)
        assert want != 0 or name.startswith(("nop", "store"))   # the value says the pattern ran
        assert (rec["check"] == want).all(), (waves, iters, rec["check"], want)
        per_wave = 4 + iters * (_round(name) + TAIL)
        assert (rec["ticks"] == waves * per_wave).all() and (rec["realtime"] == rec["ticks"]).all()


@pytest.mark.parametrize("name", ["store_lines", "store_contig"])
def test_the_store_probes_write_their_layouts(name):
    """Lane l stores its own 8-byte pair (8 l, 8 l) at (l % 32) x 128 + (l / 32) x 8 (32 lines, 16
    bytes each) or at 8 l (4 whole lines); nothing else of the poisoned buffer changes."""
    words = np.full(CP.STORE_BYTES // 4, 0xFFFFFFFF, np.uint32)
    CP.run(CP.build(name, 4), int(np.random.default_rng().integers(1, 3)), chain_words=words)
    want = np.full_like(words, 0xFFFFFFFF)
    for lane in range(64):
        at = (lane % 32) * 128 + (lane // 32) * 8 if name == "store_lines" else 8 * lane
        want[at // 4:at // 4 + 2] = 8 * lane
    assert (words == want).all()


def test_a_probe_that_runs_no_round_still_writes_its_record():
    rec = CP.run(CP.build("valu_dep", 4), 0)
    assert (rec["check"] == 0).all() and (rec["ticks"] == 4 * 4).all()


@pytest.mark.parametrize("nbytes", [CP.LINE, 4096, 96 << 10])
def test_a_chase_buffer_is_one_cycle_through_all_its_lines(nbytes):
    """Following the chain from offset 0 visits every 128-byte line exactly once, then returns to 0."""
    words = CP.chain(nbytes, seed=int(np.random.default_rng().integers(1 << 30)))
    lines = nbytes // CP.LINE
    seen, off = [], 0
    for _ in range(lines):
        assert off % CP.LINE == 0
        seen.append(off // CP.LINE)
        off = int(words[off // 4])
    assert off == 0 and sorted(seen) == list(range(lines))
    assert CP.chased(words, lines + 1) == words[0]


@pytest.mark.parametrize("name", sorted(CP.PATTERNS))
def test_the_model_prices_each_probe_by_the_rule_its_table_states(name):
    """flyasm perf's cycles a unit at one wave a SIMD are the stated rule plus the loop tail's turns
    (3 scalar instructions a round, 12 cycles over UNROLL units), which the MFMA probe hides under its
    pipe."""
    pat = CP.PATTERNS[name]
    got = CU.model_price(name, 4)
    tail = 4 * TAIL / CP.UNROLL
    if name == "mfma" or name.startswith(("store", "load")):    # their pipe or port is busy under the tail
        assert pat.cycles <= got <= pat.cycles + tail
    else:
        assert got == pytest.approx(pat.cycles + tail)


def test_two_waves_on_a_simd_share_its_valu_but_not_its_wait_states():
    """Two waves a SIMD: VALU-bound patterns take twice as long a wave; s_nop goes to no unit."""
    tail = 4 * TAIL / CP.UNROLL
    assert CU.model_price("valu_indep", 8) == pytest.approx(8 + tail)
    assert CU.model_price("nop7", 8) == pytest.approx(32 + tail)


def test_valu_coissue_pairs_two_waves_plain_valu_ops_only():
    """Params.valu_coissue (off by default): two waves a SIMD issue their plain VALU ops in one turn
    (4 cycles a wave's op instead of 8); a lone wave gains nothing, and packed ops never pair."""
    on = P.load().with_(valu_coissue=True)
    tail = 4 * TAIL / CP.UNROLL
    assert CU.model_price("valu_indep", 8, params=on) == pytest.approx(4 + tail)
    assert CU.model_price("valu_indep", 4, params=on) == pytest.approx(4 + tail)
    assert CU.model_price("pk_add_f32", 8, params=on) == pytest.approx(8 + tail)
    assert CU.model_price("valu_indep", 8) == pytest.approx(8 + tail)


def test_measure_turns_two_launches_into_ticks_a_unit_and_a_clock():
    """The measuring arithmetic on the emulator's records: the difference of two launches over the
    units between them is the pattern's instruction count a unit (and the tail's share) times the
    workgroup's waves; the two stamps count alike, so the clock is the real-time rate."""
    def emu(k, n, words):
        return CP.run(k, n, chain_words=words)
    ticks, mhz = CU.measure("exp_valu", 4, (1, 3), emu, khz=100_000)
    assert ticks == pytest.approx(4 * (_round("exp_valu") + TAIL) / CP.UNROLL)
    assert mhz == pytest.approx(100.0)
    ticks, _ = CU.measure("chase_mall", 8, (1, 2), emu, khz=100_000, chain_bytes=32 << 10)
    assert ticks == pytest.approx(8 * (_round("chase_mall") + TAIL) / CP.UNROLL)


def test_the_clock_by_start_groups_waves_by_when_they_began():
    """Eight waves, the later four at half the clock: two groups, each's median start (real-time ticks
    at 100 MHz = 10 ns each, from the first wave's) and clock."""
    start = np.array([50, 0, 10, 20, 1000, 1010, 1020, 1030], np.uint64)
    realtime = np.full(8, 1000, np.uint64)
    ticks = np.array([2000, 2000, 2000, 2000, 1000, 1000, 1000, 1000], np.uint64)
    got = CU.clock_by_start(dict(start=start, realtime=realtime, ticks=ticks, check=np.zeros(8, np.uint32)),
                            100_000, 2)
    assert got == [pytest.approx((0.15, 200.0)), pytest.approx((10.15, 100.0))]


def test_measure_stops_at_a_wave_with_a_wrong_value():
    def wrong(k, n, words):
        rec = CP.run(k, n)
        rec["check"][1] ^= 1
        return rec
    with pytest.raises(RuntimeError, match="wave 1 checks"):
        CU.measure("valu_dep", 4, (1, 2), wrong, khz=100_000)


def test_an_unknown_pattern_is_one_clear_error():
    with pytest.raises(ValueError, match="pattern is one of"):
        CP.build("valu_quad")


def test_without_a_gpu_the_script_prints_the_models_table_and_says_why(tmp_path):
    ok, why = hip.available()
    if ok:
        pytest.skip("an AMD GPU is present: the no-GPU path does not run")
    md, js = tmp_path / "probes.md", tmp_path / "probes.json"
    r = subprocess.run([sys.executable, "benchmarks/cu_probes.py", "--pattern", "nop7", "--pattern", "exp",
                        "--md", str(md), "--json", str(js)], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    data = json.loads(js.read_text())
    assert data["measured"] is False and data["reason"] == why
    assert [p["pattern"] for p in data["patterns"]] == ["nop7", "exp"] and data["patterns"][0]["measured"] is None
    assert f"Not measured: {why}" in r.stdout and md.read_text().strip() == r.stdout.strip()
    rows = {line.split("|")[1].strip(): line for line in r.stdout.splitlines() if line.startswith("| ")}
    assert "| 32.19 / 32.19 |" in rows["nop7"] and "| 16.19 / 32.19 |" in rows["exp"]
    dispatch = r.stdout.split("## One dispatch by itself")[1]
    alone = next(line for line in dispatch.splitlines() if line.startswith("| 1 |")).split("|")
    assert float(alone[2]) > P.load().launch_us and alone[3].strip() == "-"


def test_bad_iters_are_one_error_line():
    r = subprocess.run([sys.executable, "benchmarks/cu_probes.py", "--iters", "256,64"], capture_output=True,
                       text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 2 and "the first smaller" in r.stderr and "Traceback" not in r.stderr


def test_on_an_amd_gpu_the_probes_measure_and_check():
    ok, why = hip.available()
    if not ok:
        pytest.skip(f"no AMD GPU: {why}")
    rt = hip.HipRuntime()
    ticks, mhz = CU.measure("valu_indep", 4, (8, 32), lambda k, n, w: CP.run(k, n, backend="hip", runtime=rt),
                            rt.wall_clock_khz())
    assert 1.0 <= ticks <= 64.0 and 100.0 <= mhz <= 5000.0


class EmulatedHip(FakeHipDevice):
    """A fake libamdhip64 whose device is flyasm's emulator: FakeHipDevice's memory and hipEvents, and
    a launch that runs the loaded code object on the emulator with the kernarg bytes (each pointer into
    an allocation mapped onto it), advancing the event clock by what it executed. It lets cu_probes'
    GPU path run end to end here; what it measures is the emulator's counters."""

    def __init__(self):
        super().__init__()
        self.images, self.fns, self.launches = {}, {}, 0

    def hipDeviceGetAttribute(self, val, attr, dev):
        value = {hip.HIP_ATTR_MAX_SHARED_PER_BLOCK: 163840, hip.HIP_ATTR_WALL_CLOCK_RATE: 100000}[attr]
        ctypes.cast(val, ctypes.POINTER(ctypes.c_int)).contents.value = value
        return self._rec("hipDeviceGetAttribute")

    def hipModuleLoadData(self, handle, image):
        head = ctypes.string_at(image, 64)                   # ELF64: the section headers end the file
        shoff, = struct.unpack_from("<Q", head, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", head, 0x3A)
        h = 0x1000 + 16 * len(self.images)
        self.images[h] = ctypes.string_at(image, shoff + shentsize * shnum)
        ctypes.cast(handle, ctypes.POINTER(ctypes.c_void_p)).contents.value = h
        return self._rec("hipModuleLoadData")

    def hipModuleGetFunction(self, fn, module, name):
        h = 0x2000 + 16 * len(self.fns)
        self.fns[h] = (self.images[module.value], name.decode())
        ctypes.cast(fn, ctypes.POINTER(ctypes.c_void_p)).contents.value = h
        return self._rec("hipModuleGetFunction")

    def hipModuleLaunchKernel(self, *a):
        rc = super().hipModuleLaunchKernel(*a)
        ka = self.launched["kernarg"]
        co, name = self.fns[self.launched["fn"]]
        words = set(struct.unpack_from(f"<{len(ka) // 8}Q", ka))
        buffers = {addr: np.frombuffer(b, np.uint8) for addr, b in self.dev.items() if addr in words}
        res = launch(co, self.launched["grid"], self.launched["block"], kernel=name, kernarg=ka, buffers=buffers)
        self.clock += 1e-6 * res.wave_instructions
        self.launches += 1
        return rc


def test_the_gpu_path_runs_end_to_end_on_an_emulated_device(tmp_path):
    """cu_probes' measuring path (launch, records, check, clock, dispatch table) through the fake
    library above: the measured ticks are the emulator's instruction counts (one instruction a unit
    and the tail's share, times the waves), and both stamps count alike, so the clock is the
    wall-clock rate (100 MHz)."""
    fake = EmulatedHip()
    md, js = tmp_path / "probes.md", tmp_path / "probes.json"
    assert CU.main(["--pattern", "valu_indep", "--iters", "1,2", "--clock-iters", "2", "--clock-grid", "2",
                    "--rounds", "2", "--launch-repeats", "2", "--md", str(md), "--json", str(js)],
                   runtime=hip.HipRuntime(lib=fake)) == 0
    data = json.loads(js.read_text())
    assert data["measured"] and data["iters"] == [1, 2] and data["patterns"][0]["pattern"] == "valu_indep"
    assert data["patterns"][0]["measured"] == pytest.approx([4 * (1 + TAIL / CP.UNROLL), 8 * (1 + TAIL / CP.UNROLL)])
    assert [c["measured_mhz"] for c in data["clocks"]] == [100.0] * 4 and len(data["dispatch"]) == 2
    starts = [g["start_us"] for g in data["clock_by_start"]]
    assert [g["mhz"] for g in data["clock_by_start"]] == [100.0] * 4 and starts == sorted(starts)
    text = md.read_text()
    assert "Not measured" not in text
    row = next(line for line in text.splitlines() if line.startswith("| valu_indep |")).split("|")
    one, two = (float(x) for x in row[6].split(" / "))
    half_cent = 0.00501                                   # the table prints two decimals
    assert one == pytest.approx(4 * (1 + TAIL / CP.UNROLL), abs=half_cent)
    assert two == pytest.approx(8 * (1 + TAIL / CP.UNROLL), abs=half_cent)
    assert row[7].strip() == "100 / 100"
    clocks = [line.split("|") for line in text.split("## The clock")[1].splitlines() if line.startswith("| mfma ")]
    assert [c[4].strip() for c in clocks] == ["100", "100"]
    dispatch = [line.split("|") for line in text.split("## One dispatch")[1].splitlines()
                if line.startswith("| 1 |") or line.startswith("| 2 |")]
    assert len(dispatch) == 2 and all(float(d[3]) > 0 for d in dispatch)
    assert fake.launches == 4 + 4 + 1 + 2 * (10 + 2) and not fake.dev   # every buffer freed
