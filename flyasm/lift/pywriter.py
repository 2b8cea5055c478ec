"""Write a lifted kernel as Python: a register plan, one function per group of basic blocks, a
build() that calls them in order inside their loop/block regions, and the foreign descriptor.

Each instruction becomes the builder call that gives back the same instruction (checked here by
building it), or `k.raw(words, text)` when the builder or the text cannot give back its bytes.
The same Kernel is built in memory alongside, so the caller can compare it with the original.

Bound: one builder call and one encoding per instruction, O(I).
"""
from __future__ import annotations

import keyword
from dataclasses import dataclass, field

from ..asm.writer import _OWN_DIRECTIVES
from ..errors import FlyasmError, SourceLoc
from ..isa import builders
from ..isa.instruction import HEX_MODS, Instruction
from ..isa.operands import SPECIAL_NAMES, Expr, Imm, Label, Mod, Reg, Special, Waitcnt
from ..kernel import ARG_TYPES, Kernel
from .regplan import RegionIndex
from .source import LiftSource

_LOC = SourceLoc("<lift>", 0)
_NAMED_SPECIALS = {"m0": "m0", "vcc": "vcc", "vcc_lo": "vcc_lo", "vcc_hi": "vcc_hi", "exec": "exec_",
                   "exec_lo": "exec_lo", "exec_hi": "exec_hi", "scc": "scc", "off": "off"}
# LLVM's values for `.amdhsa_` directives a kernel does not write (AMDGPUAsmParser defaults).
_DIRECTIVE_DEFAULTS = {"system_sgpr_workgroup_id_x": 1, "float_denorm_mode_32": 3, "float_denorm_mode_16_64": 3,
                       "ieee_mode": 1, "dx10_clamp": 1}


@dataclass
class Line:
    text: str
    pc: int | None
    regions: set = field(default_factory=set)


class Renderer:
    def __init__(self, index: RegionIndex):
        self.index = index
        self.raw_count = 0
        self.builder_count = 0

    def reg(self, r: Reg, used: set) -> str:
        hit = self.index.expr(r)
        if hit is not None:
            used.add(hit[0])
            return hit[1]
        return f"{r.file}[{r.index}]" if r.count == 1 else f"{r.file}[{r.index}:{r.last}]"

    def operand(self, op, used: set) -> str:
        if isinstance(op, Reg):
            return self.reg(op, used)
        if isinstance(op, Mod):
            base = op.base
            if isinstance(base, (Reg, Special)):
                t = self.operand(base, used)
                if op.sext:
                    t = f"sext({t})"
                if op.abs:
                    t = f"abs({t})"
                if op.neg:
                    t = f"-{t}"
                return t
            return f"Mod({self.operand(base, used)}, neg={op.neg}, abs={op.abs}, sext={op.sext})"
        if isinstance(op, Special):
            return _NAMED_SPECIALS.get(op.name, f'Special("{op.name}")')
        if isinstance(op, Imm):
            x = op.value
            if isinstance(x, float):
                return repr(x)
            return str(x) if -64 <= x <= 64 else (hex(x) if x >= 0 else f"-{hex(-x)}")
        if isinstance(op, Label):
            return f'"{op.name}"' if op.name not in SPECIAL_NAMES else f'k.L("{op.name}")'
        if isinstance(op, Waitcnt):
            return f"Waitcnt({op.vmcnt}, {op.expcnt}, {op.lgkmcnt})"
        if isinstance(op, Expr):
            return f"Expr({op.text!r})"
        raise FlyasmError(f"cannot write operand {op!r} as Python", find_loc=False)

    @staticmethod
    def modifier(name: str, value) -> str:
        if isinstance(value, int) and not isinstance(value, bool) and name in HEX_MODS:
            val = hex(value)
        else:
            val = repr(value)
        if name.isidentifier() and not keyword.iskeyword(name):
            return f"{name}={val}"
        return f"**{{{name!r}: {val}}}"

    def builder_ok(self, inst: Instruction) -> Instruction | None:
        """The instruction the builder makes from these operands, if it is the same one."""
        if inst.raw is not None or inst.mnemonic == ".long":
            return None
        try:
            new = builders.make(inst.mnemonic, *inst.operands, loc=_LOC, **inst.modifiers)
        except FlyasmError:
            return None
        except Exception:   # noqa: BLE001 - any builder refusal means: keep the words
            return None
        return new if new.text() == inst.text() else None

    _UNSET = object()

    def line(self, inst: Instruction, enc: bytes | None, new=_UNSET) -> tuple[Line, Instruction]:
        """The Python line for one instruction; `new` is builder_ok(inst) when already known.
        An LDS-buffer tag (what the wait-counter checker orders DMA and reads by) is kept."""
        ln, out = self._line(inst, enc, new)
        tag = getattr(inst, "lds_buffer", None)
        if tag:
            out.lds_buffer = tag
            code, sep, note = ln.text.partition("  # ")
            ln.text = f"{code}.lds_buffer = {tag!r}" + (f"{sep}{note}" if sep else "")
        return ln, out

    def _line(self, inst: Instruction, enc: bytes | None, new=_UNSET) -> tuple[Line, Instruction]:
        used: set = set()
        if new is Renderer._UNSET:
            new = self.builder_ok(inst)
        if new is not None:
            ops = inst.operands
            if inst.mnemonic.startswith("s_waitcnt") and len(ops) == 1 and isinstance(ops[0], Waitcnt):
                w = ops[0]
                parts = [f"{n}={getattr(w, n)}" for n in ("vmcnt", "expcnt", "lgkmcnt") if getattr(w, n) is not None]
                args = parts or ["Waitcnt(63, 7, 15)"]
            else:
                args = [self.operand(op, used) for op in ops]
            args += [self.modifier(n, v) for n, v in inst.modifiers.items()]
            self.builder_count += 1
            return Line(f"k.{inst.mnemonic}({', '.join(args)})", inst.pc, used), new
        data = inst.raw if inst.raw is not None else enc
        if data is None:
            raise FlyasmError(f"'{inst.text()}' has no builder form and no known encoding", find_loc=False)
        words = [int.from_bytes(data[i:i + 4], "little") for i in range(0, len(data), 4)]
        wt = ", ".join(f"0x{w:08x}" for w in words)
        wt = f"[{wt}]" if len(words) > 1 else wt
        self.raw_count += 1
        out = Instruction(inst.mnemonic, inst.operands, dict(inst.modifiers), None, comment=inst.comment, raw=data)
        if inst.mnemonic == ".long":
            note = f"  # {inst.comment}" if inst.comment else ""
            return Line(f"k.raw({wt}){note}", inst.pc), out
        return Line(f"k.raw({wt}, {inst.text()!r})", inst.pc), out


def _compress_words(words: list[int]) -> str:
    """A list of words as runs: [0xbf800000] * 258 + [...]."""
    if not words:
        return "[]"
    runs: list[tuple[int, int]] = []
    for w in words:
        if runs and runs[-1][0] == w:
            runs[-1] = (w, runs[-1][1] + 1)
        else:
            runs.append((w, 1))
    return " + ".join(f"[0x{w:08x}] * {n}" if n > 1 else f"[0x{w:08x}]" for w, n in runs)


def kernel_params(src: LiftSource) -> dict:
    f = src.kd.fields
    meta = src.metadata or {}
    req = meta.get(".reqd_workgroup_size")
    if isinstance(req, list) and req and all(isinstance(x, int) and x > 0 for x in req):
        block = tuple(req)
    else:
        block = int(meta.get(".max_flat_workgroup_size") or 64)
    wg = "".join(c for c in "xyz" if f[f"enable_sgpr_workgroup_id_{c}"])
    return {"block": block, "lds": src.kd.group_segment_fixed_size, "arg_layout": "natural",
            "workgroup_ids": wg, "workitem_ids": min(f["enable_vgpr_workitem_id"], 2),
            "code_object": src.code_object, "ieee_mode": bool(f["enable_ieee_mode"]),
            "dx10_clamp": bool(f["enable_dx10_clamp"])}


def foreign_descriptor(src: LiftSource, k: Kernel) -> tuple[dict, bytes | None]:
    """Directives whose foreign value differs from what flyasm computes for `k` (see kernel.Foreign)."""
    if src.kd.inexpressible():
        return {}, src.kd.raw
    d = k.descriptor()
    own = {key: d[key] for key in _OWN_DIRECTIVES}
    out = {}
    for key, val in src.kd.directives():
        mine = own.get(key, _DIRECTIVE_DEFAULTS.get(key, 0))
        # the file declares its arguments after this comparison: the kernarg size always stands
        if mine != val or key == "kernarg_size":
            out[key] = val
    return out, None


def arg_decls(src: LiftSource) -> list[str]:
    """k.arg(...) for arguments that flyasm's natural layout places exactly; the rest as comments."""
    out = []
    names: set[str] = set()
    end = 0
    ok = True
    for i, a_ in enumerate((src.metadata or {}).get(".args", []) or []):
        name = a_.get(".name") if isinstance(a_.get(".name"), str) else None
        py = name if name and name.isidentifier() and not keyword.iskeyword(name) else f"arg{i}"
        if py in names:
            py = f"{py}_{i}"
        names.add(py)
        size, off, kind = a_.get(".size"), a_.get(".offset"), a_.get(".value_kind")
        typ = {(8, "global_buffer"): "ptr", (4, "by_value"): "i32", (8, "by_value"): "i64",
               (2, "by_value"): "i16"}.get((size, kind))
        desc = f"offset {off}, {size} bytes, {kind}" + (f" ({a_['.type_name']})" if a_.get(".type_name") else "")
        if ok and typ and isinstance(off, int) and off == (end + ARG_TYPES[typ][1] - 1) // ARG_TYPES[typ][1] * ARG_TYPES[typ][1]:
            out.append(f'k.arg("{py}", "{typ}")  # {desc}')
            end = off + size
        else:
            ok = False
            out.append(f"# argument {py}: {desc}")
    return out
