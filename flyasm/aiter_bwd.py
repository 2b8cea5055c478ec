"""aiter's attention-backward convention (gfx950 fmha_v3_bwd): three launches per call.

    pre     odo        D = rowsum(dO ∘ O) into `d` (laid out as lse)      256-byte kernargs
    dqdkdv  the main   dK, dV per query head; dQ accumulated atomically   704-byte kernargs
    post    dq_convert (a32: fp32 workspace) or dq_shuffle (a16: workspace in q's dtype) -> dQ   192 bytes

Every kernel argument takes a 16-byte slot (pointers 8 bytes, 32-bit values 4 bytes, the rest pad);
strides are in bytes. The tables below are those structs, field by field, in order (aiter
csrc/include/mha_bwd.h `fmha_bwd_dqdkdv_args`, `fmha_bwd_post_kernel_args`, and csrc/cpp_itfs/mha_bwd.cu
`fmha_bwd_odo_logical_args` as its non-compact KernelArgBufferWriter packs it; shown by
../shared/aiter/client/drop_in_bwd.sh pack). Our kernels declare their arguments from them (same
names), so their metadata offsets are aiter's byte offsets.

`pack(set_dir, **call)` is aiter's host code for a set in Python (kernel choice, kernarg bytes,
grids, the dq workspace; held to aiter's own bytes by tests/test_fa_bwd_prepost.py), for
flyasm.attention; benchmarks/aiter_launch.py fmha_bwd_pack runs aiter's own and returns the same.
`backward(pack_fn, q, k, v, o, do, lse, ...)` runs one call: host addresses for the tensors, the
zero-filled workspace, the launches in order (`run_launches`: each host pointer moved onto the device
copy of the tensor it points into). `sum_gqa` is aiter's torch wrapper's last step: dK and dV come
out per query head and are summed over each key/value head's group.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .errors import FlyasmError

SLOT = 16                                   # bytes per argument

ODO_ARGS = (("ptr_o", "ptr"), ("ptr_do", "ptr"), ("ptr_d", "ptr"), ("Hs_o", "u32"), ("BAs_o", "u32"),
            ("Seqs_o", "u32"), ("Hs_do", "u32"), ("BAs_do", "u32"), ("Seqs_do", "u32"), ("Hs_d", "u32"),
            ("BAs_d", "u32"), ("Seqs_d", "u32"), ("seqlen_q", "u32"), ("head_dim", "u32"), ("ptr_qseq", "ptr"),
            ("ptr_qseq_padded", "ptr"))
DQDKDV_ARGS = (("ptr_dq", "ptr"), ("ptr_dk", "ptr"), ("ptr_dv", "ptr"), ("ptr_q", "ptr"), ("ptr_k", "ptr"),
               ("ptr_v", "ptr"), ("ptr_do", "ptr"), ("ptr_lse", "ptr"), ("ptr_d", "ptr"), ("scalar", "f32"),
               ("log2e", "f32"), ("seqlen_q", "u32"), ("Ts", "u32"), ("Hs_q", "u32"), ("BAs_q", "u32"),
               ("Seqs_q", "u32"), ("ratio", "u32"), ("Hs_k", "u32"), ("BAs_k", "u32"), ("Seqs_k", "u32"),
               ("Seqs_dk", "u32"), ("seqlen_k", "u32"), ("head_dim_q", "u32"), ("head_dim_v", "u32"),
               ("nhead_q", "u32"), ("Hs_v", "u32"), ("BAs_v", "u32"), ("Seqs_v", "u32"), ("Hs_do", "u32"),
               ("BAs_do", "u32"), ("Seqs_do", "u32"), ("Hs_dk", "u32"), ("BAs_dk", "u32"), ("Hs_dv", "u32"),
               ("BAs_dv", "u32"), ("Seqs_dv", "u32"), ("Hs_lsed", "u32"), ("ptr_qseq", "ptr"), ("ptr_kseq", "ptr"),
               ("ptr_qseq_padded", "ptr"), ("ptr_kseq_padded", "ptr"), ("max_seqlen_dq", "u32"), ("mask_x", "i32"),
               ("mask_y", "i32"))
POST_ARGS = (("ptr_dq_acc", "ptr"), ("ptr_dq", "ptr"), ("Hs_dq_acc", "u32"), ("BAs_dq_acc", "u32"),
             ("Seqs_dq_acc", "u32"), ("Hs_dq", "u32"), ("BAs_dq", "u32"), ("Seqs_dq", "u32"), ("seqlen_q", "u32"),
             ("head_dim", "u32"), ("ptr_qseq", "ptr"), ("ptr_qseq_padded", "ptr"))
STAGE_ARGS = {"pre": ODO_ARGS, "dqdkdv": DQDKDV_ARGS, "post": POST_ARGS}
# the four manifests aiter's codegen reads (hsa/gfx950/fmha_v3_bwd/), by stage; post: a32, a16
MANIFESTS = {"pre": "fmha_bwd_odo.csv", "dqdkdv": "fmha_bwd_dqdkdv.csv",
             "post": ("fmha_bwd_dq_convert.csv", "fmha_bwd_dq_shuffle.csv")}
WORKGROUP = 256                             # every stage: aiter launches 256x1x1 on gfx950


_FMT = {"ptr": "<Q", "u32": "<I", "i32": "<i", "f32": "<f"}


class BwdError(FlyasmError):
    """A backward call the convention (or a kernel set) cannot take."""

    def __init__(self, message: str):
        super().__init__(message, find_loc=False)


def decode(stage: str, kernarg: bytes) -> dict:
    """{field: value} of one launch's kernarg bytes (pointers and u32 as ints, f32 as floats)."""
    import struct
    fields = STAGE_ARGS[stage]
    if len(kernarg) != SLOT * len(fields):
        raise BwdError(f"a {stage} kernarg is {SLOT * len(fields)} bytes, not {len(kernarg)}")
    return {n: struct.unpack_from(_FMT[t], kernarg, SLOT * i)[0] for i, (n, t) in enumerate(fields)}


def encode(stage: str, values: dict, pad: int = 0) -> bytes:
    """The kernarg bytes of one launch from {field: value} (missing fields and the pad words: `pad`
    repeated, as an uninitialised stack would hold)."""
    import struct
    fields = STAGE_ARGS[stage]
    out = bytearray([pad & 0xFF]) * (SLOT * len(fields))
    for i, (n, t) in enumerate(fields):
        if n in values:
            v = values[n]
            struct.pack_into(_FMT[t], out, SLOT * i, float(v) if t == "f32" else int(v) if t == "i32"
                             else int(v) & (2 ** (8 * struct.calcsize(_FMT[t])) - 1))
    return bytes(out)


@dataclass
class Launch:
    """One kernel launch of a backward call, as a host packed it."""
    stage: str                   # pre, dqdkdv, post
    knl_name: str
    co: Path                     # the code object
    grid: tuple                  # workgroups (x, y, z)
    block: tuple
    kernarg: bytes
    unset: tuple = ()            # byte offsets the host leaves uninitialised
    manifest: str = ""
    fields: dict = field(default_factory=dict)
    poisoned: bytes | None = None  # the same bytes with the unset ones as garbage (a pattern)

    def pointers(self) -> dict:
        """{field: pointer value} of the launch's pointer fields."""
        vals = decode(self.stage, self.kernarg)
        return {n: vals[n] for n, t in STAGE_ARGS[self.stage] if t == "ptr"}


def call_keys(q, k, v, o, do, lse, dq, dk, dv, group: bool) -> dict:
    """The shape and element strides of one call, in aiter's mha_bwd_args terms (drop_in_bwd.sh pack's
    keys). Batch mode: q/o/do/dq [B, Sq, H, D] views, k/v [B, Sk, Hk, D], dk/dv [B, Sk, Hq, D] (any
    strides with a unit last one), lse (and d, which shares its strides) [B, Hq, Sq] with a unit
    sequence stride. Group mode: the same without the batch axis, batch strides 0."""
    named = dict(q=q, k=k, v=v, o=o, do=do, dq=dq, dk=dk, dv=dv)
    rank = 3 if group else 4
    for n, t in list(named.items()) + [("lse", lse)]:
        if t.dim() != rank - (n == "lse"):
            raise BwdError(f"{n} has shape {tuple(t.shape)}; {'group' if group else 'batch'} mode takes "
                           f"{'[T, H, D]' if group else '[B, S, H, D]'} (lse {'[H, T]' if group else '[B, H, S]'})")
        if t.stride(-1) != 1:
            raise BwdError(f"{n} has stride {t.stride(-1)} along its last axis; the kernels read it contiguously")
    keys = {}
    for n, t in named.items():
        st = t.stride()
        keys.update({f"stride_{n}": st[-3], f"nhead_stride_{n}": st[-2], f"batch_stride_{n}": 0 if group else st[0]})
    keys.update(nhead_stride_lsed=lse.stride(-2), batch_stride_lsed=0 if group else lse.stride(0))
    keys.update(nhead_q=q.shape[-2], nhead_k=k.shape[-2], hdim_q=q.shape[-1], hdim_v=v.shape[-1])
    if not group:
        keys.update(batch=q.shape[0], seqlen_q=q.shape[1], seqlen_k=k.shape[1])
    return keys


def storage_of(t):
    """(the whole storage of tensor t as a flat tensor of its dtype, t's element offset in it): a
    strided view's launch buffer is its storage, which copying results back keeps shared with t."""
    import torch
    flat = torch.empty(0, dtype=t.dtype, device=t.device).set_(t.untyped_storage())
    return flat, t.storage_offset()


HOST_BASE = 0x7F00_0000_0000          # where a host allocator might have put the tensors


def backward(pack_fn, q, k, v, o, do, lse, *, mask_type: int = 0, atomic32: int = 1, scale: float | None = None,
             seqstart_q=None, seqstart_k=None, bf16_cvt: int = 0, dq=None, dk=None, dv=None, poison: bool = True,
             stages=("pre", "dqdkdv", "post"), workspace=None, backend: str = "emu", **launch_kw) -> dict:
    """One attention-backward call: pack_fn(**call) packs its launches (aiter's host code:
    benchmarks/aiter_launch.py fmha_bwd_pack; ours: `pack` below) with host addresses of the
    tensors' storages; the dq workspace is allocated zero-filled where the packing says; then pre,
    dqdkdv and post run in order on `backend` (the strict emulator by default) on those bytes
    (poison: the bytes the host leaves uninitialised hold a pattern, as a stack would).
    Layouts as call_keys (views of any strides: their storages are the buffers); group mode when
    seqstart_q/seqstart_k (int32 cumulative starts) are given. dq, dk, dv (dk/dv with nhead_q heads)
    default to NaN-filled contiguous tensors. stages: run only these launches (e.g. pre and post
    around a workspace a test fills: `workspace`, a tensor of the workspace's size).
    Returns {dq, dk, dv (summed over each GQA group), dk_heads, dv_heads (per query head), d,
    workspace (after the call), launches, results (LaunchResults), pack, call}."""
    import dataclasses
    import math

    import torch
    group = seqstart_q is not None
    hq, hk = q.shape[-2], k.shape[-2]
    poisoned = lambda *shape: torch.full(shape, float("nan"), dtype=q.dtype, device=q.device)  # noqa: E731
    rows_k = k.shape[:-2]
    dq = poisoned(*q.shape) if dq is None else dq
    dk = poisoned(*rows_k, hq, k.shape[-1]) if dk is None else dk
    dv = poisoned(*rows_k, hq, v.shape[-1]) if dv is None else dv
    d = torch.empty_strided(lse.shape, lse.stride(), dtype=torch.float32, device=lse.device).fill_(float("nan"))
    call = call_keys(q, k, v, o, do, lse, dq, dk, dv, group)
    dtype = {torch.bfloat16: "bf16", torch.float16: "fp16"}[q.dtype]
    call.update(dtype=dtype, mask_type=mask_type, atomic32=int(atomic32), bf16_cvt=bf16_cvt, group=int(group),
                scale=repr(float(1 / math.sqrt(q.shape[-1]) if scale is None else scale)))
    tensors = dict(q=q, k=k, v=v, o=o, do=do, lse=lse, d=d, dq=dq, dk=dk, dv=dv)
    if group:
        lq, lk = seqstart_q.diff(), seqstart_k.diff()
        call.update(batch=len(lq), seqlen_q=q.shape[0], seqlen_k=k.shape[0], max_seqlen_q=int(lq.max()),
                    max_seqlen_k=int(lk.max()))
        tensors.update(seqstart_q=seqstart_q, seqstart_k=seqstart_k)
    buffers, addr, at = {}, {}, HOST_BASE
    for n, t in tensors.items():                       # one host address per storage, views inside it
        flat, off = storage_of(t)
        key = t.untyped_storage().data_ptr()
        if key not in addr:
            addr[key] = at
            buffers[at] = flat
            at += -(-flat.numel() * flat.element_size() // 4096) * 4096 + 4096
        call[n] = addr[key] + off * t.element_size()
    call["workspace"] = at
    p = pack_fn(**call)
    ws = p["workspace"]
    if ws:
        wdt = torch.float32 if ws["element_size"] == 4 else q.dtype
        if workspace is None:
            workspace = torch.zeros(ws["bytes"] // ws["element_size"], dtype=wdt, device=q.device)   # zero-filled
        elif workspace.dtype != wdt or workspace.numel() * workspace.element_size() != ws["bytes"]:
            raise BwdError(f"the dq workspace is {ws['bytes']} bytes of {wdt}, not {workspace.numel()} x "
                           f"{workspace.dtype}")
        buffers[ws["ptr"]] = workspace
    launches = [ln for ln in p["launches"] if ln.stage in stages]
    if poison:
        launches = [dataclasses.replace(ln, kernarg=ln.poisoned) if ln.poisoned is not None else ln
                    for ln in launches]
    results = run_launches(launches, buffers, backend=backend, **launch_kw)
    return dict(dq=dq, dk=sum_gqa(dk, hk, dk.dim() - 2), dv=sum_gqa(dv, hk, dv.dim() - 2), dk_heads=dk, dv_heads=dv,
                d=d, workspace=workspace, launches=p["launches"], results=results, pack=p, call=call)


def run_launches(launches, buffers: dict, backend: str = "emu", **launch_kw) -> list:
    """Run `launches` in order. buffers: {address the host packed: tensor or array} (whole buffers:
    a pointer anywhere inside one is moved onto its device copy with the same offset). Each launch
    gets the buffers its pointer fields point into; results are copied back after each launch, so
    the next one sees them. Returns the LaunchResults."""
    from .run import launch
    from .run.args import nbytes
    spans = sorted((int(a), nbytes(t), t) for a, t in buffers.items())
    results = []
    for ln in launches:
        used = {}
        for name, p in ln.pointers().items():
            for a, n, t in spans:
                if a <= p < a + max(n, 1):
                    used[a] = t
                    break
            else:
                if p:
                    raise BwdError(f"{ln.stage} kernel {ln.knl_name}: {name} = 0x{p:x} points into no buffer")
        results.append(launch(Path(ln.co).read_bytes(), ln.grid, ln.block, kernarg=ln.kernarg, buffers=used,
                              kernel=ln.knl_name, backend=backend, **launch_kw))
    return results


def sum_gqa(t, nhead_k: int, head_axis: int):
    """dK or dV per query head -> per key/value head: query head h belongs to head h // (Hq / Hk)
    (aiter's `ratio`), so the Hq heads fold as [Hk, Hq/Hk] and the group axis is summed (in fp32,
    rounded once to t's dtype, as torch sums a bf16 tensor)."""
    hq = t.shape[head_axis]
    if hq % nhead_k:
        raise BwdError(f"{hq} query heads do not divide into {nhead_k} key/value heads")
    shape = t.shape[:head_axis] + (nhead_k, hq // nhead_k) + t.shape[head_axis + 1:]
    return t.float().reshape(shape).sum(head_axis + 1).to(t.dtype)     # fp32 sum, one rounding


# ---- aiter's host code for a set, in Python: kernel choice, kernargs, grids, the dq workspace --------
# (csrc/cpp_itfs/mha_bwd.cu: get_padded_hdim, get_heuristic_kernel, fmha_v3_bwd on gfx950; the
# unset struct bytes are written as zeros here.) flyasm.attention's backward packs its calls so;
# tests/test_fa_bwd.py holds it byte for byte to aiter's own host code (drop_in_bwd.sh's sources).
def read_set(set_dir) -> dict:
    """{manifest name: [row dicts]} of the four manifests in set_dir (missing ones: no rows)."""
    import csv
    out = {}
    for name in (MANIFESTS["pre"], MANIFESTS["dqdkdv"], *MANIFESTS["post"]):
        p = Path(set_dir) / name
        out[name] = list(csv.DictReader(p.open(newline=""))) if p.is_file() else []
    return out


def padded_hdim(hdim_q: int, hdim_v: int) -> tuple[int, int]:
    if (hdim_q, hdim_v) == (192, 128):
        return hdim_q, hdim_v
    if hdim_q == hdim_v:
        for p in (64, 128, 192):
            if hdim_q <= p:
                return p, p
    return hdim_q, hdim_v


def asm_mask(mask_type: int, wl: int, wr: int) -> int:
    """aiter's kernel mask from CK's mask_enum and the window: 0 none, 1 top-left, 2 bottom-right,
    3 sliding window."""
    if mask_type == 0:
        return 0
    if mask_type == 3:
        raise BwdError("mask_type 3 (CK's generic mask) has no asm backward kernel")
    if (wl, wr) == (-1, 0):
        return 1 if mask_type == 1 else 2
    return 0 if (wl, wr) == (-1, -1) else 3


def _i(r, c):
    return int(r[c])


def choose(rows: dict, dtype, hdim_q, hdim_v, mask, atomic32, bf16_cvt, group, seqlen_q, seqlen_k):
    """(pre, dqdkdv, post) rows aiter's get_heuristic_kernel picks (post None when none is needed);
    raises BwdError naming the stage with no kernel."""
    phq, phv = padded_hdim(hdim_q, hdim_v)
    pddv = int((phq, phv) != (hdim_q, hdim_v))
    mode = int(bool(group))
    pre = next((r for r in rows[MANIFESTS["pre"]] if r["dtype"] == dtype and _i(r, "hdim_v") == phv
                and _i(r, "mode") == mode), None)
    main, ts, pssk = None, 0, 0
    for r in rows[MANIFESTS["dqdkdv"]]:
        if not (r["dtype"] == dtype and (_i(r, "hdim_q"), _i(r, "hdim_v")) == (phq, phv) and _i(r, "mask") == mask
                and _i(r, "atomic32") == int(atomic32) and _i(r, "bf16_cvt") in (3, bf16_cvt) and _i(r, "mode") == mode):
            continue
        if ts == 0:
            ts = _i(r, "ts")
            tmp = 64 if not atomic32 and "recompile" in r["knl_name"] else ts
            pssk = int(seqlen_q != seqlen_k or seqlen_k % tmp != 0)
        if (_i(r, "pssk"), _i(r, "pddv")) == (pssk, pddv):
            main = r
            break
        if _i(r, "pssk") >= pssk and _i(r, "pddv") >= pddv:
            main = r
    post = None
    if hdim_q != 64 or atomic32:
        post = next((r for r in rows[MANIFESTS["post"][0 if atomic32 else 1]]
                     if _i(r, "hdim_q") == phq and _i(r, "mode") == mode and _i(r, "bf16_cvt") in (3, bf16_cvt)
                     and (r["dtype"] == dtype or not atomic32)), None)
    key = (f"{dtype} hdim {hdim_q}/{hdim_v} mask {mask} atomic32 {int(atomic32)} {'group' if group else 'batch'} "
           f"mode")
    for stage, r in (("pre", pre), ("dQ/dK/dV", main)) + ((("post", post),) if hdim_q != 64 or atomic32 else ()):
        if r is None:
            raise BwdError(f"the backward set has no {stage} kernel for {key}")
    return pre, main, post


def pack(set_dir, **call) -> dict:
    """The launches of one call as aiter's fmha_v3_bwd makes them for the set in set_dir (the same
    keys and result as benchmarks/aiter_launch.py fmha_bwd_pack: element strides, pointer values;
    workspace = the address the dq workspace gets)."""
    import math
    c = dict(call)
    dtype, group = c.get("dtype", "bf16"), bool(int(c.get("group", 0)))
    hq_, hv_ = int(c.get("hdim_q", 128)), int(c.get("hdim_v", c.get("hdim_q", 128)))
    b, hq, hk = int(c.get("batch", 1)), int(c.get("nhead_q", 1)), int(c.get("nhead_k", c.get("nhead_q", 1)))
    sq, sk = int(c.get("seqlen_q", 128)), int(c.get("seqlen_k", c.get("seqlen_q", 128)))
    msq = int(c.get("max_seqlen_q", -(-sq // b) if group else sq))
    msk = int(c.get("max_seqlen_k", -(-sk // b) if group else sk))
    mt = int(c.get("mask_type", 0))
    wl, wr = int(c.get("window_size_left", -1)), int(c.get("window_size_right", 0 if mt else -1))
    a32, cvt = bool(int(c.get("atomic32", 1))), int(c.get("bf16_cvt", 0))
    scale = float(c.get("scale", 1 / math.sqrt(hq_)))
    mask = asm_mask(mt, wl, wr)

    def st(name, kind, default):
        return int(c.get(f"{kind}stride_{name}", default))
    S = {}
    for n, rows_, h, d in (("q", sq, hq, hq_), ("k", sk, hk, hq_), ("v", sk, hk, hv_), ("o", sq, hq, hv_),
                           ("do", sq, hq, hv_), ("dq", sq, hq, hq_), ("dk", sk, hq, hq_), ("dv", sk, hq, hv_)):
        S[n] = (st(n, "", h * d), st(n, "nhead_", d), st(n, "batch_", 0 if group else rows_ * h * d))
    lsed = (int(c.get("nhead_stride_lsed", sq)), int(c.get("batch_stride_lsed", 0 if group else hq * sq)))
    ptr = {n: int(c.get(n, 0)) for n in ("q", "k", "v", "o", "do", "lse", "d", "dq", "dk", "dv", "cu_seqlen_q",
                                         "cu_seqlen_k")}
    seqq, seqk = int(c.get("seqstart_q", 0)), int(c.get("seqstart_k", 0))
    qseq = ptr["cu_seqlen_q"] if ptr["cu_seqlen_q"] and seqq else seqq
    kseq = ptr["cu_seqlen_k"] if ptr["cu_seqlen_k"] and seqk else seqk
    rows = read_set(set_dir)
    pre, main, post = choose(rows, dtype, hq_, hv_, mask, a32, cvt, group, sq, sk)

    def launch(stage, r, grid, values):
        return Launch(stage, r["knl_name"], Path(set_dir) / r["co_name"], grid, (WORKGROUP, 1, 1),
                      encode(stage, values), manifest="", poisoned=encode(stage, values, pad=0xAA))

    out = []
    ts_odo = _i(pre, "ts")
    out.append(launch("pre", pre, (-(-msq // ts_odo), hq, b), dict(
        ptr_o=ptr["o"], ptr_do=ptr["do"], ptr_d=ptr["d"], Hs_o=S["o"][1] * 2, BAs_o=S["o"][2] * 2,
        Seqs_o=S["o"][0] * 2, Hs_do=S["do"][1] * 2, BAs_do=S["do"][2] * 2, Seqs_do=S["do"][0] * 2,
        Hs_d=lsed[0] * 4, BAs_d=lsed[1] * 4, Seqs_d=4, seqlen_q=sq, head_dim=hq_, ptr_qseq=qseq,
        ptr_qseq_padded=seqq)))
    ws = None
    if post is not None:
        es = 4 if a32 else 2
        seq_acc = sq if a32 else -(-msq // 16) * 16
        hd_acc = hq_ if a32 else (192 if hq_ == 192 else 128)
        per_batch = hq * seq_acc * hd_acc
        eff_b = 1 if group and a32 else b
        ws = {"bytes": eff_b * per_batch * es, "zero_init": True, "ptr": int(c.get("workspace", 0xDACC0000)),
              "element_size": es, "dtype": "fp32" if a32 else dtype, "stride": hd_acc,
              "nhead_stride": seq_acc * hd_acc, "batch_stride": 0 if eff_b == 1 else per_batch, "allocations": 1}
    ts = _i(main, "ts")
    gdx = -(-msk // ts)
    out.append(launch("dqdkdv", main, ((gdx + 1) // 2 if mask in (1, 2) else gdx, hq, b), dict(
        ptr_dq=ws["ptr"] if ws else ptr["dq"], ptr_dk=ptr["dk"], ptr_dv=ptr["dv"], ptr_q=ptr["q"], ptr_k=ptr["k"],
        ptr_v=ptr["v"], ptr_do=ptr["do"], ptr_lse=ptr["lse"], ptr_d=ptr["d"], scalar=scale,
        log2e=1.4426950408889634, seqlen_q=sq, Ts=ts * S["k"][0] * 2, Hs_q=S["q"][1] * 2, BAs_q=S["q"][2] * 2,
        Seqs_q=S["q"][0] * 2, ratio=hq // hk, Hs_k=S["k"][1] * 2, BAs_k=S["k"][2] * 2, Seqs_k=S["k"][0] * 2,
        Seqs_dk=S["dk"][0] * 2, seqlen_k=sk, head_dim_q=hq_, head_dim_v=hv_, nhead_q=hq, Hs_v=S["v"][1] * 2,
        BAs_v=S["v"][2] * 2, Seqs_v=S["v"][0] * 2, Hs_do=S["do"][1] * 2, BAs_do=S["do"][2] * 2,
        Seqs_do=S["do"][0] * 2, Hs_dk=S["dk"][1] * 2, BAs_dk=S["dk"][2] * 2, Hs_dv=S["dv"][1] * 2,
        BAs_dv=S["dv"][2] * 2, Seqs_dv=S["dv"][0] * 2, Hs_lsed=lsed[0] * 4, ptr_qseq=qseq, ptr_kseq=kseq,
        ptr_qseq_padded=seqq, ptr_kseq_padded=seqk, max_seqlen_dq=msq if a32 else -(-msq // 16) * 16)))
    if post is not None:
        es = ws["element_size"]
        out.append(launch("post", post, (-(-msq // _i(post, "ts")), hq, b), dict(
            ptr_dq_acc=ws["ptr"], ptr_dq=ptr["dq"], Hs_dq_acc=ws["nhead_stride"] * es,
            BAs_dq_acc=ws["batch_stride"] * es, Seqs_dq_acc=ws["stride"] * es, Hs_dq=S["dq"][1] * 2,
            BAs_dq=S["dq"][2] * 2, Seqs_dq=S["dq"][0] * 2, seqlen_q=sq, head_dim=hq_, ptr_qseq=qseq,
            ptr_qseq_padded=seqq)))
    return {"launches": out, "workspace": ws}
