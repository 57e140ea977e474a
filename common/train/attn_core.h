/* attn_core.h: the arithmetic of attention's tiles (attention.c), one body
 * per row of a tile, shared by the cpu loops (attention.c) and the CUDA
 * kernels (attention_kernels.cu), as gpt_core.h is for the GPT's kernels:
 * every multiply and add rounded as written (nvcc would fuse a x b + c into
 * one FMA), every sum in one fixed order. What stays apart: the tiles'
 * GEMMs (OpenBLAS on the cpu, cuBLAS on the GPU: their sums run in orders of
 * their own) and the libm calls, expf and logf, which CUDA rounds within
 * 2 ulp where glibc rounds correctly (the running max's rescale factor, the
 * log-sum-exp, the merge's weights: a few per row, not one per score). */
#ifndef DT_ATTN_CORE_H
#define DT_ATTN_CORE_H

#include <math.h>
#include <stdint.h>

#include "gpt_core.h"  /* dt_exp_core, dt_rn_mul, dt_rn_add */
#include "half_core.h" /* DT_HOSTDEV, the 16-bit roundings */

/* Inlined into the cpu's AVX2 copies (attention.c's WIDE), whose loops
 * then vectorize; a call would keep them at SSE's width. */
#if defined(__GNUC__) && !defined(__CUDA_ARCH__)
#define DT_ATTN_INLINE inline __attribute__((always_inline))
#else
#define DT_ATTN_INLINE inline
#endif
#ifdef __cplusplus
#define DT_RESTRICT __restrict__
#else
#define DT_RESTRICT restrict
#endif

/* Sums and maxima in 8 lanes: one running sum in a loop is a chain the
 * compiler must keep in order; 8 independent ones are a vector. The order
 * of the adds is this code's, whatever the vector width: the same bits. */
DT_HOSTDEV static DT_ATTN_INLINE float dt_lanes_sum(const float *s, int64_t n) {
  float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int k = 0; k < 8; k++) lane[k] += s[j + k];
  for (; j < n; j++) lane[0] += s[j];
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}
DT_HOSTDEV static DT_ATTN_INLINE float dt_lanes_max(const float *s, int64_t n) {
  float lane[8];
  for (int k = 0; k < 8; k++) lane[k] = -INFINITY;
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int k = 0; k < 8; k++) lane[k] = s[j + k] > lane[k] ? s[j + k] : lane[k];
  for (; j < n; j++) lane[0] = s[j] > lane[0] ? s[j] : lane[0];
  for (int k = 1; k < 8; k++) lane[0] = lane[k] > lane[0] ? lane[k] : lane[0];
  return lane[0];
}

/* Keys query row i of a tile sees among the tile's cols, for tiles at the
 * same offset on a causal block's diagonal: i + 1; elsewhere all. */
DT_HOSTDEV static inline int64_t dt_attn_visible(int diagonal, int64_t i, int64_t cols) {
  return diagonal ? i + 1 : cols;
}

/* --precision bf16|fp16: a GEMM's inputs rounded to 16 bits, as dt_matmul
 * rounds every matmul's (tensor cores' inputs), accumulated in fp32. */
DT_HOSTDEV static inline float dt_attn_round16(float x, int bf16) {
  return bf16 ? dt_bf16_to_f32(dt_f32_to_bf16(x)) : dt_f16_to_f32(dt_f32_to_f16(x));
}

/* Forward's work on one row of a tile of scores s (cols of them, the first
 * `see` visible): the row's new max m2 (over the keys before, *mx, and this
 * tile's), p = e^(s - m2) in place (0 where masked), the row's sum rescaled
 * to the new max, and *old = e^(mx - m2), by which its output so far
 * shrinks (0 on the first tile). */
DT_HOSTDEV static DT_ATTN_INLINE void
dt_attn_softmax_row(float *DT_RESTRICT s, int64_t see, int64_t cols, int first,
                    float *DT_RESTRICT mx, float *DT_RESTRICT sum, float *DT_RESTRICT old) {
  float m = first ? -INFINITY : *mx;
  float m2 = fmaxf(m, dt_lanes_max(s, see));
  for (int64_t j = 0; j < see; j++) s[j] = dt_exp_core(s[j] - m2);
  for (int64_t j = see; j < cols; j++) s[j] = 0;
  *old = expf(m - m2);
  *sum = dt_rn_add(first ? 0 : dt_rn_mul(*sum, *old), dt_lanes_sum(s, see));
  *mx = m2;
}

/* Backward's on one row: p = e^(s - lse) in place, and dS = p (dP - delta)
 * scale in dp, each 0 where masked. */
DT_HOSTDEV static DT_ATTN_INLINE void dt_attn_grad_row(float *DT_RESTRICT s, float *DT_RESTRICT dp,
                                                       int64_t see, int64_t cols, float lse,
                                                       float delta, float scale) {
  for (int64_t j = 0; j < see; j++) {
    float p = dt_exp_core(s[j] - lse);
    s[j] = p;
    dp[j] = dt_rn_mul(dt_rn_mul(p, dp[j] - delta), scale);
  }
  for (int64_t j = see; j < cols; j++) s[j] = dp[j] = 0;
}

/* The end of a row of one head: the output divided by its sum, and the
 * log-sum-exp backward recomputes the probabilities from. */
DT_HOSTDEV static inline float dt_attn_finish_row(float *o, int64_t dh, float mx, float sum) {
  for (int64_t d = 0; d < dh; d++) o[d] /= sum;
  return mx + logf(sum);
}

/* delta of one row and head: dout . o, in order */
DT_HOSTDEV static inline float dt_attn_delta_row(const float *dout, const float *o, int64_t dh) {
  float s = 0;
  for (int64_t d = 0; d < dh; d++) s = dt_rn_add(s, dt_rn_mul(dout[d], o[d]));
  return s;
}

/* Merging one block's result of a row and head (ob, lseb) into the running
 * one (o, lse) by their log-sum-exp: each output weighed by its share of
 * the sum of e^score over both blocks' keys, computed from the larger lse
 * (an empty row, lse = -inf, weighs 0). Returns the new lse. */
DT_HOSTDEV static inline float dt_attn_merge_row(float *o, float lse, const float *ob, float lseb,
                                                 int64_t dh) {
  float mx = fmaxf(lse, lseb), sa = expf(lse - mx), sb = expf(lseb - mx);
  for (int64_t d = 0; d < dh; d++)
    o[d] = dt_rn_add(dt_rn_mul(sa, o[d]), dt_rn_mul(sb, ob[d])) / dt_rn_add(sa, sb);
  return mx + logf(dt_rn_add(sa, sb));
}

/* The plainest form (the yardsticks', scores materialised): row i of a
 * sequence's S x S scores scaled, masked after i, softmaxed with expf. */
DT_HOSTDEV static inline void dt_attn_causal_softmax_row(float *row, int64_t i, int64_t S,
                                                         float scale) {
  float mx = -INFINITY, sum = 0;
  for (int64_t j = 0; j <= i; j++) mx = fmaxf(mx, row[j] = dt_rn_mul(row[j], scale));
  for (int64_t j = 0; j < S; j++) sum = dt_rn_add(sum, row[j] = j <= i ? expf(row[j] - mx) : 0);
  for (int64_t j = 0; j <= i; j++) row[j] /= sum;
}
/* Its backward on a row: dS = P (dP - rowsum(P dP)) scale, in dp. */
DT_HOSTDEV static inline void dt_attn_softmax_grad_row(const float *p, float *dp, int64_t S,
                                                       float scale) {
  float dot = 0;
  for (int64_t j = 0; j < S; j++) dot = dt_rn_add(dot, dt_rn_mul(p[j], dp[j]));
  for (int64_t j = 0; j < S; j++) dp[j] = dt_rn_mul(dt_rn_mul(p[j], dp[j] - dot), scale);
}

#endif
