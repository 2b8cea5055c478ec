"""Every emulated VOPC compare (v_cmp_*/v_cmpx_* x f16/f32/f64/i16/u16/i32/u32/i64/u64, class) in
both encodings against formulas written here from the ISA pseudocode (CDNA4 ch.12 VOPC):

    lt a<b, eq a==b, le a<=b, gt a>b, lg a<>b (ordered: a<b || a>b), ge a>=b, ne a!=b (integers),
    o !isNaN(a) && !isNaN(b), u isNaN(a) || isNaN(b), nge !(a>=b), nlg !(a<>b), ngt !(a>b),
    nle !(a<=b), neq !(a==b), nlt !(a<b), f 0, tru/t 1.
    class: bit k of S1 for the IEEE class of S0 (0 sNaN, 1 qNaN, 2 -inf, 3 -normal, 4 -denormal,
    5 -0, 6 +0, 7 +denormal, 8 +normal, 9 +inf), classes taken from the bit fields here.

Comparisons are IEEE: any NaN is unordered (lt/eq/le/gt/lg/ge false, the n* forms true), -0 == +0,
denormals compare by value (flyasm runs with f32/f16/f64 denormals enabled). e64 writes the SGPR pair
named in the instruction, e32 writes VCC; v_cmpx_* also writes EXEC (GFX9: both the destination
and EXEC). Lanes inactive in EXEC write 0 to the destination (the VOPC rule "D.u64[laneId] = ..."
runs only for active lanes and the mask starts at 0; LLVM's SIOptimizeExecMasking relies on
v_cmpx results being ANDed with EXEC) — inactive lanes are therefore expected 0, both in the sdst
and in the new EXEC. f16 and 16-bit integer operands live in the low half; random garbage is put
in the high half. Destinations are poisoned; four waves with independent inputs per launch.
"""
from __future__ import annotations

import numpy as np

from emu_snippet import snippet

RNG = np.random.default_rng()
W = 4                                   # waves per launch, independent random inputs each
FOPS = ["f", "lt", "eq", "le", "gt", "lg", "ge", "o", "u", "nge", "nlg", "ngt", "nle", "neq", "nlt", "tru"]
IOPS = ["f", "lt", "eq", "le", "gt", "ne", "ge", "t"]
FORMULA = {
    "f": lambda a, b: np.zeros(np.shape(a), bool), "tru": lambda a, b: np.ones(np.shape(a), bool),
    "t": lambda a, b: np.ones(np.shape(a), bool),
    "lt": lambda a, b: a < b, "eq": lambda a, b: a == b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b, "ne": lambda a, b: a != b, "lg": lambda a, b: (a < b) | (a > b),
    "o": lambda a, b: ~np.isnan(a) & ~np.isnan(b), "u": lambda a, b: np.isnan(a) | np.isnan(b),
    "nge": lambda a, b: ~(a >= b), "nlg": lambda a, b: ~((a < b) | (a > b)), "ngt": lambda a, b: ~(a > b),
    "nle": lambda a, b: ~(a <= b), "neq": lambda a, b: ~(a == b), "nlt": lambda a, b: ~(a < b),
}
# bits, exponent bits, mantissa bits
FMT = {"f16": (16, 5, 10), "f32": (32, 8, 23), "f64": (64, 11, 52)}
SPECIAL = {  # sign/exponent/mantissa patterns: ±0, ±inf, qNaN, sNaN, smallest/largest denormal, min normal
    "f16": [0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0xFE01, 0x7C01, 0x7D00, 0x0001, 0x83FF, 0x0400, 0x7BFF],
    "f32": [0x0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001, 0x7F800001, 0x7FA00000, 0x1,
            0x807FFFFF, 0x00800000, 0x7F7FFFFF, 0x00FFFFFF],
    "f64": [0x0, 1 << 63, 0x7FF0 << 48, 0xFFF0 << 48, 0x7FF8 << 48, 0xFFF8 << 48 | 5, 0x7FF0 << 48 | 1,
            0x7FF4 << 48, 0x1, (1 << 63) | ((1 << 52) - 1), 1 << 52, 0x3800000000000000, 0x36A0000000000000],
}                                    # f64 1.0*2^-127 and 2^-149: f32-denormal range, normal in f64


def rand_float_bits(t, n):
    bits, e, mnt = FMT[t]
    if t == "f64":
        x = (RNG.standard_normal(n) * 2.0 ** RNG.integers(-60, 60, n)).view(np.uint64)
    elif t == "f32":
        x = (RNG.standard_normal(n) * 2.0 ** RNG.integers(-30, 30, n)).astype(np.float32).view(np.uint32)
    else:
        x = (RNG.standard_normal(n) * 2.0 ** RNG.integers(-8, 8, n)).astype(np.float16).view(np.uint16)
    x = x.astype(np.uint64)
    sp = np.array(SPECIAL[t], np.uint64)
    idx = RNG.permutation(n)[:3 * len(sp)]
    x[idx] = sp[RNG.integers(0, len(sp), len(idx))]
    return x


def rand_int_bits(bits, n):
    x = RNG.integers(0, 2 ** 63, n, dtype=np.uint64) * np.uint64(2) + RNG.integers(0, 2, n, dtype=np.uint64)
    x &= np.uint64((1 << bits) - 1) if bits < 64 else np.uint64(2 ** 64 - 1)
    edge = np.array([0, 1, (1 << (bits - 1)) - 1, 1 << (bits - 1), (1 << bits) - 1, (1 << bits) - 2], np.uint64)
    idx = RNG.permutation(n)[:12]
    x[idx] = edge[RNG.integers(0, len(edge), 12)]
    return x


def pair(t, n):
    """Operand bit patterns a, b; a quarter of the lanes equal, an eighth a vs -a (±0 and NaN pairs)."""
    bits = int(t[1:])
    gen = (lambda: rand_float_bits(t, n)) if t[0] == "f" else (lambda: rand_int_bits(bits, n))
    a, b = gen(), gen()
    same = RNG.random(n) < 0.25
    b[same] = a[same]
    if t[0] == "f":
        flip = RNG.random(n) < 0.125
        b[flip] = a[flip] ^ np.uint64(1 << (bits - 1))
    return a, b


def value(bits_, t):
    """Bits -> exact float64 (floats) or Python-range int64/object (integers)."""
    bits = int(t[1:])
    x = np.asarray(bits_, np.uint64)
    if t == "f16":
        return x.astype(np.uint16).view(np.float16).astype(np.float64)
    if t == "f32":
        with np.errstate(invalid="ignore"):
            return x.astype(np.uint32).view(np.float32).astype(np.float64)
    if t == "f64":
        return x.view(np.float64)
    if t[0] == "u":
        return x.astype(object)
    return np.array([int(v) - (1 << bits) if int(v) >> (bits - 1) else int(v) for v in x], object)


def ieee_class(bits_, t):
    bits, e, mnt = FMT[t]
    x = np.asarray(bits_, np.uint64).astype(object)
    out = []
    for v in x:
        neg, ex, fr = v >> (bits - 1), (v >> mnt) & ((1 << e) - 1), v & ((1 << mnt) - 1)
        if ex == (1 << e) - 1:
            c = (1 if fr >> (mnt - 1) else 0) if fr else (2 if neg else 9)
        elif ex == 0:
            c = (5 if neg else 6) if fr == 0 else (4 if neg else 7)
        else:
            c = 3 if neg else 8
        out.append(c)
    return np.array(out)


def mods_ref(x, mods):
    if "abs" in mods:
        x = np.abs(x)
    if "neg" in mods:
        x = -x
    return x


def wrap(reg, mods):
    s = f"|{reg}|" if "abs" in mods else reg
    return f"-{s}" if "neg" in mods else s


def all_rows():
    rows = []
    for x in ("", "x"):
        for t in ("f16", "f32", "f64"):
            for op in FOPS + ["class"]:
                rows.append((x, op, t))
        for t in ("i16", "u16", "i32", "u32", "i64", "u64"):
            for op in IOPS:
                rows.append((x, op, t))
    return rows


def run_rows(rows, n_launch_regs=96):
    """Pack rows into launches by SGPR budget; each row runs once in e64 and once in e32 form."""
    launches, cur, used = [], [], 0
    for r in rows:
        need = 2 * (4 if r[0] else 2)
        if used + need > n_launch_regs:
            launches.append(cur)
            cur, used = [], 0
        cur.append(r)
        used += need
    launches.append(cur)
    for rs in launches:
        _launch(rs)


REG = {"f16": (2, 3, 1), "f32": (4, 5, 1), "f64": (6, 8, 2), "i16": (10, 11, 1), "u16": (12, 13, 1),
       "i32": (14, 15, 1), "u32": (16, 17, 1), "i64": (18, 20, 2), "u64": (22, 24, 2)}
CLS = 26


def _vreg(r, n):
    return f"v[{r}:{r + 1}]" if n == 2 else f"v{r}"


def _launch(rows):
    n = 64 * W
    ex = RNG.random((W, 64)) < 0.85
    ex[0] = True                                     # one wave with a full EXEC
    ex[1, 0] = False
    vregs, data = {}, {}
    used = {r[2] for r in rows}
    for t, (ra, rb, nw) in REG.items():
        if t not in used:
            continue
        a, b = pair(t, n)
        data[t] = (a, b)
        for r, v in ((ra, a), (rb, b)):
            v = v.reshape(W, 64)
            if nw == 2:
                vregs[r], vregs[r + 1] = (v & np.uint64(M32)).astype(np.uint32), (v >> np.uint64(32)).astype(np.uint32)
            else:
                garbage = RNG.integers(0, 2 ** 16, (W, 64), dtype=np.uint64) << np.uint64(16)
                vregs[r] = (v | (garbage if int(t[1:]) == 16 else 0)).astype(np.uint32)
    cls = RNG.integers(0, 1024, (W, 64)).astype(np.uint32)
    cls[:, :4] = [0x3FF, 0x1, 0x2, 0x3]                 # all classes, sNaN only, qNaN only, any NaN
    if any(r[1] == "class" for r in rows):
        vregs[CLS] = cls
    exbits = np.packbits(ex, axis=1, bitorder="little").view(np.uint32)      # [W, 2]
    sregs = {0: exbits[:, 0], 1: exbits[:, 1]}
    lines, checks, sd = [], [], 2
    for k, (x, op, t) in enumerate(rows):
        ra, rb, nw = REG[t]
        a, b = data[t]
        float_t = t[0] == "f"
        mods_a = mods_b = ()
        if float_t and op != "class" and k % 3 == 1:
            mods_a, mods_b = ("neg",), ("abs",)
        elif float_t and op != "class" and k % 3 == 2:
            mods_a, mods_b = ("abs", "neg"), ("neg",)
        if op == "class":
            want = ((cls.reshape(-1).astype(np.int64) >> ieee_class(a, t)) & 1).astype(bool)
            src_b = f"v{CLS}"
        else:
            va, vb = value(a, t), value(b, t)
            if float_t:
                va, vb = mods_ref(va, mods_a), mods_ref(vb, mods_b)
            with np.errstate(invalid="ignore"):
                want = np.asarray(FORMULA[op](va, vb), bool)
            src_b = _vreg(rb, nw)
        want = want.reshape(W, 64) & ex
        name = f"v_cmp{x}_{op}_{t}"
        for form in ("e64", "e32"):
            for r in (sd, sd + 1):
                sregs[r] = [0xDEADBEEF] * W
            if form == "e64":
                text = f"{name}_e64 s[{sd}:{sd + 1}], {wrap(_vreg(ra, nw), mods_a)}, {wrap(src_b, mods_b)}"
                lines.append(text)
            else:
                if mods_a or mods_b:          # e32 has no modifiers: plain operands, recompute
                    continue
                text = f"{name}_e32 vcc, {_vreg(ra, nw)}, {src_b}"
                lines += ["s_mov_b64 vcc, -1", text, f"s_mov_b64 s[{sd}:{sd + 1}], vcc"]
            checks.append((text, sd, want, sd + 2 if x else None))
            sd += 2
            if x:
                for r in (sd, sd + 1):
                    sregs[r] = [0xDEADBEEF] * W
                lines += [f"s_mov_b64 s[{sd}:{sd + 1}], exec", "s_mov_b64 exec, s[0:1]"]
                sd += 2
    assert sd <= 102, sd
    m = snippet(lines, vregs, sregs, waves=W, exec_mask=ex)
    for text, d, want, exd in checks:
        w_bits = np.packbits(want, axis=1, bitorder="little").view(np.uint32)
        got = m.S[:, d:d + 2]
        bad = np.nonzero(~(got == w_bits).all(1))[0]
        assert not len(bad), (text, "wave", bad[0], f"{int(got[bad[0], 1]):08x}{int(got[bad[0], 0]):08x}",
                              f"{int(w_bits[bad[0], 1]):08x}{int(w_bits[bad[0], 0]):08x}")
        if exd is not None:
            assert (m.S[:, exd:exd + 2] == w_bits).all(), (text, "EXEC")


M32 = 0xFFFFFFFF


def test_vopc_float_compares_and_class():
    run_rows([r for r in all_rows() if r[2][0] == "f"])


def test_vopc_integer_compares():
    run_rows([r for r in all_rows() if r[2][0] != "f"])


def test_every_emulated_compare_is_in_the_table():
    import flyasm.emu.ops_vector  # noqa: F401
    from flyasm.emu.machine import SEMANTICS
    emulated = {n for n in SEMANTICS if n.startswith(("v_cmp_", "v_cmpx_"))}
    table = {f"v_cmp{x}_{op}_{t}" for x, op, t in all_rows()}
    assert emulated <= table, sorted(emulated - table)
