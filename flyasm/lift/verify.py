"""Check a lifted file: import it, call build(), assemble, and compare with the original code
object (.text, every kernel-descriptor byte, the metadata, the ELF flags).

Bound: one build of the lifted file, one llvm-mc/ld.lld run, a byte comparison: O(I).
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from ..codeobj.reader import CodeObject, read_code_object
from .source import LiftError


def load_kernel(path, **params):
    """Import a kernel file by path and return build(**params)."""
    p = Path(path).resolve()
    name = f"flyasm_lifted_main_{abs(hash(str(p)))}"
    spec = importlib.util.spec_from_file_location(name, p)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.modules.pop(name, None)
    return mod.build(**params)


def assemble_kernel(k) -> bytes:
    """The .co bytes of a Kernel, without the static checker (a foreign kernel may have findings)."""
    from ..asm.driver import assemble
    from ..asm.writer import render
    text, line_map = render(k)
    return assemble(text, k.code_object, line_map, k.stream, name=f"{k.name}.s")


def differences(orig: CodeObject, back: CodeObject) -> list[str]:
    out = []
    if back.text != orig.text:
        n = next((i for i, (x, y) in enumerate(zip(orig.text, back.text)) if x != y), min(len(orig.text), len(back.text)))
        out.append(f".text differs from byte {n} ({len(orig.text)} vs {len(back.text)} bytes)")
    if [k.name for k in back.kernels] != [k.name for k in orig.kernels]:
        out.append("kernel names differ")
    for ko, kb in zip(orig.kernels, back.kernels):
        if kb.descriptor.raw != ko.descriptor.raw:
            fo, fb = ko.descriptor.to_dict(), kb.descriptor.to_dict()
            fields = [f"{key} {fo[key]} vs {fb.get(key)}" for key in fo if fo[key] != fb.get(key)]
            out.append(f"{ko.name}: kernel descriptor differs ({'; '.join(fields[:4])})")
    if [k.sized for k in back.kernels] != [k.sized for k in orig.kernels]:
        out.append("st_size differs (set in one, 0 in the other)")
    if back.metadata != orig.metadata:
        out.append("metadata differs")
    if (back.e_flags, back.abi_version) != (orig.e_flags, orig.abi_version):
        out.append(f"ELF flags differ (0x{orig.e_flags:x} vs 0x{back.e_flags:x})")
    return out


def kernel_differences(orig: CodeObject, back: CodeObject, name: str) -> list[str]:
    """One kernel of a multi-kernel original against the single kernel a lifted file builds: its
    code bytes, descriptor bytes and metadata entry."""
    ko, kb = orig.kernel(name), back.kernel(name)
    out = []
    if kb.code != ko.code:
        n = next((i for i, (x, y) in enumerate(zip(ko.code, kb.code)) if x != y), min(len(ko.code), len(kb.code)))
        out.append(f"the code of {name} differs from byte {n} ({len(ko.code)} vs {len(kb.code)} bytes)")
    # where the code sits relative to the descriptor depends on the object's layout, not the kernel
    # (bytes 16..23, kernel_code_entry_byte_offset: AMDGPUUsage "Kernel Descriptor")
    ro, rb = ko.descriptor.raw, kb.descriptor.raw
    if ro[:16] + ro[24:] != rb[:16] + rb[24:]:
        fo, fb = ko.descriptor.to_dict(), kb.descriptor.to_dict()
        fields = [f"{key} {fo[key]} vs {fb.get(key)}" for key in fo
                  if key != "kernel_code_entry_byte_offset" and fo[key] != fb.get(key)]
        out.append(f"{name}: kernel descriptor differs ({'; '.join(fields[:4])})")
    if kb.metadata != ko.metadata:
        out.append(f"{name}: metadata differs")
    if kb.sized != ko.sized:
        out.append(f"{name}: st_size is {'set' if kb.sized else '0'} in the rebuild")
    return out


def verify(lifted_py, original, kernel: str | None = None) -> CodeObject:
    """Build the lifted file and raise LiftError naming what differs from the original (the whole
    object when it holds one kernel, else the kernel `kernel`)."""
    orig = original if isinstance(original, CodeObject) else read_code_object(original)
    back = read_code_object(assemble_kernel(load_kernel(lifted_py)))
    whole = len(orig.kernels) == 1 and len(orig.functions) == 1
    if whole:
        diffs = differences(orig, back)
    else:
        name = kernel or back.kernels[0].name
        diffs = kernel_differences(orig, back, name)
    if diffs:
        raise LiftError(f"{lifted_py} does not give back {orig.path or 'the original'}: {'; '.join(diffs)}")
    return back
