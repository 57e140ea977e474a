/* moe.c: the router of lesson 10's mixture of experts, forward and backward,
 * its capacity and its load-balancing loss. The arithmetic per token is
 * moe_core.h's, which the cuda backend's kernels share (moe_kernels.cu).
 *
 * The convention is the GShard/Mixtral one: softmax over all E logits, the k
 * largest kept, their gates renormalised to sum to 1 (10_ep/README.md names
 * the others). A token over an expert's capacity is dropped from that expert
 * and keeps its residual path. */
#include <math.h>
#include <string.h>

#include "moe_core.h"
#include "train_internal.h"

/* The cuda backend's router is moe_kernels.cu's, over the same bodies
 * (moe_core.h); capacity and the queues below are host bookkeeping on
 * either. */
#ifndef DT_CUDA
void dt_router_forward(const float *x, const float *wr, int64_t R, int64_t D, int64_t E, int64_t k,
                       float *probs, int32_t *choice) {
  DT_OP("dt_router_forward", R, D, E, k, 0);
  DT_KERNEL("dt_router_forward", x, wr, probs, choice);
  dt_matmul(0, 0, R, E, D, x, wr, probs, 0); /* the logits, softmaxed in place */
  for (int64_t t = 0; t < R; t++) dt_router_row(probs + t * E, E, k, choice + t * k);
}

void dt_router_gates(const float *probs, const int32_t *choice, int64_t R, int64_t E, int64_t k,
                     float *gate) {
  DT_OP("dt_router_gates", R, E, k, 0, 0);
  DT_KERNEL("dt_router_gates", probs, choice, gate);
  for (int64_t t = 0; t < R; t++)
    dt_router_gate_row(probs + t * E, choice + t * k, k, gate + t * k);
}
#endif

int64_t dt_moe_capacity(const dt_train_config *c, int64_t R) {
  return (int64_t)ceil(c->capacity_factor * (double)(c->topk * R) / (double)c->experts);
}

int64_t dt_moe_keep(const int32_t *choice, int64_t R, int64_t k, int64_t E, int64_t C,
                    int32_t *slot, int64_t *count) {
  int64_t dropped = 0;
  memset(count, 0, (size_t)E * sizeof *count);
  for (int64_t i = 0; i < R * k; i++) {
    int64_t *n = &count[choice[i]];
    slot[i] = *n < C ? (int32_t)(*n)++ : -1;
    dropped += slot[i] < 0;
  }
  return dropped;
}

#ifndef DT_CUDA
double dt_moe_aux(const dt_train_config *c, const float *probs, int64_t R, const float *f,
                  double scale, float *daux) {
  DT_OP("dt_moe_aux", R, c->experts, 0, 0, 0);
  DT_KERNEL("dt_moe_aux", probs, daux);
  dt_expect_host("dt_moe_aux", "f", f, (size_t)c->experts * sizeof *f);
  int64_t E = c->experts;
  double loss = 0;
  for (int64_t e = 0; e < E; e++) {
    loss += f[e] * dt_moe_prob_sum(probs, R, E, e) / (double)R;
    daux[e] = (float)(scale * c->aux_coef * (double)E * f[e] / (double)R);
  }
  return c->aux_coef * (double)E * loss;
}

void dt_router_backward(const float *x, const float *wr, const float *probs, const int32_t *choice,
                        const float *gate, const float *dgate, const float *daux, int64_t R,
                        int64_t D, int64_t E, int64_t k, float *dlogits, float *dwr, float *dx) {
  DT_OP("dt_router_backward", R, D, E, k, 0);
  DT_KERNEL("dt_router_backward", x, wr, probs, choice, gate, dgate, daux, dlogits, dwr, dx);
  for (int64_t t = 0; t < R; t++)
    dt_router_grad_row(probs + t * E, gate + t * k, dgate + t * k, choice + t * k, daux, E, k,
                       dlogits + t * E);
  dt_matmul(1, 0, D, E, R, x, dlogits, dwr, 1); /* dWr += x^T dlogits */
  dt_matmul(0, 1, R, D, E, dlogits, wr, dx, 1); /* dx += dlogits Wr^T */
}

void dt_moe_dispatch_rows(const float *x, const int32_t *pos, int64_t R, int64_t k, int64_t D,
                          float *send) {
  DT_OP("dt_moe_dispatch_rows", R, k, D, 0, 0);
  DT_KERNEL("dt_moe_dispatch_rows", x, pos, send);
  for (int64_t i = 0; i < R * k; i++)
    if (pos[i] >= 0) memcpy(send + (int64_t)pos[i] * D, x + i / k * D, (size_t)D * 4);
}

void dt_moe_combine(const float *x, const float *gate, const float *ret, const int32_t *pos,
                    int64_t R, int64_t k, int64_t D, float *xn) {
  DT_OP("dt_moe_combine", R, k, D, 0, 0);
  DT_KERNEL("dt_moe_combine", x, gate, ret, pos, xn);
  for (int64_t t = 0; t < R; t++)
    for (int64_t d = 0; d < D; d++)
      xn[t * D + d] = dt_moe_combine_core(x, gate, ret, pos, k, D, t, d);
}

void dt_moe_gate_backward(const float *dy, const float *gate, const float *ret, const int32_t *pos,
                          int64_t R, int64_t k, int64_t D, float *back, float *dgate) {
  DT_OP("dt_moe_gate_backward", R, k, D, 0, 0);
  DT_KERNEL("dt_moe_gate_backward", dy, gate, ret, pos, back, dgate);
  for (int64_t i = 0; i < R * k; i++)
    dgate[i] = pos[i] < 0 ? 0.0f
                          : dt_moe_gate_grad_core(dy + i / k * D, ret + (int64_t)pos[i] * D,
                                                  gate[i], back + (int64_t)pos[i] * D, D);
}

void dt_moe_combine_backward(const float *dy, const float *back, const int32_t *pos,
                             const int32_t *expert, int64_t R, int64_t k, int64_t D, float *dx) {
  DT_OP("dt_moe_combine_backward", R, k, D, 0, 0);
  DT_KERNEL("dt_moe_combine_backward", dy, back, pos, expert, dx);
  for (int64_t t = 0; t < R; t++)
    for (int64_t d = 0; d < D; d++)
      dx[t * D + d] = dt_moe_combine_grad_core(dy, back, pos, expert, k, D, t, d);
}
#endif
