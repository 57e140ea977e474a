/* measure.c: --measure, this machine as the cost model needs it.
 *
 *  - alpha and beta of the links: 01's ping-pong (half a round trip, the
 *    lower quartile of many) between two ranks of a node, and of two nodes
 *    when there are two, from 4 B to 4 MiB, fitted t = alpha + S beta
 *    (stats.c's fit_line: alpha from the smallest sizes, beta where the mesh's
 *    messages lie); each size's residual printed; and 09's and 11's sendrecv
 *    both ways at once between computations (swap()), their messages' alpha;
 *  - the collectives over every rank (collectives.c): 03's ring all-reduce
 *    by hand (its messages and bytes counted by the comm layer) beside the
 *    library's all-reduce, reduce-scatter and all-gather, from n x 4 B to
 *    n x 1 MiB, each library collective fitted through its ring formula.
 *    The ring's counts check collective_seconds' two terms exactly: the
 *    exercise's check (make check-13);
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

static double largest_message; /* the mesh's, where the fits must hold */

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
  *residual = fit_line(x, y, t, y, SIZES, largest_message, &k.alpha, &k.beta);
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
  int bad = measure_collectives(w, c, buf, tmp, largest_message); /* collectives.c */
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
