"""RegisterPlan: the register table an engineer draws, as declared data, with checks.

    plan = RegisterPlan("fa_fwd", accum_offset=256, regions={
        "S":  v[32:95],  "O": v[96:159], "Q": v[160:191], "KV": v[192:255],
        "dma_m0": s[63:67], "acc": a[0:127]},
        aliases={"S_pong": ("S", v[64:95])}, strict=True)

Ranges are inclusive (v[32:95] is 64 VGPRs). Rules (CDNA4 ISA §3 and notes §5.1):
- a wave has one unified 512-entry VGPR file: arch VGPRs v0..v(accum_offset-1), then AGPRs
  a0.. from accum_offset; accum_offset is 4..256 in steps of 4;
- usable SGPRs are s0..s101 (VCC sits above them on gfx9);
- regions do not overlap unless one is declared an alias inside the other;
- every register an instruction touches belongs to a region (strict mode);
- 64-bit and wider operands start at an even VGPR/AGPR (SGPR pairs even, quads multiple of 4).
Every violation is a PlanError of one sentence naming the line that declared the plan (or, for an
instruction, the line that emitted it).
"""
from __future__ import annotations

from dataclasses import dataclass

from .errors import PlanError, SourceLoc, user_location
from .isa.operands import FILES, Mod, Reg

VGPR_FILE = 512        # unified arch VGPR + AGPR entries per lane (gfx90a+/gfx950)
ARCH_VGPR_MAX = 256    # v0..v255
SGPR_USABLE = 102      # s0..s101


@dataclass(frozen=True)
class PlanRegion:
    name: str
    reg: Reg
    alias_of: str | None = None

    @property
    def file(self) -> str:
        return self.reg.file

    @property
    def size(self) -> int:
        return self.reg.count


class RegisterPlan:
    """Named, pinned register regions with bound, overlap, alignment and use checks."""

    def __init__(self, name: str, *, regions: dict, aliases: dict | None = None, accum_offset: int | None = None,
                 strict: bool = False):
        self.name = name
        self.loc: SourceLoc | None = user_location()
        self.strict = strict
        self.regions: dict[str, PlanRegion] = {}
        self.uses: dict[str, int] = {}
        if accum_offset is not None and (not isinstance(accum_offset, int) or isinstance(accum_offset, bool)
                                         or not (4 <= accum_offset <= 256) or accum_offset % 4):
            self._fail(f"accum_offset={accum_offset!r} is invalid: AGPRs start at a multiple of 4 from 4 to 256")
        self.accum_offset = accum_offset
        for rname, reg in regions.items():
            self._add(rname, reg, None)
        for rname, spec in (aliases or {}).items():
            if not (isinstance(spec, tuple) and len(spec) == 2):
                self._fail(f"alias '{rname}' must be (parent_region, range), e.g. (\"S\", v[64:95]), not {spec!r}")
            parent, reg = spec
            if parent not in self.regions:
                self._fail(f"alias '{rname}' refers to region '{parent}', which the plan does not declare")
            self._add(rname, reg, parent)
        self._check_bounds()
        self._check_overlaps()

    # ---- declaration checks -----------------------------------------------------------------
    def _fail(self, msg: str):
        raise PlanError(f"plan '{self.name}': {msg}", self.loc)

    def _add(self, rname: str, reg, parent: str | None) -> None:
        if not isinstance(rname, str) or not rname.isidentifier():
            self._fail(f"region name {rname!r} must be an identifier")
        if rname in self.regions:
            self._fail(f"region '{rname}' is declared twice")
        if isinstance(reg, Mod) or not isinstance(reg, Reg):
            self._fail(f"region '{rname}' must be a register range such as v[32:95], not {reg!r}")
        if parent is not None:
            p = self.regions[parent].reg
            if reg.file != p.file or reg.index < p.index or reg.last > p.last:
                self._fail(f"alias '{rname}' = {reg} lies outside its parent '{parent}' = {p}")
        self.regions[rname] = PlanRegion(rname, reg, parent)

    def _check_bounds(self) -> None:
        ao = self.accum_offset
        for r in self.regions.values():
            g = r.reg
            if g.file == "v":
                limit = ao if ao is not None else ARCH_VGPR_MAX
                if g.last >= limit:
                    why = f"AGPRs start at accum_offset={ao}" if ao is not None else "arch VGPRs end at v255"
                    self._fail(f"region '{r.name}' = {g} reaches past v{limit - 1} ({why})")
            elif g.file == "a":
                base = ao if ao is not None else self._min_accum_offset()
                if base + g.last + 1 > VGPR_FILE:
                    self._fail(f"region '{r.name}' = {g} needs {base + g.last + 1} VGPR+AGPR slots with AGPRs from "
                               f"{base}; a lane has {VGPR_FILE}")
            elif g.file == "s" and g.last >= SGPR_USABLE:
                self._fail(f"region '{r.name}' = {g} reaches past s{SGPR_USABLE - 1}, the last usable SGPR")

    def _min_accum_offset(self) -> int:
        hv = self.highest()["v"]
        return max(4, (hv + 1 + 3) // 4 * 4)

    def _check_overlaps(self) -> None:
        items = list(self.regions.values())
        for i, x in enumerate(items):
            for y in items[i + 1:]:
                if not x.reg.overlaps(y.reg) or self._related(x.name, y.name):
                    continue
                self._fail(f"regions '{x.name}' = {x.reg} and '{y.name}' = {y.reg} overlap "
                           f"(declare one as an alias of the other if that is intended)")

    def _root(self, name: str) -> str:
        while self.regions[name].alias_of is not None:
            name = self.regions[name].alias_of
        return name

    def _related(self, a: str, b: str) -> bool:
        """Aliases may overlap their own parent chain (and each other inside the same root)."""
        return self._root(a) == self._root(b)

    # ---- queries -------------------------------------------------------------------------------
    def __getitem__(self, name: str) -> Reg:
        try:
            return self.regions[name].reg
        except KeyError:
            raise PlanError(f"plan '{self.name}' has no region '{name}' (it has: {', '.join(self.regions)})") from None

    def __getattr__(self, name: str) -> Reg:
        regions = self.__dict__.get("regions")
        if regions is not None and name in regions:
            return regions[name].reg
        raise AttributeError(name)

    def region_of(self, file: str, index: int) -> str | None:
        """The innermost declared region holding this register (an alias wins over its parent)."""
        cache = self.__dict__.setdefault("_region_cache", {})
        key = (file, index, len(self.regions))   # regions only grow while the plan is declared
        if key not in cache:
            cache[key] = self._region_of(file, index)
        return cache[key]

    def _region_of(self, file: str, index: int) -> str | None:
        best = None
        for r in self.regions.values():
            g = r.reg
            if g.file == file and g.index <= index <= g.last and (best is None or g.count < best.reg.count):
                best = r
        return best.name if best else None

    def highest(self) -> dict:
        """Last register each file's regions reach ({'v': 95, 'a': 127, 's': 67}); -1 when unused."""
        hi = {"v": -1, "a": -1, "s": -1}
        for r in self.regions.values():
            hi[r.file] = max(hi[r.file], r.reg.last)
        if self.accum_offset is not None and hi["a"] >= 0:
            hi["v"] = max(hi["v"], self.accum_offset - 1)  # AGPRs begin exactly at accum_offset
        return hi

    # ---- instruction checks -------------------------------------------------------------------
    def check_instruction(self, inst) -> None:
        """Attribute every register the instruction touches to a region; alignment of wide operands."""
        for op in inst.operands:
            base = op.base if isinstance(op, Mod) else op
            if not isinstance(base, Reg):
                continue
            roots = {self._root(n) for n in (self.region_of(base.file, i) for i in base.regs()) if n is not None}
            if len(roots) > 1:
                raise PlanError(f"{inst.mnemonic} operand {base} straddles plan regions "
                                f"{' and '.join(sorted(roots))} of plan '{self.name}'", inst.loc)
            if base.count >= 2:
                align = 2 if base.file in ("v", "a") or base.count == 2 else 4
                if base.index % align:
                    where = f" in region '{next(iter(roots))}'" if roots else ""
                    raise PlanError(f"{inst.mnemonic} operand {base}{where} is {base.count} registers wide and must "
                                    f"start at a multiple of {align}", inst.loc)
        for f, i in sorted(inst.reads | inst.writes, key=str):
            if f not in FILES:
                continue
            rname = self.region_of(f, i)
            if rname is None:
                if self.strict:
                    raise PlanError(f"{inst.mnemonic} touches {f}{i}, which no region of plan '{self.name}' "
                                    f"declares (strict plan)", inst.loc)
                continue
        touched = {self.region_of(f, i) for f, i in inst.reads | inst.writes if f in FILES}
        for rname in touched - {None}:
            self.uses[rname] = self.uses.get(rname, 0) + 1

    # ---- reports ------------------------------------------------------------------------------
    def rows(self) -> list[tuple[str, str, str, int, str]]:
        order = {"v": 0, "a": 1, "s": 2}
        rs = sorted(self.regions.values(), key=lambda r: (order[r.file], r.reg.index, -r.reg.count, r.name))
        return [(r.name, FILES[r.file], str(r.reg), r.size, r.alias_of or "") for r in rs]

    def __str__(self) -> str:
        head = ("region", "file", "range", "size", "alias of")
        body = [(n, f, g, str(z), al) for n, f, g, z, al in self.rows()]
        widths = [max(len(x[c]) for x in [head] + body) for c in range(5)]
        fmt = lambda row: "  ".join(str(x).ljust(w) for x, w in zip(row, widths)).rstrip()  # noqa: E731
        title = f"plan {self.name}" + (f" (accum_offset {self.accum_offset})" if self.accum_offset else "") + \
            (" strict" if self.strict else "")
        return "\n".join([title, fmt(head), fmt(["-" * w for w in widths])] + [fmt(r) for r in body])

    def print(self) -> None:
        print(str(self))

    def to_dict(self) -> dict:
        return {
            "name": self.name, "accum_offset": self.accum_offset, "strict": self.strict,
            "regions": {r.name: {"file": r.file, "first": r.reg.index, "last": r.reg.last, "size": r.size,
                                 **({"alias_of": r.alias_of} if r.alias_of else {})}
                        for r in self.regions.values()},
            "highest": self.highest(),
        }

    def diff(self, other: "RegisterPlan") -> str:
        """What changed from self to other, one line per region (empty string when equal)."""
        a, b = self.regions, other.regions
        out = []
        if self.accum_offset != other.accum_offset:
            out.append(f"~ accum_offset: {self.accum_offset} -> {other.accum_offset}")
        for n in sorted(set(a) | set(b), key=lambda n: (n not in a, n)):
            if n not in b:
                out.append(f"- {n}: {a[n].reg}")
            elif n not in a:
                out.append(f"+ {n}: {b[n].reg}" + (f" (alias of {b[n].alias_of})" if b[n].alias_of else ""))
            elif a[n].reg != b[n].reg or a[n].alias_of != b[n].alias_of:
                extra = "" if a[n].alias_of == b[n].alias_of else f" (alias of {a[n].alias_of} -> {b[n].alias_of})"
                out.append(f"~ {n}: {a[n].reg} -> {b[n].reg}{extra}")
        if not out:
            return ""
        return f"--- plan {self.name}\n+++ plan {other.name}\n" + "\n".join(out)
