/* optim_core.h: one weight's optimizer update, shared by the cpu's loops
 * (kernels_cpu.c) and the CUDA kernels (kernels.cu). Every multiply and add
 * is rounded as written (gpt_core.h's dt_rn_mul, dt_rn_add): nvcc would
 * contract w - lr g and AdamW's moments into FMAs, which round once where
 * the cpu rounds twice, and cpu and GPU would then step to other bits (gcc
 * in C11 mode contracts nothing, so the cpu's bits are as they were).
 * Division and sqrtf round correctly on both (nvcc's -prec-div, -prec-sqrt
 * defaults). tests/test_model.c checks the backend against these bodies. */
#ifndef DT_OPTIM_CORE_H
#define DT_OPTIM_CORE_H

#include "gpt_core.h"

/* SGD: w - lr (g grad_scale) */
DT_HOSTDEV static inline float dt_sgd_core(float w, float g, float lr, float grad_scale) {
  return dt_rn_add(w, -dt_rn_mul(lr, dt_rn_mul(g, grad_scale)));
}

/* AdamW as torch.optim.AdamW computes it, in its order, on g grad_scale:
 * the decay, the moments (beta1 0.9), the step; m and v updated in place,
 * the new weight returned. step_size = lr / (1 - 0.9^t), decay = 1 - lr
 * weight_decay, bias2_sqrt = sqrt(1 - beta2^t), computed once a call. */
DT_HOSTDEV static inline float dt_adamw_core(float w, float g, float *m, float *v, float grad_scale,
                                             float step_size, float decay, float bias2_sqrt,
                                             float beta2) {
  float gi = dt_rn_mul(g, grad_scale);
  float mi = dt_rn_add(*m, dt_rn_mul(dt_rn_add(gi, -*m), 1.0f - 0.9f));
  float vi = dt_rn_add(dt_rn_mul(*v, beta2), dt_rn_mul(dt_rn_mul(1.0f - beta2, gi), gi));
  *m = mi;
  *v = vi;
  return dt_rn_add(dt_rn_mul(w, decay),
                   -(dt_rn_mul(step_size, mi) / dt_rn_add(sqrtf(vi) / bias2_sqrt, 1e-8f)));
}

#endif
