/* attention.c: lesson 11's attention, one block of queries against one block
 * of keys at a time, on host rows (the cpu backend). A block never stores its
 * n x nk scores: each query row's scores live in a row of scratch while the
 * row is computed, and what the block keeps is the row's log-sum-exp, from
 * which backward recomputes every probability (FlashAttention's way). */
#include <math.h>
#include <stdlib.h>

#include "train_internal.h"

static float *scratch(int64_t n) { /* one row of scores, grown as needed */
  static float *row;
  static int64_t have;
  if (n > have) {
    free(row);
    row = dt_host_alloc((size_t)n, sizeof *row);
    have = n;
  }
  return row;
}

static float dot(const float *a, const float *b, int64_t n) {
  float s = 0;
  for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
  return s;
}

int64_t dt_attn_block_forward(const float *q, const float *k, const float *v, int64_t n, int64_t nk,
                              int64_t W, int64_t heads, int causal, float *o, float *lse) {
  int64_t dh = W / heads, computed = 0;
  float scale = 1.0f / sqrtf((float)dh), *s = scratch(nk);
  for (int64_t i = 0; i < n; i++) {
    int64_t see = causal ? i + 1 : nk; /* keys 0..see-1 are visible to query i */
    computed += see;
    for (int64_t h = 0; h < heads; h++) {
      const float *qi = q + i * W + h * dh;
      float *oi = o + i * W + h * dh, mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < see; j++) {
        s[j] = scale * dot(qi, k + j * W + h * dh, dh);
        mx = fmaxf(mx, s[j]);
      }
      for (int64_t d = 0; d < dh; d++) oi[d] = 0;
      for (int64_t j = 0; j < see; j++) {
        float p = expf(s[j] - mx);
        const float *vj = v + j * W + h * dh;
        sum += p;
        for (int64_t d = 0; d < dh; d++) oi[d] += p * vj[d];
      }
      for (int64_t d = 0; d < dh; d++) oi[d] /= sum;
      lse[i * heads + h] = mx + logf(sum);
    }
  }
  return computed;
}

void dt_attn_delta(const float *dout, const float *o, int64_t n, int64_t W, int64_t heads,
                   float *delta) {
  int64_t dh = W / heads;
  for (int64_t i = 0; i < n; i++)
    for (int64_t h = 0; h < heads; h++)
      delta[i * heads + h] = dot(dout + i * W + h * dh, o + i * W + h * dh, dh);
}

int64_t dt_attn_block_backward(const float *q, const float *k, const float *v, const float *dout,
                               const float *delta, const float *lse, int64_t n, int64_t nk,
                               int64_t W, int64_t heads, int causal, float *dq, float *dk,
                               float *dv) {
  int64_t dh = W / heads, computed = 0;
  float scale = 1.0f / sqrtf((float)dh);
  for (int64_t i = 0; i < n; i++) {
    int64_t see = causal ? i + 1 : nk;
    computed += see;
    for (int64_t h = 0; h < heads; h++) {
      const float *qi = q + i * W + h * dh, *gi = dout + i * W + h * dh;
      float *dqi = dq + i * W + h * dh, l = lse[i * heads + h], dl = delta[i * heads + h];
      for (int64_t j = 0; j < see; j++) {
        const float *kj = k + j * W + h * dh, *vj = v + j * W + h * dh;
        float p = expf(scale * dot(qi, kj, dh) - l); /* the probability, recomputed */
        float ds = p * (dot(gi, vj, dh) - dl) * scale;
        float *dkj = dk + j * W + h * dh, *dvj = dv + j * W + h * dh;
        for (int64_t d = 0; d < dh; d++) {
          dqi[d] += ds * kj[d];
          dkj[d] += ds * qi[d];
          dvj[d] += p * gi[d];
        }
      }
    }
  }
  return computed;
}
