/* 05_dp: data parallelism.
 *
 * Every rank holds the whole model and trains on its own share of each global
 * batch, drawn through the DistributedSampler of lesson 04. After backward the
 * gradients are averaged across ranks with all-reduce, so every rank takes the
 * identical optimizer step and the replicas never drift apart. Three ways to
 * run that all-reduce:
 *   (a) default        one all-reduce per gradient tensor, after backward;
 *   (b) --bucket-mb M  gradients in one flat buffer, all-reduced in ~M MiB
 *                      buckets: fewer, larger messages, less latency paid;
 *   (c) --overlap      each bucket's all-reduce starts during backward as soon
 *                      as its gradients are complete, hiding it behind the
 *                      backward of the layers below.
 * --accum K splits each rank's share into K micro-steps and communicates once.
 * Beside the lesson: --compress (compress.c) sends only the largest gradients;
 * --hierarchical all-reduces inside each node first (common/comm/nodes.c). The run
 * (common/train/run.c) does the rest of the step and ends by training the same
 * model in one process and comparing. */
#include <stdio.h>
#include <stdlib.h>

#include "buckets.h"
#include "compress.h"
#include "formulas.h"
#include "hierarchical.h"
#include "train.h"

typedef struct {
  dt_comm *world;
  int64_t L, D, H, R, P, accum; /* R: samples per micro-step on this rank */
  float *w, *g;                 /* flat: layer l's [W1 | W2] at layer_offset(l) */
  dt_acts act;                  /* of one micro-step */
  int64_t *samples;             /* this rank's samples of the step */
  buckets bk;                   /* the gradients, cut into buckets (buckets.c) */
  int overlap;
  dt_nodes *nodes; /* --hierarchical: the ranks by node; NULL: the flat all-reduce */
  topk *topk;      /* --compress: NULL for the dense all-reduce */
} model;

/* Backward finishes the last layer first, so the flat buffers hold the layers
 * in reverse: a bucket's tensors are ready together, early ones first. */
static int64_t layer_offset(const model *m, int64_t l) { return (m->L - 1 - l) * 2 * m->D * m->H; }

/* Every rank holds everything: one segment, each layer in its place. */
static void layout(model *m, dt_run *r) {
  int64_t L = r->c.layers, D = r->c.dim, H = r->c.hidden, N = m->world->size;
  if (r->c.batch % (N * m->accum) != 0)
    dt_fail("global batch %lld does not split over %lld ranks x %lld micro-steps: choose --batch "
            "divisible by %lld",
            (long long)r->c.batch, (long long)N, (long long)m->accum, (long long)(N * m->accum));
  m->L = L;
  m->D = D;
  m->H = H;
  m->R = r->c.batch / (N * m->accum);
  m->P = L * 2 * D * H;
  m->w = dt_alloc_f32((size_t)m->P, DT_PARAMS);
  m->g = dt_alloc_f32((size_t)m->P, DT_GRADS);
  int seg = dt_run_segment(r, m->w, m->g, (size_t)m->P);
  for (int64_t l = 0; l < L; l++)
    dt_run_place(r, seg, layer_offset(m, l), 2 * l * D * H, 1, 2 * D * H, 2 * D * H);
  r->replicated = 1;
  dt_acts_alloc(&m->act, L, m->R, D, H);
  m->samples = dt_host_alloc((size_t)(m->R * m->accum), sizeof(int64_t));
}

static void forward(model *m) {
  for (int64_t l = 0; l < m->L; l++) {
    float *w = m->w + layer_offset(m, l);
    dt_acts_forward(&m->act, l, w, w + m->D * m->H, 1);
  }
}

/* Gradients accumulate into m->g across micro-steps. With overlap, a bucket's
 * all-reduce starts the moment its last layer is done. */
static void backward(model *m, int overlap) {
  for (int64_t l = m->L - 1; l >= 0; l--) {
    float *w = m->w + layer_offset(m, l), *g = m->g + layer_offset(m, l);
    dt_acts_backward(&m->act, l, w, w + m->D * m->H, g, g + m->D * m->H, 1);
    if (overlap) buckets_ready(&m->bk, l);
  }
}

/* After backward every bucket is averaged: waited on, or all-reduced now. */
static void average_gradients(model *m, int overlap) {
  /* exercise: averaging the gradients across ranks */
  for (bucket *k = m->bk.b; k < m->bk.b + m->bk.n; k++) {
    if (overlap) {
      dt_wait(k->pending);
      k->pending = NULL;
    } else if (m->nodes) {
      dt_all_reduce_hierarchical(m->nodes, bucket_pack(&m->bk, k), k->count, m->bk.wire.type,
                                 m->bk.op);
    } else {
      void *p = bucket_pack(&m->bk, k);
      dt_all_reduce(m->world, p, p, k->count, m->bk.wire.type, m->bk.op);
    }
    bucket_unpack(&m->bk, k);
  }
  /* end of exercise */
}

/* One step's gradients, averaged over every rank's samples. */
static double train_step(model *m, dt_run *r, int64_t step) {
  int64_t D = m->D, R = m->R;
  double loss = 0;
  dt_step_samples(&r->c, m->world->size, m->world->rank, step, m->samples);
  dt_zero(m->g, (size_t)m->P * 4);
  for (int64_t k = 0; k < m->accum; k++) { /* communicate only after the last micro-step */
    dt_make_batch(&r->c, m->samples + k * R, R, m->act.x, m->act.y);
    m->act.rows = (dt_rows){r->kinks, m->samples + k * R, 0, 0}; /* the rows, for the check */
    forward(m);
    /* the mean over this micro-step, divided by accum: the sum is the local mean */
    loss += dt_run_loss(r, dt_acts_x(&m->act, m->L), m->act.y, m->act.dx, (size_t)(R * D),
                        1.0 / ((double)R * D * m->accum));
    backward(m, m->overlap && !m->topk && k == m->accum - 1);
  }
  if (m->topk)
    topk_average(m->topk, m->world, m->g);
  else
    average_gradients(m, m->overlap);
  return loss;
}

/* Bytes and memory per rank, measured, beside their formulas. */
static void report(model *m, dt_run *r) {
  uint64_t steps = (uint64_t)(r->c.steps - r->c.start_step);
  uint64_t N = (uint64_t)m->world->size;
  int64_t L = m->L, D = m->D, H = m->H, R = m->R, es = (int64_t)dt_dtype_size(m->bk.wire.type);
  dt_counter ar = m->world->count[DT_ALL_REDUCE];
  if (m->overlap) { /* what overlap hid: the same buckets all-reduced blocking, timed now */
    double t0 = dt_now();
    for (int rep = 0; rep < 3; rep++) average_gradients(m, 0);
    double blocking = (dt_now() - t0) / 3;
    dt_print0("  hidden by overlap      %8.2f ms   (the same buckets all-reduced blocking take "
              "%.2f ms)\n",
              (blocking - ar.seconds / (double)steps) * 1e3, blocking * 1e3);
  }
  if (m->topk) topk_report(m->topk, m->world, steps);
  if (m->nodes) hierarchical_report(m->nodes, &m->bk, (uint64_t)m->P, steps);
  if (!m->topk && !m->nodes) {
    int rounded;
    uint64_t ring = buckets_ring_bytes(&m->bk, N, &rounded);
    dt_report_traffic("dp_cp", DT_ALL_REDUCE, (double)(ar.calls / steps),
                      (double)(ar.bytes_sent / steps), (double)ring);
    dt_print0("  all-reduce calls/step  %8llu      bytes sent per rank per step %llu, formula "
              "2(N-1)/N x P x %lld%s = %llu\n",
              (unsigned long long)(ar.calls / steps), (unsigned long long)(ar.bytes_sent / steps),
              (long long)es, rounded ? ", rounded down per call" : "", (unsigned long long)ring);
  }
  int64_t mem[DT_NTAGS];
  dp_memory(L, D, H, R, r->c.optimizer[0] == 'a', m->topk != NULL, mem);
  dt_row rows[] = {
      {DT_PARAMS, mem[DT_PARAMS], "P x 4", 0},
      {DT_GRADS, mem[DT_GRADS], m->topk ? "P x 4, and as much for the residual" : "P x 4", 0},
      {DT_OPTIM, mem[DT_OPTIM], "AdamW m and v: 2 x P x 4 (sgd: 0)", 0},
      {DT_ACTIV, mem[DT_ACTIV], "((L+1)bD + 2LbH + 2bD + bH) x 4, b = B/(N x accum)", 0}};
  dt_print_memory(rows, 4, NULL);
  dt_print_memory_uncounted();
}

int main(int argc, char **argv) {
  dt_run run = {.c = DT_TRAIN_DEFAULTS};
  double bucket_mb = 0;
  int64_t accum = 1;
  int overlap = 0, hierarchical = 0;
  const char *compress = NULL;
  dt_option options[] = {
      DT_TRAIN_OPTIONS(&run.c),
      DT_DOUBLE("--bucket-mb", &bucket_mb, 0, 1 << 20,
                "all-reduce gradients in ~M MiB buckets (0: per tensor)"),
      DT_FLAG("--overlap", &overlap, "start each bucket's all-reduce during backward"),
      DT_INT("--accum", &accum, 1, 1 << 20, "micro-steps per step (gradient accumulation)"),
      DT_STRING("--compress", &compress, NULL, "topk:R sends the R fraction of largest gradients"),
      DT_FLAG("--hierarchical", &hierarchical,
              "all-reduce inside each node, then among node leaders only, then broadcast"),
      DT_END};
  dt_lesson lesson = {"05_dp", "data parallel training: all-reduce the gradients, buckets, overlap",
                      1};
  dt_comm *world = dt_run_init(&run, &argc, &argv, &lesson, options);
  model m = {.world = world, .accum = accum, .overlap = overlap};
  layout(&m, &run);
  if (compress) /* the residual is laid out like layout's one segment, 0 */
    m.topk = topk_parse(compress, &run, 0, (size_t)m.P, overlap || bucket_mb > 0);
  if (hierarchical) m.nodes = hierarchical_split(&run, overlap || compress);
  buckets_make(&m.bk, m.g, m.L, m.D * m.H, bucket_mb > 0 ? bucket_mb * (1 << 20) : overlap, world,
               &run.c);
  dt_run_begin(&run);
  dt_print0("data parallel: each rank runs %lld of the %lld samples per step (%lld micro-step%s of "
            "%lld); ",
            (long long)(m.R * accum), (long long)run.c.batch, (long long)accum,
            accum > 1 ? "s" : "", (long long)m.R);
  if (m.topk)
    topk_describe(m.topk);
  else
    buckets_describe(&m.bk, hierarchical ? "hierarchical " : "", bucket_mb > 0, overlap);

  for (int64_t step = run.c.start_step; step < run.c.steps; step++) {
    dt_step_begin(&run, step);
    double loss = train_step(&m, &run, step);
    dt_step_update(&run);
    dt_step_end(&run, step, loss);
  }
  dt_run_summary(&run);
  report(&m, &run);
  free(m.samples);
  buckets_free(&m.bk);
  topk_free(m.topk);
  hierarchical_free(m.nodes);
  return dt_run_finish(&run);
}
