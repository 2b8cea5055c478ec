"""Where each check comes from, in sources a user can open: the LLVM function that implements the
rule (llvm/lib/Target/AMDGPU/GCNHazardRecognizer.cpp, SIInsertWaitcnts.cpp) and the section of the
AMD Instinct CDNA4 ISA reference guide. The rule table keeps its row numbers (rules.py); users see
these names instead.

Row -> LLVM function follows the hazard table's "code" column (reference notes §4.2, which
transcribes GCNHazardRecognizer.cpp at ROCm/llvm-project 03a23131). ISA sections: §4.5 "Manually
Inserted Wait States (NOPs)", Table 11; MFMA dependencies §7.6, Table 38; counters §4.4
"Data Dependency Resolution".

Bound: a table lookup per finding.
"""
from __future__ import annotations

_HAZ = "GCNHazardRecognizer::"
_ISA_NOPS = "CDNA4 ISA §4.5 Table 11"
_ISA_MFMA = "CDNA4 ISA §7.6 Table 38"
_ISA_WAIT = "CDNA4 ISA §4.4"

# hazard-table row: (LLVM function, ISA guide section)
HAZARD_ROWS: dict[int, tuple[str | None, str]] = {
    1: ("checkMAIVALUHazards", _ISA_MFMA),
    2: ("checkMAIVALUHazards", _ISA_MFMA),
    3: ("checkMAIHazards90A", _ISA_MFMA),
    4: ("checkMAIHazards90A", _ISA_MFMA),
    5: ("checkMAIHazards90A", _ISA_MFMA),
    6: ("checkMAIHazards90A", _ISA_MFMA),
    7: ("checkMAIHazards90A", _ISA_MFMA),
    8: ("checkMAIVALUHazards", _ISA_MFMA),
    9: ("checkMAIHazards90A", _ISA_MFMA),
    10: ("checkMAIHazards90A", _ISA_MFMA),
    11: ("checkMAIHazards90A", _ISA_MFMA),
    12: ("checkPermlaneHazards", _ISA_NOPS),
    13: ("checkPermlaneHazards", _ISA_NOPS),
    14: ("checkVALUHazards", _ISA_NOPS),
    15: ("checkVALUHazards", _ISA_NOPS),
    16: ("checkVALUHazards", _ISA_NOPS),
    17: ("checkRWLaneHazards", _ISA_NOPS),
    18: ("checkVALUHazards", _ISA_NOPS),
    19: ("checkVALUHazards", _ISA_NOPS),
    20: ("checkVMEMHazards", _ISA_NOPS),
    21: ("checkDPPHazards", _ISA_NOPS),
    22: ("checkDPPHazards", _ISA_NOPS),
    23: ("checkDivFMasHazards", _ISA_NOPS),
    24: ("checkReadM0Hazards", _ISA_NOPS),
    25: ("checkSetRegHazards", _ISA_NOPS),
    26: ("checkRFEHazards", _ISA_NOPS),
    27: ("checkVALUHazards", _ISA_NOPS),
    28: ("checkVALUHazards", _ISA_NOPS),
    29: ("checkMAIVALUHazards", _ISA_MFMA),
    30: (None, _ISA_NOPS),
    31: (None, _ISA_NOPS),
}
# rules without a row
OTHER: dict[str, tuple[str | None, str]] = {
    "soft_clause": ("checkSoftClauseHazards", "CDNA4 ISA §4.5 (XNACK replay of clauses)"),
}
WAITCNT = ("SIInsertWaitcnts::generateWaitcntInstBefore", _ISA_WAIT)


def citation(rule: str, row: int | None, kind: str = "hazard") -> str:
    """'GCNHazardRecognizer::checkDPPHazards; CDNA4 ISA §4.5 Table 11' for a finding's rule."""
    if kind == "waitcnt":
        fn, isa = WAITCNT
    else:
        fn, isa = HAZARD_ROWS.get(row) or OTHER.get(rule) or (None, _ISA_NOPS)
        fn = _HAZ + fn if fn else None
    return "; ".join(x for x in ((f"LLVM {fn}" if fn else "not in LLVM"), isa))
