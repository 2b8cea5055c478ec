"""Lift any gfx950 code object (or .s) into an editable flyasm builder file (`flyasm lift`).

    from flyasm.lift import lift
    res = lift("X.co", stem="x_kernel")
    res.write("x_kernel.py")        # build() in x_kernel.py gives back X.co's bytes

Modules: source (the input as IR), regplan (register names from use), layout (blocks, loops,
functions), pywriter (instructions as builder calls), core (putting the files together).
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace


def lift(path, **kw):
    from .core import lift as _lift
    return _lift(path, **kw)


def load_parts(main_file: str, folder: str) -> SimpleNamespace:
    """The functions of every `part_*.py` in `folder` next to `main_file` (a big lifted kernel)."""
    d = Path(main_file).resolve().parent / folder
    ns = SimpleNamespace()
    for p in sorted(d.glob("part_*.py")):
        name = f"flyasm_lifted_{abs(hash(str(p)))}_{p.stem}"
        spec = importlib.util.spec_from_file_location(name, p)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        for key, val in vars(mod).items():
            if callable(val) and getattr(val, "__module__", None) == name:
                setattr(ns, key, val)
    return ns


__all__ = ["lift", "load_parts"]
