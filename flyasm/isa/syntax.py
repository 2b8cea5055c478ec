"""Read one line of gfx950 assembly (ours, hand-written, or llvm-objdump's) into an Instruction."""
from __future__ import annotations

import re

from ..errors import ParseError, SourceLoc, UnknownInstructionError
from . import tables
from .instruction import FLAGS, Instruction
from .operands import (INLINE_FLOATS, SPECIAL_NAMES, Expr, Imm, Label, Mod, Operand, Reg, Special, Waitcnt)

_REG = re.compile(r"^([vas])(?:(\d+)|\[(\d+):(\d+)\])$")
_TTMP = re.compile(r"^ttmp(\d+|\[\d+:\d+\])$")  # trap-handler SGPRs, kept by name
_INT = re.compile(r"^-?(0x[0-9a-fA-F]+|\d+)$")
_FLOAT = re.compile(r"^-?\d+\.\d*(e[-+]?\d+)?$")
_WAIT = re.compile(r"(vmcnt|expcnt|lgkmcnt)\((\d+)\)")
_MODVAL = re.compile(r"^([a-z_0-9]+):(.+)$")
_FLOAT_TEXT = {v: k for k, v in INLINE_FLOATS.items()}


def strip_comment(line: str) -> str:
    """Remove ';' and '//' comments (not inside quotes)."""
    if '"' not in line:   # the common case, without the character loop
        cut = len(line)
        for mark in (";", "//"):
            i = line.find(mark)
            if 0 <= i < cut:
                cut = i
        return line[:cut].strip()
    out, q = [], False
    i = 0
    while i < len(line):
        c = line[i]
        if c == '"':
            q = not q
        if not q and (c == ";" or line.startswith("//", i)):
            break
        out.append(c)
        i += 1
    return "".join(out).strip()


def split_top(text: str, sep: str) -> list[str]:
    """Split at sep outside brackets, parens and |abs| bars."""
    parts, depth, cur, bars = [], 0, [], 0
    for c in text:
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == "|":
            bars ^= 1
        if (c == sep or (sep == " " and c.isspace())) and depth == 0 and not bars:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def _nested_commas(text: str) -> int:
    """Commas inside brackets or parens (op_sel:[0,1], hwreg(...)): not operand separators."""
    depth = n = 0
    for c in text:
        depth += c in "(["
        depth -= c in ")]"
        n += c == "," and depth > 0
    return n


def parse_operand(t: str) -> Operand:
    t = t.strip()
    if not t:
        raise ParseError("empty operand", find_loc=False)
    if t.startswith("-") and not _INT.match(t) and not _FLOAT.match(t):
        inner = parse_operand(t[1:])
        return -inner if not isinstance(inner, Mod) else Mod(inner.base, not inner.neg, inner.abs, inner.sext)
    if t.startswith("|") and t.endswith("|") and len(t) > 2:
        inner = parse_operand(t[1:-1])
        return Mod(inner.base if isinstance(inner, Mod) else inner, getattr(inner, "neg", False), True,
                   getattr(inner, "sext", False))
    for fn in ("abs", "neg", "sext"):
        if t.startswith(fn + "(") and t.endswith(")"):
            inner = parse_operand(t[len(fn) + 1:-1])
            base = inner.base if isinstance(inner, Mod) else inner
            m = inner if isinstance(inner, Mod) else Mod(base)
            return Mod(base, m.neg or fn == "neg", m.abs or fn == "abs", m.sext or fn == "sext")
    m = _REG.match(t)
    if m:
        f = m.group(1)
        if m.group(2) is not None:
            return Reg(f, int(m.group(2)), 1)
        lo, hi = int(m.group(3)), int(m.group(4))
        if hi < lo:
            raise ParseError(f"register range {t} ends before it starts", find_loc=False)
        return Reg(f, lo, hi - lo + 1)
    if t in SPECIAL_NAMES or _TTMP.match(t):
        return Special(t)
    if _INT.match(t):
        neg = t.startswith("-")
        body = t[1:] if neg else t
        val = int(body, 16) if body.lower().startswith("0x") else int(body)
        return Imm(-val if neg else val)
    if _FLOAT.match(t):
        f = float(t)
        for k, txt in INLINE_FLOATS.items():
            if txt == t or abs(k - f) < 1e-7:
                return Imm(k)
        return Imm(f)
    if _WAIT.search(t):
        vals = {n: int(x) for n, x in _WAIT.findall(t)}
        return Waitcnt(vals.get("vmcnt"), vals.get("expcnt"), vals.get("lgkmcnt"))
    if re.match(r"^[A-Za-z_.$][\w.$]*$", t):
        return Label(t)
    return Expr(t)


def parse_modifier(t: str) -> tuple[str, object]:
    m = _MODVAL.match(t)
    if not m:
        return t, True
    name, val = m.group(1), m.group(2)
    if val.startswith("[") and val.endswith("]"):
        items = [x.strip() for x in val[1:-1].split(",")]
        return name, [int(x, 0) if re.match(r"^-?(0x[0-9a-fA-F]+|\d+)$", x) else x for x in items]
    if re.match(r"^-?(0x[0-9a-fA-F]+|\d+)$", val):
        return name, int(val, 0)
    return name, val


def _is_modifier(tok: str) -> bool:
    if tok in FLAGS:
        return True
    m = _MODVAL.match(tok)
    return bool(m) and not tok.startswith(("hwreg", "sendmsg"))


def parse_instruction(line: str, loc: SourceLoc | None = None) -> Instruction:
    """One instruction line (comments allowed) into an Instruction."""
    text = strip_comment(line)
    if not text:
        raise ParseError("no instruction on this line", loc, find_loc=False)
    head, _, rest = text.partition(" ")
    mnemonic = head.strip()
    try:
        tables.lookup(mnemonic)
    except UnknownInstructionError as e:
        raise ParseError(e.message, loc, find_loc=False) from None
    rest = rest.strip()
    operands: list[Operand] = []
    modifiers: dict = {}
    if rest:
        if tables.lookup(mnemonic).info["operands"] and any(
                "waitcnt" in s["kinds"] for s in tables.lookup(mnemonic).info["operands"]):
            # s_waitcnt vmcnt(0) lgkmcnt(0): the whole rest is one operand
            if _WAIT.search(rest):
                operands.append(parse_operand(rest))
            elif _INT.match(rest):
                operands.append(parse_operand(rest))
            else:
                raise ParseError(f"'{rest}' is not a wait count (write vmcnt(N) lgkmcnt(N) or an integer) in "
                                 f"'{text}'", loc, find_loc=False)
            return Instruction(mnemonic, tuple(operands), modifiers, loc)
        chunks = split_top(rest, ",")
        if not chunks or len(chunks) != rest.count(",") + 1 - _nested_commas(rest):
            raise ParseError(f"an operand is missing between commas in '{text}'", loc, find_loc=False)
        last_tokens = split_top(chunks[-1], " ")
        op_texts = chunks[:-1]
        tail = last_tokens
        # 'a16' is both an AGPR and an (image-only) flag: a register name wins in operand position.
        if last_tokens and (not _is_modifier(last_tokens[0]) or _REG.match(last_tokens[0])):
            op_texts.append(last_tokens[0])
            tail = last_tokens[1:]
        try:
            operands = [parse_operand(t) for t in op_texts]
        except ParseError as e:
            raise ParseError(f"{e.message} in '{text}'", loc, find_loc=False) from None
        except Exception as e:  # noqa: BLE001 - any bad operand text becomes one clean error
            raise ParseError(f"cannot read operands of '{text}': {e}", loc, find_loc=False) from None
        for tok in tail:
            if not _is_modifier(tok):
                raise ParseError(f"'{tok}' is not a modifier of {mnemonic} in '{text}'", loc, find_loc=False)
            k, v = parse_modifier(tok)
            modifiers[k] = v
    return Instruction(mnemonic, tuple(operands), modifiers, loc)
