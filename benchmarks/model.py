"""Print the static cycle model (a model, not a measurement) for our kernels and any .co given.

    python benchmarks/model.py [FILE.co ...] [--json]

Our kernels are every kernels/*.py exposing build() (built with default parameters).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from flyasm.codeobj.reader import read_code_object  # noqa: E402
from flyasm.errors import FlyasmError  # noqa: E402
from flyasm.report.model import format_model, model  # noqa: E402
from flyasm.report.program import as_program  # noqa: E402


def targets(argv: list[str]) -> list[str]:
    ours = sorted(str(p) for p in (ROOT / "kernels").glob("*.py") if "def build(" in p.read_text())
    return ours + [a for a in argv if not a.startswith("--")]


def main(argv: list[str]) -> int:
    as_json = "--json" in argv
    out, rc = [], 0
    for t in targets(argv):
        try:
            if t.endswith(".co"):   # every kernel of a code object
                progs = [as_program(t, k.name) for k in read_code_object(t).kernels]
            else:
                progs = [as_program(t)]
            for p in progs:
                d = model(p)
                if as_json:
                    out.append(d)
                else:
                    print(format_model(d) + "\n")
        except FlyasmError as e:
            print(f"{t}: {e}", file=sys.stderr)
            rc = 1
    if as_json:
        print(json.dumps(out, indent=2))
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
