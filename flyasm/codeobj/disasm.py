"""Disassembly -> IR, and a code object -> a complete `.s` that assembles back to the same bytes.

`disassemble(co)` runs llvm-objdump over the code object and reads its text with the `.s` parser
(which turns the `// ADDR: HEX` comments into `pc` and encodings, and names each branch's target,
computed from its encoding, with a label; the symbol table cross-checks objdump's names).
`verify_encodings` re-encodes every instruction with llvm-mc (one batch per code object) and gives
the instructions whose text does not give back their bytes an `Instruction.raw`, so the writer
emits them as `.long` words. `disasm(co)` writes the whole module: all of .text (padding too),
`.amdhsa_kernel` blocks reproducing every descriptor field, and the metadata as YAML.

Bound: one llvm-objdump run and one llvm-mc batch per code object; parsing and rendering O(I).
"""
from __future__ import annotations

import functools
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..asm.parser import AsmKernel, AsmModule, parse_asm
from ..asm.toolchain import find_toolchain
from ..asm.writer import instruction_line
from ..errors import CodeObjectError, FlyasmError
from ..isa.hidden_bits import with_true_modifiers
from ..isa.instruction import Instruction
from ..isa.operands import Imm, Label, local_label
from .metadata import to_yaml
from .reader import CodeObject, read_code_object


def _objdump(co: CodeObject) -> str:
    try:
        return _objdump_text(co.raw, co.mach)
    except CodeObjectError as e:
        raise CodeObjectError(f"llvm-objdump cannot disassemble {co.path or 'the code object'}: {e.message}",
                              find_loc=False) from None


@functools.lru_cache(maxsize=16)
def _objdump_text(raw: bytes, mach: str) -> str:
    """llvm-objdump's text of a code object's bytes: the reports, the checker, lift and the
    emulator's decoder of one object share one run (the text is immutable; the IR is parsed anew)."""
    tc = find_toolchain()
    with tempfile.TemporaryDirectory(prefix="flyasm-dis-") as td:
        p = Path(td) / "x.co"
        p.write_bytes(raw)
        # a foreign object's symbol names need not be UTF-8: objdump prints their bytes as they are
        r = subprocess.run([str(tc.objdump), "-d", f"--mcpu={mach}", "--section=.text", str(p)],
                           capture_output=True, text=True, errors="replace")
    if r.returncode != 0:
        raise CodeObjectError((r.stderr.strip().splitlines() or ["?"])[0], find_loc=False)
    return r.stdout


def _labels(co: CodeObject) -> dict[str, int]:
    """Offsets into .text of the untyped symbols there (the ones objdump names branch targets
    after), each name that occurs once."""
    seen: dict[str, list[int]] = {}
    for s in co.symbols:
        if s.type == "NOTYPE" and s.section == ".text":
            seen.setdefault(s.name, []).append(s.value - co.text_addr)
    return {n: v[0] for n, v in seen.items() if len(v) == 1}


def disassemble(src) -> AsmModule:
    """The IR of every function in .text, with descriptors and metadata attached."""
    co = src if isinstance(src, CodeObject) else read_code_object(src)
    text = _objdump(co)
    try:
        mod = parse_asm(text, co.path or "<objdump>", text_base=co.text_addr,
                        functions={f.name for f in co.functions}, symbols=_labels(co))
    except FlyasmError as e:
        raise CodeObjectError(f"cannot read llvm-objdump's disassembly: {e.message}", find_loc=False) from None
    mod.target = co.target
    mod.metadata = co.metadata
    total = sum(len(e or b"") for k in mod.kernels for e in k.encodings)
    if total != len(co.text):
        raise CodeObjectError(f"llvm-objdump covered {total} of {len(co.text)} bytes of .text", find_loc=False)
    sizes = {f.name: f for f in co.functions}
    for k in mod.kernels:
        for n, (inst, enc) in enumerate(zip(k.instructions, k.encodings)):
            inst.lds_buffer = co.lds_tags.get((k.name, n), inst.lds_buffer)
            if inst.mnemonic.startswith("v_mfma_scale"):
                inst.modifiers = with_true_modifiers(inst.modifiers, enc, inst.family)
        if k.name in sizes:
            # size None: the symbol has st_size 0 (no `.size` in its source), and so will the rebuild
            k.addr, k.size = sizes[k.name].value - co.text_addr, sizes[k.name].size or None
        for kc in co.kernels:
            if kc.name == k.name:
                k.descriptor = kc.descriptor.fields | {"_kd": kc.descriptor}
                k.metadata = kc.metadata
    mod._co = co  # noqa: SLF001 - kept for disasm()
    return mod


@dataclass
class EncodingReport:
    instructions: int
    raw: int
    mismatched: list[tuple[int, str, bytes, bytes | None]]   # (pc, text, original, llvm-mc's or None)


def _check_text(inst: Instruction, enc: bytes) -> str:
    """Text to re-encode: branches with their numeric simm16 instead of the label."""
    if inst.operands and isinstance(inst.operands[0], Label):
        simm = int.from_bytes(enc[0:2], "little")
        return Instruction(inst.mnemonic, (Imm(simm),) + tuple(inst.operands[1:]), dict(inst.modifiers)).text()
    return inst.text()


_ENC = re.compile(r"encoding: \[([^\]]*)\]")


def verify_encodings(mod: AsmModule) -> EncodingReport:
    """Re-encode every instruction (one llvm-mc run); set `raw` where text does not give the bytes."""
    items: list[tuple[Instruction, bytes]] = []
    lines = []
    for k in mod.kernels:
        for inst, enc in zip(k.instructions, k.encodings):
            if enc is None:
                continue
            if inst.raw is not None and inst.mnemonic == ".long":
                items.append((inst, enc))
                lines.append(f".Lflyasm_chk_{len(items) - 1}:")
                continue
            items.append((inst, enc))
            lines.append(f".Lflyasm_chk_{len(items) - 1}:")
            lines.append("\t" + _check_text(inst, enc))
    tc = find_toolchain()
    target_cpu = (mod.target or "gfx950").split("--")[-1].split(":")[0]
    r = subprocess.run([str(tc.mc), "-triple=amdgcn-amd-amdhsa", f"-mcpu={target_cpu}", "-show-encoding"],
                       input="\n".join(lines) + "\n", capture_output=True, text=True)
    got: dict[int, bytes] = {}
    cur = None
    for line in r.stdout.splitlines():
        m = re.match(r"^\.Lflyasm_chk_(\d+):", line.strip())
        if m:
            cur = int(m.group(1))
            continue
        m = _ENC.search(line)
        if m and cur is not None and cur not in got:
            try:
                got[cur] = bytes(int(x, 0) for x in m.group(1).split(",") if x.strip())
            except ValueError:   # a fixup ('A' bytes): not a resolved encoding
                pass
    mism = []
    for i, (inst, enc) in enumerate(items):
        mine = got.get(i)
        if mine != enc:
            inst.raw = enc
            mism.append((inst.pc, inst.text(), enc, mine))
        elif inst.raw is not None and inst.mnemonic != ".long":
            inst.raw = None
    return EncodingReport(len(items), len(mism), mism)


def _kd_text(k: AsmKernel) -> str:
    kd = k.descriptor.get("_kd")
    if kd is None:
        return ""
    if kd.inexpressible():
        return "\t.p2align 6\n" + kd.raw_text(f"{k.name}.kd", k.name)
    return "\t.p2align 6\n" + kd.directive_text(k.name)


def render_module(mod: AsmModule, co: CodeObject | None = None) -> str:
    """The whole module as one .s: all of .text, the kernel descriptors, the metadata."""
    co = co or getattr(mod, "_co", None)
    out = [f'\t.amdgcn_target "{mod.target or "amdgcn-amd-amdhsa--gfx950"}"', "\t.text"]
    align = 256
    out.append(f"\t.p2align {align.bit_length() - 1}")
    funcs = {f.name for f in co.functions} if co else {k.name for k in mod.kernels}
    kernel_names = {k.name for k in co.kernels} if co else set()
    for k in mod.kernels:
        if k.name in funcs:
            out += [f"\t.globl {k.name}", f"\t.type {k.name},@function"]
        out.append(f"{k.name}:")
        at: dict[int, list[str]] = {}
        for lab, idx in k.labels.items():
            at.setdefault(idx, []).append(lab)
        end_idx = None
        if k.size is not None:
            pos = k.addr
            for i, e in enumerate(k.encodings):
                if pos == k.addr + k.size:
                    end_idx = i
                pos += len(e or b"")
            if pos == k.addr + k.size:
                end_idx = len(k.encodings)
        for i, inst in enumerate(k.instructions):
            if i == end_idx:
                out.append(f".Lfunc_end_{k.name}:")
            for lab in sorted(at.get(i, [])):
                out.append(f"{local_label(lab)}:")
            out.append("\t" + instruction_line(inst))
        if end_idx == len(k.instructions):
            out.append(f".Lfunc_end_{k.name}:")
        for lab in sorted(at.get(len(k.instructions), [])):
            out.append(f"{local_label(lab)}:")
        if end_idx is not None:
            out.append(f"\t.size {k.name}, .Lfunc_end_{k.name}-{k.name}")
    out.append("")
    out.append("\t.rodata")
    for k in mod.kernels:
        if k.name in kernel_names or "_kd" in k.descriptor:
            out.append(_kd_text(k))
    if mod.metadata is not None:
        out.append("\t.amdgpu_metadata")
        out.append(to_yaml(mod.metadata))
        out.append("\t.end_amdgpu_metadata")
    return "\n".join(out) + "\n"


def disasm(src, *, verify: bool = True, kernel: str | None = None) -> str:
    """A complete .s for a code object: assembling it gives back .text, the descriptors and the
    metadata byte for byte (instructions llvm-mc would encode differently become .long words).
    With `kernel`, only that kernel: its code, descriptor and metadata entry give back the same
    bytes in an object of its own."""
    co = src if isinstance(src, CodeObject) else read_code_object(src)
    mod = disassemble(co)
    if kernel is not None:
        mod = only_kernel(mod, co.kernel(kernel).name)
    if verify:
        verify_encodings(mod)
    return render_module(mod, co)


def only_kernel(mod: AsmModule, name: str) -> AsmModule:
    """The module cut to one kernel: its function, descriptor and amdhsa.kernels entry."""
    k = mod.kernel(name)
    meta = None
    if mod.metadata is not None:
        meta = dict(mod.metadata)
        meta["amdhsa.kernels"] = [km for km in mod.metadata.get("amdhsa.kernels", []) or []
                                  if isinstance(km, dict) and km.get(".symbol") == f"{name}.kd"]
    out = AsmModule(kernels=[k], target=mod.target, metadata=meta, filename=mod.filename)
    out._co = getattr(mod, "_co", None)  # noqa: SLF001
    return out
