/* gpt_core.h: the arithmetic of the GPT's kernels (DT_GPT), one body per
 * row, column or element, shared by the cpu loops (kernels_cpu.c) and the
 * CUDA kernels (kernels.cu) so that both backends give the same bits:
 *   - every multiply and add is rounded as written (dt_rn_mul, dt_rn_add):
 *     nvcc fuses a x b + c into one FMA, which rounds once where the cpu
 *     rounds twice; gcc in C11 mode fuses nothing;
 *   - every sum runs in one fixed order, along a row or down a column, in the
 *     loop of one thread;
 *   - the exponential is a polynomial of our own (expf differs between libm
 *     and CUDA in the last bits); tanh is made from it.
 * Division and sqrtf round correctly on both (nvcc's default -prec-div and
 * -prec-sqrt). attention.c's tiles take their exponential from here too. */
#ifndef DT_GPT_CORE_H
#define DT_GPT_CORE_H

#include <math.h>
#include <stdint.h>

#include "half_core.h" /* DT_HOSTDEV, dt_bits, dt_float */

DT_HOSTDEV static inline float dt_rn_mul(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
DT_HOSTDEV static inline float dt_rn_add(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
DT_HOSTDEV static inline float dt_rn_madd(float a, float b, float c) {
  return dt_rn_add(dt_rn_mul(a, b), c);
}
/* s + a x b in double, rounded twice as well (nvcc fuses doubles too) */
DT_HOSTDEV static inline double dt_rn_dmadd(double a, double b, double s) {
#ifdef __CUDA_ARCH__
  return __dadd_rn(__dmul_rn(a, b), s);
#else
  return a * b + s;
#endif
}

/* min(max(x, lo), hi) as a select by bit masks: gcc keeps a float `?:` as a
 * branch under its default -ftrapping-math, and a loop with a branch is not
 * vectorized (14's GELU ran 4x slower so). NaN stays NaN, as with `?:`. */
DT_HOSTDEV static inline float dt_clampf(float x, float lo, float hi) {
  uint32_t below = 0u - (uint32_t)(x < lo), above = 0u - (uint32_t)(x > hi);
  return dt_float((dt_bits(x) & ~(below | above)) | (dt_bits(lo) & below) | (dt_bits(hi) & above));
}

/* e^x without libm, in a form the compiler vectorizes (no branch, no call):
 * x = n ln2 + r with n = round(x / ln2) (the 1.5 x 2^23 trick), e^r by
 * Cephes' polynomial for |r| <= ln2 / 2, 2^n from n's bits. Within 2 ulp of
 * expf. Arguments below -87 give 2^-126 x e^r instead of less (a weight of
 * e^-87 next to a row's max of e^0 adds nothing a float can hold), above 88
 * e^88 (a tanh of 1). */
DT_HOSTDEV static inline float dt_exp_core(float x) {
  x = dt_clampf(x, -87.0f, 88.0f);
  float t = dt_rn_add(dt_rn_mul(x, 1.44269504f), 12582912.0f);
  float n = t - 12582912.0f;
  float r = dt_rn_add(dt_rn_add(x, -dt_rn_mul(n, 0.693359375f)), dt_rn_mul(n, 2.12194440e-4f));
  float p = 1.9875691500e-4f;
  p = dt_rn_madd(p, r, 1.3981999507e-3f);
  p = dt_rn_madd(p, r, 8.3334519073e-3f);
  p = dt_rn_madd(p, r, 4.1665795894e-2f);
  p = dt_rn_madd(p, r, 1.6666665459e-1f);
  p = dt_rn_madd(p, r, 5.0000001201e-1f);
  p = dt_rn_add(dt_rn_add(dt_rn_mul(dt_rn_mul(p, r), r), r), 1.0f);
  int32_t e = (int32_t)(dt_bits(t) - 0x4b400000u) + 127; /* t's low bits hold n */
  return dt_rn_mul(p, dt_float((uint32_t)e << 23));
}

/* ------------------------------------------------------------------ GELU */
/* The tanh form, as nanoGPT's and GPT-2's: gelu(x) = x (1 + tanh(k (x + c x^3))) / 2
 * with k = sqrt(2 / pi), tanh(u) = 1 - 2 / (e^2u + 1). */
#define DT_GELU_K 0.7978845608028654f
#define DT_GELU_C 0.044715f
DT_HOSTDEV static inline float dt_gelu_tanh(float x) {
  float x3 = dt_rn_mul(dt_rn_mul(x, x), x);
  float u = dt_rn_mul(DT_GELU_K, dt_rn_add(x, dt_rn_mul(DT_GELU_C, x3)));
  return 1.0f - 2.0f / (dt_exp_core(2.0f * u) + 1.0f);
}
DT_HOSTDEV static inline float dt_gelu_core(float x) {
  return dt_rn_mul(dt_rn_mul(0.5f, x), dt_rn_add(1.0f, dt_gelu_tanh(x)));
}
/* d gelu / dx = (1 + t) / 2 + x (1 - t^2) k (1 + 3 c x^2) / 2, t the tanh above */
DT_HOSTDEV static inline float dt_gelu_grad_core(float x) {
  float t = dt_gelu_tanh(x);
  float inner = dt_rn_mul(DT_GELU_K, dt_rn_add(1.0f, dt_rn_mul(3.0f * DT_GELU_C, dt_rn_mul(x, x))));
  float sech2 = dt_rn_add(1.0f, -dt_rn_mul(t, t));
  float slope = dt_rn_mul(dt_rn_mul(dt_rn_mul(0.5f, x), sech2), inner);
  return dt_rn_add(dt_rn_mul(0.5f, dt_rn_add(1.0f, t)), slope);
}

/* ------------------------------------------------------------- LayerNorm */
/* One row of D: y = (x - mean) rstd g, a gain and no bias, as
 * nn.LayerNorm(bias=False); the biased variance, eps inside the root. Sums
 * in double: a row's mean and variance are a sum of D terms. */
#define DT_LN_EPS 1e-5f
DT_HOSTDEV static inline void dt_ln_row_forward(const float *x, const float *g, float *y,
                                                float *mean, float *rstd, int64_t D) {
  double s = 0;
  for (int64_t d = 0; d < D; d++) s += x[d];
  float mu = (float)(s / (double)D);
  double var = 0;
  for (int64_t d = 0; d < D; d++) {
    double e = (double)x[d] - (double)mu;
    var = dt_rn_dmadd(e, e, var);
  }
  float rs = 1.0f / sqrtf((float)(var / (double)D) + DT_LN_EPS);
  for (int64_t d = 0; d < D; d++) y[d] = dt_rn_mul(dt_rn_mul(dt_rn_add(x[d], -mu), rs), g[d]);
  *mean = mu;
  *rstd = rs;
}
DT_HOSTDEV static inline float dt_ln_xhat(float x, float mean, float rstd) {
  return dt_rn_mul(dt_rn_add(x, -mean), rstd);
}
/* One row's dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)), dxhat
 * = dy g; written, or added to dx (a residual's gradient already there). */
DT_HOSTDEV static inline void dt_ln_row_backward(const float *x, const float *g, const float *dy,
                                                 float mean, float rstd, float *dx, int64_t D,
                                                 int accumulate) {
  double a = 0, b = 0;
  for (int64_t d = 0; d < D; d++) {
    float dxh = dt_rn_mul(dy[d], g[d]);
    a += dxh;
    b = dt_rn_dmadd(dxh, dt_ln_xhat(x[d], mean, rstd), b);
  }
  float ma = (float)(a / (double)D), mb = (float)(b / (double)D);
  for (int64_t d = 0; d < D; d++) {
    float dxh = dt_rn_mul(dy[d], g[d]), xh = dt_ln_xhat(x[d], mean, rstd);
    float v = dt_rn_mul(rstd, dt_rn_add(dt_rn_add(dxh, -ma), -dt_rn_mul(xh, mb)));
    dx[d] = accumulate ? dt_rn_add(dx[d], v) : v;
  }
}
/* Column j of the gain's gradient: acc + the sum over the R rows of dy xhat,
 * added in row order. */
DT_HOSTDEV static inline float dt_ln_gain_col(const float *x, const float *dy, const float *mean,
                                              const float *rstd, int64_t R, int64_t D, int64_t j,
                                              float acc) {
  for (int64_t r = 0; r < R; r++)
    acc = dt_rn_add(acc, dt_rn_mul(dy[r * D + j], dt_ln_xhat(x[r * D + j], mean[r], rstd[r])));
  return acc;
}

/* ------------------------------------------------------------- embedding */
/* Element d of a token's row among wte's rows [v0, v0 + Vs) (a slice of the
 * vocabulary), 0 when the token is another slice's. */
DT_HOSTDEV static inline float dt_embed_core(const float *wte, int32_t token, int64_t v0,
                                             int64_t Vs, int64_t D, int64_t d) {
  return token >= v0 && token < v0 + Vs ? wte[(token - v0) * D + d] : 0.0f;
}
/* acc + column d of the rows rows[begin..end) of dout, in that order: a
 * token's gradient from the rows that hold it (a counting sort's bucket,
 * rows ascending, so the sum runs in row order on both backends). */
DT_HOSTDEV static inline float dt_rows_sum_core(const float *dout, const int32_t *rows,
                                                int64_t begin, int64_t end, int64_t D, int64_t d,
                                                float acc) {
  for (int64_t k = begin; k < end; k++) acc = dt_rn_add(acc, dout[(int64_t)rows[k] * D + d]);
  return acc;
}
/* acc + dout[k len + i][d] over the count sequences k, in order: position
 * i's gradient */
DT_HOSTDEV static inline float dt_positions_sum_core(const float *dout, int64_t count, int64_t len,
                                                     int64_t D, int64_t i, int64_t d, float acc) {
  for (int64_t k = 0; k < count; k++) acc = dt_rn_add(acc, dout[(k * len + i) * D + d]);
  return acc;
}

/* Bucket v of a slice's tokens (token v0 + v of the slice's Vs), by the
 * rows holding it: its start in rows (the rows holding one of the tokens
 * v0 .. v0 + v - 1) into offsets[v], then its rows, ascending, from there;
 * the last bucket writes offsets[Vs], the end, too. One thread a bucket on
 * the GPU, reading the R token ids where they lie (device memory), a loop
 * on the cpu: each bucket's rows in row order without atomics, whose order
 * would change the embedding's sums from run to run. O(Vs R) in all, but
 * parallel over the buckets and with no trip through the host. */
DT_HOSTDEV static inline void dt_token_bucket(const int32_t *tokens, int64_t R, int64_t v0,
                                              int64_t Vs, int64_t v, int64_t *offsets,
                                              int32_t *rows) {
  int64_t at = 0;
  for (int64_t r = 0; r < R; r++) at += tokens[r] >= v0 && tokens[r] < v0 + v;
  offsets[v] = at;
  for (int64_t r = 0; r < R; r++)
    if (tokens[r] == v0 + v) rows[at++] = (int32_t)r;
  if (v == Vs - 1) offsets[Vs] = at;
}

/* --------------------------------------------------------- cross-entropy */
/* A row's pieces over a slice of its logits (Vs of them, the vocabulary
 * from v0): the max; the sum of e^(l - max) given the max of the whole row
 * (every slice's); the target's logit where the target is in this slice,
 * else 0. Summed (and maxed) over the slices they make the loss,
 * log(sum) + max - target logit, without the logits ever being gathered. */
DT_HOSTDEV static inline float dt_ce_row_max(const float *l, int64_t Vs) {
  float m = -INFINITY;
  for (int64_t j = 0; j < Vs; j++) m = l[j] > m ? l[j] : m;
  return m;
}
DT_HOSTDEV static inline float dt_ce_row_sumexp(const float *l, int64_t Vs, float mx) {
  double s = 0;
  for (int64_t j = 0; j < Vs; j++) s += (double)dt_exp_core(dt_rn_add(l[j], -mx));
  return (float)s;
}
DT_HOSTDEV static inline float dt_ce_row_target(const float *l, int64_t v0, int64_t Vs,
                                                int32_t target) {
  return target >= v0 && target < v0 + Vs ? l[target - v0] : 0.0f;
}
/* One logit's gradient: (softmax - onehot) x scale, from the whole row's max
 * and sum; scale is 1 / the rows of the mean (times fp16's loss scale). */
DT_HOSTDEV static inline float dt_ce_grad_core(float l, int is_target, float mx, float sum,
                                               float scale) {
  float p = dt_exp_core(dt_rn_add(l, -mx)) / sum;
  return dt_rn_mul(is_target ? dt_rn_add(p, -1.0f) : p, scale);
}

#endif
