/* 06_fsdp: sharded data parallelism, ZeRO stages 1-3 (FSDP is stage 3).
 *
 * Data parallel as in 05, but no rank keeps the whole training state. Each
 * layer's [W1 | W2] is one flat buffer of 2DH elements, padded to N shards of
 * S = ceil(2DH/N); rank r owns elements [r*S, (r+1)*S) of every layer and
 * steps only those, with their AdamW state. --zero 1 shards the optimizer
 * state, 2 the gradients too (reduce-scattered), 3 the parameters too (FSDP,
 * the default: all-gathered before each use, freed after); shard.h says what
 * each keeps, shard.c holds the collectives (08 reuses them), this file the
 * schedule. --prefetch starts the next layer's gather before computing this
 * one; --precision bf16|fp16 sends parameters and gradients in 16 bits. It
 * prints memory and bytes per rank next to ZeRO's formulas. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formulas.h"
#include "shard.h"
#include "train.h"

typedef struct {
  dt_comm *world;
  int64_t L, D, H, R, P; /* R: samples per step on this rank */
  fsdp f;                /* the shards, and what each stage keeps whole */
  dt_acts act;           /* of one step */
  int64_t *samples;      /* this rank's samples of the step */
} model;

/* Each rank steps its shard of every layer, elements [lo, hi) of the layer's
 * [W1 | W2], which sits at 2lDH in the whole model; the padding nowhere. */
static void layout(model *m, dt_run *r, int zero, int prefetch) {
  int64_t L = r->c.layers, D = r->c.dim, H = r->c.hidden, N = m->world->size, lo, hi, off;
  if (r->c.batch % N != 0)
    dt_fail("global batch %lld does not split over %lld ranks: choose --batch divisible by %lld",
            (long long)r->c.batch, (long long)N, (long long)N);
  m->L = L;
  m->D = D;
  m->H = H;
  m->R = r->c.batch / N;
  m->P = L * 2 * D * H;
  fsdp_init(&m->f, m->world, &r->c, L, 2 * D * H, zero, prefetch);
  fsdp_range(&m->f, &lo, &hi);
  int first = fsdp_register(&m->f, r);
  for (int64_t l = 0; l < L; l++) {
    int seg = fsdp_segment(&m->f, first, l, &off);
    dt_run_place_range(r, seg, off, 2 * l * D * H, 2 * D * H, 2 * D * H, lo, hi);
  }
  dt_acts_alloc(&m->act, L, m->R, D, H);
  m->samples = dt_host_alloc((size_t)m->R, sizeof(int64_t));
}

static void forward(model *m) {
  for (int64_t l = 0; l < m->L; l++) {
    float *w = fsdp_params(&m->f, l);
    fsdp_prefetch(&m->f, l + 1);
    dt_acts_forward(&m->act, l, w, w + m->D * m->H, 1);
    fsdp_release(&m->f, l);
  }
}

/* Each layer's gradient is reduced as soon as its backward is done: stage 1
 * all-reduces it, stages 2-3 reduce-scatter it and keep their shard. */
static void backward(model *m) {
  for (int64_t l = m->L - 1; l >= 0; l--) {
    float *w = fsdp_params(&m->f, l);
    fsdp_prefetch(&m->f, l - 1);
    float *g = fsdp_grad(&m->f, l);
    dt_acts_backward(&m->act, l, w, w + m->D * m->H, g, g + m->D * m->H, 1);
    fsdp_reduce(&m->f, l, g);
    fsdp_release(&m->f, l);
  }
}

/* One step's gradients, averaged over every rank's samples, in shards. */
static double train_step(model *m, dt_run *r, int64_t step) {
  int64_t D = m->D, R = m->R;
  dt_step_samples(&r->c, m->world->size, m->world->rank, step, m->samples);
  if (m->f.g) dt_zero(m->f.g, (size_t)(m->L * m->f.NS) * 4);
  dt_make_batch(&r->c, m->samples, R, m->act.x, m->act.y);
  m->act.rows = (dt_rows){r->kinks, m->samples, 0, 0}; /* the rows, for the check */
  forward(m);
  double loss = dt_run_loss(r, dt_acts_x(&m->act, m->L), m->act.y, m->act.dx, (size_t)(R * D),
                            1.0 / (double)(R * D));
  backward(m);
  return loss;
}

/* Bytes and memory per rank, measured, beside ZeRO's formulas. */
static void report(model *m, dt_run *r) {
  const fsdp *f = &m->f;
  int zero = f->zero, N = m->world->size;
  int64_t L = m->L, S = f->S, P = m->P;
  size_t steps = (size_t)(r->c.steps - r->c.start_step), es = dt_dtype_size(f->wire.type);
  /* Ring model (dt.h): gathering or scattering every layer sends L(N-1)S x E
   * bytes per rank, E = 4 in fp32, 2 in 16 bits */
  size_t took = (size_t)(r->scaler.taken - r->c.start_step);
  dt_kind kind[3] = {DT_ALL_GATHER, DT_REDUCE_SCATTER, DT_ALL_REDUCE};
  int64_t calls[FSDP_KINDS], bytes[FSDP_KINDS]; /* formulas.c */
  fsdp_traffic(L, N, S, (int64_t)es, zero, (int64_t)took, (int64_t)steps, calls, bytes);
  size_t want[3] = {(size_t)bytes[0], (size_t)bytes[1], (size_t)bytes[2]};
  char how[3][96];
  snprintf(how[0], 96,
           zero == 3 ? "2 x L x (N-1) x S x %zu: forward, backward" : "L x (N-1) x S x %zu", es);
  if (zero < 3 && took < steps)
    snprintf(how[0] + strlen(how[0]), 96 - strlen(how[0]), " x %zu/%zu steps taken", took, steps);
  snprintf(how[1], 96, zero >= 2 ? "L x (N-1) x S x %zu" : "0", es);
  snprintf(how[2], 96, zero == 1 ? "2 x L x (N-1) x S x %zu, as 05" : "0", es);
  dt_print0("  bytes sent per rank per step   calls    measured     formula\n");
  for (int i = 0; i < 3; i++) {
    dt_report_traffic("dp_cp", kind[i], (double)(m->world->count[kind[i]].calls / steps),
                      (double)(m->world->count[kind[i]].bytes_sent / steps), (double)want[i]);
    dt_print0("    %-24s %9zu %11zu %11zu   %s\n", dt_kind_name(kind[i]),
              (size_t)m->world->count[kind[i]].calls / steps,
              (size_t)m->world->count[kind[i]].bytes_sent / steps, want[i], how[i]);
  }
  dt_print0("    %-24s %9s %11zu %11zu   %d(N-1)/N x L x N x S x %zu; DP (05): 2(N-1)/N x P x %zu "
            "= %zu\n",
            "total", "", (size_t)dt_comm_total(m->world).bytes_sent / steps,
            want[0] + want[1] + want[2], zero == 2 ? 2 : 3, es, es,
            2 * (size_t)(N - 1) * (size_t)P * es / (size_t)N);
  /* Memory per rank: the shards, plus what is full-size at the worst moment. */
  int64_t K = r->c.optimizer[0] == 'a' ? 8 : 0, mem[DT_NTAGS];
  int two = zero == 3 && f->prefetch && L > 1;
  fsdp_memory(L, N, S, m->D, m->H, m->R, zero, f->prefetch, K > 0, f->wire.type != DT_F32, mem);
  dt_row rows[] = {
      {DT_PARAMS, mem[DT_PARAMS],
       zero < 3 ? "4 x L x NS: every layer"
       : two    ? "4 x (LS + 2NS): shards, 2 gathered layers"
                : "4 x (LS + NS): shards, 1 gathered layer",
       4 * P},
      {DT_GRADS, mem[DT_GRADS],
       zero == 1 ? "4 x L x NS: every layer" : "4 x (LS + NS): shards, 1 layer's transient", 4 * P},
      {DT_OPTIM, mem[DT_OPTIM], "K x LS: shards (K = 8 for AdamW's m and v, 0 for sgd)", K * P},
      {DT_ACTIV, mem[DT_ACTIV], "as 05, b = B/N", mem[DT_ACTIV]},
      {DT_COMMBUF, mem[DT_COMMBUF],
       "2 x (gathers in flight x NS + NS + S when grads are sharded): 16 bits", 2 * P}};
  dt_print_memory(rows, f->wire.type == DT_F32 ? 4 : 5, "DP (05)");
  static const char *paper[4] = {"", "(4 + 4 + K/N) P", "(4 + (4+K)/N) P", "(8+K)/N x P"};
  double Z = ((zero == 3 ? 4.0 / N : 4) + (zero >= 2 ? 4.0 / N : 4) + (double)K / N) * (double)P;
  dt_print0("    %-24s %11zu %11lld %11lld   ZeRO paper, fp32: %s = %.0f\n", "model states",
            dt_mem_peak(DT_PARAMS) + dt_mem_peak(DT_GRADS) + dt_mem_peak(DT_OPTIM),
            (long long)(rows[0].formula + rows[1].formula + rows[2].formula),
            (long long)((8 + K) * P), paper[zero], Z);
  dt_print_memory_uncounted();
  dt_print_ranks("peak params %zu, grads %zu, optim %zu, activ %zu bytes\n", dt_mem_peak(DT_PARAMS),
                 dt_mem_peak(DT_GRADS), dt_mem_peak(DT_OPTIM), dt_mem_peak(DT_ACTIV));
}

int main(int argc, char **argv) {
  dt_run run = {.c = DT_TRAIN_DEFAULTS};
  int64_t zero = 3;
  int prefetch = 0;
  dt_option options[] = {
      DT_TRAIN_OPTIONS(&run.c),
      DT_INT("--zero", &zero, 1, 3,
             "ZeRO stage: 1 shards the optimizer state, 2 also grads, 3 also params (FSDP)"),
      DT_FLAG("--prefetch", &prefetch, "start the next layer's all-gather before computing"),
      DT_END};
  dt_lesson lesson = {"06_fsdp", "sharded data parallel, ZeRO-1/2/3 and FSDP", 1};
  dt_comm *world = dt_run_init(&run, &argc, &argv, &lesson, options);
  model m = {.world = world};
  layout(&m, &run, (int)zero, prefetch);
  dt_run_begin(&run);
  fsdp_start(&m.f, &run);
  fsdp_describe(&m.f, m.D * m.H, m.R, run.c.batch);

  for (int64_t step = run.c.start_step; step < run.c.steps; step++) {
    dt_step_begin(&run, step);
    double loss = train_step(&m, &run, step);
    if (dt_step_update(&run)) fsdp_step_taken(&m.f);
    if (dt_ckpt_due(&run.c, step)) fsdp_land(&m.f); /* the shards are read whole */
    dt_step_end(&run, step, loss);
  }
  dt_run_summary(&run);
  report(&m, &run);

  fsdp_free(&m.f);
  free(m.samples);
  return dt_run_finish(&run);
}
