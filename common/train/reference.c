/* reference.c: one process, the yardstick every training lesson is checked
 * against. Each model kind says what one step of it computes, the plainest
 * possible way (whole batch, whole weights): the loss of the step's global
 * batch at given weights and its gradient (dt_one; the MLP here, the others
 * in reference_moe.c, reference_attn.c and reference_gpt.c). The check
 * (lockstep.c) takes that step from the run's own state at every step it
 * compares; dt_reference_train trains the same model alone from the start,
 * for the trajectory a learner is shown beside the verdict (check.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"

void dt_load_weights_host(const char *path, const dt_train_config *c, float *weights, char *err,
                          size_t errlen); /* safetensors.c */

/* ------------------------------------------------------------------ the MLP */
typedef struct {
  float *x, *y, *a, *h, *dx, *dnext, *dh; /* x: L+1 blocks' inputs; a, h: L blocks' */
  int64_t *samples;
} mlp;

static double mlp_gradient(dt_one *o, int64_t step, const float *w, float *g, double scale,
                           double *part) {
  const dt_train_config *c = o->c;
  mlp *b = o->own;
  int64_t L = c->layers, D = c->dim, H = c->hidden, B = c->batch, P = D * H;
  float *dx = b->dx, *dnext = b->dnext;
  dt_kinks *kinks = o->replay ? o->replay->kinks : NULL; /* the run's ReLU decisions near 0 */
  dt_step_samples(c, 1, 0, step, b->samples);
  dt_make_batch(c, b->samples, B, b->x, b->y);
  if (kinks) kinks->step = step;
  /* layer l's W1 starts at 2*l*P, its W2 at (2*l+1)*P: the whole model's layout */
  for (int64_t l = 0; l < L; l++)
    dt_block_forward(b->x + l * B * D, w + 2 * l * P, w + (2 * l + 1) * P, b->a + l * B * H,
                     b->h + l * B * H, b->x + (l + 1) * B * D, B, D, H, 1,
                     &(dt_rows){kinks, b->samples, l, 0});
  double loss =
      dt_mse_forward_backward(b->x + L * B * D, b->y, dx, (size_t)(B * D), 1.0 / (double)(B * D));
  if (scale != 1.0) dt_scale(dx, (size_t)(B * D), (float)scale);
  dt_zero(g, (size_t)(2 * L * P) * 4);
  for (int64_t l = L - 1; l >= 0; l--) {
    dt_block_backward(b->x + l * B * D, b->a + l * B * H, b->h + l * B * H, w + 2 * l * P,
                      w + (2 * l + 1) * P, dx, dnext, g + 2 * l * P, g + (2 * l + 1) * P, b->dh, B,
                      D, H, 1);
    float *t = dx;
    dx = dnext;
    dnext = t;
  }
  *part = 0;
  return loss;
}

static void mlp_release(dt_one *o) {
  mlp *b = o->own;
  float *bufs[] = {b->x, b->y, b->a, b->h, b->dx, b->dnext, b->dh};
  for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) dt_free(bufs[i]);
  free(b->samples);
  free(b);
}

static void one_mlp(dt_one *o) {
  const dt_train_config *c = o->c;
  int64_t L = c->layers, D = c->dim, H = c->hidden, B = c->batch;
  mlp *b = dt_host_alloc(1, sizeof *b);
  *b = (mlp){.x = dt_alloc_f32((size_t)((L + 1) * B * D), DT_OTHER),
             .y = dt_alloc_f32((size_t)(B * D), DT_OTHER),
             .a = dt_alloc_f32((size_t)(L * B * H), DT_OTHER),
             .h = dt_alloc_f32((size_t)(L * B * H), DT_OTHER),
             .dx = dt_alloc_f32((size_t)(B * D), DT_OTHER),
             .dnext = dt_alloc_f32((size_t)(B * D), DT_OTHER),
             .dh = dt_alloc_f32((size_t)(B * H), DT_OTHER),
             .samples = dt_host_alloc((size_t)B, sizeof(int64_t))};
  o->own = b;
  o->gradient = mlp_gradient;
  o->release = mlp_release;
}

dt_one *dt_one_new(const dt_train_config *c, dt_decisions *replay) {
  dt_one *o = dt_host_alloc(1, sizeof *o);
  *o = (dt_one){.c = c, .replay = replay, .round16 = 1};
  switch (c->model) {
  case DT_MOE: dt_one_moe(o); break;
  case DT_TRANSFORMER: dt_one_attn(o); break;
  case DT_GPT: dt_one_gpt(o); break;
  default: one_mlp(o);
  }
  return o;
}

void dt_one_free(dt_one *o) {
  if (!o) return;
  o->release(o);
  free(o);
}

void dt_one_update(const dt_train_config *c, int64_t step, float *w, const float *g, float *m,
                   float *v, size_t n, int64_t taken, float grad_scale) {
  dt_spans plain = dt_model_plain(c);
  dt_step_scalars k = {taken, grad_scale, (float)dt_lr_at(c, step)};
  dt_optimizer_step(c, w, g, m, v, n, &plain, k);
  free(plain.at);
}

/* ----------------------------------------------------------- the trajectory */
void dt_reference_train(const dt_train_config *c, dt_reference_run *out) {
  size_t n = (size_t)dt_model_size(c);
  int adamw = c->optimizer[0] == 'a';
  dt_dtype half = dt_precision_type(c);
  dt_one *o = dt_one_new(c, NULL);
  float *w = dt_alloc_f32(n, DT_OTHER), *g = dt_alloc_f32(n, DT_OTHER);
  float *m = adamw ? dt_alloc_f32(n, DT_OTHER) : NULL,
        *v = adamw ? dt_alloc_f32(n, DT_OTHER) : NULL;
  char err[600] = "";
  float *hw = dt_host_alloc(n, 4); /* made on the host, then copied to w */
  if (c->load)                     /* the run started from this file: so does one process */
    dt_load_weights_host(c->load, c, hw, err, sizeof err);
  else
    dt_initial_weights(c, hw, 0, (int64_t)n);
  if (err[0]) dt_fatal(__FILE__, __LINE__, "dt_load_weights_host", err);
  dt_copy_from_host(w, hw, n * 4);
  if (out->initial) memcpy(out->initial, hw, n * 4);
  free(hw);
  dt_loss_scaler scaler;
  dt_scaler_init(&scaler, c);
  scaler.taken = 0; /* one process always trains from step 0 */
  scaler.quiet = 1;
  for (int64_t step = 0; step < c->steps; step++) {
    double part = 0;
    out->losses[step] = o->gradient(o, step, w, g, scaler.scale, &part);
    if (out->parts) out->parts[step] = part;
    /* what the runs do to the gradients they communicate: one trip through 16 bits */
    if (half != DT_F32 && o->round16) dt_round_half(g, n, half);
    double used = 1.0;
    int overflow = half == DT_F16 && dt_count_nonfinite(g, n) > 0;
    if (!dt_scaler_update(&scaler, c, overflow, &used)) continue; /* fp16 overflow: skipped */
    double sq = c->clip > 0 ? dt_sum_squares(g, n) : 0;
    out->clipped += c->clip > 0 && dt_clip_factor(c, sq / (used * used)) < 1.0f;
    dt_one_update(c, step, w, g, m, v, n, scaler.taken, dt_grad_scale(c, used, sq));
  }
  dt_copy_to_host(out->weights, w, n * 4); /* the check compares on the host */
  float *bufs[] = {w, g, m, v};
  for (size_t i = 0; i < 4; i++) dt_free(bufs[i]);
  dt_one_free(o);
}
