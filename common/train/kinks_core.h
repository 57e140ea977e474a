/* kinks_core.h: the test of one ReLU decision against rounding, shared by
 * the cpu loop (kernels_cpu.c) and the CUDA kernel (kernels.cu), so that both
 * backends record the same decisions from the same numbers (kinks.c). */
#ifndef DT_KINKS_CORE_H
#define DT_KINKS_CORE_H

#include <math.h>
#include <stdint.h>

#include "rng_core.h" /* DT_HOSTDEV */

/* One term of a squared norm, rounded as written: nvcc would fuse it into
 * an FMA, which rounds once where the cpu rounds twice. */
DT_HOSTDEV static inline float dt_kink_sq_add(float s, float v) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(s, __fmul_rn(v, v));
#else
  return s + v * v;
#endif
}

/* a = x_i . W1_j is within rounding of ReLU's kink when |a| <= tol x |x_i|
 * x |W1_j|: the dot product's rounding is at most its length x u x the sum
 * of |x_ik W1_kj|, which Cauchy-Schwarz bounds by |x_i| |W1_j|. */
DT_HOSTDEV static inline int dt_kink_near(float a, float scale, float tol) {
  return fabsf(a) <= tol * scale;
}

/* what a run records of one: where it was met, and its numbers */
typedef struct {
  int64_t call, i, j; /* the block call of this step, its row and unit */
  float a, scale;     /* the pre-activation, and |x_i| |W1_j| */
} dt_kink_hit;

#endif
