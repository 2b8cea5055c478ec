"""Which mnemonics of a directory of code objects the emulator does not implement, and the kernels
each one blocks (a static count: every instruction of each kernel's extent, executed or not).

    python tools/corpus_mnemonics.py DIR [--kernels] [--jobs N] [--cache FILE]

--cache keeps each object's mnemonics (keyed by its sha256) in a JSON file, so a rerun after a new
semantic only re-counts (decoding the 73 sample objects takes minutes on a loaded machine).

Prints the number of kernels whose every mnemonic is emulated ("emulable"), then one row per
missing mnemonic: how many kernels it blocks, how many it alone blocks, and (--kernels) which.
"""
from __future__ import annotations

import argparse
import collections
import hashlib
import json
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def emulated() -> set[str]:
    import flyasm.emu.ops_memory  # noqa: F401  (registers semantics)
    import flyasm.emu.ops_mfma  # noqa: F401
    import flyasm.emu.ops_modes  # noqa: F401
    import flyasm.emu.ops_mx  # noqa: F401
    import flyasm.emu.ops_scalar  # noqa: F401
    import flyasm.emu.ops_vector  # noqa: F401
    from flyasm.emu.machine import SEMANTICS
    return set(SEMANTICS)


def kernel_mnemonics(path: str) -> tuple[str, dict[str, list[str]] | str]:
    """{kernel name: mnemonics in its extent}, or the reason the object cannot be read."""
    from flyasm.codeobj.disasm import disassemble
    from flyasm.codeobj.reader import read_code_object
    from flyasm.errors import FlyasmError
    try:
        co = read_code_object(path)
        mod = disassemble(co)
    except FlyasmError as e:
        return path, str(e)
    out = {}
    for kc in co.kernels:
        entry = kc.addr - co.text_addr
        names = set()
        for k in mod.kernels:
            for inst in k.instructions:
                if inst.pc is not None and entry <= inst.pc < entry + kc.size:
                    names.add(inst.name)
        out[kc.name] = sorted(names)
    return path, out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", help="directory searched recursively for *.co")
    ap.add_argument("--kernels", action="store_true", help="list the kernels each mnemonic blocks")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--cache", help="JSON file of per-object mnemonics, read and updated")
    ap.add_argument("--without", nargs="*", default=[], help="count as if these were not emulated (before/after)")
    a = ap.parse_args(argv)
    files = sorted(str(p) for p in Path(a.dir).rglob("*.co"))
    if not files:
        print(f"no .co files under {a.dir}", file=sys.stderr)
        return 2
    have = emulated() - set(a.without)
    blocks, alone, unread, n_kernels, ok = collections.defaultdict(list), collections.Counter(), [], 0, 0
    cache = json.loads(Path(a.cache).read_text()) if a.cache and Path(a.cache).exists() else {}
    digest = {f: hashlib.sha256(Path(f).read_bytes()).hexdigest() for f in files}
    todo = [f for f in files if digest[f] not in cache]
    with ProcessPoolExecutor(a.jobs) if a.jobs > 1 else _Serial() as ex:
        cache.update((digest[path], res) for path, res in ex.map(kernel_mnemonics, todo))
    if a.cache:
        Path(a.cache).write_text(json.dumps(cache))
    for path in files:
        res, rel = cache[digest[path]], str(Path(path).relative_to(a.dir))
        if isinstance(res, str):
            unread.append((rel, res))
            continue
        for kname, names in res.items():
            n_kernels += 1
            missing = sorted(set(names) - have)
            ok += not missing
            for n in missing:
                blocks[n].append(f"{rel}:{kname}")
            if len(missing) == 1:
                alone[missing[0]] += 1
    print(f"{len(files)} objects, {n_kernels} kernels, {ok} emulable (every mnemonic emulated), "
          f"{len(unread)} objects unreadable")
    for rel, why in unread:
        print(f"  unreadable: {rel}: {why}")
    if blocks:
        print(f"{'mnemonic':40s} {'blocks':>6s} {'alone':>6s}")
    for n, ks in sorted(blocks.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        print(f"{n:40s} {len(ks):6d} {alone[n]:6d}")
        if a.kernels:
            for k in ks:
                print(f"    {k}")
    return 0


class _Serial:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def map(self, fn, items):
        return map(fn, items)


if __name__ == "__main__":
    sys.exit(main())
