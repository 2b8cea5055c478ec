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

`run_launches` runs one call's launches (each: code object, kernel, grid, block, kernarg bytes as
some host packed them with its own pointer values) on a backend, moving the host's pointers onto
device copies of the tensors they point into. `sum_gqa` is aiter's torch wrapper's last step: dK and
dV come out per query head and are summed over each key/value head's group.
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
KERNARG_BYTES = {st: SLOT * len(f) for st, f in STAGE_ARGS.items()}          # 256, 704, 192
# the four manifests aiter's codegen reads (hsa/gfx950/fmha_v3_bwd/), by stage; post: a32, a16
MANIFESTS = {"pre": "fmha_bwd_odo.csv", "dqdkdv": "fmha_bwd_dqdkdv.csv",
             "post": ("fmha_bwd_dq_convert.csv", "fmha_bwd_dq_shuffle.csv")}
WORKGROUP = 256                             # every stage: aiter launches 256x1x1 on gfx950
LDS_LIMIT = 160 * 1024


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
    flat = torch.empty(0, dtype=t.dtype).set_(t.untyped_storage())
    return flat, t.storage_offset()


def run_launches(launches, buffers: dict, backend: str = "emu", **launch_kw) -> list:
    """Run `launches` in order. buffers: {address the host packed: tensor or array} (whole buffers:
    a pointer anywhere inside one is moved onto its device copy with the same offset). Each launch
    gets the buffers its pointer fields point into; results are copied back after each launch, so
    the next one sees them. Returns the LaunchResults."""
    from .run import launch
    from .run.args import as_numpy
    spans = sorted((int(a), int(as_numpy(t).nbytes), t) for a, t in buffers.items())
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
