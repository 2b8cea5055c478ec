"""The instruction tables against LLVM: regeneration, LLVM's gfx950 MC tests, error tests, coverage.

LLVM's test files are read from ../shared (never copied into the repo); without them the tests
that need them skip and say why.
"""
from __future__ import annotations

import functools
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from flyasm.asm import mcbatch
from flyasm.errors import AssemblerError, FlyasmError
from flyasm.isa import builders, tables
from flyasm.isa.syntax import parse_instruction, strip_comment

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
MC_DIR = SHARED / "reference/llvm/llvm/test/MC/AMDGPU"
GOOD_FILES = ["mai-gfx950.s", "gfx950_asm_features.s", "gfx950_asm_vop1.s", "gfx950_asm_vop3.s",
              "gfx950_asm_read_tr.s", "mubuf-gfx950.s"]
BAD_FILES = ["gfx950_err.s", "gfx950-unsupported.s"]

needs_shared = pytest.mark.skipif(not MC_DIR.is_dir(), reason=f"LLVM's MC tests are not at {MC_DIR} "
                                                               f"(../shared is absent)")


def _toolchain_or_skip():
    from flyasm.asm.toolchain import find_toolchain
    from flyasm.errors import ToolchainError
    try:
        return find_toolchain()
    except ToolchainError as e:
        pytest.skip(f"no gfx950 LLVM toolchain: {e.message}")


def instruction_lines(name: str) -> list[tuple[int, str]]:
    """(line number, text) of every instruction line of an LLVM test file (comments, directives out)."""
    out = []
    for i, line in enumerate((MC_DIR / name).read_text().splitlines(), 1):
        t = strip_comment(line)
        if t and not t.startswith("."):
            out.append((i, t))
    return out


@functools.lru_cache(maxsize=None)
def llvm_encodings(name: str) -> tuple:
    """One batched llvm-mc call per file, cached for the session."""
    lines = instruction_lines(name)
    return tuple(zip(lines, mcbatch.encode([t for _, t in lines])))


# ---- (a) the checked-in table is what the generator makes today ----------------------------------
@needs_shared
def test_generator_reproduces_checked_in_table(tmp_path):
    _toolchain_or_skip()
    out = tmp_path / "gfx950.json"
    r = subprocess.run([sys.executable, str(REPO / "tools/gen_isa_tables.py"), "--shared", str(SHARED), "--out", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    new, old = json.loads(out.read_text()), json.loads((REPO / "isa_tables/gfx950.json").read_text())
    changed = sorted(m for m in set(new["instructions"]) | set(old["instructions"])
                     if new["instructions"].get(m) != old["instructions"].get(m))
    assert not changed, f"regenerate isa_tables/gfx950.json: {len(changed)} entries differ, e.g. {changed[:5]}"
    assert new == old


# ---- (b) every instruction LLVM's own tests assemble: parse, re-print, re-encode, rebuild -----------
@needs_shared
@pytest.mark.parametrize("name", GOOD_FILES)
def test_llvm_mc_tests_round_trip(name):
    _toolchain_or_skip()
    accepted = [(ln, t, e) for (ln, t), e in llvm_encodings(name) if e.bytes is not None]
    assert accepted, f"llvm-mc accepted nothing from {name}"
    texts, problems = [], []
    for ln, t, _ in accepted:
        try:
            inst = parse_instruction(t)
        except FlyasmError as ex:
            problems.append(f"{name}:{ln}: parse: {ex.message}")
            texts.append("s_nop 0")
            continue
        texts.append(inst.text())
        try:  # the builders accept exactly what was parsed
            built = builders.make(inst.mnemonic, *inst.operands, **inst.modifiers)
        except FlyasmError as ex:
            problems.append(f"{name}:{ln}: make: {ex.message}")
            continue
        if built.key() != inst.key():
            problems.append(f"{name}:{ln}: make changed {inst.key()} into {built.key()}")
    again = mcbatch.encode(texts)
    for (ln, t, e), x, r in zip(accepted, texts, again):
        if r.bytes != e.bytes and not any(p.startswith(f"{name}:{ln}:") for p in problems):
            problems.append(f"{name}:{ln}: '{t}' re-printed as '{x}' encodes as {r.bytes!r}, not {e.bytes!r} "
                            f"({r.error or r.printed})")
    print(f"{name}: {len(accepted) - len(problems)}/{len(accepted)} llvm-accepted lines round-trip")
    assert not problems, "\n".join(problems[:20])


# ---- (c) LLVM's negative tests: rejected by us, or by llvm-mc through a clean FlyasmError ----------
def llvm_rejection(line: str, msg: str) -> AssemblerError:
    """An llvm-mc error as flyasm reports it: one sentence naming the line."""
    return AssemblerError(f"llvm-mc rejects '{line}': {msg.rstrip('.')}", find_loc=False)


def one_sentence(msg: str) -> bool:
    body = msg.rstrip(".")
    return "\n" not in msg and ". " not in body.replace("e.g. ", "").replace("..", "") and len(msg) < 400


@needs_shared
@pytest.mark.parametrize("name", BAD_FILES)
def test_llvm_error_tests_are_rejected_cleanly(name):
    _toolchain_or_skip()
    ours = llvm_side = llvm_accepts = 0
    to_llvm = []
    for (ln, t), e in llvm_encodings(name):
        try:
            inst = parse_instruction(t)
            inst = builders.make(inst.mnemonic, *inst.operands, **inst.modifiers)
        except FlyasmError as ex:
            assert one_sentence(ex.message), f"{name}:{ln}: {ex.message!r}"
            ours += 1
            continue
        except Exception as ex:  # noqa: BLE001 - any other exception is a defect
            pytest.fail(f"{name}:{ln}: '{t}' raised {type(ex).__name__}: {ex}")
        to_llvm.append((ln, t, inst.text()))
    for (ln, t, x), r in zip(to_llvm, mcbatch.encode([x for _, _, x in to_llvm])):
        if r.error is None:
            # Accepted in wave64: gfx950-unsupported.s also checks these lines in wave32 only.
            llvm_accepts += 1
            assert name == "gfx950-unsupported.s" and "tr_b" in t, f"{name}:{ln}: '{t}' accepted by us and llvm-mc"
            continue
        err = llvm_rejection(x, r.error)
        assert isinstance(err, FlyasmError) and one_sentence(err.message), err.message
        llvm_side += 1
    print(f"{name}: {ours} rejected by flyasm, {llvm_side} by llvm-mc, {llvm_accepts} valid in wave64")
    assert ours > 0 and ours + llvm_side + llvm_accepts == len(llvm_encodings(name))


# ---- (d) coverage numbers --------------------------------------------------------------------------
def test_table_stats_report():
    spec = importlib.util.spec_from_file_location("table_stats", REPO / "tools/table_stats.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    stats = mod.family_stats(tables.load())
    print(mod.format_stats(stats))
    total = stats["TOTAL"]
    assert total["mnemonics"] == len(tables.all_mnemonics())
    assert total["accepted"] == sum(1 for m in tables.all_mnemonics() if "unsupported" not in tables.lookup(m).info)
    # Every family with an opcode field: distinct opcodes never exceed mnemonics.
    for fam, row in stats.items():
        assert row["opcodes"] <= row["accepted"], fam
