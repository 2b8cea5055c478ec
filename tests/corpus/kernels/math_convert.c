// @kernel: math_convert
// @description: transcendental VALU ops (v_exp_f32, v_rcp_f32, v_sqrt_f32), f32 -> bf16 conversion (v_cvt_pk_bf16_f32) and packed f16 math (v_pk_fma_f16, v_pk_mul_f16, v_pk_add_f16)
// @launch: block=64 grid=64*G
// @expect: ^v_exp_f32
// @expect: ^v_rcp_f32
// @expect: ^v_sqrt_f32
// @expect: ^v_cvt_pk_bf16_f32\b
// @expect: ^v_pk_fma_f16\b
// @expect: ^v_pk_mul_f16\b
// @expect: ^v_pk_add_f16\b
//
// g = 64*workgroup_id + lane; compiled with -ffp-contract=off, so every C operator is one
// rounding step.  f3[3g+0] = exp2(x[g]), f3[3g+1] = 1/x[g], f3[3g+2] = sqrt(|x[g]|) (hardware
// approximations, 1 ulp); bf[g] = (bf16(x[g]), bf16(x[g]*3)) rounded to nearest even;
// with a = h[3g], b = h[3g+1], c = h[3g+2] (f16x2): hp[2g] = fma(a, b, c), hp[2g+1] = a*b + c
// (multiply rounded to f16, then add rounded to f16).
#include "corpus.h"

KERNEL(64) math_convert(const GLOBAL float *x, const GLOBAL f16x2 *h, GLOBAL float *f3,
                        GLOBAL bf16x2 *bf, GLOBAL f16x2 *hp) {
  unsigned g = group_id() * 64 + thread_id();
  float v = x[g];
  f3[3 * g + 0] = __builtin_amdgcn_exp2f(v);
  f3[3 * g + 1] = __builtin_amdgcn_rcpf(v);
  f3[3 * g + 2] = __builtin_amdgcn_sqrtf(__builtin_fabsf(v));
  bf16x2 pair = {(__bf16)v, (__bf16)(v * 3.0f)};
  bf[g] = pair;
  f16x2 a = h[3 * g], b = h[3 * g + 1], c = h[3 * g + 2];
  hp[2 * g] = __builtin_elementwise_fma(a, b, c);
  hp[2 * g + 1] = a * b + c;
}
