/* ops.c: every operation of a step timed at its own shape, as --measure
 * needs them: compute.c's list for each stage this rank holds, each op run
 * by the kernel the lesson calls on buffers of its size (op_run.c), all
 * ranks at once as in a run; the fastest of 9 trials after a warm-up,
 * taken in turns; then scaled by the stage's compute replayed as a step
 * runs it, against their sum; the slowest rank's where two ranks measured
 * a shape. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "13_plan/compute.h"
#include "13_plan/formulas.h"
#include "ops.h"
#include "stats.h"

/* Operations this backend runs (the others the roofline costs). */
static int timed_here(const op *o, int cpu) {
  int host = o->k == ATT_F || o->k == ATT_B || o->k == DATA11 || o->k == DATA05;
  return o->k != FLASH && (cpu || !host);
}

/* One stage's compute as a step runs it: for each microbatch and layer its
 * forward's and backward's operations in the lesson's order, then the
 * step's once-only ones, each on buffers of its own; the lower quartile of
 * `trials` replays after one to warm up. In a step each operation finds its
 * data evicted by the others; timed alone, in a loop, it keeps it in the
 * caches. 0 where the buffers would not fit (then ops keep their own time). */
static double replay(const op *o, int n, const model *m, const mesh *x, int64_t s, int trials,
                     int cpu) {
  double need = 0, per = (double)(x->M * stage_layers(m, x, s)), t[16];
  for (int i = 0; i < n; i++)
    need += timed_here(&o[i], cpu) ? 40.0 * (double)(op_largest(&o[i]) + 64) : 0;
  if (n <= 0 || need > dt_memory_available() / 4 || trials > 16) return 0;
  bench *h = calloc((size_t)n + 1, sizeof *h);
  for (int i = 0; i < n; i++)
    if (timed_here(&o[i], cpu)) bench_init(&h[i], &o[i], m);
  for (int trial = -1; trial < trials; trial++) {
    double t0 = dt_now();
    for (int64_t j = 0; j < (int64_t)per; j++)
      for (int i = 0; i < n; i++) {
        if (!o[i].per_micro || !timed_here(&o[i], cpu)) continue;
        long due =
            lround(o[i].count * (double)(j + 1) / per) - lround(o[i].count * (double)j / per);
        for (long r = 0; r < due; r++) op_run(&o[i], &h[i].b, &h[i].cfg, h[i].samples);
      }
    for (int i = 0; i < n; i++)
      for (long r = 0; !o[i].per_micro && timed_here(&o[i], cpu) && r < lround(o[i].count); r++)
        op_run(&o[i], &h[i].b, &h[i].cfg, h[i].samples);
    dt_sync();
    if (trial >= 0) t[trial] = dt_now() - t0;
  }
  for (int i = 0; i < n; i++)
    if (timed_here(&o[i], cpu)) bench_free(&h[i]);
  free(h);
  return quartile(t, trials);
}

/* Whether this rank times stage s, cp rank cr: its own where the world is
 * the mesh, every one where it is smaller. */
static int holds(const mesh *x, const dt_comm *w, int64_t s, int64_t cr) {
  int64_t T = x->n[TP], C = x->n[CP], r = w->rank;
  return mesh_size(x) != w->size || (s == r / (T * C) % x->n[PP] && cr == r / T % C);
}

/* The index of o's kernel and shape among the n timed, or -1. */
static int find(const op *timed, int n, const op *o) {
  for (int j = 0; j < n; j++)
    if (timed[j].k == o->k && !memcmp(timed[j].s, o->s, sizeof o->s)) return j;
  return -1;
}

enum { PER = 96, K = 7, TRIALS = 9 }; /* ops a rank times at most; K: kernel, shape, seconds */

/* This rank's operations, each shape once: to run (op), and as rows of K
 * doubles (kernel, shape, seconds), the form the ranks exchange. */
typedef struct {
  op op[PER];
  double row[PER * K];
  int n;
} timings;

static op listed[MAXOPS]; /* one stage's operations (ops_of): too many for the stack */

/* The operations of every stage this rank holds, each kernel and shape once. */
static void list_mine(timings *t, const dt_comm *w, const model *m, const mesh *x, int cpu) {
  for (int64_t s = 0; s < x->n[PP]; s++)
    for (int64_t cr = 0; cr < x->n[CP]; cr++) {
      if (!holds(x, w, s, cr)) continue;
      int k = ops_of(m, x, s, cr, listed, MAXOPS);
      for (int i = 0; i < k && t->n < PER; i++) {
        /* no kernel here (the roofline costs it), or timed already */
        if (!timed_here(&listed[i], cpu) || find(t->op, t->n, &listed[i]) >= 0) continue;
        double *r = &t->row[t->n * K];
        r[0] = listed[i].k;
        for (int d = 0; d < 5; d++) r[1 + d] = (double)listed[i].s[d];
        r[6] = 1e30;
        t->op[t->n++] = listed[i];
      }
    }
}

/* Asked before any buffer is allocated: a model too large for this machine
 * gets a message, not the kernel's out-of-memory killer (gpt3-small: 21 GB
 * a rank). */
static void refuse_too_large(const timings *t, dt_comm *w, const model *m, const machine *c) {
  double need = 0, have = dt_memory_available() / (double)c->gpus_per_node;
  for (int i = 0; i < t->n; i++) need = fmax(need, 40.0 * (double)(op_largest(&t->op[i]) + 64));
  dt_host_all_reduce(w, &need, 1, DT_F64, DT_MAX);
  dt_host_all_reduce(w, &have, 1, DT_F64, DT_MIN);
  if (need > have)
    dt_fail("--measure times each operation of %s at its shapes: %.1f GB a rank, %.1f GB here; "
            "measure a smaller model (the lessons', or --layers --dim --seq ...) or predict for a "
            "cluster (--cluster)",
            m->name, need / 1e9, have / 1e9);
}

/* The stages' compute replayed as a step runs it, every rank at once: each
 * op's time becomes its hot time scaled by replayed / summed-hot. f: the
 * ranks' smallest factor (negated) and largest, and whether a stage was
 * not replayed (its buffers would not fit at once). */
static void scale_by_replay(timings *t, dt_comm *w, const model *m, const mesh *x, int cpu,
                            double f[3]) {
  double replayed = 0, hot = 0;
  dt_host_all_reduce(w, &replayed, 1, DT_F64, DT_SUM); /* a barrier */
  for (int64_t s = 0; s < x->n[PP]; s++)
    for (int64_t cr = 0; cr < x->n[CP]; cr++) {
      if (!holds(x, w, s, cr)) continue;
      int k = ops_of(m, x, s, cr, listed, MAXOPS);
      double r = replay(listed, k, m, x, s, TRIALS, cpu);
      for (int i = 0, j; i < k && r > 0; i++)
        if ((j = find(t->op, t->n, &listed[i])) >= 0) hot += listed[i].count * t->row[j * K + 6];
      replayed += r;
    }
  f[0] = f[1] = replayed > 0 && hot > 0 ? replayed / hot : 1;
  f[2] = t->n > 0 && !(replayed > 0);
  for (int i = 0; i < t->n; i++) t->row[i * K + 6] *= f[0];
  f[0] = -f[0];
  dt_host_all_reduce(w, f, 3, DT_F64, DT_MAX);
}

/* Every rank's rows into c->ops on every rank, the slowest rank's time
 * where two measured a shape. */
static void share(timings *t, dt_comm *w, machine *c) {
  double *all = dt_host_alloc((size_t)(w->size * PER * K), sizeof *all);
  for (int i = t->n; i < PER; i++) t->row[i * K] = -1;
  dt_host_gather(w, t->row, all, PER * K, DT_F64, 0);
  dt_host_broadcast(w, all, (size_t)(w->size * PER * K), DT_F64, 0);
  for (int i = 0; i < w->size * PER; i++) {
    double *e = all + i * K;
    if (e[0] < 0) continue;
    timed_op o = {(int)e[0],
                  {(int64_t)e[1], (int64_t)e[2], (int64_t)e[3], (int64_t)e[4], (int64_t)e[5]},
                  e[6]};
    int j = 0;
    while (j < c->nops && (c->ops[j].k != o.k || memcmp(c->ops[j].s, o.s, sizeof o.s))) j++;
    if (j == c->nops && c->nops < MAXOPS)
      c->ops[c->nops++] = o;
    else if (j < c->nops)
      c->ops[j].seconds = fmax(c->ops[j].seconds, o.seconds);
  }
  free(all);
}

/* What was measured, and stage 0's costliest operations at those times. */
static void print_costliest(const model *m, const mesh *x, const machine *c, const double f[3]) {
  dt_print0("\noperations of the step at their shapes (compute.c): each alone, the fastest of 9 "
            "trials; then the stage's compute replayed as a step runs it (microbatch by "
            "microbatch, layer by layer, each operation on buffers of its own, every rank at once; "
            "the lower quartile of 9): %.2f to %.2f times the sum of their fastest (the ranks'; "
            "alone, in a loop, an operation keeps its data in the caches, in a step the others "
            "come between)%s; each operation's time below is its fastest times its rank's "
            "factor, the slowest rank's: %d; stage 0's, cp rank 0's, the costliest first:\n"
            "    kernel   shape                             us a call  calls a step   ms a step\n",
            -f[0], f[1],
            f[2] > 0 ? "; not replayed where a stage's buffers would not fit at once: factor 1"
                     : "",
            c->nops);
  op *o = listed;
  int k = ops_of(m, x, 0, 0, o, MAXOPS), shown[MAXOPS] = {0};
  for (int row = 0; row < 12 && row < k; row++) { /* a selection sort of the few shown */
    int best = -1;
    for (int i = 0; i < k; i++)
      if (!shown[i] &&
          (best < 0 || o[i].count * op_seconds(&o[i], c) > o[best].count * op_seconds(&o[best], c)))
        best = i;
    shown[best] = 1;
    char shape[48];
    snprintf(shape, sizeof shape, "%lld %lld %lld %lld %lld", (long long)o[best].s[0],
             (long long)o[best].s[1], (long long)o[best].s[2], (long long)o[best].s[3],
             (long long)o[best].s[4]);
    dt_print0("    %-8s %-30s %10.2f  %12.0f  %10.3f%s\n", kernel_name[o[best].k], shape,
              op_seconds(&o[best], c) * 1e6, o[best].count,
              o[best].count * op_seconds(&o[best], c) * 1e3, o[best].backward ? "  backward" : "");
  }
}

/* This rank's stages' operations, timed once per shape, then replayed as a
 * step; then every rank's table on every rank. */
void time_ops(dt_comm *w, const model *m, const mesh *x, machine *c) {
  static timings t;
  double f[3] = {0};
  int cpu = !strcmp(dt_backend(), "cpu");
  t.n = 0;
  list_mine(&t, w, m, x, cpu);
  refuse_too_large(&t, w, m, c);
  /* taking turns, as 03 does: each op's trials spread over the whole
   * measurement, so that a burst of another job's load costs one trial of
   * several ops, not every trial of one */
  for (int trial = 0; trial < TRIALS; trial++)
    for (int i = 0; i < t.n; i++)
      t.row[i * K + 6] = fmin(t.row[i * K + 6], op_time(&t.op[i], m, 1));
  scale_by_replay(&t, w, m, x, cpu, f);
  share(&t, w, c);
  print_costliest(m, x, c, f);
}
