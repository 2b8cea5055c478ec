"""`flyasm emu X.co`: run any code object in the emulator with arguments from the command line.

    flyasm emu X.co --grid 4,1,1 --block 256 --arg x=@in.npy --arg n=1024 --arg out=zeros:4096xf32 \
        --out out=out.npy [--trace WAVE]

Arguments are named as in the code object's metadata (`.args[].name`) or given in order when
the metadata has no names (`--arg @a.npy --arg 7`, `--out 2=c.npy` by index). Values:
`@file.npy` (an array: its bytes fill a device buffer), `zeros:SHAPExDTYPE` (e.g.
`zeros:4096xf32`, `zeros:64x64xbf16`: a zero-filled buffer), or a number for by-value arguments.

Or the kernel arguments exactly as a foreign host packed them:

    flyasm emu X.co --grid 2,4 --kernarg @ka.bin|HEX --buffer 0x1000=@q.npy --buffer 0x2000=zeros:..xf32 \
        --out 0x2000=o.npy [--hazards report --races report --waive salu_m0 --waive RULE@0x1a4]
"""
from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import numpy as np

from ..errors import FlyasmError

DTYPES = {"f32": np.float32, "f16": np.float16, "f64": np.float64, "bf16": np.uint16, "i8": np.int8, "u8": np.uint8,
          "i16": np.int16, "u16": np.uint16, "i32": np.int32, "u32": np.uint32, "i64": np.int64, "u64": np.uint64}


def _err(msg: str) -> FlyasmError:
    return FlyasmError(msg, find_loc=False)


def parse_dims(text: str, what: str) -> tuple[int, ...]:
    try:
        t = tuple(int(x) for x in text.split(","))
    except ValueError:
        t = ()
    if not 1 <= len(t) <= 3 or min(t) < 1:
        raise _err(f"--{what} takes 1 to 3 positive integers separated by commas, not '{text}'")
    return t


def parse_value(text: str):
    """An array for @file.npy / zeros:SHAPExDTYPE, else an int or a float."""
    if text.startswith("@"):
        p = Path(text[1:])
        if not p.is_file():
            raise _err(f"argument file {p} does not exist")
        try:
            return np.load(p, allow_pickle=False)
        except Exception as e:  # noqa: BLE001 - numpy raises several types for a bad file
            raise _err(f"{p} is not a readable .npy file ({type(e).__name__})") from None
    if text.startswith("zeros:"):
        m = re.fullmatch(r"zeros:((?:\d+x)+)(\w+)", text)
        if not m or m.group(2) not in DTYPES:
            raise _err(f"'{text}' is not zeros:SHAPExDTYPE (e.g. zeros:4096xf32; dtypes {', '.join(DTYPES)})")
        shape = tuple(int(x) for x in m.group(1).rstrip("x").split("x"))
        return np.zeros(shape, DTYPES[m.group(2)])
    try:
        return int(text, 0)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise _err(f"argument value '{text}' is not @file.npy, zeros:SHAPExDTYPE or a number") from None


def _split(item: str):
    """'name=value' / 'index=value' -> (key, value); a bare value -> (None, value)."""
    m = re.match(r"^([A-Za-z_][\w.]*|\d+)=(.*)$", item)
    return (m.group(1), m.group(2)) if m else (None, item)


def assign(names: list[str | None], items: list[str]) -> list:
    """Values in argument order from --arg items (named, by index, or positional)."""
    vals: list = [None] * len(names)
    given = [False] * len(names)
    pos = 0
    for it in items:
        key, text = _split(it)
        if key is None:
            while pos < len(names) and given[pos]:
                pos += 1
            i = pos
        elif key.isdigit():
            i = int(key)
        elif key in names:
            i = names.index(key)
        else:
            known = ", ".join(n for n in names if n) or "none (the metadata has no names; give them in order)"
            raise _err(f"the kernel has no argument '{key}'; its argument names are: {known}")
        if i >= len(names):
            raise _err(f"the kernel takes {len(names)} arguments; '--arg {it}' would be number {i}")
        if given[i]:
            raise _err(f"argument {names[i] or i} is given twice")
        vals[i], given[i] = parse_value(text), True
    missing = [names[i] or str(i) for i in range(len(names)) if not given[i]]
    if missing:
        raise _err(f"missing --arg for {', '.join(missing)}")
    return vals


def pick_kernel(co: Path, kernel):
    """(CodeObject, kernel name): the named kernel, or the only one; one error sentence otherwise."""
    from ..codeobj.reader import read_code_object
    if not co.is_file():
        raise _err(f"code object {co} does not exist")
    obj = read_code_object(co)
    if kernel is None:
        if len(obj.kernels) != 1:
            raise _err(f"{co} holds {len(obj.kernels)} kernels ({', '.join(k.name for k in obj.kernels)}); "
                       f"pass --kernel NAME")
        kernel = obj.kernels[0].name
    return obj, kernel


def parse_waiver(text: str):
    """'rule' or 'rule@PC' (PC decimal or 0x hex)."""
    rule, at, pc = text.partition("@")
    if not at:
        return rule
    try:
        return rule, int(pc, 0)
    except ValueError:
        raise _err(f"--waive takes RULE or RULE@PC (e.g. salu_m0@0x788), not '{text}'") from None


def fidelity(hazards=None, races=None, waive=()) -> dict:
    """launch() keywords for the --hazards / --races / --waive options (absent: the defaults)."""
    kw: dict = {}
    if hazards:
        kw["hazards"] = None if hazards == "off" else hazards
    if races:
        kw["races"] = {"on": True, "off": False, "report": "report"}[races]
    if waive:
        kw["waive"] = [parse_waiver(w) for w in waive]
    return kw


def _launch(co: Path, kernel, grid, block, progress, echo, saved, args=(), **kw):
    """launch() with a progress bar, then one summary line and the violation report."""
    from . import launch
    bar = cb = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(unit=" wave-instr", unit_scale=True, delay=1.0, file=sys.stderr, leave=False)

        def cb(n, bar=bar):
            bar.update(n - bar.n)
    t0 = time.perf_counter()
    try:
        res = launch(co.read_bytes(), grid, block, *args, kernel=kernel, progress=cb, **kw)
    finally:
        if bar is not None:
            bar.close()
    dt = time.perf_counter() - t0
    m = res.machine
    echo(f"{kernel}: grid {tuple(grid)} x block {tuple(block)}, {m.W} waves, {res.wave_instructions} "
         f"wave-instructions in {dt:.2f} s" + "".join(f"; wrote {p}" for p in saved))
    if res.report:
        echo(res.report.text())
    return res


def run(co_path, grid, block, arg_items, out_items, kernel=None, lds=0, trace=None, progress=True, seed=None,
        echo=print, **fidelity_kw):
    co = Path(co_path)
    obj, kernel = pick_kernel(co, kernel)
    kc = obj.kernel(kernel)
    meta_args = [a for a in (kc.metadata or {}).get(".args", []) or [] if not a[".value_kind"].startswith("hidden_")]
    names = [a.get(".name") for a in meta_args]
    vals = assign(names, list(arg_items))
    for a, v, i in zip(meta_args, vals, range(len(vals))):
        if a[".value_kind"] == "global_buffer" and not isinstance(v, np.ndarray):
            raise _err(f"argument {a.get('.name') or i} is a pointer; give @file.npy or zeros:SHAPExDTYPE")
        if a[".value_kind"] == "by_value" and isinstance(v, np.ndarray):
            raise _err(f"argument {a.get('.name') or i} is passed by value; give a number")
    outs = []
    for it in out_items:
        key, path = _split(it)
        if key is None:
            raise _err(f"--out takes NAME=FILE.npy or INDEX=FILE.npy, not '{it}'")
        i = int(key) if key.isdigit() else (names.index(key) if key in names else None)
        if i is None or i >= len(vals) or not isinstance(vals[i], np.ndarray):
            raise _err(f"--out {key}: not a pointer argument of {kernel}")
        outs.append((i, path))
    res = _launch(co, kernel, grid, block, progress, echo, [p for _, p in outs], vals, lds=lds or None,
                  trace=trace, seed=seed, **fidelity_kw)
    for i, path in outs:
        np.save(path, vals[i])
    return res


def read_kernarg(text: str) -> bytes:
    """--kernarg @FILE (raw bytes) or hex digits."""
    from .args import raw_kernarg
    if text.startswith("@"):
        p = Path(text[1:])
        if not p.is_file():
            raise _err(f"kernarg file {p} does not exist")
        return p.read_bytes()
    try:
        return raw_kernarg(text)
    except FlyasmError:
        raise _err(f"--kernarg takes @FILE.bin or hex digits, not '{text[:40]}'") from None


def _address_item(item: str):
    """'ADDRESS=REST' -> (address int or None when malformed, REST)."""
    addr, eq, rest = item.partition("=")
    try:
        return (int(addr, 0) if eq else None), rest
    except ValueError:
        return None, rest


def run_raw(co_path, grid, block, kernarg_text, buffer_items, arg_items, out_items, kernel=None, lds=0, trace=None,
            progress=True, seed=None, echo=print, **fidelity_kw):
    """`flyasm emu --kernarg ... --buffer ADDRESS=VALUE ... --out ADDRESS=FILE.npy`."""
    if arg_items:
        raise _err("give the kernel's arguments as --arg or --kernarg bytes, not both")
    co = Path(co_path)
    _, kernel = pick_kernel(co, kernel)
    ka = read_kernarg(kernarg_text)
    buffers = {}
    for it in buffer_items:
        a, text = _address_item(it)
        if a is None:
            raise _err(f"--buffer takes ADDRESS=VALUE (e.g. 0x7f0000001000=@q.npy), not '{it}'")
        val = parse_value(text)
        if not isinstance(val, np.ndarray):
            raise _err(f"--buffer {it.partition('=')[0]}: give @file.npy or zeros:SHAPExDTYPE, not a number")
        buffers[a] = val
    outs = []
    for it in out_items:
        a, path = _address_item(it)
        if a not in buffers:
            raise _err(f"--out {it.partition('=')[0]}: not a --buffer address (with --kernarg, --out takes "
                       f"ADDRESS=FILE.npy)")
        outs.append((a, path))
    res = _launch(co, kernel, grid, block, progress, echo, [p for _, p in outs], kernarg=ka, buffers=buffers,
                  lds=lds or None, trace=trace, seed=seed, **fidelity_kw)
    for a, path in outs:
        np.save(path, buffers[a])
    return res
