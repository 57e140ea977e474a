/* moe.c: the router of lesson 10's mixture of experts, forward and backward,
 * its capacity and its load-balancing loss. Host rows: the cpu backend.
 *
 * The convention is the GShard/Mixtral one: softmax over all E logits, the k
 * largest kept, their gates renormalised to sum to 1 (10_ep/README.md names
 * the others). A token over an expert's capacity is dropped from that expert
 * and keeps its residual path. */
#include <math.h>
#include <string.h>

#include "train_internal.h"

void dt_router_forward(const float *x, const float *wr, int64_t R, int64_t D, int64_t E, int64_t k,
                       float *probs, int32_t *choice) {
  dt_matmul(0, 0, R, E, D, x, wr, probs, 0); /* the logits, softmaxed in place */
  for (int64_t t = 0; t < R; t++) {
    float *p = probs + t * E, max = p[0];
    for (int64_t e = 1; e < E; e++) max = fmaxf(max, p[e]);
    double sum = 0;
    for (int64_t e = 0; e < E; e++) sum += p[e] = expf(p[e] - max);
    for (int64_t e = 0; e < E; e++) p[e] = (float)(p[e] / sum);
    int32_t *c = choice + t * k;
    for (int64_t j = 0; j < k; j++) { /* k is 1 or 2: a scan per choice */
      int32_t best = -1;
      for (int64_t e = 0; e < E; e++) {
        int taken = 0;
        for (int64_t i = 0; i < j; i++) taken |= c[i] == e;
        if (!taken && (best < 0 || p[e] > p[best])) best = (int32_t)e;
      }
      c[j] = best;
    }
  }
}

void dt_router_gates(const float *probs, const int32_t *choice, int64_t R, int64_t E, int64_t k,
                     float *gate) {
  for (int64_t t = 0; t < R; t++) {
    double sum = 0;
    for (int64_t j = 0; j < k; j++) sum += probs[t * E + choice[t * k + j]];
    for (int64_t j = 0; j < k; j++)
      gate[t * k + j] = (float)(probs[t * E + choice[t * k + j]] / sum);
  }
}

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

double dt_moe_aux(const dt_train_config *c, const float *probs, int64_t R, const float *f,
                  double scale, float *daux) {
  int64_t E = c->experts;
  double loss = 0;
  for (int64_t e = 0; e < E; e++) {
    double P = 0;
    for (int64_t t = 0; t < R; t++) P += probs[t * E + e];
    loss += f[e] * P / (double)R;
    daux[e] = (float)(scale * c->aux_coef * (double)E * f[e] / (double)R);
  }
  return c->aux_coef * (double)E * loss;
}

void dt_router_backward(const float *x, const float *wr, const float *probs, const int32_t *choice,
                        const float *gate, const float *dgate, const float *daux, int64_t R,
                        int64_t D, int64_t E, int64_t k, float *dlogits, float *dwr, float *dx) {
  for (int64_t t = 0; t < R; t++) {
    const float *p = probs + t * E, *g = gate + t * k, *dg = dgate + t * k;
    const int32_t *c = choice + t * k;
    float *dl = dlogits + t * E; /* first d loss / d p, then d loss / d logit */
    for (int64_t e = 0; e < E; e++) dl[e] = daux ? daux[e] : 0.0f;
    /* gate_j = p_j / S, S the chosen ones' sum: dp_i = (dgate_i - sum_j gate_j dgate_j) / S */
    double S = 0, gdg = 0;
    for (int64_t j = 0; j < k; j++) {
      S += p[c[j]];
      gdg += (double)g[j] * dg[j];
    }
    for (int64_t j = 0; j < k; j++) dl[c[j]] += (float)((dg[j] - gdg) / S);
    double pdp = 0; /* softmax: dlogit_e = p_e (dp_e - sum_i p_i dp_i) */
    for (int64_t e = 0; e < E; e++) pdp += (double)p[e] * dl[e];
    for (int64_t e = 0; e < E; e++) dl[e] = (float)(p[e] * (dl[e] - pdp));
  }
  dt_matmul(1, 0, D, E, R, x, dlogits, dwr, 1); /* dWr += x^T dlogits */
  dt_matmul(0, 1, R, D, E, dlogits, wr, dx, 1); /* dx += dlogits Wr^T */
}
