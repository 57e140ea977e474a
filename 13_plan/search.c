/* search.c: --search, every mesh of --gpus devices (dp x pp x cp x tp),
 * ZeRO stage, microbatch size and recomputation the model allows, predicted;
 * those that fit in memory ranked by tokens per second, the rest counted
 * by the reason they fail, with one example each. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

typedef struct {
  mesh x;
  int64_t micro;
  double tps, mfu, gb, step;
  char top_cost[32];
} shape;

enum { REASONS = 5 };
static const char *const reason_name[REASONS] = {
    "does not divide (heads, MLP, layers, sequence or batch)", "tp beyond a node",
    "the lesson cannot run it", "memory: more than the device holds", "ring attention needs flash"};

static int by_throughput(const void *a, const void *b) {
  double x = ((const shape *)a)->tps, y = ((const shape *)b)->tps;
  return (x < y) - (x > y);
}

static int reason_of(const char *why) {
  return strstr(why, "beyond a node")                    ? 1
         : strstr(why, "flash")                          ? 4
         : strstr(why, "divide") || strstr(why, "split") ? 0
                                                         : 2;
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

int search(const model *m, const mesh *base, const machine *c, int64_t gpus, int top, int json) {
  int cap = 1 << 16, n = 0, rejected[REASONS] = {0};
  double nearest = 1e300;
  shape *ok = dt_host_alloc((size_t)cap, sizeof *ok);
  char example[REASONS][400] = {{0}};
  int zmax = m->kind == GPT ? 3 : m->kind == MESH12 ? 1 : m->kind == FSDP06 ? 3 : 0;
  int zmin = m->kind == FSDP06 ? 1 : 0, rmax = m->kind == GPT ? 1 : 0;
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
              const char *why = m->B % dp ? "the batch does not divide over dp"
                                          : mesh_problem(m, &x, c->gpus_per_node);
              char shown[160];
              snprintf(shown, sizeof shown, "dp %lld pp %lld cp %lld tp %lld zero %d micro %lld%s",
                       (long long)dp, (long long)pp, (long long)cp, (long long)tp, z,
                       (long long)micro, rc ? " recompute" : "");
              if (why) {
                int r = reason_of(why);
                if (!rejected[r]++) snprintf(example[r], sizeof example[r], "%s: %s", shown, why);
                continue;
              }
              prediction p;
              predict(m, &x, c, &p);
              if ((double)p.mem.total > c->hbm) {
                rejected[3]++;
                if ((double)p.mem.total < nearest) { /* the nearest miss tells most */
                  nearest = (double)p.mem.total;
                  snprintf(example[3], sizeof example[3], "%s: %.1f GB > %.1f GB", shown,
                           (double)p.mem.total / 1e9, c->hbm / 1e9);
                }
                continue;
              }
              if (n == cap) continue;
              ok[n++] = (shape){x,
                                micro,
                                p.tokens / p.step_s,
                                p.model_flops / (p.step_s * (double)gpus * c->flops),
                                (double)p.mem.total / 1e9,
                                p.step_s,
                                ""};
              snprintf(ok[n - 1].top_cost, sizeof ok[n - 1].top_cost, "%s", largest(&p));
            }
      }
  qsort(ok, (size_t)n, sizeof *ok, by_throughput);
  if (json) {
    dt_print0("{\"gpus\": %lld, \"fit\": %d, \"top\": [", (long long)gpus, n);
    for (int i = 0; i < n && i < top; i++)
      dt_print0("%s{\"dp\": %lld, \"pp\": %lld, \"cp\": %lld, \"tp\": %lld, \"zero\": %d, "
                "\"micro\": %lld, "
                "\"recompute\": %s, \"tokens_per_s\": %.6g, \"mfu\": %.4f, \"memory_gb\": %.4g}",
                i ? ", " : "", (long long)ok[i].x.n[DP], (long long)ok[i].x.n[PP],
                (long long)ok[i].x.n[CP], (long long)ok[i].x.n[TP], ok[i].x.zero,
                (long long)ok[i].micro, ok[i].x.recompute ? "true" : "false", ok[i].tps, ok[i].mfu,
                ok[i].gb);
    dt_print0("]}\n");
  } else {
    dt_print0("\nsearch: %s on %lld devices of %s: %d shapes fit, ranked by predicted tokens/s\n"
              "   #     dp   pp   cp   tp  zero  micro  M     recompute   step s    tokens/s    "
              "MFU   memory GB  largest part\n",
              m->name, (long long)gpus, c->name, n);
    for (int i = 0; i < n && i < top; i++)
      dt_print0("  %3d  %5lld %4lld %4lld %4lld  %4d  %5lld  %-5lld %-9s %9.4g %11.4g  %5.1f%%  "
                "%9.2f  %s\n",
                i + 1, (long long)ok[i].x.n[DP], (long long)ok[i].x.n[PP], (long long)ok[i].x.n[CP],
                (long long)ok[i].x.n[TP], ok[i].x.zero, (long long)ok[i].micro,
                (long long)ok[i].x.M, ok[i].x.recompute ? "full" : "none", ok[i].step, ok[i].tps,
                100 * ok[i].mfu, ok[i].gb, ok[i].top_cost);
    dt_print0("rejected:\n");
    for (int r = 0; r < REASONS; r++)
      if (rejected[r])
        dt_print0("  %6d  %s; %s %s\n", rejected[r], reason_name[r],
                  r == 3 ? "the nearest:" : "e.g.", example[r]);
    if (n) { /* the first in full: where its time goes, what it holds */
      prediction p;
      predict(m, &ok[0].x, c, &p);
      dt_print0("\n#1 in full:");
      report_table(m, &ok[0].x, c, &p);
    }
  }
  free(ok);
  return n;
}
