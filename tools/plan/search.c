/* search.c: --search, every mesh of --gpus devices (dp x pp x cp x tp),
 * ZeRO stage, microbatch size and recomputation the model allows, predicted;
 * those that fit in memory ranked by tokens per second, the rest counted
 * by the reason they fail, with one example each. */
#include <stdio.h>
#include <stdlib.h>

#include "13_plan/cost.h"
#include "dt.h"
#include "report.h"
#include "search.h"

typedef struct {
  mesh x;
  int64_t micro;
  double tps, mfu, gb, step;
  char top_cost[32];
} shape;

/* The rejected, counted by what stops them, each group with one example. */
enum { DIVIDES, BEYOND_NODE, LESSON_CANNOT, MEMORY, NEEDS_FLASH, GROUPS };
static const char *const group_name[GROUPS] = {
    "does not divide (heads, MLP, layers, sequence or batch)", "tp beyond a node",
    "the lesson cannot run it", "memory: more than the device holds", "ring attention needs flash"};
static const int group_of[NREFUSALS] = {
    [ONE_AXIS] = LESSON_CANNOT, [TP_HEADS] = DIVIDES,           [PP_LAYERS] = DIVIDES,
    [SEQ_CHUNKS] = DIVIDES,     [BATCH_MICRO] = DIVIDES,        [BATCH_DP] = DIVIDES,
    [TP_NODE] = BEYOND_NODE,    [LESSONS_FP32] = LESSON_CANNOT, [ZERO_12] = LESSON_CANNOT,
    [ZERO_06] = LESSON_CANNOT,  [RING_FLASH] = NEEDS_FLASH,     [KV_HEADS] = DIVIDES,
    [STAGES] = DIVIDES,         [GPT_ONLY] = LESSON_CANNOT,     [ZB_RECOMPUTE] = LESSON_CANNOT};

typedef struct {
  shape *ok; /* the shapes that fit */
  int n, cap;
  int rejected[GROUPS];
  char example[GROUPS][400];
  double nearest; /* of the shapes past the device's memory, the smallest total */
} tally;

static int by_throughput(const void *a, const void *b) {
  double x = ((const shape *)a)->tps, y = ((const shape *)b)->tps;
  return (x < y) - (x > y);
}

/* The largest part of a predicted step: where the time goes. */
static const char *largest(const prediction *p) {
  static char what[32];
  double best = p->compute_s;
  snprintf(what, sizeof what, "compute");
  for (int a = PP; a < NCOMM; a++)
    if (p->comm_s[a] > best) {
      best = p->comm_s[a];
      snprintf(what, sizeof what, "%s comm", axis_name[a]);
    }
  if (p->bubble_s > best) snprintf(what, sizeof what, "bubble");
  return what;
}

/* One shape: refused (counted by its reason), past the device's memory
 * (the nearest miss kept: it tells most), or predicted and kept. */
static void consider(tally *t, const model *m, const mesh *x, const machine *c, int64_t micro,
                     int64_t gpus) {
  mesh_refusal r = m->B % x->n[DP] ? BATCH_DP : mesh_problem(m, x, c->gpus_per_node);
  char shown[160];
  snprintf(shown, sizeof shown, "dp %lld pp %lld cp %lld tp %lld zero %d micro %lld%s%s",
           (long long)x->n[DP], (long long)x->n[PP], (long long)x->n[CP], (long long)x->n[TP],
           x->zero, (long long)micro, x->recompute ? " recompute " : "",
           x->recompute ? recompute_name[x->recompute] : "");
  if (r != RUNS) {
    int g = group_of[r];
    if (!t->rejected[g]++) {
      char why[200];
      refusal_text(r, m, x, c->gpus_per_node, why, sizeof why);
      snprintf(t->example[g], sizeof t->example[g], "%s: %s", shown, why);
    }
    return;
  }
  prediction p;
  predict(m, x, c, &p);
  if ((double)p.mem.total > c->hbm) {
    t->rejected[MEMORY]++;
    if ((double)p.mem.total < t->nearest) {
      t->nearest = (double)p.mem.total;
      snprintf(t->example[MEMORY], sizeof t->example[MEMORY], "%s: %.1f GB > %.1f GB", shown,
               (double)p.mem.total / 1e9, c->hbm / 1e9);
    }
    return;
  }
  if (t->n == t->cap) return;
  shape *k = &t->ok[t->n++];
  *k = (shape){*x,
               micro,
               p.tokens / p.step_s,
               p.model_flops / (p.step_s * (double)gpus * c->flops),
               (double)p.mem.total / 1e9,
               p.step_s,
               ""};
  snprintf(k->top_cost, sizeof k->top_cost, "%s", largest(&p));
}

/* Every dp x pp x cp x tp of gpus, ZeRO stage, recomputation and
 * microbatch size (powers of 2) the model allows. */
static void every_shape(tally *t, const model *m, const mesh *base, const machine *c,
                        int64_t gpus) {
  int zmax = m->kind == GPT ? 3 : m->kind == MESH12 ? 1 : m->kind == FSDP06 ? 3 : 0;
  int zmin = m->kind == FSDP06 ? 1 : 0, rmax = m->kind == GPT ? RECOMPUTE_SELECTIVE : 0;
  for (int64_t tp = 1; tp <= gpus; tp++)
    for (int64_t pp = 1; gpus % tp == 0 && pp <= gpus / tp; pp++)
      for (int64_t cp = 1; (gpus / tp) % pp == 0 && cp <= gpus / (tp * pp); cp++) {
        if ((gpus / (tp * pp)) % cp) continue;
        int64_t dp = gpus / (tp * pp * cp), per = m->B / dp;
        for (int z = zmin; z <= zmax; z++)
          for (int rc = 0; rc <= rmax; rc++)
            for (int64_t micro = 1; micro <= (per > 0 ? per : 1); micro *= 2) {
              mesh x = *base;
              x.n[DP] = dp;
              x.n[PP] = pp;
              x.n[CP] = cp;
              x.n[TP] = tp;
              x.zero = z;
              x.recompute = rc;
              x.M = per > 0 && per % micro == 0 ? per / micro : 0;
              consider(t, m, &x, c, micro, gpus);
            }
      }
}

static void print_json(const tally *t, int64_t gpus, int top) {
  const shape *ok = t->ok;
  dt_print0("{\"gpus\": %lld, \"fit\": %d, \"top\": [", (long long)gpus, t->n);
  for (int i = 0; i < t->n && i < top; i++)
    dt_print0("%s{\"dp\": %lld, \"pp\": %lld, \"cp\": %lld, \"tp\": %lld, \"zero\": %d, "
              "\"micro\": %lld, "
              "\"recompute\": \"%s\", \"tokens_per_s\": %.6g, \"mfu\": %.4f, \"memory_gb\": %.4g}",
              i ? ", " : "", (long long)ok[i].x.n[DP], (long long)ok[i].x.n[PP],
              (long long)ok[i].x.n[CP], (long long)ok[i].x.n[TP], ok[i].x.zero,
              (long long)ok[i].micro, recompute_name[ok[i].x.recompute], ok[i].tps, ok[i].mfu,
              ok[i].gb);
  dt_print0("]}\n");
}

static void print_table(const tally *t, const model *m, const machine *c, int64_t gpus, int top) {
  const shape *ok = t->ok;
  dt_print0("\nsearch: %s on %lld devices of %s: %d shapes fit, ranked by predicted tokens/s\n"
            "   #     dp   pp   cp   tp  zero  micro  M     recompute   step s    tokens/s    "
            "MFU   memory GB  largest part\n",
            m->name, (long long)gpus, c->name, t->n);
  for (int i = 0; i < t->n && i < top; i++)
    dt_print0("  %3d  %5lld %4lld %4lld %4lld  %4d  %5lld  %-5lld %-9s %9.4g %11.4g  %5.1f%%  "
              "%9.2f  %s\n",
              i + 1, (long long)ok[i].x.n[DP], (long long)ok[i].x.n[PP], (long long)ok[i].x.n[CP],
              (long long)ok[i].x.n[TP], ok[i].x.zero, (long long)ok[i].micro, (long long)ok[i].x.M,
              recompute_name[ok[i].x.recompute], ok[i].step, ok[i].tps, 100 * ok[i].mfu, ok[i].gb,
              ok[i].top_cost);
  dt_print0("rejected:\n");
  for (int g = 0; g < GROUPS; g++)
    if (t->rejected[g])
      dt_print0("  %6d  %s; %s %s\n", t->rejected[g], group_name[g],
                g == MEMORY ? "the nearest:" : "e.g.", t->example[g]);
  if (t->n) { /* the first in full: where its time goes, what it holds */
    prediction p;
    predict(m, &ok[0].x, c, &p);
    dt_print0("\n#1 in full:");
    report_table(m, &ok[0].x, c, &p);
  }
}

int search(const model *m, const mesh *base, const machine *c, int64_t gpus, int top, int json) {
  tally t = {.cap = 1 << 16, .nearest = 1e300};
  t.ok = dt_host_alloc((size_t)t.cap, sizeof *t.ok);
  every_shape(&t, m, base, c, gpus);
  qsort(t.ok, (size_t)t.n, sizeof *t.ok, by_throughput);
  if (json)
    print_json(&t, gpus, top);
  else
    print_table(&t, m, c, gpus, top);
  free(t.ok);
  return t.n;
}
