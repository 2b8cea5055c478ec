"""benchmarks/flydsl_launch.py: the kernarg of every FlyDSL kernel state, packed where the metadata says.

What FlyDSL's host passes, per kernel state, stated here from its launchers (flash_attn_gfx950.py's
_launch at each commit; #629's generic kernel: flash_attn_generic.py's launch_flash_attn_generic, on
BSHD tensors flattened to 1-D as #629's benchmark calls it): Q, K, V their own tensors, every other
tensor slot O; the i32 values in the kernel's parameter order. pack() must put each where the metadata's .args put it, whatever the offsets;
a layout of no known kernel state is a FlydslLaunchError.
"""
from __future__ import annotations

import struct
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import flydsl_build as FB  # noqa: E402
import flydsl_launch as FL  # noqa: E402

from flyasm.codeobj.reader import read_code_object  # noqa: E402

PTR = {"q": 0x7E00_0000_1000, "k": 0x7E01_0000_2000, "v": 0x7E02_0000_3000, "o": 0x7E03_0000_4000}
B, S, SKV, H, HKV, D = 3, 300, 420, 16, 4, 128


def host_ints(n_ints: int, s: int, skv: int) -> list[int]:
    """The i32 values FlyDSL's host passes, by how many the kernel takes: #629's generic kernel seq_len
    only; #629..#693 (seq_len, strides, head_dim); #704 and #711 add seq_len_kv; #758..#844
    block_table_stride = 0; #960 on the bias and alibi strides = 0."""
    if n_ints == 1:
        return [s]
    base = [s, H * D, HKV * D, D] if n_ints == 4 else [s, skv, H * D, HKV * D, D]
    return base + [0] * (n_ints - len(base))


def synthetic_md(n_slots: int, n_ints: int, gap: int, rank: int = 4) -> dict:
    """Metadata of n_slots tensor slots (rank-`rank` descriptors) and n_ints i32 values, each followed by
    `gap` unused bytes (FlyDSL's own have none: the offsets must come from the metadata), then a COV5
    hidden block count."""
    args, at, desc = [], 0, 4 * rank + 8 * (rank - 1)
    for _ in range(n_slots):
        args += [{".offset": at, ".size": 8, ".value_kind": "global_buffer", ".address_space": "global"},
                 {".offset": at + 8, ".size": desc, ".value_kind": "by_value"}]
        at += 8 + desc + gap
    for _ in range(n_ints):
        args.append({".offset": at, ".size": 4, ".value_kind": "by_value"})
        at += 4 + gap
    args.append({".offset": at, ".size": 4, ".value_kind": "hidden_block_count_x"})
    return {".args": args, ".kernarg_segment_size": at + 8}


def check_packed(md: dict, buf: bytes, s: int, skv: int) -> None:
    """Every argument of md decoded from buf is what FlyDSL's host passes."""
    args = md[".args"]
    assert len(buf) == md[".kernarg_segment_size"]
    ptrs = [a[".offset"] for a in args if a[".value_kind"] == "global_buffer"]
    descs = {a[".offset"]: a[".size"] for a in args if a[".value_kind"] == "by_value"}
    ints = [a[".offset"] for a in args if a[".value_kind"] == "by_value" and a[".size"] == 4 and a[".offset"] - 8 not in ptrs]
    own = {0: ("q", s, H), 1: ("k", skv, HKV), 2: ("v", skv, HKV)}
    for i, at in enumerate(ptrs):
        name, rows, heads = own.get(i, ("o", s, H))
        if descs[at + 8] == 4:           # rank 1: BSHD flattened, its element count
            ptr, *rest = struct.unpack_from("<Qi", buf, at)
            want = [B * rows * heads * D]
        else:
            ptr, *rest = struct.unpack_from("<Q4i3q", buf, at)
            want = [B, rows, heads, D, rows * heads * D, heads * D, D]
        assert ptr == PTR[name], (i, hex(ptr))
        assert rest == want, (i, rest)
    assert [struct.unpack_from("<i", buf, at)[0] for at in ints] == host_ints(len(ints), s, skv)
    for a in args:
        if a[".value_kind"] == "hidden_block_count_x":
            assert struct.unpack_from("<I", buf, a[".offset"])[0] == H         # grid x = heads


def seqlen_for(lay) -> int:
    """A seqlen the layout's kernel takes: S, or whole tiles for #629's dual-wave kernel, or a multiple of
    128 for its generic kernel."""
    if (len(lay.slots), len(lay.scalars)) in FL.WHOLE_TILES_ONLY:
        return 512
    return 384 if lay.rank == 1 else S


@pytest.mark.parametrize("n_slots,n_ints", sorted(FL.LAYOUTS))
def test_pack_puts_every_field_where_the_metadata_says(monkeypatch, n_slots, n_ints):
    md = synthetic_md(n_slots, n_ints, gap=8, rank=FL.SLOT_RANK.get((n_slots, n_ints), 4))
    lay = FL.layout_of(md)
    assert [n for n, _ in lay.slots][:4] == ["Q", "K", "V", "O"] and len(lay.scalars) == n_ints
    monkeypatch.setattr(FL, "kernarg_layout", lambda co: FL.layout_of(md))
    has_skv = "seq_len_kv" in dict(lay.scalars)
    s = seqlen_for(lay)
    skv = SKV if has_skv else s
    check_packed(md, FL.pack(b"", PTR, B, s, H, HKV, D, skv), s, skv)
    if not has_skv:                    # one seqlen for Q and KV: a cross-length call cannot be served
        with pytest.raises(FL.FlydslLaunchError, match="one seqlen"):
            FL.pack(b"", PTR, B, s, H, HKV, D, SKV)
    if s != S:                         # #629's kernels: whole 256-row tiles, or a multiple of 128 rows
        with pytest.raises(FL.FlydslLaunchError, match="(whole 256-row tiles|divisible by 128), not 300"):
            FL.pack(b"", PTR, B, S, H, HKV, D, S)


def real_builds() -> list[Path]:
    """The shipped code objects and the older kernel states built here (flydsl_build's cache)."""
    found = sorted(FL.CO_DIR.glob("*.co")) if FL.CO_DIR.is_dir() else []
    return found + (sorted(FB.CACHE.glob("*@*.co")) if FB.CACHE.is_dir() else [])


@pytest.mark.skipif(not real_builds(), reason="no FlyDSL code object here (../shared absent, nothing built)")
def test_pack_of_each_real_build_follows_its_metadata():
    keys = set()
    for path in real_builds():
        co = path.read_bytes()
        md = read_code_object(co).kernel(FL.kernel_of(co)).metadata
        lay = FL.kernarg_layout(co)
        keys.add((len(lay.slots), len(lay.scalars)))
        s = seqlen_for(lay)
        skv = SKV if "seq_len_kv" in dict(lay.scalars) else s
        check_packed(md, FL.pack(co, PTR, B, s, H, HKV, D, skv), s, skv)
    print(f"\n{len(real_builds())} builds, layouts {sorted(keys)}")
    assert keys <= set(FL.LAYOUTS)


@pytest.mark.parametrize("md,why", [
    (synthetic_md(6, 3, 0), "takes 6 tensor slots and 3 i32 arguments"),
    ({".args": [{".offset": 0, ".size": 8, ".value_kind": "global_buffer"},
                {".offset": 8, ".size": 8, ".value_kind": "global_buffer"}], ".kernarg_segment_size": 16},
     "without FlyDSL's shape/stride descriptor"),
    (synthetic_md(4, 1, 0, rank=4), "takes 4 tensor slots of rank 4, not 1"),
    ({".args": synthetic_md(5, 4, 0)[".args"][:10] + [{".offset": 240, ".size": 8, ".value_kind": "by_value"}],
      ".kernarg_segment_size": 248}, "other than i32 values"),
])
def test_an_unknown_layout_is_one_error_sentence(md, why):
    with pytest.raises(FL.FlydslLaunchError, match=why) as e:
        FL.layout_of(md)
    assert str(e.value).count(". ") == 0 and "\n" not in str(e.value)
