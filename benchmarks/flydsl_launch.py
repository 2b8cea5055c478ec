"""FlyDSL's launch of its gfx950 attention forward (`flash_attn_dualwave_swp_gfx950_kernel_0`, the code
objects of ../shared/flydsl/gfx950), as FlyDSL's host code does it (../shared/flydsl/README.md, from
FlyDSL's host IR and kernels/attention/flash_attn_gfx950.py), and its measured rows -> launches for
the timing model, in the shape of aiter_launch.row_launch.

The launch: grid (H, ceil(S/256), B) (x = head: head-fast), block 512. Kernarg: tensor slots of 48
bytes (u64 pointer, i32 shape[4], i64 stride[3] in elements, torch order, the unit stride left out),
then i32 values. Which slots and which values depends on the kernel state (LAYOUTS, from the kernel's
parameters at each FlyDSL commit): the shipped builds (11c4174d) take 12 slots (Q, K, V, O, LSE and
seven optional tensors, which a dense call without LSE fills with O's slot) and eight i32 (seq_len,
seq_len_kv, H*D, Hkv*D, D, 0, 0, 0): 608 bytes; the first dual-wave kernel (#629, 293b3b2b) takes 5
slots (Q, K, V, O, DebugCounts = O) and four i32 (seq_len, H*D, Hkv*D, D): 256 bytes. A build whose
metadata declares COV5 hidden arguments (the XCD-mapping builds, 864 bytes) gets them filled from the
grid (hidden_block_count_x/y/z = the grid, group sizes = the block). Which layout a .co takes is read
from its metadata (slot count, i32 count, offsets), never from its file name; one LAYOUTS does not
know is a FlydslLaunchError.

Which workgroup runs which tile: the plain and causal builds run workgroup (x, y, z) as head x, Q tile
y (rows 256y..256y+255), batch z. The XCD-mapping builds re-derive it (FlyDSL's
_init_dualwave_thread_mapping): L = x + H*y, head = L // T, tile = L % T with T = grid y, so a head's
tiles are consecutive in dispatch order. `xcd_wg_map` is that bijection, for the model.

FlyDSL #629's generic kernel (`flash_attn_generic_kernel_0`, kernels/flash_attn_generic.py at
293b3b2b), which #629's dispatch ran instead of the dual-wave one at short or odd seqlens (DISPATCH):
BLOCK_M = 128 (4 waves, block 256) or 256 (8 waves, block 512), 32 Q rows a wave; a 1-D grid
(B * ceil(S/BLOCK_M) * H,), workgroup i running head i % H, Q tile (i // H) % T, batch i // (H*T);
kernarg Q, K, V, O as BSHD flattened to 1-D (a slot is the pointer and one i32, the element count),
then seq_len: 64 bytes. `GenericWgMap` orders its work items tile-major for the model's tile-axis
sampling.
"""
from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "flydsl"
CO_DIR = SHARED / "gfx950"
KERNEL = "flash_attn_dualwave_swp_gfx950_kernel_0"
SHIPPED_COMMIT = "11c4174d"   # FlyDSL's commit the code objects of CO_DIR are built at
BLOCK_M = 256             # Q rows per workgroup (DUALWAVE_SWP_BLOCK_M)
BLOCK = 512               # 8 waves of 64
N_XCD = 8                 # gfx950's XCDs (flash_attn_utils.NUM_XCD_GFX950)
MIN_Q_BLOCKS_XCD = 64     # flash_attn_utils.MIN_Q_BLOCKS_XCD_SWIZZLE
DESC_BYTES = 40           # {i32 shape[4]; i64 stride[3]}, after a tensor argument's u64 pointer
SLOT_BYTES = 8 + DESC_BYTES
GENERIC_KERNEL = "flash_attn_generic_kernel_0"
ROWS_PER_WAVE = 32        # the generic kernel's Q rows a wave (flash_attn_generic.py's docstring at 293b3b2b)
GENERIC_SEQ_MULTIPLE = 128   # its "Requires: seq_len % 128 == 0" (ibid.; #629's test_flash_attn_fwd.py refuses others)


def desc_bytes(rank: int) -> int:
    """The bytes of a rank-r tensor's descriptor after its pointer: i32 shape[r], i64 stride[r-1] (the
    unit stride left out), packed."""
    return 4 * rank + 8 * (rank - 1)

# The kernarg layouts of FlyDSL's kernel states, keyed by what a code object's metadata shows: (tensor
# slots, i32 arguments). Names are the kernel's parameters (flash_attn_dualwave_swp_gfx950_kernel at
# each commit of kernels/flash_attn_gfx950.py, kernels/attention/ from #807 on); the host fills every
# slot past V with O for a dense bf16 call (its placeholder for DebugCounts, CuSeq*, descales,
# BlockTable, a missing LSE, Bias, AlibiSlopes, Sink) and the paging/bias/alibi strides with 0.
# #629 and #661's kernel takes whole 256-row tiles only (their docstring: seq_len % 256 == 0; in the
# emulator a ragged seqlen reads past K); #683 made seq_len arbitrary. Their dispatch
# (flash_attn_generic._wrap_with_dualwave_swp) ran it only at seq_len >= 384, the generic kernel below.
WHOLE_TILES_ONLY = {(5, 4)}
LAYOUTS = {
    (5, 4): (("Q", "K", "V", "O", "DebugCounts"),
             ("seq_len", "stride_q_n", "stride_kv_n", "head_dim"),
             "#629 293b3b2b, #661 90b999b2"),
    (7, 4): (("Q", "K", "V", "O", "DebugCounts", "CuSeqQ", "CuSeqKv"),
             ("seq_len", "stride_q_n", "stride_kv_n", "head_dim"),
             "#683 81cfca71, #693 baae05f0"),
    (7, 5): (("Q", "K", "V", "O", "DebugCounts", "CuSeqQ", "CuSeqKv"),
             ("seq_len", "seq_len_kv", "stride_q_n", "stride_kv_n", "head_dim"),
             "#704 523ca1c7"),
    (10, 5): (("Q", "K", "V", "O", "DebugCounts", "CuSeqQ", "CuSeqKv", "QDescale", "KDescale", "VDescale"),
              ("seq_len", "seq_len_kv", "stride_q_n", "stride_kv_n", "head_dim"),
              "#711 8057f0fc"),
    (8, 6): (("Q", "K", "V", "O", "DebugCounts", "CuSeqQ", "CuSeqKv", "BlockTable"),
             ("seq_len", "seq_len_kv", "stride_q_n", "stride_kv_n", "head_dim", "block_table_stride"),
             "#758 b550fd70 to #845 4be56142"),
    (9, 6): (("Q", "K", "V", "O", "LSE", "DebugCounts", "CuSeqQ", "CuSeqKv", "BlockTable"),
             ("seq_len", "seq_len_kv", "stride_q_n", "stride_kv_n", "head_dim", "block_table_stride"),
             "#844 cc141e85"),
    (12, 8): (("Q", "K", "V", "O", "LSE", "DebugCounts", "CuSeqQ", "CuSeqKv", "BlockTable", "Bias",
               "AlibiSlopes", "Sink"),
              ("seq_len", "seq_len_kv", "stride_q_n", "stride_kv_n", "head_dim", "block_table_stride",
               "bias_stride0", "alibi_stride_b"),
              "#960 4521c8cb, #1009 9d7accfc, 11c4174d (the shipped builds)"),
    (4, 1): (("Q", "K", "V", "O"), ("seq_len",), "#629 293b3b2b generic kernel (flash_attn_generic_kernel)"),
}
SLOT_RANK = {(4, 1): 1}   # layouts whose tensors are not rank 4: the generic kernel's are BSHD flattened
TRACE_SEQLEN = 1024       # a measured row is recorded at about this seqlen (batch 1), its loop scaled up


class FlydslLaunchError(LookupError):
    """A FlyDSL launch that the code objects here cannot serve."""


def build_name(H: int, S: int, causal: bool, Hkv: int | None = None, d: int = 128) -> str:
    """The code object FlyDSL's dispatch (flash_attn_interface: xcd_swizzle) runs for this call: the
    XCD-mapping build for non-causal calls with H % 8 == 0 and ceil(S/256) >= 64, else the plain one."""
    xcd = not causal and H % N_XCD == 0 and -(-S // BLOCK_M) >= MIN_Q_BLOCKS_XCD
    return co_name(H, causal, xcd, Hkv, d)


def co_name(H: int, causal: bool, xcd: bool, Hkv: int | None = None, d: int = 128, commit: str | None = None) -> str:
    """The file name of a build (../shared/flydsl/build/compile_fa.py's naming); a build of another
    FlyDSL kernel state than the shipped one (SHIPPED_COMMIT) says its commit: ..._h64@293b3b2b.co."""
    Hkv = Hkv or H
    state = ""
    if commit:
        c = commit[:8].lower()
        if len(c) < 7 or any(ch not in "0123456789abcdef" for ch in c):
            raise FlydslLaunchError(f"{commit!r} is not a FlyDSL commit hash (7 or more hex digits)")
        state = "" if SHIPPED_COMMIT.startswith(c) else f"@{c}"
    return (f"fa_fwd_bf16_d{d}_{'causal' if causal else 'noncausal'}_h{H}" + (f"_hkv{Hkv}" if Hkv != H else "")
            + ("_xcdswz" if xcd else "") + state + ".co")


def commit_of(name: str) -> str | None:
    """The FlyDSL commit a build's file name says (co_name), None for the shipped state."""
    return name.removesuffix(".co").partition("@")[2] or None


def grid(H: int, S: int, B: int) -> tuple[int, int, int]:
    return (H, -(-S // BLOCK_M), B)


@dataclass(frozen=True)
class Layout:
    """A code object's kernarg layout: tensor slots (name, pointer offset; the 40-byte shape/stride
    descriptor follows the pointer), i32 arguments (name, offset), COV5 hidden arguments, and the
    FlyDSL kernel states known to take it."""
    size: int
    slots: tuple
    scalars: tuple
    hidden: list
    states: str
    rank: int = 4             # of every tensor slot (SLOT_RANK)


def _layout_error(size: int, why: str) -> FlydslLaunchError:
    known = ", ".join(f"{n}+{m}" for n, m in LAYOUTS)
    return FlydslLaunchError(f"the FlyDSL kernel's {size}-byte kernarg {why}, a layout of no FlyDSL kernel state "
                             f"known here (tensor slots + i32 arguments: {known})")


def kernel_of(co: bytes) -> str:
    """Which FlyDSL attention kernel a code object holds: the dual-wave one (KERNEL) or the generic one."""
    from flyasm.codeobj.reader import read_code_object
    names = {k.name for k in read_code_object(co).kernels}
    for k in (KERNEL, GENERIC_KERNEL):
        if k in names:
            return k
    raise FlydslLaunchError(f"the code object holds no FlyDSL attention forward ({KERNEL} or {GENERIC_KERNEL}), "
                            f"only {', '.join(sorted(names)) or 'no kernel'}")


def kernarg_layout(co: bytes) -> Layout:
    """The layout of this code object, from its kernel's metadata (layout_of)."""
    from flyasm.codeobj.reader import read_code_object
    return layout_of(read_code_object(co).kernel(kernel_of(co)).metadata or {})


def generic_block_m(co: bytes) -> int:
    """The generic kernel's BLOCK_M: its waves (the metadata's workgroup size over 64) x ROWS_PER_WAVE."""
    from flyasm.codeobj.reader import read_code_object
    md = read_code_object(co).kernel(GENERIC_KERNEL).metadata or {}
    return int(md[".reqd_workgroup_size"][0]) // 64 * ROWS_PER_WAVE


def layout_of(md: dict) -> Layout:
    """The layout a kernel's metadata declares (its .args: pointer + descriptor pairs, then i32 values,
    then hidden arguments), named by LAYOUTS."""
    from flyasm.run.args import specs_from_metadata
    size = int(md.get(".kernarg_segment_size") or 0)
    specs = specs_from_metadata(md.get(".args", []))
    explicit = [s for s in specs if not s.kind.startswith("hidden_")]
    ptrs, ranks, i = [], set(), 0
    sizes = {desc_bytes(r): r for r in (1, 2, 3, 4)}
    while i < len(explicit) and explicit[i].kind == "global_buffer":
        ptr, desc = explicit[i], explicit[i + 1] if i + 1 < len(explicit) else None
        if ptr.size != 8 or desc is None or (desc.kind, desc.offset) != ("by_value", ptr.offset + 8) \
                or desc.size not in sizes:
            raise _layout_error(size, f"has a pointer at byte {ptr.offset} without FlyDSL's shape/stride descriptor "
                                      f"after it ({DESC_BYTES} bytes for a rank-4 tensor, 4 for rank 1)")
        ptrs.append(ptr.offset)
        ranks.add(sizes[desc.size])
        i += 2
    ints = [s.offset for s in explicit[i:] if (s.kind, s.size) == ("by_value", 4)]
    if len(ints) != len(explicit) - i:
        raise _layout_error(size, "has arguments after its tensors other than i32 values")
    key = (len(ptrs), len(ints))
    if key not in LAYOUTS:
        raise _layout_error(size, f"takes {len(ptrs)} tensor slots and {len(ints)} i32 arguments")
    if ptrs and ranks != {SLOT_RANK.get(key, 4)}:
        raise _layout_error(size, f"takes {key[0]} tensor slots of rank {'/'.join(map(str, sorted(ranks)))}, "
                                  f"not {SLOT_RANK.get(key, 4)}")
    slot_names, int_names, states = LAYOUTS[key]
    return Layout(size, tuple(zip(slot_names, ptrs)), tuple(zip(int_names, ints)),
                  [s for s in specs if s.kind.startswith("hidden_")], states, SLOT_RANK.get(key, 4))


def pack(co: bytes, addrs: dict, B: int, S: int, H: int, Hkv: int, D: int = 128, Skv: int | None = None) -> bytes:
    """The kernarg bytes FlyDSL's host packs for a dense call, q/k/v/o [B, S, H(kv), D] contiguous;
    `addrs` = {"q", "k", "v", "o": device address}. Which layout, from the code object's metadata."""
    from flyasm.run.args import pack_args
    Skv = S if Skv is None else Skv
    lay = kernarg_layout(co)
    ints = {"seq_len": S, "seq_len_kv": Skv, "stride_q_n": H * D, "stride_kv_n": Hkv * D, "head_dim": D}
    if Skv != S and "seq_len_kv" not in dict(lay.scalars):
        raise FlydslLaunchError(f"FlyDSL {lay.states} takes one seqlen for Q and KV, not {S} and {Skv}")
    if (len(lay.slots), len(lay.scalars)) in WHOLE_TILES_ONLY and S % BLOCK_M:
        raise FlydslLaunchError(f"{KERNEL} of FlyDSL {lay.states} takes a seqlen of whole {BLOCK_M}-row tiles, not {S}")
    if lay.rank == 1 and S % GENERIC_SEQ_MULTIPLE:     # #629's benchmark refuses such a call
        raise FlydslLaunchError(f"{GENERIC_KERNEL} of FlyDSL {lay.states} takes a seqlen divisible by "
                                f"{GENERIC_SEQ_MULTIPLE}, not {S}")
    # hidden arguments first (pack_args fills block counts, group sizes and remainders), then ours
    buf = bytearray(pack_args(lay.hidden, [], None, lay.size, grid=grid(H, S, B), block=(BLOCK, 1, 1))
                    if lay.hidden else bytes(lay.size))

    def slot(ptr, s, h):
        if lay.rank == 1:               # BSHD flattened: the element count
            return struct.pack("<Qi", ptr, B * s * h * D)
        return struct.pack("<Q4i3q", ptr, B, s, h, D, s * h * D, h * D, D)
    tensors = {"Q": slot(addrs["q"], S, H), "K": slot(addrs["k"], Skv, Hkv), "V": slot(addrs["v"], Skv, Hkv)}
    o = slot(addrs["o"], S, H)
    for name, at in lay.slots:
        buf[at:at + len(o)] = tensors.get(name, o)
    for name, at in lay.scalars:
        buf[at:at + 4] = struct.pack("<i", ints.get(name, 0))
    return bytes(buf)


def has_xcd_mapping(co: bytes) -> bool:
    """The build reads the grid from COV5 hidden arguments: FlyDSL's XCD-mapping variant."""
    return any(s.kind == "hidden_block_count_y" for s in kernarg_layout(co).hidden)


def xcd_wg_map(grid3, x, y, z):
    """Work item (head, tile, batch) of workgroup (x, y, z) in the XCD-mapping build: the linear id
    x + H*y read head-slow (FlyDSL's _init_dualwave_thread_mapping). Arrays in, arrays out."""
    H, T = grid3[0], grid3[1]
    lin = x + H * y
    return lin // T, lin % T, z


# ---- FlyDSL #629's generic kernel, and which kernel a kernel state's dispatch runs ----------------
def generic_co_name(H: int, causal: bool, block_m: int, commit: str, Hkv: int | None = None, d: int = 128) -> str:
    """The file name of a build of the generic kernel (never shipped: always of a commit), e.g.
    fa_generic_m128_bf16_d128_causal_h64@293b3b2b.co."""
    name = co_name(H, causal, False, Hkv, d, commit=commit).replace("fa_fwd_", f"fa_generic_m{block_m}_", 1)
    if "@" not in name:
        raise FlydslLaunchError(f"the generic kernel is not a shipped build: give its commit, not {commit!r}")
    return name


def generic_grid(H: int, S: int, B: int, block_m: int) -> tuple[int, int, int]:
    """The generic kernel's 1-D grid (its launch_flash_attn_generic: batch * num_q_tiles * num_heads)."""
    return (B * -(-S // block_m) * H, 1, 1)


class GenericWgMap:
    """Work item of each workgroup of the generic kernel's 1-D grid, for the model's sampling along it:
    workgroup i runs head i % H, Q tile (i // H) % T, batch i // (H T) (flash_attn_generic_kernel at
    293b3b2b: q_head_idx = block_id % NUM_HEADS_Q, then q_tile_idx, batch_idx), and its item is
    tile * B H + batch * H + head: items ordered tile-major, so the three sampled items (first, middle,
    last) are the first tile, a middle one and the last, and the interpolation between them follows
    the causal triangle. `tiles` = {workgroup count: Q tiles a (batch, head)} of the grids it is used
    on (the recorded one and the real one). Arrays in, arrays out."""

    def __init__(self, H: int, tiles: dict):
        self.H, self.tiles = H, dict(tiles)

    def __call__(self, grid3, x, y, z):
        H, T = self.H, self.tiles[grid3[0]]
        per_tile = grid3[0] // T                   # B * H
        head, rest = x % H, x // H
        return (rest % T) * per_tile + (rest // T) * H + head, y, z


# Which kernel state a measured row's kernel_state / source names: (the text as it appears, FlyDSL's
# commit). A row of no state here is priced by its co_name (or the shipped dispatch) as before.
ROW_STATES = (("#629", "293b3b2b"),)


def row_state(row: dict) -> str | None:
    """The commit of ROW_STATES whose tag the row's kernel_state or source column names, or None."""
    text = f"{row.get('kernel_state') or ''} {row.get('source') or ''}"
    hits = {c for tag, c in ROW_STATES if re.search(re.escape(tag) + r"(?![0-9])", text)}
    if len(hits) > 1:
        raise FlydslLaunchError(f"the row names kernel states of several commits ({', '.join(sorted(hits))})")
    return hits.pop() if hits else None


def dispatch_293b3b2b(B: int, S: int, H: int) -> int:
    """The kernel FlyDSL's flash_attn_generic.build_flash_attn_func_module at 293b3b2b (#629) runs for a
    d128 bf16 call on gfx950: 0 = the dual-wave kernel (_dualwave_swp_dispatch: seq_len >= 384 and
    seq_len % 256 == 0), else the generic kernel's BLOCK_M (_auto_launch, H >= 32: 256 when
    B * S * H >= 4096 * H, else 128; with H < 32 only the BLOCK_M = 128 build exists)."""
    if S >= 384 and S % 256 == 0:
        return 0
    return 256 if H >= 32 and B * S >= 4096 else 128


DISPATCH = {"293b3b2b": dispatch_293b3b2b}    # a kernel state's commit -> its dispatch


def generic_of(row: dict) -> tuple[str, int] | None:
    """(commit, BLOCK_M) of the generic kernel the dispatch of the row's kernel state ran at the row's
    shape; None when that was the dual-wave kernel, or the state has no dispatch here."""
    commit = row_state(row)
    if commit not in DISPATCH:
        return None
    block_m = DISPATCH[commit](int(row["batch"]), int(row["seqlen_q"]), int(row["nhead_q"]))
    return (commit, block_m) if block_m else None


def generic_trace_seqlen(S: int, causal: bool, block_m: int) -> int:
    """The seqlen a generic-kernel row is recorded at: trace_seqlen's rule in tiles of block_m, and, causal
    with more than one Q tile, at least three: the middle sample, whose loop is scaled to the real
    tile at its position, is then a tile after the first, which sees more than one 128-key block (the
    first of a BLOCK_M = 128 build sees one, and a one-iteration loop cannot be scaled:
    trace.scale_loops adds iterations of a loop it saw repeat). One tile is recorded as it is."""
    S0 = trace_seqlen(S, block_m)
    return max(S0, 3 * block_m) if causal and S > block_m else S0


# ---- measured rows -> launches -------------------------------------------------------------------
def trace_seqlen(S: int, block_m: int = BLOCK_M) -> int:
    """The seqlen a row of seqlen S is recorded at: S itself up to TRACE_SEQLEN, else the Q tiles of
    TRACE_SEQLEN but the last and S's own last tile (so the recorded last tile, and the last key block,
    are as ragged as the real ones: 61380 -> 964)."""
    if S <= TRACE_SEQLEN:
        return S
    return TRACE_SEQLEN - block_m + (S - 1) % block_m + 1


def causal_keys(t, S: int, Skv: int, block_m: int = BLOCK_M):
    """Keys Q tile t sees under FlyDSL's top-left causal mask (query i sees keys j <= i)."""
    return np.minimum(Skv, (np.asarray(t, float) + 1) * block_m)


def _row_shape(row: dict) -> tuple:
    """(B, H, Hkv, S, Skv, D, causal) of a FlyDSL row; a call FlyDSL's dense bf16 forward does not take
    is a FlydslLaunchError."""
    B, H, Hkv = int(row["batch"]), int(row["nhead_q"]), int(row["nhead_k"])
    S, Skv, D = int(row["seqlen_q"]), int(row["seqlen_k"]), int(row["hdim_q"])
    if int(row.get("hdim_v") or D) != D or int(row.get("mode") or 0) != 0 or row.get("dtype", "bf16") != "bf16":
        raise FlydslLaunchError(f"{row.get('co_name') or 'a FlyDSL row'}: FlyDSL's dense bf16 forward takes "
                                "hdim_q = hdim_v and batch mode")
    return B, H, Hkv, S, Skv, D, int(row["mask"]) != 0


def _traffic(B, H, Hkv, S, Skv, D, causal, full_ka) -> dict:
    """The keys of a launch that depend on the problem only: FLOPs, compulsory bytes, the probe."""
    return dict(flops=4.0 * B * H * S * Skv * D * (0.5 if causal else 1.0),
                dram_bytes=2 * B * (2 * S * H * D + 2 * Skv * Hkv * D), group=f"s{S}",
                probe={"kernarg": full_ka, "buffers": {"q": B * S * H * D * 2, "k": B * Skv * Hkv * D * 2,
                                                       "v": B * Skv * Hkv * D * 2, "o": B * S * H * D * 2}})


def row_launch(row: dict, idx: dict | None = None) -> dict:
    """Everything perf.predict needs for one measured FlyDSL row (the keys of aiter_launch.row_launch,
    plus tile_axis, wg_map and `priced`: which kernel and build it prices). A row of a kernel state
    with a dispatch here (ROW_STATES, DISPATCH) prices the kernel that dispatch ran at the row's shape
    when that is not the dual-wave one (generic_row_launch); otherwise the row's code object (co_name,
    found in `idx` or ../shared/flydsl/gfx950 or flydsl_build's cache, built when missing, of the
    kernel state the name says; a row without one takes the build FlyDSL's dispatch picks) at the
    row's shape, recorded at batch 1, every head (the head count is compiled in, and the XCD-mapping
    build derives its tiles from it), seqlen trace_seqlen(S), its loop scaled.

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
    B, H, Hkv, S, Skv, D, causal = _row_shape(row)
    generic = generic_of(row)
    if generic:
        return generic_row_launch(row, *generic)
    name = row.get("co_name") or build_name(H, S, causal, Hkv, D)     # none named: the one FlyDSL picks
    if idx and name in idx:
        path = Path(idx[name][0])
    else:                           # shipped, built before, or built now (flydsl_build says what it needs)
        import flydsl_build
        commit = commit_of(name)
        xcd = name.removesuffix(".co").partition("@")[0].endswith("_xcdswz")
        own = co_name(H, causal, xcd, Hkv, D, commit=commit)
        path = flydsl_build.find(name)
        if path is None and name != own:      # never price another build instead
            raise FlydslLaunchError(f"no FlyDSL code object {name!r}, and it is not the build of this row's "
                                    f"heads and mask ({own})")
        path = path or flydsl_build.build(H, Hkv, causal, xcd, commit)
    co = path.read_bytes()
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

    def full_ka(a):
        return pack(co, a, B, S, H, Hkv, D, Skv)
    return dict(co=co, kernel=KERNEL, grid=g, block=BLOCK, trace_grid=tg, kernarg=ka, buffers=bufs,
                loop_scale=scale, tile_axis=1, wg_map=xcd_wg_map if has_xcd_mapping(co) else None,
                priced=f"{KERNEL} {name}", build=name, **_traffic(B, H, Hkv, S, Skv, D, causal, full_ka))


def generic_row_launch(row: dict, commit: str, block_m: int) -> dict:
    """row_launch of a row whose kernel state's dispatch ran the generic kernel with this BLOCK_M: its
    build at `commit` (flydsl_build's cache, built when missing), its 1-D grid, recorded at batch 1 and
    seqlen generic_trace_seqlen. The tile axis is the grid's only one, read through GenericWgMap
    (tile-major): sample item x' of the n0 recorded ones stands for the real items at the same
    relative position r = x' / (n0 - 1), which the interpolation treats as tile t = r (T-1); its loop
    scale is the keys real tile t sees over the keys its recorded tile (x' // H) saw. Tile k's items
    then get the durations of t in [k, k+1) (T-1)/T, not of k: summed over the tiles, the causal
    triangle's (the samples being on one line), but spread within each tile, the error a 1-D order
    of tiles leaves (flydsl#629-b, T = 2: with each tile's own duration the dispatch makespan comes
    out 3.7% longer)."""
    import flydsl_build
    B, H, Hkv, S, Skv, D, causal = _row_shape(row)
    name = generic_co_name(H, causal, block_m, commit, Hkv, D)
    path = flydsl_build.build_generic(H, Hkv, causal, block_m, commit)     # the cached build, or built now
    co = path.read_bytes()
    if generic_block_m(co) != block_m:
        raise FlydslLaunchError(f"{name} is a BLOCK_M {generic_block_m(co)} build, not {block_m}")
    if Skv != S:
        raise FlydslLaunchError(f"{GENERIC_KERNEL} of FlyDSL {commit} takes one seqlen for Q and KV, not {S} and {Skv}")
    S0 = generic_trace_seqlen(S, causal, block_m)
    T, T0 = -(-S // block_m), -(-S0 // block_m)
    g, tg = generic_grid(H, S, B, block_m), generic_grid(H, S0, 1, block_m)
    if g[0] == tg[0] and T != T0:
        raise FlydslLaunchError(f"{name}: the recorded and real grids have {g[0]} workgroups but {T0} and {T} tiles")
    bufs = {"q": S0 * H * D * 2, "k": S0 * Hkv * D * 2, "v": S0 * Hkv * D * 2, "o": S0 * H * D * 2}

    def ka(a):
        return pack(co, a, 1, S0, H, Hkv, D, S0)

    def scale(rel):
        if not causal:
            return S / S0
        t0 = round(rel * (tg[0] - 1)) // H                     # the recorded item's tile (batch 1)
        return float(causal_keys(rel * (T - 1), S, S, block_m) / causal_keys(t0, S0, S0, block_m))

    def full_ka(a):
        return pack(co, a, B, S, H, Hkv, D, S)
    return dict(co=co, kernel=GENERIC_KERNEL, grid=g, block=2 * block_m, trace_grid=tg, kernarg=ka,
                buffers=bufs, loop_scale=scale, tile_axis=0, wg_map=GenericWgMap(H, {g[0]: T, tg[0]: T0}),
                priced=f"{GENERIC_KERNEL} BLOCK_M {block_m} {name} (FlyDSL {commit}'s dispatch at B{B} S{S} H{H})",
                build=name, **_traffic(B, H, Hkv, S, S, D, causal, full_ka))
