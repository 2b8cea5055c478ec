"""The flyasm command: build, asm, disasm, info, doctor, and errors as one red line, exit 2."""
from __future__ import annotations

import json
import textwrap

from click.testing import CliRunner

from flyasm.cli import main
from flyasm.codeobj.reader import read_code_object

KERNEL_PY = textwrap.dedent('''
    from flyasm.kernel import Kernel
    from flyasm.isa.operands import v, s, Waitcnt

    def build(n_add=1, name="cli_k"):
        k = Kernel(name, block=64)
        p = k.arg("p", "ptr")
        k.s_load_dwordx2(s[4:5], k.kernarg_ptr, p.offset)
        for _ in range(n_add):
            k.v_add_u32(v[1], 1, v[1])
        k.s_endpgm()
        return k

    def other():
        return 42
''')


def _run(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_help_on_every_command():
    r = _run("--help")
    assert r.exit_code == 0
    for cmd in ("build", "asm", "disasm", "info", "doctor"):
        assert cmd in r.output
        rc = _run(cmd, "--help")
        assert rc.exit_code == 0 and "Usage:" in rc.output and len(rc.output.splitlines()) > 3


def test_build_asm_disasm_info(tmp_path):
    src = tmp_path / "kern.py"
    src.write_text(KERNEL_PY)
    out = tmp_path / "out"
    r = _run("build", f"{src}:build", "-p", "n_add=3", "-p", "name=cli_k3", "-o", str(out))
    assert r.exit_code == 0, r.output
    co_path, s_path, j_path = out / "cli_k3.co", out / "cli_k3.s", out / "cli_k3.json"
    assert co_path.exists() and s_path.exists()
    info = json.loads(j_path.read_text())
    assert info["name"] == "cli_k3" and info["args"][0]["name"] == "p" and info["descriptor"]["kernarg_size"] == 16
    assert s_path.read_text().count("v_add_u32") == 3
    # disasm -> asm gives back the same bytes
    r = _run("disasm", str(co_path), "-o", str(tmp_path / "d.s"))
    assert r.exit_code == 0, r.output
    r = _run("asm", str(tmp_path / "d.s"), "-o", str(tmp_path / "d.co"))
    assert r.exit_code == 0, r.output
    a, b = read_code_object(co_path), read_code_object(tmp_path / "d.co")
    assert a.text == b.text and a.kernels[0].descriptor.raw == b.kernels[0].descriptor.raw and a.metadata == b.metadata
    r = _run("info", str(co_path))
    assert r.exit_code == 0 and "kernel cli_k3" in r.output and "kernarg 16 B" in r.output
    r = _run("info", "--json", str(co_path))
    j = json.loads(r.output)
    assert j["kernels"][0]["name"] == "cli_k3" and j["kernels"][0]["descriptor"]["accum_offset"] == 4
    assert j["kernels"][0]["args"][0]["value_kind"] == "global_buffer"


def test_doctor():
    r = _run("doctor")
    assert r.exit_code == 0 and "llvm-mc" in r.output and "msgpack" in r.output


def _err(*args):
    r = CliRunner().invoke(main, list(args))
    assert r.exit_code == 2, (r.exit_code, r.output)
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in r.output
    return lines[0]


def test_errors_are_one_line(tmp_path):
    src = tmp_path / "kern.py"
    src.write_text(KERNEL_PY)
    assert "does not exist" in _err("build", str(tmp_path / "nope.py"), "-o", str(tmp_path))
    assert "no function 'missing'" in _err("build", f"{src}:missing", "-o", str(tmp_path))
    assert "not a Kernel" in _err("build", f"{src}:other", "-o", str(tmp_path))
    assert "key=value" in _err("build", str(src), "-p", "oops", "-o", str(tmp_path))
    junk = tmp_path / "junk.co"
    junk.write_bytes(b"\x7fELF" + b"\x00" * 10)
    assert "junk.co" in _err("info", str(junk)) or "ELF" in _err("info", str(junk))
    assert "ELF" in _err("disasm", str(junk))
    bad = tmp_path / "bad.s"
    bad.write_text("k:\n\tv_frobnicate v1\n")
    assert "llvm-mc" in _err("asm", str(bad))
    # a .s that is not UTF-8 (a Latin-1 comment): the file, its line and the first bad byte, for every
    # command that reads .s text
    latin = tmp_path / "latin.s"
    latin.write_bytes(b"\t.text\n\ts_nop 0 ; caf\xe9\n\ts_endpgm\n")
    for cmd in (["asm"], ["check"], ["stats"], ["plan"], ["lift"], ["diff", str(latin)]):
        line = _err(*cmd, str(latin))
        assert line.endswith("latin.s:2: not UTF-8 text (byte 0xe9 at offset 21)"), (cmd, line)
