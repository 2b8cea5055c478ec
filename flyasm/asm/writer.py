"""Write a Kernel as gfx950 assembly text: stable, diff-friendly, one instruction per line.

Each instruction carries a `.loc` pointing at the Python line that emitted it, so the code
object's DWARF line table (llvm-dwarfdump --debug-line) maps every pc back to the builder.
Region boundaries are comments; labels are local `.LNAME:` lines. Instructions with raw encodings are
written as `.long` words with the disassembly as a comment.
"""
from __future__ import annotations

from dataclasses import replace

from ..isa.instruction import Instruction
from ..isa.operands import Label, local_label

TARGET = "amdgcn-amd-amdhsa--gfx950"
LDS_SECTION = ".flyasm.lds"


def instruction_line(inst: Instruction, local: bool = True) -> str:
    if inst.raw is not None:
        words = [int.from_bytes(inst.raw[i:i + 4], "little") for i in range(0, len(inst.raw), 4)]
        return ".long " + ", ".join(f"0x{w:08x}" for w in words) + f"  ; {inst.text()}"
    if local and any(isinstance(op, Label) for op in inst.operands):
        inst = replace(inst, operands=tuple(Label(local_label(op.name)) if isinstance(op, Label) else op
                                            for op in inst.operands))
    t = inst.text()
    notes = [n for n in (f"lds:{inst.lds_buffer}" if inst.lds_buffer else None, inst.comment) if n]
    return f"{t}  ; {'; '.join(notes)}" if notes else t


def render(k) -> tuple[str, dict[int, int]]:
    """Text of the kernel and a map from 1-based .s line to stream index (for error mapping)."""
    k.validate()
    d = k.descriptor()
    out: list[str] = []
    line_of: dict[int, int] = {}

    def emit(s: str, index: int | None = None) -> None:
        out.append(s)
        if index is not None:
            line_of[len(out)] = index

    files: dict[str, int] = {}
    for inst in k.stream:
        if inst.loc is not None and inst.loc.file not in files:
            files[inst.loc.file] = len(files) + 1
    emit(f'\t.amdgcn_target "{k.foreign.target if k.foreign and k.foreign.target else TARGET}"')
    emit("\t.text")
    for f, n in files.items():
        emit(f'\t.file {n} "{f}"')
    from .names import SECTION as NAMES_SECTION
    from .names import records
    names = records(k)
    for rec in names:     # plan and region names, read back by the .s parser (names.py)
        emit(f"\t; flyasm:{rec}")
    emit(f"\t.globl {k.name}")
    emit("\t.p2align 8")
    emit(f"\t.type {k.name},@function")
    emit(f"{k.name}:")
    labels_at: dict[int, list[str]] = {}
    for lab in k.labels.values():
        labels_at.setdefault(lab.index, []).append(lab.name)
    starts: dict[int, list] = {}
    ends: dict[int, list] = {}
    for r in k.regions:
        starts.setdefault(r.start, []).append(r)
        ends.setdefault(r.end, []).append(r)
    last_loc = None
    for i, inst in enumerate(k.stream):
        for r in reversed(ends.get(i, [])):
            emit(f"\t; end region {'/'.join(r.path)}")
        for r in starts.get(i, []):
            emit(f"\t; region {'/'.join(r.path)}")
        for name in labels_at.get(i, []):
            emit(f"{local_label(name)}:")
        # A DWARF row holds until the next one: a .loc only where the Python line changes.
        if inst.loc is not None and inst.loc != last_loc:
            emit(f"\t.loc {files[inst.loc.file]} {inst.loc.line} 0")
            last_loc = inst.loc
        emit(f"\t{instruction_line(inst)}", i)
    n = len(k.stream)
    for r in reversed(ends.get(n, [])):
        emit(f"\t; end region {'/'.join(r.path)}")
    for name in labels_at.get(n, []):
        emit(f"{local_label(name)}:")
    if k.foreign is None or k.foreign.sized:
        emit(f".Lfunc_end_{k.name}:")
        emit(f"\t.size {k.name}, .Lfunc_end_{k.name}-{k.name}")
    tagged = [(i, inst.lds_buffer) for i, inst in enumerate(k.stream) if inst.lds_buffer]
    if tagged:
        # LDS-buffer annotations travel inside the code object, in a non-loaded section of
        # "KERNEL:INDEX:BUFFER" strings (INDEX = the instruction's ordinal in the kernel), so
        # `flyasm check X.co` orders DMA and ds_read exactly as the builder did.
        emit(f'\t.section {LDS_SECTION},"",@progbits')
        for i, tag in tagged:
            emit(f'\t.asciz "{k.name}:{i}:{tag}"')
        emit("\t.text")
    if names:
        emit(f'\t.section {NAMES_SECTION},"",@progbits')
        for rec in names:
            emit(f'\t.asciz "{rec}"')
        emit("\t.text")
    if k.foreign is not None and k.foreign.code_end:
        words = k.foreign.code_end
        for i in range(0, len(words), 8):
            emit("\t.long " + ", ".join(f"0x{w:08x}" for w in words[i:i + 8]))
    emit("")
    emit("\t.rodata")
    emit("\t.p2align 6")
    f = k.foreign
    if f is not None and f.kd is not None:
        from ..codeobj.descriptor import KernelDescriptor
        out.extend(KernelDescriptor.decode(f.kd).raw_text(f"{k.name}.kd", k.name).splitlines())
    else:
        emit(f"\t.amdhsa_kernel {k.name}")
        for key, val in descriptor_directives(k, d).items():
            emit(f"\t\t.amdhsa_{key} {val}")
        emit("\t.end_amdhsa_kernel")
    emit("")
    emit("\t.amdgpu_metadata")
    out.extend((foreign_metadata_yaml(k, d) if f is not None else metadata_yaml(k, d)).splitlines())
    emit("\t.end_amdgpu_metadata")
    return "\n".join(out) + "\n", line_of


_OWN_DIRECTIVES = ("group_segment_fixed_size", "private_segment_fixed_size", "kernarg_size", "user_sgpr_count",
                   "user_sgpr_kernarg_segment_ptr", "system_sgpr_workgroup_id_x", "system_sgpr_workgroup_id_y",
                   "system_sgpr_workgroup_id_z", "system_vgpr_workitem_id", "next_free_vgpr", "next_free_sgpr",
                   "accum_offset", "reserve_vcc", "float_denorm_mode_32", "float_denorm_mode_16_64",
                   "ieee_mode", "dx10_clamp")


def descriptor_directives(k, d: dict) -> dict:
    """`.amdhsa_<key>` -> value, in writing order. A foreign kernel's values replace the computed
    ones; register counts take the larger of both (see kernel.Foreign)."""
    out = {key: d[key] for key in _OWN_DIRECTIVES}
    if k.foreign is None:
        return out
    fd = k.foreign.descriptor
    if "next_free_sgpr" in fd:
        # llvm-mc allocates 8 * ceil((n + 6) / 8) SGPRs for `.amdhsa_next_free_sgpr n` on gfx950 (6 for
        # flat scratch, see codeobj/descriptor.py). The foreign value stands while our use (VCC
        # included) fits in what it allocates; beyond that our count takes over.
        alloc = 8 * -(-(fd["next_free_sgpr"] + 6) // 8)
        need = d["next_free_sgpr"] + 2 * d["reserve_vcc"]
        out["next_free_sgpr"] = fd["next_free_sgpr"] if need <= alloc else need
        out["reserve_vcc"] = fd.get("reserve_vcc", 0)
    for key in ("next_free_vgpr", "accum_offset"):
        if key in fd:
            out[key] = foreign_count(k.foreign, key, fd[key], d[key])
    for key, val in fd.items():
        if key not in ("next_free_sgpr", "next_free_vgpr", "accum_offset", "reserve_vcc"):
            out[key] = val
    return out


def foreign_count(f, key: str, theirs: int, ours: int) -> int:
    """A foreign register count: theirs while our count is within what the original code needs
    by our reckoning (Foreign.baseline), else the larger of both."""
    if key in f.baseline and ours <= f.baseline[key]:
        return theirs
    return max(theirs, ours)


def foreign_metadata_yaml(k, d: dict) -> str:
    """The foreign kernel's metadata, verbatim, with register counts no lower than ours."""
    from ..codeobj.metadata import to_yaml
    f = k.foreign
    entry = dict(f.metadata or {})
    sgprs = d["next_free_sgpr"] + (2 if d["reserve_vcc"] else 0)
    for key, ours in ((".vgpr_count", d["arch_vgprs"]), (".agpr_count", d["agprs"]), (".sgpr_count", sgprs)):
        if key in entry and isinstance(entry[key], int):
            entry[key] = foreign_count(f, key, entry[key], ours)
    doc = dict(f.module_metadata or {"amdhsa.target": f.target or TARGET, "amdhsa.version": [1, 2]})
    doc = {"amdhsa.kernels": [entry], **{key: v for key, v in doc.items() if key != "amdhsa.kernels"}}
    return to_yaml(doc)


def metadata_yaml(k, d: dict) -> str:
    lines = ["---", "amdhsa.kernels:", f"  - .agpr_count: {d['agprs']}"]
    if k.args:
        lines.append("    .args:")
        for a in k.args:
            lines.append(f"      - .name: {a.name}")
            lines.append(f"        .offset: {a.offset}")
            lines.append(f"        .size: {a.size}")
            lines.append(f"        .value_kind: {a.value_kind}")
            if a.value_kind == "global_buffer":
                lines.append("        .address_space: global")
    sgprs = d["next_free_sgpr"] + (2 if d["reserve_vcc"] else 0)
    lines += [
        f"    .group_segment_fixed_size: {d['group_segment_fixed_size']}",
        "    .kernarg_segment_align: 8",
        f"    .kernarg_segment_size: {d['kernarg_size']}",
        f"    .max_flat_workgroup_size: {k.threads}",
        f"    .name: {k.name}",
        "    .private_segment_fixed_size: 0",
        f"    .sgpr_count: {sgprs}",
        f"    .symbol: {k.name}.kd",
        f"    .vgpr_count: {d['arch_vgprs']}",
        "    .wavefront_size: 64",
        f"amdhsa.target: {TARGET}",
        "amdhsa.version:",
        "  - 1",
        "  - 2",
        "...",
    ]
    return "\n".join(lines)


def write_kernel(k) -> str:
    return render(k)[0]
