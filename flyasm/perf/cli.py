"""`flyasm perf X.co`: predicted time of one launch, as a profiler would show it.

    flyasm perf X.co --grid 8,1,1 --block 256 --arg x=zeros:4096xf32 --arg n=4096 [--flops F]
    flyasm perf X.co --grid 4,8,1 --block 512 --kernarg @args.bin --buffer 0=1048576 --buffer 16=1048576

Arguments as for `flyasm emu` (--arg, from the code object's metadata), or raw kernarg bytes
(--kernarg HEX or @file) with --buffer OFFSET=NBYTES: a device buffer of NBYTES (random bf16-valued
contents) whose address is written at byte OFFSET of the kernarg (the pointer map).
"""
from __future__ import annotations

import struct
from pathlib import Path

from ..errors import FlyasmError
from ..run.emu_cli import assign, parse_dims, pick_kernel


def _err(msg: str) -> FlyasmError:
    return FlyasmError(msg, find_loc=False)


def launch_spec(co: bytes, kernel, grid, block, arg_items, kernarg_text, buffer_items):
    """(kernarg bytes or callable, buffers) for perf.predict from the command line."""
    if kernarg_text is not None:
        if arg_items:
            raise _err("give either --arg values or --kernarg bytes, not both")
        if kernarg_text.startswith("@"):
            p = Path(kernarg_text[1:])
            if not p.is_file():
                raise _err(f"kernarg file {p} does not exist")
            raw = p.read_bytes()
        else:
            try:
                raw = bytes.fromhex(kernarg_text)
            except ValueError:
                raise _err("--kernarg takes hex bytes or @FILE") from None
        offs = {}
        for it in buffer_items:
            try:
                off, n = (int(x, 0) for x in it.split("=", 1))
            except ValueError:
                raise _err(f"--buffer takes OFFSET=NBYTES, not '{it}'") from None
            if off < 0 or off + 8 > len(raw) or n < 1:
                raise _err(f"--buffer {it}: offset must leave 8 bytes inside the {len(raw)}-byte kernarg, size >= 1")
            offs[f"kernarg+{off}"] = (off, n)

        def ka(addrs):
            b = bytearray(raw)
            for name, (off, _) in offs.items():
                b[off:off + 8] = struct.pack("<Q", addrs[name])
            return bytes(b)
        return ka, {name: n for name, (_, n) in offs.items()}
    if buffer_items:
        raise _err("--buffer goes with --kernarg (raw bytes); with --arg give arrays as zeros:SHAPExDTYPE")
    import numpy as np

    from ..codeobj.reader import read_code_object
    from ..run.args import pack_args, specs_from_metadata
    obj = read_code_object(co)
    kc = obj.kernel(kernel)
    meta = list((kc.metadata or {}).get(".args", []) or [])
    specs = specs_from_metadata(meta)
    visible = [a for a in meta if not a[".value_kind"].startswith("hidden_")]
    vals = assign([a.get(".name") for a in visible], list(arg_items))
    bufs = {f"arg{i}": v for i, v in enumerate(vals) if isinstance(v, np.ndarray)}
    pos = {id(v): f"arg{i}" for i, v in enumerate(vals) if isinstance(v, np.ndarray)}

    def ka(addrs):
        return pack_args(specs, vals, lambda v, spec: addrs[pos[id(v)]], kc.descriptor.kernarg_size, grid=grid,
                         block=block)
    return ka, bufs


def run(co_path, grid, block, arg_items, kernarg_text, buffer_items, kernel=None, flops=None, top=15, echo=print):
    from . import params as P
    from .model import predict
    from .report import format_prediction
    co_p = Path(co_path)
    _, kernel = pick_kernel(co_p, kernel)
    co = co_p.read_bytes()
    g, b = parse_dims(grid, "grid"), parse_dims(block, "block")
    ka, bufs = launch_spec(co, kernel, g, b, arg_items, kernarg_text, buffer_items)
    p = P.load()
    pred = predict(co, g, b, ka, bufs, kernel=kernel, flops=flops, params=p)
    echo(format_prediction(pred, p, top))
    return pred
