/* measure.c: --measure, this machine as the cost model needs it.
 *
 *  - alpha and beta of the links: 01's ping-pong (half a round trip, the
 *    lower quartile of many) between two ranks of a node, and of two nodes
 *    when there are two, from 4 B to 4 MiB, fitted t = alpha + S beta
 *    (fit(): alpha from the smallest sizes, beta where the mesh's messages
 *    lie); each size's residual printed; and 09's and 11's sendrecv both
 *    ways at once between computations (swap()), their messages' alpha;
 *  - the collectives over every rank: 03's ring all-reduce by hand (its
 *    messages and bytes counted by the comm layer) beside the library's
 *    all-reduce, reduce-scatter and all-gather, from n x 4 B to n x 1 MiB,
 *    each library collective fitted through its ring formula. The ring's
 *    counts check collective_seconds' two terms exactly: the exercise's
 *    check (make check-13);
 *  - every operation of the mesh's step at its own shape (ops.c); a large
 *    GEMM's rate and the memory bandwidth, for what no table holds. */
#define _POSIX_C_SOURCE 200809L /* gethostname */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "13_plan/compute.h"
#include "13_plan/cost.h"
#include "13_plan/formulas.h"
#include "dt.h"
#include "measure.h"
#include "ops.h"
#include "stats.h"

/* The fit of t = a x + b y over sizes in ascending order, Hockney's way:
 * alpha from the 3 smallest sizes (latency alone), beta by least squares
 * on the 3 largest sizes up to 4 x the mesh's largest message, less alpha:
 * a cost curve is not a line (a protocol switch, a cache, a shaped link's
 * burst allowance bend it), so it is made straight where this mesh's
 * messages lie. Returns the worst relative residual over every size. */
static double largest_message;
static double fit(const double *x, const double *y, const double *t, const double *S, int n,
                  double *a, double *b) {
  double yy = 0, yt = 0, worst = 0;
  int hi = n;
  while (hi > 3 && S[hi - 1] > 4 * largest_message && largest_message > 0) hi--;
  *a = 0;
  for (int i = 0; i < 3; i++) *a += t[i] / x[i] / 3;
  for (int i = hi - 3; i < hi; i++) {
    yy += y[i] * y[i];
    yt += y[i] * (t[i] - *a * x[i]);
  }
  *b = yt > 0 ? yt / yy : 0;
  for (int i = 0; i < n; i++) worst = fmax(worst, fabs((*a * x[i] + *b * y[i]) / t[i] - 1));
  return worst;
}

/* 01's ping-pong between world ranks p and q: half the lower quartile of the round trips. */
static double pingpong(dt_comm *w, int p, int q, float *buf, size_t count, int reps) {
  double best = 0, t[64];
  for (int r = 0; r < reps && (w->rank == p || w->rank == q); r++) {
    double t0 = dt_now();
    if (w->rank == p) {
      dt_send(w, buf, count, DT_F32, q);
      dt_recv(w, buf, count, DT_F32, q);
    } else {
      dt_recv(w, buf, count, DT_F32, p);
      dt_send(w, buf, count, DT_F32, p);
    }
    t[r] = (dt_now() - t0) / 2;
  }
  if (w->rank == p) best = quartile(t, reps);
  dt_host_broadcast(w, &best, 1, DT_F64, p);
  return best;
}

/* 09's and 11's sendrecv between world ranks p and q, both ways at once,
 * at a small size, as a step makes it: between computations. On the cpu
 * backend a microbatch's compute evicts the message's path (Open MPI's and
 * the kernel's TCP code and data) from the core's caches, so each sendrecv
 * here follows 50 us of writes over 8 MiB, more than a core's L2 cache.
 * Emulated nodes at 1 Gbit/s: 34-40 us a sendrecv so (as long whether 5 or
 * 160 us of writes), 21-25 back to back, half a round trip 15. The time a
 * rank blocks, averaged over 16 rounds (the ranks' small skews cancel), the
 * lower quartile of 9 such. */
static volatile float evicted; /* read once, so no compiler drops the writes before free() */
static double swap(dt_comm *w, int p, int q, float *buf, size_t count) {
  enum { EVICT = 1 << 21, ROUNDS = 16, REPS = 9 }; /* EVICT in floats */
  double best = 0, t[REPS];
  int peer = w->rank == p ? q : p;
  size_t at = 0;
  float *work = strcmp(dt_backend(), "cpu") ? NULL : dt_host_alloc(EVICT, sizeof(float));
  for (int r = 0; r < REPS && (w->rank == p || w->rank == q); r++) {
    t[r] = 0;
    for (int k = 0; k <= ROUNDS; k++) { /* round 0 meets the ranks: not counted */
      for (double end = dt_now() + 50e-6; work && dt_now() < end;)
        for (int i = 0; i < 1024; i++, at = (at + 16) % EVICT) work[at] += 1; /* a line each */
      double t0 = dt_now();
      dt_sendrecv(w, buf, count, peer, buf + count, count, peer, DT_F32);
      t[r] += k ? (dt_now() - t0) / ROUNDS : 0;
    }
  }
  if (work) evicted = work[at];
  free(work);
  if (w->rank == p) best = quartile(t, REPS);
  dt_host_broadcast(w, &best, 1, DT_F64, p);
  return best;
}

enum { SIZES = 11 };
static channel link_between(dt_comm *w, int p, int q, const char *what, float *buf,
                            double *residual, double *swapped) {
  double x[SIZES], y[SIZES], t[SIZES];
  channel k = {0};
  dt_print0("\nping-pong %s (ranks %d and %d; 01's, half the lower quartile of the round trips): t "
            "= alpha + S beta\n"
            "        bytes   measured(us)   fit(us)   residual\n",
            what, p, q);
  for (int i = 0; i < SIZES; i++) {
    size_t count = (size_t)1 << (2 * i);
    x[i] = 1;
    y[i] = 4.0 * (double)count;
    t[i] = pingpong(w, p, q, buf, count, i < 6 ? 60 : 10);
  }
  *residual = fit(x, y, t, y, SIZES, &k.alpha, &k.beta);
  for (int i = 0; i < SIZES; i++)
    dt_print0("  %11.0f   %12.2f  %8.2f   %+7.1f%%\n", y[i], t[i] * 1e6,
              (k.alpha + y[i] * k.beta) * 1e6, 100 * ((k.alpha + y[i] * k.beta) / t[i] - 1));
  dt_print0(
      "  alpha %.2f us (the 3 smallest sizes), beta %.4f ns/B (%.2f GB/s; the 3 largest up to "
      "4 x %.0f B, the mesh's largest message); worst residual %.1f%%\n",
      k.alpha * 1e6, k.beta * 1e9, 1e-9 / k.beta, largest_message, 100 * *residual);
  *swapped = swap(w, p, q, buf, 16);
  dt_print0("  a sendrecv both ways at once after a microbatch's compute (09's and 11's "
            "messages; on the cpu backend after 50 us of writes over 8 MiB), 64 B: %.2f us; their "
            "alpha is the larger of the two\n",
            *swapped * 1e6);
  return k;
}

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
static int collectives(dt_comm *w, machine *c, float *buf, float *tmp) {
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
    double res = fit(sw.x[v], sw.y[v], sw.t[v], sw.sizes, J, &fitted[v]->alpha, &fitted[v]->beta);
    dt_print0("  the library's %s: alpha %.2f us, beta %.4f ns/B; worst residual %.1f%%\n", how[v],
              fitted[v]->alpha * 1e6, fitted[v]->beta * 1e9, 100 * res);
  }
  return bad;
}

int measure(dt_comm *w, const model *m, const mesh *x, machine *c) {
  size_t most = (size_t)w->size << 19; /* floats: n x 512 Ki, the largest collective, twice */
  float *buf = dt_alloc_f32(most, DT_COMMBUF), *tmp = dt_alloc_f32(most, DT_COMMBUF);
  dt_fill_uniform(buf, most, 1, 0, 0, 0, 1); /* every page touched before any is timed */
  dt_fill_uniform(tmp, most, 1, 1, 0, 0, 1);
  dt_nodes nd = dt_nodes_split(w, 0);
  int64_t local = nd.node->rank, id = nd.leader ? nd.leaders->rank : 0,
          *ids = dt_host_alloc((size_t)w->size, 8);
  dt_host_broadcast(nd.node, &id, 1, DT_I64, 0);
  dt_host_gather(w, &id, ids, 1, DT_I64, 0);
  dt_host_broadcast(w, ids, (size_t)w->size, DT_I64, 0);
  int same = -1, other = -1;
  for (int r = w->size - 1; r > 0; r--) *(ids[r] == ids[0] ? &same : &other) = r;
  c->gpus_per_node = nd.node->size;
  dt_host_broadcast(w, &c->gpus_per_node, 1, DT_I64, 0);
  (void)local;
  c->ranks = w->size;
  c->cores = sysconf(_SC_NPROCESSORS_ONLN);
  char host[48] = "";
  gethostname(host, sizeof host - 1);
  snprintf(c->name, sizeof c->name, "%.40s, %d ranks (measured)", host, w->size);
  snprintf(c->source, sizeof c->source, "measured here just now (--measure)");
  for (int64_t s = 0; s < x->n[PP]; s++) { /* where the fits must hold */
    traffic t[NCOMM][NCOLL];
    traffic_of(m, x, s, t);
    for (int a = PP; a < NCOMM; a++)
      for (int k = 0; k < NCOLL; k++)
        if (t[a][k].calls)
          largest_message = fmax(largest_message, (double)t[a][k].bytes / (double)t[a][k].calls);
  }
  if (same > 0)
    c->intra = link_between(w, 0, same, "inside a node", buf, &c->fit_residual, &c->swap[0]);
  if (other > 0)
    c->inter = link_between(w, 0, other, "across nodes", buf, &c->fit_residual, &c->swap[1]);
  else {
    c->inter = c->intra;
    c->swap[1] = c->swap[0];
  }
  if (same < 0 && other < 0) dt_print0("\none rank: no channel to measure (alpha = beta = 0)\n");
  int bad = collectives(w, c, buf, tmp);
  dt_free(buf);
  dt_free(tmp);
  dt_nodes_free(&nd);
  free(ids);
  op big = {.k = GEMM, .s = {512, 512, 512, 0, 0}}, stream = {.k = EW, .s = {1 << 22, 3}};
  c->flops = 2.0 * 512 * 512 * 512 / op_time(&big, m, 7);
  c->hbm_bw = 12.0 * (1 << 22) / op_time(&stream, m, 7);
  c->hbm = dt_memory_available() / (double)c->gpus_per_node;
  c->eff = 1;
  dt_host_all_reduce(w, &c->flops, 1, DT_F64, DT_MIN);
  dt_host_all_reduce(w, &c->hbm_bw, 1, DT_F64, DT_MIN);
  dt_print0("\na 512^3 GEMM: %.2f GFLOP/s a rank (its peak here); memory: %.2f GB/s a rank (a+=b "
            "over 16 MiB)\n",
            c->flops / 1e9, c->hbm_bw / 1e9);
  time_ops(w, m, x, c); /* ops.c */
  return bad;
}
