/* 11_cp: context parallelism.
 *
 * The model is a small causal transformer (common/train: L blocks of
 * x + Attn(x), then x + MLP(x)), and what grows is the sequence: S tokens,
 * whose attention scores grow as S^2. Each rank holds S/N positions of every
 * sequence of the batch, and the whole model, as 05 does; every layer but
 * attention works on its own rows alone. Attention needs every earlier
 * position's keys and values, so they travel:
 *   ring (ring.c, the pieces lesson 12 reuses): K and V blocks go around the
 *         ring in N-1 hops (the next hop in flight while this one is
 *         computed), each block's result merged into the running one by its
 *         log-sum-exp, exact; blocks above the causal diagonal are skipped,
 *         diagonal blocks masked. Backward goes around again, recomputing
 *         probabilities from the saved log-sum-exp; dK and dV travel with K
 *         and V and end at their owner.
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

/* The whole model on every rank; S/N positions of each sequence. */
static void layout(model *m, dt_run *r) {
  dt_train_config *c = &r->c;
  int64_t N = m->world->size, parts = m->zigzag ? 2 * N : N;
  if (c->seq % parts != 0)
    dt_fail("--seq %lld does not split into %lld %s chunks of equal length: choose a multiple "
            "of %lld",
            (long long)c->seq, (long long)parts, m->zigzag ? "zigzag (2N)" : "contiguous (N)",
            (long long)parts);
  if (m->ulysses && c->heads % N != 0)
    dt_fail("--ulysses: %lld heads do not split over %lld ranks; choose --heads a multiple of %lld",
            (long long)c->heads, (long long)N, (long long)N);
  cp_buffers(m, c); /* the split (ring.c), the sizes (C = S/parts, Sl, R), activations */
  int64_t P = m->L * dt_params_per_layer(c);
  m->w = dt_alloc_f32((size_t)P, DT_PARAMS);
  m->g = dt_alloc_f32((size_t)P, DT_GRADS);
  dt_run_place(r, dt_run_segment(r, m->w, m->g, (size_t)P), 0, 0, 1, P, P);
  r->replicated = 1;
  m->kinks = r->kinks;
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
  else
    cp_ring_forward(&m->cr, q, k, v, o, lse);
  m->bytes[0] += dt_comm_total(m->world).bytes_sent - sent;
  m->attn_seconds += dt_now() - t0;
  dt_copy(u, x, (size_t)(R * D) * 4);
  dt_matmul(0, 0, R, D, D, o, w + 3 * DD, u, 1);
  dt_block_forward(u, w + 4 * DD, w + 4 * DD + D * H, m->a + l * R * H, m->h + l * R * H,
                   m->x + (l + 1) * R * D, R, D, H, 1, &(dt_rows){m->kinks, m->keys, l, 0});
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
  else
    cp_ring_backward(&m->cr, m->q + l * R * D, m->k + l * R * D, m->v + l * R * D, m->o + l * R * D,
                     m->lse + l * R * m->A, m->dout, m->dq);
  m->bytes[1] += dt_comm_total(m->world).bytes_sent - sent;
  m->attn_seconds += dt_now() - t0;
  dt_copy(m->dnext, m->du, (size_t)(R * D) * 4); /* the residual path */
  for (int64_t i = 0; i < 3; i++) {              /* dq, dk, dv back through Wq, Wk, Wv */
    dt_matmul(1, 0, D, D, R, x, m->dq + i * R * D, g + i * DD, 1);
    dt_matmul(0, 1, R, D, D, m->dq + i * R * D, w + i * DD, m->dnext, 1);
  }
  float *t = m->dx;
  m->dx = m->dnext;
  m->dnext = t;
}

static double train_step(model *m, dt_run *r, int64_t step) {
  int64_t R = m->R, D = m->D, P = m->L * dt_params_per_layer(&r->c);
  dt_step_samples(&r->c, 1, 0, step, m->samples); /* every rank the same sequences */
  cp_inputs(&m->cr, &r->c, m->samples, m->x, m->y);
  cp_keys(&m->cr, m->samples, m->keys); /* the rows, for the check */
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
  run.c.model = DT_TRANSFORMER;
  run.c.seq = 64;
  run.c.heads = 4;
  run.c.optimizer = "adamw"; /* SGD at 05's lr falls 3x slower here */
  const char *split = "contiguous";
  int verify = 0;
  model m = {0};
  dt_option options[] = {
      DT_TRAIN_OPTIONS(&run.c),
      DT_ATTN_OPTIONS(&run.c),
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
  if (verify) verify_merge(cp_merge);
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
