"""Basic blocks and the control-flow graph of a program.

A *program* is a plain list whose items are `Instruction`s or label names (str). Builders,
the .s parser and the code-object disassembler all reduce to it, so every check works on all
three. Labels start blocks; `s_branch` ends one with a single successor, `s_cbranch_*` with
the target and the fallthrough, `s_endpgm`/`s_setpc_b64` with none (an indirect jump leaves
the function as far as a static check can see).

Bounds (I items, B blocks, E edges): build_cfg O(I); reverse postorder and back edges one
depth-first search each, O(B + E); per_text O(I).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from ..isa.instruction import Instruction
from ..isa.operands import Label

ENDS = {"s_endpgm", "s_endpgm_saved", "s_setpc_b64", "s_rfe_b64"}


def is_label(item) -> bool:
    return isinstance(item, str)


def branch_target(ins: Instruction) -> str | None:
    for op in ins.operands:
        if isinstance(op, Label):
            return op.name
    return None


def is_branch(ins: Instruction) -> bool:
    return ins.name == "s_branch" or ins.name.startswith("s_cbranch_")


@dataclass
class Block:
    id: int
    start: int                     # item index of the first item (label or instruction)
    end: int                       # one past the last item
    labels: list[str] = field(default_factory=list)
    insts: list[int] = field(default_factory=list)   # item indices of the instructions, in order
    succs: list[int] = field(default_factory=list)
    preds: list[int] = field(default_factory=list)


@dataclass
class CFG:
    items: list
    blocks: list[Block]
    block_of: dict[int, int]       # instruction item index -> block id
    label_block: dict[str, int]
    back_edges: set[tuple[int, int]]

    @cached_property
    def keys(self) -> dict[int, tuple]:
        """Instruction item index -> (text, raw encoding): what it says. The passes work out what
        depends only on that once per distinct key (an unrolled kernel repeats most of its
        instructions); the keys live with this program's CFG, never beyond it."""
        return {i: (it.text(), it.raw) for i, it in enumerate(self.items) if not is_label(it)}

    def per_text(self, fn) -> dict:
        """Instruction item index -> fn(instruction), fn called once per distinct key."""
        by_key, out = {}, {}
        for i, k in self.keys.items():
            if k not in by_key:
                by_key[k] = fn(self.items[i])
            out[i] = by_key[k]
        return out

    @cached_property
    def rpo(self) -> dict[int, int]:
        """Block id -> rank in reverse postorder from the entry (unreachable blocks last). A
        fixed point that visits blocks in this order sees every forward edge's source before
        its target, so only loop back edges make it go round again."""
        if not self.blocks:
            return {}
        post, seen = [], {0}
        stack = [(0, iter(self.blocks[0].succs))]
        while stack:
            b, it = stack[-1]
            for s in it:
                if s not in seen:
                    seen.add(s)
                    stack.append((s, iter(self.blocks[s].succs)))
                    break
            else:
                post.append(b)
                stack.pop()
        order = post[::-1] + [b.id for b in self.blocks if b.id not in seen]
        return {b: n for n, b in enumerate(order)}


def build_cfg(items: list) -> CFG:
    # leaders: item 0, every label (a run of labels is one leader), the item after a branch/end
    leaders = {0}
    for i, it in enumerate(items):
        if is_label(it):
            if i == 0 or not is_label(items[i - 1]):
                leaders.add(i)
        elif is_branch(it) or it.name in ENDS:
            leaders.add(i + 1)
    starts = sorted(x for x in leaders if x < len(items)) or [0]
    blocks: list[Block] = []
    for n, s in enumerate(starts):
        e = starts[n + 1] if n + 1 < len(starts) else len(items)
        b = Block(n, s, e)
        for i in range(s, e):
            if is_label(items[i]):
                b.labels.append(items[i])
            else:
                b.insts.append(i)
        blocks.append(b)
    label_block = {lab: b.id for b in blocks for lab in b.labels}
    block_of = {i: b.id for b in blocks for i in b.insts}
    for b in blocks:
        last = items[b.insts[-1]] if b.insts else None
        nxt = b.id + 1 if b.id + 1 < len(blocks) else None
        if last is None:
            succ = [nxt]
        elif last.name in ENDS:
            succ = []
        elif is_branch(last):
            tgt = branch_target(last)
            t = label_block.get(tgt) if tgt is not None else None
            succ = [t] if last.name == "s_branch" else [t, nxt]
        else:
            succ = [nxt]
        for s in succ:
            if s is not None and s not in b.succs:
                b.succs.append(s)
    for b in blocks:
        for s in b.succs:
            blocks[s].preds.append(b.id)
    return CFG(items, blocks, block_of, label_block, _back_edges(blocks))


def _back_edges(blocks: list[Block]) -> set[tuple[int, int]]:
    """Edges to a block on the current DFS stack (loop back edges)."""
    if not blocks:
        return set()
    back, state = set(), {}
    stack = [(0, iter(blocks[0].succs))]
    state[0] = 1
    while stack:
        b, it = stack[-1]
        for s in it:
            if state.get(s) == 1:
                back.add((b, s))
            elif s not in state:
                state[s] = 1
                stack.append((s, iter(blocks[s].succs)))
                break
        else:
            state[b] = 2
            stack.pop()
    return back


def program_from_lines(lines) -> list:
    """Assembly lines -> program (label lines end with ':'; comments and directives dropped)."""
    from ..isa.syntax import parse_instruction
    out = []
    for raw in lines:
        line = raw.split("//")[0].split(";")[0].strip()
        if not line or line.startswith("."):
            if line.endswith(":"):
                out.append(line[:-1])
            continue
        if line.endswith(":"):
            out.append(line[:-1])
        else:
            out.append(parse_instruction(line))
    return out


def program_from_kernel(k) -> list:
    """A Kernel's stream with its labels put back in place."""
    at: dict[int, list[str]] = {}
    for name, ld in k.labels.items():
        at.setdefault(ld.index, []).append(name)
    out = []
    for i, ins in enumerate(k.stream):
        out.extend(at.get(i, ()))
        out.append(ins)
    out.extend(at.get(len(k.stream), ()))
    return out
