#!/usr/bin/env python3
"""Generate isa_tables/gfx950.json from LLVM's own gfx950 syntax reference and LLVM's tools.

Sources, in the order they are trusted:
1. llvm-mc (gfx950): every table row is assembled; what llvm-mc accepts is what the row says.
   It fixes operand counts and register widths where the generated docs are wrong or silent,
   gives the opcode and the canonical (printed) mnemonic, and tells which encodings
   (_e64/_dpp/_sdwa) and modifiers each instruction accepts.
2. LLVM's generated syntax pages `AMDGPUAsmGFX950.rst` and `gfx950_operands.rst`
   (../shared/reference/llvm/llvm/docs/AMDGPU): the list of mnemonics per encoding family and the
   operand slots with their accepted register classes and sizes.
3. llvm-objdump: a sweep over each family's opcode field decodes every opcode number; mnemonics it
   finds that the syntax page does not list are reported (coverage check).
4. Facts that LLVM's tools cannot print (functional unit, MFMA passes, wait counter, implicit
   registers) come from the rule tables below, each with its citation.

Usage: python tools/gen_isa_tables.py [--shared ../shared] [--out isa_tables/gfx950.json]
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from flyasm.asm.toolchain import find_toolchain  # noqa: E402

REF = re.compile(r":ref:`([^<`]*)<([^>]*)>`")

# ---------------------------------------------------------------------------------------------
# Rule tables (facts not printed by LLVM's tools). Citations: notes = shared/reference/gfx950_isa_notes.md
# ---------------------------------------------------------------------------------------------

# MFMA passes: SISchedule.td, SchedModel SIDPGFX950FullSpeedModel (ROCm/llvm-project 37d9a345; notes §1.2).
# LLVM's regexes use TableGen names (V_MFMA_F32_32X32X1F32); these are the same rules spelled with the
# printed names the syntax page and llvm-objdump use (v_mfma_f32_32x32x1_2b_f32). First match wins.
MFMA_PASSES = [
    (r"^v_mfma_f64_16x16x4_", 16),                        # V_MFMA_.64_16X16X  -> Write16PassDGEMM
    (r"^v_mfma_f64_4x4x4_", 4),                           # V_MFMA_.64_4X4X    -> Write4PassDGEMM
    (r"^v_mfma_(scale_)?f32_16x16x128_f8f6f4", "f8f6f4_16x16"),  # 8 if A or B is fp8/bf8, else 4
    (r"^v_mfma_(scale_)?f32_32x32x64_f8f6f4", "f8f6f4_32x32"),   # 16 if A or B is fp8/bf8, else 8
    (r"^v_smfmac_.32_16x16x", 4),                         # V_SMFMAC_.32_16X16X
    (r"^v_smfmac_.32_32x32x", 8),                         # V_SMFMAC_.32_32X32X
    (r"^v_mfma_.32_4x4x", 2),                             # V_MFMA_.32_4X4X
    (r"^v_mfma_.32_16x16x(16|32|64)_", 4),                # 16X16X16, 16X16X32, 16X16X64
    (r"^v_mfma_.32_16x16x[14]_", 8),                      # 16X16X[14][FBI]
    (r"^v_mfma_.32_32x32x(8|16|32)_", 8),                 # 32X32X8, 32X32X16, 32X32X32_
    (r"^v_mfma_.32_32x32x[124]_", 16),                    # 32X32X[124][FBI]
]

# TRANS ops (CDNA4 ISA Table 12 list; notes §3.5 and §4.2 row 14).
TRANS = re.compile(r"^v_(exp|log|rcp|rsq|sqrt|sin|cos|rcp_iflag|exp_legacy|log_legacy)_(f16|f32|f64)$")

# SALU instructions that write SCC (CDNA4 ISA §5 "SALU"; every SOPC writes SCC).
SCC_WRITERS = re.compile(
    r"^s_(add|sub|addc|subb|absdiff|and|or|xor|andn2|orn2|nand|nor|xnor|lshl|lshr|ashr|bfe|bfm_never"
    r"|min|max|not|abs|wqm|quadmask|bcnt[01]|bitcmp|cmp|cmpk|lshl[1-4]_add|and_saveexec|or_saveexec"
    r"|xor_saveexec|andn2_saveexec|orn2_saveexec|nand_saveexec|nor_saveexec|xnor_saveexec"
    r"|andn1_saveexec|orn1_saveexec|andn1_wrexec|andn2_wrexec|addk|mulk_never|ff1_never)(_|$)"
)
SCC_READERS = re.compile(r"^s_(addc|subb|cselect|cmov_b|cmovk|cbranch_scc[01])(_|$)")
EXEC_WRITERS_S = re.compile(r"^s_(and|or|xor|andn2|orn2|nand|nor|xnor|andn1|orn1)_saveexec|^s_andn[12]_wrexec")
M0_READERS = re.compile(r"^(s_movrel|s_movreld|s_sendmsg|ds_.*addtid|ds_gws|global_load_lds|s_set_gpr_idx)")

# (family, mnemonic, operand ids in gfx950_operands.rst): in llvm-mc but not in AMDGPUAsmGFX950.rst
# (llvm/test/MC/AMDGPU/mai-gfx950.s has v_mfma_ld_scale_b32).
EXTRA_ROWS = [("VOP3P", "v_mfma_ld_scale_b32", ["scale_src0", "scale_src1"])]

MIX_RENAMES = {"v_mad_mix_f32": "v_fma_mix_f32", "v_mad_mixhi_f16": "v_fma_mixhi_f16",
               "v_mad_mixlo_f16": "v_fma_mixlo_f16"}

# (family, field): where the opcode lives in the first dword: (lowest bit, width). CDNA4 ISA ch.13.
OPCODE_FIELD = {
    "SOP2": (23, 7), "SOPK": (23, 5), "SOP1": (8, 8), "SOPC": (16, 7), "SOPP": (16, 7),
    "SMEM": (18, 8), "VOP1": (9, 8), "VOP2": (25, 6), "VOPC": (17, 8), "VOP3": (16, 10),
    "VOP3P": (16, 7), "VOP3PX2": (16, 7), "DS": (17, 8), "MUBUF": (18, 7), "MTBUF": (15, 4),
    "FLAT": (18, 7), "FLAT_GLBL": (18, 7), "FLAT_SCRATCH": (18, 7),
}
# Fixed high bits that identify each family's first dword, for the objdump sweep.
SWEEP = {
    "SOP2": (0x80000000, 23, 7), "SOPK": (0xB0000000, 23, 5), "SOP1": (0xBE800000, 8, 8),
    "SOPC": (0xBF000000, 16, 7), "SOPP": (0xBF800000, 16, 7), "VOP1": (0x7E000000, 9, 8),
    "VOP2": (0x00000000, 25, 6), "VOPC": (0x7C000000, 17, 8), "VOP3": (0xD0000000, 16, 10),
    "VOP3P": (0xD3800000, 16, 7), "DS": (0xD8000000, 17, 8), "MUBUF": (0xE0000000, 18, 7),
    "SMEM": (0xC0000000, 18, 8), "FLAT": (0xDC000000, 18, 7),
}


def unit_of(fam: str, mn: str) -> str:
    if fam in ("SOP1", "SOP2", "SOPC", "SOPK"):
        return "BRANCH" if mn in ("s_setpc_b64", "s_swappc_b64", "s_call_b64", "s_cbranch_join",
                                  "s_cbranch_i_fork", "s_cbranch_g_fork") else "SALU"
    if fam == "SOPP":
        if mn.startswith(("s_branch", "s_cbranch")):
            return "BRANCH"
        if mn in ("s_waitcnt", "s_nop", "s_barrier", "s_setprio", "s_sleep", "s_endpgm", "s_sendmsg",
                  "s_sendmsghalt", "s_trap", "s_icache_inv", "s_incperflevel", "s_decperflevel",
                  "s_ttracedata", "s_set_gpr_idx_off", "s_set_gpr_idx_mode", "s_endpgm_saved",
                  "s_endpgm_ordered_ps_done", "s_wakeup", "s_setkill", "s_setvskip", "s_rfe_restore_b64"):
            return "SOPP"
        return "SOPP"
    if fam == "SMEM":
        return "SMEM"
    if fam.startswith("VOP"):
        if mn.startswith(("v_mfma", "v_smfmac")):
            return "MFMA"
        if TRANS.match(mn):
            return "TRANS"
        return "VALU"
    if fam == "DS":
        return "DS"
    if fam in ("MUBUF", "MTBUF", "FLAT_GLBL", "FLAT_SCRATCH"):
        return "VMEM"
    if fam == "FLAT":
        return "FLAT"
    return "OTHER"


def counter_of(fam: str, mn: str) -> str | None:
    """Wait counter (notes §3.4): vm (ordered), lgkm (DS ordered), lgkm_smem (unordered), both (FLAT)."""
    if fam == "SMEM":
        return "lgkm_smem"
    if fam == "DS":
        return None if mn == "ds_nop" else "lgkm"
    if fam in ("MUBUF", "MTBUF", "FLAT_GLBL", "FLAT_SCRATCH"):
        return "vm"
    if fam == "FLAT":
        return "vm+lgkm"
    if mn in ("s_sendmsg", "s_sendmsghalt"):
        return "lgkm"
    return None


def mfma_info(mn: str) -> dict:
    info: dict = {}
    if not mn.startswith(("v_mfma", "v_smfmac")) or mn == "v_mfma_ld_scale_b32":
        return info
    for pat, p in MFMA_PASSES:
        if re.match(pat, mn):
            info["passes"] = p
            break
    else:
        raise SystemExit(f"no MFMA pass count rule for {mn}")
    if re.match(r"^v_mfma_f64", mn):
        info["mfma_kind"] = "dgemm"
    elif re.match(r"^v_mfma_f32_\d+x\d+x\d+(_\d+b)?_f32$", mn):
        info["mfma_kind"] = "sgemm"  # non-XDL f32 MFMA ("SMFMA" in GCNHazardRecognizer)
    else:
        info["mfma_kind"] = "xdl"
    m = re.match(r"^v_(?:mfma|smfmac)(?:_scale)?_([fi]\d+)_(\d+)x(\d+)x(\d+)", mn)
    if m:
        info["shape"] = [int(m.group(2)), int(m.group(3)), int(m.group(4))]
    b = re.search(r"x\d+_(\d+)b_", mn)
    info["blocks"] = int(b.group(1)) if b else 1
    return info


def mem_kind(fam: str, mn: str) -> str | None:
    if fam not in ("DS", "MUBUF", "MTBUF", "FLAT", "FLAT_GLBL", "FLAT_SCRATCH", "SMEM"):
        return None
    if "atomic" in mn or re.match(r"^ds_(add|sub|rsub|inc|dec|min|max|and|or|xor|mskor|cmpst|wrxchg|condxchg|pk_add)", mn):
        return "atomic"
    if re.search(r"(load|read|_rtn_|bpermute|permute|swizzle|consume|append|atc_probe|memtime|memrealtime|dcache|gws)", mn):
        return "load" if not mn.startswith("s_dcache") else "other"
    if re.search(r"(store|write)", mn):
        return "store"
    return "other"


# ---------------------------------------------------------------------------------------------
# Parsing LLVM's generated syntax pages
# ---------------------------------------------------------------------------------------------

def parse_operand_defs(path: Path) -> dict:
    text = path.read_text()
    defs = {}
    for block in re.split(r"\n\.\. _amdgpu_synid_gfx950_", text)[1:]:
        sid = block.split(":", 1)[0]
        size = re.search(r"\*Size:\* ([0-9]+) dwords?\.", block)
        ops = re.search(r"\*Operands:\* (.*)", block)
        kinds = [k for k, _ in REF.findall(ops.group(1))] if ops else []
        defs[sid] = {"dwords": int(size.group(1)) if size else None, "kinds": kinds}
    return defs


def parse_instructions(path: Path) -> list[dict]:
    rows, fam = [], None
    lines = path.read_text().splitlines()
    for i, line in enumerate(lines):
        if i + 1 < len(lines) and re.match(r"^-+$", lines[i + 1]) and re.match(r"^[A-Z][A-Z0-9_]+$", line):
            fam = line
            continue
        if not fam or not line.startswith("    ") or not re.match(r"^    [a-z]", line):
            continue
        mn = line.split()[0]
        if not re.match(r"^(s|v|ds|buffer|tbuffer|flat|global|scratch)_[a-z0-9_]+$", mn):
            continue
        slots, mods = [], []
        for name, target in REF.findall(line):
            if target.startswith("amdgpu_synid_gfx950_"):
                slots.append({"name": name, "sid": target[len("amdgpu_synid_gfx950_"):]})
            else:
                mods.append(name)
        rows.append({"family": fam, "mnemonic": mn, "slots": slots, "doc_modifiers": mods})
    return rows


# ---------------------------------------------------------------------------------------------
# Operand model for the table
# ---------------------------------------------------------------------------------------------

SGPR_LIKE = {"s", "flat_scratch", "xnack_mask", "vcc", "ttmp", "m0", "exec"}


def slot_kinds(doc_kinds: list[str]) -> list[str]:
    """Normalise LLVM's operand classes to flyasm kinds."""
    out = []
    for k in doc_kinds:
        if k == "v":
            out.append("vgpr")
        elif k == "a":
            out.append("agpr")
        elif k == "s" or k == "ttmp" or k in ("flat_scratch", "xnack_mask"):
            if "sgpr" not in out:
                out.append("sgpr")
        elif k in ("vcc", "m0", "exec", "vccz", "execz", "scc", "lds_direct"):
            out.append(k)
        elif k == "fconst":
            out.append("iconst")
        elif k == "literal":
            out.append("literal")
        elif k in ("label", "hwreg", "sendmsg", "waitcnt", "imm16", "simm8"):
            out.append(k)
    return out


# Both operands are swapped, so both are read and written: the permlane swaps (notes §3.2) and
# V_SWAP_B32 (CDNA4 ISA VOP1 "tmp = D; D = S0; S0 = tmp"; LLVM VOP1Instructions.td VOP_SWAP_I32 has
# two defs tied to the two sources: `llvm-mc -show-inst` prints 4 register operands for `v_swap_b32 v1, v2`).
SWAPS = ("v_permlane16_swap_b32", "v_permlane32_swap_b32", "v_swap_b32")


def access_of(fam: str, mn: str, slot: str, index: int, mk: str | None) -> str:
    if mn in SWAPS and index < 2:
        return "rw"
    if slot in ("vdst", "sdst", "dst"):
        if fam == "SOPK" and mn in ("s_addk_i32", "s_mulk_i32", "s_cmovk_i32"):
            return "rw"
        if fam == "VOPC":
            return "w"
        return "w"
    if slot == "vcc":
        # VOPC first operand and VOP2 carry-out are writes; v_cndmask/addc/subb sources read vcc.
        if fam == "VOPC" and index == 0:
            return "w"
        if mn in ("v_add_co_u32", "v_sub_co_u32", "v_subrev_co_u32") and index == 1:
            return "w"
        if mn in ("v_addc_co_u32", "v_subb_co_u32", "v_subbrev_co_u32"):
            return "w" if index == 1 else "r"
        return "r"
    if slot in ("sdata", "vdata"):
        return "w" if mk == "load" else "r"  # an atomic's data is written back only when it returns
    return "r"


def written_with(fam: str, slot: str, mk: str | None) -> str | None:
    """The modifier that makes an atomic return its pre-op value into its data operand: glc for
    SMEM (LLVM SMInstructions.td selects S_ATOMIC_*_RTN, with sdst tied to sdata, only with glc),
    sc0 for MUBUF (BUFFER_ATOMIC_*_RTN only with sc0). Without it the operand is only read."""
    if mk != "atomic":
        return None
    if fam == "SMEM" and slot == "sdata":
        return "glc"
    if fam in ("MUBUF", "MTBUF") and slot == "vdata":
        return "sc0"
    return None


def tied_of(mn: str) -> bool:
    """Destination also read: MAC forms, and SMFMAC (accumulates into vdst; src2 is the index)."""
    return bool(re.match(r"^v_(mac|fmac|pk_fmac|dot2c|dot4c|dot8c)_|^v_smfmac_", mn))


# ---------------------------------------------------------------------------------------------
# llvm-mc probes
# ---------------------------------------------------------------------------------------------

ALIGNED = {1: 1, 2: 2, 3: 4, 4: 4, 6: 2, 8: 4, 16: 4, 32: 4}


def reg_text(prefix: str, base: int, width: int) -> str:
    return f"{prefix}{base}" if width == 1 else f"{prefix}[{base}:{base + width - 1}]"


class ProbeBuilder:
    """Synthesises one valid instance of an instruction from its slots."""

    VBASE = [0, 16, 32, 48, 64, 96]
    SBASE = [8, 12, 16, 20, 24, 28]

    def operand(self, slot: dict, i: int, width: int) -> str:
        kinds = slot["kinds"]
        if "label" in kinds:
            return "0"
        if "hwreg" in kinds:
            return "hwreg(HW_REG_MODE)"
        if "sendmsg" in kinds:
            return "sendmsg(MSG_INTERRUPT)"
        if "waitcnt" in kinds:
            return "0"
        if "imm16" in kinds or "simm8" in kinds:
            return "0"
        if slot["name"] in ("vaddr",) and slot.get("off_ok"):
            return "off"
        if slot["name"] == "saddr":
            return "off"
        if "vgpr" in kinds:
            return reg_text("v", self.VBASE[i % len(self.VBASE)], width)
        if "agpr" in kinds:
            return reg_text("a", self.VBASE[i % len(self.VBASE)], width)
        if "sgpr" in kinds:
            return reg_text("s", self.SBASE[i % len(self.SBASE)], width)
        if "vcc" in kinds:
            return "vcc"
        if "literal" in kinds:
            return "0x12345"
        if "iconst" in kinds:
            return "1"
        return "0"


def run_mc(mc: Path, lines: list[str]) -> tuple[dict[int, str], dict[int, str]]:
    """Assemble lines; return {index: 'printed ; encoding'} and {index: error}."""
    with tempfile.TemporaryDirectory() as td:
        src = Path(td) / "p.s"
        src.write_text("\n".join(lines) + "\n")
        r = subprocess.run([str(mc), "-triple=amdgcn-amd-amdhsa", "-mcpu=gfx950", "-show-encoding", str(src)],
                           capture_output=True, text=True)
    ok, err = {}, {}
    for m in re.finditer(rf"{re.escape(str(src))}:(\d+):\d+: error: (.*)", r.stderr):
        err.setdefault(int(m.group(1)) - 1, m.group(2))
    good = [i for i in range(len(lines)) if i not in err]
    printed = [ln.strip() for ln in r.stdout.splitlines() if "encoding:" in ln]
    if len(printed) != len(good):
        raise SystemExit(f"llvm-mc output mismatch: {len(printed)} printed for {len(good)} good lines")
    for i, p in zip(good, printed):
        ok[i] = p
    return ok, err


def parse_printed(p: str) -> tuple[str, list[int]]:
    text, enc = p.split("; encoding:")
    mn = text.split()[0]
    data = [int(x, 16) for x in re.findall(r"0x([0-9a-f]+)", enc)]
    return mn, data


def first_dword(data: list[int]) -> int:
    return int.from_bytes(bytes(data[:4]), "little")


def build(shared: Path, out: Path) -> dict:
    tc = find_toolchain()
    # The opcode sweep does not depend on the probes: run it in a second llvm-mc process meanwhile
    # (subprocess waits release the GIL, so a thread is enough).
    from concurrent.futures import ThreadPoolExecutor
    pool = ThreadPoolExecutor(max_workers=2)
    sweep_job = pool.submit(objdump_sweep, tc)
    docs = shared / "reference/llvm/llvm/docs/AMDGPU"
    defs = parse_operand_defs(docs / "gfx950_operands.rst")
    rows = parse_instructions(docs / "AMDGPUAsmGFX950.rst")
    # Rows the syntax page lacks although LLVM assembles them (found missing by the MC tests).
    for fam, mn, sids in EXTRA_ROWS:
        rows.append({"family": fam, "mnemonic": mn, "doc_modifiers": [],
                     "slots": [{"name": sid.split("_")[0] if sid.startswith("v") else sid, "sid": sid} for sid in sids]})
    # The syntax page lists gfx9's v_mad_mix*; gfx950 has the FMA forms (found by the objdump sweep).
    for row in list(rows):
        if row["mnemonic"] in MIX_RENAMES:
            rows.append({**row, "mnemonic": MIX_RENAMES[row["mnemonic"]],
                         "slots": [dict(x) for x in row["slots"]]})
    pb = ProbeBuilder()

    # Resolve slots: kinds and widths from the docs, widths to be confirmed by probing.
    for row in rows:
        fam, mn = row["family"], row["mnemonic"]
        for s in row["slots"]:
            d = defs.get(s["sid"], {"dwords": None, "kinds": []})
            s["kinds"] = slot_kinds(d["kinds"])
            s["dwords"] = d["dwords"]
        # Known documentation glitches (fixed by probing below): the VOP3 'src0' id is documented as an
        # interpolation attribute; MUBUF vaddr/srsrc ids are undefined.
        for i, s in enumerate(row["slots"]):
            if not s["kinds"]:
                if s["name"] == "src0":
                    # Width from a sibling source; kinds are settled by the per-slot probes below.
                    sib = next((t for t in row["slots"] if t["name"] in ("src1", "src2") and t["dwords"]), None)
                    s["kinds"] = ["vgpr", "sgpr", "iconst", "literal"]
                    s["dwords"] = None if sib is None else s["dwords"]
                elif s["name"] == "vaddr":
                    s["kinds"], s["off_ok"] = ["vgpr"], True
                elif s["name"] == "srsrc":
                    s["kinds"], s["dwords"] = ["sgpr"], 4
        if fam in ("MUBUF", "MTBUF"):
            for s in row["slots"]:
                if s["name"] == "vaddr":
                    s["off_ok"] = True

    # Probe: find one instance llvm-mc accepts. Widths: documented, else 1, 2, 4, 3 dwords.
    def candidates(s: dict) -> list[int]:
        return [s["dwords"]] if s["dwords"] else [1, 2, 4, 3]

    def texts(row: dict, widths: tuple, variant: str) -> list[str]:
        ops = []
        for i, (s, w) in enumerate(zip(row["slots"], widths)):
            t = pb.operand(s, i, w)
            is_src = s["name"].startswith("src") or s["name"] in ("ssrc1",)
            if variant == "const" and i > 0 and is_src and "iconst" in s["kinds"] and not t.startswith("v"):
                t = "1"
            if variant == "src0_sgpr" and s["name"] == "src0":
                t = reg_text("s", 8, w)
            if variant == "src0_const" and s["name"] == "src0":
                t = "1"
            elif variant == "src0_sgpr" and is_src and "iconst" in s["kinds"] and t.startswith("s"):
                t = "1"  # one SGPR per VALU instruction (constant bus)
            ops.append(t)
        return ops

    def instance(mn: str, ops: list[str], suffix: str = "") -> str:
        return (mn + " " + ", ".join(ops)).rstrip() + suffix

    import itertools
    pending = []  # (row index, widths, variant, drop_first, suffix)
    for idx, row in enumerate(rows):
        mn = row["mnemonic"]
        combos = list(itertools.product(*[candidates(s) for s in row["slots"]]))[:64]
        drops = [False, True] if "_load_lds_" in mn else [False]
        suffixes = [""] + ([" sc0"] if "atomic" in mn else [])
        for drop, suffix, variant, c in itertools.product(drops, suffixes, ["plain", "const", "src0_sgpr", "src0_const"], combos):
            pending.append((idx, c, variant, drop, suffix))
    lines = []
    for i, c, variant, drop, suffix in pending:
        ops = texts(rows[i], c, variant)
        lines.append(instance(rows[i]["mnemonic"], ops[1:] if drop else ops, suffix))
    ok, err = run_mc(tc.mc, lines)
    chosen: dict[int, tuple] = {}
    for n, key in enumerate(pending):
        if n in ok and key[0] not in chosen:
            chosen[key[0]] = key[1:] + (ok[n], lines[n])
    # Second round, only for rows nothing fitted: undocumented widths may also be 6, 8, 16 or 32
    # dwords (fp6 packs: v_cvt_scalef32_pk32_f32_fp6 v[2:33], v[2:7], v6 in gfx950_asm_features.s).
    wide = lambda s: [s["dwords"]] if s["dwords"] else [1, 2, 4, 3, 6, 8, 16, 32]  # noqa: E731
    pending2 = []
    for idx, row in enumerate(rows):
        if idx in chosen or not any(s["dwords"] is None for s in row["slots"]):
            continue
        for variant, c in itertools.product(["plain", "const", "src0_sgpr", "src0_const"],
                                            itertools.product(*[wide(s) for s in row["slots"]])):
            pending2.append((idx, c, variant, False, ""))
    if pending2:
        lines2 = [instance(rows[i]["mnemonic"], texts(rows[i], c, variant)) for i, c, variant, _, _ in pending2]
        ok2, err2 = run_mc(tc.mc, lines2)
        for n, key in enumerate(pending2):
            if n in ok2 and key[0] not in chosen:
                chosen[key[0]] = key[1:] + (ok2[n], lines2[n])
        base = len(pending)
        pending += pending2
        err.update({base + n: e for n, e in err2.items()})
    failures = []
    for i, row in enumerate(rows):
        if i not in chosen:
            first_err = next(err[n] for n, key in enumerate(pending) if key[0] == i and n in err)
            failures.append((row["mnemonic"], first_err))
            continue
        c, variant, drop, suffix, printed, line = chosen[i]
        ops = texts(row, c, variant)
        for s, w in zip(row["slots"], c):
            s["dwords"] = w
        if drop:
            row["slots"], ops = row["slots"][1:], ops[1:]
        if suffix.strip():
            row["requires"] = [suffix.strip()]
        row["ops"], row["suffix"] = ops, suffix
        row["probe"] = line
        pmn, data = parse_printed(printed)
        row["printed"] = pmn
        row["bytes"] = len(data)
        fam = row["family"]
        if fam in OPCODE_FIELD:
            lo, w = OPCODE_FIELD[fam]
            row["opcode"] = (first_dword(data) >> lo) & ((1 << w) - 1)

    # Which register classes / constants each slot accepts, one substitution at a time.
    KIND_TEXT = {
        "vgpr": lambda w: reg_text("v", 100, w), "agpr": lambda w: reg_text("a", 100, w),
        "sgpr": lambda w: reg_text("s", 40, w), "iconst": lambda w: "1", "literal": lambda w: "0x12345",
        "m0": lambda w: "m0" if w == 1 else None, "vcc": lambda w: "vcc" if w == 2 else "vcc_lo",
        "exec": lambda w: "exec" if w == 2 else "exec_lo",
    }
    # 16-bit sources take a 16-bit literal only (v_cvt_f32_bf16 v127, 0x8000): probe one as well.
    EXTRA_KIND_TEXT = [("literal", lambda w: "0x1234")]
    # A VALU instruction reads one scalar value at most (the constant bus, gfx9): a scalar probe in
    # one source is also tried with the other SGPR sources made inline constants, or the probe for
    # v_writelane_b32's src0 (example `v_writelane_b32 v0, 1, s16`) would always be rejected.
    SCALAR_KINDS = {"sgpr", "literal", "m0", "vcc", "exec"}
    kind_probes = []
    for i, row in enumerate(rows):
        if "ops" not in row:
            continue
        for k, s in enumerate(row["slots"]):
            if set(s["kinds"]) & {"label", "hwreg", "sendmsg", "waitcnt", "imm16", "simm8"} or row["ops"][k] == "off":
                continue
            for kind, fn in list(KIND_TEXT.items()) + EXTRA_KIND_TEXT:
                t = fn(s["dwords"])
                if t is None:
                    continue
                ops = list(row["ops"])
                ops[k] = t
                kind_probes.append((i, k, kind, instance(row["mnemonic"], ops, row["suffix"])))
                if kind in SCALAR_KINDS and row["family"].startswith("VOP"):
                    others = [j for j, o in enumerate(row["slots"]) if j != k and o["name"].startswith("src")
                              and re.fullmatch(r"s\d+", row["ops"][j])]
                    if others:
                        for j in others:
                            ops[j] = "1"
                        kind_probes.append((i, k, kind, instance(row["mnemonic"], ops, row["suffix"])))
    # MFMA C and D move between VGPRs and AGPRs together (ACC_CD bit): probe them jointly.
    for i, row in enumerate(rows):
        if "ops" in row and row["mnemonic"].startswith(("v_mfma", "v_smfmac")) and len(row["slots"]) > 3:
            ops = list(row["ops"])
            ops[0] = reg_text("a", 100, row["slots"][0]["dwords"])
            if row["slots"][3]["dwords"] == row["slots"][0]["dwords"] and row["mnemonic"].startswith("v_mfma"):
                ops[3] = reg_text("a", 100, row["slots"][3]["dwords"])
            kind_probes.append((i, -1, "agpr", instance(row["mnemonic"], ops, row["suffix"])))
    kind_job = pool.submit(run_mc, tc.mc, [p for *_, p in kind_probes])
    # Encodings and modifiers accepted, probed on the instance just found.
    variant_probes = []
    for i, row in enumerate(rows):
        if "probe" not in row:
            continue
        fam, mn = row["family"], row["mnemonic"]
        base = row["probe"]
        ops = base[len(mn):]
        if row.get("suffix"):
            ops = ops[: -len(row["suffix"])]
        if fam in ("VOP1", "VOP2", "VOPC"):
            e64_ops = ops.replace("vcc", "s[40:41]")
            variant_probes.append((i, "e64", f"{mn}_e64{e64_ops}"))
            dpp_ops = ops
            variant_probes.append((i, "dpp", f"{mn}_dpp{dpp_ops} quad_perm:[0,1,2,3] row_mask:0xf bank_mask:0xf"))
            sels = " src0_sel:DWORD" + (" src1_sel:DWORD" if fam != "VOP1" and len(row["slots"]) > 2 else "")
            dst = "" if fam == "VOPC" else " dst_sel:DWORD dst_unused:UNUSED_PAD"
            variant_probes.append((i, "sdwa", f"{mn}_sdwa{ops}{dst}{sels}"))
            variant_probes.append((i, "clamp", f"{mn}_e64{e64_ops} clamp"))
            variant_probes.append((i, "omod", f"{mn}_e64{e64_ops} mul:2"))
            first_src = next((s for s in row["slots"] if s["name"].startswith("src")), None)
            if first_src is not None:
                variant_probes.append((i, "neg", f"{mn}_e64{e64_ops.replace(' v16', ' -v16', 1)}"))
                variant_probes.append((i, "abs", f"{mn}_e64{e64_ops.replace(' v16', ' |v16|', 1)}"))
            variant_probes.append((i, "op_sel", f"{mn}_e64{e64_ops} op_sel:[0,0]"))
            # VOP3-encoded DPP controls (v_permlane*_swap_b32_e64 v1, v2 bound_ctrl:1 fi:1).
            variant_probes.append((i, "bound_ctrl", f"{mn}_e64{e64_ops} bound_ctrl:1"))
            variant_probes.append((i, "fi", f"{mn}_e64{e64_ops} fi:1"))
        elif fam == "VOP3":
            variant_probes.append((i, "clamp", f"{base} clamp"))
            variant_probes.append((i, "omod", f"{base} mul:2"))
            variant_probes.append((i, "neg", base.replace(" v16", " -v16", 1)))
            variant_probes.append((i, "abs", base.replace(" v16", " |v16|", 1)))
            nsrc = sum(1 for s in row["slots"] if s["name"].startswith("src"))
            variant_probes.append((i, "op_sel", f"{base} op_sel:[{','.join(['0'] * (nsrc + 1))}]"))
            variant_probes.append((i, "bitop3", f"{base} bitop3:1"))
        elif fam in ("VOP3P", "VOP3PX2"):
            if mn.startswith(("v_mfma", "v_smfmac")):
                variant_probes.append((i, "cbsz", f"{base} cbsz:1"))
                variant_probes.append((i, "abid", f"{base} cbsz:1 abid:1"))
                variant_probes.append((i, "blgp", f"{base} blgp:1"))
                variant_probes.append((i, "neg_lo", f"{base} neg_lo:[1,0,0]"))
            else:
                nsrc = sum(1 for s in row["slots"] if s["name"].startswith("src"))
                z = ",".join(["0"] * nsrc)
                variant_probes.append((i, "op_sel", f"{base} op_sel:[{z}]"))
                variant_probes.append((i, "op_sel_hi", f"{base} op_sel_hi:[{z}]"))
                variant_probes.append((i, "neg_lo", f"{base} neg_lo:[{z}]"))
                variant_probes.append((i, "neg_hi", f"{base} neg_hi:[{z}]"))
                variant_probes.append((i, "clamp", f"{base} clamp"))
        elif fam in ("MUBUF", "MTBUF"):
            b2 = base.replace(" off,", " v16,", 1)
            variant_probes.append((i, "offen", f"{b2} offen"))
            variant_probes.append((i, "idxen", f"{b2} idxen"))
            variant_probes.append((i, "offset", f"{base} offset:16"))
            variant_probes.append((i, "sc0", f"{base} sc0"))
            variant_probes.append((i, "sc1", f"{base} sc1"))
            variant_probes.append((i, "nt", f"{base} nt"))
            if mem_kind(fam, mn) == "load" and fam == "MUBUF":
                # With `lds` the VDATA operand disappears (notes §3.3).
                no_vdata = mn + " " + ", ".join(x.strip() for x in ops.split(",")[1:])
                variant_probes.append((i, "lds", f"{no_vdata} lds"))
        elif fam in ("FLAT", "FLAT_GLBL", "FLAT_SCRATCH"):
            variant_probes.append((i, "offset", f"{base} offset:16"))
            variant_probes.append((i, "sc0", f"{base} sc0"))
            variant_probes.append((i, "sc1", f"{base} sc1"))
            variant_probes.append((i, "nt", f"{base} nt"))
        elif fam == "DS":
            variant_probes.append((i, "offset", f"{base} offset:16"))
            variant_probes.append((i, "offset0", f"{base} offset0:1 offset1:2"))
            variant_probes.append((i, "gds", f"{base} gds"))
        elif fam == "SMEM":
            variant_probes.append((i, "glc", f"{base} glc"))
    vok, _ = run_mc(tc.mc, [p for _, _, p in variant_probes])  # runs while the kind probes run
    kok, _ = kind_job.result()
    found: dict[tuple, list] = {}
    for n, (i, k, kind, _) in enumerate(kind_probes):
        if n in kok and k >= 0:
            found.setdefault((i, k), []).append(kind)
    for n, (i, k, kind, _) in enumerate(kind_probes):
        if k == -1 and n in kok:
            found.setdefault((i, 0), ["vgpr"]).append("agpr")
            if rows[i]["mnemonic"].startswith("v_mfma"):
                found.setdefault((i, 3), []).append("agpr")
    for (i, k), kinds in found.items():
        rows[i]["slots"][k]["kinds"] = sorted(set(kinds), key=list(KIND_TEXT).index)
    # Slots where no substitution was accepted are fixed operands (e.g. vcc): they keep the doc's kinds.
    for row in rows:
        for s in row.get("slots", []):
            if s["name"] == "vcc" or s["kinds"] == ["vcc"]:
                s["dwords"] = 2  # VCC is 64 bits in wave64
    for n, (i, what, _) in enumerate(variant_probes):
        if n in vok:
            rows[i].setdefault("accepts", []).append(what)

    # llvm-objdump sweep over opcode fields: every opcode number LLVM decodes, per family.
    sweep = sweep_job.result()
    pool.shutdown()
    known = {r.get("printed", r["mnemonic"]) for r in rows} | {r["mnemonic"] for r in rows}
    strip = lambda m: re.sub(r"_(e32|e64|dpp|sdwa)$", "", m)  # noqa: E731
    sweep_only = sorted({m for fam, ms in sweep.items() for m in ms if strip(m) not in known and m not in known})

    table = {}
    for row in rows:
        fam, mn = row["family"], row["mnemonic"]
        mk = mem_kind(fam, mn)
        entry = {
            "family": fam,
            "unit": unit_of(fam, mn),
            "counter": counter_of(fam, mn),
        }
        if "printed" in row:
            entry["canonical"] = row["printed"].split("_e32")[0] if row["printed"].endswith("_e32") else row["printed"]
            entry["opcode"] = row.get("opcode")
            entry["bytes"] = row["bytes"]
            entry["example"] = row["probe"]
            if row.get("requires"):
                entry["requires"] = row["requires"]
        else:
            entry["unsupported"] = next(e for m, e in failures if m == mn)
        if mk:
            entry["mem"] = mk
        entry.update(mfma_info(mn))
        slots = []
        for k, s in enumerate(row["slots"]):
            slot = {"name": s["name"], "kinds": s["kinds"], "dwords": s["dwords"],
                    "access": access_of(fam, mn, s["name"], k, mk)}
            if s.get("off_ok"):
                slot["off_ok"] = True
            ww = written_with(fam, s["name"], mk)
            if ww:
                slot["written_with"] = ww
            slots.append(slot)
        if "requires" in row and "sc0" in row["requires"] and slots:
            slots[0]["only_with"] = "sc0"  # returning atomics: the destination exists only with sc0
        if tied_of(mn) and slots:
            slots[0]["access"] = "rw"
        entry["operands"] = slots
        entry["modifiers"] = sorted(set(row.get("accepts", [])))
        imp_r, imp_w = implicit_regs(fam, mn, entry)
        if imp_r:
            entry["implicit_reads"] = imp_r
        if imp_w:
            entry["implicit_writes"] = imp_w
        if TRANS.match(mn):
            entry["trans"] = True
        if mn.startswith(("v_dot", "v_pk_fma_f32_dot")):
            entry["dot"] = True
        if mn.endswith("_sdwa"):
            pass
        table[mn] = entry

    doc = {
        "target": "gfx950",
        "generated_by": "tools/gen_isa_tables.py",
        "llvm": tc.version,
        "sources": ["llvm/docs/AMDGPU/AMDGPUAsmGFX950.rst", "llvm/docs/AMDGPU/gfx950_operands.rst",
                    "llvm-mc -mcpu=gfx950 probes", "llvm-objdump opcode sweep"],
        "objdump_sweep": {fam: sorted(ms) for fam, ms in sorted(sweep.items())},
        "objdump_only": sweep_only,
        "instructions": dict(sorted(table.items())),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
    return doc


def implicit_regs(fam: str, mn: str, entry: dict) -> tuple[list[str], list[str]]:
    r: list[str] = []
    w: list[str] = []
    unit = entry["unit"]
    if unit in ("VALU", "TRANS", "MFMA", "DS", "VMEM", "FLAT") and mn != "v_readfirstlane_b32":
        r.append("exec")
    if fam == "VOPC" and mn.startswith("v_cmpx"):
        w.append("exec")
    if fam.startswith("SOP"):
        if SCC_WRITERS.match(mn) or fam == "SOPC":
            w.append("scc")
        if SCC_READERS.match(mn):
            r.append("scc")
        if EXEC_WRITERS_S.match(mn):
            r.append("exec")
            w.append("exec")
        if mn in ("s_cbranch_vccz", "s_cbranch_vccnz"):
            r.append("vcc")
        if mn in ("s_cbranch_execz", "s_cbranch_execnz"):
            r.append("exec")
    if M0_READERS.match(mn):
        r.append("m0")
    if mn.startswith("v_div_fmas"):
        r.append("vcc")
    if mn.startswith("v_div_scale"):
        pass
    return r, w


def objdump_sweep(tc) -> dict[str, set[str]]:
    words = []
    for fam, (fixed, lo, width) in SWEEP.items():
        for op in range(1 << width):
            w0 = fixed | (op << lo)
            if fam == "VOP2" and op == 0x3F:
                continue  # VOP2 opcode 63 is the VOPC/VOP1 space
            words.append((fam, op, w0))
    # Second dword 0 and, for VOP3P-style encodings, with the op_sel_hi bits set (some opcodes need them).
    blob = b"".join(w0.to_bytes(4, "little") + (w1).to_bytes(4, "little") for _, _, w0 in words
                    for w1 in (0, 0x18000000))
    found: dict[str, set[str]] = {}
    with tempfile.TemporaryDirectory() as td:
        # Decode each 8-byte slot separately so that decoding cannot drift across slots.
        p = Path(td) / "b.bin"
        p.write_bytes(blob)
        r = subprocess.run([str(tc.mc), "-disassemble", "-triple=amdgcn-amd-amdhsa", "-mcpu=gfx950",
                            "-show-encoding"], capture_output=True, text=True,
                           # One slot per line: llvm-mc quotes the whole input line in every
                           # "invalid instruction encoding" warning, so one long line costs GBs.
                           input="".join(" ".join(f"0x{b:02x}" for b in blob[i:i + 8]) + "\n"
                                         for i in range(0, len(blob), 8)))
    # llvm-mc -disassemble consumes variable lengths; map results by the encoding's first dword.
    first_to_fam = {w0: fam for fam, _, w0 in words}
    for ln in r.stdout.splitlines():
        if "encoding:" not in ln:
            continue
        mn = ln.split()[0]
        data = [int(x, 16) for x in re.findall(r"0x([0-9a-f]+)", ln.split("encoding:")[1])]
        w0 = first_dword(data)
        fam = first_to_fam.get(w0)
        if fam:
            found.setdefault(fam, set()).add(mn)
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", type=Path, default=HERE.parent.parent / "shared")
    ap.add_argument("--out", type=Path, default=HERE.parent / "isa_tables" / "gfx950.json")
    a = ap.parse_args()
    doc = build(a.shared, a.out)
    ins = doc["instructions"]
    fams: dict[str, int] = {}
    for e in ins.values():
        fams[e["family"]] = fams.get(e["family"], 0) + 1
    print(f"{len(ins)} mnemonics ({sum(1 for e in ins.values() if 'unsupported' not in e)} accepted by llvm-mc)")
    for f, n in sorted(fams.items()):
        print(f"  {f:13s} {n}")
    print(f"objdump sweep: {sum(len(v) for v in doc['objdump_sweep'].values())} mnemonics decoded; "
          f"{len(doc['objdump_only'])} not listed in the syntax page")


if __name__ == "__main__":
    main()
