"""Region count expectations and MFMA-shadow interleaving (placement must reach the .s unchanged)."""
from __future__ import annotations

import random

import pytest

from flyasm.errors import KernelError
from flyasm.isa.builders import make
from flyasm.isa.operands import s, v
from flyasm.kernel import Kernel
from flyasm.sched import classes_of, count, interleave


def _asm_instructions(k: Kernel) -> list[str]:
    body = k.to_asm().split(f"{k.name}:\n", 1)[1].split(".Lfunc_end")[0]
    return [ln.strip().split("  ;")[0] for ln in body.splitlines()
            if ln.startswith("\t") and not ln.strip().startswith((".", ";"))]


def test_classes_from_tables():
    cases = {
        make("v_mfma_f32_32x32x16_bf16", v[0:15], v[16:19], v[20:23], v[0:15]): {"mfma"},
        make("v_exp_f32", v[1], v[2]): {"valu", "trans", "exp"},
        make("v_rcp_f32", v[1], v[2]): {"valu", "trans"},
        make("v_add_f32", v[1], v[2], v[3]): {"valu"},
        make("s_add_u32", s[1], s[2], s[3]): {"salu"},
        make("ds_read_b128", v[0:3], v[4]): {"ds_read"},
        make("ds_write_b64", v[4], v[0:1]): {"ds_write"},
        make("buffer_load_dwordx4", v[0:3], v[4], s[8:11], 0, offen=True): {"vmem_load"},
        make("buffer_load_dwordx4", v[4], s[8:11], 0, offen=True, lds=True): {"lds_dma"},
        make("global_load_lds_dwordx4", v[2:3], "off"): {"lds_dma"},
        make("buffer_store_dword", v[1], v[4], s[8:11], 0, offen=True): {"vmem_store"},
        make("s_load_dwordx2", s[4:5], s[0:1], 0): {"smem"},
        make("s_waitcnt", vmcnt=0): {"waitcnt"},
        make("s_nop", 3): {"nop"},
        make("s_barrier"): {"barrier"},
        make("s_endpgm"): {"branch"},
        make("s_setprio", 2): {"other"},
    }
    for inst, want in cases.items():
        assert classes_of(inst) == want, inst


def _fill(k, n_mfma, n_valu, n_ds):
    for i in range(n_mfma):
        k.v_mfma_f32_32x32x16_bf16(v[0:15], v[16:19], v[20:23], v[0:15])
    for i in range(n_valu):
        k.v_add_f32(v[30], v[31], v[32])
    for i in range(n_ds):
        k.ds_read_b64(v[40:41], v[42])


def test_expect_counts_random():
    rng = random.Random()
    for _ in range(20):
        nm, nv, nd = rng.randrange(0, 6), rng.randrange(0, 6), rng.randrange(0, 6)
        k = Kernel("k")
        with k.region("body", expect={"mfma": nm, "valu": (nv, nv + 1), "ds_read": (0, nd), "nop": 0}):
            _fill(k, nm, nv, nd)
        bad = rng.choice(["mfma", "valu", "ds_read"])
        wrong = {"mfma": nm + 1, "valu": nv + 2, "ds_read": nd + 1}[bad]
        k2 = Kernel("k2")
        with pytest.raises(KernelError) as e:
            with k2.region("outer"):
                with k2.region("inner", expect={bad: wrong if bad != "ds_read" else (wrong, wrong + 3)}):
                    _fill(k2, nm, nv, nd)
        got = {"mfma": nm, "valu": nv, "ds_read": nd}[bad]
        assert f"region 'outer/inner' has {got} '{bad}' instructions, expected {wrong}" in e.value.message
        assert e.value.loc.file == __file__


def test_expect_rejects_unknown_class_and_bad_value():
    k = Kernel("k")
    with pytest.raises(KernelError, match="unknown class 'mfmas'"):
        with k.region("r", expect={"mfmas": 1}):
            k.s_nop(0)
    with pytest.raises(KernelError, match="inclusive"):
        with k.region("r2", expect={"nop": [1, 2]}):
            k.s_nop(0)


@pytest.mark.parametrize("pattern", [(1, 2), (2, 1), (1, 0), (4, 3), (3, 5)])
def test_interleave_places_others_in_mfma_shadows(pattern):
    n, m = pattern
    rng = random.Random()
    n_mfma, n_other = rng.randrange(1, 9), rng.randrange(0, 14)
    k = Kernel("il")
    mfmas = [make("v_mfma_f32_32x32x16_bf16", v[0:15], v[16 + 4 * (i % 4):19 + 4 * (i % 4)], v[40:43], v[0:15])
             for i in range(n_mfma)]
    others = [make("ds_read_b64", v[50 + 2 * i: 51 + 2 * i], v[49], offset=8 * i) for i in range(n_other)]
    with k.region("loop", expect={"mfma": n_mfma, "ds_read": n_other}):
        out = interleave(k, mfmas, others, pattern=pattern)
    k.s_endpgm()
    # The expected order, written independently of interleave(): walk groups by index arithmetic.
    want, oi = [], 0
    for g in range((n_mfma + n - 1) // n):
        want += mfmas[g * n:(g + 1) * n]
        want += others[oi:oi + m]
        oi += m
    want += others[oi:]
    assert [i.text() for i in out] == [i.text() for i in want]
    assert _asm_instructions(k) == [i.text() for i in want] + ["s_endpgm"]


def test_interleave_rejects_non_mfma_and_bad_pattern():
    k = Kernel("k")
    with pytest.raises(KernelError, match="among the MFMAs"):
        interleave(k, [make("v_add_f32", v[1], v[2], v[3])], [])
    with pytest.raises(KernelError, match="pattern"):
        interleave(k, [], [], pattern=(0, 1))


def test_count_whole_stream():
    k = Kernel("k")
    _fill(k, 2, 3, 1)
    k.s_waitcnt(lgkmcnt=0)
    assert count(k.stream) == {"mfma": 2, "valu": 3, "ds_read": 1, "waitcnt": 1}
