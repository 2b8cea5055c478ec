"""The static cycle model: hand-computed cycle counts on small loops, and every corpus kernel."""
from __future__ import annotations

import pytest

from flyasm import Kernel, s, v
from flyasm.report.model import format_model, model


def loop_kernel(body) -> Kernel:
    k = Kernel("m", block=64)
    k.s_mov_b32(s[12], 4)
    k.label("loop")
    body(k)
    k.s_sub_u32(s[12], s[12], 1)
    k.s_cmp_lg_u32(s[12], 0)
    k.s_cbranch_scc1(k.L("loop"))
    k.s_endpgm()
    return k


def mfma(k, d=v[16:31]):
    k.v_mfma_f32_32x32x16_bf16(d, v[4:7], v[8:11], d)


def test_same_c_chain_keeps_the_pipe_full():
    # 4 chained 8-pass MFMAs = 128 busy cycles; the 3 SALU ops hide under the last MFMA.
    sp, = model(loop_kernel(lambda k: [mfma(k) for _ in range(4)]))["spans"]
    assert (sp["cycles"], sp["mfma_busy"], sp["utilisation"]) == (128, 128, 1.0)
    assert sp["stalls"]["mfma_pipe"] == 3 * 28 + 25   # in-iteration 28 each, and 25 at the loop head


def test_valu_reading_mfma_result_waits():
    def body(k):
        mfma(k)
        k.v_add_f32(v[40], v[16], v[17])
    sp, = model(loop_kernel(body))["spans"]
    # mfma issues 4, v_add waits until the MFMA ends (32): stall 28, issues 4, 3 SALU/branch = 39
    assert (sp["cycles"], sp["mfma_busy"], sp["stalls"]["dependency"]) == (39, 32, 28)
    assert sp["utilisation"] == pytest.approx(32 / 39)


def test_wait_on_a_load_of_the_same_iteration_costs_its_latency():
    def body(k):
        k.buffer_load_dword(v[2], v[1], s[8:11], 0, offen=True)
        k.s_waitcnt(vmcnt=0)
        mfma(k)
    sp, = model(loop_kernel(body))["spans"]
    # load 4, wait to 500 (stall 496) + 1, mfma issue 4, 3 SALU/branch
    assert (sp["cycles"], sp["stalls"]["vmcnt"]) == (508, 496)


def test_a_load_from_the_previous_iteration_is_assumed_complete():
    def body(k):
        k.s_waitcnt(vmcnt=0)
        k.buffer_load_dword(v[2], v[1], s[8:11], 0, offen=True)
        mfma(k)
    sp, = model(loop_kernel(body))["spans"]
    assert (sp["cycles"], sp["stalls"]["vmcnt"], sp["utilisation"]) == (32, 0, 1.0)


def test_nops_count_n_plus_one():
    def body(k):
        k.s_nop(7)
        k.s_nop(0)
    sp, = model(loop_kernel(body))["spans"]
    assert (sp["cycles"], sp["nop_cycles"]) == (8 + 1 + 3, 9)


def test_straight_line_program_and_text():
    k = Kernel("line", block=64)
    mfma(k)
    k.s_endpgm()
    d = model(k)
    sp, = d["spans"]
    assert (sp["loop"], sp["cycles"], sp["utilisation"]) == (False, 32, 1.0)
    text = format_model(d)
    assert "not a measurement" in text and "assumed latencies" in text


def test_every_corpus_kernel(corpus):
    for name, ck in corpus.items():
        d = model(str(ck.path))
        for sp in d["spans"]:
            assert sp["cycles"] > 0 and 0.0 <= sp["utilisation"] <= 1.0, name
    sp, = model(str(corpus["mfma_16x16x32_f16_kloop"].path))["spans"]
    assert sp["loop"] and sp["mfma_busy"] == 16 and sp["stalls"]["vmcnt"] > 0
