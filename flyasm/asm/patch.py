"""Insert instruction lines into assembly text, before the n-th instruction of a function.

Used by `flyasm check --mode insert -o FIXED.s`: the fixes are placed in the author's own text
(ours, anyone's, or a code object's disassembly), leaving every other line as it was.
"""
from __future__ import annotations

import re

from ..errors import FlyasmError
from ..isa.syntax import strip_comment

_LABEL = re.compile(r"^([\w.$]+):")


def _is_instruction(line: str) -> bool:
    s = line.strip()
    body = strip_comment(s)
    if not body or _LABEL.match(body):
        return False
    if body.startswith("."):      # directives; raw encodings with their disassembly are instructions
        return body.split()[0] in (".long", ".word") and (";" in s or "//" in s)
    return True


def insert_before(text: str, function: str, count: int, additions: dict[int, list[str]]) -> str:
    """`text` with additions[i] (instruction texts) put before the i-th of the `count` instructions
    of `function` (0-based, in program order)."""
    lines = text.splitlines()
    try:
        start = next(n for n, ln in enumerate(lines) if strip_comment(ln.strip()) == f"{function}:")
    except StopIteration:
        raise FlyasmError(f"the assembly has no function '{function}:' to put the fixes in", find_loc=False) from None
    out, i = lines[:start + 1], 0
    for ln in lines[start + 1:]:
        if i < count and _is_instruction(ln):
            out += ["\t" + t for t in additions.get(i, ())]
            i += 1
        out.append(ln)
    if i != count:
        raise FlyasmError(f"found {i} instructions of {function} in the assembly, not {count}", find_loc=False)
    return "\n".join(out) + "\n"
