/* moe_core.h: the arithmetic of lesson 10's router (moe.c), one body per
 * token or expert, shared by the cpu loops (moe.c) and the CUDA kernels
 * (moe_kernels.cu), as attn_core.h is for attention's tiles: every
 * multiply-add rounded as written (nvcc would fuse it into one FMA), every
 * sum in one fixed order, in one thread. The router's GEMMs stay apart
 * (OpenBLAS or cuBLAS, through dt_matmul), and so does expf: CUDA's rounds
 * within 2 ulp where glibc's rounds correctly (one per logit). */
#ifndef DT_MOE_CORE_H
#define DT_MOE_CORE_H

#include <math.h>
#include <stdint.h>

#include "gpt_core.h" /* DT_HOSTDEV, dt_rn_dmadd */

/* One token's E logits to probabilities in place (max, sum in double,
 * divide), then its k choices, best first, a tie to the lower index: a
 * scan per choice (k is 1 or 2). */
DT_HOSTDEV static inline void dt_router_row(float *p, int64_t E, int64_t k, int32_t *c) {
  float max = p[0];
  for (int64_t e = 1; e < E; e++) max = fmaxf(max, p[e]);
  double sum = 0;
  for (int64_t e = 0; e < E; e++) sum += p[e] = expf(p[e] - max);
  for (int64_t e = 0; e < E; e++) p[e] = (float)(p[e] / sum);
  for (int64_t j = 0; j < k; j++) {
    int32_t best = -1;
    for (int64_t e = 0; e < E; e++) {
      int taken = 0;
      for (int64_t i = 0; i < j; i++) taken |= c[i] == e;
      if (!taken && (best < 0 || p[e] > p[best])) best = (int32_t)e;
    }
    c[j] = best;
  }
}

/* One token's gates: its chosen probabilities renormalised to sum to 1. */
DT_HOSTDEV static inline void dt_router_gate_row(const float *p, const int32_t *c, int64_t k,
                                                 float *gate) {
  double sum = 0;
  for (int64_t j = 0; j < k; j++) sum += p[c[j]];
  for (int64_t j = 0; j < k; j++) gate[j] = (float)(p[c[j]] / sum);
}

/* Expert e's probability summed over the R rows, in row order. */
DT_HOSTDEV static inline double dt_moe_prob_sum(const float *probs, int64_t R, int64_t E,
                                                int64_t e) {
  double P = 0;
  for (int64_t t = 0; t < R; t++) P += probs[t * E + e];
  return P;
}

/* One token back through its gates and the softmax into dl [E] (its
 * dlogits): first d loss / d p (daux, NULL: none, and the gates' share:
 * gate_j = p_j / S, S the chosen ones' sum, so dp_i = (dgate_i - sum_j
 * gate_j dgate_j) / S), then dlogit_e = p_e (dp_e - sum_i p_i dp_i). */
DT_HOSTDEV static inline void dt_router_grad_row(const float *p, const float *g, const float *dg,
                                                 const int32_t *c, const float *daux, int64_t E,
                                                 int64_t k, float *dl) {
  for (int64_t e = 0; e < E; e++) dl[e] = daux ? daux[e] : 0.0f;
  double S = 0, gdg = 0;
  for (int64_t j = 0; j < k; j++) {
    S += p[c[j]];
    gdg = dt_rn_dmadd((double)g[j], (double)dg[j], gdg);
  }
  for (int64_t j = 0; j < k; j++) dl[c[j]] += (float)((dg[j] - gdg) / S);
  double pdp = 0;
  for (int64_t e = 0; e < E; e++) pdp = dt_rn_dmadd((double)p[e], (double)dl[e], pdp);
  for (int64_t e = 0; e < E; e++) dl[e] = (float)(p[e] * (dl[e] - pdp));
}

/* The tokens' trip to the experts and back (lesson 10), element by element:
 * i = t k + j is token t's j-th choice, pos[i] its row in the send order
 * (-1: dropped). x' = x + the gate-weighted sum of the kept choices'
 * outputs ret, added in choice order. */
DT_HOSTDEV static inline float dt_moe_combine_core(const float *x, const float *gate,
                                                   const float *ret, const int32_t *pos, int64_t k,
                                                   int64_t D, int64_t t, int64_t d) {
  float v = x[t * D + d];
  for (int64_t i = t * k; i < t * k + k; i++)
    if (pos[i] >= 0) v = dt_rn_add(v, dt_rn_mul(gate[i], ret[(int64_t)pos[i] * D + d]));
  return v;
}
/* Back through a kept choice's gate: its row of what goes back to the
 * expert, gate dy, and the gate's gradient, dy . ret, in double. */
DT_HOSTDEV static inline float dt_moe_gate_grad_core(const float *dy, const float *ret, float gate,
                                                     float *back, int64_t D) {
  double dg = 0;
  for (int64_t d = 0; d < D; d++) {
    back[d] = dt_rn_mul(gate, dy[d]);
    dg = dt_rn_dmadd((double)dy[d], (double)ret[d], dg);
  }
  return (float)dg;
}
/* Token t's n-th choice to add: in choice order, or with expert (its
 * choices' experts, distinct) in the experts' order, as the yardstick's
 * loop over experts adds them. */
DT_HOSTDEV static inline int64_t dt_moe_nth(const int32_t *expert, int64_t t, int64_t k,
                                            int64_t n) {
  if (!expert) return t * k + n;
  for (int64_t i = t * k; i < t * k + k; i++) {
    int64_t below = 0;
    for (int64_t j = t * k; j < t * k + k; j++) below += expert[j] < expert[i];
    if (below == n) return i;
  }
  return -1;
}
/* dL/dx: the residual's dy plus what each kept choice brought back. */
DT_HOSTDEV static inline float dt_moe_combine_grad_core(const float *dy, const float *back,
                                                        const int32_t *pos, const int32_t *expert,
                                                        int64_t k, int64_t D, int64_t t,
                                                        int64_t d) {
  float v = dy[t * D + d];
  for (int64_t n = 0; n < k; n++) {
    int64_t i = dt_moe_nth(expert, t, k, n);
    if (i >= 0 && pos[i] >= 0) v = dt_rn_add(v, back[(int64_t)pos[i] * D + d]);
  }
  return v;
}

#endif
