"""NT_AMDGPU_METADATA: msgpack payload <-> the YAML that `.amdgpu_metadata` takes.

llvm-mc turns the YAML block into msgpack (MsgPackDocument::fromYAML). An untagged scalar is
typed by what it looks like (int, then null/bool, then float, else string), so strings that look
like something else are written with the `!str` tag, and floats always carry a '.' or exponent.
The small reader below covers the block YAML that LLVM and flyasm write (maps, `- ` sequences,
flow sequences of scalars, `!tag`s, quoted strings), enough to get kernels and args back.

Bound: O(size of the YAML / msgpack), one pass.
"""
from __future__ import annotations

import math
import re

import msgpack

from ..errors import CodeObjectError, ParseError

NT_AMDGPU_METADATA = 32

_INT = re.compile(r"^[-+]?(0x[0-9a-fA-F]+|0o?[0-7]+|0b[01]+|\d+)$")
_FLOAT = re.compile(r"^[-+]?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?$|^[-+]?\.(inf|Inf|INF)$|^\.(nan|NaN|NAN)$")
_PLAIN = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_.\-+/@$]*$")


def decode_msgpack(desc: bytes) -> dict:
    try:
        doc = msgpack.unpackb(desc, raw=False, strict_map_key=False)
    except Exception as e:  # noqa: BLE001 - any malformed payload is one clean error
        raise CodeObjectError(f"the AMDGPU metadata note is not valid msgpack ({type(e).__name__})",
                              find_loc=False) from None
    if not isinstance(doc, dict):
        raise CodeObjectError("the AMDGPU metadata note is not a msgpack map", find_loc=False)
    return doc


def _looks_typed(sv: str) -> bool:
    return bool(_INT.match(sv) or _FLOAT.match(sv) or sv in ("true", "false", "null", "~", "")
                or sv.lower() in ("true", "false", "null", "yes", "no", "on", "off"))


def _scalar(x) -> str:
    if x is None:
        return "~"
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        if math.isnan(x):
            return "!float .nan"
        if math.isinf(x):
            return "!float .inf" if x > 0 else "!float -.inf"
        return "!float " + repr(x)
    if isinstance(x, bytes):
        raise CodeObjectError("binary values in AMDGPU metadata cannot be written as YAML", find_loc=False)
    s = str(x)
    if _PLAIN.match(s) and not _looks_typed(s):
        return s
    quoted = "'" + s.replace("'", "''") + "'"
    return "!str " + quoted


def to_yaml(doc: dict) -> str:
    """The YAML text (`---` … `...`) that makes llvm-mc write `doc` back as msgpack."""
    lines = ["---"]

    def emit(node, indent: int, first_prefix: str | None = None) -> None:
        pad = " " * indent
        if isinstance(node, dict):
            first = True
            for k, val in node.items():
                p = (first_prefix if first and first_prefix is not None else pad)
                first = False
                key = _scalar(k) if not isinstance(k, str) else (k if _PLAIN.match(k) else _scalar(k))
                if isinstance(val, (dict, list)) and val:
                    lines.append(f"{p}{key}:")
                    emit(val, indent + 2)
                elif isinstance(val, dict):
                    lines.append(f"{p}{key}: {{}}")
                elif isinstance(val, list):
                    lines.append(f"{p}{key}: []")
                else:
                    lines.append(f"{p}{key}: {_scalar(val)}")
            if first and first_prefix is not None:
                lines.append(f"{first_prefix}{{}}")
        elif isinstance(node, list):
            for item in node:
                if isinstance(item, dict) and item:
                    emit(item, indent + 2, pad + "- ")
                elif isinstance(item, list) and item:
                    lines.append(f"{pad}-")
                    emit(item, indent + 2)
                elif isinstance(item, dict):
                    lines.append(f"{pad}- {{}}")
                elif isinstance(item, list):
                    lines.append(f"{pad}- []")
                else:
                    lines.append(f"{pad}- {_scalar(item)}")

    emit(doc, 0)
    lines.append("...")
    return "\n".join(lines)


# ---- a small block-YAML reader --------------------------------------------------------------
def _parse_scalar(t: str, where: str):
    t = t.strip()
    tag = None
    if t.startswith("!"):
        tag, _, t = t.partition(" ")
        t = t.strip()
    if len(t) >= 2 and t[0] == t[-1] and t[0] in "'\"":
        body = t[1:-1].replace("''", "'") if t[0] == "'" else bytes(t[1:-1], "utf-8").decode("unicode_escape")
        return _typed(body, tag or "!str", where)
    if t.startswith("[") and t.endswith("]"):
        inner = t[1:-1].strip()
        return [_parse_scalar(x, where) for x in inner.split(",")] if inner else []
    if t == "{}":
        return {}
    return _typed(t, tag, where)


def _typed(t: str, tag: str | None, where: str):
    if tag == "!str":
        return t
    if tag == "!float" or (tag is None and not _INT.match(t) and _FLOAT.match(t)):
        low = t.lower().lstrip("+")
        if low in (".inf",):
            return math.inf
        if low == "-.inf":
            return -math.inf
        if low == ".nan":
            return math.nan
        try:
            return float(t)
        except ValueError:
            raise ParseError(f"{where}: '{t}' is not a float", find_loc=False) from None
    if tag in ("!int", None) and _INT.match(t):
        return int(t, 0) if not re.match(r"^[-+]?0\d", t) else int(t, 10)
    if tag == "!int":
        raise ParseError(f"{where}: '{t}' is not an integer", find_loc=False)
    if t in ("true", "false"):
        return t == "true"
    if t in ("~", "null"):
        return None
    return t


def parse_yaml(text: str, where: str = "metadata") -> object:
    """Block YAML as LLVM writes it (see module doc) into Python dicts, lists and scalars."""
    rows: list[tuple[int, str, int]] = []
    for n, line in enumerate(text.splitlines(), 1):
        s = line.rstrip()
        if not s.strip() or s.strip() in ("---", "...") or s.strip().startswith("#"):
            continue
        rows.append((len(s) - len(s.lstrip(" ")), s.strip(), n))
    pos = 0

    def err(n: int, msg: str):
        return ParseError(f"{where} line {n}: {msg}", find_loc=False)

    def block(indent: int):
        nonlocal pos
        if pos >= len(rows):
            return None
        ind, s, n = rows[pos]
        if s.startswith("- ") or s == "-":
            out = []
            while pos < len(rows) and rows[pos][0] == ind and (rows[pos][1].startswith("- ") or rows[pos][1] == "-"):
                _, s, n = rows[pos]
                rest = s[1:].strip()
                if not rest:
                    pos += 1
                    out.append(block(ind + 1) if pos < len(rows) and rows[pos][0] > ind else None)
                elif re.match(r"^[^'\"\[]*?:( |$)", rest) and not rest.startswith("!"):
                    # "- key: value": a map whose first key sits after the dash
                    rows[pos] = (ind + 2, rest, n)
                    out.append(mapping(ind + 2))
                else:
                    pos += 1
                    out.append(_parse_scalar(rest, f"{where} line {n}"))
            return out
        return mapping(ind)

    def mapping(ind: int):
        nonlocal pos
        out = {}
        while pos < len(rows) and rows[pos][0] == ind and not rows[pos][1].startswith("- "):
            _, s, n = rows[pos]
            m = re.match(r"^([^:]+?):(?: +(.*))?$", s)
            if not m:
                raise err(n, f"expected 'key: value', got '{s}'")
            key, val = m.group(1).strip(), m.group(2)
            pos += 1
            if val is None or val == "":
                if pos < len(rows) and (rows[pos][0] > ind or (rows[pos][0] == ind and rows[pos][1].startswith("- "))):
                    out[key] = block(rows[pos][0])
                else:
                    out[key] = None
            else:
                out[key] = _parse_scalar(val, f"{where} line {n}")
        if pos < len(rows) and rows[pos][0] > ind:
            raise err(rows[pos][2], "unexpected indentation")
        return out

    if not rows:
        return {}
    result = block(rows[0][0])
    if pos < len(rows):
        raise err(rows[pos][2], "unexpected indentation")
    return result
