/* 11_cp: context parallelism.
 *
 * The model is a small causal transformer (common/train: L blocks of
 * x + Attn(x), then x + MLP(x)), and what grows is the sequence: S tokens,
 * whose attention scores grow as S^2. Each rank holds S/N positions of every
 * sequence of the batch, and the whole model, as 05 does; every layer but
 * attention works on its own rows alone. Attention needs every earlier
 * position's keys and values, so they travel:
 *   ring: K and V blocks go around the ring in N-1 hops (the next hop in
 *         flight while this one is computed), each block's result merged
 *         into the running one by its log-sum-exp, exact; blocks above the
 *         causal diagonal are skipped, diagonal blocks masked. Backward goes
 *         around again, recomputing probabilities from the saved log-sum-exp;
 *         dK and dV travel with K and V and end at their owner.
 *   --split zigzag: rank i holds chunks i and 2N-1-i of 2N: every rank the
 *         same share of the causal triangle (contiguous: the last 2N-1 x the first).
 *   --ulysses (ulysses.c): all-to-all from positions to heads and back.
 * The gradients are averaged over the ranks as in 05, each rank's loss a mean
 * over its own tokens. The run (common/train/run.c) does the rest, and ends
 * by training the same model in one process, scores materialised, and
 * comparing (CHECKING.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cp.h"

static int64_t cp_chunk(const model *m, int64_t rank, int64_t j) {
  return m->zigzag && j == 1 ? 2 * m->N - 1 - rank : rank;
}

/* The whole model on every rank; S/N positions of each sequence. */
static void layout(model *m, dt_run *r) {
  dt_train_config *c = &r->c;
  int64_t N = m->world->size, parts = m->zigzag ? 2 * N : N;
  if (strcmp(dt_backend(), "cpu") != 0)
    dt_fail("11_cp runs on the cpu backend only for now: its attention is host loops (build with "
            "BACKEND=cpu)");
  if (c->seq % parts != 0)
    dt_fail("--seq %lld does not split into %lld %s chunks of equal length: choose a multiple "
            "of %lld",
            (long long)c->seq, (long long)parts, m->zigzag ? "zigzag (2N)" : "contiguous (N)",
            (long long)parts);
  if (m->ulysses && c->heads % N != 0)
    dt_fail("--ulysses: %lld heads do not split over %lld ranks; choose --heads a multiple of %lld",
            (long long)c->heads, (long long)N, (long long)N);
  cp_buffers(m, c); /* the sizes (C = S/parts, Sl, R), activations, buffers */
  for (int64_t s = 0; s < N * m->nc; s++) m->chunk[s] = cp_chunk(m, s / m->nc, s % m->nc);
  int64_t P = m->L * dt_params_per_layer(c);
  m->w = dt_alloc_f32((size_t)P, DT_PARAMS);
  m->g = dt_alloc_f32((size_t)P, DT_GRADS);
  dt_run_place(r, dt_run_segment(r, m->w, m->g, (size_t)P), 0, 0, 1, P, P);
  r->replicated = 1;
}

/* One block's attention (ob, lseb) merged into the running result (o, lse)
 * of the same n rows: softmax over the union of their keys, exact. */
static void merge(float *o, float *lse, const float *ob, const float *lseb, int64_t n, int64_t D,
                  int64_t A) {
  /* exercise: merging two blocks of attention by their log-sum-exp */
  int64_t dh = D / A;
  for (int64_t i = 0; i < n * A; i++) { /* row i / A, head i % A */
    float mx = fmaxf(lse[i], lseb[i]), sa = expf(lse[i] - mx), sb = expf(lseb[i] - mx);
    float *oi = o + i / A * D + i % A * dh;
    const float *bi = ob + i / A * D + i % A * dh;
    for (int64_t d = 0; d < dh; d++) oi[d] = (sa * oi[d] + sb * bi[d]) / (sa + sb);
    lse[i] = mx + logf(sa + sb);
  }
  /* end of exercise */
}

/* This rank's queries against the keys and values of rank src: every pair
 * of chunks on or below the causal diagonal, forward or backward. */
static void attend(model *m, int64_t l, const float *kv, float *dkv, int64_t src) {
  int64_t R = m->R, D = m->D, A = m->A, C = m->C;
  const float *q = m->q + l * R * D, *k = kv, *v = kv + R * D;
  double t0 = dt_cpu_now(); /* the rank's own work, whatever shares its core */
  for (int64_t b = 0; b < m->B; b++)
    for (int64_t jq = 0; jq < m->nc; jq++)
      for (int64_t jk = 0; jk < m->nc; jk++) {
        int64_t cq = cp_chunk(m, m->rank, jq), ck = cp_chunk(m, src, jk);
        int64_t rq = b * m->Sl + jq * C, rk = b * m->Sl + jk * C;
        if (ck > cq) continue; /* entirely above the diagonal */
        if (!dkv) {
          m->scores[0] += A * dt_attn_block_forward(q + rq * D, k + rk * D, v + rk * D, C, C, D, A,
                                                    ck == cq, m->ob, m->lseb);
          merge(m->o + l * R * D + rq * D, m->lse + (l * R + rq) * A, m->ob, m->lseb, C, D, A);
        } else
          m->scores[1] += A * dt_attn_block_backward(
                                  q + rq * D, k + rk * D, v + rk * D, m->dout + rq * D,
                                  m->delta + rq * A, m->lse + (l * R + rq) * A, C, C, D, A,
                                  ck == cq, m->dq + rq * D, dkv + rk * D, dkv + R * D + rk * D);
      }
  m->work_seconds += dt_cpu_now() - t0;
}

/* K and V around the ring: at hop j this rank holds rank (me - j)'s. */
static void ring(model *m, int64_t l, int backward) {
  int64_t R = m->R, D = m->D, N = m->N, me = m->rank;
  float *kv = cp_hop_start(&m->kv), *dkv = backward ? cp_hop_start(&m->dkv) : NULL;
  memcpy(kv, m->k + l * R * D, (size_t)(R * D) * 4);
  memcpy(kv + R * D, m->v + l * R * D, (size_t)(R * D) * 4);
  if (dkv) memset(dkv, 0, (size_t)(2 * R * D) * 4);
  for (int64_t hop = 0; hop < N; hop++) {
    /* the next block travels while this one is computed */
    dt_request *in_flight = hop < N - 1 ? cp_hop_post(m, &m->kv) : NULL;
    attend(m, l, kv, dkv, (me - hop + N) % N);
    if (dkv && N > 1) /* dK, dV follow their block; the last hop takes them home */
      dkv = cp_hop_done(&m->dkv, cp_hop_post(m, &m->dkv));
    if (in_flight) kv = cp_hop_done(&m->kv, in_flight);
  }
  if (dkv) memcpy(m->dq + R * D, dkv, (size_t)(2 * R * D) * 4); /* this rank's dK | dV */
}

/* Layer l: x_{l+1} = u + MLP(u), u = x_l + Attn(x_l) Wo. */
static void forward(model *m, int64_t l) {
  int64_t R = m->R, D = m->D, H = m->H, DD = D * D, PL = 4 * DD + 2 * D * H;
  const float *x = m->x + l * R * D, *w = m->w + l * PL;
  float *q = m->q + l * R * D, *k = m->k + l * R * D, *v = m->v + l * R * D;
  float *o = m->o + l * R * D, *lse = m->lse + l * R * m->A, *u = m->u + l * R * D;
  dt_matmul(0, 0, R, D, D, x, w, q, 0);
  dt_matmul(0, 0, R, D, D, x, w + DD, k, 0);
  dt_matmul(0, 0, R, D, D, x, w + 2 * DD, v, 0);
  double t0 = dt_now();
  uint64_t sent = dt_comm_total(m->world).bytes_sent;
  if (m->ulysses)
    ulysses_forward(m, l);
  else {
    memset(o, 0, (size_t)(R * D) * 4);
    for (int64_t i = 0; i < R * m->A; i++) lse[i] = -INFINITY;
    ring(m, l, 0);
  }
  m->bytes[0] += dt_comm_total(m->world).bytes_sent - sent;
  m->attn_seconds += dt_now() - t0;
  memcpy(u, x, (size_t)(R * D) * 4);
  dt_matmul(0, 0, R, D, D, o, w + 3 * DD, u, 1);
  dt_block_forward(u, w + 4 * DD, w + 4 * DD + D * H, m->a + l * R * H, m->h + l * R * H,
                   m->x + (l + 1) * R * D, R, D, H, 1);
}

/* From dx = dL/dx_{l+1} to dL/dx_l, the layer's gradients added to g. */
static void backward(model *m, int64_t l) {
  int64_t R = m->R, D = m->D, H = m->H, DD = D * D, PL = 4 * DD + 2 * D * H;
  const float *x = m->x + l * R * D, *w = m->w + l * PL;
  float *g = m->g + l * PL;
  dt_block_backward(m->u + l * R * D, m->a + l * R * H, m->h + l * R * H, w + 4 * DD,
                    w + 4 * DD + D * H, m->dx, m->du, g + 4 * DD, g + 4 * DD + D * H, m->dh, R, D,
                    H, 1);
  dt_matmul(1, 0, D, D, R, m->o + l * R * D, m->du, g + 3 * DD, 1); /* dWo += o^T du */
  dt_matmul(0, 1, R, D, D, m->du, w + 3 * DD, m->dout, 0);          /* do = du Wo^T */
  double t0 = dt_now();
  uint64_t sent = dt_comm_total(m->world).bytes_sent;
  if (m->ulysses)
    ulysses_backward(m, l);
  else {
    dt_attn_delta(m->dout, m->o + l * R * D, R, D, m->A, m->delta);
    memset(m->dq, 0, (size_t)(R * D) * 4);
    ring(m, l, 1);
  }
  m->bytes[1] += dt_comm_total(m->world).bytes_sent - sent;
  m->attn_seconds += dt_now() - t0;
  memcpy(m->dnext, m->du, (size_t)(R * D) * 4); /* the residual path */
  for (int64_t i = 0; i < 3; i++) {             /* dq, dk, dv back through Wq, Wk, Wv */
    dt_matmul(1, 0, D, D, R, x, m->dq + i * R * D, g + i * DD, 1);
    dt_matmul(0, 1, R, D, D, m->dq + i * R * D, w + i * DD, m->dnext, 1);
  }
  float *t = m->dx;
  m->dx = m->dnext;
  m->dnext = t;
}

/* Every rank takes the same sequences, its own chunks of each; positions
 * from each token's place in the whole sequence. */
static void inputs(model *m, const dt_train_config *c, int64_t step) {
  int64_t D = m->D, C = m->C, Sl = m->Sl;
  dt_step_samples(c, 1, 0, step, m->samples);
  for (int64_t j = 0; j < m->nc; j++)
    dt_make_sequences(c, m->samples, m->B, cp_chunk(m, m->rank, j) * C, C, Sl, m->x + j * C * D,
                      m->y + j * C * D);
  for (int64_t b = 0; b < m->B; b++)
    for (int64_t i = 0; i < Sl; i++)
      dt_add_position(m->x + (b * Sl + i) * D, D, cp_chunk(m, m->rank, i / C) * C + i % C);
}

static double train_step(model *m, dt_run *r, int64_t step) {
  int64_t R = m->R, D = m->D, P = m->L * dt_params_per_layer(&r->c);
  inputs(m, &r->c, step);
  for (int64_t l = 0; l < m->L; l++) forward(m, l);
  double loss = dt_run_loss(r, m->x + m->L * R * D, m->y, m->dx, (size_t)(R * D),
                            1.0 / (double)(R * D)); /* the mean over this rank's tokens */
  dt_zero(m->g, (size_t)P * 4);
  for (int64_t l = m->L - 1; l >= 0; l--) backward(m, l);
  void *g = dt_wire_pack(&m->grads, m->g, (size_t)P, 0, (int)m->N); /* 16 bits: sum of g / N */
  dt_all_reduce(m->world, g, g, (size_t)P, m->grads.type, dt_wire_op(&m->grads, DT_AVG));
  dt_wire_unpack(&m->grads, m->g, (size_t)P, 0);
  return loss;
}

int main(int argc, char **argv) {
  dt_run run = {.c = DT_TRAIN_DEFAULTS};
  run.c.layers = 2;
  run.c.dim = 32;
  run.c.batch = 4;
  run.c.seq = 64;
  run.c.heads = 4;
  run.c.optimizer = "adamw"; /* SGD at 05's lr falls 3x slower here */
  const char *split = "contiguous";
  int verify = 0;
  model m = {0};
  dt_option options[] = {
      DT_TRAIN_OPTIONS(&run.c),
      DT_INT("--seq", &run.c.seq, 1, 1 << 20, "tokens S per sequence (--batch counts sequences)"),
      DT_INT("--heads", &run.c.heads, 1, 4096, "attention heads A (dividing D)"),
      DT_STRING("--split", &split, "contiguous|zigzag",
                "rank i holds chunk i of N, or chunks i and 2N-1-i of 2N"),
      DT_FLAG("--ulysses", &m.ulysses, "all-to-all to heads and back, in place of the ring"),
      DT_FLAG("--verify-merge", &verify, "check the merge of two blocks on known rows first"),
      DT_END};
  dt_lesson lesson = {"11_cp", "context parallel training: each rank holds S/N of every sequence",
                      1};
  dt_comm *world = dt_run_init(&run, &argc, &argv, &lesson, options);
  m.world = world;
  m.zigzag = strcmp(split, "zigzag") == 0;
  layout(&m, &run);
  if (verify) verify_merge(merge);
  dt_run_begin(&run);
  dt_print0("context parallel: %lld tokens of each sequence per rank of S=%lld (%s split, %lld "
            "chunk%s of %lld); %lld heads; attention by %s\n",
            (long long)m.Sl, (long long)m.S, split, (long long)m.nc, m.nc > 1 ? "s" : "",
            (long long)m.C, (long long)m.A,
            m.ulysses ? "all-to-all (Ulysses)" : "ring (K and V travel)");
  for (int64_t step = run.c.start_step; step < run.c.steps; step++) {
    dt_step_begin(&run, step);
    double loss = train_step(&m, &run, step);
    dt_step_update(&run);
    dt_step_end(&run, step, loss);
  }
  dt_run_summary(&run);
  report(&m, &run);
  free(m.samples);
  return dt_run_finish(&run);
}
