"""The clang-compiled gfx950 corpus builds, loads as code objects, and contains what it exists for."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

CORPUS_DIR = Path(__file__).resolve().parent / "corpus"
KERNEL_NAMES = sorted(p.stem for p in (CORPUS_DIR / "kernels").glob("*.c"))

# The task's minimum contract, stated independently of the kernels' own @expect headers so that
# weakening a header cannot make a kernel pass without the instruction it exists for.
REQUIRED: dict[str, list[str]] = {
    "mfma_32x32x16_bf16": [r"^v_mfma_f32_32x32x16_bf16 "],
    "mfma_16x16x32_bf16": [r"^v_mfma_f32_16x16x32_bf16 "],
    "mfma_32x32x16_f16": [r"^v_mfma_f32_32x32x16_f16 "],
    "mfma_16x16x32_f16_kloop": [r"^v_mfma_f32_16x16x32_f16 "],
    "mfma_cdna3_shapes": [r"^v_mfma_f32_32x32x8_bf16 ", r"^v_mfma_f32_16x16x16_f16 "],
    "mfma_16x16x64_i8": [r"^v_mfma_i32_16x16x64_i8 "],
    "mfma_16x16x32_fp8": [r"^v_mfma_f32_16x16x32_fp8_fp8 "],
    "ds_read_tr16_b64": [r"^ds_read_b64_tr_b16 "],
    "permlane_swap": [r"^v_permlane32_swap_b32", r"^v_permlane16_swap_b32"],
    "buffer_rw": [r"^buffer_load_dword ", r"^buffer_load_dwordx4 ", r"^buffer_store_dword ",
                  r"^buffer_store_dwordx4 "],
    "lds_dma": [r"^buffer_load_dwordx4 .* lds$", r"^global_load_lds_dwordx4 ", r"^ds_read"],
    "loop_divergent": [r"^s_and_saveexec_b64 ", r"^s_cbranch_execz "],
    "wave_dpp_scan": [r"_dpp |\brow_(shr|bcast|mirror)", r"^v_readfirstlane_b32 ",
                      r"^ds_bpermute_b32 "],
    "math_convert": [r"^v_exp_f32", r"^v_rcp_f32", r"^v_sqrt_f32", r"^v_cvt_pk_bf16_f32 ",
                     r"^v_pk_fma_f16 "],
    "lds_reduce_wg256": [r"^s_barrier$", r"^ds_write_b32 ", r"^ds_read"],
    "atomic_fadd": [r"^global_atomic_add_f32 "],
}
BACKWARD_BRANCH = {"loop_divergent", "mfma_16x16x32_f16_kloop", "atomic_fadd"}


def _readelf(k, *args: str) -> str:
    r = subprocess.run([str(k.tools.readelf), *args, str(k.path)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def _matches(k, symbol: str, regex: str) -> list[str]:
    return [ln.text for ln in k.instructions(symbol) if re.search(regex, ln.text)]


def _branch_target(line) -> int | None:
    """Target address of an s_branch / s_cbranch_* line (simm16 in dwords after the branch)."""
    if not re.match(r"s_(c?branch)", line.text):
        return None
    imm = int(line.text.split()[-1], 0) & 0xFFFF
    simm = imm - 0x10000 if imm & 0x8000 else imm
    return line.address + 4 + 4 * simm


def _backward_branches(k, symbol: str, regex: str) -> list[str]:
    lines = k.instructions(symbol)
    starts = {ln.address for ln in lines}
    out = []
    for ln in lines:
        tgt = _branch_target(ln)
        if tgt is not None and ln.target is not None:  # objdump's own label agrees
            sym, _, off = ln.target.partition("+")
            assert k.symbol_ranges[sym][0] + int(off or "0", 16) == tgt, (ln.text, ln.target)
        if tgt is not None and re.search(regex, ln.text) and tgt <= ln.address:
            assert tgt in starts, f"{k.name}: {ln.text} at {ln.address:#x} jumps to {tgt:#x}, " \
                                  f"not an instruction of {symbol}"
            out.append(ln.text)
    return out


# ------------------------------------------------------------------------------------------------


def test_every_kernel_source_compiled(corpus):
    assert 12 <= len(KERNEL_NAMES) <= 20
    assert sorted(corpus) == KERNEL_NAMES
    assert set(REQUIRED) == set(KERNEL_NAMES), "REQUIRED must name every corpus kernel"
    for name, k in corpus.items():
        assert k.path.is_file() and k.path.suffix == ".co" and k.path.stat().st_size > 0
        assert CORPUS_DIR not in k.path.parents, "built objects must not land in the repository"
        assert k.source == CORPUS_DIR / "kernels" / f"{name}.c"
        assert k.symbols and k.description and k.launch


@pytest.mark.parametrize("name", KERNEL_NAMES)
def test_is_loadable_hsa_code_object(corpus, name):
    k = corpus[name]
    head = _readelf(k, "--file-header")
    assert re.search(r"Type:\s+DYN", head), head
    assert re.search(r"Machine:\s+EM_AMDGPU", head), head
    assert "gfx950" in head
    sections = _readelf(k, "--sections", "--wide")
    for sec in (".text", ".rodata", ".note", ".dynsym"):
        assert re.search(rf"\]\s+{re.escape(sec)}\s", sections), f"{name}: no {sec} section"
    notes = _readelf(k, "--notes")
    assert "NT_AMDGPU_METADATA" in notes
    assert "amdhsa.target:   amdgcn-amd-amdhsa--gfx950" in notes
    syms = _readelf(k, "--syms", "--wide")
    for sym in k.symbols:
        assert re.search(rf"^\s*\.name:\s+{re.escape(sym)}$", notes, re.M), f"{sym} not in metadata"
        # kernel descriptor: a 64-byte OBJECT `<sym>.kd` in .rodata
        kd = re.search(rf"^\s*\d+:\s+([0-9a-f]+)\s+(\d+)\s+OBJECT\s+\S+\s+\S+\s+(\d+)\s+"
                       rf"{re.escape(sym)}\.kd$", syms, re.M)
        assert kd and int(kd.group(2)) == 64, f"{sym}.kd missing or not 64 bytes"
        rodata_idx = re.search(r"\[\s*(\d+)\]\s+\.rodata\s", sections).group(1)
        assert kd.group(3) == rodata_idx, f"{sym}.kd is not in .rodata"


@pytest.mark.parametrize("name", KERNEL_NAMES)
def test_disassembles_completely(corpus, name):
    k = corpus[name]
    for sym in k.symbols:
        lines = k.instructions(sym)
        assert len(lines) >= 5, f"{sym}: only {len(lines)} instructions"
        start, size = k.symbol_ranges[sym]
        # every byte of the kernel decodes: instructions are contiguous and fill the symbol
        addr = start
        for ln in lines:
            assert ln.address == addr, f"{sym}: gap before {ln.text} at {ln.address:#x}"
            assert "<unknown>" not in ln.text and not ln.text.startswith(".long"), ln.text
            addr += 4 * len(ln.words)
        assert addr == start + size, f"{sym}: decoded {addr - start} of {size} bytes"
        assert lines[-1].text == "s_endpgm", f"{sym} ends with {lines[-1].text}"


@pytest.mark.parametrize("name", KERNEL_NAMES)
def test_contains_what_it_exists_for(corpus, name):
    k = corpus[name]
    assert k.expect or k.expect_backward_branch
    for sym in k.symbols:
        for rx in k.expect:
            assert _matches(k, sym, rx), f"{sym}: no instruction matches @expect {rx!r}"
        for rx in k.expect_backward_branch:
            assert _backward_branches(k, sym, rx), f"{sym}: no backward branch matching {rx!r}"
        for rx in REQUIRED[name]:
            assert _matches(k, sym, rx), f"{sym}: no instruction matches {rx!r}"
        if name in BACKWARD_BRANCH:
            assert _backward_branches(k, sym, r"^s_cbranch_"), f"{sym}: no backward s_cbranch"


def test_expectations_discriminate(corpus):
    """Each kernel has an expectation no other kernel meets, so the checks above can fail."""
    for name, k in corpus.items():
        own = [("e", rx) for rx in k.expect] + [("b", rx) for rx in k.expect_backward_branch]

        def meets(other, kind, rx):
            return any(_matches(other, s, rx) if kind == "e" else _backward_branches(other, s, rx)
                       for s in other.symbols)

        unique = [rx for kind, rx in own
                  if not any(meets(o, kind, rx) for n, o in corpus.items() if n != name)]
        assert unique, f"{name}: every @expect also holds for some other kernel"
    # and a plain negative: the matcher does not find what is not there
    assert not _matches(corpus["permlane_swap"], "permlane_swap", r"^v_mfma_")
    assert not _backward_branches(corpus["mfma_32x32x16_bf16"], "mfma_32x32x16_bf16", r"")


def test_lds_dma_waits_before_reading_lds(corpus):
    """The DMA's LDS writes are covered by vmcnt: a vmcnt(0) wait sits between them and ds_read."""
    k = corpus["lds_dma"]
    texts = [ln.text for ln in k.instructions("lds_dma")]
    dma = [i for i, t in enumerate(texts) if t.endswith(" lds") or t.startswith("global_load_lds")]
    reads = [i for i, t in enumerate(texts) if t.startswith("ds_read")]
    waits = [i for i, t in enumerate(texts) if re.match(r"s_waitcnt vmcnt\(0\)", t)]
    assert len(dma) == 2 and reads
    assert any(max(dma) < w < min(reads) for w in waits), texts
    m0 = [i for i, t in enumerate(texts) if re.match(r"s_(mov|add)\S* m0,", t)]
    assert m0 and min(m0) < min(dma), "M0 must be set before the first LDS-DMA load"


@pytest.mark.parametrize("name", KERNEL_NAMES)
def test_metadata_matches_header(corpus, name):
    k = corpus[name]
    block = int(re.search(r"block=(\d+)", k.launch).group(1))
    for sym in k.symbols:
        md = k.kernel_metadata(sym)
        assert md[".wavefront_size"] == 64
        assert md[".max_flat_workgroup_size"] == block
        args = md[".args"]
        assert all(not a[".value_kind"].startswith("hidden_") for a in args), "hidden arguments"
        assert all(a[".value_kind"] in ("global_buffer", "by_value") for a in args)
        end = max(a[".offset"] + a[".size"] for a in args)
        assert md[".kernarg_segment_size"] == end


def _reference_sections() -> dict[str, str]:
    text = (CORPUS_DIR / "REFERENCE.md").read_text()
    parts = re.split(r"^## (\S+)\s*$", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


@pytest.mark.parametrize("name", KERNEL_NAMES)
def test_reference_documents_kernel(corpus, name):
    sec = _reference_sections().get(name)
    assert sec is not None, f"REFERENCE.md has no '## {name}' section"
    k = corpus[name]
    launch = re.search(r"\*\*Launch:\*\*\s*block=(\d+)", sec)
    assert launch, f"{name}: no **Launch:** block=N line"
    assert int(launch.group(1)) == k.kernel_metadata()[".max_flat_workgroup_size"]
    args_block = sec.split("Arguments:", 1)[1]
    arg_lines = re.findall(r"^(\d+)\. `(\w+)`", args_block, re.M)
    n_meta = len(k.kernel_metadata()[".args"])
    assert [int(i) for i, _ in arg_lines] == list(range(1, n_meta + 1)), \
        f"{name}: REFERENCE lists {len(arg_lines)} arguments, the code object has {n_meta}"
    # the argument names are the C parameter names, in order
    src = k.source.read_text()
    params = re.search(rf"KERNEL\(\d+\)\s+{re.escape(k.symbol)}\s*\(([^)]*)\)", src, re.S).group(1)
    c_names = [re.findall(r"(\w+)\s*$", p.strip())[0] for p in params.split(",")]
    assert [n for _, n in arg_lines] == c_names


def test_reference_layout_helpers():
    """The numpy helpers in REFERENCE.md run, and the MFMA layouts are bijections."""
    text = (CORPUS_DIR / "REFERENCE.md").read_text()
    code = re.search(r"```python\n(import numpy as np\n.*?)```", text, re.S).group(1)
    ns: dict = {}
    exec(compile(code, "REFERENCE.md", "exec"), ns)
    for m, k, n in [(32, 16, 32), (16, 32, 16), (32, 8, 32), (16, 16, 16), (16, 64, 16)]:
        A = np.arange(m * k).reshape(m, k)
        B = np.arange(k * n).reshape(k, n)
        fa, fb = ns["frag_a"](A), ns["frag_b"](B)
        assert fa.shape == (64, m * k // 64) and sorted(fa.ravel()) == list(range(m * k))
        assert fb.shape == (64, k * n // 64) and sorted(fb.ravel()) == list(range(k * n))
        # lanes 0..M-1 hold k = 0..K_L-1 of rows 0..M-1 (ISA table: first lane group, first k's)
        assert (fa[:m, 0] == A[:, 0]).all() and (fb[:n, 0] == B[0, :]).all()
        C = np.arange(m * n).reshape(m, n)
        assert sorted(ns["frag_cd"](C).ravel()) == list(range(m * n))
        assert (ns["unfrag_cd"](ns["frag_cd"](C).ravel(), m) == C).all()
    # 32x32 D: lane 32 register 0 holds row 4; register 4 of lane 0 holds row 8 (ISA table)
    C = np.arange(1024).reshape(32, 32)
    assert ns["frag_cd"](C)[32, 0] == C[4, 0] and ns["frag_cd"](C)[0, 4] == C[8, 0]
    # ties to even (1 + 2^-8 -> 1, 1 + 3*2^-8 -> 1 + 2^-6), above the tie rounds up
    x = np.array([1.0, 1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8 + 2**-16, -2.5], np.float32)
    assert list(ns["bf16_to_f32"](ns["bf16_bits"](x))) == [1.0, 1.0, 1 + 2**-6, 1 + 2**-7, -2.5]
    assert list(ns["bf16_bits"](np.float32(1.0)).reshape(-1)) == [0x3F80]
    assert list(ns["e4m3_to_f32"](np.array([0x38, 0x40, 0xC8, 0x01, 0x7E], np.uint8))) == \
        [1.0, 2.0, -4.0, 2.0 ** -9, 448.0]


# ------------------------------------------------------------------------------------------------
# build_corpus itself: cache, errors


def _mini_kernels(tmp_path: Path, names=("mfma_16x16x32_bf16",)) -> Path:
    kdir = tmp_path / "kernels"
    kdir.mkdir()
    shutil.copy(CORPUS_DIR / "kernels" / "corpus.h", kdir)
    for n in names:
        shutil.copy(CORPUS_DIR / "kernels" / f"{n}.c", kdir)
    return kdir


def test_cache_reuses_and_invalidates(tmp_path, corpus_build, corpus):
    kdir = _mini_kernels(tmp_path)
    out = tmp_path / "out"
    (k1,) = corpus_build.build_corpus(out, kernels_dir=kdir)
    t1 = k1.path.stat().st_mtime_ns
    (k2,) = corpus_build.build_corpus(out, kernels_dir=kdir)
    assert k2.path == k1.path and k2.path.stat().st_mtime_ns == t1, "unchanged source was rebuilt"
    src = kdir / "mfma_16x16x32_bf16.c"
    src.write_text(src.read_text() + "\n// changed\n")
    (k3,) = corpus_build.build_corpus(out, kernels_dir=kdir)
    assert k3.path != k1.path
    hdr = kdir / "corpus.h"
    hdr.write_text(hdr.read_text() + "\n/* changed */\n")
    (k4,) = corpus_build.build_corpus(out, kernels_dir=kdir)
    assert k4.path not in (k1.path, k3.path)
    assert sorted(p.name for p in out.iterdir() if p.name.endswith(".tmp")) == []


def test_missing_clang_is_a_clear_error(tmp_path, corpus_build):
    with pytest.raises(corpus_build.CorpusBuildError, match=r"no usable clang.*no-such-clang"):
        corpus_build.build_corpus(tmp_path / "out", clang=tmp_path / "no-such-clang")


def test_compile_error_names_the_file(tmp_path, corpus_build, corpus):
    kdir = _mini_kernels(tmp_path, names=())
    (kdir / "broken.c").write_text(
        "// @kernel: broken\n// @description: does not compile\n// @launch: block=64 grid=64\n"
        "// @expect: ^s_endpgm$\n#include \"corpus.h\"\nKERNEL(64) broken(GLOBAL int *p) { p[0] = ; }\n")
    with pytest.raises(corpus_build.CorpusBuildError, match=r"clang failed on .*broken\.c"):
        corpus_build.build_corpus(tmp_path / "out", kernels_dir=kdir)


def test_header_must_say_what_the_kernel_is_for(tmp_path, corpus_build):
    kdir = _mini_kernels(tmp_path, names=())
    (kdir / "vague.c").write_text("// @kernel: vague\n// @description: x\n// @launch: block=64\n")
    with pytest.raises(corpus_build.CorpusBuildError, match=r"no @expect"):
        corpus_build.build_corpus(tmp_path / "out", kernels_dir=kdir)


def test_declared_kernel_must_exist(tmp_path, corpus_build, corpus):
    kdir = _mini_kernels(tmp_path)
    src = kdir / "mfma_16x16x32_bf16.c"
    src.write_text(src.read_text().replace("// @kernel: mfma_16x16x32_bf16",
                                           "// @kernel: mfma_16x16x32_bf16\n// @kernel: ghost"))
    with pytest.raises(corpus_build.CorpusBuildError, match=r"@kernel ghost not found"):
        corpus_build.build_corpus(tmp_path / "out", kernels_dir=kdir)


def test_table_lists_every_kernel(corpus, corpus_build):
    table = corpus_build.format_table(list(corpus.values()))
    rows = {line.split()[0]: line for line in table.splitlines()[2:]}
    assert sorted(rows) == KERNEL_NAMES
    assert "v_mfma_f32_32x32x16_bf16" in rows["mfma_32x32x16_bf16"]
    assert "ds_read_b64_tr_b16" in rows["ds_read_tr16_b64"]


def test_build_is_deterministic(tmp_path, corpus_build, corpus):
    """Same source, different output directory: byte-identical code objects."""
    kdir = _mini_kernels(tmp_path, names=("wave_dpp_scan",))
    (a,) = corpus_build.build_corpus(tmp_path / "a", kernels_dir=kdir)
    (b,) = corpus_build.build_corpus(tmp_path / "b", kernels_dir=kdir, jobs=1)
    assert a.path.name == b.path.name
    assert a.path.read_bytes() == b.path.read_bytes()
    assert a.path.read_bytes() == corpus["wave_dpp_scan"].path.read_bytes()
