"""The benchmarks start and exit 0 on a tiny configuration (their numbers are not asserted here)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

KERNEL = '''
from flyasm import Kernel, s, v
VARIANTS = [dict(scale=2.0), dict(scale=3.0)]
def build(scale=2.0):
    k = Kernel(f"scale_{int(scale)}", block=64)
    out, x = k.arg("out", "ptr"), k.arg("x", "ptr")
    k.s_load_dwordx2(s[4:5], k.kernarg_ptr, out.offset)
    k.s_load_dwordx2(s[6:7], k.kernarg_ptr, x.offset)
    k.v_lshlrev_b32(v[1], 2, k.workitem_id)
    k.s_waitcnt(lgkmcnt=0)
    k.global_load_dword(v[2], v[1], s[6:7])
    k.s_waitcnt(vmcnt=0)
    k.v_mul_f32(v[2], scale, v[2])
    k.global_store_dword(v[1], v[2], s[4:5])
    k.s_endpgm()
    return k
'''


def _run(args, timeout=300):
    r = subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT, timeout=timeout)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_build_time_smoke(tmp_path):
    (tmp_path / "scale.py").write_text(KERNEL)
    js = tmp_path / "bt.json"
    out = _run(["benchmarks/build_time.py", str(tmp_path / "scale.py"), "--synthetic", "60", "--repeat", "1",
                "--json", str(js)])
    assert "py/llvm" in out and "synthetic_60" in out and "scale_3" in out
    data = json.loads(js.read_text())
    assert [r["variant"] for r in data["rows"]] == ["scale(scale=2.0)", "scale(scale=3.0)", "synthetic(60)"]
    for r in data["rows"]:
        assert r["findings"] == 0 and r["llvm_mc_s"] > 0 and r["ld_lld_s"] > 0
        assert r["ratio_python_over_llvm"] == r["flyasm_python_s"] / r["llvm_s"]


def test_silicon_kernarg_matches_fa_fwd_aiter_args():
    """silicon.py packs aiter's fmha_fwd_v3_args; our aiter-args kernel must read the same bytes."""
    import struct

    import torch
    sys.path.insert(0, str(ROOT / "benchmarks"))
    sys.path.insert(0, str(ROOT / "kernels"))
    import fa_fwd
    import silicon
    alias = {"ptr_o": "o", "ptr_q": "q", "ptr_k": "k", "ptr_v": "v", "ptr_lse": "lse", "scalar": "scale",
             "s_seq_len": "seqlen_q", "s_Seqs": "q_ss", "s_Ts": "q_ts", "s_Hs": "q_hs", "s_Bs": "q_bs",
             "s_gqa": "gqa", "s_k_Seqs": "k_ss", "s_k_Hs": "k_hs", "s_k_Bs": "k_bs", "s_opt": "opt",
             "s_lse": "has_lse", "s_kv_seq_len": "seqlen_k", "s_qk_head_dim": "qk_head_dim",
             "s_v_head_dim": "v_head_dim", "s_q_head_num": "q_head_num", "s_v_Seqs": "v_ss", "s_v_Hs": "v_hs",
             "s_v_Bs": "v_bs", "s_o_Seqs": "o_ss", "s_o_Hs": "o_hs", "s_o_Bs": "o_bs", "ptr_qseq": "qseq",
             "ptr_kseq": "kseq", "s_lse_Hs": "lse_hs", "ptr_qseq_padding": "qseq_pad",
             "ptr_kseq_padding": "kseq_pad", "ptr_q_descale": "q_descale", "ptr_k_descale": "k_descale",
             "ptr_v_descale": "v_descale", "s_descale_q_Bs": "dq_bs", "s_descale_q_Hs": "dq_hs",
             "s_descale_k_Bs": "dk_bs", "s_descale_k_Hs": "dk_hs", "s_descale_v_Bs": "dv_bs",
             "s_descale_v_Hs": "dv_hs"}
    kern = fa_fwd.build(dtype="bf16", causal=False, num_heads=4, num_kv_heads=2, aiter_args=True)
    B, S, Sk, H, Hkv, D = 2, 300, 200, 4, 2, 128
    q, o = torch.randn(B, S, H, D).bfloat16(), torch.zeros(B, S, H, D).bfloat16()       # BSHD, as aiter
    k, v = torch.randn(B, Sk, Hkv, D).bfloat16(), torch.randn(B, Sk, Hkv, D).bfloat16()
    lse = torch.zeros(B, H, S)
    packed = silicon.aiter_kernarg(q, k, v, o, lse, False, 256)
    from flyasm.dispatch import aiter_fwd_values
    named = aiter_fwd_values(q, k, v, o, lse, 1 / D ** 0.5)
    vals = [named[a.name] for a in kern.args]
    for a, want in zip(kern.args, vals):
        field = next(f for f, n in alias.items() if n == a.name)
        assert silicon.AITER_FIELDS.index(field) * 16 == a.offset, a.name
        if a.type == "ptr":
            assert struct.unpack_from("<Q", packed, a.offset)[0] == (want if isinstance(want, int)
                                                                      else want.data_ptr()), a.name
        elif a.type == "f32":
            assert struct.unpack_from("<f", packed, a.offset)[0] == struct.unpack("<f", struct.pack("<f", want))[0]
        elif a.name != "opt":           # aiter's tuning option (5 or 3); silicon.py passes 0
            assert struct.unpack_from("<I", packed, a.offset)[0] == want, a.name
    assert silicon.flops(16, 64, 8192, 128, True) == 2 * 16 * 64 * 8192 ** 2 * 128


def test_corpus_smoke(tmp_path):
    """benchmarks/corpus.py on a tiny tree: a family of one good object, a family with a broken one
    (its error sentence is a row; the run still exits 0)."""
    import importlib.util

    from flyasm.lift.verify import assemble_kernel
    spec = importlib.util.spec_from_file_location("bench_scale_kernel", tmp_path / "scale.py")
    (tmp_path / "scale.py").write_text(KERNEL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    tree = tmp_path / "tree"
    (tree / "good").mkdir(parents=True)
    (tree / "bad").mkdir()
    (tree / "good" / "scale.co").write_bytes(assemble_kernel(mod.build()))
    (tree / "bad" / "junk.co").write_bytes(b"\x7fELF not really")
    js = tmp_path / "corpus.json"
    out = _run(["benchmarks/corpus.py", str(tree), "--jobs", "2", "--json", str(js)])
    assert "== good: 1 objects, 1 kernels" in out and "== bad: 1 objects, 0 kernels" in out
    assert "FAIL read       junk.co:" in out and "slowest check" in out
    rows = {Path(r["path"]).name: r for r in json.loads(js.read_text())["rows"]}
    assert all(rows["scale.co"]["ok"][t] for t in ("read", "disasm", "lift", "check", "stats", "emu-decode"))
    assert not rows["junk.co"]["ok"]["read"] and "ELF" in rows["junk.co"]["error"]["read"]
