/* collectives.c: --measure's collectives over every rank: 03's ring
 * all-reduce by hand, its messages and bytes counted by the comm layer,
 * beside the library's all-reduce, reduce-scatter and all-gather, from
 * n x 4 B to n x 1 MiB; each library collective fitted through its ring
 * formula, and the ring's counts checked against collective_seconds' two
 * terms exactly (the exercise's check, make check-13). */
#include <math.h>
#include <stdio.h>

#include "13_plan/cost.h"
#include "dt.h"
#include "measure.h"
#include "stats.h"

/* 03's ring by hand: n-1 sendrecv steps of a reduce-scatter, n-1 of an
 * all-gather, on chunks of count/n (count a multiple of n). */
static void ring(dt_comm *c, float *buf, float *tmp, size_t count) {
  int n = c->size, r = c->rank, next = (r + 1) % n, prev = (r + n - 1) % n;
  size_t k = count / (size_t)n;
  for (int s = 0; s < n - 1; s++) {
    dt_sendrecv(c, buf + (size_t)((r - s + n) % n) * k, k, next, tmp, k, prev, DT_F32);
    dt_add(buf + (size_t)((r - s - 1 + 2 * n) % n) * k, tmp, k);
  }
  for (int s = 0; s < n - 1; s++)
    dt_sendrecv(c, buf + (size_t)((r + 1 - s + n) % n) * k, k, next,
                buf + (size_t)((r - s + n) % n) * k, k, prev, DT_F32);
}

enum { J = 10, V = 4 }; /* sizes; 03's ring by hand, the library's all-reduce, RS, AG */

/* What the sizes found: each library collective's points for its fit, and
 * how often each of collective_seconds' terms differed from the ring (the
 * first time in words). */
typedef struct {
  double x[V][J], y[V][J], t[V][J], sizes[J];
  int said[2];
  char term[2][200];
} sweep;

/* The V collectives at count floats, reps calls each: the lower quartile
 * of each, the slowest rank's. */
static void time_collectives(dt_comm *w, float *buf, float *tmp, size_t count, int reps,
                             double best[V]) {
  size_t part = count / (size_t)w->size;
  double times[V][30];
  for (int rep = 0; rep < reps; rep++)
    for (int v = 0; v < V; v++) { /* taking turns, as 03: a burst of load slows all alike */
      if (v == 0)                 /* every element rank + 1: the sum is n(n+1)/2, exact */
        dt_fill_uniform(buf, count, 1, 0, 0, (float)(w->rank + 1), (float)(w->rank + 1));
      dt_host_barrier(w);
      double t0 = dt_now();
      if (v == 0) ring(w, buf, tmp, count);
      if (v == 1) dt_all_reduce(w, tmp, tmp, count, DT_F32, DT_SUM);
      if (v == 2) dt_reduce_scatter(w, tmp, tmp + count, part, DT_F32, DT_SUM);
      if (v == 3) dt_all_gather(w, tmp + count, tmp, part, DT_F32);
      dt_sync();
      times[v][rep] = dt_now() - t0;
    }
  for (int v = 0; v < V; v++) best[v] = quartile(times[v], reps);
  dt_host_all_reduce(w, best, V, DT_F64, DT_MAX);
}

/* Size j (n x 4^j floats): its row, the ring's messages and bytes against
 * collective_seconds' terms; 1 where they (or the ring's sum) differ. */
static int one_size(dt_comm *w, const machine *c, float *buf, float *tmp, int j, sweep *sw) {
  int n = w->size;
  size_t count = (size_t)n << (2 * j);
  double S = 4.0 * (double)count, best[V];
  int reps = j < 6 ? 30 : 5;
  channel alpha = {1, 0}, beta = {0, 1};
  dt_counter before = w->count[DT_SENDRECV];
  time_collectives(w, buf, tmp, count, reps, best);
  dt_counter got = w->count[DT_SENDRECV];
  double msgs = (double)(got.calls - before.calls) / reps;
  double bytes = (double)(got.bytes_sent - before.bytes_sent) / reps;
  double a = collective_seconds(AR, n, S, &alpha), b = collective_seconds(AR, n, S, &beta);
  float last = 0;
  dt_copy_to_host(&last, buf + count - 1, sizeof last);
  int wrong = fabs(a - msgs) > 1e-9 || fabs(b - bytes) > 0.5 || last != (float)(n * (n + 1) / 2);
  dt_host_all_reduce(w, &wrong, 1, DT_I32, DT_MAX);
  sw->sizes[j] = S;
  for (int v = 1; v < V; v++) { /* ring steps: 2(n-1) for the all-reduce, n-1 for the others */
    double k = v == 1 ? 2.0 : 1.0;
    sw->x[v][j] = k * (n - 1);
    sw->y[v][j] = k * (n - 1) / n * S;
    sw->t[v][j] = best[v];
  }
  dt_print0("  %11.0f  %8.0f  %10.4g  %10.0f  %10.4g  %9.1f %7.1f  %10.1f  %11.1f  %10.1f%s\n", S,
            msgs, a, bytes, b, best[0] * 1e6, collective_seconds(AR, n, S, &c->intra) * 1e6,
            best[1] * 1e6, best[2] * 1e6, best[3] * 1e6, wrong ? "   <- differs" : "");
  if (fabs(a - msgs) > 1e-9 && !sw->said[0]++)
    snprintf(sw->term[0], sizeof sw->term[0],
             "the alpha term: collective_seconds counts %.4g messages at n = %d; the ring sent "
             "%.0f, one after another",
             a, n, msgs);
  if (fabs(b - bytes) > 0.5 && !sw->said[1]++)
    snprintf(sw->term[1], sizeof sw->term[1],
             "the beta term: collective_seconds counts %.4g bytes at n = %d, S = %.0f; the ring "
             "sent %.0f",
             b, n, S, bytes);
  return wrong;
}

/* The all-reduce over the world at each size, 03's ring by hand beside the
 * library's, and the library's reduce-scatter and all-gather (06's); the
 * ring's messages and bytes against collective_seconds' two terms. Each
 * library collective is fitted through its ring formula. Returns the sizes
 * whose terms differ from what the ring sent. */
int measure_collectives(dt_comm *w, machine *c, float *buf, float *tmp, double largest) {
  sweep sw = {0};
  int n = w->size, bad = 0;
  channel *fitted[V] = {NULL, &c->ar, &c->rs, &c->ag};
  dt_print0(
      "\ncollectives over the %d ranks: 03's ring all-reduce by hand (sendrecv, counted) beside "
      "your collective_seconds(AR, n, S); the library's all-reduce, reduce-scatter, all-gather "
      "(the lower quartile of the calls, the slowest rank's)\n        bytes  messages  alpha-term  "
      "bytes sent"
      "   beta-term   ring(us) a+b(us)  all_reduce  reduce_scat  all_gather\n",
      n);
  for (int j = 0; j < J; j++) bad += one_size(w, c, buf, tmp, j, &sw);
  for (int i = 0; i < 2; i++)
    if (sw.said[i]) dt_print0("  %s (%d of %d sizes differ)\n", sw.term[i], sw.said[i], J);
  static const char *how[V] = {"", "all_reduce by 2(n-1) alpha + 2(n-1)/n S beta",
                               "reduce_scatter by (n-1) alpha + (n-1)/n S beta",
                               "all_gather by (n-1) alpha + (n-1)/n S beta"};
  for (int v = 1; v < V && n > 1; v++) {
    double res = fit_line(sw.x[v], sw.y[v], sw.t[v], sw.sizes, J, largest, &fitted[v]->alpha,
                          &fitted[v]->beta);
    dt_print0("  the library's %s: alpha %.2f us, beta %.4f ns/B; worst residual %.1f%%\n", how[v],
              fitted[v]->alpha * 1e6, fitted[v]->beta * 1e9, 100 * res);
  }
  return bad;
}
