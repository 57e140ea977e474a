/* reference_attn.c: lesson 11's yardstick, the causal transformer trained in
 * one process the plainest way: whole sequences, and for each sequence and
 * head the S x S scores materialised, masked, softmaxed and kept for
 * backward. Nothing here is the lesson's (no blocks, no log-sum-exp, no
 * merging): the same model computed another way. Per layer:
 *   q, k, v = x Wq, x Wk, x Wv;  o = softmax(mask(q k^T / sqrt(dh))) v per head
 *   u = x + o Wo;  x' = u + relu(u W1) W2
 * On the backend's memory (the GPU's on the cuda backend): the weights and
 * the batch are made on the host and copied in, the weights once
 * (dt_reference_begin), the batch once a step. */
#include <math.h>
#include <stdlib.h>

#include "train_internal.h"

static float *alloc(int64_t n) { return dt_alloc_f32((size_t)n, DT_OTHER); }

/* The step's batch, made on the host (hx: x then y) and copied to the
 * backend's x and y; each row's key for the check. */
static void batch(const dt_train_config *c, int64_t step, int64_t *samples, int64_t *keys,
                  float *hx, float *x, float *y, int twin) {
  int64_t S = c->seq, T = c->batch * S, TD = T * c->dim;
  dt_sequence_batch(c, step, samples, hx, hx + TD);
  if (twin) { /* the sequences in reverse order: samples, x's and y's rows */
    dt_reverse_rows(samples, c->batch, sizeof *samples);
    for (int i = 0; i < 2; i++) dt_reverse_rows(hx + i * TD, c->batch, (size_t)(S * c->dim) * 4);
  }
  dt_copy_from_host(x, hx, (size_t)TD * 4);
  dt_copy_from_host(y, hx + TD, (size_t)TD * 4);
  for (int64_t t = 0; t < T; t++) keys[t] = samples[t / S] * S + t % S;
}

void dt_reference_train_attn(const dt_train_config *c, dt_reference_run *out) {
  int64_t L = c->layers, D = c->dim, H = c->hidden, B = c->batch, S = c->seq, A = c->heads;
  int64_t PL = dt_params_per_layer(c), n = dt_model_size(c), T = B * S, DD = D * D;
  int adamw = c->optimizer[0] == 'a';
  float *w = dt_alloc_f32((size_t)n, DT_PARAMS), *g = dt_alloc_f32((size_t)n, DT_GRADS);
  float *m = adamw ? dt_alloc_f32((size_t)n, DT_OPTIM) : NULL;
  float *v = adamw ? dt_alloc_f32((size_t)n, DT_OPTIM) : NULL;
  /* per layer: x, q, k, v, o, u [T,D]; a, h [T,H]; p [B][A][S,S] */
  float *x = alloc((L + 1) * T * D), *y = alloc(T * D), *qkvou = alloc(5 * L * T * D);
  float *a = alloc(L * T * H), *hh = alloc(L * T * H), *p = alloc(L * B * A * S * S);
  float *dx = alloc(T * D), *du = alloc(T * D), *dqkv = alloc(4 * T * D), *dh = alloc(T * H);
  float *hx = dt_host_alloc((size_t)(2 * T * D), 4); /* the batch, made on the host */
  int64_t *samples = dt_host_alloc((size_t)B, sizeof *samples);
  int64_t *keys = dt_host_alloc((size_t)T, sizeof *keys); /* token b, t: samples[b] x S + t */
  dt_kinks *kinks = out->replay.kinks;                    /* the run's ReLU decisions near 0 */
  dt_heads_scratch s;
  dt_heads_scratch_init(&s, S, D, A);
  dt_loss_scaler scaler;
  double w0_max = dt_reference_begin(c, w, n, &scaler, out);
#define Q(l)  (qkvou + (5 * (l) + 0) * T * D)
#define K(l)  (qkvou + (5 * (l) + 1) * T * D)
#define V(l)  (qkvou + (5 * (l) + 2) * T * D)
#define O(l)  (qkvou + (5 * (l) + 3) * T * D)
#define U(l)  (qkvou + (5 * (l) + 4) * T * D)
#define PR(l) (p + (l)*B * A * S * S)
  for (int64_t step = 0; step < c->steps; step++) {
    batch(c, step, samples, keys, hx, x, y, out->twin);
    if (kinks) kinks->step = step;
    for (int64_t l = 0; l < L; l++) {
      const float *wl = w + l * PL, *xl = x + l * T * D;
      dt_matmul(0, 0, T, D, D, xl, wl, Q(l), 0);
      dt_matmul(0, 0, T, D, D, xl, wl + DD, K(l), 0);
      dt_matmul(0, 0, T, D, D, xl, wl + 2 * DD, V(l), 0);
      for (int64_t b = 0; b < B; b++)
        dt_attend_materialised(&s, Q(l) + b * S * D, K(l) + b * S * D, V(l) + b * S * D,
                               PR(l) + b * A * S * S, O(l) + b * S * D);
      dt_copy(U(l), xl, (size_t)(T * D) * 4);
      dt_matmul(0, 0, T, D, D, O(l), wl + 3 * DD, U(l), 1);
      dt_block_forward(U(l), wl + 4 * DD, wl + 4 * DD + D * H, a + l * T * H, hh + l * T * H,
                       x + (l + 1) * T * D, T, D, H, 1, &(dt_rows){kinks, keys, l, 0});
    }
    out->losses[step] =
        dt_mse_forward_backward(x + L * T * D, y, dx, (size_t)(T * D), 1.0 / (double)(T * D));
    if (scaler.scale != 1.0) dt_scale(dx, (size_t)(T * D), (float)scaler.scale); /* fp16 */
    dt_zero(g, (size_t)n * 4);
    for (int64_t l = L - 1; l >= 0; l--) {
      const float *wl = w + l * PL, *xl = x + l * T * D;
      float *gl = g + l * PL, *dq = dqkv, *dk = dq + T * D, *dv = dk + T * D, *dout = dv + T * D;
      dt_block_backward(U(l), a + l * T * H, hh + l * T * H, wl + 4 * DD, wl + 4 * DD + D * H, dx,
                        du, gl + 4 * DD, gl + 4 * DD + D * H, dh, T, D, H, 1);
      dt_matmul(1, 0, D, D, T, O(l), du, gl + 3 * DD, 1); /* dWo += o^T du */
      dt_matmul(0, 1, T, D, D, du, wl + 3 * DD, dout, 0); /* do = du Wo^T */
      for (int64_t b = 0; b < B; b++)
        dt_attend_materialised_backward(&s, Q(l) + b * S * D, K(l) + b * S * D, V(l) + b * S * D,
                                        PR(l) + b * A * S * S, dout + b * S * D, dq + b * S * D,
                                        dk + b * S * D, dv + b * S * D);
      const float *d3[] = {dq, dk, dv};
      dt_copy(dx, du, (size_t)(T * D) * 4); /* the residual path */
      for (int i = 0; i < 3; i++) {
        dt_matmul(1, 0, D, D, T, xl, d3[i], gl + i * DD, 1);
        dt_matmul(0, 1, T, D, D, d3[i], wl + i * DD, dx, 1);
      }
    }
    dt_reference_update(c, out, &scaler, step, w, g, m, v, (size_t)n, w0_max, 1);
  }
  dt_copy_to_host(out->weights, w, (size_t)n * 4);
  dt_heads_scratch_free(&s);
  void *host[] = {hx, samples, keys};
  for (size_t i = 0; i < sizeof host / sizeof *host; i++) free(host[i]);
  float *dev[] = {w, g, m, v, x, y, qkvou, a, hh, p, dx, du, dqkv, dh};
  for (size_t i = 0; i < sizeof dev / sizeof *dev; i++) dt_free(dev[i]);
}
