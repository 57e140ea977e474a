/* 08_fsdp_tp: a 2D mesh, tensor parallel inside groups and FSDP across them.
 *
 * The N ranks form F rows of T (N = F x T). A row is T consecutive ranks (one
 * node, fast links): they split each block's hidden units as in 07 and run the
 * same B/F samples, all-reducing activations. A column is the F ranks T apart
 * that hold the same TP shard: they cut it into pieces as in 06 (FSDP), each
 * keeping one piece with its gradient and optimizer state and running its own
 * B/F samples, gathering weights and reduce-scattering gradients. This lesson
 * writes neither: it composes 07's pieces (07_tp/tensor.c) on each row and
 * 06's (06_fsdp/shard.c, ZeRO-3) on each column, each over a sub-communicator
 * of its own. T = 1 is 06, T = N is 07; --precision bf16|fp16 sends all three
 * kinds of traffic in 16 bits. The run (common/train/run.c) does the rest of
 * the step and ends by training the same model in one process and comparing. */
#include <stdio.h>
#include <stdlib.h>

#include "06_fsdp/shard.h"
#include "07_tp/tensor.h"
#include "train.h"

typedef struct {
  dt_comm *world, *tp, *col; /* tp: this rank's row; col: its column */
  int64_t L, D, H, R, P, Hs; /* R: samples per row B/F; Hs: hidden units per TP shard H/T */
  fsdp f;                    /* the pieces of this rank's TP shard, along its column (06) */
  dt_acts act;               /* of one step: x, dx [R, D] alike on a row; a, h [R, Hs] */
  int64_t *samples;          /* this row's samples of the step */
  dt_wire wire;              /* what activations travel in along the row (--precision) */
} model;

/* Rank r: row r / T (its samples, its FSDP piece), column r % T (its TP
 * shard); it steps piece [lo, hi) of TP shard r % T of every layer. */
static void layout(model *m, dt_run *r, int64_t T) {
  int64_t L = r->c.layers, D = r->c.dim, N = m->world->size, rank = m->world->rank, lo, hi, off;
  if (T == 0) T = N % 2 ? 1 : 2;
  if (N % T != 0)
    dt_fail("--tp %lld does not divide the number of ranks, %lld: N = F x T", (long long)T,
            (long long)N);
  if (r->c.batch % (N / T) != 0)
    dt_fail("--batch %lld does not split over F = N/T = %lld rows: F must divide B",
            (long long)r->c.batch, (long long)(N / T));
  /* exercise: the 2D mesh, one sub-communicator per row and per column */
  m->tp = dt_comm_split(m->world, (int)(rank / T), (int)(rank % T));  /* color: row, key: column */
  m->col = dt_comm_split(m->world, (int)(rank % T), (int)(rank / T)); /* color: column, key: row */
  /* end of exercise */
  m->L = L;
  m->D = D;
  m->H = r->c.hidden;
  m->Hs = tp_slice(&r->c, (int)T);
  m->R = r->c.batch / m->col->size;
  m->P = L * 2 * D * m->Hs;
  fsdp_init(&m->f, m->col, &r->c, L, 2 * D * m->Hs, 3, 0);
  fsdp_range(&m->f, &lo, &hi);
  int first = fsdp_register(&m->f, r);
  for (int64_t l = 0; l < L; l++) {
    int seg = fsdp_segment(&m->f, first, l, &off);
    tp_place(r, seg, off, l, m->tp->rank, m->tp->size, lo, hi);
  }
  r->comms[0] = m->tp;
  r->comms[1] = m->col;
  dt_acts_alloc(&m->act, L, m->R, D, m->Hs);
  m->samples = dt_host_alloc((size_t)m->R, sizeof(int64_t));
  dt_wire_init(&m->wire, &r->c, (size_t)(m->tp->size > 1 ? m->R * D : 0)); /* T = 1: no row */
}

/* Each layer: gathered along the column (06), run on the row's shards (07). */
static void forward(model *m) {
  for (int64_t l = 0; l < m->L; l++) {
    float *w = fsdp_params(&m->f, l);
    tp_forward(&m->act, l, w, w + m->D * m->Hs, m->tp, &m->wire);
    fsdp_release(&m->f, l);
  }
}

/* The mirror: the activations' gradient summed along the row, the weights'
 * averaged over the column's samples and reduce-scattered into the piece. */
static void backward(model *m) {
  for (int64_t l = m->L - 1; l >= 0; l--) {
    float *w = fsdp_params(&m->f, l), *g = fsdp_grad(&m->f, l);
    tp_backward(&m->act, l, w, w + m->D * m->Hs, g, g + m->D * m->Hs, m->tp, &m->wire);
    fsdp_reduce(&m->f, l, g);
    fsdp_release(&m->f, l);
  }
}

/* One step: each row runs its B/F samples, every rank of a row the same. */
static double train_step(model *m, dt_run *r, int64_t step) {
  int64_t D = m->D, R = m->R;
  dt_step_samples(&r->c, m->col->size, m->col->rank, step, m->samples);
  dt_make_batch(&r->c, m->samples, R, m->act.x, m->act.y);
  m->act.rows = (dt_rows){r->kinks, m->samples, 0, m->tp->rank * m->Hs}; /* for the check */
  forward(m);
  double loss = dt_run_loss(r, dt_acts_x(&m->act, m->L), m->act.y, m->act.dx, (size_t)(R * D),
                            1.0 / (double)(R * D));
  backward(m);
  return loss;
}

/* The formulas for a mesh of F rows of T (06 is T = 1, 07 is T = N): bytes
 * sent per rank per step (ring model, dt.h; E = 4, or 2 in 16 bits), then
 * memory (a column of one rank gathers nothing: its piece is the shard). */
static void cost_of(const dt_train_config *c, int64_t T, int64_t F, double *v) {
  int64_t L = c->layers, D = c->dim, R = c->batch / F, Hs = c->hidden / T;
  double S = (double)((2 * D * Hs + F - 1) / F), K = c->optimizer[0] == 'a' ? 8 : 0, Fd = (double)F;
  double E = (double)dt_dtype_size(dt_precision_type(c)), one = F > 1 ? Fd * S : 0;
  v[0] = 2.0 * (double)L * 2.0 * (double)(T - 1) / (double)T * (double)(R * D) * E;
  v[1] = 2.0 * (double)(L * (F - 1)) * S * E;
  v[2] = (double)(L * (F - 1)) * S * E;
  v[3] = v[0] + v[1] + v[2];
  v[4] = v[5] = 4 * ((double)L * S + one); /* params, grads: the pieces + one layer */
  v[6] = K * (double)L * S;
  v[7] = (double)dt_acts_bytes(L, R, D, Hs);
  v[8] = v[4] + v[5] + v[6];
  v[9] = E * ((F > 1 ? 2 * Fd * S + S : 0) + (T > 1 ? (double)(R * D) : 0));
}

/* Bytes and memory per rank, measured, beside this mesh's formulas, 06's and 07's. */
static void report(model *m, dt_run *r) {
  const dt_train_config *c = &r->c;
  uint64_t steps = (uint64_t)(c->steps - c->start_step);
  int64_t T = m->tp->size, F = m->col->size, N = T * F, E = (int64_t)dt_dtype_size(m->wire.type);
  double k[3][10];
  int ok[3] = {1, c->batch % N == 0, c->hidden % N == 0}; /* can 06 and 07 run it at all? */
  cost_of(c, T, F, k[0]);
  cost_of(c, 1, N, k[1]);
  cost_of(c, N, 1, k[2]);
  uint64_t have[10] = {m->tp->count[DT_ALL_REDUCE].bytes_sent / steps,
                       m->col->count[DT_ALL_GATHER].bytes_sent / steps,
                       m->col->count[DT_REDUCE_SCATTER].bytes_sent / steps};
  have[3] = have[0] + have[1] + have[2] + dt_comm_total(m->world).bytes_sent / steps;
  for (int t = DT_PARAMS; t <= DT_ACTIV; t++) have[4 + t] = dt_mem_peak((dt_tag)t);
  have[8] = have[4] + have[5] + have[6];
  have[9] = dt_mem_peak(DT_COMMBUF);
  dt_kind kind[3] = {DT_ALL_REDUCE, DT_ALL_GATHER, DT_REDUCE_SCATTER};
  for (int i = 0; i < 3; i++) /* the rows printed below, as data */
    dt_report_traffic(i ? "dp_cp" : "tp", kind[i], -1, (double)have[i], k[0][i]);
  for (int t = DT_PARAMS; t <= DT_ACTIV; t++)
    dt_report_figure("memory", dt_tag_name((dt_tag)t), (double)have[4 + t], k[0][4 + t]);
  if (m->wire.type != DT_F32) dt_report_figure("memory", "comm", (double)have[9], k[0][9]);
  char how[3][64];
  snprintf(how[0], 64, "2L x 2(T-1)/T x (B/F) x D x %lld: inside a row", (long long)E);
  snprintf(how[1], 64, "2 x L x (F-1) x S x %lld: forward, backward, along a column", (long long)E);
  snprintf(how[2], 64, "L x (F-1) x S x %lld: along a column", (long long)E);
  const char *row[10][2] = {
      {"tp all_reduce (activ)", how[0]},
      {"fsdp all_gather (params)", how[1]},
      {"fsdp reduce_scatter (grads)", how[2]},
      {"total (every communicator)", "the sum (the clip norm and fp16 verdict: scalars above)"},
      {"params", "4 x (LS + FS): L pieces + 1 gathered TP shard (none when F = 1)"},
      {"grads", "4 x (LS + FS): L pieces + 1 layer's transient"},
      {"optim", "K x LS: pieces only (K = 8 for AdamW's m and v, 0 for sgd)"},
      {"activ", "4 x ((L+1)RD + 2LR(H/T) + 2RD + R(H/T)), R = B/F"},
      {"model states", "params + grads + optim: (8 + K) x 2LDH/N + transients"},
      {"comm (16-bit copies)",
       "2 x (2FS + S, if F > 1; + RD, if T > 1): shard, grad + piece, activ"}};
  for (int i = 0; i < (m->wire.type == DT_F32 ? 9 : 10); i++) {
    char f[3][32];
    if (i == 0 || i == 4)
      dt_print0("  %-30s    measured     formula    06 (T=1)    07 (T=N)\n",
                i ? "memory per rank (peak bytes)" : "bytes sent per rank per step");
    for (int j = 0; j < 3; j++)
      snprintf(f[j], 32,
               !ok[j]                                ? "n/a"
               : k[j][i] == (double)(int64_t)k[j][i] ? "%.0f"
                                                     : "%.2f",
               k[j][i]);
    dt_print0("    %-28s %11llu %11s %11s %11s   %s\n", row[i][0], (unsigned long long)have[i],
              f[0], f[1], f[2], row[i][1]);
  }
  dt_print_memory_uncounted();
}

int main(int argc, char **argv) {
  dt_run run = {.c = DT_TRAIN_DEFAULTS};
  int64_t T = 0;
  dt_option options[] = {
      DT_TRAIN_OPTIONS(&run.c),
      DT_INT("--tp", &T, 0, 65536, "TP group size T, consecutive ranks (0: 2, 1 at odd NP)"),
      DT_END};
  dt_lesson lesson = {"08_fsdp_tp", "2D mesh: tensor parallel inside groups, FSDP across them", 1};
  dt_comm *world = dt_run_init(&run, &argc, &argv, &lesson, options);
  model m = {.world = world};
  layout(&m, &run, T);
  dt_run_begin(&run);
  int64_t F = m.col->size, lo, hi, col0 = m.tp->rank * m.Hs;
  dt_print0("mesh: F = %lld rows (data shards, FSDP pieces) x T = %d columns (TP shards)\n",
            (long long)F, m.tp->size);
  for (int f = -1; f < F; f++) { /* a header, then a row per data shard */
    char line[1024] = "", *at = line;
    at += f < 0 ? sprintf(at, "  %-17s", "") : sprintf(at, "  row %-3d piece %-3d", f, f);
    for (int t = 0; t < m.tp->size && at < line + 960; t++) {
      char cell[32];
      snprintf(cell, sizeof cell, f < 0 ? "TP shard %d" : "rank %d",
               f < 0 ? t : f * m.tp->size + t);
      at += sprintf(at, " %-*s", t < m.tp->size - 1 ? 12 : 0, cell);
    }
    dt_print0("%s\n", line);
  }
  fsdp_range(&m.f, &lo, &hi);
  dt_print_ranks("W1[:, %lld:%lld] and W2[%lld:%lld, :] of every layer, its piece [%lld, %lld) "
                 "of %lld (+ %lld padding); data shard %d/%lld\n",
                 (long long)col0, (long long)(col0 + m.Hs), (long long)col0,
                 (long long)(col0 + m.Hs), (long long)lo, (long long)(lo + m.f.S), (long long)m.f.n,
                 (long long)(m.f.NS - m.f.n), m.col->rank, (long long)F);

  for (int64_t step = run.c.start_step; step < run.c.steps; step++) {
    dt_step_begin(&run, step);
    double loss = train_step(&m, &run, step);
    dt_step_update(&run);
    dt_step_end(&run, step, loss);
  }
  dt_run_summary(&run);
  report(&m, &run);

  fsdp_free(&m.f);
  free(m.samples);
  dt_comm_free(m.tp);
  dt_comm_free(m.col);
  return dt_run_finish(&run);
}
