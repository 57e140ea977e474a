/* kernels.cu: the training compute of the cuda backend. Each function
 * matches the one of the same name in kernels_cpu.c and runs on this rank's
 * stream; matmul goes to cuBLAS. The elementwise ones (dt_add, dt_scale, the
 * 16-bit conversions) are common/comm's. */
#include <stdio.h>
#include <stdlib.h>

#include "blas_cuda.h"
#include "gpt_core.h"
#include "half_core.h"
#include "optim_core.h"
#include "rng_core.h"
#include "train_internal.h"

static cublasHandle_t blas;
static double *reduce_slot; /* device scalar for loss and norm reductions */

static unsigned blocks_for(size_t n) { return (unsigned)((n + 255) / 256); }
#define GRID(n) blocks_for(n), 256, 0, dt_stream()
#define INDEX   (blockIdx.x * (size_t)blockDim.x + threadIdx.x)

/* DT_GEMM_TIME=1: each rank prints at exit the time its GPU spent in
 * dt_matmul (CUDA events; the host waits for each one, so only then). */
static double matmul_seconds;
static unsigned long long matmul_calls;
static int matmul_timed, matmul_rank;
static cudaEvent_t matmul_events[2];
static void print_matmul_time(void) {
  fprintf(stderr, "gemm time (DT_GEMM_TIME): rank %d: %llu calls, %.6f s\n", matmul_rank,
          matmul_calls, matmul_seconds);
}

extern "C" void dt_kernels_init(void) {
  if (blas) return;
  CHECK_CUBLAS(cublasCreate(&blas));
  CHECK_CUBLAS(cublasSetStream(blas, dt_stream()));
  CHECK_CUDA(cudaMalloc(&reduce_slot, sizeof(double)));
  const char *timed = getenv("DT_GEMM_TIME");
  matmul_timed = timed && timed[0] && timed[0] != '0';
  matmul_rank = dt_rank();
  if (!matmul_timed) return;
  for (int k = 0; k < 2; k++) CHECK_CUDA(cudaEventCreate(&matmul_events[k]));
  atexit(print_matmul_time);
}

cublasHandle_t dt_blas(void) {
  dt_kernels_init();
  return blas;
}

/* __fmul_rn/__fadd_rn forbid fusing into an FMA, so the bits match the cpu. */
__global__ static void fill_block_kernel(float *buf, int64_t rows, int64_t cols, int64_t full_cols,
                                         int64_t row0, int64_t col0, uint64_t seed, uint64_t stream,
                                         float lo, float width) {
  size_t i = INDEX;
  if (i >= (size_t)(rows * cols)) return;
  int64_t r = (int64_t)i / cols, c = (int64_t)i % cols;
  float u = dt_rng_core_uniform(seed, stream, (uint64_t)((row0 + r) * full_cols + col0 + c));
  buf[i] = __fadd_rn(lo, __fmul_rn(width, u));
}
/* Row k is row rows[k] of the full matrix: the batch's samples in one launch. */
__global__ static void fill_rows_kernel(float *buf, const int64_t *rows, int64_t count,
                                        int64_t cols, uint64_t seed, uint64_t stream, float lo,
                                        float width) {
  size_t i = INDEX;
  if (i >= (size_t)(count * cols)) return;
  int64_t k = (int64_t)i / cols, c = (int64_t)i % cols;
  float u = dt_rng_core_uniform(seed, stream, (uint64_t)(rows[k] * cols + c));
  buf[i] = __fadd_rn(lo, __fmul_rn(width, u));
}
__global__ static void relu_forward_kernel(const float *a, float *h, size_t n) {
  size_t i = INDEX;
  if (i < n) h[i] = a[i] > 0 ? a[i] : 0;
}
__global__ static void relu_backward_kernel(const float *a, const float *dh, float *da, size_t n) {
  size_t i = INDEX;
  if (i < n) da[i] = a[i] > 0 ? dh[i] : 0;
}
/* One double per block, then one atomic per block: few enough atomics. */
__global__ static void mse_kernel(const float *x, const float *y, float *dx, size_t n, double scale,
                                  double *sum) {
  __shared__ double part[256];
  size_t i = INDEX;
  double s = 0;
  if (i < n) {
    float d = x[i] - y[i];
    s = (double)d * d;
    if (dx) dx[i] = (float)(2.0 * scale) * d;
  }
  part[threadIdx.x] = s;
  __syncthreads();
  for (int k = 128; k > 0; k >>= 1) {
    if (threadIdx.x < k) part[threadIdx.x] += part[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(sum, part[0]);
}
/* Fused as on the cpu: g x grad_scale (fp16's unscale, the clip factor) and
 * the update in one kernel, replacing a scale_kernel launch per factor;
 * the update optim_core.h's body, rounded as the cpu's: no FMA. */
__global__ static void sgd_kernel(float *w, const float *g, size_t n, float lr, float grad_scale) {
  size_t i = INDEX;
  if (i < n) w[i] = dt_sgd_core(w[i], g[i], lr, grad_scale);
}
__global__ static void adamw_kernel(float *w, const float *g, float *m, float *v, size_t n,
                                    float decay, float step_size, float bias2_sqrt,
                                    float grad_scale, float beta2) {
  size_t i = INDEX;
  if (i < n)
    w[i] = dt_adamw_core(w[i], g[i], &m[i], &v[i], grad_scale, step_size, decay, bias2_sqrt, beta2);
}

__global__ static void round_half_kernel(const float *src, float *dst, size_t n, int bf16) {
  size_t i = INDEX;
  if (i < n)
    dst[i] = bf16 ? dt_bf16_to_f32(dt_f32_to_bf16(src[i])) : dt_f16_to_f32(dt_f32_to_f16(src[i]));
}

#define LAUNCHED() CHECK_CUDA(cudaGetLastError())

extern "C" void dt_fill_block(float *buf, int64_t rows, int64_t cols, int64_t full_cols,
                              int64_t row0, int64_t col0, uint64_t seed, uint64_t stream,
                              float bound) {
  size_t n = (size_t)(rows * cols);
  if (n) {
    fill_block_kernel<<<GRID(n)>>>(buf, rows, cols, full_cols, row0, col0, seed, stream, -bound,
                                   2 * bound);
    LAUNCHED();
  }
}
static int64_t *fill_rows_index; /* the sample indices, on the device */
static int64_t fill_rows_size;
extern "C" void dt_fill_rows(float *buf, const int64_t *rows, int64_t count, int64_t cols,
                             uint64_t seed, uint64_t stream, float bound) {
  if (count <= 0 || cols <= 0) return;
  if (fill_rows_size < count) {
    dt_free(fill_rows_index);
    fill_rows_index = (int64_t *)dt_alloc((size_t)count * sizeof(int64_t), DT_OTHER);
    fill_rows_size = count;
  }
  /* from pageable memory this returns once rows is copied out: reusable */
  CHECK_CUDA(cudaMemcpyAsync(fill_rows_index, rows, (size_t)count * sizeof(int64_t),
                             cudaMemcpyHostToDevice, dt_stream()));
  size_t n = (size_t)(count * cols);
  fill_rows_kernel<<<GRID(n)>>>(buf, fill_rows_index, count, cols, seed, stream, -bound, 2 * bound);
  LAUNCHED();
}
/* 16-bit matmul inputs: rounded copies of A and B, kept between calls; a
 * second pair for the check's one process (made aside, dt_mem_aside), whose
 * larger matmuls must not grow the lesson's, which its table counts. */
static dt_dtype matmul_inputs = DT_F32;
static float *rounded[2][2];
static size_t rounded_size[2][2];
extern "C" void dt_set_matmul_inputs(dt_dtype t) { matmul_inputs = t; }
extern "C" dt_dtype dt_matmul_inputs(void) { return matmul_inputs; }
extern "C" size_t dt_rounding_bytes(void) {
  return (rounded_size[0][0] + rounded_size[0][1]) * sizeof(float);
}

static const float *rounded_copy(int which, const float *x, size_t n) {
  int set = dt_mem_is_aside();
  float **r = &rounded[set][which];
  if (rounded_size[set][which] < n) {
    dt_free(*r); /* dt_alloc: the memory tables know of them */
    *r = dt_alloc_f32(n, DT_OTHER);
    rounded_size[set][which] = n;
  }
  if (n) {
    round_half_kernel<<<GRID(n)>>>(x, *r, n, matmul_inputs == DT_BF16);
    LAUNCHED();
  }
  return *r;
}

extern "C" void dt_matmul(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, const float *A,
                          const float *B, float *C, int accumulate) {
  DT_OP("dt_matmul", M, N, K, trans_a, trans_b);
  if (matmul_inputs != DT_F32) {
    A = rounded_copy(0, A, (size_t)(M * K));
    B = rounded_copy(1, B, (size_t)(K * N));
  }
  dt_kernels_init();
  /* cuBLAS is column-major: the row-major C = op(A) op(B) is the
   * column-major C^T = op(B)^T op(A)^T, so pass B first. */
  const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  if (matmul_timed) CHECK_CUDA(cudaEventRecord(matmul_events[0], dt_stream()));
  CHECK_CUBLAS(cublasSgemm(blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                           trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, (int)N, (int)M, (int)K, &one, B,
                           trans_b ? (int)K : (int)N, A, trans_a ? (int)M : (int)K, &beta, C,
                           (int)N));
  if (matmul_timed) {
    float ms = 0;
    CHECK_CUDA(cudaEventRecord(matmul_events[1], dt_stream()));
    CHECK_CUDA(cudaEventSynchronize(matmul_events[1]));
    CHECK_CUDA(cudaEventElapsedTime(&ms, matmul_events[0], matmul_events[1]));
    matmul_seconds += ms * 1e-3;
    matmul_calls++;
  }
}
extern "C" void dt_relu_forward(const float *a, float *h, size_t n) {
  DT_OP("dt_relu_forward", n, 0, 0, 0, 0);
  if (n) {
    relu_forward_kernel<<<GRID(n)>>>(a, h, n);
    LAUNCHED();
  }
}
extern "C" void dt_relu_backward(const float *a, const float *dh, float *da, size_t n) {
  DT_OP("dt_relu_backward", n, 0, 0, 0, 0);
  if (n) {
    relu_backward_kernel<<<GRID(n)>>>(a, dh, da, n);
    LAUNCHED();
  }
}
/* ReLU's decisions near 0 (kinks.c): the norms and the test in one thread
 * per row, column or element, the arithmetic kinks_core.h's as the cpu
 * loop's; each step's hits in a device buffer, fetched when the step ends
 * (dt_step_end waits for the stream there anyway). The cpu's record grows
 * as it goes; here the buffer must hold a call's hits before they are
 * counted, so before a call that could overflow it (the hits so far, at
 * most, plus every decision of the call) the host looks at the count (a
 * wait, only then) and grows the buffer: no hit is ever dropped. */
__global__ static void kink_row_norms(const float *x, int64_t rows, int64_t D, float *out) {
  size_t i = INDEX;
  if (i >= (size_t)rows) return;
  float s = 0;
  for (int64_t d = 0; d < D; d++) s = dt_kink_sq_add(s, x[i * D + d]);
  out[i] = sqrtf(s);
}
__global__ static void kink_col_norms(const float *w, int64_t D, int64_t Hs, float *out) {
  size_t j = INDEX;
  if (j >= (size_t)Hs) return;
  float s = 0;
  for (int64_t d = 0; d < D; d++) s = dt_kink_sq_add(s, w[d * Hs + j]);
  out[j] = sqrtf(s);
}
__global__ static void kink_scan_kernel(int64_t call, const float *a, const float *xn,
                                        const float *wn, int64_t rows, int64_t Hs, float tol,
                                        dt_kink_hit *hits, unsigned long long *count, int64_t cap) {
  size_t e = INDEX;
  if (e >= (size_t)(rows * Hs)) return;
  int64_t i = (int64_t)e / Hs, j = (int64_t)e % Hs;
  float scale = __fmul_rn(xn[i], wn[j]);
  if (!dt_kink_near(a[e], scale, tol)) return;
  unsigned long long k = atomicAdd(count, 1ULL);
  if (k < (unsigned long long)cap) hits[k] = dt_kink_hit{call, i, j, a[e], scale};
}
static dt_kink_hit *kink_hits, *kink_host;
static unsigned long long *kink_count;
static float *kink_norms;
static int64_t kink_cap, kink_norm_cap;
static int64_t kink_known, kink_most; /* the count when last read; the most hits since */

static int64_t kink_read_count(void) {
  unsigned long long count = 0;
  CHECK_CUDA(
      cudaMemcpyAsync(&count, kink_count, sizeof count, cudaMemcpyDeviceToHost, dt_stream()));
  CHECK_CUDA(cudaStreamSynchronize(dt_stream()));
  return (int64_t)count;
}

extern "C" void dt_kinks_scan(int64_t call, const float *x, const float *w1, const float *a,
                              int64_t rows, int64_t D, int64_t Hs, float tol) {
  int64_t most = rows * Hs; /* every decision of the call near 0 */
  if (!kink_count) {
    kink_count = (unsigned long long *)dt_alloc(sizeof *kink_count, DT_OTHER);
    kink_cap = 1 << 16;
    kink_hits = (dt_kink_hit *)dt_alloc((size_t)kink_cap * sizeof *kink_hits, DT_OTHER);
  }
  if (kink_known + kink_most + most > kink_cap) { /* it could overflow: the count, then room */
    kink_known = kink_read_count();
    kink_most = 0;
  }
  if (kink_known + most > kink_cap) {
    int64_t cap = 2 * kink_cap > kink_known + most ? 2 * kink_cap : kink_known + most;
    dt_kink_hit *grown = (dt_kink_hit *)dt_alloc((size_t)cap * sizeof *grown, DT_OTHER);
    dt_copy(grown, kink_hits, (size_t)kink_known * sizeof *grown);
    dt_free(kink_hits);
    kink_hits = grown;
    kink_cap = cap;
  }
  kink_most += most;
  if (rows + Hs > kink_norm_cap) {
    dt_free(kink_norms);
    kink_norm_cap = rows + Hs;
    kink_norms = dt_alloc_f32((size_t)kink_norm_cap, DT_OTHER);
  }
  float *xn = kink_norms, *wn = kink_norms + rows;
  kink_row_norms<<<GRID((size_t)rows)>>>(x, rows, D, xn);
  LAUNCHED();
  kink_col_norms<<<GRID((size_t)Hs)>>>(w1, D, Hs, wn);
  LAUNCHED();
  kink_scan_kernel<<<GRID((size_t)(rows * Hs))>>>(call, a, xn, wn, rows, Hs, tol, kink_hits,
                                                  kink_count, kink_cap);
  LAUNCHED();
}

extern "C" int64_t dt_kinks_fetch(const dt_kink_hit **out, int64_t *lost) {
  *out = kink_host;
  *lost = 0;
  if (!kink_count) return 0;
  int64_t count = kink_read_count();
  int64_t n = count < kink_cap ? count : kink_cap; /* count <= cap: dt_kinks_scan made room */
  free(kink_host);
  kink_host = (dt_kink_hit *)malloc((size_t)(n ? n : 1) * sizeof *kink_host);
  CHECK_ALLOC(kink_host);
  if (n)
    CHECK_CUDA(cudaMemcpyAsync(kink_host, kink_hits, (size_t)n * sizeof *kink_host,
                               cudaMemcpyDeviceToHost, dt_stream()));
  CHECK_CUDA(cudaMemsetAsync(kink_count, 0, sizeof *kink_count, dt_stream()));
  CHECK_CUDA(cudaStreamSynchronize(dt_stream()));
  *out = kink_host;
  *lost = count - n; /* 0; were it not, kinks.c counts it and the check says so */
  kink_known = kink_most = 0;
  return n;
}

static double reduce(const float *x, const float *y, float *dx, size_t n, double scale) {
  dt_kernels_init();
  double sum = 0;
  CHECK_CUDA(cudaMemsetAsync(reduce_slot, 0, sizeof(double), dt_stream()));
  if (n) {
    mse_kernel<<<GRID(n)>>>(x, y, dx, n, scale, reduce_slot);
    LAUNCHED();
  }
  CHECK_CUDA(cudaMemcpyAsync(&sum, reduce_slot, sizeof sum, cudaMemcpyDeviceToHost, dt_stream()));
  CHECK_CUDA(cudaStreamSynchronize(dt_stream())); /* the host needs the number */
  return sum;
}
extern "C" double dt_mse_forward_backward(const float *x, const float *y, float *dx, size_t n,
                                          double scale) {
  DT_OP("dt_mse_forward_backward", n, 0, 0, 0, 0);
  return reduce(x, y, dx, n, scale) * scale;
}
__global__ static void sum_squares_kernel(const float *x, size_t n, double *sum) {
  __shared__ double part[256];
  size_t i = INDEX;
  part[threadIdx.x] = i < n ? (double)x[i] * x[i] : 0.0;
  __syncthreads();
  for (int k = 128; k > 0; k >>= 1) {
    if (threadIdx.x < k) part[threadIdx.x] += part[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(sum, part[0]);
}
extern "C" double dt_sum_squares(const float *x, size_t n) {
  DT_OP("dt_sum_squares", n, 0, 0, 0, 0);
  dt_kernels_init();
  double sum = 0;
  CHECK_CUDA(cudaMemsetAsync(reduce_slot, 0, sizeof(double), dt_stream()));
  if (n) {
    sum_squares_kernel<<<GRID(n)>>>(x, n, reduce_slot);
    LAUNCHED();
  }
  CHECK_CUDA(cudaMemcpyAsync(&sum, reduce_slot, sizeof sum, cudaMemcpyDeviceToHost, dt_stream()));
  CHECK_CUDA(cudaStreamSynchronize(dt_stream()));
  return sum;
}
extern "C" void dt_sgd_step(float *w, const float *g, size_t n, float lr, float grad_scale) {
  DT_OP("dt_sgd_step", n, 0, 0, 0, 0);
  if (n) {
    sgd_kernel<<<GRID(n)>>>(w, g, n, lr, grad_scale);
    LAUNCHED();
  }
}
extern "C" void dt_adamw_step(float *w, const float *g, float *m, float *v, size_t n, float lr,
                              float weight_decay, int64_t t, float grad_scale, float beta2) {
  DT_OP("dt_adamw_step", n, 0, 0, 0, 0);
  float bias1 = 1.0f - powf(0.9f, (float)t), bias2_sqrt = sqrtf(1.0f - powf(beta2, (float)t));
  if (n) {
    adamw_kernel<<<GRID(n)>>>(w, g, m, v, n, 1.0f - lr * weight_decay, lr / bias1, bias2_sqrt,
                              grad_scale, beta2);
    LAUNCHED();
  }
}

/* The GPT's kernels: one thread per row, column or element, each running
 * gpt_core.h's body as the cpu loop does, so the bits are the cpu's. A
 * row's sums run in the row's thread, in order: slower than a tree across a
 * block, and the same bits as the cpu. Token ids and targets are read where
 * the lesson keeps them, in device memory (train.h). */
__global__ static void ln_forward_kernel(const float *x, const float *g, float *y, float *mean,
                                         float *rstd, int64_t R, int64_t D) {
  size_t r = INDEX;
  if (r < (size_t)R) dt_ln_row_forward(x + r * D, g, y + r * D, &mean[r], &rstd[r], D);
}
__global__ static void ln_gain_kernel(const float *x, const float *dy, const float *mean,
                                      const float *rstd, float *dg, int64_t R, int64_t D) {
  size_t j = INDEX;
  if (j < (size_t)D) dg[j] = dt_ln_gain_col(x, dy, mean, rstd, R, D, (int64_t)j, dg[j]);
}
__global__ static void ln_backward_kernel(const float *x, const float *g, const float *dy,
                                          const float *mean, const float *rstd, float *dx,
                                          int64_t R, int64_t D, int accumulate) {
  size_t r = INDEX;
  if (r < (size_t)R)
    dt_ln_row_backward(x + r * D, g, dy + r * D, mean[r], rstd[r], dx + r * D, D, accumulate);
}
__global__ static void gelu_forward_kernel(const float *a, float *u, size_t n) {
  size_t i = INDEX;
  if (i < n) u[i] = dt_gelu_core(a[i]);
}
__global__ static void gelu_backward_kernel(const float *a, const float *du, float *da, size_t n) {
  size_t i = INDEX;
  if (i < n) da[i] = dt_rn_mul(du[i], dt_gelu_grad_core(a[i]));
}
__global__ static void embed_forward_kernel(const int32_t *tokens, int64_t R, const float *wte,
                                            int64_t v0, int64_t Vs, int64_t D, float *out) {
  size_t e = INDEX;
  if (e < (size_t)(R * D)) out[e] = dt_embed_core(wte, tokens[e / D], v0, Vs, D, (int64_t)(e % D));
}
__global__ static void token_bucket_kernel(const int32_t *tokens, int64_t R, int64_t v0, int64_t Vs,
                                           int64_t *offsets, int32_t *rows) {
  size_t v = INDEX;
  if (v < (size_t)Vs) dt_token_bucket(tokens, R, v0, Vs, (int64_t)v, offsets, rows);
}
__global__ static void embed_backward_kernel(const int64_t *offsets, const int32_t *rows,
                                             const float *dout, int64_t Vs, int64_t D,
                                             float *dwte) {
  size_t e = INDEX;
  if (e >= (size_t)(Vs * D)) return;
  int64_t v = (int64_t)e / D, d = (int64_t)e % D;
  if (offsets[v + 1] > offsets[v])
    dwte[e] = dt_rows_sum_core(dout, rows, offsets[v], offsets[v + 1], D, d, dwte[e]);
}
__global__ static void positions_forward_kernel(const float *wpe, int64_t len, int64_t count,
                                                int64_t D, float *out) {
  size_t e = INDEX;
  if (e < (size_t)(count * len * D)) out[e] = dt_rn_add(out[e], wpe[e % (size_t)(len * D)]);
}
__global__ static void positions_backward_kernel(const float *dout, int64_t len, int64_t count,
                                                 int64_t D, float *dwpe) {
  size_t e = INDEX;
  if (e < (size_t)(len * D))
    dwpe[e] = dt_positions_sum_core(dout, count, len, D, (int64_t)e / D, (int64_t)e % D, dwpe[e]);
}
__global__ static void ce_rows_kernel(const float *logits, int64_t R, int64_t Vs, int64_t v0,
                                      const int32_t *targets, const float *mx, float *out,
                                      int piece) {
  size_t r = INDEX;
  if (r >= (size_t)R) return;
  const float *l = logits + r * Vs;
  out[r] = piece == 0   ? dt_ce_row_max(l, Vs)
           : piece == 1 ? dt_ce_row_sumexp(l, Vs, mx[r])
                        : dt_ce_row_target(l, v0, Vs, targets[r]);
}
__global__ static void ce_backward_kernel(const float *logits, int64_t R, int64_t Vs, int64_t v0,
                                          const int32_t *targets, const float *mx, const float *sum,
                                          float scale, float *dlogits) {
  size_t e = INDEX;
  if (e >= (size_t)(R * Vs)) return;
  int64_t r = (int64_t)e / Vs, j = (int64_t)e % Vs;
  dlogits[e] = dt_ce_grad_core(logits[e], targets[r] == v0 + j, mx[r], sum[r], scale);
}

extern "C" void dt_layernorm_forward(const float *x, const float *g, float *y, float *mean,
                                     float *rstd, int64_t R, int64_t D) {
  DT_OP("dt_layernorm_forward", R, D, 0, 0, 0);
  if (R <= 0) return;
  ln_forward_kernel<<<GRID((size_t)R)>>>(x, g, y, mean, rstd, R, D);
  LAUNCHED();
}
extern "C" void dt_layernorm_backward(const float *x, const float *g, const float *dy,
                                      const float *mean, const float *rstd, float *dx, float *dg,
                                      int64_t R, int64_t D, int accumulate) {
  DT_OP("dt_layernorm_backward", R, D, accumulate, 0, 0);
  if (R <= 0 || D <= 0) return;
  ln_gain_kernel<<<GRID((size_t)D)>>>(x, dy, mean, rstd, dg, R, D);
  LAUNCHED();
  ln_backward_kernel<<<GRID((size_t)R)>>>(x, g, dy, mean, rstd, dx, R, D, accumulate);
  LAUNCHED();
}
extern "C" void dt_gelu_forward(const float *a, float *u, size_t n) {
  DT_OP("dt_gelu_forward", n, 0, 0, 0, 0);
  if (!n) return;
  gelu_forward_kernel<<<GRID(n)>>>(a, u, n);
  LAUNCHED();
}
extern "C" void dt_gelu_backward(const float *a, const float *du, float *da, size_t n) {
  DT_OP("dt_gelu_backward", n, 0, 0, 0, 0);
  if (!n) return;
  gelu_backward_kernel<<<GRID(n)>>>(a, du, da, n);
  LAUNCHED();
}
extern "C" void dt_embed_forward(const int32_t *tokens, int64_t R, const float *wte, int64_t v0,
                                 int64_t Vs, int64_t D, float *out) {
  DT_OP("dt_embed_forward", R, Vs, D, 0, 0);
  if (R <= 0 || D <= 0) return;
  embed_forward_kernel<<<GRID((size_t)(R * D))>>>(tokens, R, wte, v0, Vs, D, out);
  LAUNCHED();
}
extern "C" void dt_embed_buckets(const int32_t *tokens, int64_t R, int64_t v0, int64_t Vs,
                                 int64_t *offsets, int32_t *rows) {
  if (Vs <= 0) return;
  token_bucket_kernel<<<GRID((size_t)Vs)>>>(tokens, R, v0, Vs, offsets, rows);
  LAUNCHED();
}
extern "C" void dt_embed_rows_sum(const int64_t *offsets, const int32_t *rows, const float *dout,
                                  int64_t Vs, int64_t D, float *dwte) {
  DT_OP("dt_embed_rows_sum", Vs, D, 0, 0, 0);
  if (Vs <= 0 || D <= 0) return;
  embed_backward_kernel<<<GRID((size_t)(Vs * D))>>>(offsets, rows, dout, Vs, D, dwte);
  LAUNCHED();
}
extern "C" void dt_positions_forward(const float *wpe, int64_t t0, int64_t len, int64_t count,
                                     int64_t D, float *out) {
  DT_OP("dt_positions_forward", len, count, D, 0, 0);
  if (len <= 0 || count <= 0 || D <= 0) return;
  positions_forward_kernel<<<GRID((size_t)(count * len * D))>>>(wpe + t0 * D, len, count, D, out);
  LAUNCHED();
}
extern "C" void dt_positions_backward(const float *dout, int64_t t0, int64_t len, int64_t count,
                                      int64_t D, float *dwpe) {
  DT_OP("dt_positions_backward", len, count, D, 0, 0);
  if (len <= 0 || D <= 0) return;
  positions_backward_kernel<<<GRID((size_t)(len * D))>>>(dout, len, count, D, dwpe + t0 * D);
  LAUNCHED();
}
static void ce_rows(const float *logits, int64_t R, int64_t Vs, int64_t v0, const int32_t *targets,
                    const float *mx, float *out, int piece) {
  if (R <= 0) return;
  ce_rows_kernel<<<GRID((size_t)R)>>>(logits, R, Vs, v0, targets, mx, out, piece);
  LAUNCHED();
}
extern "C" void dt_ce_max(const float *logits, int64_t R, int64_t Vs, float *mx) {
  DT_OP("dt_ce_max", R, Vs, 0, 0, 0);
  ce_rows(logits, R, Vs, 0, NULL, NULL, mx, 0);
}
extern "C" void dt_ce_sumexp(const float *logits, int64_t R, int64_t Vs, const float *mx,
                             float *sum) {
  DT_OP("dt_ce_sumexp", R, Vs, 0, 0, 0);
  ce_rows(logits, R, Vs, 0, NULL, mx, sum, 1);
}
extern "C" void dt_ce_target(const float *logits, int64_t R, int64_t Vs, int64_t v0,
                             const int32_t *targets, float *tl) {
  DT_OP("dt_ce_target", R, Vs, 0, 0, 0);
  ce_rows(logits, R, Vs, v0, targets, NULL, tl, 2);
}
extern "C" void dt_ce_backward(const float *logits, int64_t R, int64_t Vs, int64_t v0,
                               const int32_t *targets, const float *mx, const float *sum,
                               float scale, float *dlogits) {
  DT_OP("dt_ce_backward", R, Vs, 0, 0, 0);
  if (R <= 0 || Vs <= 0) return;
  ce_backward_kernel<<<GRID((size_t)(R * Vs))>>>(logits, R, Vs, v0, targets, mx, sum, scale,
                                                 dlogits);
  LAUNCHED();
}
