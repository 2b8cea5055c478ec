"""Group-mode rows of aiter's measured attention-backward table (benchmarks/aiter_bwd_launch.row_call):
B sequences of seqlen_q / seqlen_k each, packed, gridded and recorded as aiter's host code launches
the group call, with the sequence starts its group kernels read."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
AITER = ROOT.parent / "shared" / "aiter"
pytestmark = pytest.mark.skipif(not AITER.exists(),
                                reason="../shared/aiter (aiter's backward kernels and host code) is absent")
sys.path[:0] = [str(ROOT / "benchmarks")]


def _sizes(bufs: dict) -> dict:
    return {n: v if isinstance(v, int) else np.asarray(v).nbytes for n, v in bufs.items()}


def _row(mode: int, a32: int, mask: int, b: int = 2, hq: int = 8, hk: int = 2, s: int = 1024) -> dict:
    return dict(dtype="bf16", hdim_q=128, hdim_v=128, mask=mask, atomic32=a32, bf16_cvt=1, mode=mode, batch=b,
                nhead_q=hq, nhead_k=hk, seqlen_q=s, seqlen_k=s)


@pytest.mark.parametrize("a32,mask", [(0, 0), (1, 1)])
def test_a_group_row_is_the_call_aiter_packs_for_group_mode(a32, mask):
    """b2 h8/2 s1024 in group mode: aiter's host code gets the totals (seqlen 2048, max_seqlen 1024),
    and its launches' grids are the batch row's. Each launch runs aiter's group kernel where a code
    object holds it (in ../shared: the a16 dq_shuffle_group), else the batch row's launch of that
    stage, named in the call's `priced`; the dq/dk/dv launch is the batch row's kernel at the batch
    row's grid and loop scale. Group launches are recorded with their one sequence's starts, and
    (placement) probed with the real call's three."""
    import aiter_bwd_launch as BL
    import aiter_launch as AL
    import measured as MR
    from flyasm.aiter_bwd import decode
    idx = MR.co_index()
    group, batch = (BL.row_call(_row(m, a32, mask), idx, placement=True) for m in (1, 0))
    aiter = AL.fmha_bwd_pack(dtype="bf16", hdim_q=128, hdim_v=128, batch=2, nhead_q=8, nhead_k=2, seqlen_q=2048,
                             seqlen_k=2048, max_seqlen_q=1024, max_seqlen_k=1024, mask_type=mask, atomic32=a32,
                             bf16_cvt=1, group=1)["launches"]
    assert [L["stage"] for L in group["launches"]] == ["pre", "dqdkdv", "post"]
    stand_ins = []
    for G, Bt, ln in zip(group["launches"], batch["launches"], aiter):
        assert G["grid"] == Bt["grid"] == ln.grid and G["trace_grid"] == Bt["trace_grid"]
        assert G["loop_scale"] == Bt["loop_scale"] and G["dram_bytes"] == Bt["dram_bytes"]
        if ln.co.exists():                                   # aiter's group kernel, its group buffers
            assert G["kernel"] == ln.knl_name and "_group" in ln.knl_name
            starts = G["buffers"]["seqstart_q"]
            assert starts.dtype == np.int32 and list(starts) == [0, 1024]
            probe = G["probe"]
            assert list(probe["buffers"]["seqstart_q"]) == [0, 1024, 2048]
            fields = decode(G["stage"], probe["kernarg"]({n: (i + 1) << 40 for i, n in enumerate(probe["buffers"])}))
            assert fields["seqlen_q"] == 2048 and fields["ptr_qseq"] == (list(probe["buffers"]).index("seqstart_q")
                                                                         + 1) << 40
        else:                                                # the batch row's launch stands in, said so
            same = ("co", "kernel", "block", "stage")
            assert [G[k] for k in same] == [Bt[k] for k in same]
            for g, b in ((G, Bt), (G["probe"], Bt["probe"])):
                assert _sizes(g["buffers"]) == _sizes(b["buffers"]) and "seqstart_q" not in g["buffers"]
                addrs = {n: (i + 1) << 40 for i, n in enumerate(b["buffers"])}
                assert g["kernarg"](addrs) == b["kernarg"](addrs)
            stand_ins.append(ln.co.name)
    dq_post = {0: "_ZN5aiter31fmha_bwd_hd128_dq_shuffle_groupE", 1: "_ZN5aiter36fmha_bwd_hd128_dq_convert_bf16_groupE"}
    assert aiter[2].knl_name == dq_post[a32]
    assert aiter[1].knl_name.endswith("_groupE") and aiter[0].knl_name.endswith("odo_bf16_groupE")
    priced = group["launches"][0].get("priced", "")
    assert all(n in priced for n in stand_ins) and bool(stand_ins) == bool(priced)
    assert group["shape"] == batch["shape"] and group["flops"] == batch["flops"]   # one problem, one half


def test_the_recorded_group_post_reads_the_sequence_starts_it_is_given():
    """The a16 post kernel of a group row (aiter's dq_shuffle_group, in ../shared) run as recorded,
    once with the recorded starts [0, 256] and once with [64, 192]: the second writes dQ rows 64..191
    only, and they are the first run's rows 0..127 (the a16 workspace is indexed per sequence, dQ at
    the sequence's start). A kernel addressing by batch (or ignoring the starts) writes rows 0..255."""
    import aiter_bwd_launch as BL
    import measured as MR
    from flyasm.run import launch
    L = BL.row_call(_row(1, 0, 0, b=1, hq=1, hk=1, s=256), MR.co_index())["launches"][2]
    assert L["kernel"] == "_ZN5aiter31fmha_bwd_hd128_dq_shuffle_groupE" and L["trace_grid"] == (4, 1, 1)
    assert sorted(L["buffers"]) == ["dq", "seqstart_q", "workspace"]
    rng = np.random.default_rng()
    acc = rng.standard_normal(L["buffers"]["workspace"].size // 2).astype(np.float32)
    acc_bf16 = (acc.view(np.uint32) >> 16).astype(np.uint16)          # bf16 values, never all zero

    def run(starts):
        bufs = dict(dq=np.full(256 * 128, 0xFFFF, np.uint16), seqstart_q=np.array(starts, np.int32),
                    workspace=acc_bf16.copy())
        addrs = {n: 0x7F00_0000_0000 + (i << 24) for i, n in enumerate(bufs)}
        launch(L["co"], L["trace_grid"], L["block"], kernarg=L["kernarg"](addrs), kernel=L["kernel"],
               buffers={addrs[n]: v for n, v in bufs.items()})
        return bufs["dq"].reshape(256, 128)
    whole, shifted = run([0, 256]), run([64, 192])
    assert not (whole == 0xFFFF).all(axis=1).any(), "a dQ row left unwritten"
    written = ~(shifted == 0xFFFF).all(axis=1)
    assert np.flatnonzero(written).tolist() == list(range(64, 192))
    assert np.array_equal(shifted[64:192], whole[:128])


def test_a_group_row_is_predicted_as_the_same_work_as_its_batch_row(tmp_path):
    """b2 h8/2 s512 a16, batch and group rows priced by model_accuracy with the shipped params. The
    dq/dk/dv launch is the same work (each of the B sequences is one z of the same grid, the same key
    tiles looping over the same queries) run by the same loop code (the group kernel differs in its
    prologue only; where it is absent the batch kernel stands in): its cycles must not move. The
    pre and post launches are short, memory-bound, and differ in mode: their group kernels look up
    the sequence (two scalar loads and a compare a workgroup). So the band: the call may move by at most half of those two launches' own time (what a
    launch overhead, shared by both rows, does not count in)."""
    import measured as MR
    import model_accuracy as MA
    from flyasm.perf import calibrate as C
    from flyasm.perf import params as P
    hdr = "gfx,cu_num,dtype,hdim_q,hdim_v,mask,atomic32,bf16_cvt,mode,batch,nhead_q,nhead_k,seqlen_q,seqlen_k,us,source\n"
    (tmp_path / "bwd.csv").write_text(hdr + "".join(f"gfx950,256,bf16,128,128,0,0,1,{m},2,8,2,512,512,50.0,test\n"
                                                    for m in (0, 1)))
    entries = MR.read_tables([tmp_path / "bwd.csv"])
    base = P.load()
    rows, meta, failed = MA.simulate_all(entries, MR.co_index(), base, keep_going=False)
    assert not failed and len(rows) == 2
    batch, group = rows
    kernels = [[L["kernel"] for L in MR.row_call("fmha_bwd", r, MR.co_index())["launches"]] for _, _, r in entries]
    main_b, main_g = batch.extra[0][0], group.extra[0][0]
    if kernels[0][1] == kernels[1][1]:          # the batch kernel standing in: the same recorded call
        assert main_g == main_b
    else:                                       # aiter's group kernel: ~45 prologue instructions more
        assert abs(main_g / main_b - 1) < 0.01

    def alone(c, d, a):                    # one launch's predicted time, less the launch overhead
        return C.predict_us([C.Row("p", "t", c, d, 1.0, active=a)], base)[0] - base.launch_us
    pre_post = alone(batch.cycles, batch.dram_bytes, batch.active) + alone(*batch.extra[1])
    t_batch, t_group = C.predict_us(rows, base)
    print(f"\nbatch {t_batch:.2f} us, group {t_group:.2f} us, pre + post {pre_post:.2f} us")
    assert abs(t_group - t_batch) <= 0.5 * pre_post


def test_the_real_group_call_is_probed_with_its_sequence_starts():
    """placement: the group post's probe is the real launch (b2 h8/2 s512: grid (8, 8, 2)) with its
    starts [0, 512, 1024]; run by perf's footprint probe, every workgroup reads its workspace rows. The
    same launch given starts that make every sequence empty reads nothing: the probe runs the group
    kernel on the starts it is given, not on batch addressing."""
    import aiter_bwd_launch as BL
    import measured as MR
    from flyasm.perf.footprint import probe
    L = BL.row_call(_row(1, 0, 0, s=512), MR.co_index(), placement=True)["launches"][2]
    assert L["kernel"] == "_ZN5aiter31fmha_bwd_hd128_dq_shuffle_groupE" and L["grid"] == (8, 8, 2)
    bufs = L["probe"]["buffers"]
    assert list(bufs["seqstart_q"]) == [0, 512, 1024]
    fp = probe(L["co"], L["kernel"], L["grid"], L["block"], L["probe"]["kernarg"], bufs, quota=4, cache=False)
    assert (fp.key["workspace"] != -1).all()
    empty = dict(bufs, seqstart_q=np.zeros(3, np.int32))
    fp = probe(L["co"], L["kernel"], L["grid"], L["block"], L["probe"]["kernarg"], empty, quota=4, cache=False)
    assert (fp.key["workspace"] == -1).all()


@pytest.mark.parametrize("change,why", [
    (dict(hdim_q=64, hdim_v=64), "launches nothing"),             # aiter has no hd64 a16 group kernel: CK
    (dict(dtype="fp16"), "bwd_hd128_odo_fp16_group.co, which no code object directory holds"),
])
def test_a_group_row_aiter_would_not_launch_here_is_an_error_naming_why(change, why):
    import aiter_bwd_launch as BL
    import measured as MR
    with pytest.raises(LookupError, match=why):
        BL.row_call({**_row(1, 0, 0), **change}, MR.co_index())


def test_a_group_row_and_its_batch_twin_print_apart():
    """measured.row_name says group mode and a seqlen_k that differs from seqlen_q, so the error lines
    and worst-row lists of model_accuracy tell the rows apart; a batch row with equal seqlens prints as
    it always did."""
    import measured as MR
    r = _row(1, 1, 2, s=512)
    r["_row"] = 7
    assert MR.row_name("t", "fmha_bwd", r) == "t:7 bwd hd128 a32 causal group b2 h8/2 s512"
    r.update(mode=0, seqlen_k=1024)
    assert MR.row_name("t", "fmha_bwd", r) == "t:7 bwd hd128 a32 causal b2 h8/2 s512/1024"
    r.update(seqlen_k=512, co_name="fwd_hd128_bf16.co")
    assert MR.row_name("t", "fmha", r) == "t:7 fwd_hd128_bf16.co b2 h8/2 s512"
