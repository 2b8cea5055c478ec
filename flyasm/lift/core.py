"""lift(X.co | X.s) -> the text of an editable flyasm kernel file (or several, for big kernels).

    res = lift("fa.co", stem="fa_kernel")
    res.files        # {"fa_kernel.py": text, "fa_kernel_parts/part_00.py": text, ...}
    res.kernel       # the same Kernel, built in memory (what build() returns)

Bound: O(I) around the parts (source.py: one llvm-objdump and one llvm-mc run; pywriter.py: one
builder call per instruction; layout.py O(I log I)); writing the files O(I).
"""
from __future__ import annotations

import pprint
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import PlanError
from ..isa.operands import Mod, Reg
from ..kernel import Kernel
from ..plan import RegisterPlan
from .layout import Chunk, Node, Step, blocks_and_loops, from_regions, plan_steps
from .pywriter import Line, Renderer, _compress_words, arg_decls, foreign_descriptor, kernel_params
from .regplan import PlanRegion, RegionIndex, infer
from .source import LiftError, LiftSource, load

FUNC_LIMIT = 200      # instructions per function
FILE_LIMIT = 2500     # instructions per file before the functions move to a parts folder
PC_COL = 76

IMPORTS = """from flyasm import Kernel, a, exec_, m0, off, s, scc, sext, v, vcc
from flyasm.isa.operands import Expr, Imm, Mod, Special, Waitcnt, exec_hi, exec_lo, vcc_hi, vcc_lo
"""


@dataclass
class Lifted:
    name: str
    files: dict[str, str]
    kernel: Kernel
    source: LiftSource
    plan: list[PlanRegion]
    instructions: int
    raw: int
    functions: int
    stats: dict = field(default_factory=dict)

    def write(self, out: str | Path) -> list[Path]:
        """Write the files next to `out` (the main file's path); returns their paths."""
        from ..asm.driver import atomic_write
        out = Path(out)
        written = []
        for rel, text in self.files.items():
            p = out.parent / rel if rel != "__main__" else out
            atomic_write(p, text)
            written.append(p)
        return written


def _kernarg_ptr(src: LiftSource) -> Reg | None:
    f = src.kd.fields
    if not f["enable_sgpr_kernarg_segment_ptr"]:
        return None
    at = 4 * f["enable_sgpr_private_segment_buffer"] + 2 * f["enable_sgpr_dispatch_ptr"] + 2 * f["enable_sgpr_queue_ptr"]
    return Reg("s", at, 2)


def _pc(x: int | None) -> str:
    return f"0x{x:x}" if x is not None else "?"


def lift(path, *, stem: str | None = None, func_limit: int = FUNC_LIMIT, file_limit: int = FILE_LIMIT,
         infer_plan: bool = True, kernel: str | None = None) -> Lifted:
    src = path if isinstance(path, LiftSource) else load(path, kernel)
    stem = stem or f"{src.name}_kernel"
    if not stem.isidentifier():
        raise LiftError(f"output name '{stem}' must be a Python identifier")
    stream = src.stream
    n = len(stream)
    if n == 0:
        raise LiftError(f"kernel {src.name} has no instructions")
    regions = infer(stream, _kernarg_ptr(src)) if infer_plan else []
    params = kernel_params(src)
    rnd0 = Renderer(RegionIndex([]))
    built = [rnd0.builder_ok(inst) for inst in stream]
    encs = src.encodings or [None] * n
    # a builder that refuses an instruction (or a table that mis-describes it) leaves its bytes
    k, regions = _build_in_memory(src, params, regions,
                                  [rnd0.line(i, i.raw if i.raw is not None else e, b)[1]
                                   for i, e, b in zip(stream, encs, built)])
    rnd = Renderer(RegionIndex(regions))
    lines: list[Line] = []
    for inst, e, b in zip(stream, encs, built):
        ln, _ = rnd.line(inst, inst.raw if inst.raw is not None else e, b)
        if inst.comment and not ln.text.endswith(inst.comment):
            ln.text += f"  # {inst.comment}"
        lines.append(ln)
    nodes = from_regions(stream) or blocks_and_loops(stream, src.labels, [i.pc for i in stream])
    steps = plan_steps(nodes, n, func_limit)
    desc, kd = foreign_descriptor(src, k)
    baseline = register_baseline(k)
    k.set_foreign(descriptor=desc, metadata=src.metadata, module_metadata=src.module_metadata, target=src.target,
                  code_end=src.code_end, kd=kd, sized=src.sized, baseline=baseline)
    files = _write_files(src, stem, params, regions, lines, steps, desc, kd, file_limit, baseline)
    nfunc = sum(1 for _ in _chunks(steps))
    return Lifted(src.name, files, k, src, regions, n, rnd.raw_count, nfunc)


def register_baseline(k: Kernel) -> dict:
    """The register counts flyasm computes for the lifted code as it is (see kernel.Foreign)."""
    d = k.descriptor()
    return {"accum_offset": d["accum_offset"], "next_free_vgpr": d["next_free_vgpr"], ".vgpr_count": d["arch_vgprs"],
            ".agpr_count": d["agprs"], ".sgpr_count": d["next_free_sgpr"] + (2 if d["reserve_vcc"] else 0)}


def _build_in_memory(src: LiftSource, params: dict, regions: list[PlanRegion], insts: list):
    """The Kernel build() makes (without regions or plan checks): gives the computed descriptor.
    The plan is kept only if RegisterPlan accepts it and every wide operand is aligned the way
    its checks want (an inferred region never splits an operand: overlapping tuples merge)."""
    try:
        RegisterPlan(src.name, regions={r.name: r.reg for r in regions})
    except PlanError:
        regions = []
    for inst in insts:
        for op in inst.operands:
            r = op.base if isinstance(op, Mod) else op
            if isinstance(r, Reg) and r.count >= 2 and r.index % (2 if r.file in "va" or r.count == 2 else 4):
                regions = []
    k = Kernel(src.name, **params)
    label_at: dict[int, list[str]] = {}
    for lab, idx in src.labels.items():
        label_at.setdefault(idx, []).append(lab)
    for i, inst in enumerate(insts):
        for lab in label_at.get(i, ()):
            k.label(lab)
        k.emit(inst)
    for lab in label_at.get(len(insts), ()):
        k.label(lab)
    return k, list(regions)


def _chunks(steps: list[Step]):
    for st in steps:
        if st.chunk is not None:
            yield st.chunk
        yield from _chunks(st.steps)


def _function_text(ch: Chunk, lines: list[Line], labels_at: dict[int, list[str]], src: LiftSource) -> str:
    body: list[str] = []
    used: set[str] = set()
    opened: list[Node] = []
    starts = {b.start: b for b in ch.nodes}
    stream = src.stream
    for i in range(ch.start, ch.end):
        while opened and i >= opened[-1].end:
            opened.pop()
        if i in starts:
            b = starts[i]
            body.append("    " * (1 + len(opened)) + f'with k.region("{b.name}"):')
            opened.append(b)
        ind = "    " * (1 + len(opened))
        for lab in labels_at.get(i, ()):
            body.append(f'{ind}k.label("{lab}")')
        ln = lines[i]
        used |= ln.regions
        text = ind + ln.text
        pc = f"# {_pc(ln.pc)}"
        if "  # " in ln.text:
            text += f"  {pc}"
        else:
            text = text.ljust(PC_COL - 1) + " " + pc if len(text) < PC_COL else text + "  " + pc
        body.append(text)
    first, last = stream[ch.start].pc, stream[ch.end - 1].pc
    doc = f'    """pc {_pc(first)}..{_pc(last)}, {ch.end - ch.start} instructions'
    if ch.nodes:
        doc += f"; blocks {', '.join(b.name for b in ch.nodes)}"
    doc += '."""'
    head = [f"def {ch.name}(k, P):", doc]
    if used:
        names = sorted(used)
        head.append(f"    {', '.join(names)} = {', '.join('P.' + x for x in names)}")
    return "\n".join(head + body) + "\n"


def _steps_text(steps: list[Step], prefix: str, src: LiftSource, depth: int = 1) -> list[str]:
    out = []
    ind = "    " * depth
    for st in steps:
        if st.chunk is not None:
            ch = st.chunk
            out.append(f"{ind}{prefix}{ch.name}(k, P)")
        else:
            r = st.region
            last = src.stream[r.end - 1].pc if r.end > r.start else None
            out.append(f'{ind}with k.region("{r.name}"):  # pc {_pc(src.stream[r.start].pc)}..{_pc(last)}')
            out.extend(_steps_text(st.steps, prefix, src, depth + 1))
    return out


def _plan_text(src: LiftSource, regions: list[PlanRegion]) -> str:
    if not regions:
        return 'def plan():\n    """No register tuples to name."""\n    return None\n'
    rows = []
    for r in regions:
        rng = f"{r.reg.file}[{r.reg.index}:{r.reg.last}]"
        rows.append(f'        "{r.name}": {rng},'.ljust(48) + f"  # {r.reg.count} regs; {', '.join(sorted(r.roles))}")
    return ('def plan():\n    """Registers named by use (inferred by flyasm lift: tuples that instructions read and write\n'
            '    together; ranges are inclusive). Rename freely: the names are only names."""\n'
            f'    return RegisterPlan("{src.name}", regions={{\n' + "\n".join(rows) + "\n    })\n")


def _write_files(src: LiftSource, stem: str, params: dict, regions, lines, steps, desc, kd, file_limit,
                 baseline: dict) -> dict:
    labels_at: dict[int, list[str]] = {}
    for lab, idx in sorted(src.labels.items(), key=lambda kv: (kv[1], kv[0])):
        labels_at.setdefault(idx, []).append(lab)
    chunks = list(_chunks(steps))
    funcs = [(ch, _function_text(ch, lines, labels_at, src)) for ch in chunks]
    split = len(src.stream) > file_limit
    files: dict[str, str] = {}
    prefix = ""
    if split:
        prefix = "F."
        part, count, groups = [], 0, []
        for ch, text in funcs:
            if part and count + (ch.end - ch.start) > file_limit:
                groups.append(part)
                part, count = [], 0
            part.append((ch, text))
            count += ch.end - ch.start
        if part:
            groups.append(part)
        for j, g in enumerate(groups):
            first, last = src.stream[g[0][0].start].pc, src.stream[g[-1][0].end - 1].pc
            doc = f'"""{src.name}, part {j} of {len(groups)}: pc {_pc(first)}..{_pc(last)} (lifted by flyasm lift)."""\n'
            files[f"{stem}_parts/part_{j:02d}.py"] = doc + IMPORTS + "\n\n" + "\n\n".join(t for _, t in g)
    params_text = ", ".join(f"{key}={val!r}" for key, val in params.items())
    build = ["def build():", f'    """Kernel {src.name}, as in {Path(src.origin).name or "the original"}."""',
             f'    k = Kernel("{src.name}", {params_text}, plan=plan())', "    P = k.plan"]
    build += ["    " + a for a in arg_decls(src)]
    build += _steps_text(steps, prefix, src)
    for lab in labels_at.get(len(src.stream), ()):
        build.append(f'    k.label("{lab}")')
    build.append("    k.set_foreign(descriptor=DESCRIPTOR, metadata=METADATA, module_metadata=MODULE_METADATA,")
    build.append("                  target=TARGET, code_end=CODE_END" + (", kd=KD" if kd is not None else "")
                 + (", sized=False" if not src.sized else "") + ", baseline=BASELINE)")
    build.append("    return k")
    origin = Path(src.origin).name or "a code object"
    head = (f'"""{src.name}: lifted by `flyasm lift` from {origin}.\n\n'
            "build() gives back the original's .text, kernel descriptor and metadata byte for byte. Comments\n"
            "carry each instruction's original pc; loops and basic blocks are regions; registers are named\n"
            "in plan() (inferred from use). k.raw(words, text) keeps encodings the text cannot give back.\n"
            "DESCRIPTOR holds the descriptor directives flyasm would not compute itself and METADATA the\n"
            "original metadata, written verbatim (register counts grow with use by themselves).\n"
            '"""\n')
    main = head + IMPORTS + "from flyasm.plan import RegisterPlan\n"
    if split:
        main += "from flyasm.lift import load_parts\n\n" + f'F = load_parts(__file__, "{stem}_parts")\n'
    main += "\n\n" + _plan_text(src, regions) + "\n\n"
    if not split:
        main += "\n\n".join(t for _, t in funcs) + "\n\n"
    main += "\n".join(build) + "\n\n\n"
    main += f"TARGET = {src.target!r}\n"
    main += "DESCRIPTOR = " + pprint.pformat(desc, width=110, sort_dicts=False) + "\n"
    main += "METADATA = " + pprint.pformat(src.metadata, width=110, sort_dicts=False) + "\n"
    main += "MODULE_METADATA = " + pprint.pformat(src.module_metadata, width=110, sort_dicts=False) + "\n"
    main += f"CODE_END = {_compress_words(src.code_end)}\n"
    main += "BASELINE = " + pprint.pformat(baseline, width=110, sort_dicts=False) + "  # our counts for the original\n"
    if kd is not None:
        main += f"KD = {kd!r}\n"
    files = {"__main__": main, **files}
    return files
