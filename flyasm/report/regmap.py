"""The register-map picture: registers down, program position across.

One view per register file (VGPR, AGPR, SGPR), each showing rows 0 .. the highest register the
kernel uses or its plan allocates (v0..v511 only when used), tall enough to read: 3..14 pixels
per row. Columns are instruction indices. Each row's background is its plan region (grey
'unplanned' for touched registers outside the plan);
bars are live ranges, from a write to the last read before the next write (a read with no
earlier write starts at the left edge: live-in). Bars take the plan region's colour, or, without
a plan, the colour of the program region that wrote the register (or of the writer's
instruction class when it has no region). Checker findings are red
markers at the consumer, on the registers it shares with the producer, joined to the producer by
a red line. Program regions and loop bodies are drawn along the top.

Labels never overlap: row numbers every 1/2/4/.. rows as the row height allows, plan-region names
pushed down (with a leader line) when regions are thinner than a label, region and loop names
along the top only where they fit, axis numbers spaced by their width.

The order is the stream order; live ranges do not follow loop back edges.
`to_svg` gives a standalone SVG (the three views stacked; tooltips as <title>); `to_html` a
self-contained page with VGPR/AGPR/SGPR tabs, zoom buttons, a legend and a hover box.

Bound: live ranges one pass, O(I × registers per instruction); the picture O(ranges) plus the
greedy lanes of regions and loops, O(spans × lanes).
"""
from __future__ import annotations

import html

from .program import Program, as_program, loops
from .stats import classify

FILES = (("v", "VGPR", 512), ("a", "AGPR", 256), ("s", "SGPR", 106))
TOP_LANE = 13       # px per lane of region / loop names along the top
RIGHT, BOTTOM = 16, 24
FONT_H = 13         # px between label baselines: a 10px monospace box is 11-12 px tall, plus a gap
CHAR_W = 6.2        # px per character of 10px monospace
MIN_ROW, MAX_ROW, FIT = 3, 14, 640
PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
           "#9c755f", "#86bcb6", "#d37295", "#a0cbe8", "#8cd17d", "#f1ce63", "#bab0ac", "#499894"]
UNPLANNED = "#9a9a9a"


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


def _touched(p: Program) -> set:
    out = set()
    for inst in p.stream:
        out |= {r for r in inst.reads | inst.writes if r[0] in ("v", "a", "s")}
    return out


def _planned(p: Program) -> dict:
    """(file, index) -> plan region name (the innermost: aliases after their parents)."""
    out = {}
    if p.plan is not None:
        for r in sorted(p.plan.regions.values(), key=lambda r: r.alias_of is not None):
            for i in r.reg.regs():
                out[(r.file, i)] = r.name
    return out


def _nice_step(px_per_unit: float, need_px: float) -> int:
    step = 1
    while step * px_per_unit < need_px:
        step *= 2
    return step


def _spread(wanted: list[float], height: float) -> list[float]:
    """Label y positions, each at least `height` below the previous one, as near the wanted ones."""
    out, last = [], None
    for y in wanted:
        y = y if last is None else max(y, last + height)
        out.append(y)
        last = y
    return out


def _lanes(spans) -> list[int]:
    """Greedy lane per span (start, end) so spans in one lane do not overlap."""
    ends, out = [], []
    for a_, b_ in spans:
        for k, e in enumerate(ends):
            if e <= a_:
                ends[k] = b_
                out.append(k)
                break
        else:
            ends.append(b_)
            out.append(len(ends) - 1)
    return out


def _view(p: Program, file: str, title: str, rows: int, findings, row_h: float, max_width: int, col) -> tuple:
    """One register file's picture: (svg text, width, height, legend)."""
    esc = lambda t: html.escape(str(t), quote=True)  # noqa: E731
    n = max(len(p.stream), 1)
    cw = max(1.0, min(24.0, max_width / n))
    plan_regions = [r for r in (p.plan.regions.values() if p.plan is not None else ()) if r.file == file]
    plan_regions.sort(key=lambda r: (r.reg.index, r.alias_of is not None))
    name_w = max([len(r.name) for r in plan_regions] + [0]) * CHAR_W
    num_w = len(f"{file}{rows - 1}") * CHAR_W
    LEFT = int(8 + num_w + 10 + name_w + 8)
    sp_lanes = [min(sp.name.count("/"), 2) for sp in p.regions]
    lp = loops(p)
    lp_lanes = _lanes([(x.start, x.end) for x in lp])
    n_lanes = (max(sp_lanes) + 1 if sp_lanes else 0) + (max(lp_lanes) + 1 if lp_lanes else 0)
    TOP = 22 + TOP_LANE * n_lanes
    X = lambda i: LEFT + i * cw  # noqa: E731
    Y = lambda r: TOP + r * row_h  # noqa: E731
    # plan names: wanted at their first row, pushed down so that none overlaps the one above
    ys = _spread([Y(r.reg.index) + (FONT_H - 2) for r in plan_regions], FONT_H)
    H = int(max(TOP + rows * row_h, (ys[-1] + 3) if ys else 0) + BOTTOM)
    W = int(LEFT + n * cw + RIGHT)
    legend: dict[str, str] = {}
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
         f'font-family="monospace" font-size="10" class="regmap view-{file}" data-file="{file}">',
         f'<rect x="0" y="0" width="{W}" height="{H}" fill="#ffffff"/>',
         f'<text x="4" y="12" fill="#000" font-weight="bold" class="lbl">{title} {file}0..{file}{rows - 1}</text>']
    planned = _planned(p)
    touched = _touched(p)
    for i in range(rows):
        rname = planned.get((file, i))
        used = (file, i) in touched
        fill = col(rname) if rname else ("#f0f0f0" if used else "#fafafa")
        op = "0.18" if rname else "1"
        cls = ' class="row"' if used else ""
        o.append(f'<rect{cls} data-reg="{file}{i}" x="{LEFT}" y="{Y(i):.2f}" width="{n * cw:.1f}" '
                 f'height="{row_h:.2f}" fill="{fill}" fill-opacity="{op}"/>')
    # row numbers every `step` rows, spaced by the label height
    step = _nice_step(row_h, FONT_H)
    for i in range(0, rows, step):
        o.append(f'<text x="4" y="{Y(i) + min(row_h, FONT_H) - 1:.2f}" fill="#666" class="lbl">{file}{i}</text>')
    for r, y in zip(plan_regions, ys):
        c = col(r.name)
        legend[r.name] = c
        tip = esc(f"plan region {r.name} = {r.reg}" + (f" (alias in {r.alias_of})" if r.alias_of else ""))
        want = Y(r.reg.index) + (FONT_H - 2)
        if y - want > 1:          # pushed down: a leader line back to the region's first row
            o.append(f'<line x1="{LEFT - 6}" x2="{LEFT}" y1="{y - 4:.2f}" y2="{Y(r.reg.index) + row_h / 2:.2f}" '
                     f'stroke="{c}"/>')
        o.append(f'<text x="{LEFT - 8}" y="{y:.2f}" text-anchor="end" fill="{c}" font-weight="bold" class="lbl" '
                 f'data-tip="{tip}">{esc(r.name)}<title>{tip}</title></text>')
    # program regions and loops along the top, names only where they fit
    base_lp = max(sp_lanes) + 1 if sp_lanes else 0
    for sp, lane in zip(p.regions, sp_lanes):
        y = 18 + TOP_LANE * lane
        c = col("region:" + sp.name)
        w = max(cw, (sp.end - sp.start) * cw)
        tip = esc(f"region {sp.name}: instructions {sp.start}..{sp.end - 1}")
        o.append(f'<rect x="{X(sp.start):.1f}" y="{y}" width="{w:.1f}" height="{TOP_LANE - 2}" fill="{c}" '
                 f'fill-opacity="0.35" stroke="{c}" data-tip="{tip}"><title>{tip}</title></rect>')
        label = sp.name.split("/")[-1]
        if len(label) * CHAR_W + 4 <= w:
            o.append(f'<text x="{X(sp.start) + 2:.1f}" y="{y + 9}" fill="#000" class="lbl">{esc(label)}</text>')
        o.append(f'<line x1="{X(sp.start):.1f}" x2="{X(sp.start):.1f}" y1="{TOP}" y2="{TOP + rows * row_h:.1f}" '
                 f'stroke="{c}" stroke-opacity="0.25"/>')
    for x, lane in zip(lp, lp_lanes):
        y = 18 + TOP_LANE * (base_lp + lane)
        w = (x.end - x.start) * cw
        tip = esc(f"loop body {x.name}: instructions {x.start}..{x.end - 1}")
        o.append(f'<rect x="{X(x.start):.1f}" y="{y}" width="{w:.1f}" height="{TOP_LANE - 2}" fill="none" '
                 f'stroke="#000" data-tip="{tip}"><title>{tip}</title></rect>')
        label = f"loop {x.name}"
        if len(label) * CHAR_W + 4 <= w:
            o.append(f'<text x="{X(x.start) + 2:.1f}" y="{y + 9}" fill="#000" class="lbl">{esc(label)}</text>')
    # live ranges
    plan = p.plan
    for f, i, a_, b_, w in live_ranges(p):
        if f != file or i >= rows:
            continue
        if plan is not None:
            rname = planned.get((f, i))
            c = col(rname) if rname else UNPLANNED
            owner = rname or "unplanned"
        elif w is None:
            owner, c = "live-in", UNPLANNED
        else:
            wi = p.stream[w]
            owner = "/".join(wi.region) if wi.region else f"written by {classify(wi)}"
            c = col(owner)
        legend.setdefault(owner, c)
        first = f"written #{w} {p.stream[w].text()}" if w is not None else "live-in"
        tip = esc(f"{f}{i} [{owner}]: {first}; last read #{b_} {p.stream[b_].text()}")
        o.append(f'<rect x="{X(a_):.1f}" y="{Y(i):.2f}" width="{max(cw * 0.8, (b_ - a_ + 1) * cw):.1f}" '
                 f'height="{row_h:.2f}" fill="{c}" data-tip="{tip}"><title>{tip}</title></rect>')
    # findings: drawn in the view of the first register the consumer shares with the producer
    for ci, pi, rule, msg in _finding_sites(p, findings):
        cons = p.stream[ci]
        shared = {r for r in cons.reads | cons.writes if r[0] in ("v", "a", "s")}
        if pi is not None:
            shared = (shared & set(p.stream[pi].writes)) or shared
        home = min((r for r in shared), default=("v", 0))[0] if shared else "v"
        if home != file:
            continue
        rs = sorted(i for f, i in shared if f == file and i < rows) or [0]
        tip = esc(f"{rule}: {msg}")
        if pi is not None:
            o.append(f'<line x1="{X(pi) + cw / 2:.1f}" x2="{X(ci) + cw / 2:.1f}" y1="{Y(rs[0]):.2f}" '
                     f'y2="{Y(rs[0]):.2f}" stroke="#d00" stroke-width="1.5"/>')
        for r in rs[:1] + rs[-1:]:
            o.append(f'<circle cx="{X(ci) + cw / 2:.1f}" cy="{Y(r) + row_h / 2:.2f}" r="4" fill="#d00" stroke="#fff" '
                     f'class="finding" data-tip="{tip}"><title>{tip}</title></circle>')
        legend.setdefault("checker finding", "#d00")
    # axis: numbers spaced by their own width
    step = _nice_step(cw, len(str(n)) * CHAR_W + 8)
    for i in range(0, n, step):
        o.append(f'<text x="{X(i):.1f}" y="{H - 8}" fill="#666" class="lbl">{i}</text>')
    o.append("</svg>")
    return "\n".join(o), W, H, legend


def _views(p: Program, findings, row_h, max_width) -> list[tuple]:
    """(file, title, svg, width, height, legend, rows) for each register file the kernel uses or plans."""
    used = _touched(p) | set(_planned(p))
    col = _Colours()
    out = []
    for f, title, limit in FILES:
        idx = [i for ff, i in used if ff == f and i < limit]
        if not idx:
            out.append((f, title, None, 0, 0, {}, 0))
            continue
        rows = max(idx) + 1
        rh = row_h if row_h is not None else max(MIN_ROW, min(MAX_ROW, FIT / rows))
        svg, w, h, legend = _view(p, f, title, rows, findings, rh, max_width, col)
        out.append((f, title, svg, w, h, legend, rows))
    return out


def to_svg(x, findings=None, *, row_h: float | None = None, max_width: int = 1400) -> str:
    """A standalone SVG register map of a Kernel, Program, .co, .s or .py: the VGPR, AGPR and SGPR
    views the kernel uses, stacked."""
    views = [v for v in _views(as_program(x), findings, row_h, max_width) if v[2]]
    W = max((v[3] for v in views), default=100)
    H = sum(v[4] for v in views) or 20
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}">']
    y = 0
    for v in views:
        o.append(v[2].replace("<svg ", f'<svg y="{y}" ', 1))
        y += v[4]
    o.append("</svg>")
    return "\n".join(o)


_JS = """
const tip = document.getElementById('tip');
document.querySelectorAll('[data-tip]').forEach(e => {
  e.addEventListener('mousemove', ev => { tip.textContent = e.dataset.tip; tip.style.display = 'block';
    tip.style.left = (ev.pageX + 12) + 'px'; tip.style.top = (ev.pageY + 12) + 'px'; });
  e.addEventListener('mouseleave', () => { tip.style.display = 'none'; });
});
let zoom = 1;
function show(f) {
  document.querySelectorAll('.view').forEach(d => d.style.display = d.dataset.file === f ? 'block' : 'none');
  document.querySelectorAll('.tab').forEach(b => b.classList.toggle('on', b.dataset.file === f));
}
function setZoom(z) {
  zoom = Math.max(0.25, Math.min(16, z));
  document.querySelectorAll('.view svg').forEach(s => {
    s.setAttribute('width', s.dataset.w * zoom); s.setAttribute('height', s.dataset.h * zoom); });
  document.getElementById('zoomlevel').textContent = Math.round(zoom * 100) + '%';
}
document.querySelectorAll('.tab').forEach(b => b.addEventListener('click', () => show(b.dataset.file)));
document.getElementById('zin').addEventListener('click', () => setZoom(zoom * 1.5));
document.getElementById('zout').addEventListener('click', () => setZoom(zoom / 1.5));
document.getElementById('zfit').addEventListener('click', () => setZoom(1));
show(document.querySelector('.tab:not([disabled])').dataset.file);
"""


def to_html(x, findings=None, *, row_h: float | None = None, max_width: int = 1400) -> str:
    """A self-contained HTML page: VGPR/AGPR/SGPR tabs, zoom, legend, hover box (no external files)."""
    p = as_program(x)
    views = _views(p, findings, row_h, max_width)
    nf = len(_finding_sites(p, findings))
    legend: dict[str, str] = {}
    for v in views:
        legend.update(v[5])
    items = "".join(f'<span class="key"><i style="background:{c}"></i>{html.escape(n)}</span>' for n, c in legend.items())
    tabs = "".join(f'<button class="tab" data-file="{f}"{"" if svg else " disabled"}>{t} '
                   f'({rows if svg else "none"})</button>' for f, t, svg, w, h, lg, rows in views)
    divs = "".join(f'<div class="view" data-file="{f}">{svg.replace("<svg ", f"<svg data-w={w} data-h={h} ", 1)}</div>'
                   for f, t, svg, w, h, lg, rows in views if svg)
    d = p.descriptor
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>register map: {html.escape(p.name)}</title>
<style>
body {{ font: 13px sans-serif; margin: 12px; }}
.key {{ margin-right: 14px; white-space: nowrap; }} .key i {{ display: inline-block; width: 12px; height: 12px;
  margin-right: 4px; vertical-align: middle; }}
.tab {{ font: 13px sans-serif; padding: 3px 10px; }} .tab.on {{ background: #333; color: #fff; }}
.view {{ overflow: auto; max-height: 85vh; border: 1px solid #ddd; }}
#tip {{ position: absolute; display: none; background: #222; color: #fff; padding: 4px 6px; font: 12px monospace;
  max-width: 700px; pointer-events: none; }}
</style></head><body>
<h3>register map: {html.escape(p.name)}</h3>
<p>{len(p.stream)} instructions; next_free_vgpr {d.get('next_free_vgpr')}, accum_offset {d.get('accum_offset')},
SGPRs {d.get('next_free_sgpr')}; plan: {html.escape(getattr(p.plan, 'name', None) or 'none')}; {nf} checker finding(s).
Rows: registers up to the highest one used or planned; columns: instruction index; bars: live ranges.</p>
<p>{tabs} &nbsp; zoom <button id="zout">&minus;</button> <span id="zoomlevel">100%</span>
<button id="zin">+</button> <button id="zfit">fit</button></p>
<p>{items}</p>
{divs}
<div id="tip"></div>
<script>{_JS}</script>
</body></html>
"""
