"""Diff two kernels (Kernel objects, .s, .co, .py): register layout, instruction mix per region,
descriptor and metadata. `diff(A, B)` gives a JSON-able dict; `format_diff(d)` the text.

Register layout comes from the register plans when both kernels have one (RegisterPlan.to_dict
and RegisterPlan.diff); otherwise from use: every register is owned by the set of regions whose
instructions read or write it ('-' for instructions outside any region), and the diff lists the
registers whose owner changed, and per region the registers added and removed.

The instruction stream is compared in order too (difflib on instruction text, branch targets
written as <label> since their names follow addresses): instructions removed, added, and moved
(removed at one place and added with the same text at another).

Bound: registers and mix O(I); the in-order comparison is difflib's SequenceMatcher on the
instruction texts, O(I_a × I_b) in the worst case (near linear when the two kernels are alike,
which is what a diff is for).
"""
from __future__ import annotations

import difflib
import json

from .program import Program, as_program
from .stats import CLASSES, EXTRAS, counts

OUTSIDE = "-"
WHOLE = "(whole program)"


def ranges(regs) -> str:
    """Compact inclusive ranges: {('v',0),('v',1),('s',4)} -> 'v[0:1] s4'."""
    out = []
    for f in ("v", "a", "s"):
        idx = sorted(i for ff, i in regs if ff == f)
        j = 0
        while j < len(idx):
            k = j
            while k + 1 < len(idx) and idx[k + 1] == idx[k] + 1:
                k += 1
            out.append(f"{f}{idx[j]}" if j == k else f"{f}[{idx[j]}:{idx[k]}]")
            j = k + 1
    return " ".join(out)


def leaf(inst) -> str:
    return "/".join(inst.region) if inst.region else OUTSIDE


def region_registers(p: Program, named: bool = True) -> dict[str, set]:
    out: dict[str, set] = {}
    for inst in p.stream:
        regs = {r for r in inst.reads | inst.writes if r[0] in ("v", "a", "s")}
        out.setdefault(leaf(inst) if named else OUTSIDE, set()).update(regs)
    return out


def owners(p: Program, named: bool = True) -> dict[tuple, str]:
    own: dict[tuple, set] = {}
    for name, regs in region_registers(p, named).items():
        for r in regs:
            own.setdefault(r, set()).add(name)
    return {r: "+".join(sorted(v)) for r, v in own.items()}


def _flat(x, prefix="") -> dict:
    if isinstance(x, dict):
        out = {}
        for k, v in x.items():
            out.update(_flat(v, f"{prefix}{str(k).lstrip('.')}."))
        return out
    if isinstance(x, (list, tuple)) and any(isinstance(v, (dict, list, tuple)) for v in x):
        out = {}
        for i, v in enumerate(x):
            out.update(_flat(v, f"{prefix}{i}."))
        return out
    return {prefix[:-1]: list(x) if isinstance(x, tuple) else x}


def _dict_diff(a: dict, b: dict) -> dict:
    fa, fb = _flat(a), _flat(b)
    return {k: [fa.get(k), fb.get(k)] for k in sorted(set(fa) | set(fb)) if fa.get(k) != fb.get(k)}


def _layout(pa: Program, pb: Program) -> dict:
    if pa.plan is not None and pb.plan is not None:
        da, db = pa.plan.to_dict(), pb.plan.to_dict()
        return {"source": "plan", "changes": _dict_diff(da.get("regions", {}), db.get("regions", {})),
                "accum_offset": [da.get("accum_offset"), db.get("accum_offset")],
                "text": pa.plan.diff(pb.plan)}
    # region names only when both sides have them (a foreign .co against our rebuild of it)
    named = all(any(i.region for i in p.stream) for p in (pa, pb))
    ra, rb = region_registers(pa, named), region_registers(pb, named)
    regions = {}
    for n in sorted(set(ra) | set(rb)):
        a_, b_ = ra.get(n, set()), rb.get(n, set())
        if a_ != b_:
            regions[n] = {"a": ranges(a_), "b": ranges(b_), "added": ranges(b_ - a_), "removed": ranges(a_ - b_),
                          "size": [len(a_), len(b_)]}
    oa, ob = owners(pa, named), owners(pb, named)
    moved: dict[tuple, set] = {}
    for r in set(oa) | set(ob):
        x, y = oa.get(r, "(unused)"), ob.get(r, "(unused)")
        if x != y:
            moved.setdefault((x, y), set()).add(r)
    owner_changes = [{"registers": ranges(rs), "a": x, "b": y} for (x, y), rs in
                     sorted(moved.items(), key=lambda kv: (min(kv[1]), kv[0]))]
    return {"source": "usage", "regions": regions, "owner_changes": owner_changes}


def _mix(pa: Program, pb: Program) -> dict:
    # per region only when both sides name regions (a foreign .co has none: whole program only)
    both = all(any(i.region for i in p.stream) for p in (pa, pb))

    def per_region(p):
        groups: dict[str, list] = {WHOLE: p.stream}
        for inst in p.stream if both else ():
            groups.setdefault(leaf(inst), []).append(inst)
        return {n: counts(v) for n, v in groups.items()}

    ma, mb = per_region(pa), per_region(pb)
    out = {}
    for n in sorted(set(ma) | set(mb), key=lambda n: (n != WHOLE, n)):
        ca, cb = ma.get(n), mb.get(n)
        ch = {}
        for k in CLASSES + EXTRAS + ("total",):
            x, y = (ca or {}).get(k, 0), (cb or {}).get(k, 0)
            if x != y:
                ch[k] = [x, y]
        shapes_a, shapes_b = (ca or {}).get("mfma_by_shape", {}), (cb or {}).get("mfma_by_shape", {})
        for s_ in sorted(set(shapes_a) | set(shapes_b)):
            x, y = shapes_a.get(s_, {}).get("count", 0), shapes_b.get(s_, {}).get("count", 0)
            if x != y:
                ch[s_] = [x, y]
        if ch or (ca is None) != (cb is None):
            out[n] = {"only_in": ("a" if cb is None else "b") if (ca is None) != (cb is None) else None,
                      "changes": ch}
    return out


def _text(inst) -> str:
    from ..isa.operands import Label
    if not any(isinstance(o, Label) for o in inst.operands):
        return inst.text()
    ops = ", ".join("<label>" if isinstance(o, Label) else str(o) for o in inst.operands)
    return " ".join(x for x in (inst.mnemonic, ops) if x)


def _mnemonic(t: str) -> str:
    return t.split(" ", 1)[0]


def _stream(pa: Program, pb: Program) -> dict:
    """Removed, added, changed (same mnemonic at a replaced position) and moved instructions, and
    `rows`: all of them in program order, so both sides of a change read side by side."""
    ta, tb = [_text(i) for i in pa.stream], [_text(i) for i in pb.stream]
    removed, added, changed, rows = [], [], [], []
    if ta != tb:
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, ta, tb, autojunk=False).get_opcodes():
            if tag == "equal":
                continue
            rem, add = list(range(i1, i2)), list(range(j1, j2))
            # pair the replaced instructions of one mnemonic in order: v_lshlrev 2 -> v_lshlrev 1
            pairs = difflib.SequenceMatcher(None, [_mnemonic(ta[i]) for i in rem],
                                            [_mnemonic(tb[j]) for j in add], autojunk=False)
            for t2, a1, a2, b1, b2 in pairs.get_opcodes():
                if t2 == "equal":
                    for i, j in zip(rem[a1:a2], add[b1:b2]):
                        changed.append({"a": i, "b": j, "old": ta[i], "new": tb[j]})
                        rows.append({"op": "~", "a": i, "b": j, "text": f"{ta[i]}  =>  {tb[j]}"})
                    continue
                for i in rem[a1:a2]:
                    removed.append({"a": i, "text": ta[i]})
                    rows.append({"op": "-", "a": i, "text": ta[i]})
                for j in add[b1:b2]:
                    added.append({"b": j, "text": tb[j]})
                    rows.append({"op": "+", "b": j, "text": tb[j]})
    moved = []
    for r in list(removed):
        m = next((x for x in added if x["text"] == r["text"]), None)
        if m is not None:
            removed.remove(r)
            added.remove(m)
            moved.append({"a": r["a"], "b": m["b"], "text": r["text"]})
            rows = [x for x in rows if not (x["op"] == "-" and x["a"] == r["a"])]
            rows = [dict(x, op="moved", a=r["a"]) if x["op"] == "+" and x["b"] == m["b"] else x for x in rows]
    return {"removed": removed, "added": added, "changed": changed, "moved": moved, "rows": rows}


def diff(a, b, *, kernel_a: str | None = None, kernel_b: str | None = None) -> dict:
    """Differences from kernel A to kernel B (each a Kernel, Program, CodeObject or .co/.s/.py path)."""
    pa, pb = as_program(a, kernel_a), as_program(b, kernel_b)
    norm = _dict_diff(pa.descriptor, pb.descriptor)
    raw = _dict_diff(pa.raw_descriptor, pb.raw_descriptor) if pa.source == pb.source else {}
    raw = {k: v for k, v in raw.items() if k not in norm}
    return {
        "a": pa.name, "b": pb.name,
        "layout": _layout(pa, pb),
        "mix": _mix(pa, pb),
        "descriptor": norm,
        "descriptor_raw": raw,
        "metadata": _dict_diff(pa.metadata, pb.metadata),
        "instructions": [len(pa.stream), len(pb.stream)],
        "stream": _stream(pa, pb),
    }


def is_empty(d: dict) -> bool:
    lay = d["layout"]
    lay_changed = bool(lay.get("regions") or lay.get("owner_changes") or lay.get("changes") or lay.get("text"))
    st = d.get("stream") or {}
    st_changed = bool(st.get("rows"))
    return not (lay_changed or st_changed or d["mix"] or d["descriptor"] or d["descriptor_raw"] or d["metadata"])


def to_json(d: dict) -> str:
    return json.dumps(d, indent=2, default=str)


MAX_ROWS = 60


def _row(r: dict) -> str:
    if r["op"] == "~":
        return f"  ~ #{r['a']} -> #{r['b']}: {r['text']}"
    if r["op"] == "moved":
        return f"  moved #{r['a']} -> #{r['b']}: {r['text']}"
    return f"  {r['op']} #{r['a'] if r['op'] == '-' else r['b']}: {r['text']}"


def format_diff(d: dict, verbose: bool = False) -> str:
    out = [f"diff {d['a']} -> {d['b']}  ({d['instructions'][0]} -> {d['instructions'][1]} instructions)"]
    if is_empty(d):
        return out[0] + "\nno differences"
    lay = d["layout"]
    if lay["source"] == "plan":
        if lay["text"]:
            out += ["", "register plan:"] + ["  " + x for x in lay["text"].splitlines()]
    else:
        if lay["owner_changes"]:
            out += ["", "registers that changed owner (regions using them, from instruction use):"]
            out += [f"  {c['registers']}: {c['a']} -> {c['b']}" for c in lay["owner_changes"]]
        if lay["regions"]:
            out += ["", "registers per region:"]
            for n, r in lay["regions"].items():
                parts = [f"{r['size'][0]} -> {r['size'][1]} registers"]
                if r["added"]:
                    parts.append(f"+{r['added']}")
                if r["removed"]:
                    parts.append(f"-{r['removed']}")
                out.append(f"  {n}: " + ", ".join(parts))
    if d["mix"]:
        out += ["", "instruction mix:"]
        for n, m in d["mix"].items():
            tag = f" (only in {m['only_in'].upper()})" if m["only_in"] else ""
            out.append(f"  {n}{tag}: " + ", ".join(f"{k} {x} -> {y}" for k, (x, y) in m["changes"].items()))
    st = d.get("stream") or {}
    rows = st.get("rows") or []
    if rows:
        n = {k: len(st.get(k, ())) for k in ("changed", "removed", "added", "moved")}
        out += ["", f"instruction stream (#index in A / B; {n['changed']} changed, {n['removed']} removed, "
                    f"{n['added']} added, {n['moved']} moved):"]
        text = [_row(r) for r in rows]
        shown = text if verbose or len(text) <= MAX_ROWS else text[:MAX_ROWS]
        out += shown
        if len(shown) < len(text):
            out.append(f"  ... and {len(text) - len(shown)} more rows (-v lists them)")
    for title, key in (("descriptor", "descriptor"), ("descriptor fields", "descriptor_raw"), ("metadata", "metadata")):
        if d[key]:
            out += ["", f"{title}:"] + [f"  {k}: {x} -> {y}" for k, (x, y) in d[key].items()]
    return "\n".join(out)
