/* test_attention.c: lesson 11's tiled attention (common/train/attention.c)
 * against the plainest loop, one query row and one score at a time in
 * double: sizes that leave partial tiles, blocks with n != nk, causal and
 * not, several head widths; forward (o, lse), delta, and backward (dq, dk,
 * dv added to what they hold); and with 16-bit GEMM inputs (--precision),
 * within their rounding. The blocks run on the backend's memory (the cuda
 * backend's kernels where built so); delta and the ring's merge beside
 * attn_core.h's bodies, run here on the host: the same bits. The
 * yardsticks' materialised attention (reference_attn.c's, over the same
 * bodies as the lessons) against the plain loops too, not only the bodies;
 * and 11's whole transformer (that yardstick), one SGD step against central
 * differences. All on the backend's memory: the GPU's under cuda. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn_core.h"
#include "train_internal.h"
#include "unit.h"

static float *random_rows(int64_t n, uint64_t stream, float lo, float hi) {
  float *x = malloc((size_t)n * 4);
  for (int64_t i = 0; i < n; i++)
    x[i] = lo + (hi - lo) * (float)dt_rng_uniform(7, stream, (uint64_t)i);
  return x;
}

/* The math of train.h's attention, row by row: o and lse, then dq, dk, dv
 * added to from dout (probabilities recomputed from lse, as the blocks do). */
static void plain(const float *q, const float *k, const float *v, const float *dout, int64_t n,
                  int64_t nk, int64_t W, int64_t heads, int causal, double *o, double *lse,
                  double *dq, double *dk, double *dv) {
  int64_t dh = W / heads;
  double scale = 1 / sqrt((double)dh), *s = malloc((size_t)nk * sizeof *s);
  for (int64_t i = 0; i < n; i++)
    for (int64_t h = 0; h < heads; h++) {
      int64_t see = causal ? i + 1 : nk, at = i * W + h * dh;
      double mx = -INFINITY, sum = 0, delta = 0;
      for (int64_t j = 0; j < see; j++) {
        s[j] = 0;
        for (int64_t d = 0; d < dh; d++) s[j] += (double)q[at + d] * k[j * W + h * dh + d];
        mx = unit_max(mx, s[j] *= scale);
      }
      for (int64_t d = 0; d < dh; d++) o[at + d] = 0;
      for (int64_t j = 0; j < see; j++) {
        sum += exp(s[j] - mx);
        for (int64_t d = 0; d < dh; d++) o[at + d] += exp(s[j] - mx) * v[j * W + h * dh + d];
      }
      for (int64_t d = 0; d < dh; d++) delta += dout[at + d] * (o[at + d] /= sum);
      lse[i * heads + h] = mx + log(sum);
      for (int64_t j = 0; j < see; j++) {
        double p = exp(s[j] - lse[i * heads + h]), dp = 0;
        for (int64_t d = 0; d < dh; d++) dp += (double)dout[at + d] * v[j * W + h * dh + d];
        double ds = p * (dp - delta) * scale;
        for (int64_t d = 0; d < dh; d++) {
          dq[at + d] += ds * k[j * W + h * dh + d];
          dk[j * W + h * dh + d] += ds * q[at + d];
          dv[j * W + h * dh + d] += p * dout[at + d];
        }
      }
    }
  free(s);
}

/* max |got - want| over max |want|; a value not finite is off without
 * bound. */
static double off(const float *got, const double *want, int64_t n) {
  double worst = 0, size = 1e-30;
  for (int64_t i = 0; i < n; i++) {
    if (!isfinite(got[i])) return INFINITY;
    worst = unit_max(worst, fabs(got[i] - want[i]));
    size = unit_max(size, fabs(want[i]));
  }
  return worst / size;
}

/* The backend's copy of n host floats (device memory on the cuda backend),
 * and back into the host array, the backend's freed. */
static float *dev(const float *host, int64_t n) {
  float *d = dt_alloc_f32((size_t)n, DT_OTHER);
  dt_copy_from_host(d, host, (size_t)n * 4);
  return d;
}
static void back(float *host, float *d, int64_t n) {
  dt_copy_to_host(host, d, (size_t)n * 4);
  dt_free(d);
}

/* The blocks on the backend's memory: forward, delta, backward. */
static void run_block(float *q, float *k, float *v, float *dout, int64_t n, int64_t nk, int64_t W,
                      int64_t heads, int causal, float *o, float *lse, float *dq, float *dk,
                      float *dv, int64_t fb[2]) {
  int64_t A = n * heads;
  float *Q = dev(q, n * W), *K = dev(k, nk * W), *V = dev(v, nk * W), *G = dev(dout, n * W);
  float *O = dev(o, n * W), *L = dev(lse, A), *DQ = dev(dq, n * W), *DK = dev(dk, nk * W);
  float *DV = dev(dv, nk * W), *DE = dt_alloc_f32((size_t)A, DT_OTHER);
  fb[0] = dt_attn_block_forward(Q, K, V, n, nk, W, heads, causal, O, L);
  dt_attn_delta(G, O, n, W, heads, DE);
  fb[1] = dt_attn_block_backward(Q, K, V, G, DE, L, n, nk, W, heads, causal, DQ, DK, DV);
  back(o, O, n * W);
  back(lse, L, A);
  back(dq, DQ, n * W);
  back(dk, DK, nk * W);
  back(dv, DV, nk * W);
  float *all[] = {Q, K, V, G, DE};
  for (int i = 0; i < 5; i++) dt_free(all[i]);
}

static void test_block(int64_t n, int64_t nk, int causal, int64_t W, int64_t heads, dt_dtype t,
                       double bound) {
  float *q = random_rows(n * W, 1, -2, 2), *k = random_rows(nk * W, 2, -2, 2);
  float *v = random_rows(nk * W, 3, -1, 1), *dout = random_rows(n * W, 4, -1, 1);
  float *dq = random_rows(n * W, 5, -1, 1), *dk = random_rows(nk * W, 6, -1, 1);
  float *dv = random_rows(nk * W, 7, -1, 1), *o = calloc((size_t)(n * W), 4);
  float *lse = calloc((size_t)(n * heads), 4);
  double *wo = calloc((size_t)(n * W), 8), *wl = calloc((size_t)(n * heads), 8);
  double *wq = malloc((size_t)(n * W) * 8), *wk = malloc((size_t)(nk * W) * 8);
  double *wv = malloc((size_t)(nk * W) * 8);
  for (int64_t i = 0; i < n * W; i++) wq[i] = dq[i];
  for (int64_t i = 0; i < nk * W; i++) {
    wk[i] = dk[i];
    wv[i] = dv[i];
  }
  plain(q, k, v, dout, n, nk, W, heads, causal, wo, wl, wq, wk, wv);
  dt_set_matmul_inputs(t);
  int64_t fb[2];
  run_block(q, k, v, dout, n, nk, W, heads, causal, o, lse, dq, dk, dv, fb);
  int64_t f = fb[0], b = fb[1];
  dt_set_matmul_inputs(DT_F32);
  int64_t scores = causal ? n * (n + 1) / 2 : n * nk;
  const char *name = t == DT_F32 ? "fp32" : t == DT_BF16 ? "bf16" : "fp16";
  EXPECT(f == scores && b == scores, "n %lld nk %lld causal %d: %lld and %lld scores, not %lld",
         (long long)n, (long long)nk, causal, (long long)f, (long long)b, (long long)scores);
  double e[5] = {off(o, wo, n * W), off(lse, wl, n * heads), off(dq, wq, n * W),
                 off(dk, wk, nk * W), off(dv, wv, nk * W)};
  const char *what[5] = {"o", "lse", "dq", "dk", "dv"};
  for (int i = 0; i < 5; i++)
    EXPECT(e[i] <= bound,
           "%s n %lld nk %lld causal %d W %lld heads %lld: %s off by %.2e of its size", name,
           (long long)n, (long long)nk, causal, (long long)W, (long long)heads, what[i], e[i]);
  void *all[] = {q, k, v, dout, dq, dk, dv, o, lse, wo, wl, wq, wk, wv};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) free(all[i]);
}

/* max |a - b| over max |b|, both floats */
static double off_f(const float *a, const float *b, int64_t n) {
  double worst = 0, size = 1e-30;
  for (int64_t i = 0; i < n; i++) {
    if (!isfinite(a[i])) return INFINITY;
    worst = unit_max(worst, fabs((double)a[i] - b[i]));
    size = unit_max(size, fabs((double)b[i]));
  }
  return worst / size;
}

/* attn_core.h's bodies against the backend's delta and merge: the same
 * bits (delta has no libm call; the merge's expf and logf are CUDA's on a
 * GPU, within a few ulp of glibc's). And the merge's meaning: a block of
 * keys split in two and merged, from an empty start, is the block whole. */
static void test_bodies(int64_t n, int64_t nk, int64_t ka, int64_t W, int64_t heads) {
  int64_t dh = W / heads, A = n * heads, gpu = dt_device() >= 0;
  float *q = random_rows(n * W, 11, -2, 2), *k = random_rows(nk * W, 12, -2, 2);
  float *v = random_rows(nk * W, 13, -1, 1), *g = random_rows(n * W, 14, -1, 1);
  float *o[3], *lse[3], *want = malloc((size_t)A * 4), *got = malloc((size_t)A * 4);
  for (int b = 0; b < 3; b++) { /* keys [0, ka), [ka, nk), [0, nk) */
    int64_t k0 = b == 1 ? ka : 0, kn = b == 0 ? ka : nk - k0;
    float *Q = dev(q, n * W), *K = dev(k + k0 * W, kn * W), *V = dev(v + k0 * W, kn * W);
    float *O = dt_alloc_f32((size_t)(n * W), DT_OTHER), *L = dt_alloc_f32((size_t)A, DT_OTHER);
    dt_attn_block_forward(Q, K, V, n, kn, W, heads, 0, O, L);
    o[b] = malloc((size_t)(n * W) * 4);
    lse[b] = malloc((size_t)A * 4);
    back(o[b], O, n * W);
    back(lse[b], L, A);
    float *all[] = {Q, K, V};
    for (int i = 0; i < 3; i++) dt_free(all[i]);
  }
  for (int64_t i = 0; i < A; i++) want[i] = dt_attn_delta_row(g + i * dh, o[2] + i * dh, dh);
  float *G = dev(g, n * W), *O2 = dev(o[2], n * W), *DE = dt_alloc_f32((size_t)A, DT_OTHER);
  dt_attn_delta(G, O2, n, W, heads, DE);
  back(got, DE, A);
  EXPECT(!memcmp(want, got, (size_t)A * 4), "delta: the body's bits");
  /* the merge: from empty, block 0 then block 1, beside the bodies on the host */
  float *mo = malloc((size_t)(n * W) * 4), *ml = malloc((size_t)A * 4);
  float *O = dt_alloc_f32((size_t)(n * W), DT_OTHER), *L = dt_alloc_f32((size_t)A, DT_OTHER);
  dt_attn_start(O, L, n, W, heads);
  for (int b = 0; b < 2; b++) {
    float *OB = dev(o[b], n * W), *LB = dev(lse[b], A);
    dt_attn_merge(O, L, OB, LB, n, W, heads);
    dt_free(OB);
    dt_free(LB);
  }
  back(mo, O, n * W);
  back(ml, L, A);
  memcpy(want, lse[0], (size_t)A * 4);
  float *ho = o[0]; /* the first block merged into an empty start is itself */
  for (int64_t i = 0; i < A; i++)
    want[i] = dt_attn_merge_row(ho + i * dh, want[i], o[1] + i * dh, lse[1][i], dh);
  double e = fmax(off_f(mo, ho, n * W), off_f(ml, want, A));
  EXPECT(gpu ? e <= 1e-6 : e == 0, "merge: the body's %s (off by %.2e)", gpu ? "values" : "bits",
         e);
  e = fmax(off_f(mo, o[2], n * W), off_f(ml, lse[2], A));
  EXPECT(e <= 5e-6, "two blocks merged = one block of all %lld keys: off by %.2e", (long long)nk,
         e);
  void *host[] = {q, k, v, g, want, got, mo, ml, o[0], o[1], o[2], lse[0], lse[1], lse[2]};
  for (size_t i = 0; i < sizeof host / sizeof *host; i++) free(host[i]);
  dt_free(G);
  dt_free(O2);
}

/* The yardsticks' softmax of a head's S x S scores and its backward (the
 * backend's) beside attn_core.h's rows run here: the same values (libm's
 * expf on the cpu, CUDA's on a GPU: bits on the cpu, a few ulp apart there). */
static void test_softmax_rows(int64_t S) {
  float *s = random_rows(S * S, 21, -4, 4), *dp = random_rows(S * S, 22, -1, 1);
  float *p = malloc((size_t)(S * S) * 4), *ds = malloc((size_t)(S * S) * 4);
  float *P = dev(s, S * S), *DP = dev(dp, S * S);
  dt_softmax_causal(P, S, 0.25f);
  dt_softmax_causal_backward(P, DP, S, 0.25f);
  back(p, P, S * S);
  back(ds, DP, S * S);
  for (int64_t i = 0; i < S; i++) {
    dt_attn_causal_softmax_row(s + i * S, i, S, 0.25f);
    dt_attn_softmax_grad_row(s + i * S, dp + i * S, S, 0.25f);
  }
  double e = fmax(off_f(p, s, S * S), off_f(ds, dp, S * S));
  int gpu = dt_device() >= 0;
  EXPECT(gpu ? e <= 1e-6 : e == 0,
         "the materialised softmax and its backward: the bodies' %s "
         "(off by %.2e)",
         gpu ? "values" : "bits", e);
  void *host[] = {s, dp, p, ds};
  for (int i = 0; i < 4; i++) free(host[i]);
}

/* The yardsticks' attention (dt_attend_materialised, reference_attn.c's,
 * its softmax attn_core.h's rows, the lessons' bodies) held to plain loops
 * in double, not to those rows: the causal softmax of a head's S x S
 * scores and its backward, dS = P (dP - rowsum(P dP)) scale; and a
 * sequence's heads, forward (o) and backward (dq, dk, dv), against plain(). */
static void test_materialised(int64_t S, int64_t D, int64_t heads) {
  float scale = 0.3f, *s = random_rows(S * S, 31, -4, 4), *dp = random_rows(S * S, 32, -1, 1);
  double *wp = malloc((size_t)(S * S) * 8), *wd = malloc((size_t)(S * S) * 8);
  for (int64_t i = 0; i < S; i++) {
    double mx = -INFINITY, sum = 0, dot = 0, *p = wp + i * S;
    for (int64_t j = 0; j <= i; j++) mx = unit_max(mx, (double)s[i * S + j] * scale);
    for (int64_t j = 0; j < S; j++)
      sum += p[j] = j <= i ? exp((double)s[i * S + j] * scale - mx) : 0;
    for (int64_t j = 0; j < S; j++) dot += (p[j] /= sum) * dp[i * S + j];
    for (int64_t j = 0; j < S; j++) wd[i * S + j] = p[j] * (dp[i * S + j] - dot) * scale;
  }
  float *P = dev(s, S * S), *DP = dev(dp, S * S);
  dt_softmax_causal(P, S, scale);
  back(s, P, S * S);
  P = dev(s, S * S); /* the backward from the library's probabilities */
  dt_softmax_causal_backward(P, DP, S, scale);
  back(dp, DP, S * S);
  dt_free(P);
  double es = off(s, wp, S * S), eg = off(dp, wd, S * S);
  EXPECT(es <= 1e-6 && eg <= 1e-6,
         "the materialised causal softmax (S %lld, scale %g) against plain loops in double: "
         "probabilities off by %.2e, the backward by %.2e of its size",
         (long long)S, scale, es, eg);
  float *q = random_rows(S * D, 33, -2, 2), *k = random_rows(S * D, 34, -2, 2);
  float *v = random_rows(S * D, 35, -1, 1), *dout = random_rows(S * D, 36, -1, 1);
  double *wo = calloc((size_t)(S * D), 8), *wl = calloc((size_t)(S * heads), 8);
  double *wq = calloc((size_t)(S * D), 8), *wk = calloc((size_t)(S * D), 8);
  double *wv = calloc((size_t)(S * D), 8);
  plain(q, k, v, dout, S, S, D, heads, 1, wo, wl, wq, wk, wv);
  dt_heads_scratch hs;
  dt_heads_scratch_init(&hs, S, D, heads);
  float *Q = dev(q, S * D), *K = dev(k, S * D), *V = dev(v, S * D), *G = dev(dout, S * D);
  float *PR = dt_alloc_f32((size_t)(heads * S * S), DT_OTHER);
  float *O = dt_alloc_f32((size_t)(S * D), DT_OTHER), *DQ = dt_alloc_f32((size_t)(S * D), DT_OTHER);
  float *DK = dt_alloc_f32((size_t)(S * D), DT_OTHER),
        *DV = dt_alloc_f32((size_t)(S * D), DT_OTHER);
  dt_attend_materialised(&hs, Q, K, V, PR, O);
  dt_attend_materialised_backward(&hs, Q, K, V, PR, G, DQ, DK, DV);
  float *o = malloc((size_t)(S * D) * 4), *dq = malloc((size_t)(S * D) * 4);
  float *dk = malloc((size_t)(S * D) * 4), *dv = malloc((size_t)(S * D) * 4);
  back(o, O, S * D);
  back(dq, DQ, S * D);
  back(dk, DK, S * D);
  back(dv, DV, S * D);
  double e[4] = {off(o, wo, S * D), off(dq, wq, S * D), off(dk, wk, S * D), off(dv, wv, S * D)};
  EXPECT(e[0] <= 5e-6 && e[1] <= 5e-6 && e[2] <= 5e-6 && e[3] <= 5e-6,
         "the yardsticks' attention (S %lld, D %lld, %lld heads) against plain loops in double: "
         "o off by %.2e, dq %.2e, dk %.2e, dv %.2e of their sizes",
         (long long)S, (long long)D, (long long)heads, e[0], e[1], e[2], e[3]);
  if (getenv("DT_TEST_VERBOSE"))
    printf("materialised S %lld: softmax %.2e backward %.2e, o %.2e dq %.2e dk %.2e dv %.2e\n",
           (long long)S, es, eg, e[0], e[1], e[2], e[3]);
  dt_heads_scratch_free(&hs);
  float *d[] = {Q, K, V, G, PR};
  for (int i = 0; i < 5; i++) dt_free(d[i]);
  void *host[] = {s, dp, wp, wd, q, k, v, dout, wo, wl, wq, wk, wv, o, dq, dk, dv};
  for (size_t i = 0; i < sizeof host / sizeof *host; i++) free(host[i]);
}

/* The first step's loss of 11's transformer, the whole model trained in one
 * process (reference_attn.c: the yardstick of 11 and 12, on the backend's
 * memory, the GPU's under cuda), from the weights in file `path` */
static double first_loss(dt_train_config c, const char *path, float *after) {
  double loss = 0;
  float *w = malloc((size_t)dt_model_size(&c) * 4);
  c.load = path;
  dt_reference_run ref = {.losses = &loss, .weights = after ? after : w};
  dt_reference_train(&c, &ref);
  free(w);
  return loss;
}

/* The whole transformer's forward and backward: one SGD step moves each
 * weight by -lr x its gradient, which central differences of the first
 * step's loss give too, each from weights nudged in a file (--load's way
 * in); three weights of each of the six tensors. */
static void test_transformer(void) {
  dt_train_config c = DT_TRAIN_DEFAULTS;
  c.model = DT_TRANSFORMER;
  c.layers = 1, c.dim = 4, c.hidden = 8, c.heads = 2, c.seq = 4, c.batch = 2, c.steps = 1;
  c.lr = 0.05;
  dt_train_resolve(&c);
  int64_t n = dt_model_size(&c);
  float *w0 = malloc((size_t)n * 4), *w1 = malloc((size_t)n * 4), *nudged = malloc((size_t)n * 4);
  dt_initial_weights(&c, w0, 0, n);
  char path[64];
  snprintf(path, sizeof path, "build/test-transformer-%d.safetensors", dt_rank());
  dt_save_model(path, &c, 0, w0);
  double loss = first_loss(c, path, w1), worst = 0, largest = 1e-3, h = 1e-2;
  for (int64_t t = 0; t < dt_model_tensors(&c); t++)
    for (int64_t j = 0; j < 3; j++) {
      dt_tensor x = dt_model_tensor(&c, t);
      int64_t i = x.at + j * (x.rows * x.cols) / 3;
      double d[2];
      for (int k = 0; k < 2; k++) { /* Richardson: steps h and h/2 */
        double step = k ? h / 2 : h, f[2];
        for (int side = 0; side < 2; side++) {
          memcpy(nudged, w0, (size_t)n * 4);
          nudged[i] += (float)(side ? -step : step);
          dt_save_model(path, &c, 0, nudged);
          f[side] = first_loss(c, path, NULL);
        }
        d[k] = (f[0] - f[1]) / (2 * step);
      }
      double fd = (4 * d[1] - d[0]) / 3, g = (w0[i] - w1[i]) / c.lr;
      largest = unit_max(largest, fabs(fd));
      worst = unit_max(worst, fabs(fd - g));
    }
  remove(path);
  dt_print0("the transformer's whole model (L=1 D=4 H=8 A=2 S=4 B=2, %lld weights): loss %.6f, "
            "SGD's step against central differences %.2e of the largest gradient\n",
            (long long)n, loss, worst / largest);
  EXPECT(loss > 0 && worst < 1e-2 * largest,
         "the transformer's gradient (one SGD step) against central differences: %g of %g", worst,
         largest);
  free(w0), free(w1), free(nudged);
}

int main(int argc, char **argv) {
  dt_lesson lesson = {"test_attention", "unit tests of the tiled attention", 1};
  dt_init(&argc, &argv, &lesson, NULL);
  int64_t T = DT_ATTN_TILE,
          cases[][5] = {{2 * T + 44, 2 * T + 44, 1, 32, 4}, /* n, nk, causal, W, A */
                        {T + 2, 2 * T + 1, 0, 24, 2},
                        {5, 5, 1, 6, 3},
                        {T, T, 1, 32, 4},
                        {1, 200, 0, 16, 1},
                        {T + 1, 1, 0, 8, 2}};
  for (int c = 0; c < 6; c++) {
    int64_t *x = cases[c];
    test_block(x[0], x[1], (int)x[2], x[3], x[4], DT_F32, 5e-6);
    if (c < 2) { /* inputs rounded to 16 bits: off by their rounding, not more */
      test_block(x[0], x[1], (int)x[2], x[3], x[4], DT_BF16, 2e-2);
      test_block(x[0], x[1], (int)x[2], x[3], x[4], DT_F16, 3e-3);
    }
  }
  test_bodies(T + 3, 2 * T + 5, T + 9, 32, 4);
  test_bodies(7, 9, 1, 6, 3);
  test_softmax_rows(37);
  test_materialised(37, 24, 3);
  test_materialised(64, 32, 4);
  test_transformer();
  double rate = dt_attn_gemm_rate(8);
  EXPECT(rate > 0 && isfinite(rate), "sgemm's rate at the tiles' shapes: %g GFLOP/s", rate);
  return unit_verdict();
}
