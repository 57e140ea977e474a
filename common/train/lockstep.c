/* lockstep.c: the check, one step at a time (CHECKING.md derives its bounds).
 *
 * Two float32 runs that sum in different orders are not bit-identical, and
 * under AdamW a difference of rounding grows a little every step: after a
 * few hundred steps two correct trajectories are different models, and no
 * bound on their distance tells rounding from a bug. So the check compares
 * steps, not trajectories. At each step it compares, one process on rank 0
 * starts from the run's own state at the step's start (the weights, AdamW's
 * moments and the loss scale, gathered as a checkpoint gathers them) and
 * computes that one step on the step's global batch:
 *   - the loss and the gradient, which must equal the run's within one
 *     step's rounding (the sums of one step in another order);
 *   - the update: the optimizer, applied by one process to the run's own
 *     gradient, must give the run's new weights and moments bit for bit
 *     (it is elementwise: the same inputs, the same bits). Where --clip or
 *     fp16's loss scale sets the factor the gradient is read with, the run's
 *     factor is used, and checked beside one process's own.
 * Nothing carries over from one step to the next, so AdamW, long runs and
 * chaotic texts need no special case; a bug is named at the first step it
 * acts, with its tensors. The run's discrete decisions (ReLU near 0, the
 * router's top k, fp16's skips) are replayed step by step, each from the
 * state both sides share. The gathers and one process's work are
 * bookkeeping: outside the byte counters, the memory tables (dt_mem_aside)
 * and the step's time. */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lockstep_shared.h"

static double checking; /* seconds this rank spent in the check's steps (dt_lockstep_wait) */

static int due(const dt_run *r, int64_t step) {
  return (step - r->c.start_step) % r->c.check_every == 0;
}

/* the arrays in their blocks (again after pre and post swap) */
static void point(dt_lockstep *k) {
  size_t n = k->n;
  k->w0 = k->pre;
  k->m0 = k->adamw ? k->pre + n : NULL;
  k->v0 = k->adamw ? k->pre + 2 * n : NULL;
  k->g = k->pre + (size_t)k->slots * n;
  k->w1 = k->post;
  k->m1 = k->post && k->adamw ? k->post + n : NULL;
  k->v1 = k->post && k->adamw ? k->post + 2 * n : NULL;
}

dt_lockstep *dt_lockstep_new(dt_run *r) {
  const dt_train_config *c = &r->c;
  if (c->no_check || r->verdict || c->steps <= c->start_step) return NULL;
  dt_lockstep *k = dt_host_alloc(1, sizeof *k);
  size_t n = (size_t)dt_model_size(c);
  int root = r->world->rank == 0;
  *k = (dt_lockstep){.c = c,
                     .n = n,
                     .adamw = c->optimizer[0] == 'a',
                     .replicated = r->replicated && r->world->size > 1,
                     .failed_at = -1,
                     .blown_step = -1};
  worst none = {0, 0, -1};
  k->loss = k->part = k->grad = k->factor = none;
  k->slots = k->adamw ? 3 : 1;
  size_t block = (size_t)(k->slots + 1) * n;
  k->pre = dt_host_alloc(block, 4);
  point(k);
  if (!root && r->replicated) k->theirs = dt_host_alloc(n, 4);
  if (!root) return k;
  k->post = dt_host_alloc(block, 4);
  point(k);
  k->hg = dt_host_alloc(n, 4);
  k->hu = dt_host_alloc(n, 4);
  dt_mem_aside(1);
  k->W = dt_alloc_f32(n, DT_OTHER);
  k->G = dt_alloc_f32(n, DT_OTHER);
  k->M = k->adamw ? dt_alloc_f32(n, DT_OTHER) : NULL;
  k->V = k->adamw ? dt_alloc_f32(n, DT_OTHER) : NULL;
  if (r->kinks) k->kinks = k->replay.kinks = dt_kinks_new(c, 1);
  if (r->routing) {
    k->routing = (dt_routing){.groups = r->world->size, .R = r->routing_rows};
    k->routing.choice =
        dt_host_alloc((size_t)(r->world->size * c->layers * r->routing_rows * c->topk), 4);
    k->replay.routing = &k->routing;
  }
  if (dt_precision_type(c) == DT_F16) {
    k->skips.skipped = r->skipped;
    k->replay.skips = &k->skips;
  }
  k->one = dt_one_new(c, &k->replay);
  dt_mem_aside(0);
  return k;
}

void dt_lockstep_free(dt_lockstep *k) {
  if (!k) return;
  dt_mem_aside(1);
  dt_one_free(k->one);
  float *dev[] = {k->W, k->G, k->M, k->V};
  for (size_t i = 0; i < 4; i++) dt_free(dev[i]);
  dt_mem_aside(0);
  float *host[] = {k->pre, k->post, k->hg, k->hu, k->theirs};
  for (size_t i = 0; i < sizeof host / sizeof *host; i++) free(host[i]);
  dt_kinks_free(k->kinks);
  free(k->routing.choice);
  free(k);
}

void dt_lockstep_start_from(dt_lockstep *k, const float *w, const float *m, const float *v) {
  if (!k) return;
  k->held = 1;          /* on every rank: the gathers are collective */
  if (!k->post) return; /* the arrays are rank 0's */
  memcpy(k->w0, w, k->n * 4);
  if (k->adamw) {
    memcpy(k->m0, m, k->n * 4);
    memcpy(k->v0, v, k->n * 4);
  }
}

/* which: 0 w, 1 m, 2 v, 4 g (dt_run_gather's), n of them into rank 0's
 * arrays from root on, through the scratch elsewhere */
static void gather(dt_run *r, const int *which, int n, float *root) {
  dt_run_gather_all(r, which, n, r->world->rank == 0 ? root : r->lockstep->pre);
}

void dt_lockstep_gather(dt_run *r) {
  dt_lockstep *k = r->lockstep;
  if (!k || !due(r, r->step)) return;
  double t0 = dt_now();
  static const int state_and_g[2][4] = {{0, 4}, {0, 1, 2, 4}};
  if (k->held)
    gather(r, (const int[]){4}, 1, k->g);
  else
    gather(r, state_and_g[k->adamw], k->slots + 1, k->w0);
  k->scaler = r->scaler;
  k->scaler.quiet = 1;
  r->held += dt_now() - t0;
  checking += dt_now() - t0;
}

/* Data parallelism keeps a whole replica on every rank: after each step
 * compared, every rank's weights against rank 0's, bit for bit (a bug in
 * one rank's step is named at that step, not only at the end). Bookkeeping,
 * outside the counters; the count is rank 0's. */
static int64_t replicas_off(dt_run *r, dt_lockstep *k) {
  int root = r->world->rank == 0;
  float *mine = root ? k->w1 : k->pre, *ref = root ? k->w1 : k->theirs;
  DT_WATCH("MPI_Bcast of rank 0's weights for the check's replicas");
  CHECK_MPI(MPI_Bcast(ref, dt_mpi_count(k->n), MPI_FLOAT, 0, MPI_COMM_WORLD));
  dt_watch_done();
  int64_t off = 0;
  for (size_t i = 0; !root && i < k->n; i++) off += memcmp(&mine[i], &ref[i], 4) != 0;
  dt_host_reduce(r->world, &off, 1, DT_I64, DT_SUM, 0);
  return off;
}

int64_t dt_lockstep_diverged(const dt_lockstep *k, int64_t step, double *one_loss) {
  *one_loss = k->blown_step == step ? k->blown_loss : NAN;
  return k->failed_at >= 0 && k->failed_at < step ? k->failed_at : -1;
}

/* Every rank waits while rank 0 computes: allowed twice what the run took so
 * far, N times (one process does the work of N ranks), the check's own time
 * left out of "the run", on top of --timeout (a stopped rank 0 still ends
 * the job; a long one-process step does not end it falsely). The wait polls
 * with a pause, not spinning: where ranks share cores (oversubscribed), a
 * spinning wait would take rank 0's core from its work. */
void dt_lockstep_wait(int *x, const char *what) {
  double allowance = dt_timeout() + 2.0 * dt_size() * (dt_uptime() - checking);
  dt_watch_call_within(what, __FILE__, __LINE__, allowance);
  MPI_Request req;
  CHECK_MPI(MPI_Ibcast(x, 1, MPI_INT, 0, MPI_COMM_WORLD, &req));
  for (int done = 0;;) {
    CHECK_MPI(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
    if (done) break;
    nanosleep(&(struct timespec){0, 200000}, NULL); /* 0.2 ms */
  }
  dt_watch_done();
}

void dt_lockstep_step(dt_run *r, int64_t step) {
  dt_lockstep *k = r->lockstep;
  if (!k) return;
  int compared = due(r, step);
  if (r->kinks) dt_kinks_pass(r->kinks, k->kinks, r->world, compared);
  if (!compared) {
    k->held = 0; /* the state moves on unseen */
    return;
  }
  double t0 = dt_now();
  int root = r->world->rank == 0;
  static const int state[3] = {0, 1, 2};
  gather(r, state, k->slots, k->w1);
  int64_t replicas = k->replicated ? replicas_off(r, k) : 0;
  if (root && replicas && !k->replicas) k->replicas_step = step;
  if (root) k->replicas += replicas;
  if (r->routing) { /* the step's choices, [groups][layers][R][k] */
    size_t each = (size_t)(r->c.layers * r->routing_rows * r->c.topk);
    dt_host_gather(r->world, r->routing + (size_t)step * each, k->routing.choice, each, DT_I32, 0);
  }
  if (root) {
    dt_mem_aside(1);
    dt_lockstep_compare(r, k, step, replicas);
    dt_mem_aside(0);
    fflush(stdout);
  }
  int done = 1;
  dt_lockstep_wait(&done, "MPI_Bcast after the check's step (rank 0 computes it meanwhile)");
  /* the state after this step starts the next one */
  int next = step + 1 < r->c.steps && due(r, step + 1);
  if (next && root) {
    float *t = k->pre;
    k->pre = k->post;
    k->post = t;
    point(k);
  }
  k->held = next;
  k->seconds += dt_now() - t0;
  checking += dt_now() - t0;
}
