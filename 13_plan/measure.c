/* measure.c: --measure, this machine as the cost model needs it.
 *
 *  - alpha and beta of the links: 01's ping-pong (half a round trip, the
 *    fastest of many) between two ranks of a node, and of two nodes when
 *    there are two, from 4 B to 4 MiB, fitted t = alpha + S beta by least
 *    squares on relative errors; each size's residual printed;
 *  - the all-reduce over every rank: 03's ring by hand (its messages and
 *    bytes counted by the comm layer) and the library's, from n x 4 B to
 *    n x 1 MiB x 4; the library's fitted through the ring formula. The
 *    ring's counts check collective_seconds' two terms exactly: the
 *    exercise's check (make check-13);
 *  - every operation of the mesh's step at its own shape (compute.c's
 *    list), each rank its own stage's, all at once as in a run: the fastest
 *    of 7 trials after a warm-up, the slowest rank's; a large GEMM's rate
 *    and the memory bandwidth for what no table holds. */
#define _POSIX_C_SOURCE 200809L /* gethostname */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "11_cp/ring.h"
#include "plan.h"

/* Weighted least squares of t = a x + b y, each point weighted by 1/t^2 so
 * that small and large sizes count alike; a, b >= 0. Returns the worst
 * relative residual. */
static double fit(const double *x, const double *y, const double *t, int n, double *a, double *b) {
  double xx = 0, xy = 0, yy = 0, xt = 0, yt = 0, worst = 0;
  for (int i = 0; i < n; i++) {
    double w = 1 / (t[i] * t[i]);
    xx += w * x[i] * x[i];
    xy += w * x[i] * y[i];
    yy += w * y[i] * y[i];
    xt += w * x[i] * t[i];
    yt += w * y[i] * t[i];
  }
  double det = xx * yy - xy * xy;
  *a = det > 0 ? (xt * yy - yt * xy) / det : 0;
  *b = det > 0 ? (yt * xx - xt * xy) / det : 0;
  if (*a < 0) { /* latency below the grain of the clock: bandwidth alone */
    *a = 0;
    *b = yt / yy;
  }
  if (*b < 0) {
    *b = 0;
    *a = xt / xx;
  }
  for (int i = 0; i < n; i++) worst = fmax(worst, fabs((*a * x[i] + *b * y[i]) / t[i] - 1));
  return worst;
}

/* 01's ping-pong between world ranks p and q: half the fastest round trip. */
static double pingpong(dt_comm *w, int p, int q, float *buf, size_t count, int reps) {
  double best = 1e30;
  for (int r = 0; r < reps && (w->rank == p || w->rank == q); r++) {
    double t0 = dt_now();
    if (w->rank == p) {
      dt_send(w, buf, count, DT_F32, q);
      dt_recv(w, buf, count, DT_F32, q);
    } else {
      dt_recv(w, buf, count, DT_F32, p);
      dt_send(w, buf, count, DT_F32, p);
    }
    best = fmin(best, (dt_now() - t0) / 2);
  }
  dt_host_broadcast(w, &best, 1, DT_F64, p);
  return best;
}

enum { SIZES = 11 };
static channel link_between(dt_comm *w, int p, int q, const char *what, float *buf,
                            double *residual) {
  double x[SIZES], y[SIZES], t[SIZES];
  channel k = {0};
  dt_print0(
      "\nping-pong %s (ranks %d and %d; 01's, half the fastest round trip): t = alpha + S beta\n"
      "        bytes   measured(us)   fit(us)   residual\n",
      what, p, q);
  for (int i = 0; i < SIZES; i++) {
    size_t count = (size_t)1 << (2 * i);
    x[i] = 1;
    y[i] = 4.0 * (double)count;
    t[i] = pingpong(w, p, q, buf, count, i < 6 ? 60 : 10);
  }
  *residual = fit(x, y, t, SIZES, &k.alpha, &k.beta);
  for (int i = 0; i < SIZES; i++)
    dt_print0("  %11.0f   %12.2f  %8.2f   %+7.1f%%\n", y[i], t[i] * 1e6,
              (k.alpha + y[i] * k.beta) * 1e6, 100 * ((k.alpha + y[i] * k.beta) / t[i] - 1));
  dt_print0("  alpha %.2f us, beta %.4f ns/B (%.2f GB/s); worst residual %.1f%%\n", k.alpha * 1e6,
            k.beta * 1e9, 1e-9 / k.beta, 100 * *residual);
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

/* Both all-reduces over the world at each size; the ring's messages and
 * bytes against collective_seconds' terms. Returns the sizes whose terms
 * differ from what the ring sent. */
static int all_reduce(dt_comm *w, machine *c, float *buf, float *tmp) {
  int n = w->size, bad = 0, J = 10, said[2] = {0};
  char term[2][200];
  double x[10], y[10], t[10];
  channel alpha = {1, 0}, beta = {0, 1};
  dt_print0("\nall-reduce over the %d ranks: 03's ring by hand (sendrecv, counted) beside your "
            "collective_seconds(AR, n, S), and the library's\n"
            "        bytes  messages  alpha-term  bytes sent   beta-term  ring(us)  a+b(us)  "
            "library(us)  ring fit(us)\n",
            n);
  for (int j = 0; j < J; j++) {
    size_t count = (size_t)n << (2 * j);
    double S = 4.0 * (double)count, best[2] = {1e30, 1e30};
    dt_counter before = w->count[DT_SENDRECV];
    for (int rep = 0; rep < (j < 6 ? 30 : 5); rep++)
      for (int v = 0; v < 2; v++) {
        for (size_t i = 0; i < count; i++) buf[i] = (float)(w->rank + 1);
        dt_host_barrier(w);
        double t0 = dt_now();
        if (v == 0)
          ring(w, buf, tmp, count);
        else
          dt_all_reduce(w, buf, buf, count, DT_F32, DT_SUM);
        best[v] = fmin(best[v], dt_now() - t0);
      }
    dt_host_all_reduce(w, best, 2, DT_F64, DT_MAX);
    dt_counter got = w->count[DT_SENDRECV];
    double calls = (double)(got.calls - before.calls),
           sent = (double)(got.bytes_sent - before.bytes_sent);
    double reps = j < 6 ? 30 : 5, msgs = calls / reps, bytes = sent / reps;
    double a = collective_seconds(AR, n, S, &alpha), b = collective_seconds(AR, n, S, &beta);
    int wrong = fabs(a - msgs) > 1e-9 || fabs(b - bytes) > 0.5 ||
                buf[count - 1] != (float)(n * (n + 1) / 2);
    dt_host_all_reduce(w, &wrong, 1, DT_I32, DT_MAX);
    bad += wrong;
    x[j] = 2.0 * (n - 1);
    y[j] = 2.0 * (n - 1) / n * S;
    t[j] = best[1];
    dt_print0("  %11.0f  %8.0f  %10.4g  %10.0f  %10.4g  %8.1f  %7.1f  %11.1f%s\n", S, msgs, a,
              bytes, b, best[0] * 1e6, collective_seconds(AR, n, S, &c->intra) * 1e6, best[1] * 1e6,
              wrong ? "   <- differs" : "");
    if (fabs(a - msgs) > 1e-9 && !said[0]++)
      snprintf(term[0], sizeof term[0],
               "the alpha term: collective_seconds counts %.4g messages "
               "at n = %d; the ring sent %.0f, one after another",
               a, n, msgs);
    if (fabs(b - bytes) > 0.5 && !said[1]++)
      snprintf(term[1], sizeof term[1],
               "the beta term: collective_seconds counts %.4g bytes at n "
               "= %d, S = %.0f; the ring sent %.0f",
               b, n, S, bytes);
  }
  for (int i = 0; i < 2; i++)
    if (said[i]) dt_print0("  %s (%d of %d sizes differ)\n", term[i], said[i], J);
  if (n > 1) {
    double res = fit(x, y, t, J, &c->ar.alpha, &c->ar.beta);
    dt_print0(
        "  the library's fit by the ring formula 2(n-1) alpha + 2(n-1)/n S beta: alpha %.2f us, "
        "beta %.4f ns/B; worst residual %.1f%%\n",
        c->ar.alpha * 1e6, c->ar.beta * 1e9, 100 * res);
  }
  return bad;
}

/* ---- one operation, timed at its shape ---------------------------------- */
typedef struct {
  float *p[10];
  size_t n;
} scratch;

static void run_op(const op *o, scratch *b, const dt_train_config *cfg, const int64_t *samples) {
  float **p = b->p;
  int64_t *s = (int64_t *)o->s;
  switch (o->k) {
  case GEMM: dt_matmul((int)s[3], (int)s[4], s[0], s[1], s[2], p[0], p[1], p[2], 0); break;
  case MLP_F:
    dt_block_forward(p[0], p[1], p[2], p[3], p[4], p[5], s[0], s[1], s[2], (int)s[3]);
    break;
  case MLP_B:
    dt_block_backward(p[0], p[3], p[4], p[1], p[2], p[5], p[6], p[7], p[8], p[9], s[0], s[1], s[2],
                      (int)s[3]);
    break;
  case ATT_F:
    dt_attn_block_forward(p[0], p[1], p[2], s[0], s[0], s[1], s[2], (int)s[3], p[3], p[4]);
    cp_merge(p[5], p[6], p[3], p[4], s[0], s[1], s[2]);
    break;
  case ATT_B:
    dt_attn_block_backward(p[0], p[1], p[2], p[3], p[7], p[4], s[0], s[0], s[1], s[2], (int)s[3],
                           p[5], p[6], p[8]);
    break;
  case EW:
    if (s[1] == 1)
      dt_zero(p[0], (size_t)s[0] * 4);
    else if (s[1] == 2)
      dt_copy(p[0], p[1], (size_t)s[0] * 4);
    else
      dt_add(p[0], p[1], (size_t)s[0]);
    break;
  case LOSS: dt_mse_forward_backward(p[0], p[1], p[2], (size_t)s[0], 1.0); break;
  case DATA11: {
    cp_attn a = {.N = s[2], .rank = s[3] / 2, .B = s[0], .S = s[1], .zigzag = (int)(s[3] % 2)};
    a.nc = a.zigzag ? 2 : 1;
    a.C = s[1] / (a.nc * a.N);
    a.Sl = a.nc * a.C;
    a.R = a.B * a.Sl;
    cp_inputs(&a, cfg, samples, p[0], p[1]);
    break;
  }
  case DATA05: dt_make_batch(cfg, samples, s[0], p[0], p[1]); break;
  case ADAMW: dt_adamw_step(p[0], p[1], p[2], p[3], (size_t)s[0], 0.001f, 0.01f, 10, 1.0f); break;
  case SGD: dt_sgd_step(p[0], p[1], (size_t)s[0], 0.1f, 1.0f); break;
  default: break;
  }
}

/* The fastest of 7 trials after a warm-up; a trial repeats a short op
 * until it lasts 100 us, so the clock's grain does not count. */
static double time_op(const op *o, const model *m) {
  int64_t *s = (int64_t *)o->s, big = 0;
  switch (o->k) { /* the largest buffer the op touches, in floats */
  case GEMM: big = (s[0] > s[1] ? s[0] : s[1]) * (s[2] > s[1] ? s[2] : s[1]); break;
  case MLP_F:
  case MLP_B: big = s[0] * (s[1] > s[2] ? s[1] : s[2]) + s[1] * s[2]; break;
  case ATT_F:
  case ATT_B: big = 2 * s[0] * (s[1] + s[2]); break;
  case DATA11: big = s[0] * s[1] * s[4]; break;
  case DATA05: big = s[0] * s[1]; break;
  default: big = s[0]; break;
  }
  scratch b = {.n = (size_t)big + 64};
  for (int i = 0; i < 10; i++) {
    b.p[i] = dt_alloc_f32(b.n, DT_OTHER);
    dt_fill_uniform(b.p[i], b.n, 7, (uint64_t)i, 0, -1, 1);
  }
  dt_train_config cfg = DT_TRAIN_DEFAULTS;
  cfg.dim = o->k == DATA11 ? s[4] : o->k == DATA05 ? s[1] : m->D;
  cfg.seq = o->k == DATA11 ? s[1] : 0;
  int64_t *samples = dt_host_alloc((size_t)(s[0] + 1), sizeof *samples);
  for (int64_t i = 0; i <= s[0]; i++) samples[i] = i;
  if (o->k == ATT_B) { /* a forward first: backward needs its log-sum-exp */
    op f = *o;
    f.k = ATT_F;
    run_op(&f, &b, &cfg, samples); /* its lse lands in p[4], where ATT_B reads it */
  }
  double t0 = dt_now(), best = 1e30;
  run_op(o, &b, &cfg, samples);
  dt_sync();
  double once = dt_now() - t0;
  int reps = once >= 1e-4 ? 1 : (int)fmin(1000, 1e-4 / fmax(once, 1e-7)) + 1;
  for (int trial = 0; trial < 7; trial++) {
    t0 = dt_now();
    for (int r = 0; r < reps; r++) run_op(o, &b, &cfg, samples);
    dt_sync();
    best = fmin(best, (dt_now() - t0) / reps);
  }
  for (int i = 0; i < 10; i++) dt_free(b.p[i]);
  free(samples);
  return best;
}

/* This rank's stages' operations, timed once per shape; then every rank's
 * table on every rank, the slowest rank's time where two measured a shape. */
static void time_ops(dt_comm *w, const model *m, const mesh *x, machine *c) {
  enum { PER = 96, K = 7 };
  static op o[MAXOPS];
  double *mine = dt_host_alloc(PER * K, sizeof *mine),
         *all = dt_host_alloc((size_t)(w->size * PER * K), sizeof *all);
  int n = 0, cpu = !strcmp(dt_backend(), "cpu");
  int64_t N = mesh_size(x), T = x->n[TP], C = x->n[CP], r = w->rank;
  for (int64_t s = 0; s < x->n[PP]; s++)
    for (int64_t cr = 0; cr < C; cr++) {
      if (N == w->size && !(s == r / (T * C) % x->n[PP] && cr == r / T % C)) continue;
      int k = ops_of(m, x, s, cr, o, MAXOPS);
      for (int i = 0; i < k && n < PER; i++) {
        int host = o[i].k == ATT_F || o[i].k == ATT_B || o[i].k == DATA11 || o[i].k == DATA05;
        if (o[i].k == FLASH || (host && !cpu)) continue; /* no kernel here: the roofline costs it */
        int seen = 0;
        for (int j = 0; j < n && !seen; j++) {
          seen = (int)mine[j * K] == o[i].k;
          for (int d = 0; d < 5 && seen; d++) seen = (int64_t)mine[j * K + 1 + d] == o[i].s[d];
        }
        if (seen) continue;
        mine[n * K] = o[i].k;
        for (int d = 0; d < 5; d++) mine[n * K + 1 + d] = (double)o[i].s[d];
        mine[n++ * K + 6] = time_op(&o[i], m);
      }
    }
  for (int i = n; i < PER; i++) mine[i * K] = -1;
  dt_host_gather(w, mine, all, PER * K, DT_F64, 0);
  dt_host_broadcast(w, all, (size_t)(w->size * PER * K), DT_F64, 0);
  for (int i = 0; i < w->size * PER; i++) {
    double *e = all + i * K;
    if (e[0] < 0) continue;
    timed_op t = {(int)e[0],
                  {(int64_t)e[1], (int64_t)e[2], (int64_t)e[3], (int64_t)e[4], (int64_t)e[5]},
                  e[6]};
    int j = 0;
    while (j < c->nops && (c->ops[j].k != t.k || memcmp(c->ops[j].s, t.s, sizeof t.s))) j++;
    if (j == c->nops && c->nops < MAXOPS)
      c->ops[c->nops++] = t;
    else if (j < c->nops)
      c->ops[j].seconds = fmax(c->ops[j].seconds, t.seconds);
  }
  dt_print0("\noperations of the step at their shapes (compute.c; the fastest of 7 trials, the "
            "slowest rank's): %d\n",
            c->nops);
  free(mine);
  free(all);
}

int measure(dt_comm *w, const model *m, const mesh *x, machine *c) {
  size_t most = (size_t)w->size << 20; /* floats: n x 1 Mi, the largest all-reduce */
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
  snprintf(c->name, sizeof c->name, "%s, %d ranks (measured)", host, w->size);
  snprintf(c->source, sizeof c->source, "measured here just now (--measure)");
  if (same > 0) c->intra = link_between(w, 0, same, "inside a node", buf, &c->fit_residual);
  if (other > 0)
    c->inter = link_between(w, 0, other, "across nodes", buf, &c->fit_residual);
  else
    c->inter = c->intra;
  if (same < 0 && other < 0) dt_print0("\none rank: no channel to measure (alpha = beta = 0)\n");
  int bad = all_reduce(w, c, buf, tmp);
  dt_free(buf);
  dt_free(tmp);
  dt_nodes_free(&nd);
  free(ids);
  op big = {.k = GEMM, .s = {512, 512, 512, 0, 0}}, stream = {.k = EW, .s = {1 << 22, 3}};
  c->flops = 2.0 * 512 * 512 * 512 / time_op(&big, m);
  c->hbm_bw = 12.0 * (1 << 22) / time_op(&stream, m);
  c->hbm = dt_memory_available() / (double)c->gpus_per_node;
  c->eff = 1;
  dt_host_all_reduce(w, &c->flops, 1, DT_F64, DT_MIN);
  dt_host_all_reduce(w, &c->hbm_bw, 1, DT_F64, DT_MIN);
  dt_print0("\na 512^3 GEMM: %.2f GFLOP/s a rank (its peak here); memory: %.2f GB/s a rank (a+=b "
            "over 16 MiB)\n",
            c->flops / 1e9, c->hbm_bw / 1e9);
  time_ops(w, m, x, c);
  return bad;
}
