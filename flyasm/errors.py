"""Errors that speak to the kernel author: one sentence, and the author's own file:line.

Every user mistake raises a `FlyasmError` subclass. The location is found by walking the stack
past flyasm's own frames, so the message points at the builder line that made the mistake.
"""
from __future__ import annotations

import contextlib
import inspect
import os
from dataclasses import dataclass

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))
# Frames that are never the author's line: @contextlib.contextmanager wraps `with k.region(...)`.
_SKIP_FILES = {os.path.abspath(contextlib.__file__)}


@dataclass(frozen=True)
class SourceLoc:
    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


def user_location(skip_dirs: tuple[str, ...] = ()) -> SourceLoc | None:
    """The innermost stack frame outside the flyasm package (the author's builder line)."""
    frame = inspect.currentframe()
    try:
        while frame is not None:
            fn = os.path.abspath(frame.f_code.co_filename)
            inside = (fn.startswith(_PKG_DIR + os.sep) or fn in _SKIP_FILES
                      or any(fn.startswith(d) for d in skip_dirs))
            if not inside and not fn.startswith("<frozen"):
                return SourceLoc(fn, frame.f_lineno)
            frame = frame.f_back
        return None
    finally:
        del frame


class FlyasmError(Exception):
    """Base class: a message of one sentence plus where the user's code made the mistake."""

    def __init__(self, message: str, loc: SourceLoc | None = None, *, find_loc: bool = True):
        self.message = message
        self.loc = loc if loc is not None else (user_location() if find_loc else None)
        super().__init__(f"{self.loc}: {message}" if self.loc else message)


class OperandError(FlyasmError):
    """An operand of the wrong kind, width, alignment or range."""


class UnknownInstructionError(FlyasmError):
    """A mnemonic that gfx950 does not have."""


class PlanError(FlyasmError):
    """A register plan that breaks a rule (bounds, overlap, alignment, unplanned use)."""


class KernelError(FlyasmError):
    """A kernel-level mistake: arguments, LDS size, labels, descriptor limits."""


class ParseError(FlyasmError):
    """Assembly text that flyasm cannot read."""


class CodeObjectError(FlyasmError):
    """A code object that flyasm cannot read."""


class ToolchainError(FlyasmError):
    """LLVM tools missing, too old, or failing."""


class AssemblerError(FlyasmError):
    """llvm-mc or ld.lld rejected what flyasm produced or was given."""
