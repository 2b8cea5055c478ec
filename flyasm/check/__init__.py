"""Static checks: wait counters (waitcnt.py) and gfx950 hazards (rules.py table, hazards.py search).

Everything works on a *program*: a list of `Instruction`s and label names (str), so builders,
parsed .s files and disassembled code objects are checked alike.

Bounds: each pass states its own (cfg.py, hazards.py, waitcnt.py, ldsaddr.py, fixes.py,
separation.py); none walks paths: every one is a fixed point over blocks or a bounded scan.
"""
from __future__ import annotations

import gc
from contextlib import contextmanager

from ..errors import FlyasmError
from .cfg import build_cfg, program_from_kernel, program_from_lines
from .findings import Finding, Site
from .hazards import MODES, check_hazards, inserted_wait_states
from .hazards import insert_nops as _insert_nops
from .rules import RULES, RULES_BY_ID
from .ldsaddr import LdsAddressAnalysis
from .waitcnt import check_lds_tags, check_waitcnt


class CheckError(FlyasmError):
    """A kernel that the static checker finds hazards or missing waits in."""


@contextmanager
def _collector_paused():
    """The checks allocate many short-lived objects (register sets, small numpy arrays) and make no
    reference cycles worth collecting; left on, the cyclic collector rescans the program's ~100k
    objects again and again (about 15% of a check of a 3,000-instruction kernel)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def check_program(items: list, mode: str = "verify", block=None, lds_scratch=()) -> list[Finding]:
    """Findings of both checks. mode: 'verify' (LLVM's wait-state counting), 'strict' (only s_nop
    and VALU count, ISA-only rows on) or 'insert' (hazards are fixed by s_nops: only the
    wait-counter findings remain). block: the workgroup shape (threads, or (x, y, z)), which lets
    the LDS address analysis compute ranges; without it LDS conflicts stay "unproven". lds_scratch:
    [lo, hi) LDS byte ranges declared a DMA dump (Kernel.lds_scratch)."""
    if mode not in MODES:
        raise ValueError(f"mode is one of {MODES}, not {mode!r}")
    with _collector_paused():
        # the analyses are freed when _check returns, before the collector is back: left alive,
        # the first collection after it would scan all their objects (~5% of a check)
        found = _check(list(items), mode, block, lds_scratch)
    return sorted(found, key=lambda f: (f.consumer.index, f.rule))


def _check(items: list, mode: str, block, lds_scratch) -> list[Finding]:
    cfg = build_cfg(items)
    lds = LdsAddressAnalysis(items, block, cfg, lds_scratch)
    hz = [] if mode == "insert" else check_hazards(items, mode, cfg)
    return hz + check_waitcnt(items, lds=lds, cfg=cfg) + check_lds_tags(items, lds)


def has_errors(findings: list[Finding], strict: bool = False) -> bool:
    """Whether findings should fail a check: any error, or with strict any unproven one too."""
    return any(strict or f.severity == "error" for f in findings)


def insert_nops(items: list, strict: bool = False) -> list:
    return _insert_nops(list(items), strict)


def check_kernel(k, mode: str = "verify") -> list[Finding]:
    return check_program(program_from_kernel(k), mode, k.block, k.scratch_lds)


def check_kernel_stream(k, mode: str = "verify", strict: bool = False) -> None:
    """Raise CheckError listing every finding, grouped by the fix, when the kernel has an error one
    (or, with strict, an unproven one)."""
    from .fixes import group_fixes
    from .report import format_findings, summary
    items = program_from_kernel(k)
    findings = check_program(items, mode, k.block, k.scratch_lds)
    if has_errors(findings, strict):
        fixes = group_fixes(items, findings)
        raise CheckError(f"kernel {k.name}: {summary(findings, items, fixes)}:\n"
                         + format_findings(findings, items, verbose=True, fixes=fixes), find_loc=False)


__all__ = ["Finding", "Site", "CheckError", "check_program", "insert_nops", "check_kernel", "check_kernel_stream",
           "check_hazards", "check_waitcnt", "inserted_wait_states", "build_cfg", "program_from_lines",
           "program_from_kernel", "RULES", "RULES_BY_ID", "has_errors", "LdsAddressAnalysis"]
