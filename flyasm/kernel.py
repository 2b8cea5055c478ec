"""Kernel: arguments, LDS, register plan, the instruction stream, labels, regions, descriptor.

    k = Kernel("vector_add", block=256)
    out, x, y = k.arg("out", "ptr"), k.arg("x", "ptr"), k.arg("y", "ptr")
    n = k.arg("n", "i32")
    k.s_load_dwordx2(s[4:5], k.kernarg_ptr, out.offset)
    ...
    k.s_endpgm()

Every gfx950 instruction is a method (generated from the tables, see isa/builders.py). Descriptor
fields (next_free_vgpr/sgpr, accum_offset, user SGPRs) are computed from what the stream uses.

Kernels flyasm did not write (lifted from a foreign code object by `flyasm lift`) carry a `Foreign`
record: the exact descriptor directives and metadata of the original, written instead of the
computed ones. Our own kernels never set it, so what they emit does not change.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

from .errors import FlyasmError, KernelError, SourceLoc, user_location
from .isa import builders, doc, tables
from .isa.instruction import Instruction
from .isa.operands import Label, Reg, Special, local_label, s, v

LDS_LIMIT = 160 * 1024          # gfx950: 160 KiB per workgroup (CDNA4 ISA ch.11.1; notes §1.3)
MAX_WORKGROUP = 1024
SGPR_LIMIT = 102                # usable SGPRs on gfx9 when VCC is reserved (s0..s101)

# Kernel argument types: (size, alignment, metadata value_kind).
ARG_TYPES = {
    "ptr": (8, 8, "global_buffer"), "i32": (4, 4, "by_value"), "u32": (4, 4, "by_value"),
    "f32": (4, 4, "by_value"), "i64": (8, 8, "by_value"), "u64": (8, 8, "by_value"),
    "f16": (2, 2, "by_value"), "bf16": (2, 2, "by_value"), "i16": (2, 2, "by_value"), "u16": (2, 2, "by_value"),
    "f64": (8, 8, "by_value"),
}


@dataclass(frozen=True)
class Arg:
    name: str
    type: str
    offset: int
    size: int
    value_kind: str


@dataclass
class Foreign:
    """The descriptor and metadata of a kernel flyasm did not build, reproduced exactly.

    descriptor: `.amdhsa_<key>` -> value for every directive whose value differs from what flyasm
        computes (dispatch/queue pointers, kernarg preload, private segment, float modes, ...).
        Register counts (next_free_vgpr, next_free_sgpr, accum_offset) take the larger of the
        foreign and the computed value, so an edit that uses more registers still gets them.
    kd: the 64 descriptor bytes, only when directives cannot express them (then written as data).
    metadata: this kernel's `amdhsa.kernels` entry, written verbatim except that .vgpr_count,
        .sgpr_count and .agpr_count also take the larger value.
    module_metadata: the other top-level metadata keys (amdhsa.target, amdhsa.version, ...).
    target: the `.amdgcn_target` string (xnack/sramecc end up in the ELF e_flags).
    code_end: the 32-bit words .text holds after the function's end (the toolchain's padding).
    sized: False when the original's function symbol has st_size 0 (hand-written sources without
        `.size`, e.g. aiter's): the rebuild then writes no `.size` either.
    baseline: the register counts flyasm computes for the original code (accum_offset,
        next_free_vgpr, .vgpr_count, .agpr_count, .sgpr_count). A foreign value stands while our
        count is no higher than that, so hand-written code that aliases AGPRs with arch VGPRs or
        leaves VCC out of .sgpr_count (aiter's) rebuilds exactly; an edit that uses more grows it.
    """

    descriptor: dict = field(default_factory=dict)
    metadata: dict | None = None
    module_metadata: dict | None = None
    target: str | None = None
    code_end: tuple = ()
    kd: bytes | None = None
    sized: bool = True
    baseline: dict = field(default_factory=dict)


@dataclass
class Region:
    name: str
    path: tuple[str, ...]
    start: int
    end: int | None = None
    expect: dict | None = None
    loc: SourceLoc | None = None


@dataclass
class LabelDef:
    name: str
    index: int            # position in the stream: the label stands before instruction `index`
    loc: SourceLoc | None


class Kernel:
    """A gfx950 kernel under construction: arguments, LDS, an instruction stream, labels, regions.

    Kernel(name, block=256, lds=0, arg_layout="aiter"|"natural", workgroup_ids="x", workitem_ids=0,
           code_object=5, plan=None)

    Every gfx950 instruction is a method taking its operands in assembly order and its modifiers as
    keywords; `help(k.v_add_f32)` or `flyasm doc v_add_f32` shows operands, modifiers and an example:

        k.v_add_f32(v[4], v[5], 1.0)                      # v_add_f32 v4, v5, 1.0
        k.v_max_f32(v[5], v[5], v[5], quad_perm=[1, 0, 3, 2], row_mask=0xf, bank_mask=0xf)   # DPP
        k.v_mul_f32(v[1], -v[2], abs(v[3]))               # VOP3 negate / absolute value
        k.buffer_load_dwordx4(v[0:3], v[8], s[16:19], 0, offen=True, offset=64)
        k.s_waitcnt(vmcnt=0, lgkmcnt=0)

    Registers: v[i], s[i], a[i]; ranges are inclusive (v[32:95] is 64 VGPRs). Specials: m0, vcc,
    exec_, scc, off. Labels: k.label("loop") places one, k.L("loop") refers to it.
    Arguments: k.arg(name, type) with type one of ptr, i32, u32, f32, i64, u64, f16, bf16, i16, u16, f64.
    Regions: `with k.region("pv", expect={"mfma": 16}):` names a stretch for stats, diffs and pictures.
    k.build(out_dir) checks, writes NAME.s and NAME.co and returns a BuildResult.
    """

    def __init__(self, name: str, *, block: int | tuple = 64, lds: int = 0, arg_layout: str = "aiter",
                 workgroup_ids: str = "x", workitem_ids: int = 0, code_object: int = 5, plan=None,
                 ieee_mode: bool = False, dx10_clamp: bool = False, wave_size: int = 64):
        if not name.isidentifier():
            raise KernelError(f"kernel name '{name}' must be an identifier")
        self.name = name
        self.block = (block, 1, 1) if isinstance(block, int) else tuple(block) + (1,) * (3 - len(block))
        threads = self.block[0] * self.block[1] * self.block[2]
        if not (1 <= threads <= MAX_WORKGROUP):
            raise KernelError(f"a workgroup holds 1..{MAX_WORKGROUP} threads; block={block} has {threads}")
        if arg_layout not in ("aiter", "natural"):
            raise KernelError(f"arg_layout is 'aiter' (16-byte slots) or 'natural', not '{arg_layout}'")
        if code_object not in (5, 6):
            raise KernelError(f"code_object is 5 or 6, not {code_object}")
        if wave_size != 64:
            raise KernelError("gfx950 runs wave64 only")
        if not set(workgroup_ids) <= set("xyz") or len(set(workgroup_ids)) != len(workgroup_ids):
            raise KernelError(f"workgroup_ids is a subset of 'xyz', not '{workgroup_ids}'")
        if workitem_ids not in (0, 1, 2):
            raise KernelError(f"workitem_ids is 0 (x), 1 (x,y) or 2 (x,y,z), not {workitem_ids}")
        self.lds = 0
        self.set_lds(lds)
        self.scratch_lds: list[tuple[int, int]] = []
        self.arg_layout = arg_layout
        self.workgroup_ids = "".join(c for c in "xyz" if c in workgroup_ids)
        self.workitem_ids = workitem_ids
        self.code_object = code_object
        self.ieee_mode = ieee_mode
        self.dx10_clamp = dx10_clamp
        self.plan = plan
        self.args: list[Arg] = []
        self.stream: list[Instruction] = []
        self.labels: dict[str, LabelDef] = {}
        self.regions: list[Region] = []
        self._region_stack: list[Region] = []
        self.foreign: Foreign | None = None
        self.loc = user_location()

    # ---- initial state --------------------------------------------------------------------
    @property
    def kernarg_ptr(self) -> Reg:
        """s[0:1]: the kernel-argument segment pointer (the only user SGPRs flyasm enables)."""
        return s[0:1]

    @property
    def user_sgpr_count(self) -> int:
        return 2

    def workgroup_id(self, axis: str = "x") -> Reg:
        """The SGPR holding the workgroup id for axis, right after the user SGPRs (s2, s3, s4)."""
        if axis not in self.workgroup_ids:
            raise KernelError(f"workgroup id {axis} is not enabled (Kernel(workgroup_ids='{self.workgroup_ids}'))")
        return s[self.user_sgpr_count + self.workgroup_ids.index(axis)]

    @property
    def workitem_id(self) -> Reg:
        """v0: packed workitem ids, x in bits 0-9, y in 10-19, z in 20-29 (gfx90a+ packing)."""
        return v[0]

    @property
    def system_sgpr_count(self) -> int:
        return self.user_sgpr_count + len(self.workgroup_ids)

    # ---- arguments and LDS ----------------------------------------------------------------
    def arg(self, name: str, type: str) -> Arg:
        """Declare the next kernel argument; returns an Arg whose .offset is its kernarg byte offset.

        type: "ptr" (8-byte global pointer) or a by-value scalar: i32, u32, f32 (4 bytes), i64, u64,
        f64 (8), f16, bf16, i16, u16 (2). With arg_layout="aiter" each argument takes a 16-byte slot
        (aiter's host code packs them so); "natural" aligns each to its size."""
        if type not in ARG_TYPES:
            raise KernelError(f"argument type '{type}' is unknown (use one of {', '.join(ARG_TYPES)})")
        if any(a.name == name for a in self.args):
            raise KernelError(f"argument '{name}' is declared twice")
        size, align, kind = ARG_TYPES[type]
        if self.arg_layout == "aiter":
            offset = 16 * len(self.args)
        else:
            end = self.args[-1].offset + self.args[-1].size if self.args else 0
            offset = (end + align - 1) // align * align
        a = Arg(name, type, offset, size, kind)
        self.args.append(a)
        return a

    @property
    def kernarg_size(self) -> int:
        if not self.args:
            return 0
        if self.arg_layout == "aiter":
            return 16 * len(self.args)
        end = self.args[-1].offset + self.args[-1].size
        return (end + 7) // 8 * 8

    def set_lds(self, nbytes: int) -> None:
        if not isinstance(nbytes, int) or nbytes < 0:
            raise KernelError(f"LDS size must be a non-negative int, not {nbytes!r}")
        if nbytes > LDS_LIMIT:
            raise KernelError(f"LDS of {nbytes} bytes exceeds gfx950's {LDS_LIMIT} bytes (160 KiB) per workgroup")
        self.lds = nbytes

    def lds_scratch(self, lo: int, hi: int) -> None:
        """Declare LDS bytes [lo, hi) a dump: LDS-DMAs with nothing to load (a wave with no chunk
        of a tile) write there, and nothing reads it. The checker then lets differently tagged
        DMAs share those bytes and reports any DS access whose proven range meets them."""
        if not (isinstance(lo, int) and isinstance(hi, int) and 0 <= lo < hi <= LDS_LIMIT):
            raise KernelError(f"lds_scratch takes 0 <= lo < hi <= {LDS_LIMIT} bytes, not [{lo!r}, {hi!r})")
        self.scratch_lds.append((lo, hi))

    # ---- the instruction stream -----------------------------------------------------------
    def emit(self, inst: Instruction) -> Instruction:
        inst.region = tuple(r.name for r in self._region_stack)
        if any(isinstance(op, Label) for op in inst.operands):
            inst.operands = tuple(Label(local_label(op.name)) if isinstance(op, Label) else op for op in inst.operands)
        if self.plan is not None:
            self.plan.check_instruction(inst)
        self.stream.append(inst)
        return inst

    def __getattr__(self, mnemonic: str):
        if mnemonic.startswith("_") or not tables.known(mnemonic):
            if mnemonic.startswith(("s_", "v_", "ds_", "buffer_", "global_", "flat_", "scratch_", "tbuffer_")):
                from .errors import UnknownInstructionError
                raise UnknownInstructionError(tables.unknown_message(mnemonic))
            raise AttributeError(mnemonic)

        def build(*operands, **modifiers) -> Instruction:
            return self.emit(builders.make(mnemonic, *operands, **modifiers))

        build.__name__ = build.__qualname__ = mnemonic
        build.__doc__ = doc.doc(mnemonic)            # help(k.v_add_f32): operands, modifiers, example
        build.__signature__ = doc.signature(mnemonic)
        return build

    def instr(self, mnemonic: str, *operands, **modifiers) -> Instruction:
        """The same as k.<mnemonic>(...), for names computed at build time."""
        return self.emit(builders.make(mnemonic, *operands, **modifiers))

    def raw(self, words, text: str | None = None) -> Instruction:
        """An instruction given by its exact encoding, written as `.long` words.

        `words` is bytes or 32-bit ints (little-endian words, as llvm-objdump prints them);
        `text` is its disassembly, which tells the checker, the reports and the emulator what it
        does (without it, or when it does not parse, the words are opaque data)."""
        from .isa.syntax import parse_instruction
        if isinstance(words, int):
            words = [words]
        if isinstance(words, (bytes, bytearray)):
            data = bytes(words)
        else:
            try:
                data = b"".join(int(w).to_bytes(4, "little") for w in words)
            except (TypeError, ValueError, OverflowError):
                raise KernelError(f"raw words must be bytes or 32-bit unsigned ints, not {words!r}") from None
        if not data or len(data) % 4:
            raise KernelError(f"a raw instruction is a whole number of 32-bit words, not {len(data)} bytes")
        inst = None
        if text:
            try:
                inst = parse_instruction(text, user_location())
            except FlyasmError:
                inst = None
        if inst is None:
            inst = Instruction(".long", (), {}, user_location(), comment=text)
        inst.raw = data
        return self.emit(inst)

    def set_foreign(self, *, descriptor: dict | None = None, metadata: dict | None = None,
                    module_metadata: dict | None = None, target: str | None = None, code_end=(),
                    kd: bytes | None = None, sized: bool = True, baseline: dict | None = None) -> Foreign:
        """Reproduce a foreign kernel's descriptor and metadata exactly (see `Foreign`)."""
        from .codeobj.descriptor import DIRECTIVES
        known = set(DIRECTIVES.values()) | {"group_segment_fixed_size", "private_segment_fixed_size",
                                             "kernarg_size", "next_free_vgpr", "next_free_sgpr",
                                             "accum_offset", "reserve_vcc"}
        bad = sorted(set(descriptor or {}) - known)
        if bad:
            raise KernelError(f"foreign descriptor keys {', '.join(bad)} are not .amdhsa_ directives flyasm knows")
        if kd is not None and len(kd) != 64:
            raise KernelError(f"a kernel descriptor is 64 bytes, not {len(kd)}")
        self.foreign = Foreign(dict(descriptor or {}), metadata, module_metadata, target,
                               tuple(int(w) & 0xFFFFFFFF for w in code_end), kd, bool(sized),
                               dict(baseline or {}))
        return self.foreign

    def label(self, name: str) -> Label:
        """Place a label before the next instruction."""
        if not name.replace(".", "_").replace("$", "_").isidentifier():
            raise KernelError(f"label name '{name}' must be an identifier")
        local = local_label(name)
        if local in self.labels:
            prev = self.labels[local].loc
            raise KernelError(f"label '{name}' is defined twice (first at {prev})")
        self.labels[local] = LabelDef(local, len(self.stream), user_location())
        return Label(local)

    def L(self, name: str) -> Label:
        """A reference to a label (defined before or after)."""
        return Label(local_label(name))

    @contextlib.contextmanager
    def region(self, name: str, expect: dict | None = None):
        """A named, nestable region of the stream; `expect` asserts instruction counts by class."""
        path = tuple(r.name for r in self._region_stack) + (name,)
        r = Region(name, path, len(self.stream), expect=expect, loc=user_location())
        self._region_stack.append(r)
        self.regions.append(r)
        try:
            yield r
        finally:
            self._region_stack.pop()
            r.end = len(self.stream)
        if expect:
            from .sched import check_expect
            check_expect(self, r)

    # ---- finishing ------------------------------------------------------------------------
    def validate(self) -> None:
        """Kernel-level checks before writing text: labels defined, stream ends, limits."""
        for i, inst in enumerate(self.stream):
            for op in inst.operands:
                if isinstance(op, Label) and op.name not in self.labels:
                    shown = op.name[2:] if op.name.startswith(".L") else op.name
                    raise KernelError(f"{inst.mnemonic} jumps to label '{shown}', which is never defined",
                                      inst.loc)
        if not self.stream:
            raise KernelError(f"kernel '{self.name}' has no instructions (end it with s_endpgm)", self.loc)
        if self.stream[-1].name not in ("s_endpgm", "s_branch", "s_setpc_b64"):
            raise KernelError(f"kernel '{self.name}' must end with s_endpgm (or a branch); the last instruction "
                              f"is {self.stream[-1].mnemonic}", self.stream[-1].loc)
        d = self.descriptor()
        if d["next_free_sgpr"] > SGPR_LIMIT:
            raise KernelError(f"the kernel uses SGPRs up to s{d['next_free_sgpr'] - 1}; gfx950 has s0..s{SGPR_LIMIT - 1} "
                              f"(VCC is reserved above them)", self.loc)
        if d["next_free_vgpr"] > 512:
            raise KernelError(f"the kernel needs {d['next_free_vgpr']} VGPR+AGPR slots; a wave has 512 "
                              f"(arch VGPRs up to accum_offset={d['accum_offset']}, then AGPRs)", self.loc)

    def usage(self) -> dict:
        """Highest register used in each file, and specials used."""
        hi = {"v": -1, "a": -1, "s": -1}
        specials: set[str] = set()
        for inst in self.stream:
            for op in inst.operands:
                base = getattr(op, "base", op)
                if isinstance(base, Reg):
                    hi[base.file] = max(hi[base.file], base.last)
                elif isinstance(base, Special):
                    specials.add(base.kind)
            for f, n in inst.reads | inst.writes:
                if f == "spec":
                    specials.add(n)
        if self.plan is not None:
            for f, last in self.plan.highest().items():
                hi[f] = max(hi[f], last)
        return {"vgpr": hi["v"] + 1, "agpr": hi["a"] + 1, "sgpr": hi["s"] + 1, "specials": specials}

    def descriptor(self) -> dict:
        """Kernel-descriptor inputs computed from the stream (never typed by hand)."""
        u = self.usage()
        arch_v = max(u["vgpr"], 1)  # v0 always holds the workitem ids
        accum_offset = max(4, (arch_v + 3) // 4 * 4)
        if accum_offset > 256:
            raise KernelError(f"arch VGPRs reach v{arch_v - 1}, beyond v255: AGPRs start at accum_offset ≤ 256", self.loc)
        next_free_vgpr = accum_offset + u["agpr"] if u["agpr"] else arch_v
        next_free_sgpr = max(u["sgpr"], self.system_sgpr_count)
        return {
            "group_segment_fixed_size": self.lds,
            "private_segment_fixed_size": 0,
            "kernarg_size": self.kernarg_size,
            "user_sgpr_count": self.user_sgpr_count,
            "user_sgpr_kernarg_segment_ptr": 1,
            "system_sgpr_workgroup_id_x": int("x" in self.workgroup_ids),
            "system_sgpr_workgroup_id_y": int("y" in self.workgroup_ids),
            "system_sgpr_workgroup_id_z": int("z" in self.workgroup_ids),
            "system_vgpr_workitem_id": self.workitem_ids,
            "next_free_vgpr": next_free_vgpr,
            "next_free_sgpr": next_free_sgpr,
            "accum_offset": accum_offset,
            "reserve_vcc": int("vcc" in u["specials"]),
            "float_denorm_mode_32": 3,
            "float_denorm_mode_16_64": 3,
            "ieee_mode": int(self.ieee_mode),
            "dx10_clamp": int(self.dx10_clamp),
            "arch_vgprs": arch_v,
            "agprs": u["agpr"],
        }

    @property
    def threads(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    def to_asm(self) -> str:
        from .asm.writer import write_kernel
        return write_kernel(self)

    def build(self, out_dir=None, *, check: bool = True):
        """Write NAME.s and NAME.co (through llvm-mc and ld.lld); returns the BuildResult."""
        from .asm.driver import build_kernel
        return build_kernel(self, out_dir, check=check)

