/* attention.c: lesson 11's attention, one block of queries against one block
 * of keys, on host rows, the way FlashAttention computes it: for each head, a
 * tile of TILE queries against a tile of TILE keys at a time. A tile's scores
 * and its products (forward: S = Q K^T, O += P V; backward five more) are
 * GEMMs (dt_host_gemm: OpenBLAS on the cpu backend); its exponentials are one
 * loop the compiler vectorizes (gpt_core.h's polynomial: no branch, no call,
 * within 2 ulp of expf); and each key tile is merged into the rows'
 * running result by the running max (online softmax: cp.c's merge, inside a
 * block). A block never stores its n x nk scores, only one tile of them; what
 * it keeps is each row's log-sum-exp, from which backward recomputes every
 * probability. The same math one row and one score at a time, the way to
 * read it first, is in 11_cp/README.md ("The idea"). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn_core.h"
#include "train_internal.h"

/* The cuda backend's tiles are attention_kernels.cu's, over the same row
 * bodies; the materialised form below is host code on either. */
#ifndef DT_CUDA
/* 128 x 128 scores (64 KiB) and backward's dP beside them stay in a core's L2
 * cache, and the GEMMs on them run near the rate of larger ones (the bench's
 * sgemm line). Tiles of queries and keys start at the same rows, so a
 * diagonal block's tiles are either below the diagonal, on it, or skipped. */
enum { TILE = DT_ATTN_TILE };

/* One tile of scores and one of dP, and --precision's rounded copies of the
 * rows a tile reads (4 x TILE x dh): scratch, grown once. */
static struct {
  float *s, *dp, *rows;
  int64_t dh;
} tile;

static void tile_ready(int64_t dh) {
  if (!tile.s) {
    tile.s = dt_host_alloc(TILE * TILE, sizeof(float));
    tile.dp = dt_host_alloc(TILE * TILE, sizeof(float));
  }
  if (dh > tile.dh) {
    free(tile.rows);
    tile.rows = dt_host_alloc((size_t)(4 * TILE * dh), sizeof(float));
    tile.dh = dh;
  }
}

size_t dt_attn_scratch_bytes(void) {
  return tile.s ? (2 * TILE * TILE + 4 * TILE * (size_t)tile.dh) * sizeof(float) : 0;
}

static float round16(float x, dt_dtype t) { return dt_attn_round16(x, t == DT_BF16); }

/* rows x dh of one head (ld apart) as a GEMM reads them: in place, or a
 * rounded copy in slot k of the scratch. */
static const float *operand(const float *x, int64_t ld, int64_t rows, int64_t dh, int k,
                            int64_t *ldo) {
  dt_dtype t = dt_matmul_inputs();
  *ldo = ld;
  if (t == DT_F32) return x;
  float *copy = tile.rows + k * TILE * dh;
  for (int64_t i = 0; i < rows; i++)
    for (int64_t d = 0; d < dh; d++) copy[i * dh + d] = round16(x[i * ld + d], t);
  *ldo = dh;
  return copy;
}

static void round_tile(float *p, int64_t rows, int64_t cols) {
  dt_dtype t = dt_matmul_inputs();
  for (int64_t i = 0; t != DT_F32 && i < rows; i++)
    for (int64_t j = 0; j < cols; j++) p[i * TILE + j] = round16(p[i * TILE + j], t);
}

/* attn_core.h's row bodies over a tile's rows (TILE apart): forward's
 * online softmax, backward's probabilities and dS. */
static inline __attribute__((always_inline)) void
softmax_tile_body(float *restrict s, int64_t rows, int64_t cols, int diagonal, int first,
                  float *restrict mx, float *restrict sum, float *restrict old) {
  for (int64_t i = 0; i < rows; i++)
    dt_attn_softmax_row(s + i * TILE, dt_attn_visible(diagonal, i, cols), cols, first, &mx[i],
                        &sum[i], &old[i]);
}

static inline __attribute__((always_inline)) void
grad_tile_body(float *restrict s, float *restrict dp, int64_t rows, int64_t cols, int diagonal,
               const float *lse, const float *delta, int64_t heads, float scale) {
  for (int64_t i = 0; i < rows; i++)
    dt_attn_grad_row(s + i * TILE, dp + i * TILE, dt_attn_visible(diagonal, i, cols), cols,
                     lse[i * heads], delta[i * heads], scale);
}

/* Wide copies (train_internal.h's WIDE); attn_core.h's lanes fix the order
 * of every sum, so both copies give the same bits. */
static WIDE void softmax_tile_wide(float *s, int64_t rows, int64_t cols, int diagonal, int first,
                                   float *mx, float *sum, float *old) {
  softmax_tile_body(s, rows, cols, diagonal, first, mx, sum, old);
}
static void softmax_tile(float *s, int64_t rows, int64_t cols, int diagonal, int first, float *mx,
                         float *sum, float *old) {
  if (HAVE_WIDE)
    softmax_tile_wide(s, rows, cols, diagonal, first, mx, sum, old);
  else
    softmax_tile_body(s, rows, cols, diagonal, first, mx, sum, old);
}
static WIDE void grad_tile_wide(float *s, float *dp, int64_t rows, int64_t cols, int diagonal,
                                const float *lse, const float *delta, int64_t heads, float scale) {
  grad_tile_body(s, dp, rows, cols, diagonal, lse, delta, heads, scale);
}
static void grad_tile(float *s, float *dp, int64_t rows, int64_t cols, int diagonal,
                      const float *lse, const float *delta, int64_t heads, float scale) {
  if (HAVE_WIDE)
    grad_tile_wide(s, dp, rows, cols, diagonal, lse, delta, heads, scale);
  else
    grad_tile_body(s, dp, rows, cols, diagonal, lse, delta, heads, scale);
}

/* Rows of the tile at row `at` of n (the last tile may be short). */
static int64_t tile_rows(int64_t n, int64_t at) { return n - at < TILE ? n - at : TILE; }

/* The tile of keys at j0 for the queries at i0 (head h): its rows, whether
 * it sits on a causal block's diagonal, and K, V as the GEMMs read them. A
 * causal block's query tile sees the key tiles up to its own. */
typedef struct {
  int64_t rows, lk, lv;
  int diagonal;
  const float *k, *v;
} key_tile;
static int64_t key_tiles_end(int causal, int64_t i0, int64_t n, int64_t nk) {
  return causal ? i0 + tile_rows(n, i0) : nk;
}
static key_tile keys_at(const float *k, const float *v, int64_t nk, int64_t W, int64_t dh,
                        int64_t h, int64_t i0, int64_t j0, int causal) {
  key_tile t = {.rows = tile_rows(nk, j0), .diagonal = causal && j0 == i0};
  t.k = operand(k + j0 * W + h * dh, W, t.rows, dh, 1, &t.lk);
  t.v = operand(v + j0 * W + h * dh, W, t.rows, dh, 2, &t.lv);
  return t;
}

static int64_t scores_of(int64_t n, int64_t nk, int causal) {
  return causal ? n * (n + 1) / 2 : n * nk;
}

int64_t dt_attn_block_forward(const float *q, const float *k, const float *v, int64_t n, int64_t nk,
                              int64_t W, int64_t heads, int causal, float *o, float *lse) {
  DT_OP("dt_attn_block_forward", n, W, heads, causal, nk);
  DT_KERNEL("dt_attn_block_forward", q, k, v, o, lse);
  int64_t dh = W / heads, lq;
  float scale = 1.0f / sqrtf((float)dh), mx[TILE], sum[TILE], old[TILE];
  tile_ready(dh);
  for (int64_t h = 0; h < heads; h++)
    for (int64_t i0 = 0; i0 < n; i0 += TILE) {
      int64_t bq = tile_rows(n, i0);
      const float *qt = operand(q + i0 * W + h * dh, W, bq, dh, 0, &lq);
      float *ot = o + i0 * W + h * dh;
      for (int64_t j0 = 0; j0 < key_tiles_end(causal, i0, n, nk); j0 += TILE) {
        key_tile t = keys_at(k, v, nk, W, dh, h, i0, j0, causal);
        dt_host_gemm(0, 1, bq, t.rows, dh, scale, qt, lq, t.k, t.lk, 0, tile.s,
                     TILE); /* S = QK^T */
        softmax_tile(tile.s, bq, t.rows, t.diagonal, j0 == 0, mx, sum, old);
        for (int64_t i = 0; i < bq; i++) /* the output so far, rescaled to the new max */
          for (int64_t d = 0; d < dh; d++) ot[i * W + d] = j0 ? ot[i * W + d] * old[i] : 0;
        round_tile(tile.s, bq, t.rows);
        dt_host_gemm(0, 0, bq, dh, t.rows, 1, tile.s, TILE, t.v, t.lv, 1, ot, W); /* O += P V */
      }
      for (int64_t i = 0; i < bq; i++)
        lse[(i0 + i) * heads + h] = dt_attn_finish_row(ot + i * W, dh, mx[i], sum[i]);
    }
  return scores_of(n, nk, causal);
}

void dt_attn_delta(const float *dout, const float *o, int64_t n, int64_t W, int64_t heads,
                   float *delta) {
  DT_OP("dt_attn_delta", n, W, heads, 0, 0);
  DT_KERNEL("dt_attn_delta", dout, o, delta);
  int64_t dh = W / heads;
  for (int64_t i = 0; i < n; i++)
    for (int64_t h = 0; h < heads; h++)
      delta[i * heads + h] = dt_attn_delta_row(dout + i * W + h * dh, o + i * W + h * dh, dh);
}

int64_t dt_attn_block_backward(const float *q, const float *k, const float *v, const float *dout,
                               const float *delta, const float *lse, int64_t n, int64_t nk,
                               int64_t W, int64_t heads, int causal, float *dq, float *dk,
                               float *dv) {
  DT_OP("dt_attn_block_backward", n, W, heads, causal, nk);
  DT_KERNEL("dt_attn_block_backward", q, k, v, dout, delta, lse, dq, dk, dv);
  int64_t dh = W / heads, lq, lg;
  float scale = 1.0f / sqrtf((float)dh);
  tile_ready(dh);
  for (int64_t h = 0; h < heads; h++)
    for (int64_t i0 = 0; i0 < n; i0 += TILE) {
      int64_t bq = tile_rows(n, i0);
      const float *qt = operand(q + i0 * W + h * dh, W, bq, dh, 0, &lq);
      const float *gt = operand(dout + i0 * W + h * dh, W, bq, dh, 3, &lg);
      for (int64_t j0 = 0; j0 < key_tiles_end(causal, i0, n, nk); j0 += TILE) {
        key_tile t = keys_at(k, v, nk, W, dh, h, i0, j0, causal);
        int64_t bk = t.rows;
        dt_host_gemm(0, 1, bq, bk, dh, scale, qt, lq, t.k, t.lk, 0, tile.s, TILE); /* S = Q K^T */
        dt_host_gemm(0, 1, bq, bk, dh, 1, gt, lg, t.v, t.lv, 0, tile.dp, TILE);    /* dP = dO V^T */
        grad_tile(tile.s, tile.dp, bq, bk, t.diagonal, lse + i0 * heads + h, delta + i0 * heads + h,
                  heads, scale); /* P from the saved lse, dS */
        round_tile(tile.s, bq, bk);
        round_tile(tile.dp, bq, bk);
        float *dkt = dk + j0 * W + h * dh, *dvt = dv + j0 * W + h * dh;
        dt_host_gemm(1, 0, bk, dh, bq, 1, tile.s, TILE, gt, lg, 1, dvt, W);  /* dV += P^T dO */
        dt_host_gemm(1, 0, bk, dh, bq, 1, tile.dp, TILE, qt, lq, 1, dkt, W); /* dK += dS^T Q */
        dt_host_gemm(0, 0, bq, dh, bk, 1, tile.dp, TILE, t.k, t.lk, 1, dq + i0 * W + h * dh,
                     W); /* dQ += dS K */
      }
    }
  return scores_of(n, nk, causal);
}

/* The floor to hold attention's rate against: the seven GEMMs of one pair of
 * full tiles (forward's two, backward's five), alone, repeated for about
 * 15 ms of CPU time, the best of three. */
double dt_attn_gemm_rate(int64_t dh) {
  tile_ready(dh);
  float *a = tile.rows, *b = a + TILE * dh, *c = b + TILE * dh, *d = c + TILE * dh;
  for (int64_t i = 0; i < 4 * TILE * dh; i++) a[i] = (float)(i % 7) * 0.1f; /* a, b in; c, d out */
  double best = 0, flops = 7.0 * 2 * TILE * TILE * (double)dh;
  for (int round = 0; round < 3; round++) {
    int64_t reps = 0;
    double t0 = dt_cpu_now(), t = 0;
    for (; t < 0.015; reps++, t = dt_cpu_now() - t0) {
      dt_host_gemm(0, 1, TILE, TILE, dh, 1, a, dh, b, dh, 0, tile.s, TILE);
      dt_host_gemm(0, 0, TILE, dh, TILE, 1, tile.s, TILE, b, dh, 1, c, dh);
      dt_host_gemm(0, 1, TILE, TILE, dh, 1, a, dh, b, dh, 0, tile.s, TILE);
      dt_host_gemm(0, 1, TILE, TILE, dh, 1, b, dh, a, dh, 0, tile.dp, TILE);
      dt_host_gemm(1, 0, TILE, dh, TILE, 1, tile.s, TILE, a, dh, 1, d, dh);
      dt_host_gemm(1, 0, TILE, dh, TILE, 1, tile.dp, TILE, b, dh, 1, d, dh);
      dt_host_gemm(0, 0, TILE, dh, TILE, 1, tile.dp, TILE, a, dh, 1, c, dh);
    }
    best = fmax(best, flops * (double)reps / t / 1e9);
  }
  return best;
}

void dt_attn_start(float *o, float *lse, int64_t n, int64_t W, int64_t heads) {
  DT_OP("dt_attn_start", n, W, heads, 0, 0);
  DT_KERNEL("dt_attn_start", o, lse);
  memset(o, 0, (size_t)(n * W) * 4);
  for (int64_t i = 0; i < n * heads; i++) lse[i] = -INFINITY;
}

void dt_attn_merge(float *o, float *lse, const float *ob, const float *lseb, int64_t n, int64_t W,
                   int64_t heads) {
  DT_OP("dt_attn_merge", n, W, heads, 0, 0);
  DT_KERNEL("dt_attn_merge", o, lse, ob, lseb);
  int64_t dh = W / heads;
  for (int64_t i = 0; i < n * heads; i++) /* row i / heads, head i % heads */
    lse[i] = dt_attn_merge_row(o + i / heads * W + i % heads * dh, lse[i],
                               ob + i / heads * W + i % heads * dh, lseb[i], dh);
}
void dt_softmax_causal(float *p, int64_t S, float scale) {
  DT_KERNEL("dt_softmax_causal", p);
  for (int64_t i = 0; i < S; i++) dt_attn_causal_softmax_row(p + i * S, i, S, scale);
}

void dt_softmax_causal_backward(const float *p, float *dp, int64_t S, float scale) {
  DT_KERNEL("dt_softmax_causal_backward", p, dp);
  for (int64_t i = 0; i < S; i++) dt_attn_softmax_grad_row(p + i * S, dp + i * S, S, scale);
}
#endif

/* ------------------------------------------------ the scores materialised */
/* The plainest form, the yardsticks' (reference_attn.c, the GPT's with
 * `materialised`): one sequence at a time, each head's S x S scores through
 * dt_matmul, masked, softmaxed with expf and kept; no tiles, no log-sum-exp.
 * On the backend's memory (the softmax's rows attn_core.h's, as the tiles'). */
void dt_heads_scratch_init(dt_heads_scratch *s, int64_t S, int64_t D, int64_t heads) {
  *s = (dt_heads_scratch){.S = S, .D = D, .heads = heads, .dh = D / heads};
  float **sc[] = {&s->qh, &s->kh, &s->vh, &s->oh};
  for (int i = 0; i < 4; i++) *sc[i] = dt_alloc_f32((size_t)(S * s->dh), DT_OTHER);
  s->dp = dt_alloc_f32((size_t)(S * S), DT_OTHER);
}

void dt_heads_scratch_free(dt_heads_scratch *s) {
  float *sc[] = {s->qh, s->kh, s->vh, s->oh, s->dp};
  for (int i = 0; i < 5; i++) dt_free(sc[i]);
}

/* Columns h dh .. of rows [S, D] to a contiguous [S, dh] and back. */
static void take(const dt_heads_scratch *s, const float *x, int64_t h, float *xh) {
  size_t row = (size_t)s->dh * 4;
  dt_copy_2d(xh, row, x + h * s->dh, (size_t)s->D * 4, row, (size_t)s->S);
}
static void put(const dt_heads_scratch *s, const float *xh, int64_t h, float *x) {
  size_t row = (size_t)s->dh * 4;
  dt_copy_2d(x + h * s->dh, (size_t)s->D * 4, xh, row, row, (size_t)s->S);
}

/* One sequence: p [heads][S,S] the probabilities, o [S,D]. */
void dt_attend_materialised(dt_heads_scratch *s, const float *q, const float *k, const float *v,
                            float *p, float *o) {
  int64_t S = s->S;
  float scale = 1.0f / sqrtf((float)s->dh);
  for (int64_t h = 0; h < s->heads; h++) {
    float *ph = p + h * S * S;
    take(s, q, h, s->qh);
    take(s, k, h, s->kh);
    take(s, v, h, s->vh);
    dt_matmul(0, 1, S, S, s->dh, s->qh, s->kh, ph, 0);
    dt_softmax_causal(ph, S, scale);
    dt_matmul(0, 0, S, s->dh, S, ph, s->vh, s->oh, 0);
    put(s, s->oh, h, o);
  }
}

/* Back from do [S,D]: dq, dk, dv [S,D] written. */
void dt_attend_materialised_backward(dt_heads_scratch *s, const float *q, const float *k,
                                     const float *v, const float *p, const float *dout, float *dq,
                                     float *dk, float *dv) {
  int64_t S = s->S, dh = s->dh;
  float scale = 1.0f / sqrtf((float)dh);
  for (int64_t h = 0; h < s->heads; h++) {
    const float *ph = p + h * S * S;
    take(s, q, h, s->qh);
    take(s, k, h, s->kh);
    take(s, v, h, s->vh);
    take(s, dout, h, s->oh);
    dt_matmul(0, 1, S, S, dh, s->oh, s->vh, s->dp, 0); /* dP = dO V^T */
    dt_softmax_causal_backward(ph, s->dp, S, scale);   /* dS */
    dt_matmul(1, 0, S, dh, S, ph, s->oh, s->vh, 0);    /* dV = P^T dO */
    put(s, s->vh, h, dv);
    dt_matmul(0, 0, S, dh, S, s->dp, s->kh, s->oh, 0); /* dQ = dS K */
    put(s, s->oh, h, dq);
    dt_matmul(1, 0, S, dh, S, s->dp, s->qh, s->kh, 0); /* dK = dS^T Q */
    put(s, s->kh, h, dk);
  }
}
