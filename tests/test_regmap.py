"""Register-map picture: live ranges, finding markers, and a headless-Chromium render."""
from __future__ import annotations

import re
import shutil
import struct
import subprocess
import tempfile
import zlib
from pathlib import Path

import pytest

from flyasm import Kernel, a, s, v
from flyasm.check.hazards import check_hazards
from flyasm.plan import RegisterPlan
from flyasm.report.program import as_program
from flyasm.report.regmap import live_ranges, to_html, to_svg


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
                       capture_output=True, timeout=120)
        w, h, bpp, rows = _png_pixels(shot.read_bytes())
    assert (w, h) == (1200, 700)
    colours = {r[x:x + 3] for r in rows[::4] for x in range(0, w * bpp, bpp * 4)}
    red = sum(1 for r in rows for x in range(0, w * bpp, bpp) if r[x] > 200 and r[x + 1] < 40 and r[x + 2] < 40)
    assert len(colours) > 20      # region colours, bars, text: not a blank page
    assert red > 10               # the finding markers are drawn
