"""The checker on clang-22 compiled gfx950 kernels: LLVM placed every wait and nop, so a correct
checker finds nothing; removing one s_nop LLVM inserted, or one s_waitcnt that guards the next
instruction, must be flagged with the rule and both instructions named."""
from __future__ import annotations

import re

import pytest

from flyasm.check import check_program
from flyasm.check.cfg import is_label
from flyasm.check.waitcnt import mem_op, reads_lds
from flyasm.isa.syntax import parse_instruction


def corpus_program(k, sym):
    """Disassembly lines -> program, branch targets turned into labels `.L_<offset>`."""
    lines = k.instructions(sym)
    start = lines[0].address
    targets = {}
    for ln in lines:
        if ln.target:
            m = re.search(r"\+0x([0-9a-f]+)$", ln.target)
            targets[ln.address] = int(m.group(1), 16) if m else 0
    labels = set(targets.values())
    out = []
    for ln in lines:
        off = ln.address - start
        if off in labels:
            out.append(f".L_{off:x}")
        text = ln.text
        if ln.address in targets:
            text = f"{text.split()[0]} .L_{targets[ln.address]:x}"
        ins = parse_instruction(text)
        ins.pc = off
        out.append(ins)
    return out


@pytest.fixture(scope="module")
def programs(corpus):
    return {(k.name, s): corpus_program(k, s) for k in corpus.values() for s in k.symbols}


def test_corpus_has_no_findings(programs):
    assert len(programs) >= 16
    for key, prog in programs.items():
        findings = check_program(prog)
        assert findings == [], f"{key}: " + "\n".join(map(str, findings))


def _guarded(prog, wi):
    """The instruction an s_waitcnt directly guards: the next instruction (same block) that reads or
    writes a register an earlier memory op writes, reads LDS after an LDS DMA, or is an s_barrier
    after an LDS write."""
    written, dma, lds_w = set(), False, False
    for it in prog[:wi]:
        if is_label(it):
            continue
        op = mem_op(it, 0)
        if op is not None:
            written |= op.writes
            dma |= it.is_lds_dma
            lds_w |= op.lds_write
    for j in range(wi + 1, len(prog)):
        it = prog[j]
        if is_label(it):
            return None
        if it.name in ("s_waitcnt", "s_nop"):
            continue
        regs = {r for r in it.reads | it.writes if r[0] in ("v", "a", "s")}
        if regs & written or (dma and reads_lds(it)) or (lds_w and it.name == "s_barrier"):
            return j
        return None
    return None


def test_corpus_mutations_are_flagged(programs, capsys):
    total = flagged = 0
    missed = []
    for key, prog in programs.items():
        for i, it in enumerate(prog):
            if is_label(it):
                continue
            if it.name == "s_nop":
                consumer = i + 1
            elif it.name == "s_waitcnt":
                consumer = _guarded(prog, i)
                if consumer is None:
                    continue
            else:
                continue
            total += 1
            mutant = prog[:i] + prog[i + 1:]
            findings = check_program(mutant)
            c = consumer - 1           # index in the mutant
            hits = [f for f in findings if f.consumer.index == c and f.producer is not None]
            if hits:
                flagged += 1
                f = hits[0]
                assert f.rule and f.consumer.text in f.message and f.producer.text in f.message
            else:
                missed.append(f"{key}: removing #{i} '{it.text()}' before '{prog[consumer].text()}'")
    with capsys.disabled():
        print(f"\ncorpus mutations flagged: {flagged}/{total}")
    assert total >= 10
    assert not missed, "\n".join(missed)
