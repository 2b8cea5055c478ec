"""FlyDSL's launch of its gfx950 attention forward (`flash_attn_dualwave_swp_gfx950_kernel_0`, the code
objects of ../shared/flydsl/gfx950), as FlyDSL's host code does it (../shared/flydsl/README.md, from
FlyDSL's host IR and kernels/attention/flash_attn_gfx950.py), and its measured rows -> launches for
the timing model, in the shape of aiter_launch.row_launch.

The launch: grid (H, ceil(S/256), B) (x = head: head-fast), block 512. Kernarg: 12 tensor slots of 48
bytes (u64 pointer, i32 shape[4], i64 stride[3] in elements, torch order, the unit stride left out:
Q, K, V, O, then LSE and seven optional tensors, which a dense call without LSE fills with O's slot),
then eight i32 (seq_len, seq_len_kv, H*D, Hkv*D, D, 0, 0, 0): 608 bytes. A build whose metadata
declares COV5 hidden arguments (the XCD-mapping builds, 864 bytes) gets them filled from the grid
(hidden_block_count_x/y/z = the grid, group sizes = the block): which layout a .co takes is read
from its metadata, never from its file name.

Which workgroup runs which tile: the plain and causal builds run workgroup (x, y, z) as head x, Q tile
y (rows 256y..256y+255), batch z. The XCD-mapping builds re-derive it (FlyDSL's
_init_dualwave_thread_mapping): L = x + H*y, head = L // T, tile = L % T with T = grid y, so a head's
tiles are consecutive in dispatch order. `xcd_wg_map` is that bijection, for the model.
"""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "flydsl"
CO_DIR = SHARED / "gfx950"
KERNEL = "flash_attn_dualwave_swp_gfx950_kernel_0"
BLOCK_M = 256             # Q rows per workgroup (DUALWAVE_SWP_BLOCK_M)
BLOCK = 512               # 8 waves of 64
N_XCD = 8                 # gfx950's XCDs (flash_attn_utils.NUM_XCD_GFX950)
MIN_Q_BLOCKS_XCD = 64     # flash_attn_utils.MIN_Q_BLOCKS_XCD_SWIZZLE
SLOTS = ("q", "k", "v", "o", "lse", "debug_counts", "cu_seq_q", "cu_seq_kv", "block_table", "bias",
         "alibi_slopes", "sink")
SLOT_BYTES = 48
SCALARS_AT = len(SLOTS) * SLOT_BYTES          # 576
TRACE_SEQLEN = 1024       # a measured row is recorded at about this seqlen (batch 1), its loop scaled up


class FlydslLaunchError(LookupError):
    """A FlyDSL launch that the code objects here cannot serve."""


def build_name(H: int, S: int, causal: bool, Hkv: int | None = None, d: int = 128) -> str:
    """The code object FlyDSL's dispatch (flash_attn_interface: xcd_swizzle) runs for this call: the
    XCD-mapping build for non-causal calls with H % 8 == 0 and ceil(S/256) >= 64, else the plain one."""
    xcd = not causal and H % N_XCD == 0 and -(-S // BLOCK_M) >= MIN_Q_BLOCKS_XCD
    return co_name(H, causal, xcd, Hkv, d)


def co_name(H: int, causal: bool, xcd: bool, Hkv: int | None = None, d: int = 128) -> str:
    """The file name of a build (../shared/flydsl/build/compile_fa.py's naming)."""
    Hkv = Hkv or H
    return (f"fa_fwd_bf16_d{d}_{'causal' if causal else 'noncausal'}_h{H}" + (f"_hkv{Hkv}" if Hkv != H else "")
            + ("_xcdswz" if xcd else "") + ".co")


def grid(H: int, S: int, B: int) -> tuple[int, int, int]:
    return (H, -(-S // BLOCK_M), B)


def kernarg_layout(co: bytes) -> tuple[int, list]:
    """(kernarg segment size, hidden argument specs) from the code object's metadata."""
    from flyasm.codeobj.reader import read_code_object
    from flyasm.run.args import specs_from_metadata
    k = read_code_object(co).kernel(KERNEL)
    md = k.metadata or {}
    size = int(md.get(".kernarg_segment_size") or 0)
    if size < SCALARS_AT + 32:
        raise FlydslLaunchError(f"{KERNEL} declares a {size}-byte kernarg segment; FlyDSL's layout takes "
                                f"{SCALARS_AT + 32} bytes at least")
    hidden = [s for s in specs_from_metadata(md.get(".args", [])) if s.kind.startswith("hidden_")]
    return size, hidden


def pack(co: bytes, addrs: dict, B: int, S: int, H: int, Hkv: int, D: int = 128, Skv: int | None = None) -> bytes:
    """The kernarg bytes FlyDSL's host packs for a dense call, q/k/v/o [B, S, H(kv), D] contiguous;
    `addrs` = {"q", "k", "v", "o": device address}."""
    from flyasm.run.args import pack_args
    Skv = S if Skv is None else Skv
    size, hidden = kernarg_layout(co)
    g = grid(H, S, B)
    # hidden arguments first (pack_args fills block counts, group sizes and remainders), then ours
    buf = bytearray(pack_args(hidden, [], None, size, grid=g, block=(BLOCK, 1, 1)) if hidden else bytes(size))

    def slot(ptr, s, h):
        return struct.pack("<Q4i3q", ptr, B, s, h, D, s * h * D, h * D, D)
    tensors = {"q": slot(addrs["q"], S, H), "k": slot(addrs["k"], Skv, Hkv), "v": slot(addrs["v"], Skv, Hkv)}
    o = slot(addrs["o"], S, H)
    for i, name in enumerate(SLOTS):
        buf[i * SLOT_BYTES:(i + 1) * SLOT_BYTES] = tensors.get(name, o)     # no LSE: O fills the rest
    buf[SCALARS_AT:SCALARS_AT + 32] = struct.pack("<8i", S, Skv, H * D, Hkv * D, D, 0, 0, 0)
    return bytes(buf)


def has_xcd_mapping(co: bytes) -> bool:
    """The build reads the grid from COV5 hidden arguments: FlyDSL's XCD-mapping variant."""
    return any(s.kind == "hidden_block_count_y" for s in kernarg_layout(co)[1])


def xcd_wg_map(grid3, x, y, z):
    """Work item (head, tile, batch) of workgroup (x, y, z) in the XCD-mapping build: the linear id
    x + H*y read head-slow (FlyDSL's _init_dualwave_thread_mapping). Arrays in, arrays out."""
    H, T = grid3[0], grid3[1]
    lin = x + H * y
    return lin // T, lin % T, z


# ---- measured rows -> launches -------------------------------------------------------------------
def trace_seqlen(S: int) -> int:
    """The seqlen a row of seqlen S is recorded at: S itself up to TRACE_SEQLEN, else three full Q
    tiles and S's own last tile (so the recorded last tile, and the last key block, are as ragged
    as the real ones: 61380 -> 964)."""
    if S <= TRACE_SEQLEN:
        return S
    return TRACE_SEQLEN - BLOCK_M + (S - 1) % BLOCK_M + 1


def causal_keys(t, S: int, Skv: int):
    """Keys Q tile t sees under FlyDSL's top-left causal mask (query i sees keys j <= i)."""
    return np.minimum(Skv, (np.asarray(t, float) + 1) * BLOCK_M)


def row_launch(row: dict, idx: dict | None = None) -> dict:
    """Everything perf.predict needs for one measured FlyDSL row (the keys of aiter_launch.row_launch,
    plus tile_axis and wg_map): the row's code object (co_name, found in `idx` or ../shared/flydsl/
    gfx950; a row without one takes the build FlyDSL's dispatch picks) at the row's shape, recorded
    at batch 1, every head (the head count is compiled in, and the XCD-mapping build derives its
    tiles from it), seqlen trace_seqlen(S), its loop scaled.

    Which recorded workgroup stands for which real one. The tile axis is grid y (x is the head: all
    heads do the same work, so x needs no interpolation; z is the batch). The model samples work items
    along y at the first, middle and last tile (and the last head), interpolates linearly between
    them, and the last tile differs by its own sample. Sample tile t0 of the T0 recorded tiles stands
    for the real tiles at the same relative position t = t0 (T-1)/(T0-1); its loop scale is the keys
    real tile t sees over the keys recorded tile t0 saw: S/S0 for every tile non-causal; causal
    (top-left, so tile t sees (t+1)*256 keys, linear in t) min(Skv, 256(t+1)) / min(S0kv, 256(t0+1)),
    which makes the interpolated durations the causal triangle. The real last tile is ragged as the
    recorded one is (trace_seqlen). For the XCD-mapping build the work items are its (head, tile,
    batch) and wg_map (xcd_wg_map) tells the model which workgroup runs which item: the samples are
    recorded at the workgroups that run them, and dispatch order is the hardware's (x fastest)."""
    B, H, Hkv = int(row["batch"]), int(row["nhead_q"]), int(row["nhead_k"])
    S, Skv, D = int(row["seqlen_q"]), int(row["seqlen_k"]), int(row["hdim_q"])
    causal = int(row["mask"]) != 0
    name = row.get("co_name") or build_name(H, S, causal, Hkv, D)     # none named: the one FlyDSL picks
    if idx and name in idx:
        path = Path(idx[name][0])
    else:                           # shipped, built before, or built now (flydsl_build says what it needs)
        import flydsl_build
        xcd = name.endswith("_xcdswz.co")
        path = flydsl_build.find(name)
        if path is None and name != co_name(H, causal, xcd, Hkv, D):      # never price another build instead
            raise FlydslLaunchError(f"no FlyDSL code object {name!r}, and it is not the build of this row's "
                                    f"heads and mask ({co_name(H, causal, xcd, Hkv, D)})")
        path = path or flydsl_build.build(H, Hkv, causal, xcd)
    co = path.read_bytes()
    if int(row.get("hdim_v") or D) != D or int(row.get("mode") or 0) != 0 or row.get("dtype", "bf16") != "bf16":
        raise FlydslLaunchError(f"{name}: FlyDSL's dense bf16 forward takes hdim_q = hdim_v and batch mode")
    S0, S0kv = trace_seqlen(S), trace_seqlen(Skv)
    g, tg = grid(H, S, B), grid(H, S0, 1)
    T, T0 = g[1], tg[1]
    bufs = {"q": S0 * H * D * 2, "k": S0kv * Hkv * D * 2, "v": S0kv * Hkv * D * 2, "o": S0 * H * D * 2}

    def ka(a):
        return pack(co, a, 1, S0, H, Hkv, D, S0kv)
    if causal:
        def scale(rel):
            return float(causal_keys(rel * (T - 1), S, Skv) / causal_keys(round(rel * (T0 - 1)), S0, S0kv))
    else:
        scale = Skv / S0kv
    flops = 4.0 * B * H * S * Skv * D * (0.5 if causal else 1.0)
    dram = 2 * B * (2 * S * H * D + 2 * Skv * Hkv * D)
    def full_ka(a):
        return pack(co, a, B, S, H, Hkv, D, Skv)
    probe = {"kernarg": full_ka, "buffers": {"q": B * S * H * D * 2, "k": B * Skv * Hkv * D * 2,
                                             "v": B * Skv * Hkv * D * 2, "o": B * S * H * D * 2}}
    return dict(co=co, kernel=KERNEL, grid=g, block=BLOCK, trace_grid=tg, kernarg=ka, buffers=bufs,
                loop_scale=scale, dram_bytes=dram, flops=flops, group=f"s{S}", tile_axis=1,
                wg_map=xcd_wg_map if has_xcd_mapping(co) else None, probe=probe)
