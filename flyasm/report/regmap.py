"""The register-map picture: registers down, program position across.

Rows are the unified VGPR file v0..v511 as the hardware lays it out (arch VGPRs, then AGPRs from
accum_offset: a0 is row accum_offset) and then s0..s105. Columns are instruction indices. Each
row's background is its plan region (grey 'unplanned' for touched registers outside the plan);
bars are live ranges, from a write to the last read before the next write (a read with no
earlier write starts at the left edge: live-in). Bars take the plan region's colour, or, without
a plan, the colour of the program region that wrote the register (or of the writer's
instruction class when it has no region). Checker findings are red
markers at the consumer, on the registers it shares with the producer, joined to the producer by
a red line. Program regions and loop bodies are drawn along the top.

The order is the stream order; live ranges do not follow loop back edges.
`to_svg` gives a standalone SVG (tooltips as <title>); `to_html` a self-contained page with a
legend and a hover box.
"""
from __future__ import annotations

import html

from .program import Program, as_program, loops
from .stats import classify

VROWS = 512
SROWS = 106
GAP = 6             # empty rows between the VGPR file and the SGPRs
LEFT, TOP, RIGHT, BOTTOM = 96, 64, 16, 24
PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
           "#9c755f", "#86bcb6", "#d37295", "#a0cbe8", "#8cd17d", "#f1ce63", "#bab0ac", "#499894"]
UNPLANNED = "#9a9a9a"


def _row(file: str, i: int, acc: int) -> int | None:
    if file == "v":
        return i
    if file == "a":
        r = acc + i
        return r if r < VROWS else None
    if file == "s":
        return VROWS + GAP + i if i < SROWS else None
    return None


def live_ranges(p: Program) -> list[tuple]:
    """(file, index, start, end, writer_index or None) in stream order; end is the last read (inclusive)."""
    open_: dict[tuple, list] = {}
    out = []
    for i, inst in enumerate(p.stream):
        for r in inst.reads:
            if r[0] not in ("v", "a", "s"):
                continue
            cur = open_.get(r)
            if cur is None:
                cur = open_[r] = [r[0], r[1], 0, i, None]
                out.append(cur)
            cur[3] = i
        for r in inst.writes:
            if r[0] not in ("v", "a", "s"):
                continue
            cur = open_[r] = [r[0], r[1], i, i, i]
            out.append(cur)
    return [tuple(x) for x in out]


def _finding_sites(p: Program, findings) -> list[tuple]:
    """(consumer index, producer index or None, rule, message) for each finding we can place."""
    pos = {id(inst): i for i, inst in enumerate(p.stream)}
    by_pc = {inst.pc: i for i, inst in enumerate(p.stream) if inst.pc is not None}

    def where(site):
        if site is None:
            return None
        ins = getattr(site, "ins", None)
        if ins is not None and id(ins) in pos:
            return pos[id(ins)]
        if getattr(site, "pc", None) in by_pc:
            return by_pc[site.pc]
        return None

    out = []
    for f in findings or ():
        c = where(getattr(f, "consumer", None))
        if c is None:
            continue
        out.append((c, where(getattr(f, "producer", None)), getattr(f, "rule", "finding"), str(f)))
    return out


class _Colours:
    def __init__(self):
        self.map: dict[str, str] = {}

    def __call__(self, name: str | None) -> str:
        if name is None:
            return UNPLANNED
        if name not in self.map:
            self.map[name] = PALETTE[len(self.map) % len(PALETTE)]
        return self.map[name]


def _svg(p: Program, findings, row_h: int, max_width: int) -> tuple[str, dict]:
    n = max(len(p.stream), 1)
    cw = max(1.0, min(24.0, max_width / n))
    acc = p.descriptor.get("accum_offset") or 256
    nrows = VROWS + GAP + SROWS
    W = LEFT + n * cw + RIGHT
    H = TOP + nrows * row_h + BOTTOM
    X = lambda i: LEFT + i * cw  # noqa: E731
    Y = lambda r: TOP + r * row_h  # noqa: E731
    col = _Colours()
    plan = p.plan
    esc = lambda t: html.escape(str(t), quote=True)  # noqa: E731
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W:.0f}" height="{H}" viewBox="0 0 {W:.0f} {H}" '
         f'font-family="monospace" font-size="10" class="regmap">',
         f'<rect x="0" y="0" width="{W:.0f}" height="{H}" fill="#ffffff"/>',
         f'<rect x="{LEFT}" y="{TOP}" width="{n * cw:.1f}" height="{VROWS * row_h}" fill="#f7f7f7"/>',
         f'<rect x="{LEFT}" y="{Y(VROWS + GAP)}" width="{n * cw:.1f}" height="{SROWS * row_h}" fill="#f7f7f7"/>']
    # AGPR boundary.
    o.append(f'<rect x="{LEFT}" y="{Y(acc)}" width="{n * cw:.1f}" height="{(VROWS - acc) * row_h}" fill="#eef0f6"/>')
    o.append(f'<line x1="{LEFT - 40}" x2="{W - RIGHT:.0f}" y1="{Y(acc)}" y2="{Y(acc)}" stroke="#555" '
             f'stroke-dasharray="4 2"><title>accum_offset {acc}: AGPRs a0.. start here</title></line>')
    o.append(f'<text x="4" y="{Y(acc) + 10}" fill="#333">a0 (acc {acc})</text>')
    # Row backgrounds from the plan.
    touched = set()
    for inst in p.stream:
        touched |= {r for r in inst.reads | inst.writes if r[0] in ("v", "a", "s")}
    legend: dict[str, str] = {}
    if plan is not None:
        for r in plan.regions.values():
            for i in r.reg.regs():
                row = _row(r.file, i, plan.accum_offset or acc)
                if row is not None:
                    o.append(f'<rect x="{LEFT}" y="{Y(row)}" width="{n * cw:.1f}" height="{row_h}" '
                             f'fill="{col(r.name)}" fill-opacity="0.18"/>')
            legend[r.name] = col(r.name)
            row0 = _row(r.file, r.reg.index, plan.accum_offset or acc)
            if row0 is not None:
                o.append(f'<text x="{LEFT - 4}" y="{Y(row0) + 9}" text-anchor="end" fill="{col(r.name)}" '
                         f'font-weight="bold" data-tip="{esc(f"plan region {r.name} = {r.reg}")}">{esc(r.name)}'
                         f'<title>{esc(f"plan region {r.name} = {r.reg}")}</title></text>')
    # Row labels.
    for i in range(0, acc, 32):
        o.append(f'<text x="4" y="{Y(i) + 9}" fill="#666">v{i}</text>')
    for i in range(0, VROWS - acc, 32):
        if i:
            o.append(f'<text x="4" y="{Y(acc + i) + 9}" fill="#666">a{i}</text>')
    for i in range(0, SROWS, 16):
        o.append(f'<text x="4" y="{Y(VROWS + GAP + i) + 9}" fill="#666">s{i}</text>')
    # Program regions and loop bodies along the top.
    for sp in p.regions:
        depth = sp.name.count("/")
        y = 4 + 14 * min(depth, 1)
        c = col("region:" + sp.name)
        tip = esc(f"region {sp.name}: instructions {sp.start}..{sp.end - 1}")
        o.append(f'<rect x="{X(sp.start):.1f}" y="{y}" width="{max(cw, (sp.end - sp.start) * cw):.1f}" height="12" '
                 f'fill="{c}" fill-opacity="0.35" stroke="{c}" data-tip="{tip}"><title>{tip}</title></rect>')
        o.append(f'<text x="{X(sp.start) + 2:.1f}" y="{y + 10}" fill="#000">{esc(sp.name.split("/")[-1])}</text>')
        o.append(f'<line x1="{X(sp.start):.1f}" x2="{X(sp.start):.1f}" y1="{TOP}" y2="{H - BOTTOM}" stroke="{c}" '
                 f'stroke-opacity="0.25"/>')
    for lp in loops(p):
        tip = esc(f"loop body {lp.name}: instructions {lp.start}..{lp.end - 1}")
        o.append(f'<rect x="{X(lp.start):.1f}" y="34" width="{(lp.end - lp.start) * cw:.1f}" height="10" fill="none" '
                 f'stroke="#000" data-tip="{tip}"><title>{tip}</title></rect>')
        o.append(f'<text x="{X(lp.start) + 2:.1f}" y="56" fill="#000">loop {esc(lp.name)}</text>')
    # Live ranges.
    for f, i, a_, b_, w in live_ranges(p):
        row = _row(f, i, acc)
        if row is None:
            continue
        if plan is not None:
            rname = plan.region_of(f, i)
            c = col(rname) if rname else UNPLANNED
            owner = rname or "unplanned"
        elif w is None:
            owner, c = "live-in", UNPLANNED
        else:
            # no plan: the writer's program region, or else the class of the writing instruction
            wi = p.stream[w]
            owner = "/".join(wi.region) if wi.region else f"written by {classify(wi)}"
            c = col(owner)
        legend.setdefault(owner, c)
        first = f"written #{w} {p.stream[w].text()}" if w is not None else "live-in"
        tip = esc(f"{f}{i} [{owner}]: {first}; last read #{b_} {p.stream[b_].text()}")
        o.append(f'<rect x="{X(a_):.1f}" y="{Y(row)}" width="{max(cw * 0.8, (b_ - a_ + 1) * cw):.1f}" '
                 f'height="{row_h}" fill="{c}" data-tip="{tip}"><title>{tip}</title></rect>')
    # Findings.
    for ci, pi, rule, msg in _finding_sites(p, findings):
        cons = p.stream[ci]
        shared = {r for r in cons.reads | cons.writes if r[0] in ("v", "a", "s")}
        if pi is not None:
            both = shared & set(p.stream[pi].writes)
            shared = both or shared
        rows = sorted(r for r in (_row(f, i, acc) for f, i in shared) if r is not None) or [0]
        tip = esc(f"{rule}: {msg}")
        if pi is not None:
            o.append(f'<line x1="{X(pi) + cw / 2:.1f}" x2="{X(ci) + cw / 2:.1f}" y1="{Y(rows[0])}" y2="{Y(rows[0])}" '
                     f'stroke="#d00" stroke-width="1.5"/>')
        for r in rows[:1] + rows[-1:]:
            o.append(f'<circle cx="{X(ci) + cw / 2:.1f}" cy="{Y(r) + row_h / 2}" r="4" fill="#d00" stroke="#fff" '
                     f'class="finding" data-tip="{tip}"><title>{tip}</title></circle>')
        legend.setdefault("checker finding", "#d00")
    # Axis.
    step = max(1, int(50 / cw))
    for i in range(0, n, step):
        o.append(f'<text x="{X(i):.1f}" y="{H - 8}" fill="#666">{i}</text>')
    o.append("</svg>")
    return "\n".join(o), legend


def to_svg(x, findings=None, *, row_h: int = 2, max_width: int = 1400) -> str:
    """A standalone SVG register map of a Kernel, Program, .co, .s or .py."""
    return _svg(as_program(x), findings, row_h, max_width)[0]


_JS = """
const tip = document.getElementById('tip');
document.querySelectorAll('[data-tip]').forEach(e => {
  e.addEventListener('mousemove', ev => { tip.textContent = e.dataset.tip; tip.style.display = 'block';
    tip.style.left = (ev.pageX + 12) + 'px'; tip.style.top = (ev.pageY + 12) + 'px'; });
  e.addEventListener('mouseleave', () => { tip.style.display = 'none'; });
});
"""


def to_html(x, findings=None, *, row_h: int = 2, max_width: int = 1400) -> str:
    """A self-contained HTML page: title, legend, the SVG and a hover box (no external files)."""
    p = as_program(x)
    svg, legend = _svg(p, findings, row_h, max_width)
    nf = len(_finding_sites(p, findings))
    items = "".join(f'<span class="key"><i style="background:{c}"></i>{html.escape(n)}</span>' for n, c in legend.items())
    d = p.descriptor
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>register map: {html.escape(p.name)}</title>
<style>
body {{ font: 13px sans-serif; margin: 12px; }}
.key {{ margin-right: 14px; white-space: nowrap; }} .key i {{ display: inline-block; width: 12px; height: 12px;
  margin-right: 4px; vertical-align: middle; }}
#tip {{ position: absolute; display: none; background: #222; color: #fff; padding: 4px 6px; font: 12px monospace;
  max-width: 700px; pointer-events: none; }}
</style></head><body>
<h3>register map: {html.escape(p.name)}</h3>
<p>{len(p.stream)} instructions; next_free_vgpr {d.get('next_free_vgpr')}, accum_offset {d.get('accum_offset')},
SGPRs {d.get('next_free_sgpr')}; plan: {html.escape(getattr(p.plan, 'name', None) or 'none')}; {nf} checker finding(s).
Rows: v0..v511 (AGPRs from accum_offset), then s0..s105; columns: instruction index; bars: live ranges.</p>
<p>{items}</p>
{svg}
<div id="tip"></div>
<script>{_JS}</script>
</body></html>
"""
