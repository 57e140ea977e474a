/* kernels_cpu.c: the training compute of the cpu backend, on host memory.
 * Matmul goes to OpenBLAS (one thread per rank: the ranks are the
 * parallelism); the rest are plain loops. kernels.cu holds the same
 * functions for the GPU; the elementwise ones (dt_add, dt_scale, the 16-bit
 * conversions) are common/comm's. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "gpt_core.h"
#include "optim_core.h"
#include "train_internal.h"

/* DT_GEMM_TIME=1: each rank prints at exit the wall time it spent in
 * dt_matmul, the floor a cpu step can reach (bench/run.sh reads it). */
static double matmul_seconds;
static uint64_t matmul_calls;
static int matmul_timed, matmul_rank;
static void print_matmul_time(void) {
  fprintf(stderr, "gemm time (DT_GEMM_TIME): rank %d: %llu calls, %.6f s\n", matmul_rank,
          (unsigned long long)matmul_calls, matmul_seconds);
}

void dt_kernels_init(void) {
  static int done;
  if (done) return;
  done = 1;
  openblas_set_num_threads(1);
  const char *timed = getenv("DT_GEMM_TIME");
  matmul_timed = timed && timed[0] && timed[0] != '0';
  matmul_rank = dt_rank();
  if (matmul_timed) atexit(print_matmul_time);
}

void dt_fill_block(float *buf, int64_t rows, int64_t cols, int64_t full_cols, int64_t row0,
                   int64_t col0, uint64_t seed, uint64_t stream, float bound) {
  DT_KERNEL("dt_fill_block", buf);
  for (int64_t r = 0; r < rows; r++)
    dt_fill_uniform(buf + r * cols, (size_t)cols, seed, stream,
                    (uint64_t)((row0 + r) * full_cols + col0), -bound, bound);
}

void dt_fill_rows(float *buf, const int64_t *rows, int64_t count, int64_t cols, uint64_t seed,
                  uint64_t stream, float bound) {
  DT_KERNEL("dt_fill_rows", buf);
  dt_expect_host("dt_fill_rows", "rows", rows, (size_t)count * sizeof *rows);
  for (int64_t k = 0; k < count; k++)
    dt_fill_block(buf + k * cols, 1, cols, cols, rows[k], 0, seed, stream, bound);
}

/* 16-bit matmul inputs: rounded copies of A and B, kept between calls; a
 * second pair for the check's one process (made aside, dt_mem_aside), whose
 * larger matmuls must not grow the lesson's, which its table counts. */
static dt_dtype matmul_inputs = DT_F32;
static float *rounded[2][2];
static size_t rounded_size[2][2];
void dt_set_matmul_inputs(dt_dtype t) { matmul_inputs = t; }
dt_dtype dt_matmul_inputs(void) { return matmul_inputs; }
size_t dt_rounding_bytes(void) { return (rounded_size[0][0] + rounded_size[0][1]) * sizeof(float); }

static const float *rounded_copy(int which, const float *x, size_t n) {
  int set = dt_mem_is_aside();
  float **r = &rounded[set][which];
  if (rounded_size[set][which] < n) {
    dt_free(*r); /* dt_alloc: the memory tables know of them */
    *r = dt_alloc_f32(n, DT_OTHER);
    rounded_size[set][which] = n;
  }
  for (size_t i = 0; i < n; i++) (*r)[i] = x[i];
  dt_round_half(*r, n, matmul_inputs);
  return *r;
}

void dt_matmul(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, const float *A,
               const float *B, float *C, int accumulate) {
  DT_OP("dt_matmul", M, N, K, trans_a, trans_b);
  DT_KERNEL("dt_matmul", A, B, C);
  dt_kernels_init();
  if (matmul_inputs != DT_F32) {
    A = rounded_copy(0, A, (size_t)(M * K));
    B = rounded_copy(1, B, (size_t)(K * N));
  }
  double t0 = matmul_timed ? dt_now() : 0;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K, 1.0f, A,
              trans_a ? (int)M : (int)K, B, trans_b ? (int)K : (int)N, accumulate ? 1.0f : 0.0f, C,
              (int)N);
  if (matmul_timed) {
    matmul_seconds += dt_now() - t0;
    matmul_calls++;
  }
}

void dt_host_gemm(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                  const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                  int64_t ldc) {
  dt_kernels_init();
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K, alpha, A, (int)lda, B,
              (int)ldb, beta, C, (int)ldc);
}

/* Selects that -O3 turns into vector compares and masks (restrict, no
 * branch): the -O2 build branched on the sign of each activation, which a
 * random sign mispredicts half the time. */
void dt_relu_forward(const float *restrict a, float *restrict h, size_t n) {
  DT_OP("dt_relu_forward", n, 0, 0, 0, 0);
  DT_KERNEL("dt_relu_forward", a, h);
  for (size_t i = 0; i < n; i++) h[i] = a[i] > 0 ? a[i] : 0.0f;
}

void dt_relu_backward(const float *a, const float *dh, float *da, size_t n) {
  DT_OP("dt_relu_backward", n, 0, 0, 0, 0);
  DT_KERNEL("dt_relu_backward", a, dh, da);
  for (size_t i = 0; i < n; i++) {
    float g = dh[i];
    da[i] = a[i] > 0 ? g : 0.0f;
  }
}

/* ReLU's decisions near 0 (kinks.c): this step's hits, grown as needed. */
static dt_kink_hit *hits;
static int64_t nhits, hitcap;
static float *norms; /* |W1_j| of a call */
static int64_t normcap;

void dt_kinks_scan(int64_t call, const float *x, const float *w1, const float *a, int64_t rows,
                   int64_t D, int64_t Hs, float tol) {
  DT_KERNEL("dt_kinks_scan", x, w1, a);
  if (Hs > normcap) {
    free(norms);
    normcap = Hs;
    norms = malloc((size_t)Hs * sizeof *norms);
    CHECK_ALLOC(norms);
  }
  for (int64_t j = 0; j < Hs; j++) norms[j] = 0;
  for (int64_t d = 0; d < D; d++) /* row by row: each column's terms in the order of kernels.cu's */
    for (int64_t j = 0; j < Hs; j++) norms[j] = dt_kink_sq_add(norms[j], w1[d * Hs + j]);
  for (int64_t j = 0; j < Hs; j++) norms[j] = sqrtf(norms[j]);
  for (int64_t i = 0; i < rows; i++) {
    float xn = 0;
    for (int64_t d = 0; d < D; d++) xn = dt_kink_sq_add(xn, x[i * D + d]);
    xn = sqrtf(xn);
    for (int64_t j = 0; j < Hs; j++) {
      float ai = a[i * Hs + j], scale = xn * norms[j];
      if (!dt_kink_near(ai, scale, tol)) continue;
      if (nhits == hitcap) {
        hitcap = hitcap ? 2 * hitcap : 1024;
        hits = realloc(hits, (size_t)hitcap * sizeof *hits);
        CHECK_ALLOC(hits);
      }
      hits[nhits++] = (dt_kink_hit){call, i, j, ai, scale};
    }
  }
}

int64_t dt_kinks_fetch(const dt_kink_hit **out, int64_t *lost) {
  int64_t n = nhits;
  *out = hits;
  *lost = 0;
  nhits = 0; /* the caller reads them before the next scan */
  return n;
}

double dt_mse_forward_backward(const float *x, const float *y, float *dx, size_t n, double scale) {
  DT_OP("dt_mse_forward_backward", n, 0, 0, 0, 0);
  DT_KERNEL("dt_mse_forward_backward", x, y, dx);
  double sum = 0;
  for (size_t i = 0; i < n; i++) {
    float d = x[i] - y[i];
    sum += (double)d * d;
    dx[i] = (float)(2.0 * scale) * d;
  }
  return sum * scale;
}

/* Four partial sums: one chain of dependent double additions ran at one
 * element per add latency; four independent chains overlap. */
double dt_sum_squares(const float *x, size_t n) {
  DT_OP("dt_sum_squares", n, 0, 0, 0, 0);
  DT_KERNEL("dt_sum_squares", x);
  double s[4] = {0, 0, 0, 0};
  size_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int k = 0; k < 4; k++) s[k] += (double)x[i + k] * x[i + k];
  for (; i < n; i++) s[0] += (double)x[i] * x[i];
  return (s[0] + s[1]) + (s[2] + s[3]);
}

/* Fused: g x grad_scale (fp16's unscale and the clip factor) and the update
 * in one pass over memory; it replaces a dt_scale pass for each factor. */
void dt_sgd_step(float *restrict w, const float *restrict g, size_t n, float lr, float grad_scale) {
  DT_OP("dt_sgd_step", n, 0, 0, 0, 0);
  DT_KERNEL("dt_sgd_step", w, g);
  for (size_t i = 0; i < n; i++) w[i] = dt_sgd_core(w[i], g[i], lr, grad_scale);
}

/* optim_core.h's update, the GPU's too, on g x grad_scale (fused as in
 * dt_sgd_step). */
static inline __attribute__((always_inline)) void
adamw_loop(float *restrict w, const float *restrict g, float *restrict m, float *restrict v,
           size_t n, float grad_scale, float step_size, float decay, float bias2_sqrt,
           float beta2) {
  for (size_t i = 0; i < n; i++)
    w[i] = dt_adamw_core(w[i], g[i], &m[i], &v[i], grad_scale, step_size, decay, bias2_sqrt, beta2);
}

/* Its two divisions and square root per element bound the loop: a wide copy
 * (train_internal.h), twice as fast on 10_ep's larger models. */
static WIDE void adamw_loop_wide(float *restrict w, const float *restrict g, float *restrict m,
                                 float *restrict v, size_t n, float grad_scale, float step_size,
                                 float decay, float bias2_sqrt, float beta2) {
  adamw_loop(w, g, m, v, n, grad_scale, step_size, decay, bias2_sqrt, beta2);
}

void dt_adamw_step(float *restrict w, const float *restrict g, float *restrict m, float *restrict v,
                   size_t n, float lr, float weight_decay, int64_t t, float grad_scale,
                   float beta2) {
  DT_OP("dt_adamw_step", n, 0, 0, 0, 0);
  DT_KERNEL("dt_adamw_step", w, g, m, v);
  const float beta1 = 0.9f;
  float bias1 = 1.0f - powf(beta1, (float)t), bias2_sqrt = sqrtf(1.0f - powf(beta2, (float)t));
  float step_size = lr / bias1, decay = 1.0f - lr * weight_decay;
  if (HAVE_WIDE)
    adamw_loop_wide(w, g, m, v, n, grad_scale, step_size, decay, bias2_sqrt, beta2);
  else
    adamw_loop(w, g, m, v, n, grad_scale, step_size, decay, bias2_sqrt, beta2);
}

/* The GPT's kernels: loops over gpt_core.h's bodies, whose arithmetic the
 * CUDA kernels share. */
void dt_layernorm_forward(const float *x, const float *g, float *y, float *mean, float *rstd,
                          int64_t R, int64_t D) {
  DT_OP("dt_layernorm_forward", R, D, 0, 0, 0);
  DT_KERNEL("dt_layernorm_forward", x, g, y, mean, rstd);
  for (int64_t r = 0; r < R; r++) dt_ln_row_forward(x + r * D, g, y + r * D, &mean[r], &rstd[r], D);
}

void dt_layernorm_backward(const float *x, const float *g, const float *dy, const float *mean,
                           const float *rstd, float *dx, float *dg, int64_t R, int64_t D,
                           int accumulate) {
  DT_OP("dt_layernorm_backward", R, D, accumulate, 0, 0);
  DT_KERNEL("dt_layernorm_backward", x, g, dy, mean, rstd, dx, dg);
  for (int64_t j = 0; j < D; j++) dg[j] = dt_ln_gain_col(x, dy, mean, rstd, R, D, j, dg[j]);
  for (int64_t r = 0; r < R; r++)
    dt_ln_row_backward(x + r * D, g, dy + r * D, mean[r], rstd[r], dx + r * D, D, accumulate);
}

/* GELU's exponential per element bounds a GPT step's elementwise work (a
 * quarter of 14's step at nanoGPT's CPU size before it was vectorized): wide
 * copies (train_internal.h). da may be du (in place). */
static inline __attribute__((always_inline)) void gelu_forward_loop(const float *restrict a,
                                                                    float *restrict u, size_t n) {
  for (size_t i = 0; i < n; i++) u[i] = dt_gelu_core(a[i]);
}
static inline __attribute__((always_inline)) void
gelu_backward_loop(const float *restrict a, const float *du, float *da, size_t n) {
  for (size_t i = 0; i < n; i++) da[i] = dt_rn_mul(du[i], dt_gelu_grad_core(a[i]));
}
static WIDE void gelu_forward_wide(const float *a, float *u, size_t n) {
  gelu_forward_loop(a, u, n);
}
static WIDE void gelu_backward_wide(const float *a, const float *du, float *da, size_t n) {
  gelu_backward_loop(a, du, da, n);
}

void dt_gelu_forward(const float *a, float *u, size_t n) {
  DT_OP("dt_gelu_forward", n, 0, 0, 0, 0);
  DT_KERNEL("dt_gelu_forward", a, u);
  if (HAVE_WIDE)
    gelu_forward_wide(a, u, n);
  else
    gelu_forward_loop(a, u, n);
}

void dt_gelu_backward(const float *a, const float *du, float *da, size_t n) {
  DT_OP("dt_gelu_backward", n, 0, 0, 0, 0);
  DT_KERNEL("dt_gelu_backward", a, du, da);
  if (HAVE_WIDE)
    gelu_backward_wide(a, du, da, n);
  else
    gelu_backward_loop(a, du, da, n);
}

void dt_embed_forward(const int32_t *tokens, int64_t R, const float *wte, int64_t v0, int64_t Vs,
                      int64_t D, float *out) {
  DT_OP("dt_embed_forward", R, Vs, D, 0, 0);
  DT_KERNEL("dt_embed_forward", tokens, wte, out);
  for (int64_t r = 0; r < R; r++)
    for (int64_t d = 0; d < D; d++) out[r * D + d] = dt_embed_core(wte, tokens[r], v0, Vs, D, d);
}

void dt_embed_buckets(const int32_t *tokens, int64_t R, int64_t v0, int64_t Vs, int64_t *offsets,
                      int32_t *rows) {
  DT_KERNEL("dt_embed_buckets", tokens, offsets, rows);
  for (int64_t v = 0; v < Vs; v++) dt_token_bucket(tokens, R, v0, Vs, v, offsets, rows);
}

void dt_embed_rows_sum(const int64_t *offsets, const int32_t *rows, const float *dout, int64_t Vs,
                       int64_t D, float *dwte) {
  DT_OP("dt_embed_rows_sum", Vs, D, 0, 0, 0);
  DT_KERNEL("dt_embed_rows_sum", offsets, rows, dout, dwte);
  for (int64_t v = 0; v < Vs; v++)
    for (int64_t d = 0; offsets[v + 1] > offsets[v] && d < D; d++)
      dwte[v * D + d] =
          dt_rows_sum_core(dout, rows, offsets[v], offsets[v + 1], D, d, dwte[v * D + d]);
}

void dt_positions_forward(const float *wpe, int64_t t0, int64_t len, int64_t count, int64_t D,
                          float *out) {
  DT_OP("dt_positions_forward", len, count, D, 0, 0);
  DT_KERNEL("dt_positions_forward", wpe, out);
  for (int64_t k = 0; k < count; k++)
    for (int64_t i = 0; i < len * D; i++)
      out[k * len * D + i] = dt_rn_add(out[k * len * D + i], wpe[t0 * D + i]);
}

void dt_positions_backward(const float *dout, int64_t t0, int64_t len, int64_t count, int64_t D,
                           float *dwpe) {
  DT_OP("dt_positions_backward", len, count, D, 0, 0);
  DT_KERNEL("dt_positions_backward", dout, dwpe);
  for (int64_t i = 0; i < len; i++)
    for (int64_t d = 0; d < D; d++)
      dwpe[(t0 + i) * D + d] =
          dt_positions_sum_core(dout, count, len, D, i, d, dwpe[(t0 + i) * D + d]);
}

void dt_ce_max(const float *logits, int64_t R, int64_t Vs, float *mx) {
  DT_OP("dt_ce_max", R, Vs, 0, 0, 0);
  DT_KERNEL("dt_ce_max", logits, mx);
  for (int64_t r = 0; r < R; r++) mx[r] = dt_ce_row_max(logits + r * Vs, Vs);
}

void dt_ce_sumexp(const float *logits, int64_t R, int64_t Vs, const float *mx, float *sum) {
  DT_OP("dt_ce_sumexp", R, Vs, 0, 0, 0);
  DT_KERNEL("dt_ce_sumexp", logits, mx, sum);
  for (int64_t r = 0; r < R; r++) sum[r] = dt_ce_row_sumexp(logits + r * Vs, Vs, mx[r]);
}

void dt_ce_target(const float *logits, int64_t R, int64_t Vs, int64_t v0, const int32_t *targets,
                  float *tl) {
  DT_OP("dt_ce_target", R, Vs, 0, 0, 0);
  DT_KERNEL("dt_ce_target", logits, targets, tl);
  for (int64_t r = 0; r < R; r++) tl[r] = dt_ce_row_target(logits + r * Vs, v0, Vs, targets[r]);
}

void dt_ce_backward(const float *logits, int64_t R, int64_t Vs, int64_t v0, const int32_t *targets,
                    const float *mx, const float *sum, float scale, float *dlogits) {
  DT_OP("dt_ce_backward", R, Vs, 0, 0, 0);
  DT_KERNEL("dt_ce_backward", logits, targets, mx, sum, dlogits);
  for (int64_t r = 0; r < R; r++)
    for (int64_t j = 0; j < Vs; j++)
      dlogits[r * Vs + j] =
          dt_ce_grad_core(logits[r * Vs + j], targets[r] == v0 + j, mx[r], sum[r], scale);
}
