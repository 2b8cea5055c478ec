"""The shape of a lifted file: basic blocks and loops as stream regions, and leaf runs of
instructions cut into functions of bounded size, so a 30k-instruction kernel stays readable.

Blocks start at labels and after branches/s_endpgm; a loop is [branch target, backward branch]
when it nests properly with the other loops (crossing ones are left out: a region is a `with`).
Regions the input already had (our own `.s` region comments) are kept instead, as a tree.

Bound: O(I + (blocks + loops) log (blocks + loops)): loops and blocks are sorted once and nested
with a stack of the open loops; the functions are cut in one pass over the tree.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..isa.instruction import Instruction
from ..isa.operands import Label


@dataclass
class Node:
    """A region over stream indices [start, end): a loop or block, with children in order."""
    name: str
    start: int
    end: int
    kind: str                          # 'loop', 'block', 'region'
    children: list["Node"] = field(default_factory=list)


def _is_branch(inst: Instruction) -> bool:
    return inst.mnemonic != ".long" and any(isinstance(op, Label) for op in inst.operands)


def blocks_and_loops(stream: list[Instruction], labels: dict[str, int], pcs: list[int | None]) -> list[Node]:
    n = len(stream)
    label_at: dict[int, str] = {}
    for lab, idx in sorted(labels.items(), key=lambda kv: (kv[1], kv[0])):
        label_at.setdefault(idx, lab)
    leaders = {0} | {i for i in label_at if i < n}
    loops: list[tuple[int, int, str]] = []
    for i, inst in enumerate(stream):
        if (_is_branch(inst) or inst.mnemonic.startswith("s_endpgm")) and i + 1 < n:
            leaders.add(i + 1)
        if _is_branch(inst):
            for op in inst.operands:
                if isinstance(op, Label) and op.name in labels and labels[op.name] <= i:
                    loops.append((labels[op.name], i + 1, op.name))

    def bname(s: int) -> str:
        if s in label_at:
            return label_at[s] if label_at[s].startswith(("bb_", "loop_")) else f"bb_{label_at[s].lstrip('.')}"
        return f"bb_0x{pcs[s]:x}" if pcs[s] is not None else f"bb_{s}"

    starts = sorted(leaders)
    blocks = [Node(bname(s), s, starts[j + 1] if j + 1 < len(starts) else n, "block") for j, s in enumerate(starts)]
    # Outer loops first; keep a loop only if it nests with those kept: sorted so, a kept loop
    # that a later one crosses is the innermost kept loop still open at its start.
    kept: list[tuple[int, int, str]] = []
    open_: list[tuple[int, int]] = []
    for lo, hi, lab in sorted(set(loops), key=lambda t: (t[0], -t[1])):
        while open_ and open_[-1][1] <= lo:
            open_.pop()
        if open_ and (open_[-1][1] < hi or open_[-1] == (lo, hi)):
            continue
        kept.append((lo, hi, lab))
        open_.append((lo, hi))
    root = Node("", 0, n, "root")
    loop_nodes = [Node(lab if lab.startswith("loop_") else f"loop_{lab.lstrip('.')}", lo, hi, "loop")
                  for lo, hi, lab in kept]
    _nest(root, loop_nodes + blocks)
    return root.children


def _nest(root: Node, nodes: list[Node]) -> None:
    """Each node into the innermost loop that holds it (a block with a loop's span goes inside
    it), children in (start, -end) order. Kept loops nest and blocks never straddle a loop's
    ends, so one pass in that order with a stack of the open loops does it: O(n log n)."""
    stack: list[Node] = []
    for node in sorted(nodes, key=lambda x: (x.start, -x.end, x.kind != "loop")):
        while stack and not (stack[-1].start <= node.start and node.end <= stack[-1].end):
            stack.pop()
        (stack[-1] if stack else root).children.append(node)
        if node.kind == "loop":
            stack.append(node)


def from_regions(stream: list[Instruction]) -> list[Node] | None:
    """The region tree the input already carries (Instruction.region paths), or None."""
    if not any(inst.region for inst in stream):
        return None
    root = Node("", 0, len(stream), "root")
    open_: list[Node] = []
    for i, inst in enumerate(stream):
        path = inst.region
        depth = 0
        while depth < len(open_) and depth < len(path) and open_[depth].name == path[depth]:
            depth += 1
        for nd in open_[depth:]:
            nd.end = i
        del open_[depth:]
        for name in path[depth:]:
            nd = Node(name, i, len(stream), "region")
            (open_[-1] if open_ else root).children.append(nd)
            open_.append(nd)
    return root.children


@dataclass
class Chunk:
    """A function of the lifted file: consecutive sibling nodes (or a slice of one large block)."""
    name: str
    start: int
    end: int
    nodes: list[Node]                 # blocks written as `with` inside the function (may be empty)


@dataclass
class Step:
    """One statement of a caller: a call of a chunk, or a `with` region holding more steps."""
    chunk: Chunk | None = None
    region: Node | None = None
    steps: list["Step"] = field(default_factory=list)


def plan_steps(nodes: list[Node], n: int, limit: int) -> list[Step]:
    """Steps that cover [0, n): gaps outside any region are chunks too."""
    used: set[str] = set()

    def fname(base: str) -> str:
        name = "".join(c if c.isalnum() or c == "_" else "_" for c in base).strip("_") or "part"
        if name[0].isdigit():
            name = "p_" + name
        cand, j = name, 1
        while cand in used:
            j += 1
            cand = f"{name}_{j}"
        used.add(cand)
        return cand

    def cover(children: list[Node], lo: int, hi: int) -> list[Step]:
        steps: list[Step] = []
        pending: list[Node] = []

        def flush():
            nonlocal pending
            if pending:
                steps.extend(group_leaves(pending))
                pending = []

        items = []
        pos = lo
        for ch in children:
            if ch.start > pos:
                items.append(Node("", pos, ch.start, "gap"))
            items.append(ch)
            pos = ch.end
        if pos < hi:
            items.append(Node("", pos, hi, "gap"))
        for it in items:
            if it.start == it.end and it.kind == "gap":
                continue
            if it.children or (it.kind != "block" and it.kind != "gap") or it.end - it.start > limit:
                flush()
                if it.kind == "gap":
                    steps.extend(slices(it, None))
                elif it.children or it.kind in ("loop", "region"):
                    steps.append(Step(region=it, steps=cover(it.children, it.start, it.end)))
                else:
                    steps.append(Step(region=it, steps=slices(it, None)))
            else:
                pending.append(it)
        flush()
        return steps

    def group_leaves(leaves: list[Node]) -> list[Step]:
        out: list[Step] = []
        cur: list[Node] = []
        for lf in leaves:
            if cur and lf.end - cur[0].start > limit:
                out.append(_leaf_step(cur))
                cur = []
            cur.append(lf)
        if cur:
            out.append(_leaf_step(cur))
        return out

    def _leaf_step(group: list[Node]) -> Step:
        first = next((g.name for g in group if g.name), "") or ("entry" if group[0].start == 0
                                                                else f"code_{group[0].start}")
        blocks = [g for g in group if g.kind == "block"]
        return Step(chunk=Chunk(fname(first), group[0].start, group[-1].end, blocks))

    def slices(node: Node, _) -> list[Step]:
        out = []
        base = node.name or "part"
        for j, s in enumerate(range(node.start, node.end, limit)):
            out.append(Step(chunk=Chunk(fname(f"{base}_part{j}"), s, min(node.end, s + limit), [])))
        return out

    return cover(nodes, 0, n)
