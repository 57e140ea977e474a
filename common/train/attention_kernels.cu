/* attention_kernels.cu: attention.c's tiles on the GPU, the same walk (for
 * each tile of TILE queries, the tiles of keys it sees, the online softmax
 * between them) with every head of a tile at once: each GEMM is one
 * strided-batched cuBLAS call over the heads (head h's columns start at
 * h dh, rows W apart, so the heads are dh floats apart), and each row body
 * of attn_core.h one thread per head and row of the tile, as the cpu loops
 * run it. What is the GPU's own: the launch geometry, the heads' tiles side
 * by side in the scratch, and the 16-bit rounding of whole blocks at once
 * (the cpu rounds a tile's rows as it reaches them: the same values). */
#include "attn_core.h"
#include "blas_cuda.h"
#include "train_internal.h"

constexpr int64_t TILE = DT_ATTN_TILE;

#define ROWS(n)    (unsigned)(((n) + 255) / 256), 256, 0, dt_stream()
#define INDEX      (blockIdx.x * (size_t)blockDim.x + threadIdx.x)
#define LAUNCHED() CHECK_CUDA(cudaGetLastError())

/* Per head: a tile of scores and one of dP (TILE^2 each), the rows'
 * running max, sum and rescale factor (TILE each); with 16-bit inputs the
 * block's q, k, v and dout rounded. Grown, never shrunk. */
static struct {
  float *s, *dp, *mx, *sum, *old, *rounded;
  size_t heads, rounded_n;
} tile;

static void tile_ready(int64_t heads) {
  if ((size_t)heads <= tile.heads) return;
  float **all[] = {&tile.s, &tile.dp, &tile.mx, &tile.sum, &tile.old};
  for (int i = 0; i < 5; i++) dt_free(*all[i]);
  tile.s = dt_alloc_f32((size_t)(heads * TILE * TILE), DT_OTHER);
  tile.dp = dt_alloc_f32((size_t)(heads * TILE * TILE), DT_OTHER);
  tile.mx = dt_alloc_f32((size_t)(heads * TILE), DT_OTHER);
  tile.sum = dt_alloc_f32((size_t)(heads * TILE), DT_OTHER);
  tile.old = dt_alloc_f32((size_t)(heads * TILE), DT_OTHER);
  tile.heads = (size_t)heads;
}

extern "C" size_t dt_attn_scratch_bytes(void) {
  return (2 * TILE * TILE + 3 * TILE) * tile.heads * sizeof(float) + tile.rounded_n * sizeof(float);
}

__global__ static void round_kernel(const float *x, float *out, size_t n, int bf16) {
  size_t i = INDEX;
  if (i < n) out[i] = dt_attn_round16(x[i], bf16);
}

/* --precision bf16|fp16: the count rows of x (W wide) rounded, in slot k of
 * four; fp32: x itself. */
static const float *operand(const float *x, int64_t count, int64_t W, int k, int64_t slot_n) {
  dt_dtype t = dt_matmul_inputs();
  if (t == DT_F32) return x;
  if ((size_t)(4 * slot_n) > tile.rounded_n) {
    dt_free(tile.rounded);
    tile.rounded = dt_alloc_f32((size_t)(4 * slot_n), DT_OTHER);
    tile.rounded_n = (size_t)(4 * slot_n);
  }
  float *out = tile.rounded + k * slot_n;
  size_t n = (size_t)(count * W);
  if (n) {
    round_kernel<<<ROWS(n)>>>(x, out, n, t == DT_BF16);
    LAUNCHED();
  }
  return out;
}

/* Row-major C = alpha op(A) op(B) + beta C for every head at once (A, B, C
 * stride apart): column-major cuBLAS computes C^T = op(B)^T op(A)^T. */
static void gemm_heads(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                       int64_t lda, int64_t sa, const float *B, int64_t ldb, int64_t sb, float beta,
                       float *C, int64_t ldc, int64_t sc, int64_t heads) {
  CHECK_CUBLAS(cublasSgemmStridedBatched(
      dt_blas(), tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)N, (int)M,
      (int)K, &alpha, B, (int)ldb, (long long)sb, A, (int)lda, (long long)sa, &beta, C, (int)ldc,
      (long long)sc, (int)heads));
}

/* The tile of queries at i0 against the keys at j0: rows, cols, and
 * whether it sits on a causal block's diagonal. */
typedef struct {
  int64_t i0, j0, rows, cols;
  int diagonal;
} pair;

/* Forward: one thread per head and row of the tile. The row's online
 * softmax, its output so far rescaled to the new max, and P rounded for
 * the GEMM after the sum has taken it unrounded (attention.c's order). */
__global__ static void softmax_kernel(pair t, int64_t heads, int64_t W, float *s, float *mx,
                                      float *sum, float *old, float *o, int round16) {
  size_t e = INDEX;
  if (e >= (size_t)(heads * t.rows)) return;
  int64_t h = (int64_t)e / t.rows, i = (int64_t)e % t.rows, dh = W / heads, r = h * TILE + i;
  float *row = s + h * TILE * TILE + i * TILE, *oi = o + (t.i0 + i) * W + h * dh;
  dt_attn_softmax_row(row, dt_attn_visible(t.diagonal, i, t.cols), t.cols, t.j0 == 0, &mx[r],
                      &sum[r], &old[r]);
  for (int64_t d = 0; d < dh; d++) oi[d] = t.j0 ? dt_rn_mul(oi[d], old[r]) : 0;
  for (int64_t j = 0; round16 && j < t.cols; j++) row[j] = dt_attn_round16(row[j], round16 == 2);
}

__global__ static void finish_kernel(int64_t i0, int64_t rows, int64_t heads, int64_t W,
                                     const float *mx, const float *sum, float *o, float *lse) {
  size_t e = INDEX;
  if (e >= (size_t)(heads * rows)) return;
  int64_t h = (int64_t)e / rows, i = (int64_t)e % rows, dh = W / heads;
  lse[(i0 + i) * heads + h] =
      dt_attn_finish_row(o + (i0 + i) * W + h * dh, dh, mx[h * TILE + i], sum[h * TILE + i]);
}

/* Backward: P from the saved lse and dS, one thread per head and row, both
 * rounded for the GEMMs after. */
__global__ static void grad_kernel(pair t, int64_t heads, float *s, float *dp, const float *lse,
                                   const float *delta, float scale, int round16) {
  size_t e = INDEX;
  if (e >= (size_t)(heads * t.rows)) return;
  int64_t h = (int64_t)e / t.rows, i = (int64_t)e % t.rows, at = h * TILE * TILE + i * TILE;
  int64_t r = (t.i0 + i) * heads + h;
  dt_attn_grad_row(s + at, dp + at, dt_attn_visible(t.diagonal, i, t.cols), t.cols, lse[r],
                   delta[r], scale);
  for (int64_t j = 0; round16 && j < t.cols; j++) {
    s[at + j] = dt_attn_round16(s[at + j], round16 == 2);
    dp[at + j] = dt_attn_round16(dp[at + j], round16 == 2);
  }
}

/* 0: fp32 inputs; 1: fp16; 2: bf16 (the kernels' flag) */
static int round_flag(void) {
  dt_dtype t = dt_matmul_inputs();
  return t == DT_F32 ? 0 : t == DT_BF16 ? 2 : 1;
}

static int64_t tile_rows(int64_t n, int64_t at) { return n - at < TILE ? n - at : TILE; }
static int64_t key_tiles_end(int causal, int64_t i0, int64_t n, int64_t nk) {
  return causal ? i0 + tile_rows(n, i0) : nk;
}
static int64_t scores_of(int64_t n, int64_t nk, int causal) {
  return causal ? n * (n + 1) / 2 : n * nk;
}

/* A block's start: the scratch for its heads, and q, k, v as its GEMMs
 * read them (rounded with 16-bit inputs); returns the rounded copies' slot. */
static int64_t block_inputs(const float **q, const float **k, const float **v, int64_t n,
                            int64_t nk, int64_t W, int64_t heads) {
  int64_t slot = (n > nk ? n : nk) * W;
  tile_ready(heads);
  *q = operand(*q, n, W, 0, slot);
  *k = operand(*k, nk, W, 1, slot);
  *v = operand(*v, nk, W, 2, slot);
  return slot;
}

extern "C" int64_t dt_attn_block_forward(const float *q, const float *k, const float *v, int64_t n,
                                         int64_t nk, int64_t W, int64_t heads, int causal, float *o,
                                         float *lse) {
  DT_OP("dt_attn_block_forward", n, W, heads, causal, nk);
  int64_t dh = W / heads, TT = TILE * TILE;
  block_inputs(&q, &k, &v, n, nk, W, heads);
  float scale = 1.0f / sqrtf((float)dh);
  for (int64_t i0 = 0; i0 < n; i0 += TILE) {
    int64_t bq = tile_rows(n, i0);
    for (int64_t j0 = 0; j0 < key_tiles_end(causal, i0, n, nk); j0 += TILE) {
      pair t = {i0, j0, bq, tile_rows(nk, j0), causal && j0 == i0};
      gemm_heads(0, 1, bq, t.cols, dh, scale, q + i0 * W, W, dh, k + j0 * W, W, dh, 0, tile.s, TILE,
                 TT, heads); /* S = Q K^T */
      softmax_kernel<<<ROWS(heads * bq)>>>(t, heads, W, tile.s, tile.mx, tile.sum, tile.old, o,
                                           round_flag());
      LAUNCHED();
      gemm_heads(0, 0, bq, dh, t.cols, 1, tile.s, TILE, TT, v + j0 * W, W, dh, 1, o + i0 * W, W, dh,
                 heads); /* O += P V */
    }
    finish_kernel<<<ROWS(heads * bq)>>>(i0, bq, heads, W, tile.mx, tile.sum, o, lse);
    LAUNCHED();
  }
  return scores_of(n, nk, causal);
}

__global__ static void delta_kernel(const float *dout, const float *o, int64_t n, int64_t W,
                                    int64_t heads, float *delta) {
  size_t e = INDEX;
  if (e >= (size_t)(n * heads)) return;
  int64_t i = (int64_t)e / heads, h = (int64_t)e % heads, dh = W / heads;
  delta[e] = dt_attn_delta_row(dout + i * W + h * dh, o + i * W + h * dh, dh);
}

extern "C" void dt_attn_delta(const float *dout, const float *o, int64_t n, int64_t W,
                              int64_t heads, float *delta) {
  DT_OP("dt_attn_delta", n, W, heads, 0, 0);
  if (n <= 0) return;
  delta_kernel<<<ROWS(n * heads)>>>(dout, o, n, W, heads, delta);
  LAUNCHED();
}

/* The five GEMMs of one pair of tiles, every head at once. */
static void grad_gemms(const pair *t, int64_t W, int64_t dh, int64_t heads, const float *q,
                       const float *k, const float *g, float *dq, float *dk, float *dv) {
  int64_t TT = TILE * TILE, bq = t->rows, bk = t->cols, i0 = t->i0, j0 = t->j0;
  gemm_heads(1, 0, bk, dh, bq, 1, tile.s, TILE, TT, g + i0 * W, W, dh, 1, dv + j0 * W, W, dh,
             heads); /* dV += P^T dO */
  gemm_heads(1, 0, bk, dh, bq, 1, tile.dp, TILE, TT, q + i0 * W, W, dh, 1, dk + j0 * W, W, dh,
             heads); /* dK += dS^T Q */
  gemm_heads(0, 0, bq, dh, bk, 1, tile.dp, TILE, TT, k + j0 * W, W, dh, 1, dq + i0 * W, W, dh,
             heads); /* dQ += dS K */
}

extern "C" int64_t dt_attn_block_backward(const float *q, const float *k, const float *v,
                                          const float *dout, const float *delta, const float *lse,
                                          int64_t n, int64_t nk, int64_t W, int64_t heads,
                                          int causal, float *dq, float *dk, float *dv) {
  DT_OP("dt_attn_block_backward", n, W, heads, causal, nk);
  int64_t dh = W / heads, TT = TILE * TILE, slot = block_inputs(&q, &k, &v, n, nk, W, heads);
  float scale = 1.0f / sqrtf((float)dh);
  const float *g = operand(dout, n, W, 3, slot);
  for (int64_t i0 = 0; i0 < n; i0 += TILE)
    for (int64_t j0 = 0; j0 < key_tiles_end(causal, i0, n, nk); j0 += TILE) {
      pair t = {i0, j0, tile_rows(n, i0), tile_rows(nk, j0), causal && j0 == i0};
      gemm_heads(0, 1, t.rows, t.cols, dh, scale, q + i0 * W, W, dh, k + j0 * W, W, dh, 0, tile.s,
                 TILE, TT, heads); /* S = Q K^T */
      gemm_heads(0, 1, t.rows, t.cols, dh, 1, g + i0 * W, W, dh, v + j0 * W, W, dh, 0, tile.dp,
                 TILE, TT, heads); /* dP = dO V^T */
      grad_kernel<<<ROWS(heads * t.rows)>>>(t, heads, tile.s, tile.dp, lse, delta, scale,
                                            round_flag());
      LAUNCHED();
      grad_gemms(&t, W, dh, heads, q, k, g, dq, dk, dv);
    }
  return scores_of(n, nk, causal);
}

/* What one GPU's cuBLAS reaches at the tiles' shapes: attention.c's seven
 * GEMMs of one pair of full tiles, one head, timed with events over about
 * 15 ms, the best of three (the figure 11's report sets beside the blocks'
 * rate; on the GPU a single head's tiles are far too small to fill it). */
extern "C" double dt_attn_gemm_rate(int64_t dh) {
  int64_t TT = TILE * TILE;
  float *a = dt_alloc_f32((size_t)(4 * TILE * dh + 2 * TT), DT_OTHER);
  float *b = a + TILE * dh, *c = b + TILE * dh, *d = c + TILE * dh, *s = d + TILE * dh, *p = s + TT;
  cudaEvent_t ev[2];
  for (int i = 0; i < 2; i++) CHECK_CUDA(cudaEventCreate(&ev[i]));
  double best = 0, flops = 7.0 * 2 * TILE * TILE * (double)dh;
  for (int round = 0; round < 3; round++) {
    int64_t reps = 0;
    float ms = 0;
    CHECK_CUDA(cudaEventRecord(ev[0], dt_stream()));
    for (; ms < 15; reps++) {
      gemm_heads(0, 1, TILE, TILE, dh, 1, a, dh, 0, b, dh, 0, 0, s, TILE, 0, 1);
      gemm_heads(0, 0, TILE, dh, TILE, 1, s, TILE, 0, b, dh, 0, 1, c, dh, 0, 1);
      gemm_heads(0, 1, TILE, TILE, dh, 1, a, dh, 0, b, dh, 0, 0, s, TILE, 0, 1);
      gemm_heads(0, 1, TILE, TILE, dh, 1, b, dh, 0, a, dh, 0, 0, p, TILE, 0, 1);
      gemm_heads(1, 0, TILE, dh, TILE, 1, s, TILE, 0, a, dh, 0, 1, d, dh, 0, 1);
      gemm_heads(1, 0, TILE, dh, TILE, 1, p, TILE, 0, b, dh, 0, 1, d, dh, 0, 1);
      gemm_heads(0, 0, TILE, dh, TILE, 1, p, TILE, 0, a, dh, 0, 1, c, dh, 0, 1);
      CHECK_CUDA(cudaEventRecord(ev[1], dt_stream()));
      CHECK_CUDA(cudaEventSynchronize(ev[1])); /* a figure for the host: the wait is the point */
      CHECK_CUDA(cudaEventElapsedTime(&ms, ev[0], ev[1]));
    }
    best = fmax(best, flops * (double)reps / (ms * 1e-3) / 1e9);
  }
  for (int i = 0; i < 2; i++) CHECK_CUDA(cudaEventDestroy(ev[i]));
  dt_free(a);
  return best;
}

/* ----------------------------------------------- the ring's running result */
__global__ static void lse_empty_kernel(float *lse, size_t n) {
  size_t i = INDEX;
  if (i < n) lse[i] = -INFINITY;
}

extern "C" void dt_attn_start(float *o, float *lse, int64_t n, int64_t W, int64_t heads) {
  DT_OP("dt_attn_start", n, W, heads, 0, 0);
  dt_zero(o, (size_t)(n * W) * 4);
  if (n * heads <= 0) return;
  lse_empty_kernel<<<ROWS(n * heads)>>>(lse, (size_t)(n * heads));
  LAUNCHED();
}

__global__ static void merge_kernel(float *o, float *lse, const float *ob, const float *lseb,
                                    int64_t n, int64_t W, int64_t heads) {
  size_t e = INDEX;
  if (e >= (size_t)(n * heads)) return;
  int64_t at = (int64_t)e / heads * W + (int64_t)e % heads * (W / heads);
  lse[e] = dt_attn_merge_row(o + at, lse[e], ob + at, lseb[e], W / heads);
}

extern "C" void dt_attn_merge(float *o, float *lse, const float *ob, const float *lseb, int64_t n,
                              int64_t W, int64_t heads) {
  DT_OP("dt_attn_merge", n, W, heads, 0, 0);
  if (n * heads <= 0) return;
  merge_kernel<<<ROWS(n * heads)>>>(o, lse, ob, lseb, n, W, heads);
  LAUNCHED();
}

/* ------------------------------------------------ the scores materialised */
__global__ static void softmax_causal_kernel(float *p, int64_t S, float scale) {
  size_t i = INDEX;
  if (i < (size_t)S) dt_attn_causal_softmax_row(p + i * S, (int64_t)i, S, scale);
}

__global__ static void softmax_grad_kernel(const float *p, float *dp, int64_t S, float scale) {
  size_t i = INDEX;
  if (i < (size_t)S) dt_attn_softmax_grad_row(p + i * S, dp + i * S, S, scale);
}

extern "C" void dt_softmax_causal(float *p, int64_t S, float scale) {
  if (S <= 0) return;
  softmax_causal_kernel<<<ROWS(S)>>>(p, S, scale);
  LAUNCHED();
}

extern "C" void dt_softmax_causal_backward(const float *p, float *dp, int64_t S, float scale) {
  if (S <= 0) return;
  softmax_grad_kernel<<<ROWS(S)>>>(p, dp, S, scale);
  LAUNCHED();
}
