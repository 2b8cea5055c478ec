"""Text and JSON rendering of findings (for `flyasm check` and build errors)."""
from __future__ import annotations

import json

from .findings import Finding


def format_findings(findings: list[Finding]) -> str:
    """One line per finding: [rule] message."""
    return "\n".join(str(f) for f in findings)


def findings_json(findings: list[Finding]) -> str:
    return json.dumps([f.to_dict() for f in findings], indent=1)
