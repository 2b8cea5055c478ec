"""Kernel sets: build-set (parallel, deterministic, aiter-style manifest) and the Dispatcher.

The kernels here are a small parameterised vector op (dtype x op), written to a file so the
builds go through the same by-path import the CLI uses; they run in the emulator against numpy.
"""
from __future__ import annotations

import csv
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from flyasm.cli import main
from flyasm.codeobj.reader import read_code_object
from flyasm.dispatch import AITER_COLUMNS, Dispatcher, DispatchError, build_set

VOP = '''
from flyasm import Kernel, s, v

VARIANTS = [dict(dtype=d, op=o) for d in ("f32", "f16") for o in ("add", "mul", "sub")]
ONE = [dict(dtype="f32", op="add")]
TWICE = [dict(dtype="f32", op="add"), dict(op="add", dtype="f32")]
BAD = [dict(dtype="f32", op="add"), dict(dtype="f32", op="pow")]
NOT_DICT = [("f32", "add")]
REFUSED = [dict(dtype="f64", op="add")]

def grid_fn():
    return [dict(dtype="f16", op="mul")]

def build(dtype="f32", op="add"):
    if dtype not in ("f32", "f16"):
        raise ValueError(f"dtype is 'f32' or 'f16', not {dtype!r}")
    k = Kernel(f"vop_{op}_{dtype}", block=64)
    out, x, y = k.arg("out", "ptr"), k.arg("x", "ptr"), k.arg("y", "ptr")
    k.s_load_dwordx2(s[4:5], k.kernarg_ptr, out.offset)
    k.s_load_dwordx2(s[6:7], k.kernarg_ptr, x.offset)
    k.s_load_dwordx2(s[8:9], k.kernarg_ptr, y.offset)
    shift = 2 if dtype == "f32" else 1
    k.v_lshlrev_b32(v[1], shift, k.workitem_id)
    k.s_lshl_b32(s[10], k.workgroup_id("x"), 6 + shift)      # 64 elements per workgroup
    k.v_add_u32(v[1], s[10], v[1])
    k.s_waitcnt(lgkmcnt=0)
    ld, st = (("global_load_dword", "global_store_dword") if dtype == "f32"
              else ("global_load_ushort", "global_store_short"))
    k.instr(ld, v[2], v[1], s[6:7])
    k.instr(ld, v[3], v[1], s[8:9])
    k.s_waitcnt(vmcnt=0)
    k.instr(f"v_{op}_{dtype}", v[2], v[2], v[3])
    k.instr(st, v[1], v[2], s[4:5])
    k.s_endpgm()
    return k
'''

# A kernel file that fills aiter's columns itself (as kernels/fa_fwd.py does).
ATTN_LIKE = '''
from flyasm import Kernel

VARIANTS = [dict(dtype=d, causal=c) for d in ("bf16", "f16") for c in (False, True)]

def build(dtype="bf16", causal=False):
    k = Kernel(f"fake_fwd_hd128_{dtype}" + ("_causal" if causal else ""), block=512)
    k.s_endpgm()
    return k

def manifest_row(dtype, causal):
    name = f"fake_fwd_hd128_{dtype}" + ("_causal" if causal else "")
    return dict(knl_name=name, co_name=name.replace("fake_", "") + ".co", dtype=dtype, hdim_q=128,
                hdim_v=128, mask=1 if causal else 0, mode=0, ts_qo=256, ts_kv=64, gqa="any")
'''


@pytest.fixture(scope="module")
def vop_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("kern") / "vop.py"
    p.write_text(VOP)
    return p


@pytest.fixture(scope="module")
def vop_set(vop_file, tmp_path_factory):
    return build_set(str(vop_file), tmp_path_factory.mktemp("set"), jobs=2, progress=False)


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_build_set_writes_every_variant_and_manifest(vop_set):
    rows = _rows(vop_set.manifest)
    assert vop_set.manifest.name == "vop.csv"
    assert [r["knl_name"] for r in rows] == [f"vop_{o}_{d}" for d in ("f32", "f16") for o in ("add", "mul", "sub")]
    assert list(rows[0]) == ["knl_name", "co_name", "dtype", "op", "block", "params"]
    for r in rows:
        co = read_code_object(vop_set.out_dir / r["co_name"])
        assert [k.name for k in co.kernels] == [r["knl_name"]]
        assert r["block"] == "64"
        assert r["params"] == f'{{"dtype":"{r["dtype"]}","op":"{r["op"]}"}}'


def test_build_set_is_deterministic_without_the_cache(vop_file, tmp_path, monkeypatch):
    """Two builds, serial and parallel, each with an empty build cache: same bytes everywhere."""
    outs = []
    for jobs in (1, 2):
        monkeypatch.setenv("FLYASM_CACHE", str(tmp_path / f"cache{jobs}"))
        outs.append(build_set(str(vop_file), tmp_path / f"out{jobs}", jobs=jobs, progress=False))
    assert (tmp_path / "cache1" / "co").is_dir() and (tmp_path / "cache2" / "co").is_dir()
    files = sorted(p.name for p in outs[0].out_dir.iterdir())
    assert files == sorted(p.name for p in outs[1].out_dir.iterdir()) and len(files) == 7
    for name in files:
        assert (outs[0].out_dir / name).read_bytes() == (outs[1].out_dir / name).read_bytes(), name


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("op", ["add", "mul", "sub"])
def test_dispatcher_selects_and_runs_in_emulator(vop_set, dtype, op):
    d = Dispatcher(vop_set.out_dir)
    e = d.select(dtype=dtype, op=op)
    assert e.knl_name == f"vop_{op}_{dtype}" and e.block == (64,)
    rng = np.random.default_rng()
    npt = np.float32 if dtype == "f32" else np.float16
    n = 64 * 3
    x = (rng.standard_normal(n) * 4).astype(npt)
    y = (rng.standard_normal(n) * 4).astype(npt)
    out = np.full(n, np.nan, npt)                       # poisoned: every element must be written
    e.launch(n // 64, None, out, x, y, backend="emu")          # grid in workgroups
    ref = {"add": np.add, "mul": np.multiply, "sub": np.subtract}[op](x, y)   # numpy rounds once, like the ALU
    np.testing.assert_array_equal(out, ref)


def test_dispatcher_launch_shortcut_with_torch(vop_set):
    torch = pytest.importorskip("torch")
    x, y = torch.randn(128), torch.randn(128)
    out = torch.full((128,), float("nan"))
    Dispatcher(vop_set.manifest).launch({"dtype": "f32", "op": "mul"}, 2, 64, out, x, y)
    assert torch.equal(out, x * y)


def test_no_match_lists_what_exists(vop_set):
    with pytest.raises(DispatchError) as ei:
        Dispatcher(vop_set.out_dir).select(dtype="bf16", op="add")
    msg = str(ei.value)
    assert msg.startswith("no kernel in vop.csv matches dtype=bf16, op=add; it has: ")
    assert "dtype=f16 op=sub (vop_sub_f16.co)" in msg and msg.count(".co)") == 6 and "\n" not in msg


def test_ambiguous_query_names_the_deciding_column(vop_set):
    with pytest.raises(DispatchError, match=r"3 kernels in vop.csv match dtype=f32; choose with op: op=add"):
        Dispatcher(vop_set.out_dir).select(dtype="f32")


def test_unknown_column_and_missing_manifest(vop_set, tmp_path):
    with pytest.raises(DispatchError, match=r"has no column 'hdim_q' \(columns: knl_name, co_name, dtype, op"):
        Dispatcher(vop_set.out_dir).select(dtype="f32", op="add", hdim_q=128)
    with pytest.raises(DispatchError, match="does not exist"):
        Dispatcher(tmp_path / "nope.csv")
    with pytest.raises(DispatchError, match="holds 0 .csv manifests"):
        Dispatcher(tmp_path)


def test_aiter_columns_causal_alias_and_wildcards(tmp_path):
    p = tmp_path / "attn.py"
    p.write_text(ATTN_LIKE)
    res = build_set(str(p), tmp_path / "out", jobs=2, progress=False)
    text = res.manifest.read_text()
    assert text.splitlines()[0] == ("knl_name,co_name,dtype,hdim_q,hdim_v,mask,mode,ts_qo,ts_kv,gqa,block,params")
    assert text.splitlines()[2].startswith("fake_fwd_hd128_bf16_causal,fwd_hd128_bf16_causal.co,bf16,128,128,1,0,256,64,")
    assert list(AITER_COLUMNS[:3]) == ["dtype", "hdim_q", "hdim_v"]
    d = Dispatcher(res.manifest)
    assert d.select(dtype="f16", causal=True, hdim_q=128).knl_name == "fake_fwd_hd128_f16_causal"
    assert d.select(dtype="f16", causal=False).knl_name == "fake_fwd_hd128_f16"
    # A hand-edited manifest: an empty cell matches anything, an exact cell is preferred.
    rows = _rows(res.manifest)
    rows[0]["mask"] = ""
    with open(tmp_path / "out" / "attn.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    d = Dispatcher(tmp_path / "out" / "attn.csv")
    assert d.select(dtype="bf16", causal=True).knl_name == "fake_fwd_hd128_bf16_causal"
    assert d.select(dtype="bf16", causal=False).knl_name == "fake_fwd_hd128_bf16"


def test_grid_errors(vop_file, tmp_path):
    with pytest.raises(DispatchError, match="both produce vop_add_f32.co; give the kernels distinct names"):
        build_set(f"{vop_file}:TWICE", tmp_path / "a", jobs=1, progress=False)
    with pytest.raises(DispatchError, match=r"vop.py: build\(dtype='f32', op='pow'\) failed: .*v_pow_f32"):
        build_set(f"{vop_file}:BAD", tmp_path / "b", jobs=2, progress=False)   # raised in a worker process
    with pytest.raises(DispatchError, match="entry 0 is tuple, not a dict"):
        build_set(f"{vop_file}:NOT_DICT", tmp_path / "c", progress=False)
    with pytest.raises(DispatchError, match="has no grid 'NOPE'"):
        build_set(f"{vop_file}:NOPE", tmp_path / "d", progress=False)
    res = build_set(f"{vop_file}:grid_fn", tmp_path / "e", progress=False)     # a grid may be a function
    assert [b.row["knl_name"] for b in res.builds] == ["vop_mul_f16"]
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()   # nothing half-written


def test_cli_build_set(vop_file, tmp_path):
    r = CliRunner().invoke(main, ["build-set", f"{vop_file}:ONE", "-o", str(tmp_path / "o"), "-j", "2",
                                  "--manifest", "m.csv", "--no-progress"])
    assert r.exit_code == 0, r.output
    assert r.output.startswith("1 kernels in ") and r.output.rstrip().endswith("m.csv")
    assert _rows(tmp_path / "o" / "m.csv")[0]["knl_name"] == "vop_add_f32"
    r = CliRunner().invoke(main, ["build-set", f"{vop_file}:BAD", "-o", str(tmp_path / "p")])
    assert r.exit_code == 2 and r.output.count("\n") == 1 and "op='pow'" in r.output
    r = CliRunner().invoke(main, ["build-set", str(tmp_path / "missing.py"), "-o", str(tmp_path / "q")])
    assert r.exit_code == 2 and "does not exist" in r.output


def test_a_builder_refusing_a_value_is_one_sentence(vop_file, tmp_path):
    """A builder's ValueError (Python's convention for a value it does not take) names the variant in one
    sentence, from build-set (in a worker process) and from `flyasm build`, not a traceback."""
    with pytest.raises(DispatchError, match=r"^vop.py: build\(dtype='f64', op='add'\) failed: dtype is 'f32' or 'f16', "
                       r"not 'f64'$"):
        build_set(f"{vop_file}:REFUSED", tmp_path / "x", jobs=2, progress=False)
    r = CliRunner().invoke(main, ["build", f"{vop_file}:build", "-p", "dtype=f64", "-o", str(tmp_path / "y")])
    assert r.exit_code == 2 and r.output.count("\n") == 1, r.output
    assert "dtype is 'f32' or 'f16', not 'f64'" in r.output and "Traceback" not in r.output


def test_variant_failure_message_is_one_sentence(vop_file, tmp_path):
    with pytest.raises(DispatchError) as ei:
        build_set(f"{vop_file}:BAD", tmp_path / "x", jobs=1, progress=False)
    assert textwrap.dedent(str(ei.value)).count("\n") == 0


# ---- flyasm.attention over the real attention set (kernels/fa_fwd_set.py) ------------------------
REPO = Path(__file__).resolve().parents[1]
# Tolerances: tests/test_fa_fwd.py derives them (bf16 unit roundoff 2^-9 on Q-scaling, P and O).
ATOL = {"bf16": 1e-2, "f16": 2.5e-3}


@pytest.fixture(scope="module")
def attn_set(tmp_path_factory):
    return build_set(f"{REPO / 'kernels' / 'fa_fwd_set.py'}:SMALL", tmp_path_factory.mktemp("fa"), jobs=2,
                     progress=False)


@pytest.mark.xdist_group("attn_set")   # one worker builds the module's attention set
@pytest.mark.parametrize("dtype,causal,hq,hkv,sq,sk,d", [("bf16", False, 4, 2, 70, 100, 128),
                                                         ("bf16", True, 2, 2, 96, 96, 128),       # = bottom-right
                                                         ("bf16", True, 1, 1, 40, 100, 128),      # top-left kernel
                                                         ("bf16", "bottom_right", 2, 1, 40, 100, 128),
                                                         ("f16", False, 1, 1, 40, 64, 128),
                                                         ("bf16", False, 2, 1, 40, 70, 192)])    # q/k 192, v 128
def test_attention_one_line_matches_torch(attn_set, monkeypatch, dtype, causal, hq, hkv, sq, sk, d):
    import flyasm
    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(REPO / "kernels"))
    import fa_fwd
    monkeypatch.setenv("FLYASM_ATTENTION_SET", str(attn_set.out_dir))
    tdt = {"bf16": torch.bfloat16, "f16": torch.float16}[dtype]
    q = torch.randn(1, hq, sq, d).to(tdt)
    k, v = torch.randn(1, hkv, sk, d).to(tdt), torch.randn(1, hkv, sk, 128).to(tdt)
    out, lse = flyasm.attention(q, k, v, causal=causal, return_lse=True)
    ref, ref_lse = fa_fwd.reference(q, k, v, causal=bool(causal),
                                    align="bottom_right" if causal == "bottom_right" else "top_left")
    assert out.dtype == tdt and out.shape == (1, hq, sq, 128)
    torch.testing.assert_close(out.float(), ref, atol=ATOL[dtype], rtol=ATOL[dtype])
    torch.testing.assert_close(lse, ref_lse, atol=ATOL[dtype], rtol=0)


@pytest.mark.xdist_group("attn_set")   # one worker builds the module's attention set
def test_attention_fp8_with_descales(attn_set, monkeypatch):
    """fp8 q/k/v + descales -> the fp8bf16 kernel; bound derived in conftest.fp8_attention_bound."""
    import flyasm
    torch = pytest.importorskip("torch")
    from conftest import fp8_attention_bound
    monkeypatch.setenv("FLYASM_ATTENTION_SET", str(attn_set.out_dir))
    f8, ds = torch.float8_e4m3fn, (0.8, 1.6, 0.7)
    q8, k8, v8 = ((2 * torch.randn(1, h, s_, 128)).to(f8) for h, s_ in ((2, 50), (1, 90), (1, 90)))
    out, lse = flyasm.attention(q8, k8, v8, descale=ds, return_lse=True)
    q, k, v = q8.float() * ds[0], (k8.float() * ds[1]).repeat_interleave(2, 1), (v8.float() * ds[2]).repeat_interleave(2, 1)
    sc = (q @ k.transpose(-1, -2)) / 128 ** 0.5
    ref = torch.softmax(sc, -1) @ v
    assert out.dtype == torch.bfloat16 and out.shape == (1, 2, 50, 128)
    assert ((out.float() - ref).abs() <= fp8_attention_bound(sc, v, ref)).all()
    torch.testing.assert_close(lse, torch.logsumexp(sc, -1), atol=1e-4, rtol=0)
    with pytest.raises(DispatchError, match="descale=.* goes with float8_e4m3fn"):
        flyasm.attention(q8.bfloat16(), k8.bfloat16(), v8.bfloat16(), descale=ds)


@pytest.mark.xdist_group("attn_set")   # one worker builds the module's attention set
def test_attention_errors_name_what_exists(attn_set):
    import flyasm
    torch = pytest.importorskip("torch")
    d = Dispatcher(attn_set.out_dir)
    q, k = torch.randn(1, 4, 16, 128).half(), torch.randn(1, 1, 32, 128).half()
    with pytest.raises(DispatchError, match=r"no kernel in fmha_fwd.csv matches dtype=f16, hdim_q=128, "
                                            r"hdim_v=128, mask=2, mode=0; it has: .*mask=1"):
        flyasm.attention(q, k, k, causal="bottom_right", kernels=d)
    with pytest.raises(DispatchError, match=r"causal=True is top-left \(torch\) and seqlen_q 16 != seqlen_k 32, "
                                            r"but the set has no top-left \(mask 1\) kernel"):
        flyasm.attention(q, k, k, causal=True, kernels=d)
    with pytest.raises(DispatchError, match="causal is False, True, 'top_left' or 'bottom_right', not 'yes'"):
        flyasm.attention(q, k, k, causal="yes", kernels=d)
    q64 = torch.randn(1, 1, 16, 64).half()
    with pytest.raises(DispatchError, match=r"matches dtype=f16, hdim_q=64"):
        flyasm.attention(q64, q64, q64, kernels=attn_set.manifest)
    with pytest.raises(DispatchError, match="bf16, f16 or float8_e4m3fn"):
        flyasm.attention(q.float(), k.float(), k.float(), kernels=d)
    with pytest.raises(DispatchError, match=r"multiple of key/value heads \(3\)"):
        flyasm.attention(q, torch.randn(1, 3, 16, 128).half(), torch.randn(1, 3, 16, 128).half(), kernels=d)


# A kernel file whose rows go to several manifests (as kernels/fa_bwd_set.py: aiter's four backward CSVs)
ROUTED = '''
from flyasm import Kernel

VARIANTS = [dict(stage=st, dtype=d) for st in ("pre", "post") for d in ("bf16", "fp16")]
MANIFESTS = ("pre.csv", "main.csv", "post.csv")
MANIFEST_COLUMNS = ("dtype", "knl_name", "co_name")

def build(stage, dtype):
    k = Kernel(f"routed_{stage}_{dtype}", block=256)
    k.s_endpgm()
    return k

def manifest_row(stage, dtype):
    return dict(dtype=dtype, knl_name=f"routed_{stage}_{dtype}", co_name=f"routed_{stage}_{dtype}.co",
                manifest=f"{stage}.csv")
'''


def test_build_set_routes_rows_to_their_manifests(tmp_path):
    f = tmp_path / "routed.py"
    f.write_text(ROUTED)
    res = build_set(str(f), tmp_path / "o", jobs=1, progress=False)
    assert [m.name for m in res.manifests] == ["pre.csv", "main.csv", "post.csv"]
    for st in ("pre", "post"):
        rows = _rows(tmp_path / "o" / f"{st}.csv")
        assert [r["knl_name"] for r in rows] == [f"routed_{st}_bf16", f"routed_{st}_fp16"]
        assert list(rows[0]) == ["dtype", "knl_name", "co_name"]      # no `manifest` column
        e = Dispatcher(tmp_path / "o" / f"{st}.csv").select(dtype="fp16")
        assert e.params == {"stage": st, "dtype": "fp16"} and e.block == (256,)
    assert (tmp_path / "o" / "main.csv").read_text() == "dtype,knl_name,co_name\n"   # declared, no rows
    r = CliRunner().invoke(main, ["build-set", str(f), "-o", str(tmp_path / "p"), "--no-progress"])
    assert r.exit_code == 0 and [Path(x).name for x in r.output.splitlines()[1:]] == ["pre.csv", "main.csv",
                                                                                     "post.csv"]
