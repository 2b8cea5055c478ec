"""Per-instruction semantics against independent formulas (fresh random inputs incl. -0, inf, NaN,
denormals). Snippets run directly as decoded IR (no assembler) with one wave."""
from __future__ import annotations

import numpy as np
import pytest

from flyasm.emu import Memory, run_program
from flyasm.emu.machine import Machine
from flyasm.emu.program import Descriptor, Program, resolve_branches
from flyasm.isa.syntax import parse_instruction

RNG = np.random.default_rng()
SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-42, 3.4e38, -1.5, 2.5], np.float32)


def run(lines, vregs=None, sregs=None):
    insts = []
    for i, t in enumerate(lines + ["s_endpgm"]):
        inst = parse_instruction(t)
        inst.pc = 4 * i
        insts.append(inst)
    prog = Program("snippet", insts, Descriptor(0, 0, 0, 0, 0, 0, 0), [], {}, resolve_branches(insts))
    mem = Memory()
    mem.finalize()
    m = Machine(prog, 1, np.zeros(1, np.int64), 1, 0, mem)
    m.S[0, 126:128] = 0xFFFFFFFF
    m.refresh_exec(slice(None))
    for r, val in (vregs or {}).items():
        m.R[0, r] = np.asarray(val).view(np.uint32)
    for r, val in (sregs or {}).items():
        m.S[0, r] = val
    m.run()
    return m


def f32(n):
    x = (RNG.standard_normal(n) * 2.0 ** RNG.integers(-20, 20, n)).astype(np.float32)
    x[:len(SPECIAL)] = SPECIAL
    return x


def bf16_rne(x):
    b = x.view(np.uint32).astype(np.uint64)
    r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF
    return np.where(np.isnan(x), 0x7FC0 | (b >> 16) & 0x8000, r).astype(np.uint32)


def test_cvt_pk_bf16_f32_rne():
    a, b = f32(64), f32(64)
    m = run(["v_cvt_pk_bf16_f32 v3, v1, v2"], {1: a, 2: b})
    got = m.R[0, 3]
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    assert np.array_equal((got & 0xFFFF)[~nan_a], bf16_rne(a)[~nan_a])
    assert np.array_equal((got >> 16)[~nan_b], bf16_rne(b)[~nan_b])
    lo = (got & 0xFFFF)[nan_a]
    assert np.all(((lo >> 7) & 0xFF) == 0xFF) and np.all(lo & 0x7F)     # still a NaN


def test_exp_f32_flushes_denormals():
    x = RNG.uniform(-160, 100, 64).astype(np.float32)
    x[:4] = [-np.inf, -0.0, np.inf, -130.0]
    m = run(["v_exp_f32_e32 v2, v1"], {1: x})
    got = m.R[0, 2].view(np.float32)
    ref = np.exp2(x.astype(np.float64))
    ref = np.where(ref < 2.0 ** -126, 0.0, ref).astype(np.float32)     # denormal results flushed
    fin = np.isfinite(ref)
    assert np.all(np.abs(got[fin] - ref[fin]) <= np.spacing(np.abs(ref[fin])))   # 1 ulp (ISA)
    assert np.array_equal(got[~fin], ref[~fin])
    assert got[0] == 0 and got[1] == 1 and got[2] == np.inf and got[3] == 0


def test_vop3_neg_abs_clamp_omod():
    a, b = f32(64), f32(64)
    m = run(["v_add_f32_e64 v3, -|v1|, v2 mul:2 clamp"], {1: a, 2: b})
    with np.errstate(all="ignore"):
        ref = np.clip((-np.abs(a) + b) * np.float32(2), 0, 1)
    got = m.R[0, 3].view(np.float32)
    ok = ~np.isnan(ref)
    assert np.array_equal(got[ok], ref[ok])


def test_fma_f32_single_rounding():
    # integers with up to 24 significant bits: a*b+c is exact in float64, so one float32 rounding
    # of the float64 value is the correctly rounded fma (and differs from a rounded a*b then +c)
    a = RNG.integers(-2**24, 2**24, 64).astype(np.float32)
    b = RNG.integers(-2**24, 2**24, 64).astype(np.float32)
    c = RNG.integers(-2**24, 2**24, 64).astype(np.float32)
    a[:3], b[:3], c[:3] = [np.inf, np.nan, -0.0], [1, 2, -0.0], [-np.inf, 1, -0.0]
    m = run(["v_fma_f32 v4, v1, v2, v3"], {1: a, 2: b, 3: c})
    with np.errstate(all="ignore"):
        ref = (a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)).astype(np.float32)
    got = m.R[0, 4].view(np.float32)
    ok = ~np.isnan(ref)
    assert np.array_equal(got[ok], ref[ok])


def test_dpp_row_shr_bound_ctrl_and_quad_perm():
    x = RNG.integers(1, 2**31, 64).astype(np.uint32)
    m = run(["v_mov_b32_dpp v2, v1 row_shr:3 row_mask:0xf bank_mask:0xf bound_ctrl:1",
             "v_mov_b32_dpp v3, v1 quad_perm:[2,0,3,1] row_mask:0xf bank_mask:0xf",
             "v_mov_b32_e32 v4, 7", "s_nop 1",      # DPP reads its old vdst: 2 wait states (row 21)
             "v_mov_b32_dpp v4, v1 row_shl:1 row_mask:0x5 bank_mask:0xf"], {1: x})
    L = np.arange(64)
    assert np.array_equal(m.R[0, 2], np.where(L % 16 >= 3, x[np.maximum(L - 3, 0)], 0))
    assert np.array_equal(m.R[0, 3], x[4 * (L // 4) + np.array([2, 0, 3, 1])[L % 4]])
    row_on = ((0x5 >> (L // 16)) & 1).astype(bool)
    valid = L % 16 < 15
    assert np.array_equal(m.R[0, 4], np.where(row_on & valid, x[np.minimum(L + 1, 63)], 7))


def test_perm_b32_and_bfe():
    a, b = RNG.integers(0, 2**32, 64, dtype=np.uint32), RNG.integers(0, 2**32, 64, dtype=np.uint32)
    sel = RNG.integers(0, 256, (64, 4))
    selw = (sel[:, 0] | sel[:, 1] << 8 | sel[:, 2] << 16 | sel[:, 3] << 24).astype(np.uint32)
    m = run(["v_perm_b32 v4, v1, v2, v3"], {1: a, 2: b, 3: selw})
    ref = np.zeros(64, np.uint32)
    for L in range(64):
        bytes_ = list(int(b[L]).to_bytes(4, "little")) + list(int(a[L]).to_bytes(4, "little"))
        out = 0
        for k in range(4):
            s_ = int(sel[L, k])
            if s_ < 8:
                v = bytes_[s_]
            elif s_ < 12:
                src, bit = [(b, 15), (b, 31), (a, 15), (a, 31)][s_ - 8]
                v = 0xFF if (int(src[L]) >> bit) & 1 else 0
            else:
                v = 0 if s_ == 12 else 0xFF
            out |= v << (8 * k)
        ref[L] = out
    assert np.array_equal(m.R[0, 4], ref)


def test_scalar_add_carry_and_cmp_branch():
    a, b = int(RNG.integers(2**31, 2**32)), int(RNG.integers(2**31, 2**32))
    m = run(["s_add_u32 s4, s1, s2", "s_addc_u32 s5, 0, 0", "s_cmp_lt_u32 s4, s1", "s_cbranch_scc1 1",
             "s_mov_b32 s6, 5", "s_mov_b32 s7, 9"], sregs={1: a, 2: b, 6: 1})
    assert m.S[0, 4] == (a + b) & 0xFFFFFFFF and m.S[0, 5] == (a + b) >> 32
    assert m.S[0, 6] == 1 and m.S[0, 7] == 9      # wrapped sum < a: the branch skipped s_mov s6


def test_saveexec_and_cmp_masks():
    x = RNG.integers(0, 100, 64).astype(np.uint32)
    m = run(["v_cmp_gt_u32_e32 vcc, 50, v1", "s_and_saveexec_b64 s[2:3], vcc", "v_mov_b32_e32 v2, 1",
             "s_or_b64 exec, exec, s[2:3]"], {1: x, 2: np.zeros(64, np.uint32)})
    assert np.array_equal(m.R[0, 2], (x < 50).astype(np.uint32))
    bits = int(m.S[0, 106]) | int(m.S[0, 107]) << 32
    assert bits == sum(1 << i for i in range(64) if x[i] < 50)


def test_permlane32_swap():
    x, y = RNG.integers(0, 2**32, 64, dtype=np.uint32), RNG.integers(0, 2**32, 64, dtype=np.uint32)
    m = run(["v_permlane32_swap_b32_e32 v1, v2"], {1: x, 2: y})
    assert np.array_equal(m.R[0, 1], np.r_[x[:32], y[:32]]) and np.array_equal(m.R[0, 2], np.r_[x[32:], y[32:]])


def test_not_emulated_is_clean():
    import pytest
    from flyasm.emu import EmuError
    with pytest.raises(EmuError, match="not emulated: v_sin_f32 at pc"):
        run(["v_sin_f32_e32 v1, v2"])


# v_bitop3_b32 against LLVM's own lowering: llc (gfx950) turns each expression of three per-lane
# values into one v_bitop3_b32 whose operand order and truth table are LLVM's; run with those, the
# emulator must compute the expression.
BITOP3_EXPRS = {                 # IR body over %a %b %c -> %r, and the same function in numpy
    "(a & ~b) ^ c": ("%nb = xor i32 %b, -1\n  %t = and i32 %a, %nb\n  %r = xor i32 %t, %c", lambda a, b, c: (a & ~b) ^ c),
    "a ? b : c": ("%na = xor i32 %a, -1\n  %t = and i32 %a, %b\n  %u = and i32 %na, %c\n  %r = or i32 %t, %u",
                  lambda a, b, c: (a & b) | (~a & c)),
    "(a | b) & ~c": ("%o = or i32 %a, %b\n  %nc = xor i32 %c, -1\n  %r = and i32 %o, %nc", lambda a, b, c: (a | b) & ~c),
    "~(a | b) | c": ("%o = or i32 %a, %b\n  %no = xor i32 %o, -1\n  %r = or i32 %no, %c", lambda a, b, c: ~(a | b) | c),
}
BITOP3_KERNEL = """define amdgpu_kernel void @f(ptr addrspace(1) %out, ptr addrspace(1) %in) {{
  %id = call i32 @llvm.amdgcn.workitem.id.x()
  %pa = getelementptr i32, ptr addrspace(1) %in, i32 %id
  %a = load volatile i32, ptr addrspace(1) %pa
  %pb = getelementptr i32, ptr addrspace(1) %pa, i32 64
  %b = load volatile i32, ptr addrspace(1) %pb
  %pc = getelementptr i32, ptr addrspace(1) %pa, i32 128
  %c = load volatile i32, ptr addrspace(1) %pc
  {body}
  %po = getelementptr i32, ptr addrspace(1) %out, i32 %id
  store i32 %r, ptr addrspace(1) %po
  ret void
}}
declare i32 @llvm.amdgcn.workitem.id.x()
"""


@pytest.mark.parametrize("expr", sorted(BITOP3_EXPRS))
def test_bitop3_b32_computes_what_llvm_lowered_to_it(expr, tmp_path):
    import re
    import subprocess
    from oracles.hazard_probes import find_tool
    llc = find_tool("llc")
    if llc is None:
        pytest.skip("llc (LLVM 22) is not installed")
    body, ref = BITOP3_EXPRS[expr]
    (tmp_path / "f.ll").write_text(BITOP3_KERNEL.format(body=body))
    asm = subprocess.run([str(llc), "-mtriple=amdgcn-amd-amdhsa", "-mcpu=gfx950", "-O2", str(tmp_path / "f.ll"),
                          "-o", "-"], capture_output=True, text=True, check=True).stdout
    # a, b, c are loaded from byte offsets 0, 256, 512 (volatile: in that order)
    loaded = {m.group(1): "abc"[int(m.group(2) or 0) // 256]
              for m in re.finditer(r"global_load_dword (v\d+), v\d+, s\[\d+:\d+\](?: offset:(\d+))?", asm)}
    lines = [ln.strip() for ln in asm.splitlines() if ln.strip().startswith("v_bitop3_b32")]
    after = asm[asm.rindex("global_load_dword"):asm.index("global_store_dword")]
    assert len(lines) == 1 and len(loaded) == 3 and after.count("\tv_") == 1, \
        f"llc did not lower {expr} to one v_bitop3_b32 of the loaded values:\n{asm}"
    dst, *srcs = (o.strip() for o in lines[0].split(None, 1)[1].split(" bitop3:")[0].split(","))
    vals = {k: RNG.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32) for k in "abc"}
    regs = {10 + i: vals[loaded[o]] for i, o in enumerate(srcs)}
    m = run([f"v_bitop3_b32 v20, v10, v11, v12 bitop3:{lines[0].split('bitop3:')[1]}"], regs)
    assert np.array_equal(m.R[0, 20], ref(vals["a"], vals["b"], vals["c"])), (expr, lines[0])
