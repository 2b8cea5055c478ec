"""One real checker finding per (rule, sample object) as an llc probe: the shared loop of the tests
that judge our definite findings on aiter's kernels against LLVM (test_check_aiter_llc.py for the
hazard rules, test_check_aiter_waitcnt_llc.py for the wait-counter rules)."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from flyasm.check import check_program
from flyasm.report.program import as_program


def checked(path: Path) -> tuple[list, list]:
    """(items, findings) of a code object's kernel, as `flyasm check` sees it."""
    prog = as_program(str(path))
    items = prog.items()
    return items, check_program(items, "verify", prog.threads)


def first_probes(pairs, findings_of: Callable, probe_of: Callable, prefix: str) -> tuple[list, dict]:
    """For each (rule, object) pair: the first definite finding of the rule that probe_of(items,
    finding, name) can write as a probe. Returns (probes, {probe name: finding}); a pair with no
    finding, or none that can be probed, fails the test with one sentence."""
    probes, asked = [], {}
    for n, (rule, rel) in enumerate(pairs):
        items, found = findings_of(rel)
        mine = [f for f in found if f.rule == rule and f.severity == "error"]
        assert mine, f"no {rule} finding on {rel}"
        name = f"{prefix}{n}_{rule}"
        picked = next(((p, f) for f in mine if (p := probe_of(items, f, name)) is not None), None)
        assert picked is not None, f"none of the {len(mine)} {rule} findings in {rel} could be written as a probe"
        probes.append(picked[0])
        asked[name] = picked[1]
    return probes, asked
