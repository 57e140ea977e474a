/* 08_fsdp_tp: a 2D mesh, tensor parallel inside groups and FSDP across them.
 *
 * The N ranks form F rows of T (N = F x T). A row is T consecutive ranks (one
 * node, fast links): they split each block's hidden units as in 07 and run the
 * same B/F samples, all-reducing activations. A column is the F ranks T apart
 * that hold the same TP shard: they cut it into pieces as in 06 (FSDP), each
 * keeping one piece with its gradient and optimizer state and running its own
 * B/F samples, gathering weights and reduce-scattering gradients. Each kind of
 * traffic has its own sub-communicator. T = 1 is 06 (ZeRO-3), T = N is 07. It
 * ends by training the same model in one process and comparing. With
 * --precision bf16|fp16 all three kinds of traffic travel in 16 bits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train.h"

typedef struct {
  dt_train_config c;
  dt_comm *world, *tp, *fsdp; /* tp: this rank's row; fsdp: its column */
  int64_t Hs, rows, S;        /* hidden units per TP shard H/T; samples per row B/F; piece */
  float *w, *g, *m, *v;       /* this rank's pieces: layer l's piece of [W1_s | W2_s] at l*S */
  float *x, *a, *h, *y, *dx, *dnext, *dh, *normbuf; /* x, dx: [B/F, D]; a, h: [B/F, Hs] */
  dt_dtype wire;             /* what travels: DT_F32, or 16 bits (--precision) */
  uint16_t *p16, *g16, *a16; /* its 16-bit copies: a TP shard; its gradient + piece; [R, D] */
  int *bad;                  /* fp16: one int, the overflow verdict's all-reduce */
  uint64_t verdict;          /* its bytes, kept out of the other rows */
} fsdp_tp_model;

static void *xmalloc(size_t bytes) { /* host memory, or a clear abort */
  void *p = calloc(1, bytes);
  CHECK_ALLOC(p);
  return p;
}

/* FSDP: layer l's TP shard [W1_s | W2_s] (F x S, padding last) from this column's
 * pieces, for one use; the caller frees it. F = 1: the piece is the shard (07).
 * In 16 bits the pieces travel as 16-bit copies and the shard is made fp32
 * again: the matmuls round their inputs to the same 16 bits, nothing is lost. */
static float *gather(const fsdp_tp_model *m, float *flat, int64_t l, dt_dtype t) {
  int64_t F = m->fsdp->size, S = m->S;
  if (F == 1) return flat + l * S;
  float *shard = dt_alloc_f32((size_t)(F * S), DT_PARAMS);
  if (t == DT_F32) {
    dt_all_gather(m->fsdp, flat + l * S, shard, (size_t)S, DT_F32);
    return shard;
  }
  dt_to_half(flat + l * S, m->p16 + m->fsdp->rank * S, (size_t)S, t); /* in place */
  dt_all_gather(m->fsdp, m->p16 + m->fsdp->rank * S, m->p16, (size_t)S, t);
  dt_from_half(m->p16, shard, (size_t)(F * S), t);
  return shard;
}

/* TP's all-reduce of a [B/F, D] partial sum over the row. In 16 bits each
 * rank's partial is rounded and the sum runs in 16 bits, as NCCL's does. */
static void tp_sum(fsdp_tp_model *m, float *buf) {
  size_t n = (size_t)(m->rows * m->c.dim);
  if (m->tp->size == 1) return;
  if (m->wire == DT_F32) {
    dt_all_reduce(m->tp, buf, buf, n, DT_F32, DT_SUM);
    return;
  }
  dt_to_half(buf, m->a16, n, m->wire);
  dt_all_reduce(m->tp, m->a16, m->a16, n, m->wire, DT_SUM);
  dt_from_half(m->a16, buf, n, m->wire);
}

/* FSDP's reduce-scatter of layer l's gradient g (F x S) along the column: the
 * average over the F rows, this rank's piece only. In 16 bits each rank
 * divides by F before converting, so the 16-bit sum keeps the mean's size. */
static void reduce_piece(fsdp_tp_model *m, float *g, int64_t l) {
  int64_t F = m->fsdp->size, S = m->S;
  if (m->wire == DT_F32) {
    dt_reduce_scatter(m->fsdp, g, m->g + l * S, (size_t)S, DT_F32, DT_AVG);
    return;
  }
  dt_scale(g, (size_t)(F * S), 1.0f / (float)F);
  dt_to_half(g, m->g16, (size_t)(F * S), m->wire);
  dt_reduce_scatter(m->fsdp, m->g16, m->g16 + F * S, (size_t)S, m->wire, DT_SUM);
  dt_from_half(m->g16 + F * S, m->g + l * S, (size_t)S, m->wire);
}

static void forward(fsdp_tp_model *m) {
  int64_t R = m->rows, D = m->c.dim, Hs = m->Hs;
  for (int64_t l = 0; l < m->c.layers; l++) {
    float *x = m->x + l * R * D, *out = m->x + (l + 1) * R * D, *w = gather(m, m->w, l, m->wire);
    double t0 = dt_span_begin();
    dt_block_forward(x, w, w + D * Hs, m->a + l * R * Hs, m->h + l * R * Hs, out, R, D, Hs, 0);
    dt_span_end("forward", "compute", t0);
    if (m->fsdp->size > 1) dt_free(w); /* FSDP: gone until the backward */
    /* g, forward: out = h_s W2_s is a partial sum; add the row's (fast links) ... */
    tp_sum(m, out);
    dt_add(out, x, (size_t)(R * D)); /* ... then the residual, once, not once per rank */
  }
}

/* m->dx holds dLoss/dx_L on entry, the same [B/F, D] on every rank of a row. */
static void backward(fsdp_tp_model *m) {
  int64_t R = m->rows, D = m->c.dim, Hs = m->Hs, S = m->S, F = m->fsdp->size;
  for (int64_t l = m->c.layers - 1; l >= 0; l--) {
    float *w = gather(m, m->w, l, m->wire); /* again: the forward freed it */
    float *g = F > 1 ? dt_alloc_f32((size_t)(F * S), DT_GRADS) : m->g + l * S; /* TP shard's */
    if (F == 1) dt_zero(g, (size_t)S * 4);
    double t0 = dt_span_begin();
    dt_block_backward(m->x + l * R * D, m->a + l * R * Hs, m->h + l * R * Hs, w, w + D * Hs, m->dx,
                      m->dnext, g, g + D * Hs, m->dh, R, D, Hs, 0); /* dnext: partial sum */
    dt_span_end("backward", "compute", t0);
    if (F > 1) dt_free(w);
    /* f, backward: x_l fed every TP shard of the row, so its gradient sums */
    tp_sum(m, m->dnext);
    dt_add(m->dnext, m->dx, (size_t)(R * D)); /* the residual path */
    float *t = m->dx;
    m->dx = m->dnext, m->dnext = t;
    /* FSDP: average over the F rows' samples, keep this rank's piece */
    if (F > 1) reduce_piece(m, g, l), dt_free(g);
  }
  /* F = 1: nothing to reduce, but the gradient is held in 16 bits all the
   * same, as a reduce-scatter would leave it (and the reference holds it) */
  if (F == 1 && m->wire != DT_F32) dt_round_half(m->g, (size_t)(m->c.layers * S), m->wire);
}

/* fp16: did any gradient overflow? Every rank holds different pieces, so the
 * verdict is a MAX over the world: every rank must skip the same steps. */
static int overflowed(fsdp_tp_model *m) {
  if (m->wire != DT_F16) return 0;
  int bad = dt_count_nonfinite(m->g, (size_t)(m->c.layers * m->S)) > 0;
  dt_counter *ar = &m->world->count[DT_ALL_REDUCE], kept = *ar;
  dt_copy_from_host(m->bad, &bad, sizeof bad);
  dt_all_reduce(m->world, m->bad, m->bad, 1, DT_I32, DT_MAX);
  dt_copy_to_host(&bad, m->bad, sizeof bad);
  m->verdict += ar->bytes_sent - kept.bytes_sent, *ar = kept;
  return bad;
}

/* Every rank holds a different piece of the model (padding is zero), so the
 * global norm is the sum of every rank's squares: one float over the world. */
static double global_sq_norm(fsdp_tp_model *m, size_t n) {
  if (m->c.clip <= 0) return 0; /* not needed */
  float sq = (float)dt_sum_squares(m->g, n);
  dt_copy_from_host(m->normbuf, &sq, sizeof sq);
  dt_all_reduce(m->world, m->normbuf, m->normbuf, 1, DT_F32, DT_SUM);
  dt_copy_to_host(&sq, m->normbuf, sizeof sq);
  return sq;
}

/* The formulas for any mesh (06 is T = 1, 07 is F = 1), the rows of the summary:
 * bytes sent per rank per step (ring model, dt.h; E bytes per element, 4 or 2
 * with --precision), then peak memory per rank. */
static void cost_of(const dt_train_config *c, int64_t T, int64_t F, double *v) {
  int64_t L = c->layers, D = c->dim, R = c->batch / F, Hs = c->hidden / T, N = T * F;
  double S = (double)((2 * D * Hs + F - 1) / F), K = c->optimizer[0] == 'a' ? 8 : 0;
  double E = (double)dt_dtype_size(dt_precision_type(c));
  v[0] = 2.0 * (double)L * 2.0 * (double)(T - 1) / (double)T * (double)(R * D) * E;
  v[1] = 2.0 * (double)(L * (F - 1)) * S * E, v[2] = (double)(L * (F - 1)) * S * E;
  v[3] = v[0] + v[1] + v[2] + (c->clip > 0 ? 2.0 * (double)(N - 1) / (double)N * 4 : 0);
  v[4] = v[5] = 4 * ((double)L * S + (F > 1 ? (double)F * S : 0)); /* params, grads */
  v[6] = K * (double)L * S;                                        /* optim */
  v[7] = 4.0 * (double)((L + 1) * R * D + 2 * L * R * Hs + 2 * R * D + R * Hs);
  v[8] = v[4] + v[5] + v[6];
  v[9] = E * ((F > 1 ? 2.0 * (double)F * S + S : 0) + (T > 1 ? (double)(R * D) : 0)); /* 16 bits */
}

/* A formula's value, whole or to two decimals, or n/a for a mesh that cannot be */
static const char *num(char *buf, double v, int valid) {
  snprintf(buf, 32, !valid ? "n/a" : v == (double)(int64_t)v ? "%.0f" : "%.2f", v);
  return buf;
}

/* From the whole model's layer-major host copy (W1_0, W2_0, W1_1, ...) to this
 * rank's pieces (weights, m or v): its TP shard as in 07, its piece as in 06. */
static void to_pieces(const fsdp_tp_model *m, float *flat, const float *host) {
  int64_t D = m->c.dim, H = m->c.hidden, Hs = m->Hs, P = D * H, col0 = m->tp->rank * Hs;
  float *tmp = xmalloc((size_t)(m->fsdp->size * m->S) * 4); /* one TP shard, zero padding */
  for (int64_t l = 0; l < m->c.layers; l++) {
    for (int64_t d = 0; d < D; d++) /* W1[:, col0 : col0+Hs], row by row, then W2's rows */
      memcpy(tmp + d * Hs, host + 2 * l * P + d * H + col0, (size_t)Hs * 4);
    memcpy(tmp + D * Hs, host + (2 * l + 1) * P + col0 * D, (size_t)(Hs * D) * 4);
    dt_copy_from_host(flat + l * m->S, tmp + m->fsdp->rank * m->S, (size_t)m->S * 4);
  }
  free(tmp);
}

/* Back to rank 0 (check, --save, --ckpt; never in a step): columns, then row 0 */
static void to_host(const fsdp_tp_model *m, float *flat, float *host) {
  int64_t D = m->c.dim, H = m->c.hidden, Hs = m->Hs, P = D * H, T = m->tp->size, n = 2 * D * Hs;
  float *gathered = dt_alloc_f32((size_t)(2 * P), DT_OTHER), *tmp = xmalloc((size_t)(2 * P) * 4);
  for (int64_t l = 0; l < m->c.layers; l++) {
    float *w = gather(m, flat, l, DT_F32); /* exact: weights, m or v */
    if (m->fsdp->rank == 0) dt_all_gather(m->tp, w, gathered, (size_t)n, DT_F32); /* [T][shard] */
    if (m->fsdp->size > 1) dt_free(w);
    if (m->world->rank != 0) continue;
    dt_copy_to_host(tmp, gathered, (size_t)(2 * P) * 4);
    for (int64_t t = 0; t < T; t++) { /* TP shard t: W1[:, t*Hs : (t+1)*Hs], then W2's rows */
      for (int64_t d = 0; d < D; d++)
        memcpy(host + 2 * l * P + d * H + t * Hs, tmp + t * n + d * Hs, (size_t)Hs * 4);
      memcpy(host + (2 * l + 1) * P + t * Hs * D, tmp + t * n + D * Hs, (size_t)(Hs * D) * 4);
    }
  }
  dt_free(gathered), free(tmp);
}

/* --ckpt: rank 0 gathers the state and writes it; not training traffic, uncounted */
static void checkpoint(fsdp_tp_model *m, int64_t steps_done, float *w, float *mh, float *vh) {
  dt_comm *comms[3] = {m->world, m->tp, m->fsdp};
  dt_counter kept[3][DT_NKINDS];
  for (int i = 0; i < 3; i++) memcpy(kept[i], comms[i]->count, sizeof kept[i]);
  to_host(m, m->w, w);
  if (m->m) to_host(m, m->m, mh), to_host(m, m->v, vh);
  if (m->world->rank == 0) dt_ckpt_save(&m->c, steps_done, w, m->m ? mh : NULL, m->m ? vh : NULL);
  for (int i = 0; i < 3; i++) memcpy(comms[i]->count, kept[i], sizeof kept[i]);
}

int main(int argc, char **argv) {
  dt_train_config c = DT_TRAIN_DEFAULTS;
  int64_t tp_size = 0;
  dt_option options[] = {
      DT_TRAIN_OPTIONS(&c),
      DT_INT("--tp", &tp_size, 0, 65536, "TP group size T, consecutive ranks (0: 2, 1 at odd NP)"),
      DT_END};
  dt_lesson lesson = {"08_fsdp_tp", "2D mesh: tensor parallel inside groups, FSDP across them", 1};
  dt_comm *world = dt_init(&argc, &argv, &lesson, options);
  dt_train_resolve(&c);
  int N = world->size, rank = world->rank, T = tp_size ? (int)tp_size : N % 2 ? 1 : 2;
  if (N % T != 0) dt_fail("--tp %d does not divide the number of ranks, %d: N = F x T", T, N);
  int F = N / T;
  if (c.hidden % T != 0)
    dt_fail("--hidden %lld does not split over --tp %d: T must divide H", (long long)c.hidden, T);
  if (c.batch % F != 0)
    dt_fail("--batch %lld does not split over F = N/T = %d rows: F must divide B",
            (long long)c.batch, F);
  /* rank r: row r / T (its samples, its FSDP piece), column r % T (its TP shard) */
  /* exercise: the 2D mesh, one sub-communicator per row and per column */
  dt_comm *tp = dt_comm_split(world, rank / T, rank % T);   /* color: the row, key: the column */
  dt_comm *fsdp = dt_comm_split(world, rank % T, rank / T); /* color: the column, key: the row */
  /* end of exercise */
  dt_trace_enable(c.trace != NULL);
  if (c.dump_data) dt_dump_data(c.dump_data, &c);

  int64_t L = c.layers, D = c.dim, H = c.hidden, B = c.batch, Hs = H / T, P = D * H;
  int64_t n = 2 * D * Hs, S = (n + F - 1) / F, R = B / F, col0 = tp->rank * Hs;
  fsdp_tp_model m = {.c = c, .world = world, .tp = tp, .fsdp = fsdp, .Hs = Hs, .rows = R, .S = S};
  m.wire = dt_precision_type(&c);
  if (m.wire != DT_F32 && F > 1) /* 16-bit copies of what travels (tag comm) */
    m.p16 = dt_alloc((size_t)(F * S) * 2, DT_COMMBUF),
    m.g16 = dt_alloc((size_t)(F * S + S) * 2, DT_COMMBUF);
  if (m.wire != DT_F32 && T > 1) m.a16 = dt_alloc((size_t)(R * D) * 2, DT_COMMBUF);
  m.w = dt_alloc_f32((size_t)(L * S), DT_PARAMS);
  m.g = dt_alloc_f32((size_t)(L * S), DT_GRADS);
  if (c.optimizer[0] == 'a') /* AdamW's state for the pieces only */
    m.m = dt_alloc_f32((size_t)(L * S), DT_OPTIM), m.v = dt_alloc_f32((size_t)(L * S), DT_OPTIM);
  m.x = dt_alloc_f32((size_t)((L + 1) * R * D), DT_ACTIV);
  m.a = dt_alloc_f32((size_t)(L * R * Hs), DT_ACTIV);
  m.h = dt_alloc_f32((size_t)(L * R * Hs), DT_ACTIV);
  m.dx = dt_alloc_f32((size_t)(R * D), DT_ACTIV);
  m.dnext = dt_alloc_f32((size_t)(R * D), DT_ACTIV);
  m.dh = dt_alloc_f32((size_t)(R * Hs), DT_ACTIV);
  m.y = dt_alloc_f32((size_t)(R * D), DT_DATA);
  if (c.clip > 0) m.normbuf = dt_alloc_f32(1, DT_OTHER);
  m.bad = dt_alloc(sizeof(int), DT_OTHER);
  int adamw = c.optimizer[0] == 'a', state = adamw && c.ckpt; /* whole-model host arrays: */
  float *host_w = xmalloc((size_t)(2 * L * P) * 4);
  float *host_m = state ? xmalloc((size_t)(2 * L * P) * 4) : NULL;
  float *host_v = state ? xmalloc((size_t)(2 * L * P) * 4) : NULL;
  double *losses = xmalloc((size_t)c.steps * sizeof(double));
  int64_t *samples = xmalloc((size_t)R * sizeof(int64_t));
  /* its TP shard from the RNG as in 07 (no communication), then its piece; or a file */
  float *shard = dt_alloc_f32((size_t)(F * S), DT_OTHER); /* zero padding */
  if (c.load) dt_load_model(c.load, &c, host_w), to_pieces(&m, m.w, host_w);
  for (int64_t l = 0; l < L && !c.load; l++) {
    dt_init_w1(&c, l, shard, col0, Hs), dt_init_w2(&c, l, shard + D * Hs, col0, Hs);
    dt_copy(m.w + l * S, shard + fsdp->rank * S, (size_t)S * 4);
  }
  dt_free(shard);
  if (c.resume) { /* a checkpoint of any world size and mesh replaces that start */
    dt_ckpt_resume(&c, host_w, host_m, host_v);
    m.c = c;
    to_pieces(&m, m.w, host_w);
    if (adamw) to_pieces(&m, m.m, host_m), to_pieces(&m, m.v, host_v);
  }
  dt_train_print(&c);
  char cell[32];
  dt_print0("mesh: F = %d rows (data shards, FSDP pieces) x T = %d columns (TP shards)\n", F, T);
  for (int f = -1; f < F; f++) { /* a header, then a row per data shard */
    f < 0 ? dt_print0("  %-17s", "") : dt_print0("  row %-3d piece %-3d", f, f);
    for (int t = 0; t < T; t++)
      snprintf(cell, sizeof cell, f < 0 ? "TP shard %d" : "rank %d", f < 0 ? t : f * T + t),
          dt_print0(" %-*s", t < T - 1 ? 12 : 0, cell);
    dt_print0("\n");
  }
  dt_print_ranks("W1[:, %lld:%lld] and W2[%lld:%lld, :] of every layer, its piece [%lld, %lld) "
                 "of %lld (+ %lld padding); data shard %d/%d\n",
                 (long long)col0, (long long)(col0 + Hs), (long long)col0, (long long)(col0 + Hs),
                 (long long)(fsdp->rank * S), (long long)(fsdp->rank * S + S), (long long)n,
                 (long long)(F * S - n), fsdp->rank, F);

  dt_loss_scaler scaler; /* fp16: scale the loss, skip steps that overflow */
  dt_scaler_init(&scaler, &c);
  dt_comm *comms[3] = {world, tp, fsdp};
  for (int i = 0; i < 3; i++) dt_comm_reset(comms[i]);
  dt_mem_reset_peaks();
  double t_start = dt_now();
  for (int64_t step = c.start_step; step < c.steps; step++) {
    double t0 = dt_now();
    dt_step_samples(&c, F, fsdp->rank, step, samples); /* a row's T ranks: the same samples */
    dt_make_batch(&c, samples, R, m.x, m.y);
    forward(&m);
    double loss =
        dt_mse_forward_backward(m.x + L * R * D, m.y, m.dx, (size_t)(R * D), 1.0 / (double)(R * D));
    if (scaler.scale != 1.0) dt_scale(m.dx, (size_t)(R * D), (float)scaler.scale);
    backward(&m);
    double used = 1.0;
    if (dt_scaler_update(&scaler, &c, overflowed(&m), &used)) {
      float scale = dt_grad_scale(&c, used, global_sq_norm(&m, (size_t)(L * S)));
      dt_optimizer_step(&c, m.w, m.g, m.m, m.v, (size_t)(L * S), scaler.taken, scale); /* pieces */
    }
    if (dt_ckpt_due(&c, step)) checkpoint(&m, step + 1, host_w, host_m, host_v);
    /* bookkeeping: the rows' mean is the global batch's (a row's T ranks agree) */
    DT_MPI(MPI_Allreduce(&loss, &losses[step], 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    losses[step] /= N;
    dt_sync();
    dt_print_step(&c, step, losses[step], "mean over the rows", dt_now() - t0);
  }

  uint64_t steps = (uint64_t)(c.steps - c.start_step); /* fewer after --resume */
  double ms = 1e3 / (double)steps, wall = dt_now() - t_start;
  dt_counter got[4] = {tp->count[DT_ALL_REDUCE], fsdp->count[DT_ALL_GATHER],
                       fsdp->count[DT_REDUCE_SCATTER]}; /* got[3]: everything, everywhere */
  for (int i = 0; i < 3; i++)
    got[3].bytes_sent += dt_comm_total(comms[i]).bytes_sent,
        got[3].seconds += dt_comm_total(comms[i]).seconds;
  dt_print0("\nsummary (rank 0; every rank alike):\n  time per step %.2f ms: compute %.2f ms, "
            "blocked in tp %.2f ms, in fsdp %.2f ms\n",
            wall * ms, (wall - got[3].seconds) * ms, dt_comm_total(tp).seconds * ms,
            dt_comm_total(fsdp).seconds * ms);
  /* bytes sent per rank per step, then peak memory: this mesh, 06's and 07's */
  double k[3][10];
  int ok[3] = {1, B % N == 0, H % N == 0}; /* can 06 and 07 run this config at all? */
  cost_of(&c, T, F, k[0]), cost_of(&c, 1, N, k[1]), cost_of(&c, N, 1, k[2]);
  size_t es = dt_dtype_size(m.wire);
  char how[3][64];
  snprintf(how[0], 64, "2L x 2(T-1)/T x (B/F) x D x %zu: inside a row", es);
  snprintf(how[1], 64, "2 x L x (F-1) x S x %zu: forward, backward, along a column", es);
  snprintf(how[2], 64, "L x (F-1) x S x %zu: along a column", es);
  const char *row[10][2] = {
      {"tp all_reduce (activ)", how[0]},
      {"fsdp all_gather (params)", how[1]},
      {"fsdp reduce_scatter (grads)", how[2]},
      {"total (every communicator)", "the sum, + 2(N-1)/N x 4 with --clip (the norm)"},
      {"params", "4 x (LS + FS): L pieces + 1 gathered TP shard (none when F = 1)"},
      {"grads", "4 x (LS + FS): L pieces + 1 layer's transient"},
      {"optim", "K x LS: pieces only (K = 8 for AdamW's m and v, 0 for sgd)"},
      {"activ", "4 x ((L+1)RD + 2LR(H/T) + 2RD + R(H/T)), R = B/F"},
      {"model states", "params + grads + optim: (8 + K) x 2LDH/N + transients"},
      {"comm (16-bit copies)",
       "2 x (2FS + S, if F > 1; + RD, if T > 1): shard, grad + piece, activ"}};
  for (int i = 0; i < (m.wire == DT_F32 ? 9 : 10); i++) {
    char f[3][32];
    size_t have = i < 4   ? got[i].bytes_sent / steps
                  : i < 8 ? dt_mem_peak((dt_tag)(i - 4))
                  : i < 9 ? dt_mem_peak(DT_PARAMS) + dt_mem_peak(DT_GRADS) + dt_mem_peak(DT_OPTIM)
                          : dt_mem_peak(DT_COMMBUF);
    if (i == 0 || i == 4)
      dt_print0("  %-30s    measured     formula    06 (T=1)    07 (T=N)\n",
                i ? "memory per rank (peak bytes)" : "bytes sent per rank per step");
    for (int j = 0; j < 3; j++) num(f[j], k[j][i], ok[j]);
    dt_print0("    %-28s %11zu %11s %11s %11s   %s\n", row[i][0], have, f[0], f[1], f[2],
              row[i][1]);
    if (i == 3 && m.wire == DT_F16) /* one int per step over the world, not in the total */
      dt_print0("    %-28s %11zu %11d %11s %11s   2(N-1)/N x 4: MAX over the world, not in the "
                "total\n    fp16 loss scaling: %lld step%s skipped on overflow; final loss scale "
                "%g\n",
                "overflow verdict (fp16)", (size_t)(m.verdict / steps), 2 * (N - 1) * 4 / N, "", "",
                (long long)scaler.skipped, scaler.skipped == 1 ? "" : "s", scaler.scale);
  }
  dt_print_memory_uncounted();

  to_host(&m, m.w, host_w); /* after the summary: these gathers are not training's */
  if (c.save && rank == 0) dt_save_model(c.save, &c, c.steps, host_w);
  if (c.save) dt_print0("saved %s\n", c.save);
  if (c.trace) dt_trace_write(c.trace);
  int failed = c.no_check ? 0 : dt_check_against_reference(&c, losses, host_w, 0);
  float *bufs[] = {m.w, m.g, m.m, m.v, m.x, m.a, m.h, m.dx, m.dnext, m.dh, m.y, m.normbuf};
  dt_free(m.p16), dt_free(m.g16), dt_free(m.a16), dt_free(m.bad);
  for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
    if (bufs[i]) dt_free(bufs[i]);
  free(host_w), free(host_m), free(host_v), free(losses), free(samples);
  dt_comm_free(tp), dt_comm_free(fsdp);
  dt_finalize();
  return failed;
}
