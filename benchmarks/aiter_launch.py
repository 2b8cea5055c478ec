"""aiter's own host code for the measured rows: the fmha_v3_fwd kernarg bytes and grid (compiled once
from ../shared/aiter/client, the same steps as its drop_in.sh, cached), and the GEMM KernelArgs
packed from the launcher structs in aiter's csrc/py_itfs_cu/asm_gemm_a16w16.cu and
asm_a8w8_blockscale_bpreshuffle.cu (read there; field order and 16-byte padding as in the structs).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "aiter"
CACHE = Path(os.environ.get("FLYASM_CACHE", Path.home() / ".cache" / "flyasm")) / "aiter_host"


def _cxx() -> str:
    cands = sorted(Path("/usr/lib").glob("llvm-*/bin/clang++"), key=lambda p: int(p.parts[3].split("-")[1]))
    return str(cands[-1]) if cands else (shutil.which("clang++") or shutil.which("g++") or "")


def fmha_host(set_dir: Path = SHARED / "gfx950" / "fmha_v3_fwd") -> Path:
    """aiter's host program (codegen + lookup + packing) for the kernel set in set_dir, built once."""
    client = SHARED / "client"
    key = hashlib.sha256((set_dir / "fmha_fwd.csv").read_bytes() + (client / "host.cpp").read_bytes()).hexdigest()[:16]
    exe = CACHE / key / "host"
    if exe.exists():
        return exe
    with tempfile.TemporaryDirectory() as tmp:
        w = Path(tmp)
        _codegen(w, "fmha_v3_fwd", [set_dir / "fmha_fwd.csv"])
        exe.parent.mkdir(parents=True, exist_ok=True)
        # built under a private name, then renamed: a concurrent caller never runs a half-written file
        tmp_exe = exe.with_name(f"host.{os.getpid()}")
        subprocess.run([_cxx(), "-std=c++17", "-w", f"-I{w / 'out'}", f"-I{client}", str(client / "host.cpp"),
                        "-o", str(tmp_exe)], check=True, capture_output=True)
        os.replace(tmp_exe, exe)
    return exe


def _codegen(w: Path, module: str, manifests: list[Path]) -> None:
    """aiter's hsa/codegen.py -m MODULE run in w as drop_in.sh / drop_in_bwd.sh run it: the set's
    manifests as gfx950's, aiter's own gfx942 ones beside them; the generated headers go to w/out."""
    client = SHARED / "client"
    for arch in ("gfx942", "gfx950"):
        (w / "hsa" / arch / module).mkdir(parents=True)
    (w / "out").mkdir()
    shutil.copy(client / "aiter_src/hsa/codegen.py", w / "hsa")
    for m in (client / "aiter_src/hsa/gfx942" / module).glob("*.csv"):
        shutil.copy(m, w / "hsa/gfx942" / module)
    for m in manifests:
        shutil.copy(m, w / "hsa/gfx950" / module)
    env = dict(os.environ, AITER_GPU_ARCHS="gfx950")
    subprocess.run(["python3", "-W", "ignore", "hsa/codegen.py", "-m", module, "-o", str(w / "out")],
                   cwd=w, env=env, check=True, capture_output=True)


def fmha_pack(set_dir: Path = SHARED / "gfx950" / "fmha_v3_fwd", **kv) -> dict:
    """aiter's answer for one fmha_v3_fwd call: knl_name, co_name, ts_qo, grid, kernarg bytes."""
    out = subprocess.run([str(fmha_host(Path(set_dir))), "pack", *[f"{k}={v}" for k, v in kv.items()]],
                         check=True, capture_output=True, text=True).stdout
    d = json.loads(out)
    d["kernarg"] = bytes.fromhex(d.pop("kernarg_hex"))
    return d


def _struct(fields) -> bytes:
    """aiter's packed KernelArgs: each field padded to 16 bytes (p2 after a pointer, p3 after a 4-byte value)."""
    import struct
    out = b""
    for kind, val in fields:
        out += struct.pack({"ptr": "<Q", "u32": "<I", "f32": "<f"}[kind], val)
        out += bytes(16 - {"ptr": 8, "u32": 4, "f32": 4}[kind])
    return out


def bf16gemm_launch(M: int, N: int, K: int, split: int, tile_m: int, tile_n: int = 64):
    """(grid, block, buffers, kernarg(addrs)) of asm_gemm_a16w16.cu for an fp32 output (is_out_b16=0),
    no bias: A [M, K] bf16, B [N, K] bf16 ('tn'), D [M, N] f32, and with split-K a zeroed
    semaphore of one u32 per output tile (aiter passes one when split > 1)."""
    import numpy as np
    grid = (-(-N // tile_n), -(-M // tile_m), split)
    bufs = {"A": M * K * 2, "B": N * K * 2, "D": M * N * 4}
    if split > 1:                 # launch() refuses a buffer no kernel-argument pointer refers to
        bufs["sem"] = np.zeros(grid[0] * grid[1] + 64, np.uint32)

    def ka(a):
        return _struct([("ptr", a["D"]), ("ptr", 0), ("ptr", a["A"]), ("ptr", a["B"]), ("f32", 1.0), ("f32", 0.0),
                        ("u32", N * 4), ("u32", 0), ("u32", N * 4), ("u32", 0), ("u32", K * 2), ("u32", 0),
                        ("u32", K * 2), ("u32", 0), ("u32", M), ("u32", N), ("u32", K), ("u32", split),
                        ("u32", 0), ("ptr", 0), ("u32", 0), ("ptr", a["sem"] if split > 1 else 0)])
    return grid, 256, bufs, ka


def fp8gemm_launch(M: int, N: int, K: int, split: int, tile_m: int, tile_n: int = 128):
    """(grid, block, buffers, kernarg(addrs)) of asm_a8w8_blockscale_bpreshuffle.cu: A [M, K] fp8,
    B [N, K] fp8 (pre-shuffled, same bytes), C [M, N] bf16, scales per 1x128 (A) and 128x128 (B)
    blocks in f32, a zero bias of N f32."""
    sm, sn, sk = M, -(-N // 128), -(-K // 128)
    grid = ((N // tile_n) * split, -(-M // tile_m), 1)
    bufs = {"A": M * K, "B": N * K, "C": M * N * 2, "sa": sm * sk * 4, "sb": sn * sk * 4, "bias": N * 4}

    def ka(a):
        return _struct([("ptr", a["C"]), ("ptr", a["A"]), ("ptr", a["B"]), ("ptr", a["sa"]), ("ptr", a["sb"]),
                        ("ptr", a["bias"]), ("u32", M), ("u32", N), ("u32", K), ("u32", K), ("u32", K),
                        ("u32", N * 2), ("u32", split), ("u32", sm), ("u32", sn), ("u32", sk)])
    return grid, 256, bufs, ka


# ---- measured rows -> launches -------------------------------------------------------------------
TRACE_SEQLEN = 1024      # attention streams are recorded at this seqlen (batch 1, one head), loops scaled up
TRACE_K_ITERS = 8        # GEMM streams are recorded with about 8 K-steps per split, loops scaled up


def co_index(dirs) -> dict:
    """{symbol or file name: (path, manifest row or None)} from the manifests (knl_name, co_name) and
    the .co files under dirs."""
    import csv
    idx: dict = {}
    for d in dirs:
        d = Path(d)
        for co in d.rglob("*.co"):
            idx.setdefault(co.name, (co, None))
        for man in d.rglob("*.csv"):
            with open(man) as f:
                for row in csv.DictReader(f):
                    if row.get("knl_name") and row.get("co_name"):
                        path = man.parent / row["co_name"]
                        if path.exists():
                            idx[row["knl_name"]] = (path, row)
                            idx.setdefault(row["co_name"], (path, row))
    return idx


def table_kind(columns) -> str | None:
    cols = set(columns)
    if {"seqlen_q", "seqlen_k", "nhead_q", "hdim_q"} <= cols:
        return "fmha"
    if {"M", "N", "K", "splitK", "kernelName", "us"} <= cols:
        return "gemm"
    return None


def row_launch(kind: str, row: dict, idx: dict) -> dict:
    """Everything perf.predict needs for one measured row (raises LookupError naming what is missing)."""
    if kind == "fmha":
        return _fmha_row(row, idx)
    name = row["kernelName"]
    if name not in idx:
        raise LookupError(f"no code object holds kernel {name}")
    path, man = idx[name]
    M, N, K, split = int(row["M"]), int(row["N"]), int(row["K"]), max(1, int(row["splitK"]))
    if "blockscale" in name:
        tm, tn, kb = int(man["tile_m"]), int(man["tile_n"]), 128
        launch = fp8gemm_launch
        dram = M * K + N * K + M * N * 2
    else:
        tm, tn, kb = int(man["tileM"]), int(man["tileN"]), int(man.get("subK") or 64)
        launch = bf16gemm_launch
        dram = 2 * (M * K + N * K) + M * N * 4
    grid, block, full_bufs, full_ka = launch(M, N, K, split, tm, tn)
    kt, scale = split_k_trace(K // kb, split, ceil_rule="blockscale" in name)
    # one row of at most 3 output tiles is recorded (first, interior, last: the sampled ones)
    tgrid, _, bufs, ka = launch(min(M, tm), min(N, 3 * tn), kt * kb, split, tm, tn)
    return dict(co=path.read_bytes(), kernel=name, grid=grid, block=block, trace_grid=tgrid, kernarg=ka, buffers=bufs,
                loop_scale=scale, dram_bytes=dram, flops=2.0 * M * N * K, group=f"K{K}",
                probe={"kernarg": full_ka, "buffers": full_bufs})


def split_k_trace(steps: int, split: int, ceil_rule: bool) -> tuple[int, float]:
    """K-steps to record and the loop scale for a split-K GEMM of `steps` K-steps over `split` splits.
    How the kernels share K out (seen in the emulator): the fp8 block-scale kernels give every split
    ceil(steps/split) and the last what is left (56 over 5: 12,12,12,12,8); the bf16 kernels give
    floor(steps/split) and the last the remainder too (80 over 13: 6 x 12, then 8). The record keeps
    about TRACE_K_ITERS steps per split by taking the same d steps from every split, so the shares
    keep their pattern (which split is longest, by how much); the scale then brings the longest split
    to its real length: with split-K the grid fits in one round, where the longest workgroup sets the
    time."""
    per = -(-steps // split) if ceil_rule else steps // split
    shares = [min(per, steps - per * i) for i in range(split - 1)] + [steps - per * (split - 1)]
    d = max(0, min(steps // split - TRACE_K_ITERS, min(x for x in shares if x > 0) - 1))
    longest = max(shares)
    return steps - split * d, longest / (longest - d)


def _fmha_row(row: dict, idx: dict) -> dict:
    """Any key of aiter's fmha_v3_fwd manifest (dtype bf16 or fp8bf16, head dims, mask, mode = batch or
    group) at the row's shape, for the code object the index names: the kernarg bytes and grid come
    from aiter's host code (drop_in.sh pack) for whichever set the object's manifest belongs to, so
    aiter's kernels and a drop-in set are launched identically."""
    co_name = row.get("co_name") or ""
    name = row.get("kernelName") or ""
    hit = idx.get(co_name) or idx.get(name)
    if hit is None:
        raise LookupError(f"no code object {co_name or name}")
    path = hit[0]
    set_dir = path.parent
    b, hq, hk = int(row["batch"]), int(row["nhead_q"]), int(row["nhead_k"])
    sq, sk, d, dv = int(row["seqlen_q"]), int(row["seqlen_k"]), int(row["hdim_q"]), int(row["hdim_v"])
    mask, group = int(row["mask"]), int(row.get("mode") or 0)
    dtype = row.get("dtype", "bf16")
    common = dict(dtype=dtype, hdim_q=d, hdim_v=dv, mask_type=mask, group=group)
    full = fmha_pack(set_dir, batch=b, nhead_q=hq, nhead_k=hk, seqlen_q=sq, seqlen_k=sk, **common)
    s0q, s0k = min(sq, TRACE_SEQLEN), min(sk, TRACE_SEQLEN)
    small = fmha_pack(set_dir, batch=1, nhead_q=1, nhead_k=1, seqlen_q=s0q, seqlen_k=s0k, **common)
    esz = 1 if dtype.startswith("fp8") else 2          # Q/K/V bytes per element; O is bf16, LSE f32
    bufs = _fmha_buffers(dtype, group, s0q, s0k, d, dv)

    def ka(a):
        return fmha_pack(set_dir, batch=1, nhead_q=1, nhead_k=1, seqlen_q=s0q, seqlen_k=s0k, **common, **a)["kernarg"]
    ts = int(full.get("ts_qo") or 256)
    if mask:        # causal: a workgroup's key blocks total (tiles + 1) per pair, whatever its position
        scale = (sq / ts + 1) / (s0q / ts + 1)
    else:
        scale = sk / s0k
    flops = 2.0 * b * hq * sq * sk * (d + dv) * (0.5 if mask else 1.0)
    dram = esz * b * (sq * hq * d + sk * hk * (d + dv)) + 2 * b * sq * hq * dv + 4 * b * hq * sq
    # aiter's launch width (csrc/cpp_itfs/mha_fwd.cu, fmha_fwd_v3: bdx): 256 threads for hdim 192/128, else 512
    block = 256 if (d, dv) == (192, 128) else 512
    def full_ka(a):
        return fmha_pack(set_dir, batch=b, nhead_q=hq, nhead_k=hk, seqlen_q=sq, seqlen_k=sk, **common, **a)["kernarg"]
    return dict(co=path.read_bytes(), kernel=full["knl_name"], grid=tuple(full["grid"]), block=block,
                trace_grid=tuple(small["grid"]), kernarg=ka, buffers=bufs, loop_scale=scale, dram_bytes=dram,
                flops=flops, group=f"s{sq}",
                probe={"kernarg": full_ka, "buffers": _fmha_probe_buffers(dtype, group, b, hq, hk, sq, sk, d, dv)})


def _fmha_buffers(dtype: str, group: int, sq: int, sk: int, d: int, dv: int) -> dict:
    """The recorded launch's buffers, named as drop_in.sh pack names the pointers (batch 1, one head).
    bf16: byte counts (perf.capture fills them with random bf16 values). fp8: E4M3 values of N(0, 1)
    (random bf16 bytes read as E4M3 would hold NaNs) and per-tensor descales. Group mode: the
    cumulative sequence starts of the one sequence."""
    import numpy as np
    bufs: dict = {"q": sq * d * 2, "k": sk * d * 2, "v": sk * dv * 2, "o": sq * dv * 2, "lse": sq * 4}
    if dtype.startswith("fp8"):
        import torch
        g = torch.Generator().manual_seed(0xF8)
        for n, rows, cols in (("q", sq, d), ("k", sk, d), ("v", sk, dv)):
            bufs[n] = torch.randn(rows * cols, generator=g).to(torch.float8_e4m3fn).view(torch.uint8).numpy()
        for n, val in (("q_descale", 0.75), ("k_descale", 1.25), ("v_descale", 0.5)):
            bufs[n] = np.array([val], np.float32)
    if group:
        bufs.update(seqstarts(1, sq, sk))
    return bufs


def _fmha_probe_buffers(dtype: str, group: int, b: int, hq: int, hk: int, sq: int, sk: int, d: int, dv: int) -> dict:
    """The real launch's buffers for perf.footprint: byte counts (address space only) for the tensors,
    arrays for what the kernel's addresses may depend on (descales, sequence starts)."""
    import numpy as np
    esz = 1 if dtype.startswith("fp8") else 2
    bufs: dict = {"q": b * sq * hq * d * esz, "k": b * sk * hk * d * esz, "v": b * sk * hk * dv * esz,
                  "o": b * sq * hq * dv * 2, "lse": b * hq * sq * 4}
    if dtype.startswith("fp8"):
        for n in ("q_descale", "k_descale", "v_descale"):
            bufs[n] = np.ones(1, np.float32)
    if group:
        bufs.update(seqstarts(b, sq, sk))
    return bufs


def seqstarts(b: int, sq: int, sk: int) -> dict:
    """A group-mode call's cumulative sequence starts (int32, b + 1 each) for b sequences of sq queries
    and sk keys: what aiter's group-mode kernels read through ptr_qseq / ptr_kseq, named as the host
    programs' pack keys (drop_in.sh, drop_in_bwd.sh)."""
    import numpy as np
    return {"seqstart_q": np.arange(b + 1, dtype=np.int32) * sq, "seqstart_k": np.arange(b + 1, dtype=np.int32) * sk}


# ---- attention backward (fmha_v3_bwd): aiter's host code for a set, and running a call --------
BWD_SET = SHARED / "gfx950" / "fmha_v3_bwd"
from flyasm.aiter_bwd import HOST_BASE  # noqa: E402,F401  (the host addresses a call's tensors get)


def fmha_bwd_host(set_dir: Path = BWD_SET) -> tuple[Path, Path]:
    """aiter's backward host program for the set in set_dir (drop_in_bwd.sh's steps: aiter's codegen
    on the set's four manifests with aiter's gfx942 ones beside, host_bwd.cpp compiled with
    ENABLE_CK=0), built once and cached: the build whose uninitialised locals are zero, and the one
    where they are a pattern (0xAA..); the bytes where their kernargs differ are the unset ones."""
    from flyasm.aiter_bwd import MANIFESTS
    client = SHARED / "client"
    names = [MANIFESTS["pre"], MANIFESTS["dqdkdv"], *MANIFESTS["post"]]
    h = hashlib.sha256()
    for p in [set_dir / n for n in names] + sorted((client / "aiter_src").glob("*.in*")) + \
            sorted((client / "aiter_src").glob("*.h")) + [client / "host_bwd.cpp", client / "aiter_src/hsa/codegen.py"]:
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    out = CACHE / f"bwd-{h.hexdigest()[:16]}"
    exes = (out / "host_zero", out / "host_pattern")
    if all(e.exists() for e in exes):
        return exes
    with tempfile.TemporaryDirectory() as tmp:
        w = Path(tmp)
        _codegen(w, "fmha_v3_bwd", [set_dir / n for n in names])
        out.mkdir(parents=True, exist_ok=True)
        for exe, init in zip(exes, ("zero", "pattern")):
            tmp_exe = exe.with_name(f"{exe.name}.{os.getpid()}")     # renamed when whole (concurrent callers)
            subprocess.run([_cxx(), "-std=c++17", "-w", "-DENABLE_CK=0", f"-ftrivial-auto-var-init={init}",
                            f"-I{w / 'out'}", f"-I{client}", str(client / "host_bwd.cpp"), "-o", str(tmp_exe)],
                           check=True, capture_output=True)
            os.replace(tmp_exe, exe)
    return exes


def fmha_bwd_pack(set_dir: Path = BWD_SET, **kv) -> dict:
    """aiter's launches for one fmha_v3_bwd call (the keys of drop_in_bwd.sh pack: dtype hdim_q hdim_v
    batch nhead_q nhead_k seqlen_q seqlen_k max_seqlen_* mask_type window_size_* group atomic32
    bf16_cvt scale, element strides, pointer values, workspace): {"launches": [flyasm.aiter_bwd.Launch
    with the zero-initialised build's bytes, and `.poisoned`: the pattern build's], "workspace":
    aiter's dq workspace (bytes, element_size, dtype, strides in elements, ptr) or None}. Raises
    LookupError when aiter would launch nothing (it returns -1 and falls back to CK)."""
    from flyasm.aiter_bwd import Launch
    set_dir = Path(set_dir)
    args = [f"{k}={v}" for k, v in kv.items()]
    outs = []
    for exe in fmha_bwd_host(set_dir):
        r = subprocess.run([str(exe), "pack", *args], capture_output=True, text=True)
        if r.returncode > 1:
            raise ValueError(f"aiter's backward host refused {' '.join(args)}: {r.stderr.strip()}")
        outs.append(json.loads(r.stdout))
    zero, pattern = outs
    if zero["fmha_v3_bwd_returned"] < 0 or not zero["launches"]:
        raise LookupError(f"aiter's fmha_v3_bwd launches nothing for {' '.join(args)} (it falls back to CK)")
    launches = []
    for lz, lp in zip(zero["launches"], pattern["launches"]):
        a, b = bytes.fromhex(lz["kernarg_hex"]), bytes.fromhex(lp["kernarg_hex"])
        ln = Launch(lz["stage"], lz["knl_name"], set_dir / lz["co_name"].split("/", 1)[-1], tuple(lz["grid"]),
                    tuple(lz["block"]), a, tuple(i for i in range(len(a)) if a[i] != b[i]), lz["manifest"],
                    {f[0]: f[3] for f in lz["fields"]}, b)
        launches.append(ln)
    ws = zero["workspace"]
    if ws:
        ws["ptr"] = int(ws["ptr"], 16)
    return {"launches": launches, "workspace": ws}


def run_bwd_call(set_dir, q, k, v, o, do, lse, main=None, **kw) -> dict:
    """One attention-backward call packed by aiter's own host code for the set in set_dir
    (fmha_bwd_pack) and run (the strict emulator by default): flyasm.aiter_bwd.backward, whose
    keywords it takes (mask_type, atomic32, scale, seqstart_q/k, poison, stages, workspace, backend,
    launch options). main: a flyasm Kernel that runs as the dq/dk/dv stage instead of the set's (a
    variant of it: same arguments, grid and workspace; built here)."""
    import dataclasses

    from flyasm.aiter_bwd import backward

    def pack(**call):
        p = fmha_bwd_pack(set_dir, **call)
        if main is not None:
            p["launches"] = [dataclasses.replace(ln, co=co, knl_name=main.name) if ln.stage == "dqdkdv" else ln
                             for ln in p["launches"]]
        return p
    with tempfile.TemporaryDirectory(prefix="bwd_main_") as tmp:
        co = None if main is None else Path(main.build(Path(tmp)).co_path)
        return backward(pack, q, k, v, o, do, lse, **kw)
