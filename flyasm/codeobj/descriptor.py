"""The 64-byte HSA kernel descriptor (KD), decoded into every field and written back as directives.

Layout and bit fields: llvm/llvm-project llvm/include/llvm/Support/AMDHSAKernelDescriptor.h
(reference notes §5.1). gfx950 is GFX9 with gfx90a's unified VGPR/AGPR file (rsrc3 ACCUM_OFFSET,
TG_SPLIT) and architected flat scratch (so no private_segment_buffer / flat_scratch_init user SGPRs).

Bound: O(1) per descriptor (64 bytes).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from ..errors import CodeObjectError

KD_SIZE = 64

# (word, name, lsb, width) for every defined bit field; word is the KD member holding it.
BITFIELDS: list[tuple[str, str, int, int]] = [
    ("compute_pgm_rsrc1", "granulated_workitem_vgpr_count", 0, 6),
    ("compute_pgm_rsrc1", "granulated_wavefront_sgpr_count", 6, 4),
    ("compute_pgm_rsrc1", "priority", 10, 2),
    ("compute_pgm_rsrc1", "float_round_mode_32", 12, 2),
    ("compute_pgm_rsrc1", "float_round_mode_16_64", 14, 2),
    ("compute_pgm_rsrc1", "float_denorm_mode_32", 16, 2),
    ("compute_pgm_rsrc1", "float_denorm_mode_16_64", 18, 2),
    ("compute_pgm_rsrc1", "priv", 20, 1),
    ("compute_pgm_rsrc1", "enable_dx10_clamp", 21, 1),
    ("compute_pgm_rsrc1", "debug_mode", 22, 1),
    ("compute_pgm_rsrc1", "enable_ieee_mode", 23, 1),
    ("compute_pgm_rsrc1", "bulky", 24, 1),
    ("compute_pgm_rsrc1", "cdbg_user", 25, 1),
    ("compute_pgm_rsrc1", "fp16_ovfl", 26, 1),
    ("compute_pgm_rsrc2", "enable_private_segment", 0, 1),
    ("compute_pgm_rsrc2", "user_sgpr_count", 1, 5),
    ("compute_pgm_rsrc2", "enable_trap_handler", 6, 1),
    ("compute_pgm_rsrc2", "enable_sgpr_workgroup_id_x", 7, 1),
    ("compute_pgm_rsrc2", "enable_sgpr_workgroup_id_y", 8, 1),
    ("compute_pgm_rsrc2", "enable_sgpr_workgroup_id_z", 9, 1),
    ("compute_pgm_rsrc2", "enable_sgpr_workgroup_info", 10, 1),
    ("compute_pgm_rsrc2", "enable_vgpr_workitem_id", 11, 2),
    ("compute_pgm_rsrc2", "enable_exception_address_watch", 13, 1),
    ("compute_pgm_rsrc2", "enable_exception_memory", 14, 1),
    ("compute_pgm_rsrc2", "granulated_lds_size", 15, 9),
    ("compute_pgm_rsrc2", "enable_exception_ieee_754_fp_invalid_operation", 24, 1),
    ("compute_pgm_rsrc2", "enable_exception_fp_denormal_source", 25, 1),
    ("compute_pgm_rsrc2", "enable_exception_ieee_754_fp_division_by_zero", 26, 1),
    ("compute_pgm_rsrc2", "enable_exception_ieee_754_fp_overflow", 27, 1),
    ("compute_pgm_rsrc2", "enable_exception_ieee_754_fp_underflow", 28, 1),
    ("compute_pgm_rsrc2", "enable_exception_ieee_754_fp_inexact", 29, 1),
    ("compute_pgm_rsrc2", "enable_exception_int_divide_by_zero", 30, 1),
    ("compute_pgm_rsrc3", "accum_offset", 0, 6),
    ("compute_pgm_rsrc3", "tg_split", 16, 1),
    ("kernel_code_properties", "enable_sgpr_private_segment_buffer", 0, 1),
    ("kernel_code_properties", "enable_sgpr_dispatch_ptr", 1, 1),
    ("kernel_code_properties", "enable_sgpr_queue_ptr", 2, 1),
    ("kernel_code_properties", "enable_sgpr_kernarg_segment_ptr", 3, 1),
    ("kernel_code_properties", "enable_sgpr_dispatch_id", 4, 1),
    ("kernel_code_properties", "enable_sgpr_flat_scratch_init", 5, 1),
    ("kernel_code_properties", "enable_sgpr_private_segment_size", 6, 1),
    ("kernel_code_properties", "enable_wavefront_size32", 10, 1),
    ("kernel_code_properties", "uses_dynamic_stack", 11, 1),
    ("kernarg_preload", "kernarg_preload_spec_length", 0, 7),
    ("kernarg_preload", "kernarg_preload_spec_offset", 7, 9),
]

# Field -> .amdhsa_ directive (gfx950, code object v5/v6). Fields absent here have no directive.
DIRECTIVES: dict[str, str] = {
    "enable_private_segment": "enable_private_segment",
    "user_sgpr_count": "user_sgpr_count",
    "enable_sgpr_workgroup_id_x": "system_sgpr_workgroup_id_x",
    "enable_sgpr_workgroup_id_y": "system_sgpr_workgroup_id_y",
    "enable_sgpr_workgroup_id_z": "system_sgpr_workgroup_id_z",
    "enable_sgpr_workgroup_info": "system_sgpr_workgroup_info",
    "enable_vgpr_workitem_id": "system_vgpr_workitem_id",
    "float_round_mode_32": "float_round_mode_32",
    "float_round_mode_16_64": "float_round_mode_16_64",
    "float_denorm_mode_32": "float_denorm_mode_32",
    "float_denorm_mode_16_64": "float_denorm_mode_16_64",
    "enable_dx10_clamp": "dx10_clamp",
    "enable_ieee_mode": "ieee_mode",
    "fp16_ovfl": "fp16_overflow",
    "enable_exception_ieee_754_fp_invalid_operation": "exception_fp_ieee_invalid_op",
    "enable_exception_fp_denormal_source": "exception_fp_denorm_src",
    "enable_exception_ieee_754_fp_division_by_zero": "exception_fp_ieee_div_zero",
    "enable_exception_ieee_754_fp_overflow": "exception_fp_ieee_overflow",
    "enable_exception_ieee_754_fp_underflow": "exception_fp_ieee_underflow",
    "enable_exception_ieee_754_fp_inexact": "exception_fp_ieee_inexact",
    "enable_exception_int_divide_by_zero": "exception_int_div_zero",
    "tg_split": "tg_split",
    "enable_sgpr_dispatch_ptr": "user_sgpr_dispatch_ptr",
    "enable_sgpr_queue_ptr": "user_sgpr_queue_ptr",
    "enable_sgpr_kernarg_segment_ptr": "user_sgpr_kernarg_segment_ptr",
    "enable_sgpr_dispatch_id": "user_sgpr_dispatch_id",
    "enable_sgpr_private_segment_size": "user_sgpr_private_segment_size",
    "uses_dynamic_stack": "uses_dynamic_stack",
    "kernarg_preload_spec_length": "user_sgpr_kernarg_preload_length",
    "kernarg_preload_spec_offset": "user_sgpr_kernarg_preload_offset",
}

_WORD_OFFSETS = {"compute_pgm_rsrc3": (44, 4), "compute_pgm_rsrc1": (48, 4), "compute_pgm_rsrc2": (52, 4),
                 "kernel_code_properties": (56, 2), "kernarg_preload": (58, 2)}


@dataclass
class KernelDescriptor:
    """Every field of a KD; `raw` is the 64 bytes it was decoded from."""

    raw: bytes
    group_segment_fixed_size: int
    private_segment_fixed_size: int
    kernarg_size: int
    kernel_code_entry_byte_offset: int
    compute_pgm_rsrc1: int
    compute_pgm_rsrc2: int
    compute_pgm_rsrc3: int
    kernel_code_properties: int
    kernarg_preload: int
    fields: dict[str, int]

    @classmethod
    def decode(cls, raw: bytes) -> "KernelDescriptor":
        if len(raw) != KD_SIZE:
            raise CodeObjectError(f"a kernel descriptor is {KD_SIZE} bytes, this one is {len(raw)}", find_loc=False)
        g, p, ka = struct.unpack_from("<III", raw, 0)
        entry, = struct.unpack_from("<q", raw, 16)
        r3, r1, r2 = struct.unpack_from("<III", raw, 44)
        kcp, kp = struct.unpack_from("<HH", raw, 56)
        words = {"compute_pgm_rsrc1": r1, "compute_pgm_rsrc2": r2, "compute_pgm_rsrc3": r3,
                 "kernel_code_properties": kcp, "kernarg_preload": kp}
        fields = {name: (words[w] >> lsb) & ((1 << width) - 1) for w, name, lsb, width in BITFIELDS}
        return cls(bytes(raw), g, p, ka, entry, r1, r2, r3, kcp, kp, fields)

    # ---- derived values --------------------------------------------------------------------
    @property
    def accum_offset(self) -> int:
        return (self.fields["accum_offset"] + 1) * 4

    @property
    def vgpr_alloc(self) -> int:
        """VGPR+AGPR slots allocated per lane (gfx90a+ wave64 granule of 8)."""
        return (self.fields["granulated_workitem_vgpr_count"] + 1) * 8

    @property
    def sgpr_alloc(self) -> int:
        return (self.fields["granulated_wavefront_sgpr_count"] + 1) * 8

    def reserved_bits(self) -> list[str]:
        """Names of set bits that no defined field covers (or reserved byte ranges that are not zero)."""
        out = []
        if any(self.raw[12:16]) or any(self.raw[24:44]) or any(self.raw[60:64]):
            out.append("reserved bytes")
        words = {"compute_pgm_rsrc1": self.compute_pgm_rsrc1, "compute_pgm_rsrc2": self.compute_pgm_rsrc2,
                 "compute_pgm_rsrc3": self.compute_pgm_rsrc3, "kernel_code_properties": self.kernel_code_properties,
                 "kernarg_preload": self.kernarg_preload}
        for w, val in words.items():
            covered = 0
            for ww, _, lsb, width in BITFIELDS:
                if ww == w:
                    covered |= ((1 << width) - 1) << lsb
            if val & ~covered:
                out.append(f"{w} bits 0x{val & ~covered:x}")
        return out

    def inexpressible(self) -> list[str]:
        """Set fields that `.amdhsa_kernel` directives cannot produce on gfx950."""
        ok = set(DIRECTIVES) | {"granulated_workitem_vgpr_count", "granulated_wavefront_sgpr_count", "accum_offset"}
        bad = [f"{n}={v}" for n, v in self.fields.items() if v and n not in ok]
        return bad + self.reserved_bits()

    def to_dict(self) -> dict:
        d = {f"{k}_field" if k == "accum_offset" else k: v for k, v in self.fields.items()}
        d |= {"group_segment_fixed_size": self.group_segment_fixed_size,
             "private_segment_fixed_size": self.private_segment_fixed_size,
             "kernarg_size": self.kernarg_size,
             "kernel_code_entry_byte_offset": self.kernel_code_entry_byte_offset,
             "compute_pgm_rsrc1": f"0x{self.compute_pgm_rsrc1:08x}",
             "compute_pgm_rsrc2": f"0x{self.compute_pgm_rsrc2:08x}",
             "compute_pgm_rsrc3": f"0x{self.compute_pgm_rsrc3:08x}",
             "kernel_code_properties": f"0x{self.kernel_code_properties:04x}",
             "kernarg_preload": f"0x{self.kernarg_preload:04x}",
             "accum_offset": self.accum_offset, "vgpr_alloc": self.vgpr_alloc, "sgpr_alloc": self.sgpr_alloc}
        return d

    def directives(self) -> list[tuple[str, int]]:
        """(`.amdhsa_` name, value) pairs that make llvm-mc write these exact 64 bytes.

        Register counts are written so the granules come out equal. VGPRs: granule =
        ceil(max(1, n) / 8) - 1, so n = 8*(g+1). SGPRs: on gfx9 LLVM adds 6 extra SGPRs for flat
        scratch (which it always reserves on gfx950) before rounding (AMDGPUBaseInfo
        getNumExtraSGPRs/getNumSGPRBlocks; checked by assembling n = 0..20), so n = 8*g - 5, or 0.
        """
        f = self.fields
        out = [("group_segment_fixed_size", self.group_segment_fixed_size),
               ("private_segment_fixed_size", self.private_segment_fixed_size),
               ("kernarg_size", self.kernarg_size)]
        out += [(DIRECTIVES[n], f[n]) for _, n, _, _ in BITFIELDS if n in DIRECTIVES]
        out += [("next_free_vgpr", self.vgpr_alloc),
                ("next_free_sgpr", max(0, 8 * f["granulated_wavefront_sgpr_count"] - 5)),
                ("accum_offset", self.accum_offset),
                ("reserve_vcc", 0)]
        return out

    def directive_text(self, symbol: str, indent: str = "\t") -> str:
        lines = [f"{indent}.amdhsa_kernel {symbol}"]
        lines += [f"{indent}\t.amdhsa_{k} {v}" for k, v in self.directives()]
        lines.append(f"{indent}.end_amdhsa_kernel")
        return "\n".join(lines)

    def raw_text(self, symbol: str, kernel: str, indent: str = "\t") -> str:
        """The KD as data (for descriptors that directives cannot express); the entry offset stays
        a link-time expression so it is right wherever the linker puts things."""
        r = self.raw
        lines = [f"{indent}.globl {symbol}", f"{indent}.type {symbol},@object", f"{symbol}:"]
        lines.append(f"{indent}.byte " + ", ".join(f"0x{b:02x}" for b in r[0:16]))
        lines.append(f"{indent}.quad {kernel}-{symbol}")
        lines.append(f"{indent}.byte " + ", ".join(f"0x{b:02x}" for b in r[24:64]))
        lines.append(f"{indent}.size {symbol}, 64")
        return "\n".join(lines)
