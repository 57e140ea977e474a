/* timeline.c: what 09_pp measures of its schedule, beside the lesson.
 *
 * Every action of a step is timed from a common start (a barrier: for the
 * measurement only). Busy is forward and backward compute; idle is the rest
 * of the step up to the last backward anywhere: waiting for a neighbour and
 * the transfers themselves. Rank 0 gathers every stage's actions of the
 * fastest step, the one least disturbed by other processes on the machine,
 * and draws them. All of it is bookkeeping (dt_host_*): never counted. And
 * before the run, each stage's plan as a list. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "timeline.h"

enum { WIDTH = 100 }; /* columns of the drawing */

struct timeline {
  int n, V, zb;       /* actions per step; chunks a stage (virtual stages); W's apart */
  double *rec, *best; /* per action: t0, t1, type (0 F, 1 B, 2 W), microbatch, chunk */
  double t_start, busy, best_T;
  double busy_sum, span_sum; /* over the steps */
  int64_t steps;
};

/* F3, or with chunks F3a, F3b ...: microbatch 3 in chunk 0, 1 ... */
static int label(char *buf, size_t len, char type, int mb, int chunk, int V) {
  return V > 1 ? snprintf(buf, len, "%c%d%c", type, mb, 'a' + chunk % 26)
               : snprintf(buf, len, "%c%d", type, mb);
}

void timeline_plan(dt_comm *world, const action *plan, int n, int V, const char *layers) {
  char line[640];
  int len = snprintf(line, sizeof line, "stage %d: layers %s, plan", world->rank, layers);
  for (int i = 0; i < n && i < 32 && len < 500; i++) {
    line[len++] = ' ';
    len += label(line + len, sizeof line - (size_t)len, plan[i].type, plan[i].mb, plan[i].chunk, V);
  }
  dt_print_ranks("%s%s\n", line, n > 32 ? " ..." : "");
}

timeline *timeline_new(int n) {
  timeline *t = dt_host_alloc(1, sizeof *t);
  t->n = n;
  t->V = 1;
  t->rec = dt_host_alloc((size_t)(10 * n), sizeof(double));
  t->best = t->rec + 5 * n;
  t->best_T = 1e30;
  return t;
}

void timeline_schedule(timeline *t, int V, int zb) {
  t->V = V;
  t->zb = zb;
}

void timeline_start(timeline *t, dt_comm *world) {
  dt_sync();
  dt_host_barrier(world);
  t->t_start = dt_now();
  t->busy = 0;
}

void timeline_record(timeline *t, int i, const action *a, double t0) {
  dt_sync();
  double t1 = dt_now(), *r = t->rec + 5 * i;
  char name[16];
  label(name, sizeof name, a->type, a->mb, a->chunk, t->V);
  dt_span_end(name, "compute", t0);
  r[0] = t0 - t->t_start;
  r[1] = t1 - t->t_start;
  r[2] = a->type == 'B' ? 1 : a->type == 'W' ? 2 : 0;
  r[3] = a->mb;
  r[4] = a->chunk;
  t->busy += t1 - t0;
}

/* The step's length: from the common start to the last backward anywhere. */
void timeline_step_end(timeline *t, dt_comm *world) {
  double T = t->rec[5 * (t->n - 1) + 1];
  dt_host_all_reduce(world, &T, 1, DT_F64, DT_MAX);
  t->busy_sum += t->busy;
  t->span_sum += T;
  t->steps++;
  if (T < t->best_T) {
    t->best_T = T;
    memcpy(t->best, t->rec, (size_t)(5 * t->n) * sizeof(double));
  }
}

/* One row per stage, one column per 1/WIDTH of the step: "F3>>" a forward
 * of microbatch 3, "B3<<" a backward, "W3==" its weights' gradients, '.'
 * idle. rec: t0, t1, type, mb, chunk; the formula's M units, of n actions. */
static void draw(const double *rec, int N, int n, int V, int units, double T) {
  double busy = 0;
  dt_print0("\ntimeline of the fastest step (%.2f ms, %d columns; F<mb>>> forward, B<mb><< "
            "backward, %s. idle):\n",
            T * 1e3, WIDTH, units == n ? "W<mb>== weights' gradients, " : "");
  for (int s = 0; s < N; s++) {
    char row[WIDTH + 1], name[16];
    memset(row, '.', WIDTH);
    row[WIDTH] = 0;
    for (const double *r = rec + 5 * s * n; r < rec + 5 * (s + 1) * n; r += 5) {
      int c0 = (int)(r[0] / T * WIDTH), c1 = (int)(r[1] / T * WIDTH + 0.5);
      if (c1 <= c0) c1 = c0 + 1;
      busy += r[1] - r[0];
      int len = label(name, sizeof name, "FBW"[(int)r[2]], (int)r[3], (int)r[4], V);
      for (int c = c0; c < c1 && c < WIDTH; c++)
        row[c] = c - c0 < len ? name[c - c0] : "><="[(int)r[2]];
    }
    dt_print0("  stage %d |%s|\n", s, row);
  }
  dt_print0("bubble of this step: measured idle / (N x step) = %.1f%%; formula (N-1)/(%s+N-1) = "
            "%.1f%%\n",
            100 * (1 - busy / (N * T)),
            units == n ? "3M"
            : V > 1    ? "VM"
                       : "M",
            100.0 * (N - 1) / (units + N - 1));
}

void timeline_report(const timeline *t, dt_comm *world, int64_t M) {
  int N = world->size, s = world->rank;
  double steps = (double)t->steps, idle = t->span_sum - t->busy_sum, all_idle = idle;
  dt_host_reduce(world, &all_idle, 1, DT_F64, DT_SUM, 0);
  dt_print0("\nper stage (%lld steps; busy = forward and backward compute, idle = the rest of the "
            "step):\n",
            (long long)t->steps);
  dt_print_ranks("stage %d | busy %.3f ms idle %.3f ms per step (%.1f%% idle)\n", s,
                 t->busy_sum / steps * 1e3, idle / steps * 1e3, 100 * idle / t->span_sum);
  int64_t VM = t->zb ? 3 * M : t->V * M; /* V chunks: VM actions of 1/V the length; zb: 3M */
  double bubble = all_idle / (N * t->span_sum), formula = (N - 1) / (double)(VM + N - 1);
  dt_print0("bubble over all steps: measured idle / (N x step) = %.1f%%; formula (N-1)/(%s+N-1) = "
            "%d/%lld = %.1f%%\n",
            100 * bubble,
            t->zb      ? "3M"
            : t->V > 1 ? "VM"
                       : "M",
            N - 1, (long long)(VM + N - 1), 100 * formula);
  dt_report_figure(NULL, "bubble", bubble, formula);
  double *all = s == 0 ? dt_host_alloc((size_t)(5 * t->n * N), sizeof(double)) : NULL;
  dt_host_gather(world, t->best, all, (size_t)(5 * t->n), DT_F64, 0);
  if (s == 0) draw(all, N, t->n, t->V, (int)(t->zb ? t->n : t->n / 2), t->best_T);
  free(all);
}

void timeline_free(timeline *t) {
  if (!t) return;
  free(t->rec);
  free(t);
}
