"""llvm-mc as the oracle of what a builder accepts: each line is encoded or refused by llvm-mc, and
flyasm's builder must agree, refusing with one sentence (OperandError)."""
from __future__ import annotations

import pytest

from flyasm.asm import mcbatch
from flyasm.errors import OperandError
from flyasm.isa import builders
from flyasm.isa.syntax import parse_instruction


def build(line: str):
    inst = parse_instruction(line)
    return builders.make(inst.mnemonic, *inst.operands, **inst.modifiers)


def refusals_agree(lines: list[str], mc_says: str = "", we_say: str = "") -> int:
    """Assert builders accept exactly what llvm-mc encodes; each refusal must contain `we_say` (and
    llvm-mc's error `mc_says`). Returns how many lines llvm-mc refused."""
    refused = 0
    for line, m in zip(lines, mcbatch.encode(lines)):
        if m.bytes is not None:
            assert build(line).text(), line
            continue
        assert mc_says in (m.error or ""), (line, m.error)
        refused += 1
        with pytest.raises(OperandError) as ei:
            build(line)
        msg = ei.value.message
        assert we_say in msg and "\n" not in msg, (line, msg)
    return refused
