"""The README's kernel example builds, and its inclusive-range promise holds."""
import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_kernel_builds(tmp_path):
    code = re.search(r"```python\n(.*?)```", README.read_text(), re.S).group(1)
    ns: dict = {}
    exec(compile(code, str(README), "exec"), ns)
    k = ns["build"]()
    res = k.build(tmp_path)
    assert res.co_path.read_bytes()[:4] == b"\x7fELF"
    assert "global_load_dword v2, v1, s[6:7]" in res.asm


def test_inclusive_ranges():
    from flyasm import v, s
    assert len(v[32:95]) == 64 and len(s[63:67]) == 5
    S = v[32:95]
    assert str(S[0:15]) == "v[32:47]" and str(S[63]) == "v95"
