/* reference_attn.c: lesson 11's yardstick, the causal transformer trained in
 * one process the plainest way: whole sequences, and for each sequence and
 * head the S x S scores materialised, masked, softmaxed and kept for
 * backward. Nothing here is the lesson's (no blocks, no log-sum-exp, no
 * merging): the same model computed another way. Per layer:
 *   q, k, v = x Wq, x Wk, x Wv;  o = softmax(mask(q k^T / sqrt(dh))) v per head
 *   u = x + o Wo;  x' = u + relu(u W1) W2
 * On the backend's memory (the GPU's on the cuda backend): the batch is made
 * on the host and copied in once a step. */
#include <math.h>
#include <stdlib.h>

#include "train_internal.h"

static float *alloc(int64_t n) { return dt_alloc_f32((size_t)n, DT_OTHER); }

/* per layer: x, q, k, v, o, u [T,D]; a, h [T,H]; p [B][A][S,S] */
typedef struct {
  float *x, *y, *qkvou, *a, *hh, *p, *dx, *du, *dqkv, *dh;
  float *hx;               /* the batch, made on the host */
  int64_t *samples, *keys; /* token b, t: samples[b] x S + t */
  dt_heads_scratch s;
} attn;

/* The step's batch, made on the host (hx: x then y) and copied to the
 * backend's x and y; each row's key for the check. */
static void batch(const dt_train_config *c, int64_t step, attn *b) {
  int64_t S = c->seq, T = c->batch * S, TD = T * c->dim;
  dt_sequence_batch(c, step, b->samples, b->hx, b->hx + TD);
  dt_copy_from_host(b->x, b->hx, (size_t)TD * 4);
  dt_copy_from_host(b->y, b->hx + TD, (size_t)TD * 4);
  for (int64_t t = 0; t < T; t++) b->keys[t] = b->samples[t / S] * S + t % S;
}

static double attn_gradient(dt_one *o, int64_t step, const float *w, float *g, double scale,
                            double *part) {
  const dt_train_config *c = o->c;
  attn *b = o->own;
  int64_t L = c->layers, D = c->dim, H = c->hidden, B = c->batch, S = c->seq, A = c->heads;
  int64_t PL = dt_params_per_layer(c), T = B * S, DD = D * D;
  float *x = b->x, *qkvou = b->qkvou, *a = b->a, *hh = b->hh, *p = b->p, *dx = b->dx, *du = b->du;
  dt_kinks *kinks = o->replay ? o->replay->kinks : NULL; /* the run's ReLU decisions near 0 */
#define Q(l)  (qkvou + (5 * (l) + 0) * T * D)
#define K(l)  (qkvou + (5 * (l) + 1) * T * D)
#define V(l)  (qkvou + (5 * (l) + 2) * T * D)
#define O(l)  (qkvou + (5 * (l) + 3) * T * D)
#define U(l)  (qkvou + (5 * (l) + 4) * T * D)
#define PR(l) (p + (l)*B * A * S * S)
  batch(c, step, b);
  if (kinks) kinks->step = step;
  for (int64_t l = 0; l < L; l++) {
    const float *wl = w + l * PL, *xl = x + l * T * D;
    dt_matmul(0, 0, T, D, D, xl, wl, Q(l), 0);
    dt_matmul(0, 0, T, D, D, xl, wl + DD, K(l), 0);
    dt_matmul(0, 0, T, D, D, xl, wl + 2 * DD, V(l), 0);
    for (int64_t s = 0; s < B; s++)
      dt_attend_materialised(&b->s, Q(l) + s * S * D, K(l) + s * S * D, V(l) + s * S * D,
                             PR(l) + s * A * S * S, O(l) + s * S * D);
    dt_copy(U(l), xl, (size_t)(T * D) * 4);
    dt_matmul(0, 0, T, D, D, O(l), wl + 3 * DD, U(l), 1);
    dt_block_forward(U(l), wl + 4 * DD, wl + 4 * DD + D * H, a + l * T * H, hh + l * T * H,
                     x + (l + 1) * T * D, T, D, H, 1, &(dt_rows){kinks, b->keys, l, 0});
  }
  double loss =
      dt_mse_forward_backward(x + L * T * D, b->y, dx, (size_t)(T * D), 1.0 / (double)(T * D));
  if (scale != 1.0) dt_scale(dx, (size_t)(T * D), (float)scale); /* fp16 */
  dt_zero(g, (size_t)dt_model_size(c) * 4);
  for (int64_t l = L - 1; l >= 0; l--) {
    const float *wl = w + l * PL, *xl = x + l * T * D;
    float *gl = g + l * PL, *dq = b->dqkv, *dk = dq + T * D, *dv = dk + T * D, *dout = dv + T * D;
    dt_block_backward(U(l), a + l * T * H, hh + l * T * H, wl + 4 * DD, wl + 4 * DD + D * H, dx, du,
                      gl + 4 * DD, gl + 4 * DD + D * H, b->dh, T, D, H, 1);
    dt_matmul(1, 0, D, D, T, O(l), du, gl + 3 * DD, 1); /* dWo += o^T du */
    dt_matmul(0, 1, T, D, D, du, wl + 3 * DD, dout, 0); /* do = du Wo^T */
    for (int64_t s = 0; s < B; s++)
      dt_attend_materialised_backward(&b->s, Q(l) + s * S * D, K(l) + s * S * D, V(l) + s * S * D,
                                      PR(l) + s * A * S * S, dout + s * S * D, dq + s * S * D,
                                      dk + s * S * D, dv + s * S * D);
    const float *d3[] = {dq, dk, dv};
    dt_copy(dx, du, (size_t)(T * D) * 4); /* the residual path */
    for (int i = 0; i < 3; i++) {
      dt_matmul(1, 0, D, D, T, xl, d3[i], gl + i * DD, 1);
      dt_matmul(0, 1, T, D, D, d3[i], wl + i * DD, dx, 1);
    }
  }
#undef Q
#undef K
#undef V
#undef O
#undef U
#undef PR
  *part = 0;
  return loss;
}

static void attn_release(dt_one *o) {
  attn *b = o->own;
  dt_heads_scratch_free(&b->s);
  float *dev[] = {b->x, b->y, b->qkvou, b->a, b->hh, b->p, b->dx, b->du, b->dqkv, b->dh};
  for (size_t i = 0; i < sizeof dev / sizeof *dev; i++) dt_free(dev[i]);
  free(b->hx);
  free(b->samples);
  free(b->keys);
  free(b);
}

void dt_one_attn(dt_one *o) {
  const dt_train_config *c = o->c;
  int64_t L = c->layers, D = c->dim, H = c->hidden, B = c->batch, S = c->seq, A = c->heads;
  int64_t T = B * S;
  attn *b = dt_host_alloc(1, sizeof *b);
  *b = (attn){.x = alloc((L + 1) * T * D),
              .y = alloc(T * D),
              .qkvou = alloc(5 * L * T * D),
              .a = alloc(L * T * H),
              .hh = alloc(L * T * H),
              .p = alloc(L * B * A * S * S),
              .dx = alloc(T * D),
              .du = alloc(T * D),
              .dqkv = alloc(4 * T * D),
              .dh = alloc(T * H),
              .hx = dt_host_alloc((size_t)(2 * T * D), 4),
              .samples = dt_host_alloc((size_t)B, sizeof(int64_t)),
              .keys = dt_host_alloc((size_t)T, sizeof(int64_t))};
  dt_heads_scratch_init(&b->s, S, D, A);
  o->own = b;
  o->gradient = attn_gradient;
  o->release = attn_release;
}
