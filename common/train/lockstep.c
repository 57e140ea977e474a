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

#include "train_internal.h"

#define U32 (1.0 / 16777216.0) /* float32's unit roundoff, 2^-24 */
/* fp16's largest value, and the limit its rounding turns to inf */
#define F16_LARGEST 65520.0

typedef struct {
  double value; /* NaN is the worst */
  int64_t step, tensor;
} worst;

struct dt_lockstep {
  const dt_train_config *c;
  size_t n; /* the whole model's floats */
  int adamw;
  /* the run's, gathered: on rank 0 two blocks of the whole model's arrays
   * one after another (a gather of several is one collective), pre: the
   * state at the step's start (w, and AdamW's m and v) and the gradient its
   * optimizer read; post: the state after it. Elsewhere pre is the scratch
   * every gather passes through. */
  float *pre, *post;
  int slots;           /* the state's arrays: 1 (w), or 3 (w, m, v) */
  float *w0, *m0, *v0; /* in pre */
  float *g;            /* in pre, after the state */
  float *w1, *m1, *v1; /* in post */
  int held;            /* pre holds the start of the next step (the last one's end) */
  int replicated;      /* every rank holds the whole model (05), N > 1 */
  float *theirs;       /* replicated runs, ranks but 0: rank 0's weights, to compare with */
  dt_loss_scaler scaler;
  /* one process (rank 0; backend memory but hg) */
  dt_one *one;
  float *W, *G, *M, *V, *hg, *hu; /* hg: its gradient; hu: its update, on the host */
  dt_decisions replay;
  dt_kinks *kinks;
  dt_routing routing;
  dt_skips skips;
  /* the figures, over the steps compared */
  int64_t steps;
  worst loss;
  worst part;
  worst grad;
  worst factor;
  int64_t off, off_step, off_at; /* elements of the update not bit for bit; the first's step, at */
  int64_t replicas, replicas_step; /* weights of a replica not rank 0's; the first step */
  int64_t clipped;                 /* steps compared whose factor --clip set below 1 */
  const char *off_what;            /* "weight", "first moment", "second moment" */
  int64_t failed_at;               /* the first step off, -1: none */
  char why[400];                   /* and why, for the verdict */
  int64_t blown_step; /* the step where the run's loss blew up, and one process's loss */
  double blown_loss;
  double seconds;
};

/* The bounds (CHECKING.md, "One step's rounding"). In fp32 the run and one
 * process differ by the order of their sums: a sum of K terms in another
 * order differs by at most K u of its terms' size, K the step's longest sum
 * (dt_check_longest_sum), and ReLU's decisions near 0 are replayed. In 16
 * bits the run rounds to 16 bits what it sends, where one process does not,
 * and a value near a rounding boundary or near ReLU's 0 (not replayed in 16
 * bits) lands a 16-bit unit or a whole decision apart: the loss within 2,
 * each gradient within 32 units of bf16 (u = 2^-8), the coarser of the two
 * formats, whose one-step figures fp16's equal. */
#define U_BF16 (1.0 / 256.0)
typedef struct {
  double loss, grad;
  char how_loss[64], how_grad[48];
} bounds;
static bounds bounds_of(const dt_train_config *c) {
  bounds b;
  if (dt_precision_type(c) == DT_F32) {
    int64_t K = dt_check_longest_sum(c);
    b.loss = b.grad = (double)K * U32;
    snprintf(b.how_loss, sizeof b.how_loss, "K u (K = max(B%s,D,H) = %lld, u 2^-24)",
             c->model == DT_TRANSFORMER ? " x seq"
             : c->model == DT_GPT       ? " x seq,V"
                                        : "",
             (long long)K);
    snprintf(b.how_grad, sizeof b.how_grad, "K u");
  } else {
    b.loss = 2 * U_BF16;
    b.grad = 32 * U_BF16;
    snprintf(b.how_loss, sizeof b.how_loss, "2 u (16 bits: bf16's u 2^-8)");
    snprintf(b.how_grad, sizeof b.how_grad, "32 u");
  }
  return b;
}
/* The factor the gradient is read with: the run's squared norm is summed in
 * double per rank, rounded to float and all-reduced in float (N terms), so
 * it differs from one process's by at most N u relative, the norm by half
 * that; the factor and fp16's 1/scale each round to float once. */
static double factor_bound(int ranks) { return ((double)ranks + 2) * U32; }

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

/* ------------------------------------------------------------ the figures */
static void keep_worst(worst *w, double value, int64_t step, int64_t tensor) {
  if (!(value <= w->value)) /* NaN is the worst */
    *w = (worst){value, step, tensor};
}

/* x / of, where x is 0 whenever `of` is (a balance loss of --aux-coef 0) */
static double rel_to(double x, double of) { return x == 0 ? 0 : x / fabs(of); }

/* The gradient of tensor t, the run's (a) against one process's (b), in L2,
 * relative to the larger of b's own norm and the tensor's share of the
 * step's whole gradient, sqrt(n_t / n) |b| (CHECKING.md: a tensor whose
 * gradient cancels to far below its share, a flat attention's wq, keeps the
 * rounding errors of the terms it was summed from). ratio: |a_t| / |b_t|,
 * how large the run's is against one process's. */
static double grad_rel(const dt_train_config *c, int64_t t, const float *a, const float *b,
                       double whole2, double *ratio) {
  dt_tensor x = dt_model_tensor(c, t);
  int64_t nt = x.rows * x.cols;
  double d2 = 0, a2 = 0, b2 = 0;
  for (int64_t i = x.at; i < x.at + nt; i++) {
    double d = (double)a[i] - b[i];
    d2 += d * d;
    a2 += (double)a[i] * a[i];
    b2 += (double)b[i] * b[i];
  }
  if (ratio) *ratio = sqrt(a2 / fmax(b2, 1e-300));
  double share = whole2 * (double)nt / (double)dt_model_size(c);
  return d2 == 0 ? 0 : sqrt(d2 / fmax(fmax(b2, share), 1e-300));
}

static double norm2(const float *x, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; i++) s += (double)x[i] * x[i];
  return s;
}

/* The tensors whose gradient is off, at the first step off: how large the
 * run's is against one process's names the bug (0 x: no gradient reached
 * it; about N x: a sum where an average was meant; about 1/N x: divided
 * twice; about 1 x but off: the right size in the wrong place). */
static void list_off(const dt_train_config *c, int64_t step, const float *g, const float *one,
                     double whole2, double bound) {
  int64_t shown = 0, off = 0, none = 0, T = dt_model_tensors(c);
  for (int64_t t = 0; t < T; t++) {
    double ratio, rel = grad_rel(c, t, g, one, whole2, &ratio);
    if (rel <= bound) continue;
    none += ratio == 0;
    if (off++ == 0)
      printf("  step %lld: tensors whose gradient is off (rel L2 diff > %.1e), the run's against "
             "one process's from the same state:\n",
             (long long)step + 1, bound);
    if (shown++ >= 8) continue;
    printf("    %s  rel diff %.2e  gradient %.2f x%s\n", dt_model_tensor(c, t).name, rel, ratio,
           ratio == 0 ? "  (no gradient reached it)" : "");
  }
  if (shown > 8) printf("    ... and %lld more\n", (long long)(shown - 8));
  if (off) printf("  gradients off: %lld of %lld tensors\n", (long long)off, (long long)T);
  if (none)
    printf("  no gradient: %lld of them got none from the run (all zeros): their whole gradient is "
           "the difference\n",
           (long long)none);
}

/* the largest |g_i| (inf where any is not finite), host */
static double largest_abs(const float *g, size_t n) {
  double most = 0;
  for (size_t i = 0; i < n; i++) most = isfinite(g[i]) ? fmax(most, fabs(g[i])) : INFINITY;
  return most;
}
static int any_nonfinite(const float *g, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!isfinite(g[i])) return 1;
  return 0;
}

/* fp16's verdict on the step, one process's own against the run's: alike; a
 * gradient within 2x of fp16's largest value (the loss scale's own step: a
 * verdict there is the scaler's to tip) decided apart; or apart further off,
 * a failure. Returns 1 when both took the step (the gradients compare). */
static int skips_judged(dt_lockstep *k, int run, double largest) {
  int own = !isfinite(largest) || largest > F16_LARGEST;
  if (run == own)
    k->skips.alike++;
  else if (isfinite(largest) && largest >= F16_LARGEST / 2 && largest <= 2 * F16_LARGEST)
    k->skips.replayed++;
  else
    k->skips.otherwise++;
  return !run && !own;
}

/* The update: one process's optimizer on the run's gradient and state must
 * give the run's new state bit for bit. Returns the elements that differ. */
static int64_t update_off(dt_run *r, dt_lockstep *k, int64_t step) {
  const dt_train_config *c = k->c;
  size_t n = k->n;
  int overflow = dt_precision_type(c) == DT_F16 && any_nonfinite(k->g, n);
  double used = 1.0;
  dt_loss_scaler s = k->scaler;
  int taken = dt_scaler_update(&s, c, overflow, &used);
  dt_copy_from_host(k->W, k->w0, n * 4);
  if (k->adamw) {
    dt_copy_from_host(k->M, k->m0, n * 4);
    dt_copy_from_host(k->V, k->v0, n * 4);
  }
  if (taken) {
    dt_copy_from_host(k->G, k->g, n * 4);
    double sq = c->clip > 0 ? dt_sum_squares(k->G, n) : 0;
    float own = dt_grad_scale(c, used, sq), run = r->used.grad_scale;
    keep_worst(&k->factor, fabs((double)run - own) / own, step, -1);
    k->clipped += c->clip > 0 && dt_clip_factor(c, sq / (used * used)) < 1.0f;
    dt_one_update(c, step, k->W, k->G, k->M, k->V, n, s.taken, run);
  }
  const float *mine[3] = {k->W, k->M, k->V}, *runs[3] = {k->w1, k->m1, k->v1};
  static const char *what[3] = {"weight", "first moment", "second moment"};
  int64_t off = 0;
  for (int b = 0; b < (k->adamw ? 3 : 1); b++) {
    dt_copy_to_host(k->hu, mine[b], n * 4);
    for (size_t i = 0; i < n; i++)
      if (memcmp(&k->hu[i], &runs[b][i], 4) != 0 && off++ == 0 && k->off == 0) {
        k->off_step = step;
        k->off_at = (int64_t)i;
        k->off_what = what[b];
      }
  }
  return off;
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

/* Rank 0: one process takes the step from the run's state; the figures, and
 * at the first step off, why, with the tensors whose gradient is off. */
static void compare(dt_run *r, dt_lockstep *k, int64_t step, int64_t replicas) {
  const dt_train_config *c = k->c;
  size_t n = k->n;
  dt_dtype half = dt_precision_type(c);
  dt_copy_from_host(k->W, k->w0, n * 4);
  double part = 0, loss = k->one->gradient(k->one, step, k->W, k->G, k->scaler.scale, &part);
  dt_copy_to_host(k->hg, k->G, n * 4);
  double largest = largest_abs(k->hg, n); /* before its trip through 16 bits */
  if (half != DT_F32 && k->one->round16) {
    dt_round_half(k->G, n, half);
    dt_copy_to_host(k->hg, k->G, n * 4);
  }
  if (dt_blew_up(r->losses[step], r->losses[c->start_step])) { /* dt_stop_diverged judges */
    k->blown_step = step;
    k->blown_loss = loss;
    return;
  }
  k->steps++;
  bounds b = bounds_of(c);
  double lb = b.loss, gb = b.grad, fb = factor_bound(r->world->size);
  double run_part = r->parts ? r->parts[step] : 0;
  double lrel = rel_to(fabs((r->losses[step] - run_part) - (loss - part)), loss - part);
  double prel = r->parts ? rel_to(fabs(run_part - part), part) : 0;
  keep_worst(&k->loss, lrel, step, -1);
  if (r->parts) keep_worst(&k->part, prel, step, -1);
  int64_t apart = k->skips.otherwise; /* fp16's verdicts decided apart, beyond its own step */
  int compares = half != DT_F16 || skips_judged(k, r->skipped[step], largest);
  double most = 0, whole2 = norm2(k->hg, n);
  int64_t worst_t = 0;
  for (int64_t t = 0; compares && t < dt_model_tensors(c); t++) {
    double rel = grad_rel(c, t, k->g, k->hg, whole2, NULL);
    keep_worst(&k->grad, rel, step, t);
    if (!(rel <= most)) {
      most = rel;
      worst_t = t;
    }
  }
  int64_t off = update_off(r, k, step);
  double factor = k->factor.step == step ? k->factor.value : 0;
  k->off += off;
  char why[320] = "";
  if (!(most <= gb))
    snprintf(why, sizeof why, "a gradient is off: %s's rel L2 diff %.2e, bound %.1e",
             dt_model_tensor(c, worst_t).name, most, gb);
  else if (!(lrel <= lb))
    snprintf(why, sizeof why, "the %sloss is off: %.2e, bound %.1e", r->parts ? "task " : "", lrel,
             lb);
  else if (!(prel <= lb))
    snprintf(why, sizeof why, "the balance loss is off: %.2e, bound %.1e", prel, lb);
  else if (off)
    snprintf(why, sizeof why,
             "the update is off: %lld elements not what the optimizer makes of the run's gradient",
             (long long)off);
  else if (!(factor <= fb))
    snprintf(why, sizeof why, "the factor the gradient is read with is off: %.2e, bound %.1e",
             factor, fb);
  else if (replicas)
    snprintf(why, sizeof why, "a replica is off: %lld weights not rank 0's", (long long)replicas);
  else if (k->skips.otherwise > apart)
    snprintf(why, sizeof why,
             "fp16's verdict is off: the run %s the step, one process's own gradient says "
             "otherwise, not near fp16's largest value",
             r->skipped[step] ? "skipped" : "took");
  if (!why[0] || k->failed_at >= 0) return;
  k->failed_at = step;
  snprintf(k->why, sizeof k->why, "step %lld: %s", (long long)step + 1, why);
  printf("lockstep: step %lld is off against one process's step from the run's own state (loss: "
         "the run's %.6f, one process's %.6f): %s\n",
         (long long)step + 1, r->losses[step], loss, why);
  if (!(most <= gb)) list_off(c, step, k->g, k->hg, whole2, gb);
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
    compare(r, k, step, replicas);
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

/* ------------------------------------------------------------ the verdict */
#define MARK(ok) ((ok) ? "ok" : "FAIL")

static void at(const worst *w, char *buf, size_t len, const dt_train_config *c) {
  if (w->tensor >= 0)
    snprintf(buf, len, "step %lld, %s", (long long)w->step + 1, dt_model_tensor(c, w->tensor).name);
  else
    snprintf(buf, len, "step %lld", (long long)w->step + 1);
}

int dt_lockstep_verdict(dt_lockstep *k, const char *other, double *worst_one_step) {
  const dt_train_config *c = k->c;
  bounds b = bounds_of(c);
  double lb = b.loss, gb = b.grad, fb = factor_bound(dt_size());
  char where[4][128];
  const worst *ws[4] = {&k->loss, &k->part, &k->grad, &k->factor};
  for (int i = 0; i < 4; i++) at(ws[i], where[i], sizeof where[i], c);
  const char *prec = c->precision;
  int ok_loss = k->loss.value <= lb, ok_part = k->part.value <= lb, ok_grad = k->grad.value <= gb,
      ok_update = k->off == 0, ok_factor = k->factor.value <= fb,
      ok_skips = k->skips.otherwise == 0, ok_replicas = k->replicas == 0;
  int64_t every = c->check_every, total = c->steps - c->start_step;
  printf("lockstep: one process took %lld of the run's %lld steps%s from the run's own state (its "
         "weights%s gathered, the step's global batch), %.2f s\n",
         (long long)k->steps, (long long)total, every > 1 ? " (--check-every)" : "",
         k->adamw ? " and AdamW's moments" : "", k->seconds);
  char decided[320] = ""; /* a decision rounding does not explain */
  if (k->kinks) dt_kinks_verdict(k->kinks, decided, sizeof decided);
  if (k->replay.routing) {
    dt_routing *rt = &k->routing;
    char closest[64] = "";
    if (rt->disagree) snprintf(closest, sizeof closest, ", the closest by %.1e", rt->closest);
    printf("routing: %lld tokens routed in the steps compared; %lld alike, %lld near ties (logits "
           "within %.0e of the k-th best; widest %.1e), %lld chosen otherwise%s (each replayed in "
           "one process)\n",
           (long long)rt->tokens, (long long)(rt->tokens - rt->ties - rt->disagree),
           (long long)rt->ties, rt->tie, rt->widest, (long long)rt->disagree, closest);
    if (rt->disagree)
      snprintf(decided, sizeof decided,
               "the run routed %lld token%s to experts one process would not choose, not a near "
               "tie",
               (long long)rt->disagree, rt->disagree == 1 ? "" : "s");
  }
  if (!other && decided[0]) other = decided;
  if (k->replay.skips)
    printf("fp16 step skips: in the %lld steps compared one process's own gradient decided as the "
           "run's did (overflowed or not) in %lld, apart near fp16's largest value in %lld (within "
           "2x of 65504: the run's verdict taken), apart otherwise in %lld\n",
           (long long)k->steps, (long long)k->skips.alike, (long long)k->skips.replayed,
           (long long)k->skips.otherwise);
  if (c->clip > 0)
    printf("gradient clipping: the run clipped %lld of the %lld steps compared; min(1, clip / |g|) "
           "is continuous in |g|, so rounding moves it by rounding (its row below)\n",
           (long long)k->clipped, (long long)k->steps);
  printf("compare each step with one process from the run's state (%s, %s; the criterion: "
         "CHECKING.md)\n",
         prec, c->optimizer);
  printf("       figure, the worst step compared           measured     bound\n");
  const char *row = "  %-4s %-41s %-12.2e %-9.1e %s, at %s\n";
  printf(row, MARK(ok_loss), k->replay.routing ? "task loss, rel diff" : "loss, rel diff",
         k->loss.value, lb, b.how_loss, where[0]);
  if (dt_loss_part(c))
    printf(row, MARK(ok_part), "balance loss, rel diff", k->part.value, lb, "the same", where[1]);
  printf(row, MARK(ok_grad), "gradient, worst tensor rel L2 diff", k->grad.value, gb, b.how_grad,
         where[2]);
  if (c->clip > 0 || dt_precision_type(c) == DT_F16)
    printf(row, MARK(ok_factor), "gradient's factor, rel diff", k->factor.value, fb,
           "(N + 2) u (clip, fp16's scale)", where[3]);
  printf("  %-4s %-41s %-12lld %-9d the optimizer on the run's state and gradient\n",
         MARK(ok_update), "update, elements not bit for bit", (long long)k->off, 0);
  if (k->replicated)
    printf("  %-4s %-41s %-12lld %-9d every rank's after each step compared, bit for bit\n",
           MARK(ok_replicas), "replicas, weights not rank 0's", (long long)k->replicas, 0);
  if (!ok_update) {
    dt_tensor x = dt_model_tensor(c, dt_tensor_at(c, k->off_at));
    printf("  update: first off at step %lld, %s's %s %lld: the run's optimizer did not compute "
           "what one process computes from the same state and gradient\n",
           (long long)k->off_step + 1, x.name, k->off_what, (long long)(k->off_at - x.at));
  }
  *worst_one_step = k->grad.value;
  int failed =
      !(ok_loss && ok_part && ok_grad && ok_update && ok_factor && ok_skips && ok_replicas) ||
      other;
  const char *why = k->why[0] ? k->why
                    : other   ? other
                              : "every figure within its bound at every "
                                "step compared";
  printf("CHECK %s: each step's loss, gradient and update match one process's %s step from the "
         "run's own state (%s)\n",
         failed ? "FAILED" : "PASSED", prec, why);
  return failed;
}
