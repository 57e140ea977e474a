/* reference.c: single-process training of the same config, the yardstick
 * every training lesson is checked against. It is the plainest possible
 * loop: whole batch, whole weights, one process. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"

void dt_load_weights_host(const char *path, const dt_train_config *c, float *weights, char *err,
                          size_t errlen); /* safetensors.c */

/* The most one AdamW step can move a weight, besides weight decay: the update
 * is m_hat / (sqrt(v_hat) + eps), and by Cauchy-Schwarz |m_hat| <=
 * sqrt(sum_k a_k^2 / b_k) sqrt(v_hat), with a_k and b_k the weights step k's
 * gradient has in m_hat and v_hat at step t (CHECKING.md). 1 at t = 1. */
double dt_adamw_max_update(int64_t t, double b2) {
  const double b1 = 0.9;
  double sum = 0;
  for (int64_t j = 0; j < t; j++) { /* j = t - k: how many steps ago */
    double a = (1 - b1) * pow(b1, (double)j) / (1 - pow(b1, (double)t));
    double b = (1 - b2) * pow(b2, (double)j) / (1 - pow(b2, (double)t));
    sum += a * a / b;
  }
  return sqrt(sum);
}

/* fp16's largest value, and the limit its rounding turns to inf */
#define F16_LARGEST 65520.0

/* the largest |g_i| (inf where any is not finite), on either backend */
static double largest_abs(const float *g, size_t n) {
  float *h = dt_host_alloc(n, 4);
  dt_copy_to_host(h, g, n * 4);
  double most = 0;
  for (size_t i = 0; i < n; i++) most = isfinite(h[i]) ? fmax(most, fabs(h[i])) : INFINITY;
  free(h);
  return most;
}

/* fp16's verdict, skip the step or take it, as the run decided where one
 * process's gradients sit within a factor of 2 of fp16's range (its loss
 * scale's own step: a verdict there is the scaler's to tip) and the two
 * decided apart; anything further apart is decided otherwise, a failure
 * (check.c). largest: the largest |g| of one process, before rounding. */
static int skip_as_run(dt_skips *s, int64_t step, int own, double largest) {
  int run = s->skipped[step];
  if (run == own) {
    s->alike++;
  } else if (isfinite(largest) && largest >= F16_LARGEST / 2 && largest <= 2 * F16_LARGEST) {
    s->replayed++;
  } else {
    s->otherwise++;
  }
  return run;
}

/* After backward: what the distributed runs do to the gradients they
 * communicate (round16: one trip through 16 bits), fp16's verdict (the run's,
 * replayed where given), the clip, the optimizer; and the reach: how far the
 * optimizer could move a single weight in these steps. SGD moves it by
 * lr |g_i| <= lr ||g||; AdamW by at most lr (max update + decay x |w|), and
 * |w| <= its start + the reach so far. */
void dt_reference_update(const dt_train_config *c, dt_reference_run *out, dt_loss_scaler *scaler,
                         int64_t step, float *w, float *g, float *m, float *v, size_t n,
                         double w0_max, int round16) {
  dt_dtype half = dt_precision_type(c);
  dt_skips *skips = out->replay.skips && step >= c->start_step ? out->replay.skips : NULL;
  double largest = skips ? largest_abs(g, n) : 0;
  if (half != DT_F32 && round16) dt_round_half(g, n, half);
  double used = 1.0;
  int overflow = half == DT_F16 && dt_count_nonfinite(g, n) > 0;
  if (skips) overflow = skip_as_run(skips, step, overflow, largest);
  if (!dt_scaler_update(scaler, c, overflow, &used)) return; /* fp16 overflow: skipped */
  /* the reach needs the norm even without --clip; the lessons skip it */
  double raw = dt_sum_squares(g, n), sq = raw / (used * used); /* of the unscaled gradients */
  float clip = dt_clip_factor(c, sq);
  out->clipped += clip < 1.0f;
  double lr = dt_lr_at(c, step);
  dt_spans plain = dt_model_plain(c);
  dt_step_scalars k = {scaler->taken, dt_grad_scale(c, used, raw), (float)lr};
  dt_optimizer_step(c, w, g, m, v, n, &plain, k);
  free(plain.at);
  out->reach += c->optimizer[0] == 'a' ? lr * (dt_adamw_max_update(scaler->taken, c->beta2) +
                                               c->weight_decay * (w0_max + out->reach))
                                       : lr * clip * sqrt(sq);
}

void dt_reverse_rows(void *rows, int64_t count, size_t bytes) {
  unsigned char *r = rows, t;
  for (int64_t i = 0, j = count - 1; i < j; i++, j--)
    for (size_t k = 0; k < bytes; k++) {
      t = r[(size_t)i * bytes + k];
      r[(size_t)i * bytes + k] = r[(size_t)j * bytes + k];
      r[(size_t)j * bytes + k] = t;
    }
}

double dt_reference_begin(const dt_train_config *c, float *w, int64_t n, dt_loss_scaler *scaler,
                          dt_reference_run *out) {
  char err[600] = "";
  float *hw = dt_host_alloc((size_t)n, 4); /* made on the host, then copied to w */
  if (c->load)                             /* the run started from this file: so does one process */
    dt_load_weights_host(c->load, c, hw, err, sizeof err);
  else
    dt_initial_weights(c, hw, 0, n);
  if (err[0]) dt_fatal(__FILE__, __LINE__, "dt_load_weights_host", err);
  dt_copy_from_host(w, hw, (size_t)n * 4);
  dt_scaler_init(scaler, c);
  scaler->taken = 0; /* the reference always trains from step 0 */
  scaler->quiet = 1;
  float w0_max = 0; /* in float, then widened: GCC 12's -O3 on arm64 (below) */
  for (int64_t i = 0; i < n; i++) w0_max = fmaxf(w0_max, fabsf(hw[i]));
  if (out->initial) memcpy(out->initial, hw, (size_t)n * 4);
  free(hw);
  out->reach = 0;
  return w0_max;
}

void dt_reference_train(const dt_train_config *c, dt_reference_run *out) {
  double *losses = out->losses;
  float *weights = out->weights;
  int64_t L = c->layers, D = c->dim, H = c->hidden, B = c->batch, P = D * H;
  int adamw = c->optimizer[0] == 'a';
  float *w = dt_alloc_f32((size_t)(2 * L * P), DT_PARAMS),
        *g = dt_alloc_f32((size_t)(2 * L * P), DT_GRADS);
  float *m = adamw ? dt_alloc_f32((size_t)(2 * L * P), DT_OPTIM) : NULL;
  float *v = adamw ? dt_alloc_f32((size_t)(2 * L * P), DT_OPTIM) : NULL;
  float *x = dt_alloc_f32((size_t)((L + 1) * B * D), DT_ACTIV),
        *y = dt_alloc_f32((size_t)(B * D), DT_DATA);
  float *a = dt_alloc_f32((size_t)(L * B * H), DT_ACTIV),
        *h = dt_alloc_f32((size_t)(L * B * H), DT_ACTIV);
  float *dx = dt_alloc_f32((size_t)(B * D), DT_ACTIV),
        *dnext = dt_alloc_f32((size_t)(B * D), DT_ACTIV);
  float *dh = dt_alloc_f32((size_t)(B * H), DT_ACTIV);
  int64_t *samples = malloc((size_t)B * sizeof *samples);
  CHECK_ALLOC(samples);
  dt_kinks *kinks = out->replay.kinks; /* the run's ReLU decisions near 0, replayed */
  /* layer l's W1 starts at 2*l*P, its W2 at (2*l+1)*P: the layout of `weights` */
  if (c->load) {
    char err[256] = "";
    dt_load_weights_host(c->load, c, weights, err, sizeof err);
    if (err[0]) dt_fatal(__FILE__, __LINE__, "dt_load_weights_host", err);
    dt_copy_from_host(w, weights, (size_t)(2 * L * P) * sizeof(float));
  } else {
    for (int64_t l = 0; l < L; l++) {
      dt_init_w1(c, l, w + 2 * l * P, 0, H);
      dt_init_w2(c, l, w + (2 * l + 1) * P, 0, H);
    }
  }
  dt_loss_scaler scaler;
  dt_scaler_init(&scaler, c);
  scaler.taken = 0; /* the reference always trains from step 0 */
  scaler.quiet = 1;
  size_t n = (size_t)(2 * L * P);
  if (out->initial) dt_copy_to_host(out->initial, w, n * sizeof(float));
  /* the max in float, then widened: the same value, and GCC 12 on arm64
   * stops with an internal error at -O3 vectorizing a double fmax over
   * floats (make test-arm64 builds with it) */
  float w0_maxf = 0;
  if (out->initial)
    for (size_t i = 0; i < n; i++) w0_maxf = fmaxf(w0_maxf, fabsf(out->initial[i]));
  double w0_max = w0_maxf;
  out->reach = 0;
  for (int64_t step = 0; step < c->steps; step++) {
    dt_step_samples(c, 1, 0, step, samples);
    if (out->twin) dt_reverse_rows(samples, B, sizeof *samples);
    dt_make_batch(c, samples, B, x, y);
    if (kinks) kinks->step = step;
    for (int64_t l = 0; l < L; l++)
      dt_block_forward(x + l * B * D, w + 2 * l * P, w + (2 * l + 1) * P, a + l * B * H,
                       h + l * B * H, x + (l + 1) * B * D, B, D, H, 1,
                       &(dt_rows){kinks, samples, l, 0});
    losses[step] =
        dt_mse_forward_backward(x + L * B * D, y, dx, (size_t)(B * D), 1.0 / (double)(B * D));
    if (scaler.scale != 1.0) dt_scale(dx, (size_t)(B * D), (float)scaler.scale);
    dt_zero(g, n * sizeof(float));
    for (int64_t l = L - 1; l >= 0; l--) {
      dt_block_backward(x + l * B * D, a + l * B * H, h + l * B * H, w + 2 * l * P,
                        w + (2 * l + 1) * P, dx, dnext, g + 2 * l * P, g + (2 * l + 1) * P, dh, B,
                        D, H, 1);
      float *t = dx;
      dx = dnext;
      dnext = t;
    }
    dt_reference_update(c, out, &scaler, step, w, g, m, v, n, w0_max, 1);
  }
  dt_copy_to_host(weights, w, (size_t)(2 * L * P) * sizeof(float));
  float *bufs[] = {w, g, m, v, x, y, a, h, dx, dnext, dh};
  for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) dt_free(bufs[i]);
  free(samples);
}
