"""The register plan and region names of a kernel, carried with its `.s` and `.co`.

Each fact is a record "KERNEL:KIND:FIELDS", written as `; flyasm:RECORD` comment lines in the
`.s` and as NUL-terminated strings in a non-loaded `.flyasm.names` section of the `.co` (as the
LDS-buffer tags travel in `.flyasm.lds`), so `flyasm stats/diff/plan X.co` name regions and plan
ranges as the builder did:

    K:plan:NAME:ACCUM_OFFSET:STRICT          the plan (ACCUM_OFFSET empty when unset)
    K:reg:REGION:FILE:FIRST:LAST:PARENT      one plan region (PARENT empty unless an alias)
    K:span:START:END:PATH                    a region of instructions [START, END) by ordinal
    K:label:INDEX:NAME                       a label before instruction INDEX
    K:lds_scratch:LO:HI                      LDS bytes [LO, HI) declared a DMA dump (Kernel.lds_scratch)
"""
from __future__ import annotations

import re

from ..errors import FlyasmError
from ..isa.operands import Label, local_label

SECTION = ".flyasm.names"
COMMENT = re.compile(r";\s*flyasm:(\S+)")


def records(k) -> list[str]:
    out = []
    p = k.plan
    if p is not None and hasattr(p, "regions"):
        out.append(f"{k.name}:plan:{p.name}:{'' if p.accum_offset is None else p.accum_offset}:{int(p.strict)}")
        for r in p.regions.values():
            out.append(f"{k.name}:reg:{r.name}:{r.file}:{r.reg.index}:{r.reg.last}:{r.alias_of or ''}")
    for r in k.regions:
        end = r.end if r.end is not None else len(k.stream)
        out.append(f"{k.name}:span:{r.start}:{end}:{'/'.join(r.path)}")
    for name, ld in k.labels.items():
        out.append(f"{k.name}:label:{ld.index}:{local_label(name)}")
    for lo, hi in k.scratch_lds:
        out.append(f"{k.name}:lds_scratch:{lo}:{hi}")
    return out


def decode(recs, kernel: str):
    """(RegisterPlan or None, [(start, end, path tuple)], {label: index}, [(lo, hi) LDS scratch])
    of `kernel` from its records."""
    from ..isa.operands import RegFile
    from ..plan import RegisterPlan
    plan, regions, aliases, spans, labels, scratch = None, {}, {}, [], {}, []
    try:
        for rec in recs:
            name, kind, rest = rec.split(":", 2)
            if name != kernel:
                continue
            if kind == "plan":
                pname, acc, strict = rest.split(":")
                plan = (pname, int(acc) if acc else None, strict == "1")
            elif kind == "reg":
                rname, f, first, last, parent = rest.split(":")
                reg = RegFile(f)[int(first):int(last)]
                if parent:
                    aliases[rname] = (parent, reg)
                else:
                    regions[rname] = reg
            elif kind == "span":
                start, end, path = rest.split(":", 2)
                spans.append((int(start), int(end), tuple(path.split("/"))))
            elif kind == "label":
                index, lname = rest.split(":", 1)
                labels[lname] = int(index)
            elif kind == "lds_scratch":
                lo, hi = rest.split(":")
                scratch.append((int(lo), int(hi)))
    except ValueError:
        raise FlyasmError(f"malformed flyasm name record {rec[:60]!r}", find_loc=False) from None
    if plan is not None:
        plan = RegisterPlan(plan[0], regions=regions, aliases=aliases, accum_offset=plan[1], strict=plan[2])
    return plan, spans, labels, scratch


def apply_spans(stream, spans) -> None:
    """Give each instruction the deepest region path that covers it."""
    for start, end, path in sorted(spans, key=lambda s: len(s[2])):
        for inst in stream[start:end]:
            inst.region = path


def rename_labels(stream, labels: dict, named: dict) -> dict:
    """Address labels (.L_pc_0x190) replaced by the builder's names at the same index, in the
    label table and in branch operands alike (the CFG matches them by name)."""
    at = {i: n for n, i in named.items()}
    new_name = {old: at[i] for old, i in labels.items() if i in at}
    if not new_name:
        return labels
    for inst in stream:
        if any(isinstance(o, Label) and o.name in new_name for o in inst.operands):
            inst.operands = tuple(Label(new_name[o.name]) if isinstance(o, Label) and o.name in new_name else o
                                  for o in inst.operands)
    return {new_name.get(n, n): i for n, i in labels.items()}
