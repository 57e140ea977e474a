/* reference_gpt.c: the GPT's yardstick, the whole model trained in one
 * process the plainest way: every sequence whole, each head's S x S scores
 * materialised and kept for backward (attention.c's plainest form), the
 * cross-entropy over the whole vocabulary in one slice, on the same text
 * windows, schedule and optimizer (its decay groups, clipping) as the run.
 * Nothing here is a lesson's: no tiles, no log-sum-exp, no slices. On the
 * backend's memory as reference_attn.c: the weights copied in once
 * (dt_reference_begin), each step's tokens by dt_gpt_forward. */
#include <stdlib.h>

#include "train_internal.h"

void dt_reference_train_gpt(const dt_train_config *c, dt_reference_run *out) {
  int64_t n = dt_model_size(c), B = c->batch, S = c->seq;
  int adamw = c->optimizer[0] == 'a';
  float *w = dt_alloc_f32((size_t)n, DT_PARAMS), *g = dt_alloc_f32((size_t)n, DT_GRADS);
  float *m = adamw ? dt_alloc_f32((size_t)n, DT_OPTIM) : NULL;
  float *v = adamw ? dt_alloc_f32((size_t)n, DT_OPTIM) : NULL;
  int32_t *windows = dt_host_alloc((size_t)(B * (S + 1) + 2 * B * S), sizeof *windows);
  int32_t *inputs = windows + B * (S + 1), *targets = inputs + B * S;
  dt_gpt_acts *a = dt_gpt_acts_new(c, B, 1);
  dt_loss_scaler scaler;
  double w0_max = dt_reference_begin(c, w, n, &scaler, out);
  for (int64_t step = 0; step < c->steps; step++) {
    dt_text_batch(c, step, 0, B, windows);
    if (out->twin) dt_reverse_rows(windows, B, (size_t)(S + 1) * sizeof *windows);
    dt_gpt_split_windows(windows, B, S, inputs, targets);
    out->losses[step] = dt_gpt_forward(c, w, inputs, targets, S, a);
    dt_zero(g, (size_t)n * 4);
    dt_gpt_backward(c, w, a, scaler.scale, g); /* fp16's scale folded into dlogits */
    dt_reference_update(c, out, &scaler, step, w, g, m, v, (size_t)n, w0_max, 1);
  }
  dt_copy_to_host(out->weights, w, (size_t)n * 4); /* the check compares on the host */
  dt_gpt_acts_free(a);
  free(windows);
  float *dev[] = {w, g, m, v};
  for (size_t i = 0; i < 4; i++) dt_free(dev[i]);
}
