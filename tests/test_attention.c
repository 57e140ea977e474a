/* test_attention.c: lesson 11's tiled attention (common/train/attention.c)
 * against the plainest loop, one query row and one score at a time in
 * double: sizes that leave partial tiles, blocks with n != nk, causal and
 * not, several head widths; forward (o, lse), delta, and backward (dq, dk,
 * dv added to what they hold); and with 16-bit GEMM inputs (--precision),
 * within their rounding. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train.h"
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
        mx = fmax(mx, s[j] *= scale);
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
 * bound (fmax would pass over a NaN). The early return also keeps GCC 12
 * on arm64 from vectorising the two fmax reductions, which it cannot
 * compile (an internal compiler error in vect_transform_reduction). */
static double off(const float *got, const double *want, int64_t n) {
  double worst = 0, size = 1e-30;
  for (int64_t i = 0; i < n; i++) {
    if (!isfinite(got[i])) return INFINITY;
    worst = fmax(worst, fabs(got[i] - want[i]));
    size = fmax(size, fabs(want[i]));
  }
  return worst / size;
}

static void test_block(int64_t n, int64_t nk, int causal, int64_t W, int64_t heads, dt_dtype t,
                       double bound) {
  float *q = random_rows(n * W, 1, -2, 2), *k = random_rows(nk * W, 2, -2, 2);
  float *v = random_rows(nk * W, 3, -1, 1), *dout = random_rows(n * W, 4, -1, 1);
  float *dq = random_rows(n * W, 5, -1, 1), *dk = random_rows(nk * W, 6, -1, 1);
  float *dv = random_rows(nk * W, 7, -1, 1), *o = malloc((size_t)(n * W) * 4);
  float *lse = malloc((size_t)(n * heads) * 4), *delta = malloc((size_t)(n * heads) * 4);
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
  int64_t f = dt_attn_block_forward(q, k, v, n, nk, W, heads, causal, o, lse);
  dt_attn_delta(dout, o, n, W, heads, delta);
  int64_t b =
      dt_attn_block_backward(q, k, v, dout, delta, lse, n, nk, W, heads, causal, dq, dk, dv);
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
  void *all[] = {q, k, v, dout, dq, dk, dv, o, lse, delta, wo, wl, wq, wk, wv};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) free(all[i]);
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
  double rate = dt_attn_gemm_rate(8);
  EXPECT(rate > 0 && isfinite(rate), "sgemm's rate at the tiles' shapes: %g GFLOP/s", rate);
  return unit_verdict();
}
