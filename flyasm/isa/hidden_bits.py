"""Modifier bits an encoding holds but llvm-objdump's text does not show, decoded from the bytes.

The `v_mfma_scale_*_f8f6f4` instructions are 16 bytes: a VOP3P-encoded `v_mfma_ld_scale_b32`
prefix word pair (opcode 0xD3AC) carrying the two scale operands and their op_sel/op_sel_hi, then
the MFMA. The VOP3P fields: op_sel = bits 11, 12, 13 and op_sel_hi = bits 59, 60, 14 for sources
0, 1, 2 (AMD "CDNA4 ISA" VOP3P encoding; LLVM VOP3PInstructions.td, VOP3PX2 on gfx950). LLVM 22
parses and prints only the first two elements of each list there: the third bits (seen set in
aiter's fp4 GEMMs) survive only as raw words. The IR still gets them, as 3-element lists under
LLVM's spelling, so the emulator and the checker read the truth.
"""
from __future__ import annotations

LD_SCALE_PREFIX = 0xD3AC       # high half of the prefix's first dword (v_mfma_ld_scale_b32, VOP3P)


def vop3px2_modifiers(enc: bytes) -> dict | None:
    """{'op_sel': [..3], 'op_sel_hi': [..3]} of a 16-byte scale-MFMA encoding, or None."""
    if enc is None or len(enc) != 16:
        return None
    w0 = int.from_bytes(enc[0:4], "little")
    w1 = int.from_bytes(enc[4:8], "little")
    if w0 >> 16 != LD_SCALE_PREFIX:
        return None
    op_sel = [(w0 >> b) & 1 for b in (11, 12, 13)]
    op_sel_hi = [(w1 >> 27) & 1, (w1 >> 28) & 1, (w0 >> 14) & 1]
    return {"op_sel": op_sel, "op_sel_hi": op_sel_hi}


def with_true_modifiers(modifiers: dict, enc: bytes | None, family: str) -> dict:
    """`modifiers` with the bits the text hides put back (op_sel lists first, as LLVM prints them)."""
    if family != "VOP3PX2":
        return modifiers
    true = vop3px2_modifiers(enc)
    if true is None:
        return modifiers
    return {**true, **{k: v for k, v in modifiers.items() if k not in true}}


__all__ = ["vop3px2_modifiers", "with_true_modifiers"]
