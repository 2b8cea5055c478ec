"""Does a wait at an anchor stand between a producer and its consumer, and how many ops lie between?

The questions fixes.py asks to group wait-counter findings, answered on the block graph. A *walk*
goes forward from an instruction, block by block, and ends at the first of its target or its
stop; along the way it counts the ops of one class (the producer's ordering class on one
counter). Reaching a block again while it is still on the walk is a loop: the count is then
unbounded (CYCLE). Two questions:

* `bypass(p, a, c)`: does some walk from the instruction after producer p reach consumer c -- or a
  loop -- before anchor a? Then a wait at a cannot cover the finding. Answered from the block
  graph *cut* at a's block (which keeps no successors: a walk that enters it meets a, or c first):
  per block, the blocks it reaches and whether any lies on a cycle, as bit masks.
* `between(a, c, kind)`: the most ops of `kind` on a walk from a to c (CYCLE: a loop on the way).

Bounds (B blocks, E edges, W = B/64 machine words of a mask):
* a cut graph: O((B + E) × W), once per block an anchor is in (at most B of them);
* dominators from the successors of a producer's block: O((B + E) × d) with d the loop nesting
  depth (Cooper, Harvey, Kennedy), once per producer block (at most B);
* `bypass`: O(successors of the producer's block) mask tests;
* `between`: one walk, O(B + E), once per (anchor, consumer block, class);
* `candidates`: O(dominator depth) once per (producer block, consumer block), then O(1).
So at most O(B × (B + E) × W) of graph work per program, whatever the number of findings.
Nothing enumerates paths: each walk settles every block once.
"""
from __future__ import annotations

from .cfg import CFG
from .waitcnt import mem_op

CYCLE = 1 << 20      # a walk that reaches a loop: more ops than any counter holds


class Separation:
    def __init__(self, cfg: CFG):
        self.cfg = cfg
        self.pos = {i: n for b in cfg.blocks for n, i in enumerate(b.insts)}
        # per instruction that completes in order: (ordering class, counters) -- a property of the
        # opcode, so mem_op is asked once per mnemonic
        by_name: dict[str, tuple | None] = {}
        self.op: dict[int, tuple[str, tuple]] = {}
        for b in cfg.blocks:
            for i in b.insts:
                ins = cfg.items[i]
                if ins.mnemonic not in by_name:
                    o = mem_op(ins, i)
                    by_name[ins.mnemonic] = (o.cls, o.counters) if o is not None and o.ordered else None
                if by_name[ins.mnemonic] is not None:
                    self.op[i] = by_name[ins.mnemonic]
        self._prefix: dict = {}
        self._cuts: dict[int, tuple[list[int], int]] = {}
        self._loops: dict[tuple[int, int], bool] = {}
        self._between: dict[tuple, int | None] = {}
        self._doms: dict[int, dict[int, int]] = {}
        self._chains: dict[tuple[int, int], list[int] | None] = {}

    # ---- counting ------------------------------------------------------------------------------
    def kind(self, producer: int, ctr: str):
        """The counting class of the producer's op on counter ctr (None: it counts nothing, as an
        op that completes out of order tells nothing by its count)."""
        po = self.op.get(producer)
        return None if po is None else (po[0], ctr)

    def prefix(self, kind) -> list[list[int]]:
        """Per block, the number of ops of `kind` among its first k instructions, k = 0..len."""
        if kind not in self._prefix:
            out = []
            for b in self.cfg.blocks:
                run, n = [0], 0
                for j in b.insts:
                    o = self.op.get(j) if kind is not None else None
                    n += o is not None and o[0] == kind[0] and kind[1] in o[1]
                    run.append(n)
                out.append(run)
            self._prefix[kind] = out
        return self._prefix[kind]

    # ---- walks ---------------------------------------------------------------------------------
    def _scan(self, bid: int, pos: int, stop: int, target: int, pre) -> tuple[str, int | None]:
        """One block from its instruction `pos` on: ("target", ops before the target), ("stop",
        None) or ("pass", ops in the rest of the block), whichever of target and stop comes first."""
        block_of, at = self.cfg.block_of, self.pos
        t = at[target] if block_of.get(target) == bid and at[target] >= pos else None
        s = at[stop] if block_of.get(stop) == bid and at[stop] >= pos else None
        if t is not None and (s is None or t <= s):
            return "target", pre[bid][t] - pre[bid][pos]
        if s is not None:
            return "stop", None
        return "pass", pre[bid][-1] - pre[bid][pos]

    def walk(self, start: int, stop: int, target: int, kind) -> int | None:
        """The most ops of `kind` on a walk from item `start` to item `target` that does not pass
        item `stop` (None: no such walk; CYCLE or more: one reaches a loop first). A depth-first
        search over blocks: each block is scanned in O(1) from the running counts and settled
        once, O(B + E)."""
        pre = self.prefix(kind)
        blocks = self.cfg.blocks
        memo: dict[tuple, int | None] = {}
        active: set[tuple] = set()
        stack: list[list] = []          # frames: [node, ops in its block, successors, next one, best]

        def enter(node) -> tuple[int | None, bool]:
            """(value, False) when node is settled (or on the walk: CYCLE), else (None, True): pushed."""
            if node in memo:
                return memo[node], False
            if node in active:
                return CYCLE, False
            what, n = self._scan(*node, stop, target, pre)
            if what != "pass":
                memo[node] = n
                return n, False
            active.add(node)
            stack.append([node, n, blocks[node[0]].succs, 0, None])
            return None, True

        value, pushed = enter((self.cfg.block_of[start], self.pos[start]))
        if not pushed:
            return value
        while True:
            frame = stack[-1]
            node, n, succs, k, best = frame
            if k < len(succs):
                frame[3] = k + 1
                r, pushed = enter((succs[k], 0))
                if not pushed and r is not None:
                    frame[4] = n + r if best is None else max(best, n + r)
                continue
            stack.pop()
            active.discard(node)
            memo[node] = best
            if not stack:
                return best
            if best is not None:
                up = stack[-1]
                up[4] = up[1] + best if up[4] is None else max(up[4], up[1] + best)

    def between(self, a: int, c: int, kind) -> int | None:
        """walk(a, -1, c, kind): the most ops of `kind` issued from the anchor on until the consumer.
        Unless c follows a in a's block, every such walk ends where it enters c's block, so the
        value is a part that depends on that block only plus the ops in it before c: the part is
        worked out once per (anchor, consumer block, kind)."""
        pos, pre = self.pos, self.prefix(kind)
        ba, bc = self.cfg.block_of[a], self.cfg.block_of[c]
        if ba == bc and pos[c] >= pos[a]:
            return pre[bc][pos[c]] - pre[bc][pos[a]]
        key = (a, bc, kind)
        if key not in self._between:
            r = self.walk(a, -1, c, kind)
            self._between[key] = None if r is None else r - pre[bc][pos[c]]
        r = self._between[key]
        return None if r is None else r + pre[bc][pos[c]]

    # ---- the graph cut at an anchor --------------------------------------------------------------
    def cut(self, ba: int) -> tuple[list[int], int]:
        """The block graph with block ba left without successors: per block, the mask of the
        blocks it reaches (itself included), and the mask of the blocks on a cycle. One pass of
        Tarjan's strongly connected components, which closes a component only after every
        component it reaches: O((B + E) × W)."""
        got = self._cuts.get(ba)
        if got is not None:
            return got
        blocks = self.cfg.blocks
        succ = [() if b.id == ba else b.succs for b in blocks]
        index: dict[int, int] = {}
        low: dict[int, int] = {}
        on, comp = set(), []
        reach, cyc = [0] * len(blocks), 0
        for root in range(len(blocks)):
            if root in index:
                continue
            index[root] = low[root] = len(index)
            comp.append(root)
            on.add(root)
            work = [(root, iter(succ[root]))]
            while work:
                v, it = work[-1]
                for w in it:
                    if w not in index:
                        index[w] = low[w] = len(index)
                        comp.append(w)
                        on.add(w)
                        work.append((w, iter(succ[w])))
                        break
                    if w in on:
                        low[v] = min(low[v], index[w])
                else:
                    work.pop()
                    if work:
                        u = work[-1][0]
                        low[u] = min(low[u], low[v])
                    if low[v] != index[v]:
                        continue
                    members = []
                    while True:
                        w = comp.pop()
                        on.discard(w)
                        members.append(w)
                        if w == v:
                            break
                    m = 0
                    for w in members:
                        m |= 1 << w
                    if len(members) > 1 or v in succ[v]:
                        cyc |= m
                    for w in members:
                        for x in succ[w]:
                            m |= reach[x]
                    for w in members:
                        reach[w] = m
        self._cuts[ba] = reach, cyc
        return reach, cyc

    def loops_past(self, bp: int, ba: int) -> bool:
        """Whether a walk that leaves block bp by its successors can reach a loop without entering
        block ba: then no wait in ba covers a producer in bp (unless it follows the producer in
        bp)."""
        key = (bp, ba)
        got = self._loops.get(key)
        if got is None:
            reach, cyc = self.cut(ba)
            got = self._loops[key] = any(reach[s] & cyc for s in self.cfg.blocks[bp].succs)
        return got

    def bypass(self, p: int, a: int, c: int) -> bool:
        """Whether walk(next instruction after p, a, c) is not None: a walk from the producer meets
        the consumer, or a loop, before the anchor."""
        cfg, pos = self.cfg, self.pos
        bp, ba, bc = cfg.block_of[p], cfg.block_of[a], cfg.block_of[c]
        insts = cfg.blocks[bp].insts
        nxt = pos[p] + 1
        if nxt < len(insts):                     # the rest of p's block first
            tc = pos[c] if bc == bp and pos[c] >= nxt else None
            ta = pos[a] if ba == bp and pos[a] >= nxt else None
            if tc is not None and (ta is None or tc <= ta):
                return True
            if ta is not None:
                return False
            succs = cfg.blocks[bp].succs
        else:                                    # a successor that starts with a is a walk that stops there
            succs = [s for s in cfg.blocks[bp].succs if cfg.blocks[s].insts and cfg.blocks[s].insts[0] != a]
        reach, cyc = self.cut(ba)
        # c's block ends a walk at c, unless it is a's block with a first
        mask = cyc | (1 << bc if bc != ba or pos[c] < pos[a] else 0)
        return any(reach[s] & mask for s in succs)

    # ---- which anchors can separate ----------------------------------------------------------
    def _dominators(self, bp: int) -> dict[int, int]:
        """Immediate dominators of the blocks reachable from the successors of block bp, from a
        virtual root (-1) before them all (Cooper, Harvey, Kennedy: "A Simple, Fast Dominance
        Algorithm", 2001)."""
        if bp in self._doms:
            return self._doms[bp]
        blocks = self.cfg.blocks
        roots = blocks[bp].succs
        post, seen = [], set()
        for r in roots:                          # one depth-first search from the virtual root
            if r in seen:
                continue
            seen.add(r)
            stack = [(r, iter(blocks[r].succs))]
            while stack:
                b, it = stack[-1]
                for s in it:
                    if s not in seen:
                        seen.add(s)
                        stack.append((s, iter(blocks[s].succs)))
                        break
                else:
                    post.append(b)
                    stack.pop()
        rank = {b: n for n, b in enumerate(post)}
        rank[-1] = len(post)
        rootset = set(roots)
        idom = {-1: -1}

        def intersect(x, y):
            while x != y:
                while rank[x] < rank[y]:
                    x = idom[x]
                while rank[y] < rank[x]:
                    y = idom[y]
            return x

        changed = True
        while changed:
            changed = False
            for b in reversed(post):
                preds = [q for q in blocks[b].preds if q in rank and q in idom] + ([-1] if b in rootset else [])
                new = preds[0]
                for q in preds[1:]:
                    new = intersect(q, new)
                if idom.get(b) != new:
                    idom[b] = new
                    changed = True
        self._doms[bp] = idom
        return idom

    def _chain(self, bp: int, bc: int) -> list[int] | None:
        """Block bc and its dominators from the successors of bp, less those `loops_past` rules
        out (None: bc is not reachable from them)."""
        key = (bp, bc)
        if key not in self._chains:
            idom = self._dominators(bp)
            chain, b = None, bc
            if bc in idom:
                chain = []
                while b != -1:
                    if not self.loops_past(bp, b):
                        chain.append(b)
                    b = idom[b]
            self._chains[key] = chain
        return self._chains[key]

    def candidates(self, p: int, c: int) -> list[tuple[int, int, int]] | None:
        """Where a wait other than one at c itself can cover the finding (p, c): (block, first,
        last position) ranges, None when anywhere. No walk from the instruction after p may meet
        c, or a loop, before the anchor a. Such a walk first runs through the rest of p's block
        (a may be there, after p: always a candidate), then leaves by its successors; from there
        it must not reach a loop without entering a's block (`loops_past`), and every path to
        c's block must pass a's block: so that is c's block, with a before c (entered from its
        start, a walk meets c before a later a), or a dominator of c's block from those
        successors (anywhere in it). When c follows p in its block, only the anchors between
        them; when c's block is not reachable from the successors, no range is claimed."""
        bp, bc = self.cfg.block_of[p], self.cfg.block_of[c]
        blocks, pos = self.cfg.blocks, self.pos
        if bp == bc and pos[c] > pos[p]:
            return [(bp, pos[p] + 1, pos[c])]         # the rest of p's block meets c first
        chain = self._chain(bp, bc)
        if chain is None:
            return None
        out = [(bp, pos[p] + 1, len(blocks[bp].insts) - 1)]
        for b in chain:
            last = pos[c] if b == bc else len(blocks[b].insts) - 1
            out.append((b, 0, min(last, pos[p]) if b == bp else last))   # after p in bp: the range above
        return out
