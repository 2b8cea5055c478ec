// @kernel: loop_divergent
// @description: a uniform loop with a runtime trip count, a per-lane (divergent) loop and divergent if/else on the lane id with stores inside, so EXEC masking and backward branches appear
// @launch: block=64 grid=64*G
// @expect: ^s_and_saveexec_b64\b
// @expect: ^s_cbranch_execz\b
// @expect-backward-branch: ^s_cbranch_(scc[01]|vccn?z)\b
// @expect-backward-branch: ^s_cbranch_execnz\b
//
// g = 64*workgroup_id + lane.  Per thread, in float32:
//   acc = 0; for i in 0..n-1: acc = acc*0.5 + x[g*n + i]
//   repeat (lane & 7) times: acc = acc + 1.0
//   odd lanes:            y[g] = -acc
//   even lanes, lane<16:  y[g] = acc*3;  z[g] = acc
//   even lanes, lane>=16: z[g] = acc + 2
// (y[g] / z[g] not listed for a thread are left untouched.)
#include "corpus.h"

KERNEL(64) loop_divergent(const GLOBAL float *x, GLOBAL float *y, GLOBAL float *z, int n) {
  unsigned lane = thread_id();
  unsigned g = group_id() * 64 + lane;
  float acc = 0.0f;
  for (int i = 0; i < n; ++i)
    acc = acc * 0.5f + x[g * n + i];
  for (unsigned j = 0; j < (lane & 7); ++j)
    acc = acc + 1.0f;
  if (lane & 1) {
    y[g] = -acc;
  } else if (lane < 16) {
    y[g] = acc * 3.0f;
    z[g] = acc;
  } else {
    z[g] = acc + 2.0f;
  }
}
