/* test_gpt.c: the GPT of the training layer (DT_GPT: gpt.c, gpt_core.h,
 * text.c, reference_gpt.c, gpt_names.c): the backend's kernels against
 * gpt_core.h's bodies run on the host (bit for bit: on a GPU, the CUDA
 * kernels against the cpu's arithmetic); finite differences of LayerNorm,
 * GELU, the embedding and the cross-entropy, the sliced pieces against the
 * whole vocabulary (1, 2 and 3 slices), the whole model's loss against
 * every tensor (tiled and materialised attention), on the backend's memory
 * as every test here (the GPU's on cuda); the initialisation, the
 * schedule and the decay groups; the text's windows and vocabulary; the
 * reference's loss falling on README.md; the nanoGPT-named file read back
 * bit for bit; sampling. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_core.h"
#include "train_internal.h"
#include "unit.h"

void dt_load_weights_host(const char *path, const dt_train_config *c, float *weights, char *err,
                          size_t errlen); /* safetensors.c */

static float *random_host(size_t n, uint64_t stream, float lo, float hi) {
  float *h = malloc(n * 4);
  for (size_t i = 0; i < n; i++) h[i] = lo + (hi - lo) * dt_rng_uniform(45, stream, i);
  return h;
}
static float *on_device(const float *host, size_t n) {
  float *d = dt_alloc_f32(n, DT_OTHER);
  dt_copy_from_host(d, host, n * 4);
  return d;
}
static float *to_host(const float *dev, size_t n) {
  float *h = malloc(n * 4);
  dt_copy_to_host(h, dev, n * 4);
  return h;
}
static int32_t *random_tokens(int64_t n, int64_t V, uint64_t stream) {
  int32_t *t = malloc((size_t)n * sizeof *t);
  for (int64_t i = 0; i < n; i++)
    t[i] = (int32_t)(dt_rng_u64(45, stream, (uint64_t)i) % (uint64_t)V);
  return t;
}
/* token ids where the kernels read them, the backend's memory, as a lesson
 * keeps them (train.h) */
static int32_t *ids_on_device(const int32_t *host, int64_t n) {
  int32_t *d = dt_alloc((size_t)n * sizeof *d, DT_OTHER);
  dt_copy_from_host(d, host, (size_t)n * sizeof *d);
  return d;
}
static int same_bits(const float *a, const float *dev_b, size_t n) {
  float *b = to_host(dev_b, n);
  int same = memcmp(a, b, n * 4) == 0;
  free(b);
  return same;
}

/* A small GPT on README.md (the text every checkout has). */
static dt_train_config tiny(int64_t layers, int64_t dim, int64_t heads, int64_t seq,
                            int64_t batch) {
  dt_train_config c = DT_TRAIN_DEFAULTS;
  dt_gpt_defaults(&c);
  c.layers = layers;
  c.dim = dim;
  c.heads = heads;
  c.seq = seq;
  c.batch = batch;
  c.hidden = 2 * dim;
  dt_train_resolve(&c);
  return c;
}

/* ------------------------------------------------ the backends, bit for bit */
static void test_bits(void) {
  int64_t R = 37, D = 19, V = 23, v0 = 5, Vs = 11;
  size_t RD = (size_t)(R * D), RV = (size_t)(R * V);
  float *x = random_host(RD, 1, -3, 3), *g = random_host((size_t)D, 2, 0.5f, 1.5f);
  float *dy = random_host(RD, 3, -1, 1), *dg0 = random_host((size_t)D, 4, -1, 1);
  float *dx0 = random_host(RD, 5, -1, 1), *wte = random_host((size_t)(Vs * D), 6, -1, 1);
  float *logits = random_host(RV, 7, -8, 8);
  int32_t *tok = random_tokens(R, V, 8), *dT = ids_on_device(tok, R);
  float *dX = on_device(x, RD), *dG = on_device(g, (size_t)D), *dDy = on_device(dy, RD);
  /* LayerNorm */
  float *y = malloc(RD * 4), *mean = malloc((size_t)R * 4), *rstd = malloc((size_t)R * 4);
  for (int64_t r = 0; r < R; r++) dt_ln_row_forward(x + r * D, g, y + r * D, &mean[r], &rstd[r], D);
  float *dY = dt_alloc_f32(RD, DT_OTHER), *dM = dt_alloc_f32((size_t)R, DT_OTHER);
  float *dR = dt_alloc_f32((size_t)R, DT_OTHER);
  dt_layernorm_forward(dX, dG, dY, dM, dR, R, D);
  EXPECT(same_bits(y, dY, RD) && same_bits(mean, dM, (size_t)R) && same_bits(rstd, dR, (size_t)R),
         "LayerNorm forward: the backend's bits are the bodies'");
  float *dx = malloc(RD * 4), *dg = malloc((size_t)D * 4);
  memcpy(dx, dx0, RD * 4);
  memcpy(dg, dg0, (size_t)D * 4);
  for (int64_t j = 0; j < D; j++) dg[j] = dt_ln_gain_col(x, dy, mean, rstd, R, D, j, dg[j]);
  for (int64_t r = 0; r < R; r++)
    dt_ln_row_backward(x + r * D, g, dy + r * D, mean[r], rstd[r], dx + r * D, D, 1);
  float *dDx = on_device(dx0, RD), *dDg = on_device(dg0, (size_t)D);
  dt_layernorm_backward(dX, dG, dDy, dM, dR, dDx, dDg, R, D, 1);
  EXPECT(same_bits(dx, dDx, RD) && same_bits(dg, dDg, (size_t)D),
         "LayerNorm backward: the bodies' bits");
  /* GELU */
  float *u = malloc(RD * 4), *da = malloc(RD * 4), *dU = dt_alloc_f32(RD, DT_OTHER);
  for (size_t i = 0; i < RD; i++) {
    u[i] = dt_gelu_core(x[i]);
    da[i] = dt_rn_mul(dy[i], dt_gelu_grad_core(x[i]));
  }
  dt_gelu_forward(dX, dU, RD);
  EXPECT(same_bits(u, dU, RD), "GELU forward: the bodies' bits");
  dt_gelu_backward(dX, dDy, dU, RD);
  EXPECT(same_bits(da, dU, RD), "GELU backward: the bodies' bits");
  /* the embedding of a slice, and its backward */
  float *dW = on_device(wte, (size_t)(Vs * D)), *e = malloc(RD * 4);
  for (int64_t r = 0; r < R; r++)
    for (int64_t d = 0; d < D; d++) e[r * D + d] = dt_embed_core(wte, tok[r], v0, Vs, D, d);
  dt_embed_forward(dT, R, dW, v0, Vs, D, dY);
  EXPECT(same_bits(e, dY, RD), "embedding forward: the bodies' bits");
  /* the buckets, one token id at a time as the GPU's threads make them,
   * against a plain reading: each token's rows, ascending, one after another */
  int64_t *off = malloc((size_t)(Vs + 1) * sizeof *off);
  int32_t *rows = malloc((size_t)R * sizeof *rows);
  for (int64_t v = Vs - 1; v >= 0; v--) dt_token_bucket(tok, R, v0, Vs, v, off, rows);
  int64_t at = 0, buckets_ok = off[0] == 0;
  for (int64_t v = 0; v < Vs; v++)
    for (int64_t r = 0; r < R; r++)
      if (tok[r] == v0 + v) buckets_ok &= at < R && rows[at++] == r && off[v + 1] >= at;
  EXPECT(buckets_ok && off[Vs] == at, "the embedding's buckets: %lld rows of the slice's tokens",
         (long long)at);
  float *gw = malloc((size_t)(Vs * D) * 4);
  memcpy(gw, wte, (size_t)(Vs * D) * 4);
  for (int64_t v = 0; v < Vs; v++)
    for (int64_t d = 0; d < D; d++)
      gw[v * D + d] = dt_rows_sum_core(dy, rows, off[v], off[v + 1], D, d, gw[v * D + d]);
  dt_embed_backward(dT, R, dDy, v0, Vs, D, dW);
  EXPECT(same_bits(gw, dW, (size_t)(Vs * D)), "embedding backward: the bodies' bits");
  /* the cross-entropy's pieces and backward over a slice */
  float *dL = on_device(logits, RV), *mx = malloc((size_t)R * 4), *sum = malloc((size_t)R * 4);
  float *tl = malloc((size_t)R * 4), *dl = malloc(RV * 4), *dO = dt_alloc_f32(RV, DT_OTHER);
  for (int64_t r = 0; r < R; r++) {
    mx[r] = dt_ce_row_max(logits + r * Vs, Vs);
    sum[r] = dt_ce_row_sumexp(logits + r * Vs, Vs, mx[r]);
    tl[r] = dt_ce_row_target(logits + r * Vs, v0, Vs, tok[r]);
    for (int64_t j = 0; j < Vs; j++)
      dl[r * Vs + j] = dt_ce_grad_core(logits[r * Vs + j], tok[r] == v0 + j, mx[r], sum[r], 0.25f);
  }
  dt_ce_max(dL, R, Vs, dM);
  EXPECT(same_bits(mx, dM, (size_t)R), "cross-entropy max: the bodies' bits");
  dt_ce_sumexp(dL, R, Vs, dM, dR);
  EXPECT(same_bits(sum, dR, (size_t)R), "cross-entropy sum: the bodies' bits");
  dt_ce_backward(dL, R, Vs, v0, dT, dM, dR, 0.25f, dO);
  EXPECT(same_bits(dl, dO, (size_t)(R * Vs)), "cross-entropy backward: the bodies' bits");
  dt_ce_target(dL, R, Vs, v0, dT, dM);
  EXPECT(same_bits(tl, dM, (size_t)R), "cross-entropy target: the bodies' bits");
  void *host[] = {x,  g, dy, dg0, dx0, wte,  logits, tok, y,   mean, rstd, dx,
                  dg, u, da, e,   off, rows, gw,     mx,  sum, tl,   dl};
  for (size_t i = 0; i < sizeof host / sizeof *host; i++) free(host[i]);
  float *dev[] = {dX, dG, dDy, dY, dM, dR, dDx, dDg, dU, dW, dL, dO};
  for (size_t i = 0; i < sizeof dev / sizeof *dev; i++) dt_free(dev[i]);
  dt_free(dT);
}

/* ------------------------------------------------- finite differences */
/* max |a - b| / max(max |b|, floor); a NaN is off without bound */
static double rel_err(const double *a, const float *b, int64_t n, double floor) {
  double worst = 0, size = floor;
  for (int64_t i = 0; i < n; i++) size = unit_max(size, fabs(b[i]));
  for (int64_t i = 0; i < n; i++) worst = unit_max(worst, fabs(a[i] - b[i]) / size);
  return isfinite(worst) ? worst : INFINITY;
}

/* sum r . y over a LayerNorm's output, in double (the loss of the check) */
static double ln_loss(const float *x, const float *g, const float *wr, int64_t R, int64_t D) {
  float *y = malloc((size_t)(R * D) * 4), *m = malloc((size_t)R * 4), *s = malloc((size_t)R * 4);
  float *dx = on_device(x, (size_t)(R * D)), *dg = on_device(g, (size_t)D);
  float *dy = dt_alloc_f32((size_t)(R * D), DT_OTHER), *dm = dt_alloc_f32((size_t)R, DT_OTHER);
  float *ds = dt_alloc_f32((size_t)R, DT_OTHER);
  dt_layernorm_forward(dx, dg, dy, dm, ds, R, D);
  dt_copy_to_host(y, dy, (size_t)(R * D) * 4);
  double loss = 0;
  for (int64_t i = 0; i < R * D; i++) loss += (double)wr[i] * y[i];
  free(y), free(m), free(s);
  dt_free(dx), dt_free(dg), dt_free(dy), dt_free(dm), dt_free(ds);
  return loss;
}

static void test_layernorm_fd(void) {
  int64_t R = 5, D = 7;
  float *x = random_host((size_t)(R * D), 11, -2, 2), *g = random_host((size_t)D, 12, 0.5f, 1.5f);
  float *wr = random_host((size_t)(R * D), 13, -1, 1);
  float *dX = on_device(x, (size_t)(R * D)), *dG = on_device(g, (size_t)D);
  float *dWr = on_device(wr, (size_t)(R * D)), *dY = dt_alloc_f32((size_t)(R * D), DT_OTHER);
  float *dM = dt_alloc_f32((size_t)R, DT_OTHER), *dS = dt_alloc_f32((size_t)R, DT_OTHER);
  float *dDx = dt_alloc_f32((size_t)(R * D), DT_OTHER), *dDg = dt_alloc_f32((size_t)D, DT_OTHER);
  dt_layernorm_forward(dX, dG, dY, dM, dS, R, D);
  dt_layernorm_backward(dX, dG, dWr, dM, dS, dDx, dDg, R, D, 0);
  float *gx = to_host(dDx, (size_t)(R * D)), *gg = to_host(dDg, (size_t)D);
  double *fx = malloc((size_t)(R * D) * 8), *fg = malloc((size_t)D * 8), eps = 1e-2;
  for (int64_t i = 0; i < R * D + D; i++) {
    float *p = i < R * D ? &x[i] : &g[i - R * D], keep = *p;
    *p = keep + (float)eps;
    double up = ln_loss(x, g, wr, R, D);
    *p = keep - (float)eps;
    double down = ln_loss(x, g, wr, R, D);
    *p = keep;
    double fd = (up - down) / (2 * eps);
    if (i < R * D)
      fx[i] = fd;
    else
      fg[i - R * D] = fd;
  }
  double ex = rel_err(fx, gx, R * D, 1e-3), eg = rel_err(fg, gg, D, 1e-3);
  dt_print0("finite differences: LayerNorm dx %.2e, dgain %.2e (of the largest)\n", ex, eg);
  EXPECT(ex < 2e-3 && eg < 2e-3, "LayerNorm's gradients: dx %g, dgain %g", ex, eg);
  free(x), free(g), free(wr), free(gx), free(gg), free(fx), free(fg);
  float *dev[] = {dX, dG, dWr, dY, dM, dS, dDx, dDg};
  for (size_t i = 0; i < 8; i++) dt_free(dev[i]);
}

/* GELU's tanh form in double */
static double gelu_double(double x) {
  return 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

/* GELU and its derivative against the tanh form in double, the derivative
 * by central differences (in double: the float body's own rounding, 1e-7
 * of 12, would swamp a step small enough to be exact) */
static void test_gelu(void) {
  double worst = 0, form = 0, eps = 1e-5;
  for (int i = 0; i <= 2400; i++) {
    float x = -12.0f + (float)i * 0.01f;
    double fd = (gelu_double(x + eps) - gelu_double(x - eps)) / (2 * eps);
    worst = unit_max(worst, fabs(fd - dt_gelu_grad_core(x)));
    form = unit_max(form, fabs(gelu_double(x) - dt_gelu_core(x)) / fmax(fabs(gelu_double(x)), 1));
  }
  dt_print0("finite differences: GELU's derivative %.2e; GELU against tanh in double %.2e\n", worst,
            form);
  EXPECT(worst < 1e-5, "GELU's derivative against finite differences: %g", worst);
  EXPECT(form < 1e-6, "GELU against its tanh form in double: %g", form);
}

/* The embedding in 1, 2 and 3 slices of the vocabulary: the slices'
 * outputs sum to the lookup, their gradients are the whole one's rows. */
static void test_embedding(void) {
  int64_t R = 29, D = 5, V = 12;
  float *wte = random_host((size_t)(V * D), 21, -1, 1),
        *dy = random_host((size_t)(R * D), 22, -1, 1);
  int32_t *tok = random_tokens(R, V, 23), *dT = ids_on_device(tok, R);
  double *want = calloc((size_t)(V * D), 8);
  for (int64_t r = 0; r < R; r++) /* the gradient of sum dy . wte[tok] is dy summed per token */
    for (int64_t d = 0; d < D; d++) want[tok[r] * D + d] += dy[r * D + d];
  float *dDy = on_device(dy, (size_t)(R * D)), *out = dt_alloc_f32((size_t)(R * D), DT_OTHER);
  for (int slices = 1; slices <= 3; slices++) {
    int64_t Vs = V / slices;
    float *sum = calloc((size_t)(R * D), 4), *grad = calloc((size_t)(V * D), 4);
    for (int k = 0; k < slices; k++) {
      float *dW = on_device(wte + k * Vs * D, (size_t)(Vs * D));
      float *dG = dt_alloc_f32((size_t)(Vs * D), DT_OTHER);
      dt_embed_forward(dT, R, dW, k * Vs, Vs, D, out);
      float *h = to_host(out, (size_t)(R * D));
      for (int64_t i = 0; i < R * D; i++) sum[i] += h[i];
      dt_embed_backward(dT, R, dDy, k * Vs, Vs, D, dG);
      float *gh = to_host(dG, (size_t)(Vs * D));
      memcpy(grad + k * Vs * D, gh, (size_t)(Vs * D) * 4);
      free(h), free(gh);
      dt_free(dW), dt_free(dG);
    }
    int lookup = 1;
    for (int64_t r = 0; r < R; r++)
      lookup &= memcmp(sum + r * D, wte + tok[r] * D, (size_t)D * 4) == 0;
    double err = rel_err(want, grad, V * D, 1e-3);
    EXPECT(lookup && err < 1e-6, "embedding in %d slices: lookup %d, gradient %g", slices, lookup,
           err);
    free(sum), free(grad);
  }
  free(wte), free(dy), free(tok), free(want);
  dt_free(dDy), dt_free(out), dt_free(dT);
}

/* The cross-entropy in 1, 2 and 3 slices: the all-reduced pieces (max over
 * the slices, sums summed) give the whole vocabulary's loss and gradient;
 * and the whole one against finite differences of the logits. */
static void test_cross_entropy(void) {
  int64_t R = 9, V = 12;
  float *lg = random_host((size_t)(R * V), 31, -4, 4);
  int32_t *htg = random_tokens(R, V, 32), *tg = ids_on_device(htg, R);
  float *dl = on_device(lg, (size_t)(R * V)), *dg = dt_alloc_f32((size_t)(R * V), DT_OTHER);
  double whole = dt_ce_whole(dl, R, V, tg, 1.0f, dg);
  float *g = to_host(dg, (size_t)(R * V));
  double *fd = malloc((size_t)(R * V) * 8), eps = 1e-2;
  for (int64_t i = 0; i < R * V; i++) {
    float keep = lg[i];
    lg[i] = keep + (float)eps;
    dt_copy_from_host(dl, lg, (size_t)(R * V) * 4);
    double up = dt_ce_whole(dl, R, V, tg, 1.0f, NULL);
    lg[i] = keep - (float)eps;
    dt_copy_from_host(dl, lg, (size_t)(R * V) * 4);
    fd[i] = (up - dt_ce_whole(dl, R, V, tg, 1.0f, NULL)) / (2 * eps);
    lg[i] = keep;
  }
  double efd = rel_err(fd, g, R * V, 1e-3);
  dt_print0("finite differences: cross-entropy dlogits %.2e\n", efd);
  EXPECT(efd < 2e-3, "cross-entropy's gradient against finite differences: %g", efd);
  for (int slices = 1; slices <= 3; slices++) {
    int64_t Vs = V / slices;
    float *mx = malloc((size_t)R * 4), *sum = calloc((size_t)R, 4), *tl = calloc((size_t)R, 4);
    float *piece = dt_alloc_f32((size_t)(3 * R), DT_OTHER),
          *part = dt_alloc_f32((size_t)(R * Vs), DT_OTHER);
    float *sliced = malloc((size_t)(R * V) * 4);
    for (int64_t r = 0; r < R; r++) mx[r] = -INFINITY;
    for (int pass = 0; pass < 3; pass++) /* max first: the other pieces need the global one */
      for (int k = 0; k < slices; k++) {
        float *l = malloc((size_t)(R * Vs) * 4);
        for (int64_t r = 0; r < R; r++) memcpy(l + r * Vs, lg + r * V + k * Vs, (size_t)Vs * 4);
        dt_copy_from_host(part, l, (size_t)(R * Vs) * 4);
        dt_copy_from_host(piece, mx, (size_t)R * 4);
        if (pass == 0) dt_ce_max(part, R, Vs, piece + R);
        if (pass == 1) dt_ce_sumexp(part, R, Vs, piece, piece + R);
        if (pass == 1) dt_ce_target(part, R, Vs, k * Vs, tg, piece + 2 * R);
        if (pass == 2) {
          dt_copy_from_host(piece + R, sum, (size_t)R * 4);
          dt_ce_backward(part, R, Vs, k * Vs, tg, piece, piece + R, 1.0f / (float)R, part);
          float *h = to_host(part, (size_t)(R * Vs));
          for (int64_t r = 0; r < R; r++)
            memcpy(sliced + r * V + k * Vs, h + r * Vs, (size_t)Vs * 4);
          free(h);
        }
        float *p = to_host(piece, (size_t)(3 * R));
        for (int64_t r = 0; r < R && pass == 0; r++) mx[r] = fmaxf(mx[r], p[R + r]);
        for (int64_t r = 0; r < R && pass == 1; r++) {
          sum[r] += p[R + r];
          tl[r] += p[2 * R + r];
        }
        free(p), free(l);
      }
    dt_copy_from_host(piece, mx, (size_t)R * 4);
    dt_copy_from_host(piece + R, sum, (size_t)R * 4);
    dt_copy_from_host(piece + 2 * R, tl, (size_t)R * 4);
    double loss = dt_ce_loss(piece, piece + R, piece + 2 * R, R) / (double)R;
    double *gd = malloc((size_t)(R * V) * 8);
    for (int64_t i = 0; i < R * V; i++) gd[i] = g[i];
    double eg = rel_err(gd, sliced, R * V, 1e-3);
    EXPECT(fabs(loss - whole) < 1e-6 * whole && eg < 1e-6,
           "%d slices: loss %.9g (whole %.9g), gradient %g", slices, loss, whole, eg);
    free(mx), free(sum), free(tl), free(sliced), free(gd);
    dt_free(piece), dt_free(part);
  }
  free(lg), free(g), free(fd), free(htg);
  dt_free(dl), dt_free(dg), dt_free(tg);
}

/* --------------------------------------------------------- the whole model */
/* The model's weights for a gradient check: larger than nanoGPT's 0.02, so
 * that every gradient stands above the loss's rounding (host) */
static void test_weights(const dt_train_config *c, float *w) {
  for (int64_t t = 0; t < dt_model_tensors(c); t++) {
    dt_tensor x = dt_model_tensor(c, t);
    for (int64_t i = 0; i < x.rows * x.cols; i++) {
      float u = dt_rng_uniform(46, (uint64_t)t, (uint64_t)i);
      w[x.at + i] = x.plain ? 0.5f + u : 0.6f * (u - 0.5f);
    }
  }
}

/* The central difference of the loss in weight i, Richardson-extrapolated
 * from steps h and h/2: its h^2 error cancels, the loss's rounding stays
 * small against h/2. The weights are the backend's (dw), as the forward
 * reads them; each nudge is one float copied in. */
static double gpt_slope(const dt_train_config *c, float *dw, float keep, int64_t i,
                        const int32_t *in, const int32_t *tg, dt_gpt_acts *a, double h) {
  double d[2];
  for (int k = 0; k < 2; k++) {
    double step = k ? h / 2 : h;
    float up_w = keep + (float)step, down_w = keep - (float)step;
    dt_copy_from_host(dw + i, &up_w, sizeof up_w);
    double up = dt_gpt_forward(c, dw, in, tg, c->seq, a);
    dt_copy_from_host(dw + i, &down_w, sizeof down_w);
    d[k] = (up - dt_gpt_forward(c, dw, in, tg, c->seq, a)) / (2 * step);
  }
  dt_copy_from_host(dw + i, &keep, sizeof keep);
  return (4 * d[1] - d[0]) / 3;
}

/* The whole GPT's forward and backward on the backend (the GPU's on cuda),
 * tiled and materialised attention against each other and every weight's
 * gradient against finite differences */
static void test_gpt_gradients(void) {
  dt_train_config c = tiny(2, 8, 2, 6, 2);
  int64_t n = dt_model_size(&c), B = c.batch, S = c.seq;
  float *w = malloc((size_t)n * 4), *g[2];
  int32_t *win = malloc((size_t)(B * (S + 1)) * 4), *in = malloc((size_t)(B * S) * 4);
  int32_t *tg = malloc((size_t)(B * S) * 4);
  test_weights(&c, w);
  float *dw = on_device(w, (size_t)n);
  dt_text_batch(&c, 3, 0, B, win);
  dt_gpt_split_windows(win, B, S, in, tg);
  dt_gpt_acts *a[2] = {dt_gpt_acts_new(&c, B, 0), dt_gpt_acts_new(&c, B, 1)};
  double loss[2];
  for (int k = 0; k < 2; k++) {
    float *dg = dt_alloc_f32((size_t)n, DT_OTHER); /* zeroed: backward adds to it */
    loss[k] = dt_gpt_forward(&c, dw, in, tg, c.seq, a[k]);
    dt_gpt_backward(&c, dw, a[k], 1.0, dg);
    g[k] = to_host(dg, (size_t)n);
    dt_free(dg);
  }
  double *gd = malloc((size_t)n * 8), apart = 0, worst = 0;
  for (int64_t i = 0; i < n; i++) gd[i] = g[1][i];
  for (int64_t t = 0; t < dt_model_tensors(&c); t++) {
    dt_tensor x = dt_model_tensor(&c, t);
    apart = unit_max(apart, rel_err(gd + x.at, g[0] + x.at, x.rows * x.cols, 1e-4));
  }
  EXPECT(fabs(loss[0] - loss[1]) < 1e-6 * loss[1] && apart < 1e-4,
         "tiled and materialised attention: loss %.9g vs %.9g, gradients %g apart", loss[0],
         loss[1], apart);
  char worst_name[96] = "";
  for (int64_t t = 0; t < dt_model_tensors(&c); t++) {
    dt_tensor x = dt_model_tensor(&c, t);
    for (int64_t i = 0; i < x.rows * x.cols; i++)
      gd[x.at + i] = gpt_slope(&c, dw, w[x.at + i], x.at + i, in, tg, a[1], 1e-2);
    double e = rel_err(gd + x.at, g[1] + x.at, x.rows * x.cols, 1e-4);
    if (e > worst) snprintf(worst_name, sizeof worst_name, "%s", x.name);
    worst = unit_max(worst, e);
  }
  dt_print0("finite differences: the whole GPT (L=2 D=8 A=2 S=6 V=%lld, %lld weights, every "
            "tensor) %.2e of the tensor's largest, worst %s; tiled vs materialised %.2e\n",
            (long long)c.vocab, (long long)n, worst, worst_name, apart);
  EXPECT(worst < 2e-3, "the GPT's gradients against finite differences: %g (%s)", worst,
         worst_name);
  for (int k = 0; k < 2; k++) {
    dt_gpt_acts_free(a[k]);
    free(g[k]);
  }
  dt_free(dw);
  free(w), free(win), free(in), free(tg), free(gd);
}

/* nanoGPT's initialisation, keyed: a shard drawn alone is the whole's */
static void test_init(void) {
  dt_train_config c = tiny(3, 32, 4, 16, 2);
  int64_t n = dt_model_size(&c);
  float *w = malloc((size_t)n * 4), *part = malloc(1000 * 4);
  dt_initial_weights(&c, w, 0, n);
  dt_initial_weights(&c, part, 1234, 1000);
  EXPECT(memcmp(part, w + 1234, 1000 * 4) == 0, "a shard of the initial weights is the whole's");
  for (int64_t t = 0; t < dt_model_tensors(&c); t++) {
    dt_tensor x = dt_model_tensor(&c, t);
    double s = 0, s2 = 0, m = (double)(x.rows * x.cols);
    for (int64_t i = 0; i < x.rows * x.cols; i++) {
      s += w[x.at + i];
      s2 += (double)w[x.at + i] * w[x.at + i];
    }
    double want = x.plain                                        ? 0
                  : strstr(x.name, "wo") || strstr(x.name, "w2") ? 0.02 / sqrt(6.0)
                                                                 : 0.02;
    double sd = sqrt(s2 / m - (s / m) * (s / m));
    if (x.plain)
      EXPECT(s == m && sd == 0, "%s: ones", x.name);
    else
      EXPECT(fabs(sd / want - 1) < 0.1 && fabs(s / m) < 0.2 * want, "%s: std %g, want %g, mean %g",
             x.name, sd, want, s / m);
  }
  free(w), free(part);
}

/* The schedule (warm-up, cosine to a tenth), and AdamW leaving the gains
 * undecayed: one step of zero gradients moves only the decayed weights. */
static void test_schedule_and_decay(void) {
  dt_train_config c = tiny(1, 8, 2, 6, 2);
  c.steps = 100;
  c.decay_steps = 100;
  c.warmup = 10;
  c.lr = 1e-3;
  EXPECT(fabs(dt_lr_at(&c, 0) - 1e-3 / 11) < 1e-12 && fabs(dt_lr_at(&c, 9) - 1e-2 / 11) < 1e-12 &&
             fabs(dt_lr_at(&c, 10) - 1e-3) < 1e-12 && fabs(dt_lr_at(&c, 55) - 5.5e-4) < 1e-12 &&
             dt_lr_at(&c, 99) > 1e-4 && dt_lr_at(&c, 99) < 1.01e-4,
         "lr: %g %g %g %g %g", dt_lr_at(&c, 0), dt_lr_at(&c, 9), dt_lr_at(&c, 10), dt_lr_at(&c, 55),
         dt_lr_at(&c, 99));
  int64_t n = dt_model_size(&c);
  float *w = malloc((size_t)n * 4), *w0 = malloc((size_t)n * 4);
  dt_initial_weights(&c, w0, 0, n);
  float *dw = on_device(w0, (size_t)n), *zero = dt_alloc_f32((size_t)n, DT_OTHER);
  float *m = dt_alloc_f32((size_t)n, DT_OTHER), *v = dt_alloc_f32((size_t)n, DT_OTHER);
  dt_spans plain = dt_model_plain(&c);
  dt_optimizer_step(&c, dw, zero, m, v, (size_t)n, &plain, (dt_step_scalars){1, 1.0f, 0.5f});
  dt_copy_to_host(w, dw, (size_t)n * 4);
  int ok = plain.n == 3; /* ln1, ln2 of the one layer, ln_f */
  for (int64_t t = 0; t < dt_model_tensors(&c); t++) {
    dt_tensor x = dt_model_tensor(&c, t);
    float f = x.plain ? 1.0f : 1.0f - 0.5f * (float)c.weight_decay;
    for (int64_t i = 0; i < x.rows * x.cols; i++) ok &= w[x.at + i] == w0[x.at + i] * f;
  }
  EXPECT(ok, "weight decay on matrices and embeddings, none on the %d gain spans", plain.n);
  free(plain.at), free(w), free(w0);
  dt_free(dw), dt_free(zero), dt_free(m), dt_free(v);
}

/* ------------------------------------------------------------------- text */
static void test_text(void) {
  dt_train_config c = tiny(1, 8, 2, 16, 6);
  const dt_text *t = c.corpus;
  EXPECT(t->vocab.used > 40 && c.vocab == t->vocab.used && t->train == t->n * 9 / 10,
         "README.md: %lld characters, V %lld, %lld tokens", (long long)t->vocab.used,
         (long long)c.vocab, (long long)t->n);
  int32_t whole[6 * 17], part[2 * 17];
  dt_text_batch(&c, 7, 0, 6, whole);
  dt_text_batch(&c, 7, 3, 2, part);
  EXPECT(memcmp(part, whole + 3 * 17, sizeof part) == 0, "a rank's windows are the step's");
  dt_text_batch(&c, 8, 0, 2, part);
  EXPECT(memcmp(part, whole, sizeof part) != 0, "another step, other windows");
  int32_t ev[6 * 17], ev2[6 * 17];
  dt_text_eval_batch(&c, 1, 2, ev);
  dt_text_eval_batch(&c, 1, 2, ev2);
  int in_val = memcmp(ev, ev2, sizeof ev) == 0;
  for (int b = 0; b < 6; b++) { /* each validation window lies in the last 10% */
    int found = 0;
    for (int64_t at = t->train; at + 17 <= t->n && !found; at++)
      found = memcmp(ev + b * 17, t->ids + at, sizeof *ev * 17) == 0;
    in_val &= found;
  }
  EXPECT(in_val, "validation batches are fixed, from the last 10%% of the text");
  char *json = dt_vocab_json(&t->vocab), err[160] = "";
  dt_vocab back = {0};
  EXPECT(dt_vocab_parse(&back, json, strlen(json) + 1, err, sizeof err) == -1,
         "a vocabulary without its closing quote is refused");
  size_t jl = strlen(json);
  char *quoted = malloc(jl + 2);
  memcpy(quoted, json, jl);
  quoted[jl] = '"';
  quoted[jl + 1] = '\0';
  EXPECT(dt_vocab_parse(&back, quoted, jl + 1, err, sizeof err) == 0 &&
             back.used == t->vocab.used &&
             memcmp(back.chars, t->vocab.chars, (size_t)back.used * 4) == 0,
         "the vocabulary's JSON reads back: %s", err);
  EXPECT(dt_vocab_parse(&back, "ba\"", 3, err, sizeof err) == -1 && strstr(err, "ascending"),
         "an unsorted vocabulary is refused: %s", err);
  int32_t ids[64];
  int64_t k = dt_vocab_encode(&t->vocab, "make test", ids, 64, err, sizeof err);
  char *text = dt_vocab_decode(&t->vocab, ids, k);
  EXPECT(k == 9 && strcmp(text, "make test") == 0, "encode and decode: '%s'", text);
  EXPECT(dt_vocab_encode(&t->vocab, "\xe2\x88\x91", ids, 64, err, sizeof err) == -1 &&
             strstr(err, "U+2211"),
         "a character the text lacks: %s", err);
  free(json), free(quoted), free(back.chars), free(text);
}

/* ------------------------------------------ reference, files, sampling */
static void test_reference_file_sample(void) {
  dt_train_config c = tiny(2, 32, 4, 32, 8);
  c.steps = 60;
  c.decay_steps = 60;
  c.lr = 1e-2;
  c.warmup = 4;
  int64_t n = dt_model_size(&c);
  double *loss = malloc((size_t)c.steps * 8);
  float *w = malloc((size_t)n * 4), *back = malloc((size_t)n * 4), *w0 = malloc((size_t)n * 4);
  dt_reference_run ref = {.losses = loss, .weights = w, .initial = w0};
  dt_reference_train(&c, &ref);
  dt_print0("reference: a GPT of %lld weights on README.md, loss %.4f -> %.4f in %lld steps\n",
            (long long)n, loss[0], loss[c.steps - 1], (long long)c.steps);
  EXPECT(loss[0] > 4 && loss[c.steps - 1] < 0.8 * loss[0], "the loss falls: %g -> %g", loss[0],
         loss[c.steps - 1]);
  double eval[2];
  dt_gpt_evaluate(&c, w, eval);
  EXPECT(eval[0] < loss[0] && eval[1] < loss[0], "evaluation: train %g, validation %g", eval[0],
         eval[1]);
  char path[64], err[600] = "";
  snprintf(path, sizeof path, "build/test-gpt-%d.safetensors", dt_rank());
  dt_save_model(path, &c, c.steps, w);
  dt_load_weights_host(path, &c, back, err, sizeof err);
  EXPECT(!err[0] && memcmp(w, back, (size_t)n * 4) == 0,
         "the nanoGPT-named file reads back bit "
         "for bit: %s",
         err);
  dt_train_config other = c;
  other.dim = 16;
  other.heads = 2;
  dt_load_weights_host(path, &other, back, err, sizeof err);
  EXPECT(strstr(err, "transformer.wte.weight\" has shape [") != NULL, "another config: %s", err);
  remove(path);
  char *a = dt_gpt_sample(&c, &c.corpus->vocab, w, "The ", 40, 1.0, 5, 7);
  char *b = dt_gpt_sample(&c, &c.corpus->vocab, w, "The ", 40, 1.0, 5, 7);
  char *d = dt_gpt_sample(&c, &c.corpus->vocab, w, "The ", 40, 1.0, 5, 8);
  dt_print0("sample: \"%s\"\n", a);
  EXPECT(strncmp(a, "The ", 4) == 0 && strlen(a) >= 44 && strcmp(a, b) == 0 && strcmp(a, d) != 0,
         "sampling is keyed by its seed: '%s' '%s'", a, d);
  free(a), free(b), free(d), free(loss), free(w), free(back), free(w0);
}

int main(int argc, char **argv) {
  dt_lesson lesson = {"test_gpt", "unit tests of the GPT", 1};
  dt_init(&argc, &argv, &lesson, NULL);
  test_bits();
  test_layernorm_fd();
  test_gelu();
  test_embedding();
  test_cross_entropy();
  test_init();
  test_schedule_and_decay();
  test_text();
  test_gpt_gradients();
  test_reference_file_sample();
  return unit_verdict();
}
