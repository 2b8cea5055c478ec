"""Text and JSON rendering of findings (for `flyasm check` and build errors).

The text groups findings by the fix that clears them (fixes.py): one header per `s_waitcnt` or
`s_nop` with the instruction to put it before, then its findings; a group of more than SHOWN
lists the first ones and "and N more" unless verbose. No finding is printed twice.

Bound: O(findings) text after group_fixes (fixes.py), which flyasm check runs once and passes in.
"""
from __future__ import annotations

import json

from .citations import citation
from .findings import Finding, Site
from .fixes import Fix, group_fixes, unique
from .rules import RULES_BY_ID

SHOWN = 3


def _site(s: Site) -> str:
    return f"'{s.text}' ({s.where()})"


def _member(f: Finding) -> str:
    sev = getattr(f, "severity", None)
    tag = f"[{f.rule}{', ' + sev if sev and sev != 'error' else ''}]"
    prod = f" <- {_site(f.producer)}" if f.producer else ""
    if f.kind == "waitcnt":
        return f"{tag} {_site(f.consumer)}{prod}"
    rule = RULES_BY_ID.get(f.rule)
    title = f"{rule.title}: " if rule else ""
    return f"{tag} {_site(f.consumer)}{prod}: {title}{f.found} of {f.needed} wait states"


def _header(fx: Fix) -> str:
    n = len(fx.findings)
    what = "clears" if n > 1 else "fixes"
    cites = sorted({citation(f.rule, f.row, f.kind) for f in fx.findings})
    return f"put {fx.text} before {_site(fx.site)}: {what} {n} finding{'s' if n > 1 else ''} ({' | '.join(cites)})"


def format_findings(findings: list[Finding], items: list | None = None, verbose: bool = False,
                    fixes: list[Fix] | None = None) -> str:
    """Findings grouped under the wait or s_nop that fixes them (items: the checked program, to
    tell which findings one wait clears; without it, findings group per consumer; fixes: the
    groups when group_fixes already made them)."""
    out = []
    for fx in group_fixes(items or [], findings) if fixes is None else fixes:
        out.append(_header(fx))
        shown = fx.findings if verbose else fx.findings[:SHOWN]
        out += ["  " + _member(f) for f in shown]
        if len(fx.findings) > len(shown):
            out.append(f"  ... and {len(fx.findings) - len(shown)} more (-v lists them)")
    return "\n".join(out)


def summary(findings: list[Finding], items: list | None = None, fixes: list[Fix] | None = None) -> str:
    if fixes is None:
        fixes = group_fixes(items or [], findings)
    n, g = sum(len(fx.findings) for fx in fixes), len(fixes)      # each finding is in one group
    return f"{n} finding{'s' if n != 1 else ''}, {g} fix{'es' if g != 1 else ''}"


def findings_json(findings: list[Finding]) -> str:
    return json.dumps([f.to_dict() for f in unique(findings)], indent=1)
