"""Register-map picture: live ranges, finding markers, and a headless-Chromium render."""
from __future__ import annotations

import html
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

import pytest

from flyasm import Kernel, a, s, v
from flyasm.check.hazards import check_hazards
from flyasm.plan import RegisterPlan
from flyasm.report.program import as_program
from flyasm.report.regmap import live_ranges, to_html, to_svg

ROOT = Path(__file__).resolve().parents[1]


def demo() -> Kernel:
    plan = RegisterPlan("demo", regions={"tid": v[0:0], "A": v[4:7], "B": v[8:11], "C": v[16:31], "tmp": v[40:47],
                                         "ptr": s[4:5], "cnt": s[6:6], "acc": a[0:15]}, accum_offset=64)
    k = Kernel("demo", block=256, plan=plan)
    with k.region("prologue"):
        k.s_load_dwordx2(s[4:5], k.kernarg_ptr, 0)
        k.s_mov_b32(s[6], 8)
        k.v_mov_b32(v[4], 0)
        k.s_waitcnt(lgkmcnt=0)
    k.label("loop")
    with k.region("loop"):
        k.v_mfma_f32_32x32x16_bf16(v[16:31], v[4:7], v[8:11], v[16:31])
        k.v_add_f32(v[40], v[16], v[17])      # XDL result read too early: a checker finding
        k.v_accvgpr_write_b32(a[0], v[40])
        k.s_sub_u32(s[6], s[6], 1)
        k.s_cmp_lg_u32(s[6], 0)
        k.s_cbranch_scc1(k.L("loop"))
    k.s_endpgm()
    return k


def test_live_ranges():
    lr = {(f, i): (s_, e, w) for f, i, s_, e, w in live_ranges(as_program(demo()))}
    assert lr[("v", 40)] == (5, 6, 5)         # written by v_add (#5), last read by v_accvgpr_write (#6)
    assert lr[("v", 16)] == (4, 5, 4)         # MFMA D at #4, read at #5 (the read of C at #4 came first: live-in)
    assert lr[("s", 6)] == (7, 8, 7)          # the last write wins: s_sub at #7, read by s_cmp at #8
    assert ("v", 41) not in lr


def test_svg_marks_findings_and_regions():
    k = demo()
    findings = [f for f in check_hazards(as_program(k).items()) if f.rule == "xdl_write_valu_read"]
    assert findings
    svg = to_svg(k, findings)
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert len(re.findall(r'class="finding"', svg)) == 2 * len(findings)
    assert "xdl_write_valu_read" in svg
    assert "region prologue" in svg and "loop body .Lloop" in svg and "plan region C = v[16:31]" in svg
    assert to_svg(k).count('class="finding"') == 0


def _png_pixels(data: bytes):
    """Decode an 8-bit RGB/RGBA non-interlaced PNG (what Chromium writes) into rows of bytes."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, typ = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if typ == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and ctype in (2, 6)
            bpp = 3 if ctype == 2 else 4
        elif typ == b"IDAT":
            idat += body
        pos += 12 + n
    raw, stride, rows, prev = zlib.decompress(idat), w * bpp, [], bytearray(w * bpp)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            left = line[x - bpp] if x >= bpp else 0
            up, ul = prev[x], (prev[x - bpp] if x >= bpp else 0)
            if f == 1:
                line[x] = (line[x] + left) & 255
            elif f == 2:
                line[x] = (line[x] + up) & 255
            elif f == 3:
                line[x] = (line[x] + (left + up) // 2) & 255
            elif f == 4:
                p = left + up - ul
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - ul)
                line[x] = (line[x] + (left if pa <= pb and pa <= pc else up if pb <= pc else ul)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows


def test_chromium_renders_a_nonblank_picture():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    k = demo()
    findings = check_hazards(as_program(k).items())
    with tempfile.TemporaryDirectory() as d:
        page, shot = Path(d) / "map.html", Path(d) / "map.png"
        page.write_text(to_html(k, findings))
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                        "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={d}/profile",
                        f"--screenshot={shot}", "--window-size=1200,700", page.as_uri()],
                       capture_output=True, timeout=600)
        w, h, bpp, rows = _png_pixels(shot.read_bytes())
    assert (w, h) == (1200, 700)
    colours = {r[x:x + 3] for r in rows[::4] for x in range(0, w * bpp, bpp * 4)}
    red = sum(1 for r in rows for x in range(0, w * bpp, bpp) if r[x] > 200 and r[x + 1] < 40 and r[x + 2] < 40)
    assert len(colours) > 20      # region colours, bars, text: not a blank page
    assert red > 10               # the finding markers are drawn


# ---- legibility: small, medium and flagship kernels, measured in the page by Chromium ----------
MEASURE = """<script>
const out = {};
for (const f of ['v', 'a', 's']) {
  const b = document.querySelector(`.tab[data-file="${f}"]`);
  if (!b || b.disabled) continue;
  b.click();
  const view = document.querySelector(`.view[data-file="${f}"]`);
  out[f] = {
    shown: getComputedStyle(view).display,
    texts: [...view.querySelectorAll('text')].map(t => { const r = t.getBoundingClientRect();
      return [r.left, r.top, r.right, r.bottom, t.firstChild ? t.firstChild.textContent : '']; }),
    used: [...view.querySelectorAll('rect.row')].map(r => [r.dataset.reg, r.getBoundingClientRect().height]),
    rows: view.querySelectorAll('rect[data-reg]').length,
  };
}
const pre = document.createElement('pre'); pre.id = 'measure'; pre.textContent = JSON.stringify(out);
document.body.appendChild(pre);
</script></body>"""


def small8() -> Kernel:
    """8 VGPRs, one-register plan regions with long names (labels that would collide), 6 SGPRs."""
    plan = RegisterPlan("small8", regions={"thread_id": v[0:0], "row_index": v[1:1], "column_index": v[2:2],
                                           "value_a": v[3:3], "value_b": v[4:5], "scratch": v[6:7],
                                           "ptr": s[4:5], "n": s[6:6]})
    k = Kernel("small8", block=64, plan=plan)
    with k.region("setup"):
        k.s_load_dwordx2(s[4:5], k.kernarg_ptr, 0)
        k.s_mov_b32(s[6], 4)
        k.v_lshlrev_b32(v[1], 2, v[0])
        k.v_mov_b32(v[2], 1)
        k.s_waitcnt(lgkmcnt=0)
    with k.region("body"):
        for i in range(6):
            k.v_add_u32(v[3], v[1], v[2])
            k.v_mov_b32(v[4], v[3])
            k.v_mov_b32(v[5], v[4])
            k.v_pk_add_f32(v[6:7], v[4:5], v[4:5])
    k.s_endpgm()
    return k


def _medium():
    sys.path.insert(0, str(ROOT / "kernels"))
    import gemm_bf16
    return gemm_bf16.build()


def _flagship():
    sys.path.insert(0, str(ROOT / "kernels"))
    import fa_fwd
    return fa_fwd.build()


def _chromium(args, timeout=600):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed (tools/setup.sh installs it)")
    with tempfile.TemporaryDirectory() as d:
        r = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                            "--disable-component-update", "--disable-sync", "--no-first-run",
                            f"--user-data-dir={d}/profile", *args], capture_output=True, timeout=timeout, text=True)
    return r.stdout


def _overlaps(boxes):
    """Pairs of text boxes that share more than half a pixel in both directions."""
    bad = []
    for i, a_ in enumerate(boxes):
        for b_ in boxes[i + 1:]:
            if min(a_[2], b_[2]) - max(a_[0], b_[0]) > 0.5 and min(a_[3], b_[3]) - max(a_[1], b_[1]) > 0.5:
                bad.append((a_[4], b_[4]))
    return bad


@pytest.mark.parametrize("make,vgprs", [(small8, 8), (_medium, 64),
                                        pytest.param(_flagship, 256, marks=pytest.mark.slow)],
                         ids=["small8", "gemm", "fa_fwd"])
def test_register_map_is_legible(make, vgprs, tmp_path):
    import json
    k = make()
    prog = as_program(k)
    page = tmp_path / f"{k.name}.html"
    page.write_text(to_html(prog, check_hazards(prog.items())).replace("</body>", MEASURE))
    dom = _chromium(["--dump-dom", page.as_uri()])
    m = re.search(r'<pre id="measure">(.*?)</pre>', dom, re.S)
    assert m, dom[-500:]
    views = json.loads(html.unescape(m.group(1)))
    used = {f for f, _ in ((r[0], r[1]) for ins in prog.stream for r in ins.reads | ins.writes) if f in "vas"}
    assert set(views) == used                             # a tab per register file in use, one click each
    assert views["v"]["rows"] == vgprs                    # v0 .. the highest VGPR used, not v0..v511
    for f, view in views.items():
        assert view["shown"] == "block"                   # clicking the tab showed it
        assert view["used"] and min(h for _, h in view["used"]) >= 3, (f, min(view["used"], key=lambda x: x[1]))
        labels = [t for t in view["texts"] if t[2] > t[0]]
        assert len(labels) > 5 and not _overlaps(labels), (f, _overlaps(labels)[:5])
    shots = Path(os.environ.get("FLYASM_REGMAP_SHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    shot = shots / f"{k.name}.png"
    _chromium([f"--screenshot={shot}", "--window-size=1400,900", page.as_uri()])
    w, h, bpp, rows = _png_pixels(shot.read_bytes())
    assert (w, h) == (1400, 900) and len({r[x:x + 3] for r in rows[::8] for x in range(0, w * bpp, bpp * 8)}) > 8
