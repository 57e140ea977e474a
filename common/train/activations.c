/* activations.c: a micro-batch's activations through the L blocks, and one
 * block's forward and backward on them (train.h). */
#include "train_internal.h"

void dt_acts_alloc(dt_acts *t, int64_t L, int64_t R, int64_t D, int64_t Hs) {
  *t = (dt_acts){.L = L, .R = R, .D = D, .Hs = Hs};
  float **buf[] = {&t->x, &t->a, &t->h, &t->dx, &t->dnext, &t->dh};
  int64_t len[] = {(L + 1) * R * D, L * R * Hs, L * R * Hs, R * D, R * D, R * Hs};
  for (int i = 0; i < 6; i++) *buf[i] = dt_alloc_f32((size_t)len[i], DT_ACTIV);
  t->y = dt_alloc_f32((size_t)(R * D), DT_DATA);
}

int64_t dt_acts_bytes(int64_t L, int64_t R, int64_t D, int64_t Hs) {
  return ((L + 1) * R * D + 2 * L * R * Hs + 2 * R * D + R * Hs) * 4;
}

float *dt_acts_x(const dt_acts *t, int64_t l) { return t->x + l * t->R * t->D; }

void dt_acts_forward(dt_acts *t, int64_t l, const float *w1, const float *w2, int residual) {
  int64_t R = t->R, Hs = t->Hs;
  double t0 = dt_span_begin();
  dt_rows where = t->rows;
  where.layer += l;
  dt_block_forward(dt_acts_x(t, l), w1, w2, t->a + l * R * Hs, t->h + l * R * Hs,
                   dt_acts_x(t, l + 1), R, t->D, Hs, residual, &where);
  dt_span_end("forward", "compute", t0);
}

void dt_acts_backward(dt_acts *t, int64_t l, const float *w1, const float *w2, float *g1, float *g2,
                      int residual) {
  int64_t R = t->R, Hs = t->Hs;
  float *out_grad = t->dx;
  double t0 = dt_span_begin();
  dt_block_backward(dt_acts_x(t, l), t->a + l * R * Hs, t->h + l * R * Hs, w1, w2, out_grad,
                    t->dnext, g1, g2, t->dh, R, t->D, Hs, residual);
  dt_span_end("backward", "compute", t0);
  t->dx = t->dnext; /* the input's gradient is the next block's output gradient */
  t->dnext = out_grad;
}
