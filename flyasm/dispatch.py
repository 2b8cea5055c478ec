"""aiter-style kernel sets: build every variant of a parameter grid, and pick one at run time.

A kernel file declares its grid next to its builder:

    VARIANTS = [dict(dtype=d, causal=c) for d in ("bf16", "f16") for c in (False, True)]
    def build(dtype="bf16", causal=False) -> Kernel: ...
    def manifest_row(**params) -> dict:      # optional: the aiter columns of one variant
        return {"dtype": ..., "hdim_q": 128, "hdim_v": 128, "mask": 2 if params["causal"] else 0, ...}

(`VARIANTS` may also be a function returning the list; `FILE.py:NAME` picks another grid.)

`build_set(spec, out_dir)` builds each variant (in worker processes) into `out_dir/CO_NAME` and
writes a CSV manifest (or several: a manifest_row() may name its row's CSV in a `manifest` cell, as
aiter's backward reads four, one per stage) laid out like aiter's `hsa/gfx950/fmha_v3_fwd/fmha_fwd.csv`
(`dtype,hdim_q,hdim_v,mask,mode,bf16_cvt,ts_qo,ts_kv,knl_name,co_name`; there `mask` is 0 for no
mask and 2 for causal bottom-right, `mode` 0 for batch and 1 for group/varlen). Our column order
puts the two names first, then the aiter columns a variant fills, then any other column, then
`block` (workgroup size) and `params` (the build parameters as JSON, so a row can be rebuilt).
Same grid and same sources give the same bytes and the same CSV.

`Dispatcher(manifest)` reads such a CSV and selects the row for a call (`select(dtype=..., causal=...)`;
an empty cell matches anything), then launches its `.co` through `flyasm.run.launch`.
"""
from __future__ import annotations

import csv
import importlib.util
import io
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from .errors import FlyasmError

AITER_COLUMNS = ("dtype", "hdim_q", "hdim_v", "mask", "mode", "bf16_cvt", "ts_qo", "ts_kv")
NAME_COLUMNS = ("knl_name", "co_name")
TAIL_COLUMNS = ("block", "params")
# aiter's mask codes (mask_enum): 0 none, 1 causal top-left (torch's is_causal), 2 causal bottom-right
MASK_NONE, MASK_TOP_LEFT, MASK_BOTTOM_RIGHT = 0, 1, 2


class DispatchError(FlyasmError):
    """A kernel set that cannot be built, read, or that has no kernel for a call."""

    def __init__(self, message: str):
        super().__init__(message, find_loc=False)


# ---- loading a grid ----------------------------------------------------------------------------
_MODULES: dict[str, object] = {}


def load_module(path: str | Path):
    """Import a kernel file by path (once per process)."""
    p = Path(path).resolve()
    if not p.is_file():
        raise DispatchError(f"kernel file {path} does not exist")
    key = str(p)
    if key not in _MODULES:
        import hashlib
        name = f"flyasm_set_{p.stem}_{hashlib.sha1(key.encode()).hexdigest()[:8]}"
        spec = importlib.util.spec_from_file_location(name, p)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod          # before exec: dataclasses look their module up
        spec.loader.exec_module(mod)
        _MODULES[key] = mod
    return _MODULES[key]


def parse_spec(spec: str) -> tuple[Path, str]:
    path, _, grid = str(spec).partition(":")
    return Path(path), grid or "VARIANTS"


def load_grid(spec: str) -> tuple[object, str, list[dict]]:
    """(module, grid name, list of parameter dicts) for `FILE.py[:GRID]`."""
    path, grid = parse_spec(spec)
    mod = load_module(path)
    if not hasattr(mod, grid):
        raise DispatchError(f"{path} has no grid '{grid}' (declare VARIANTS = [dict(...), ...] or pass FILE.py:NAME)")
    if not callable(getattr(mod, "build", None)):
        raise DispatchError(f"{path} has no build(**params) function")
    g = getattr(mod, grid)
    variants = list(g() if callable(g) else g)
    if not variants:
        raise DispatchError(f"grid {path}:{grid} is empty")
    for i, p in enumerate(variants):
        if not isinstance(p, dict):
            raise DispatchError(f"grid {path}:{grid} entry {i} is {type(p).__name__}, not a dict of build parameters")
    return mod, grid, [dict(p) for p in variants]


# ---- one manifest row --------------------------------------------------------------------------
def _cell(v) -> str:
    if isinstance(v, bool):
        return str(int(v))               # aiter writes flags as 0/1
    if v is None:
        return ""
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def default_row(params: dict) -> dict:
    """Columns from the build parameters when the kernel file has no manifest_row():
    `causal` becomes aiter's `mask` code (top-left, as torch), everything else keeps its name."""
    row = {}
    for k, v in params.items():
        if k == "causal" and "mask" not in params:
            row["mask"] = MASK_TOP_LEFT if v else MASK_NONE
        else:
            row[k] = v
    return row


def variant_row(mod, params: dict, kernel) -> dict:
    fn = getattr(mod, "manifest_row", None)
    row = dict(fn(**params)) if callable(fn) else default_row(params)
    row.setdefault("knl_name", kernel.name)
    if row["knl_name"] != kernel.name:
        raise DispatchError(f"manifest_row() names kernel '{row['knl_name']}' but build() made '{kernel.name}'")
    row.setdefault("co_name", f"{kernel.name}.co")
    b = kernel.block
    row["block"] = str(b[0]) if b[1:] == (1, 1) else "x".join(map(str, b))
    row["params"] = json.dumps(params, sort_keys=True, separators=(",", ":"), default=str)
    return {k: _cell(v) for k, v in row.items()}


def columns_of(rows: list[dict]) -> list[str]:
    seen: list[str] = []
    for r in rows:
        for k in r:
            if k not in seen:
                seen.append(k)
    aiter = [c for c in AITER_COLUMNS if c in seen]
    extra = [c for c in seen if c not in NAME_COLUMNS + AITER_COLUMNS + TAIL_COLUMNS]
    return list(NAME_COLUMNS) + aiter + extra + list(TAIL_COLUMNS)


def manifest_text(rows: list[dict], columns=None) -> str:
    cols = list(columns) if columns else columns_of(rows)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n", restval="", extrasaction="ignore")
    w.writeheader()
    for r in rows:
        w.writerow(r)
    return buf.getvalue()


# ---- building a set ----------------------------------------------------------------------------
@dataclass
class VariantBuild:
    index: int
    params: dict
    row: dict
    co: bytes
    emit_s: float            # build(**params): the Python builder
    asm_s: float             # render + static check + llvm-mc + ld.lld (k.build)


def build_variant(path: str, index: int, params: dict, check: bool = True) -> VariantBuild:
    """Build one variant (runs in a worker process; also usable inline). check=False skips the static
    checker (for kernels still in development; the set is then unchecked)."""
    from .kernel import Kernel
    mod = load_module(path)
    t0 = time.perf_counter()
    try:
        k = mod.build(**params)
    except (TypeError, ValueError, FlyasmError) as e:   # re-raised as one picklable sentence naming the variant
        raise DispatchError(f"{Path(path).name}: build({_fmt_params(params)}) failed: {e}") from None
    t1 = time.perf_counter()
    if not isinstance(k, Kernel):
        raise DispatchError(f"{Path(path).name}: build({_fmt_params(params)}) returned {type(k).__name__}, not a Kernel")
    try:
        res = k.build(check=check)
    except FlyasmError as e:
        raise DispatchError(f"{Path(path).name}: variant {_fmt_params(params)}: {e}") from None
    t2 = time.perf_counter()
    return VariantBuild(index, params, variant_row(mod, params, k), res.co, t1 - t0, t2 - t1)


def _fmt_params(params: dict) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in params.items())


def _pool(jobs: int):
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor
    # fork: workers inherit the imported kernel module (and torch) instead of importing it again
    ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    return ProcessPoolExecutor(max_workers=jobs, mp_context=ctx)


@dataclass
class SetResult:
    out_dir: Path
    manifest: Path                       # the first manifest written
    builds: list[VariantBuild] = field(default_factory=list)
    wall_s: float = 0.0
    manifests: list[Path] = field(default_factory=list)   # every manifest, in order of first row


def build_set(spec: str, out_dir, *, jobs: int | None = None, manifest: str | None = None,
              progress: bool = True, check: bool = True) -> SetResult:
    """Build every variant of `FILE.py[:GRID]` into out_dir and write the CSV manifest."""
    from .asm.driver import atomic_write
    t0 = time.perf_counter()
    path, _ = parse_spec(spec)
    mod, grid, variants = load_grid(spec)
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(variants)))
    out = Path(out_dir)
    builds: list[VariantBuild | None] = [None] * len(variants)
    desc = f"{path.name}:{grid}"
    if jobs == 1:
        from tqdm import tqdm
        for i, p in enumerate(tqdm(variants, desc=desc, unit="kernel", disable=not progress or None)):
            builds[i] = build_variant(str(path), i, p, check)
    else:
        from concurrent.futures import as_completed

        from tqdm import tqdm
        with _pool(jobs) as ex:
            futs = [ex.submit(build_variant, str(path), i, p, check) for i, p in enumerate(variants)]
            bar = tqdm(total=len(futs), desc=desc, unit="kernel", disable=not progress or None)
            try:
                for f in as_completed(futs):
                    b = f.result()
                    builds[b.index] = b
                    bar.update(1)
            except BaseException:
                for f in futs:
                    f.cancel()
                raise
            finally:
                bar.close()
    # names must identify variants: two variants writing one file would make the manifest lie
    by_co: dict[str, VariantBuild] = {}
    for b in builds:
        prev = by_co.get(b.row["co_name"])
        if prev is not None:
            raise DispatchError(f"variants {_fmt_params(prev.params)} and {_fmt_params(b.params)} both produce "
                                f"{b.row['co_name']}; give the kernels distinct names")
        by_co[b.row["co_name"]] = b
    default = manifest or getattr(mod, "MANIFEST", None) or f"{path.stem}.csv"
    # MANIFESTS: every manifest of the set, written even without rows (aiter's codegen reads all)
    groups: dict[str, list[dict]] = {n: [] for n in getattr(mod, "MANIFESTS", ())}
    for b in builds:
        row = dict(b.row)
        groups.setdefault(row.pop("manifest", "") or default, []).append(row)
    for b in builds:
        atomic_write(out / b.row["co_name"], b.co)
    columns = getattr(mod, "MANIFEST_COLUMNS", None)
    paths = []
    for name, rows in groups.items():
        mpath = out / name
        paths.append(mpath)
        if columns:
            # the CSV keeps only the declared columns (aiter's codegen pastes every column into C++);
            # the full rows (block, params, extra columns) go to the sidecar the Dispatcher reads
            missing = [c for c in columns if c not in columns_of(rows)]
            if missing and rows:
                raise DispatchError(f"{path.name}: MANIFEST_COLUMNS lists {', '.join(missing)}, which the "
                                    f"manifest_row() of {name}'s rows do not fill")
            atomic_write(mpath, manifest_text(rows, columns))
            atomic_write(sidecar_path(mpath), json.dumps(rows, indent=1, sort_keys=True) + "\n")
        else:
            atomic_write(mpath, manifest_text(rows))
    return SetResult(out, paths[0], builds, time.perf_counter() - t0, paths)


def sidecar_path(manifest: Path) -> Path:
    """Where build_set keeps the full rows of a manifest restricted to MANIFEST_COLUMNS."""
    return Path(manifest).with_suffix(".flyasm.json")


# ---- selecting and launching -------------------------------------------------------------------
@dataclass
class Entry:
    """One manifest row: its cells, and the code object it names."""
    row: dict
    path: Path

    @property
    def knl_name(self) -> str:
        return self.row["knl_name"]

    @property
    def params(self) -> dict:
        return json.loads(self.row["params"]) if self.row.get("params") else {}

    @property
    def block(self) -> tuple[int, ...] | None:
        b = self.row.get("block", "")
        return tuple(int(x) for x in b.split("x")) if b else None

    @property
    def co(self) -> bytes:
        if not self.path.is_file():
            raise DispatchError(f"manifest row {self.knl_name} names {self.path}, which does not exist")
        return self.path.read_bytes()

    def launch(self, grid, block=None, *args, backend: str = "emu", **kw):
        """flyasm.run.launch of this row's code object (grid in workgroups); `block` defaults to the manifest's."""
        from .run import launch
        block = block if block is not None else self.block
        if block is None:
            raise DispatchError(f"manifest row {self.knl_name} has no block size; pass block=")
        return launch(self.co, grid, block, *args, backend=backend, kernel=self.knl_name, **kw)


def _norm(v) -> str:
    return _cell(v)


class Dispatcher:
    """Kernel selection over a manifest written by build_set (or by hand, aiter-style)."""

    def __init__(self, manifest):
        p = Path(manifest)
        if p.is_dir():
            csvs = sorted(p.glob("*.csv"))
            if len(csvs) != 1:
                raise DispatchError(f"{p} holds {len(csvs)} .csv manifests; pass the one to use")
            p = csvs[0]
        if not p.is_file():
            raise DispatchError(f"manifest {manifest} does not exist")
        self.path = p
        with p.open(newline="") as f:
            reader = csv.DictReader(f)
            self.columns = list(reader.fieldnames or [])
            self.rows = [dict(r) for r in reader]
        side = sidecar_path(p)
        if side.is_file():                   # full rows of a restricted (aiter-only-columns) manifest
            try:
                full = {r["co_name"]: r for r in json.loads(side.read_text())}
            except (ValueError, KeyError, TypeError):
                raise DispatchError(f"{side} is not a list of manifest rows") from None
            for r in self.rows:
                extra = full.get(r.get("co_name"), {})
                r.update({k: v for k, v in extra.items() if k not in r})
            self.columns += [c for c in columns_of(list(full.values())) if c not in self.columns]
        missing = [c for c in NAME_COLUMNS if c not in self.columns]
        if missing:
            raise DispatchError(f"manifest {p} lacks column(s) {', '.join(missing)} (has {', '.join(self.columns)})")
        if not self.rows:
            raise DispatchError(f"manifest {p} lists no kernels")

    def _query(self, query: dict) -> dict:
        q = {}
        for k, v in query.items():
            if k == "causal" and "causal" not in self.columns and "mask" in self.columns:
                k, v = "mask", MASK_TOP_LEFT if v else MASK_NONE
            if k not in self.columns:
                raise DispatchError(f"manifest {self.path.name} has no column '{k}' "
                                    f"(columns: {', '.join(self.columns)})")
            q[k] = _norm(v)
        return q

    def _describe(self, rows: list[dict], keys: list[str]) -> str:
        return "; ".join(" ".join(f"{k}={r.get(k) or '*'}" for k in keys) + f" ({r['co_name']})" for r in rows)

    def select(self, **query) -> Entry:
        """The one row whose cells equal the query (empty cells match anything); the row with the
        most exact matches wins; a tie or no match is an error that lists what exists."""
        q = self._query(query)
        scored = []
        for r in self.rows:
            if all(r.get(k, "") in ("", v) for k, v in q.items()):
                scored.append((sum(r.get(k, "") == v for k, v in q.items()), r))
        want = ", ".join(f"{k}={v}" for k, v in q.items()) or "(no constraints)"
        varying = [c for c in self.columns if c not in ("knl_name", "co_name", "params")
                   and len({r.get(c, "") for r in self.rows}) > 1]
        keys = list(dict.fromkeys(list(q) + varying))
        if not scored:
            raise DispatchError(f"no kernel in {self.path.name} matches {want}; it has: "
                                f"{self._describe(self.rows, keys)}")
        best = max(s for s, _ in scored)
        top = [r for s, r in scored if s == best]
        if len(top) > 1:
            diff = [c for c in varying if len({r.get(c, '') for r in top}) > 1] or varying
            raise DispatchError(f"{len(top)} kernels in {self.path.name} match {want}; choose with "
                                f"{', '.join(diff)}: {self._describe(top, diff)}")
        return Entry(top[0], self.path.parent / top[0]["co_name"])

    def launch(self, query: dict, grid, block=None, *args, backend: str = "emu", **kw):
        """select(**query).launch(grid, block, *args, backend=...)."""
        return self.select(**query).launch(grid, block, *args, backend=backend, **kw)

    def __len__(self) -> int:
        return len(self.rows)


# ---- flyasm.attention: the one-line entry point -------------------------------------------------
ATTENTION_SET_ENV = "FLYASM_ATTENTION_SET"
ATTENTION_BWD_SET_ENV = "FLYASM_ATTENTION_BWD_SET"
_REPO = Path(__file__).resolve().parents[1]
_ATTN_SET = _REPO / "kernels" / "fa_fwd_set.py"
_BWD_SET = _REPO / "kernels" / "fa_bwd_set.py"
_DISPATCHERS: dict[str, Dispatcher] = {}


def _attention_set_dir() -> Path:
    """The default attention set: $FLYASM_ATTENTION_SET, else built once (checked) into the cache
    under a hash of the kernel and flyasm sources and the toolchain."""
    return _cached_set(_ATTN_SET, ATTENTION_SET_ENV, "fmha_fwd.csv", "fa_fwd")


def _attention_bwd_set_dir() -> Path:
    """The default attention-backward set (kernels/fa_bwd_set.py): $FLYASM_ATTENTION_BWD_SET, else
    built once into the cache, as the forward's."""
    return _cached_set(_BWD_SET, ATTENTION_BWD_SET_ENV, "fmha_bwd_dqdkdv.csv", "fa_bwd")


def _cached_set(set_file: Path, env_var: str, manifest: str, prefix: str) -> Path:
    import hashlib

    from .asm.driver import cache_dir
    from .asm.toolchain import find_toolchain
    env = os.environ.get(env_var)
    if env:
        return Path(env)
    if not set_file.is_file():
        raise DispatchError(f"{set_file} is missing: build a set with `flyasm build-set` and set ${env_var} or "
                            f"pass kernels=")
    h = hashlib.sha256(find_toolchain().version.encode())
    for p in sorted(list(set_file.parent.glob("fa_*.py")) + list(Path(__file__).parent.rglob("*.py"))):
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    out = cache_dir() / "sets" / f"{prefix}-{h.hexdigest()[:16]}"
    if not (out / manifest).is_file():
        build_set(str(set_file), out, jobs=min(2, os.cpu_count() or 1), progress=True)
    return out


def aiter_fwd_values(q, k, v, out, lse, scale: float, seqstart_q=0, seqstart_k=0, seqlen_q=None, seqlen_k=None,
                     ts_qo: int = 256, nhead_stride_lse: int | None = None, causal: bool = False) -> dict:
    """Values of aiter's fmha_fwd_v3_args fields (kernel argument names of kernels/fa_fwd.py), as
    aiter's init_fmha_fwd_v3_args sets them: strides in bytes (each tensor's own element size: fp8
    q/k/v with bf16 o), s_gqa = Hq/Hkv; descale pointers (fp8) default to none.
    Batch mode: q/out [B, Sq, Hq, D] views, k/v [B, Sk, Hkv, D] views (any strides), lse [B, Hq, Sq].
    Group mode (seqstart_* given): q/out [total_q, Hq, D], k/v [total_k, Hkv, D], lse [Hq, total_q]."""
    group = not isinstance(seqstart_q, int)
    if group:
        (sq_, sh_), (kq_, kh_), (vq_, vh_), (oq_, oh_) = (t.stride()[:2] for t in (q, k, v, out))
        qb = kb = vb = ob = 0
        hq, hkv = q.shape[1], k.shape[1]
    else:
        qb, sq_, sh_ = q.stride()[:3]
        kb, kq_, kh_ = k.stride()[:3]
        vb, vq_, vh_ = v.stride()[:3]
        ob, oq_, oh_ = out.stride()[:3]
        hq, hkv = q.shape[2], k.shape[2]
        seqlen_q, seqlen_k = q.shape[1], k.shape[1]
    d = q.shape[-1]
    es, eo = q.element_size(), out.element_size()
    opt = 3 if causal and (hq % 8 or seqlen_q > 16384) else 5      # aiter's tune_opt hint (not read by us)
    return {"o": out, "q": q, "k": k, "v": v, "lse": lse, "scale": float(scale), "seqlen_q": seqlen_q,
            "q_ss": sq_ * es, "q_ts": ts_qo * sq_ * es, "q_hs": sh_ * es, "q_bs": qb * es, "gqa": hq // hkv,
            "k_ss": kq_ * es, "k_hs": kh_ * es, "k_bs": kb * es, "opt": opt, "has_lse": 1, "seqlen_k": seqlen_k,
            "qk_head_dim": d, "v_head_dim": v.shape[-1], "q_head_num": hq,
            "v_ss": vq_ * es, "v_hs": vh_ * es, "v_bs": vb * es,
            "o_ss": oq_ * eo, "o_hs": oh_ * eo, "o_bs": ob * eo,
            "qseq": seqstart_q, "kseq": seqstart_k, "qseq_pad": seqstart_q, "kseq_pad": seqstart_k,
            "lse_hs": (lse.stride(-2) if nhead_stride_lse is None else nhead_stride_lse) * 4,
            "q_descale": 0, "k_descale": 0, "v_descale": 0,
            "dq_bs": 0, "dq_hs": 0, "dk_bs": 0, "dk_hs": 0, "dv_bs": 0, "dv_hs": 0}


def aiter_grid(seqlen_q: int, nhead_q: int, batch: int, ts_qo: int, causal: bool, group: bool = False):
    """aiter's get_grid_dim on gfx950: tg_div = 2 for a causal call (two Q tiles per workgroup)."""
    tiles = (-(-seqlen_q // ts_qo) + (1 if causal else 0)) // (2 if causal else 1)
    return (nhead_q, batch, tiles) if group else (tiles, nhead_q, batch)


CAUSAL_KINDS = (False, True, "top_left", "bottom_right")


def attention(q, k, v, causal=False, scale: float | None = None, *, backend: str = "emu",
              kernels=None, return_lse: bool = False, descale=None, bwd_kernels=None):
    """Attention on torch tensors, differentiable: when q, k or v requires grad (and grad mode is on)
    the result carries a backward that runs the attention-backward set (attention_backward:
    kernels/fa_bwd_set.py, or the directory `bwd_kernels`) on the same backend; lse is not
    differentiated. The forward: attention_forward (its docstring says what it takes)."""
    import torch
    if not (torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in (q, k, v))):
        return attention_forward(q, k, v, causal, scale, backend=backend, kernels=kernels, return_lse=return_lse,
                                 descale=descale)
    if q.dtype == torch.float8_e4m3fn or descale is not None:
        raise DispatchError("fp8 attention is forward only: the backward set takes bf16 or f16 q, k, v")
    out, lse = _attention_function().apply(q, k, v, causal, scale, backend, kernels, bwd_kernels)
    return (out, lse) if return_lse else out


_FUNCTION = []


def _attention_function():
    """The torch.autograd.Function of attention (made once: torch is imported lazily)."""
    if _FUNCTION:
        return _FUNCTION[0]
    import torch

    class AttentionFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, causal, scale, backend, kernels, bwd_kernels):
            out, lse = attention_forward(q, k, v, causal, scale, backend=backend, kernels=kernels, return_lse=True)
            ctx.save_for_backward(q, k, v, out, lse)
            ctx.config = (causal, scale, backend, bwd_kernels)
            ctx.mark_non_differentiable(lse)
            return out, lse

        @staticmethod
        def backward(ctx, dout, _dlse):
            q, k, v, out, lse = ctx.saved_tensors
            causal, scale, backend, bwd_kernels = ctx.config
            # autograd's dO may be any view (a broadcast of ones has stride 0): the kernels take rows
            dq, dk, dv = attention_backward(q.contiguous(), k.contiguous(), v.contiguous(), out, lse,
                                            dout.contiguous(), causal, scale, backend=backend, kernels=bwd_kernels)
            return dq, dk, dv, None, None, None, None, None

    _FUNCTION.append(AttentionFunction)
    return AttentionFunction


def attention_backward(q, k, v, out, lse, dout, causal=False, scale: float | None = None, *, backend: str = "emu",
                       kernels=None, atomic32: bool | None = None):
    """dQ, dK, dV of attention: q [B, Hq, Sq, D], k/v [B, Hkv, Sk, D], out and dout [B, Hq, Sq, D] (bf16 or
    f16, one dtype), lse [B, Hq, Sq] float32 (natural log: attention(..., return_lse=True)), as
    attention() takes them (causal, scale alike). Runs aiter's three-launch pipeline (pre, dQ/dK/dV,
    post: flyasm/aiter_bwd.py) of the backward set `kernels` (a directory built from
    kernels/fa_bwd_set.py; default _attention_bwd_set_dir) on `backend` ('emu' or 'hip'), packed as
    aiter's host code packs it (flyasm.aiter_bwd.pack). atomic32: accumulate dQ in fp32 (True) or in
    q's dtype (False); default aiter's choice (its torch wrapper: q's dtype when Sk <= 256 and
    64 < D <= 128). Every tensor needs a unit stride along D and 16-byte aligned strides. Returns
    dq [B, Hq, Sq, D] and dk, dv [B, Hkv, Sk, D] (summed over each query-head group, in fp32)."""
    import math

    import torch

    from . import aiter_bwd
    named = dict(q=q, k=k, v=v, out=out, dout=dout)
    for n, t in list(named.items()) + [("lse", lse)]:
        if not isinstance(t, torch.Tensor) or t.dim() != (3 if n == "lse" else 4):
            raise DispatchError(f"attention_backward takes 4-D torch tensors [B, H, S, D] and lse [B, H, S]; {n} "
                                f"is {tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__}")
    if q.dtype not in (torch.bfloat16, torch.float16) or any(t.dtype != q.dtype for t in named.values()):
        raise DispatchError(f"the attention backward takes bf16 or f16 q, k, v, out, dout of one dtype, not "
                            f"{', '.join(str(t.dtype).replace('torch.', '') for t in named.values())}")
    if lse.dtype != torch.float32:
        raise DispatchError(f"lse is float32 (attention(..., return_lse=True)), not {lse.dtype}")
    B, Hq, Sq, D = q.shape
    Hkv, Sk = k.shape[1], k.shape[2]
    if k.shape != (B, Hkv, Sk, D) or v.shape[:3] != (B, Hkv, Sk) or out.shape != (B, Hq, Sq, v.shape[3]) \
            or dout.shape != out.shape or lse.shape != (B, Hq, Sq):
        raise DispatchError(f"shapes do not agree: q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}, out "
                            f"{tuple(out.shape)}, dout {tuple(dout.shape)}, lse {tuple(lse.shape)}")
    if Hq % Hkv:
        raise DispatchError(f"query heads ({Hq}) must be a multiple of key/value heads ({Hkv})")
    for n, t in list(named.items()) + [("lse", lse)]:
        es = t.element_size() if n != "lse" else 16          # lse is read element by element
        if t.stride(-1) != 1 or any(st * es % 16 for st in t.stride()[:-1]):
            raise DispatchError(f"{n} has strides {t.stride()}; the backward kernels read rows of unit stride"
                                + ("" if n == "lse" else " with 16-byte aligned row, head and batch strides")
                                + f" (pass {n}.contiguous())")
    if not any(causal is c or (isinstance(c, str) and causal == c) for c in CAUSAL_KINDS):
        raise DispatchError(f"causal is False, True, 'top_left' or 'bottom_right', not {causal!r}")
    mask = MASK_NONE if causal is False else MASK_BOTTOM_RIGHT if causal == "bottom_right" or Sq == Sk \
        else MASK_TOP_LEFT
    if atomic32 is None:
        atomic32 = not (Sk <= 256 and 64 < D <= 128)
    set_dir = Path(kernels) if kernels is not None else _attention_bwd_set_dir()
    scale = 1.0 / math.sqrt(D) if scale is None else float(scale)
    try:
        res = aiter_bwd.backward(lambda **call: aiter_bwd.pack(set_dir, **call), *(t.transpose(1, 2) for t in (
            q, k, v, out, dout)), lse, mask_type=mask, atomic32=atomic32, scale=scale, backend=backend)
    except aiter_bwd.BwdError as e:
        raise DispatchError(str(e)) from None
    return res["dq"].transpose(1, 2), res["dk"].transpose(1, 2), res["dv"].transpose(1, 2)


def attention_forward(q, k, v, causal=False, scale: float | None = None, *, backend: str = "emu",
                      kernels=None, return_lse: bool = False, descale=None):
    """Attention forward on torch tensors q [B, Hq, Sq, D], k [B, Hkv, Sk, D], v [B, Hkv, Sk, Dv] (bf16
    or f16, as torch's scaled_dot_product_attention; the set has D = Dv = 128 and bf16 D = 192 with
    Dv = 128) through the aiter-convention set (kernels/fa_fwd_set.py:
    `kernels` is a manifest/dir/Dispatcher, default see _attention_set_dir), launched on `backend`.
    causal: False; True or "top_left" (torch's is_causal: query i sees keys 0..i); "bottom_right"
    (CK/aiter mask 2: keys 0..i + Sk - Sq). The two coincide when Sq == Sk, and top-left with
    Sq != Sk needs a mask-1 kernel in the set. Returns out [B, Hq, Sq, Dv] (and lse [B, Hq, Sq] float32).
    fp8: q, k, v torch.float8_e4m3fn (OCP E4M3, gfx950's fp8) with descale=(dq, dk, dv) (default 1s):
    the inputs are q*dq, k*dk, v*dv (aiter's fp8bf16 keys, per-tensor descales); out is bf16."""
    import math

    import torch
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.dim() != 4:
            raise DispatchError(f"attention() takes 4-D torch tensors [B, H, S, D]; {name} is "
                                f"{tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__}")
    if not any(causal is c or (isinstance(c, str) and causal == c) for c in CAUSAL_KINDS):
        raise DispatchError(f"causal is False, True, 'top_left' or 'bottom_right', not {causal!r}")
    dtypes = {torch.bfloat16: "bf16", torch.float16: "f16", torch.float8_e4m3fn: "fp8bf16"}
    if q.dtype not in dtypes or k.dtype != q.dtype or v.dtype != q.dtype:
        raise DispatchError(f"attention() takes bf16, f16 or float8_e4m3fn q, k, v of one dtype, not {q.dtype}, "
                            f"{k.dtype}, {v.dtype}")
    fp8 = q.dtype == torch.float8_e4m3fn
    if descale is not None and not fp8:
        raise DispatchError("descale=(dq, dk, dv) goes with float8_e4m3fn q, k, v")
    B, Hq, Sq, D = q.shape
    Dv = v.shape[3]
    if k.shape[:3] != v.shape[:3] or k.shape[0] != B or k.shape[3] != D:
        raise DispatchError(f"k must be [B={B}, Hkv, Sk, D={D}] and v [B={B}, Hkv, Sk, Dv]; got {tuple(k.shape)} "
                            f"and {tuple(v.shape)}")
    Hkv, Sk = k.shape[1], k.shape[2]
    if Hq % Hkv:
        raise DispatchError(f"query heads ({Hq}) must be a multiple of key/value heads ({Hkv})")
    if isinstance(kernels, Dispatcher):
        d = kernels
    else:
        key = str(Path(kernels) if kernels is not None else _attention_set_dir())
        d = _DISPATCHERS.get(key) or _DISPATCHERS.setdefault(key, Dispatcher(key))
    if causal is False:
        mask = MASK_NONE
    elif causal == "bottom_right" or Sq == Sk:     # equal lengths: top-left is bottom-right (aiter's key)
        mask = MASK_BOTTOM_RIGHT
    else:
        mask = MASK_TOP_LEFT
    query = dict(dtype=dtypes[q.dtype], hdim_q=D, hdim_v=Dv, mask=mask, mode=0)
    try:
        e = d.select(**query)
    except DispatchError as err:
        if mask != MASK_TOP_LEFT:
            raise
        raise DispatchError(f"causal=True is top-left (torch) and seqlen_q {Sq} != seqlen_k {Sk}, but the set has "
                            f"no top-left (mask 1) kernel: pass causal='bottom_right' for aiter's convention "
                            f"({err})") from None
    ts_qo = int(e.row.get("ts_qo") or 256)
    scale = 1.0 / math.sqrt(D) if scale is None else float(scale)
    q, k, v = (t.contiguous() for t in (q, k, v))            # the launcher copies whole buffers
    out = torch.full((B, Hq, Sq, Dv), float("nan"), dtype=torch.bfloat16 if fp8 else q.dtype)   # poisoned
    lse = torch.full((B, Hq, Sq), float("nan"), dtype=torch.float32)
    # aiter's layout is [batch, seqlen, nhead, hdim]: pass transposed views, strides say the rest
    vals = aiter_fwd_values(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), out.transpose(1, 2), lse,
                            scale, ts_qo=ts_qo, causal=mask != MASK_NONE)
    vals.update(o=out, q=q, k=k, v=v)                        # the buffers themselves (the views share them)
    if fp8:                                                  # bytes for the launcher; descales as float32 scalars
        vals.update({n: t.view(torch.uint8) for n, t in (("q", q), ("k", k), ("v", v))})
        vals.update({f"{n}_descale": torch.tensor([float(x)], dtype=torch.float32)
                     for n, x in zip("qkv", (1.0, 1.0, 1.0) if descale is None else descale)})
    from .codeobj.reader import read_code_object
    co = read_code_object(e.path)
    md = next((kk.metadata for kk in co.kernels if kk.name == e.knl_name), None)
    names = [a.get(".name") for a in (md or {}).get(".args", []) if not a[".value_kind"].startswith("hidden_")]
    unknown = [n for n in names if n not in vals]
    if not names or unknown:
        raise DispatchError(f"{e.path.name}: kernel arguments {unknown or names} are not aiter attention arguments")
    block = e.block or (512,)
    grid = aiter_grid(Sq, Hq, B, ts_qo, causal=mask != MASK_NONE)
    e.launch(grid, block, *[vals[n] for n in names], backend=backend)
    return (out, lse) if return_lse else out
