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
  int n;              /* actions per step */
  double *rec, *best; /* per action: t0, t1, type (1: backward), microbatch */
  double t_start, busy, best_T;
  double busy_sum, span_sum; /* over the steps */
  int64_t steps;
};

void timeline_plan(dt_comm *world, const action *plan, int n, int64_t l0, int64_t L) {
  char line[512];
  int len = snprintf(line, sizeof line, "stage %d: layers %lld-%lld, plan", world->rank,
                     (long long)l0, (long long)(l0 + L - 1));
  for (int i = 0; i < n && i < 32 && len < 400; i++)
    len += snprintf(line + len, sizeof line - (size_t)len, " %c%d", plan[i].type, plan[i].mb);
  dt_print_ranks("%s%s\n", line, n > 32 ? " ..." : "");
}

timeline *timeline_new(int n) {
  timeline *t = dt_host_alloc(1, sizeof *t);
  t->n = n;
  t->rec = dt_host_alloc((size_t)(8 * n), sizeof(double));
  t->best = t->rec + 4 * n;
  t->best_T = 1e30;
  return t;
}

void timeline_start(timeline *t, dt_comm *world) {
  dt_sync();
  dt_host_barrier(world);
  t->t_start = dt_now();
  t->busy = 0;
}

void timeline_record(timeline *t, int i, const action *a, double t0) {
  dt_sync();
  double t1 = dt_now(), *r = t->rec + 4 * i;
  char name[16];
  snprintf(name, sizeof name, "%c%d", a->type, a->mb);
  dt_span_end(name, "compute", t0);
  r[0] = t0 - t->t_start;
  r[1] = t1 - t->t_start;
  r[2] = a->type == 'B';
  r[3] = a->mb;
  t->busy += t1 - t0;
}

/* The step's length: from the common start to the last backward anywhere. */
void timeline_step_end(timeline *t, dt_comm *world) {
  double T = t->rec[4 * (t->n - 1) + 1];
  dt_host_all_reduce(world, &T, 1, DT_F64, DT_MAX);
  t->busy_sum += t->busy;
  t->span_sum += T;
  t->steps++;
  if (T < t->best_T) {
    t->best_T = T;
    memcpy(t->best, t->rec, (size_t)(4 * t->n) * sizeof(double));
  }
}

/* One row per stage, one column per 1/WIDTH of the step: "F3>>" a forward
 * of microbatch 3, "B3<<" a backward, '.' idle. rec: t0, t1, type, mb. */
static void draw(const double *rec, int N, int n, double T) {
  double busy = 0;
  dt_print0("\ntimeline of the fastest step (%.2f ms, %d columns; F<mb>>> forward, B<mb><< "
            "backward, . idle):\n",
            T * 1e3, WIDTH);
  for (int s = 0; s < N; s++) {
    char row[WIDTH + 1], label[16];
    memset(row, '.', WIDTH);
    row[WIDTH] = 0;
    for (const double *r = rec + 4 * s * n; r < rec + 4 * (s + 1) * n; r += 4) {
      int c0 = (int)(r[0] / T * WIDTH), c1 = (int)(r[1] / T * WIDTH + 0.5);
      if (c1 <= c0) c1 = c0 + 1;
      busy += r[1] - r[0];
      int len = snprintf(label, sizeof label, "%c%d", r[2] > 0 ? 'B' : 'F', (int)r[3]);
      for (int c = c0; c < c1 && c < WIDTH; c++)
        row[c] = c - c0 < len ? label[c - c0] : (r[2] > 0 ? '<' : '>');
    }
    dt_print0("  stage %d |%s|\n", s, row);
  }
  dt_print0("bubble of this step: measured idle / (N x step) = %.1f%%; formula (N-1)/(M+N-1) = "
            "%.1f%%\n",
            100 * (1 - busy / (N * T)), 100.0 * (N - 1) / (n / 2 + N - 1));
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
  double bubble = all_idle / (N * t->span_sum), formula = (N - 1) / (double)(M + N - 1);
  dt_print0("bubble over all steps: measured idle / (N x step) = %.1f%%; formula (N-1)/(M+N-1) = "
            "%d/%lld = %.1f%%\n",
            100 * bubble, N - 1, (long long)(M + N - 1), 100 * formula);
  dt_report_figure(NULL, "bubble", bubble, formula);
  double *all = s == 0 ? dt_host_alloc((size_t)(4 * t->n * N), sizeof(double)) : NULL;
  dt_host_gather(world, t->best, all, (size_t)(4 * t->n), DT_F64, 0);
  if (s == 0) draw(all, N, t->n, t->best_T);
  free(all);
}

void timeline_free(timeline *t) {
  if (!t) return;
  free(t->rec);
  free(t);
}
