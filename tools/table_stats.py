#!/usr/bin/env python3
"""Coverage of isa_tables/gfx950.json per encoding family.

    python3 tools/table_stats.py

mnemonics: rows in the table; accepted: rows llvm-mc assembles; opcodes: distinct opcode numbers
of accepted rows; sweep: mnemonics llvm-mc's disassembler decodes in the family's opcode space.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

TABLE = Path(__file__).resolve().parents[1] / "isa_tables" / "gfx950.json"


def family_stats(doc: dict) -> dict:
    rows: dict[str, dict] = {}
    ops: dict[str, set] = {}
    for e in doc["instructions"].values():
        fam = e["family"]
        r = rows.setdefault(fam, {"mnemonics": 0, "accepted": 0, "opcodes": 0, "sweep": 0})
        r["mnemonics"] += 1
        if "unsupported" not in e:
            r["accepted"] += 1
            if e.get("opcode") is not None:
                ops.setdefault(fam, set()).add(e["opcode"])
    for fam, r in rows.items():
        r["opcodes"] = len(ops.get(fam, ()))
        r["sweep"] = len(doc.get("objdump_sweep", {}).get(fam, ()))
    total = {k: sum(r[k] for r in rows.values()) for k in ("mnemonics", "accepted", "opcodes", "sweep")}
    return dict(sorted(rows.items())) | {"TOTAL": total}


def format_stats(stats: dict) -> str:
    lines = [f"{'family':14s}{'mnemonics':>10s}{'accepted':>10s}{'opcodes':>9s}{'sweep':>7s}"]
    for fam, r in stats.items():
        lines.append(f"{fam:14s}{r['mnemonics']:>10d}{r['accepted']:>10d}{r['opcodes']:>9d}{r['sweep']:>7d}")
    return "\n".join(lines)


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else TABLE
    print(format_stats(family_stats(json.loads(path.read_text()))))


if __name__ == "__main__":
    main()
