/* reference_gpt.c: the GPT's yardstick, the whole model in one process the
 * plainest way: every sequence whole, each head's S x S scores materialised
 * and kept for backward (attention.c's plainest form), the cross-entropy
 * over the whole vocabulary in one slice, on the same text windows as the
 * run. Nothing here is a lesson's: no tiles, no log-sum-exp, no slices. On
 * the backend's memory as reference_attn.c: each step's tokens by
 * dt_gpt_forward. */
#include <stdlib.h>

#include "train_internal.h"

typedef struct {
  int32_t *windows, *inputs, *targets; /* [B, S + 1], then [B, S] twice */
  dt_gpt_acts *a;
} gpt;

static double gpt_gradient(dt_one *o, int64_t step, const float *w, float *g, double scale,
                           double *part) {
  const dt_train_config *c = o->c;
  gpt *b = o->own;
  dt_text_batch(c, step, 0, c->batch, b->windows);
  dt_gpt_split_windows(b->windows, c->batch, c->seq, b->inputs, b->targets);
  double loss = dt_gpt_forward(c, w, b->inputs, b->targets, c->seq, b->a);
  dt_zero(g, (size_t)dt_model_size(c) * 4);
  dt_gpt_backward(c, w, b->a, scale, g); /* fp16's scale folded into dlogits */
  *part = 0;
  return loss;
}

static void gpt_release(dt_one *o) {
  gpt *b = o->own;
  dt_gpt_acts_free(b->a);
  free(b->windows);
  free(b);
}

void dt_one_gpt(dt_one *o) {
  const dt_train_config *c = o->c;
  int64_t B = c->batch, S = c->seq;
  gpt *b = dt_host_alloc(1, sizeof *b);
  b->windows = dt_host_alloc((size_t)(B * (S + 1) + 2 * B * S), sizeof(int32_t));
  b->inputs = b->windows + B * (S + 1);
  b->targets = b->inputs + B * S;
  b->a = dt_gpt_acts_new(c, B, 1);
  o->own = b;
  o->gradient = gpt_gradient;
  o->release = gpt_release;
}
