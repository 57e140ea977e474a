/* lockstep_compare.c: one step compared (lockstep_shared.h): one process's loss and
 * gradient from the run's state, the run's against them, each within its
 * bound, and the update bit for bit; the first step off named. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lockstep_shared.h"

bounds dt_lockstep_bounds(const dt_train_config *c) {
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

void dt_lockstep_compare(dt_run *r, dt_lockstep *k, int64_t step, int64_t replicas) {
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
  bounds b = dt_lockstep_bounds(c);
  double lb = b.loss, gb = b.grad, fb = dt_lockstep_factor_bound(r->world->size);
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
