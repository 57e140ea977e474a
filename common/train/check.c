/* check.c: the verdict of every training lesson, "this distributed run
 * trained the same model as one process does". CHECKING.md derives the
 * criterion; this file implements it and prints each measured figure beside
 * its bound.
 *
 * Two float32 runs that sum in different orders are not bit-identical, so the
 * question is how far apart rounding alone can put them:
 *   - SGD is linear in the gradient: a sum of K terms in another order is off
 *     by at most about K u of its size (u = 2^-24), and S steps add S such
 *     errors. Bound: S K u of how far training moved the weights.
 *   - AdamW divides each update by the gradient's own running size, so a
 *     gradient that rounding tips across zero (a ReLU input within rounding
 *     of 0) becomes a full step of lr, and the models drift apart a little
 *     from then on. Measured over 5 BLAS kernels, seeds, NP 2/4, lessons
 *     05-09, 30 to 300 steps: up to 1.8e-2 of the movement in weights and
 *     5.7e-5 of the first loss; the bounds below leave 2.7x and 90x of margin.
 *     No weight can differ by more than twice what AdamW can move one weight
 *     in the steps run. A short schedule can amplify rounding far more; where
 *     a run is past those bounds, one process trains again with its samples
 *     in another order, and that twin's drift widens them (twin_multiplier).
 * A bug, even one confined to one rank's shard or stage, is off by far more
 * (CHECKING.md has the table of planted bugs). */
#define DT_COMMON_IMPL
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"

#define U32                (1.0 / 16777216.0) /* float32's unit roundoff, 2^-24 */
#define ADAMW_LOSS_BOUND   5e-3
#define ADAMW_WEIGHT_BOUND 5e-2
#define OUTLIER_SHARE      0.10 /* of a tensor, each still within 2 x reach */
/* In 16 bits every rank rounds its partial sums where one process rounds once,
 * so results agree to the format's precision: the loss per step within REL16,
 * the weights within REL16 in L2 norm. Measured on lesson 05 (4 ranks, 30
 * steps): SGD 4e-4, AdamW 1e-2, AdamW over 100 steps 2.3e-2. */
#define REL16 5e-2

/* The verdict: the other ranks wait while rank 0 trains the reference, which
 * does the work of all N ranks in one process. So they allow it twice what
 * the whole run took so far, N times, on top of --timeout: a stopped rank 0
 * still ends the job, and a long reference does not end it falsely. */
static void share_verdict(int *failed) {
  double allowance = dt_timeout() + 2.0 * dt_size() * dt_uptime();
  dt_watch_call_within("MPI_Bcast of the check's verdict (rank 0 trains the reference meanwhile)",
                       __FILE__, __LINE__, allowance);
  CHECK_MPI(MPI_Bcast(failed, 1, MPI_INT, 0, MPI_COMM_WORLD));
  dt_watch_done();
}

/* A loss that is no longer a number, or that grew DIVERGED-fold since the
 * first step, does not come back: training has diverged. */
#define DIVERGED 1e4
static int blew_up(double loss, double first) { return !isfinite(loss) || loss > DIVERGED * first; }
static int first_blown(const double *x, int64_t from, int64_t to) { /* 1-based, 0: none */
  for (int64_t s = from; s < to; s++)
    if (blew_up(x[s], x[from])) return (int)s + 1;
  return 0;
}

/* At the final check: the run itself stopped at its first blown-up step
 * (dt_print_step), so what is left is one process diverging where this run
 * did not. Either way it is named, never scored as a mismatch. */
static int diverged(const dt_train_config *c, const double *losses, const double *ref) {
  int run = first_blown(losses, c->start_step, c->steps), one = first_blown(ref, 0, c->steps);
  if (!run && !one) return 0;
  if (one)
    printf("CHECK FAILED: training diverged: the loss of one process is %g at step %d%s. Not a "
           "parallelism bug: the configuration does not train; lower --lr (now %g), or set --clip "
           "1\n",
           ref[one - 1], one, run ? ", and this run's too" : "", c->lr);
  else
    printf("CHECK FAILED: this run diverged (loss %g at step %d) where one process trained to %g: "
           "the distributed step is wrong, not the learning rate\n",
           losses[run - 1], run, ref[c->steps - 1]);
  return 1;
}

typedef struct {
  double loss, part, tensor, element; /* measured; loss: the task's when the loss has a part */
  int worst;                          /* the tensor of the worst L2 figure */
  size_t outliers, of, allowed; /* in the tensor with the largest share of them, of its size */
} figures;

/* x / of, where x is 0 whenever `of` is (a balance loss of --aux-coef 0) */
static double rel_to(double x, double of) { return x == 0 ? 0 : x / fabs(of); }

/* Tensor t of w against ref, relative to how far training moved it (ref -
 * w0) in L2: the same meaning at any size, step count and learning rate;
 * *most (if given) becomes the largest |w - ref| seen so far. */
static double tensor_rel(const dt_train_config *c, int64_t t, const float *w, const float *ref,
                         const float *w0, double *move2_out, double *most) {
  dt_tensor x = dt_model_tensor(c, t);
  double diff2 = 0, move2 = 0, far = most ? *most : 0;
  for (int64_t i = x.at; i < x.at + x.rows * x.cols; i++) {
    double d = (double)w[i] - ref[i], m = (double)ref[i] - w0[i];
    diff2 += d * d;
    move2 += m * m;
    far = fmax(far, fabs(d)); /* here, beside the sums: GCC 12 for arm64 fails on a lone one */
  }
  if (most) *most = far;
  if (move2_out) *move2_out = move2;
  return sqrt(diff2 / fmax(move2, 1e-300));
}

/* The weights of a[0..n) off b's by more than limit (NaN counts) */
static size_t outliers(const float *a, const float *b, size_t n, double limit) {
  size_t out = 0;
  for (size_t i = 0; i < n; i++) out += !(fabs((double)a[i] - b[i]) <= limit);
  return out;
}

/* Each tensor of the model (dt_model_tensor) within tensor_bound, at most
 * `share` of its weights off by more than that x its rms movement. */
static figures measure(const dt_train_config *c, const double *losses, const double *ref_loss,
                       const double *parts, const double *ref_parts, const float *w,
                       const float *ref, const float *w0, double tensor_bound, double share) {
  figures f = {0};
  for (int64_t s = c->start_step; s < c->steps; s++) { /* of where it started */
    double p = parts ? parts[s] : 0, q = parts ? ref_parts[s] : 0, q0 = parts ? ref_parts[0] : 0;
    f.loss = fmax(f.loss, fabs((losses[s] - p) - (ref_loss[s] - q)) / (ref_loss[0] - q0));
    if (parts) f.part = fmax(f.part, rel_to(fabs(p - q), q0));
  }
  for (int64_t t = 0; t < dt_model_tensors(c); t++) {
    dt_tensor x = dt_model_tensor(c, t);
    size_t n = (size_t)(x.rows * x.cols);
    const float *a = w + x.at, *b = ref + x.at;
    double move2, rel = tensor_rel(c, t, w, ref, w0, &move2, &f.element);
    if (!(rel <= f.tensor)) { /* NaN is the worst */
      f.tensor = rel;
      f.worst = (int)t;
    }
    /* an outlier is a weight off by more than the bound allows the tensor's
     * typical weight: at most `share` of them, each within 2 x reach */
    size_t out = outliers(a, b, n, tensor_bound * sqrt(move2 / (double)n));
    if (!f.of || (double)out / (double)n > (double)f.outliers / (double)f.of) {
      f.outliers = out;
      f.of = n;
      f.allowed = (size_t)(share * (double)n);
    }
  }
  return f;
}

#define MARK(ok) ((ok) ? "ok" : "FAIL")

/* After a failed check, every tensor off, with how far it moved against how
 * far one process moved it: the pattern names the bug. 0 x: no update ever
 * reached it (its rel diff is then exactly 1.00); about N x: a sum where an
 * average was meant; about 1/N x: divided twice; about 1 x but off: the
 * right size of update in the wrong place or from the wrong data. */
static void list_off(const dt_train_config *c, const float *w, const float *ref, const float *w0,
                     double bound) {
  int64_t shown = 0, off = 0, never = 0;
  for (int64_t t = 0; t < dt_model_tensors(c); t++) {
    dt_tensor x = dt_model_tensor(c, t);
    size_t n = (size_t)(x.rows * x.cols);
    const float *a = w + x.at, *b = ref + x.at, *z = w0 + x.at;
    double diff2 = 0, move2 = 0, own2 = 0;
    size_t still = 0;
    for (size_t i = 0; i < n; i++) {
      double d = (double)a[i] - b[i], m = (double)b[i] - z[i], o = (double)a[i] - z[i];
      diff2 += d * d;
      move2 += m * m;
      own2 += o * o;
      still += a[i] == z[i];
    }
    double rel = sqrt(diff2 / fmax(move2, 1e-300)), moved = sqrt(own2 / fmax(move2, 1e-300));
    if (rel <= bound) continue;
    never += still == n;
    if (off++ == 0)
      printf("  tensors off (rel L2 diff > %.1e), with how far each moved against one process:\n",
             bound);
    if (shown++ >= 8) continue;
    printf("    %s  rel diff %.2e  moved %.2f x%s\n", x.name, rel, moved,
           still == n      ? "  (never moved)"
           : still > n / 2 ? "  (most of its weights never moved)"
                           : "");
  }
  if (shown > 8) printf("    ... and %lld more\n", (long long)(shown - 8));
  printf("  tensors off: %lld of %lld\n", (long long)off, (long long)dt_model_tensors(c));
  if (never)
    printf("  never moved: %lld of them are still their initial weights (no update reached them), "
           "so their rel diff is exactly 1.00: the whole distance one process moved them\n",
           (long long)never);
}

/* The yardstick of this config: the dense trainer, the mixture's, the
 * transformer's or the GPT's. */
static void reference_train(const dt_train_config *c, dt_reference_run *out) {
  switch (c->model) {
  case DT_MOE: dt_reference_train_moe(c, out); break;
  case DT_TRANSFORMER: dt_reference_train_attn(c, out); break;
  case DT_GPT: dt_reference_train_gpt(c, out); break;
  default: dt_reference_train(c, out);
  }
}

static const char *verdict(int failed) { return failed ? "FAILED" : "PASSED"; }

/* AdamW's drift belongs to the configuration: where a tensor's gradients sit
 * within rounding of 0 for some steps (attention's at the start, under a
 * short warm-up), AdamW makes their last bits whole steps of lr, and two
 * runs that round apart grow apart, by up to ~2x a step (CHECKING.md). One
 * process shows how far rounding alone takes this configuration: it trains
 * again with each step's samples in reverse order, the same sums in another
 * order. Where the run is past AdamW's fixed bounds, and that twin reaches X
 * of them (its loss, or its furthest tensor), the bounds are multiplied by
 * TWIN_FACTOR x X, never by more than TWIN_CAP: beyond it rounding alone
 * moves the run so far that no check can tell a bug that size from it, and
 * the check says so. One multiplier for every figure: in a chaotic run which
 * figure ends furthest is itself chance (one twin's loss was 10 times under
 * the run's on one BLAS kernel, over it on another). Returns the multiplier,
 * 1 where there is no twin: the mixture's capacity makes the samples' order
 * part of its model. */
#define TWIN_FACTOR 4.0
#define TWIN_CAP    5.0
static double twin_multiplier(const dt_train_config *c, const dt_reference_run *ref) {
  if (c->model == DT_MOE) return 1;
  double *losses = malloc((size_t)c->steps * sizeof *losses), loss = 0, most = 0;
  float *w = malloc((size_t)dt_model_size(c) * sizeof *w);
  CHECK_ALLOC(losses);
  CHECK_ALLOC(w);
  double t0 = dt_now();
  dt_reference_run twin = {.losses = losses, .weights = w, .twin = 1};
  reference_train(c, &twin);
  for (int64_t s = c->start_step; s < c->steps; s++)
    loss = fmax(loss, fabs(losses[s] - ref->losses[s]) / ref->losses[0]);
  int64_t worst = 0;
  for (int64_t t = 0; t < dt_model_tensors(c); t++) {
    double d = tensor_rel(c, t, w, ref->weights, ref->initial, NULL, NULL);
    if (!(d <= most)) {
      most = d;
      worst = t;
    }
  }
  double x = fmax(loss / ADAMW_LOSS_BOUND, most / ADAMW_WEIGHT_BOUND);
  double m = fmin(TWIN_CAP, fmax(1, TWIN_FACTOR * x));
  printf("AdamW's own drift: one process trained again with each step's samples reversed (the "
         "same sums in another order, %.2f s) ends %.2e from the first in its loss, %.2e in %s: "
         "%.2g x AdamW's fixed bounds, which are multiplied by max(1, min(%g x %.2g, %g)) = %.3g\n",
         dt_now() - t0, loss, most, dt_model_tensor(c, worst).name, x, TWIN_FACTOR, x, TWIN_CAP, m);
  if (m == TWIN_CAP)
    printf("  (rounding alone moves this configuration so far that a bug moving it less than %g x "
           "those bounds cannot be told from rounding: a longer warm-up, or --optimizer sgd, "
           "can)\n",
           TWIN_CAP);
  free(losses);
  free(w);
  return m;
}

/* The row furthest past its bound (NaN first), in words; "" if none.
 * bound: the loss's, a tensor's, a weight's. */
static void name_worst(const dt_train_config *c, const figures *f, const double *bound, int parts,
                       char *row, size_t len) {
  double ratio[5] = {f->loss / bound[0], f->tensor / bound[1],
                     (double)f->outliers / fmax((double)f->allowed, 1), f->element / bound[2],
                     f->part / bound[0]};
  int worst = -1;
  for (int i = 0; i < 5; i++)
    if (!(ratio[i] <= 1) && (worst < 0 || !(ratio[i] <= ratio[worst]))) worst = i;
  row[0] = 0;
  if (worst == 0)
    snprintf(row, len, "the %sloss is off: %.2e, bound %.1e", parts ? "task " : "", f->loss,
             bound[0]);
  if (worst == 4)
    snprintf(row, len, "the balance loss is off: %.2e, bound %.1e", f->part, bound[0]);
  if (worst == 1)
    snprintf(row, len, "a tensor is off: %s's rel L2 diff %.2e, bound %.1e",
             dt_model_tensor(c, f->worst).name, f->tensor, bound[1]);
  if (worst == 2)
    snprintf(row, len, "too many weights are off: %zu of %zu in one tensor, bound %zu", f->outliers,
             f->of, f->allowed);
  if (worst == 3)
    snprintf(row, len, "a weight is off by more than the optimizer can move it: %.2e, bound %.1e",
             f->element, bound[2]);
}

static int check_fp32(const dt_train_config *c, const double *losses, const double *parts,
                      const float *w, const dt_reference_run *ref, const char *other) {
  const double *ref_loss = ref->losses;
  int adamw = c->optimizer[0] == 'a';
  int64_t K = dt_check_longest_sum(c), S = c->steps;
  double sk = (double)S * (double)K * U32; /* SGD: S steps of K-term sums */
  double loss_bound = adamw ? ADAMW_LOSS_BOUND : sk, tensor_bound = adamw ? ADAMW_WEIGHT_BOUND : sk;
  double reach2 = 2 * ref->reach;
  const float *r = ref->weights, *w0 = ref->initial;
  double share = OUTLIER_SHARE, m = 1;
  figures f = measure(c, losses, ref_loss, parts, ref->parts, w, r, w0, tensor_bound, share);
  if (adamw && !(f.loss <= loss_bound && f.tensor <= tensor_bound && f.outliers <= f.allowed) &&
      (m = twin_multiplier(c, ref)) > 1) {
    loss_bound *= m;
    tensor_bound *= m;
    share *= m;
    f = measure(c, losses, ref_loss, parts, ref->parts, w, r, w0, tensor_bound, share);
  }
  size_t n = f.of;
  int ok_loss = f.loss <= loss_bound, ok_part = f.part <= loss_bound,
      ok_tensor = f.tensor <= tensor_bound, ok_out = f.outliers <= f.allowed,
      ok_elem = f.element <= reach2;
  char why[64];
  if (m > 1)
    snprintf(why, sizeof why, "AdamW's drift x %.3g, by one process's own (above)", m);
  else if (adamw)
    snprintf(why, sizeof why, "AdamW's drift after a rounding flip");
  else
    snprintf(why, sizeof why, "S x K x u (S %lld, K = max(B%s,D,H) = %lld)", (long long)S,
             c->model == DT_TRANSFORMER ? " x seq"
             : c->model == DT_GPT       ? " x seq,V"
                                        : "",
             (long long)K);
  printf("compare with one process (fp32, %s; the criterion: CHECKING.md)\n", c->optimizer);
  printf("       figure                                    measured     bound\n");
  printf("  %-4s %-41s %-12.2e %-9.1e %s\n", MARK(ok_loss),
         parts ? "per-step task loss, max |diff| / first"
               : "per-step loss, max |diff| / first loss",
         f.loss, loss_bound, why);
  if (parts)
    printf("  %-4s %-41s %-12.2e %-9.1e %s\n", MARK(ok_part),
           "per-step balance loss, max |diff| / first", f.part, loss_bound, why);
  printf("  %-4s weights, worst tensor rel L2 diff         %-12.2e %-9.1e %s, of how far training "
         "moved it (%s)\n",
         MARK(ok_tensor), f.tensor, tensor_bound, adamw ? why : "S x K x u",
         dt_model_tensor(c, f.worst).name);
  printf("  %-4s weights off alone, worst tensor           %-12zu %-9zu %.3g%% of %zu, off by more "
         "than the bound x the tensor's rms movement\n",
         MARK(ok_out), f.outliers, f.allowed, 100 * share, n);
  printf("  %-4s weights, max |diff|                       %-12.2e %-9.1e 2 x how far %s moves one "
         "weight in %lld steps\n",
         MARK(ok_elem), f.element, reach2, c->optimizer, (long long)S);
  int failed = !(ok_loss && ok_part && ok_tensor && ok_out && ok_elem) || other;
  if (failed) list_off(c, w, r, w0, tensor_bound);
  char row[240];
  name_worst(c, &f, (double[3]){loss_bound, tensor_bound, reach2}, parts != NULL, row, sizeof row);
  printf("CHECK %s: per-step loss and final weights match single-process training (%s)\n",
         verdict(failed),
         !failed  ? "every figure within its bound"
         : row[0] ? row
                  : other);
  return failed;
}

static int check_16bit(const dt_train_config *c, const double *losses, const double *parts,
                       const dt_reference_run *ref, const float *w, const char *other) {
  const double *ref_loss = ref->losses;
  const float *ref_w = ref->weights;
  double loss_rel = 0, part_rel = 0, diff2 = 0, norm2 = 0;
  for (int64_t s = c->start_step; s < c->steps; s++) {
    double p = parts ? parts[s] : 0, q = parts ? ref->parts[s] : 0;
    loss_rel = fmax(loss_rel, fabs((losses[s] - p) - (ref_loss[s] - q)) / fabs(ref_loss[s] - q));
    part_rel = fmax(part_rel, rel_to(fabs(p - q), q));
  }
  size_t n = (size_t)dt_model_size(c);
  for (size_t i = 0; i < n; i++) {
    double d = (double)w[i] - ref_w[i];
    diff2 += d * d;
    norm2 += (double)ref_w[i] * ref_w[i];
  }
  double w_rel = sqrt(diff2 / norm2);
  int failed = !(loss_rel <= REL16) || !(part_rel <= REL16) || !(w_rel <= REL16);
  char part[64] = "";
  if (parts) snprintf(part, sizeof part, ", balance loss %.2e", part_rel);
  printf("compare (%s, the reference at the same precision): per-step %sloss max rel diff %.2e%s; "
         "final weights rel L2 diff %.2e\n",
         c->precision, parts ? "task " : "", loss_rel, part, w_rel);
  printf("CHECK %s: per-step loss and final weights match single-process %s training within "
         "%.0e relative (loss per step; weights in L2 norm)%s%s\n",
         verdict(failed || other), c->precision, REL16, other ? ", but " : "", other ? other : "");
  failed |= other != NULL;
  return failed;
}

/* A diverged loss (blew_up) does not come back. Stop at once,
 * and say why: rank 0 trains the same steps in one process. If that diverges
 * too, the configuration does not train (lower --lr); if it does not, the
 * distributed step is wrong, and that is a failed check. Every rank holds the
 * same loss here, so every rank stops at the same step. */
static void stop_diverged(const dt_train_config *c, int64_t step, double loss, double first) {
  char why[96];
  if (isfinite(loss))
    snprintf(why, sizeof why, "%g, %.0e times the %g of step %lld", loss, loss / first, first,
             (long long)c->start_step + 1);
  else
    snprintf(why, sizeof why, "%s", isnan(loss) ? "NaN" : "infinite");
  int alike = -1; /* one process: -1 not asked (--no-check), else the step it blew up, or 0 */
  double ref_loss = 0;
  if (!c->no_check) {
    if (dt_rank() == 0) {
      dt_train_config one = *c;
      one.steps = step + 1;
      one.start_step = 0;
      one.save = one.ckpt = one.trace = NULL;
      double *losses = malloc((size_t)one.steps * sizeof *losses);
      float *w = malloc((size_t)dt_model_size(c) * sizeof *w);
      CHECK_ALLOC(losses);
      CHECK_ALLOC(w);
      dt_reference_run run = {.losses = losses, .weights = w};
      reference_train(&one, &run);
      alike = first_blown(losses, 0, step + 1);
      ref_loss = losses[step];
      free(losses);
      free(w);
    }
    share_verdict(&alike);
  }
  const char *remedy = dt_precision_type(c) == DT_F32 ? "" : ", or train in --precision fp32";
  if (alike == 0) {
    if (dt_rank() == 0)
      printf("CHECK FAILED: this run diverged at step %lld (the loss is %s) where one process "
             "trained the same steps to a loss of %g: the distributed step is wrong, not the "
             "learning rate\n",
             (long long)step + 1, why, ref_loss);
    fflush(stdout);
    dt_finalize();
    exit(1);
  }
  char alike_text[160] = "not compared with one process (--no-check: run without it to tell a "
                         "bug from a learning rate). Likely";
  if (alike > 0)
    snprintf(alike_text, sizeof alike_text, "one process diverges alike (at step %d):", alike);
  dt_fail("training diverged at step %lld: the loss is %s; %s the updates are too large for this "
          "model: lower --lr (now %g; try %g)%s%s",
          (long long)step + 1, why, alike_text, c->lr, c->lr / 10,
          c->clip > 0 ? "" : ", or bound each update with --clip 1", remedy);
}

void dt_print_step(const dt_train_config *c, int64_t step, double loss, const char *part_name,
                   double part, const char *how, double seconds) {
  static double first;
  if (step == c->start_step) first = loss;
  int diverged = !isfinite(loss);
  char parts[96] = "";
  if (part_name)
    snprintf(parts, sizeof parts, " = task %.6f + %s %.6f", loss - part, part_name, part);
  int64_t every = 10; /* a GPT's long runs: at most about 20 lines after the first five */
  while (c->model == DT_GPT && c->steps / every > 20) every *= 10;
  char rate[48] = ""; /* a GPT's throughput, as nanoGPT and llm.c print it */
  if (c->model == DT_GPT)
    snprintf(rate, sizeof rate, "  %.0f tokens/s", (double)(c->batch * c->seq) / seconds);
  if (step - c->start_step < 5 || step % every == every - 1 || step == c->steps - 1 || diverged)
    dt_print0("step %4lld/%lld  loss %.6f%s  (%s)  %.2f ms%s\n", (long long)step + 1,
              (long long)c->steps, loss, parts, how, seconds * 1e3, rate);
  if (blew_up(loss, first) && !(isfinite(loss) && step == c->start_step))
    stop_diverged(c, step, loss, first);
}

/* Data parallelism keeps a whole replica on every rank; they must agree bit
 * for bit, or a bug on one rank would hide behind rank 0's good copy. */
static int replicas_agree(const float *w, size_t n) {
  float *mine = malloc(n * sizeof *mine);
  CHECK_ALLOC(mine);
  memcpy(mine, w, n * sizeof *mine);
  /* bookkeeping, not training: host MPI, out of the byte counters, watched */
  DT_WATCH("MPI_Bcast of rank 0's weights for the replica check");
  CHECK_MPI(MPI_Bcast(mine, dt_mpi_count(n), MPI_FLOAT, 0, MPI_COMM_WORLD));
  dt_watch_done();
  long long differ = 0;
  for (size_t i = 0; i < n; i++) differ += memcmp(&mine[i], &w[i], sizeof *w) != 0;
  free(mine);
  long long *all = malloc((size_t)dt_size() * sizeof *all);
  CHECK_ALLOC(all);
  DT_WATCH("MPI_Gather of the replica check's counts");
  CHECK_MPI(MPI_Gather(&differ, 1, MPI_LONG_LONG, all, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD));
  dt_watch_done();
  int bad = 0;
  for (int r = 0; dt_rank() == 0 && r < dt_size(); r++)
    if (all[r]) {
      printf("replicas: rank %d's weights differ from rank 0's in %lld of %zu\n", r, all[r], n);
      bad = 1;
    }
  if (dt_rank() == 0 && !bad)
    printf("replicas: all %d ranks hold bit-identical weights\n", dt_size());
  free(all);
  return !bad;
}

/* The run's routing judged by the reference (reference_moe.c): a token sent
 * to experts this process would not choose, beyond a near tie, is a bug. */
static int routing_agrees(const dt_routing *rt) {
  char closest[64] = "";
  if (rt->disagree) snprintf(closest, sizeof closest, ", the closest by %.1e", rt->closest);
  printf("routing: %lld tokens routed; %lld alike, %lld near ties (logits within %.0e of the k-th "
         "best; widest %.1e), %lld chosen otherwise%s (each replayed in one process)\n",
         (long long)rt->tokens, (long long)(rt->tokens - rt->ties - rt->disagree),
         (long long)rt->ties, rt->tie, rt->widest, (long long)rt->disagree, closest);
  return rt->disagree == 0;
}

/* fp16's skips as one process decided them (reference.c) */
static int skips_agree(const dt_train_config *c, const dt_skips *s) {
  int64_t skipped = 0;
  for (int64_t t = c->start_step; t < c->steps; t++) skipped += s->skipped[t];
  printf("fp16 step skips: the run skipped %lld of %lld steps on overflow; one process decided "
         "%lld alike, %lld apart near fp16's largest value (within 2x of 65504: replayed), %lld "
         "apart otherwise\n",
         (long long)skipped, (long long)(c->steps - c->start_step), (long long)s->alike,
         (long long)s->replayed, (long long)s->otherwise);
  return s->otherwise == 0;
}

/* The verdict after training: the figures against one process's run (ref,
 * trained in `seconds`), and what they cannot show: a replica that
 * disagrees, routing or decisions one process would not make. */
static int judge(const dt_train_config *c, const double *losses, const double *parts,
                 const float *final_weights, const dt_reference_run *r, int replicas_ok,
                 double seconds) {
  const dt_decisions *replay = &r->replay;
  dt_routing *routing = replay->routing;
  const double *ref_loss = r->losses;
  int failed;
  printf("reference: 1 process trained the same %lld steps in %.2f s; loss %.6f -> %.6f\n",
         (long long)c->steps, seconds, ref_loss[0], ref_loss[c->steps - 1]);
  /* what the figures cannot show: a bug in another rank's replica, or
   * routing that one process would not choose */
  char other[320] = "";
  if (!replicas_ok) snprintf(other, sizeof other, "rank 0 matches, but the replicas disagree");
  if (routing && !routing_agrees(routing))
    snprintf(other, sizeof other,
             "the run routed %lld token%s to experts one process would not choose, not a near "
             "tie",
             (long long)routing->disagree, routing->disagree == 1 ? "" : "s");
  /* ReLU's decisions: held to rounding where the runs stay within it (SGD in fp32) */
  char kinks[160];
  if (replay->kinks && dt_kinks_verdict(replay->kinks, c->optimizer[0] != 'a', kinks, sizeof kinks))
    snprintf(other, sizeof other, "%s", kinks);
  if (c->clip > 0) /* a kink of the factor, not a jump: nothing to replay */
    printf("gradient clipping: one process clipped %lld of %lld steps; min(1, clip / |g|) is "
           "continuous in |g|, so rounding moves it by rounding, within the figures' bounds\n",
           (long long)r->clipped, (long long)c->steps);
  if (replay->skips && !skips_agree(c, replay->skips))
    snprintf(other, sizeof other,
             "the run skipped or took %lld step%s that one process decides otherwise, not near "
             "fp16's largest value",
             (long long)replay->skips->otherwise, replay->skips->otherwise == 1 ? "" : "s");
  if (diverged(c, losses, ref_loss))
    failed = 1;
  else if (dt_precision_type(c) != DT_F32)
    failed = check_16bit(c, losses, parts, r, final_weights, other[0] ? other : NULL);
  else
    failed = check_fp32(c, losses, parts, final_weights, r, other[0] ? other : NULL);
  return failed;
}

int dt_check_against_reference(const dt_train_config *c, const double *losses, const double *parts,
                               const float *final_weights, int replicated, dt_decisions *replay) {
  dt_decisions none = {0};
  if (!replay) replay = &none;
  int failed = 0;
  size_t n = (size_t)dt_model_size(c), steps = (size_t)c->steps;
  int replicas_ok = replicated && dt_size() > 1 ? replicas_agree(final_weights, n) : 1;
  if (dt_rank() == 0) {
    double *ref_loss = malloc((steps + 1) * sizeof(double)); /* + 1: none at --steps 0 */
    float *ref_w = malloc(n * sizeof(float)), *w0 = malloc(n * sizeof(float));
    CHECK_ALLOC(ref_loss);
    CHECK_ALLOC(ref_w);
    CHECK_ALLOC(w0);
    double t0 = dt_now();
    dt_reference_run ref = {.losses = ref_loss,
                            .weights = ref_w,
                            .initial = w0,
                            .replay = *replay,
                            .parts = parts ? malloc(steps * sizeof(double)) : NULL};
    if (parts) CHECK_ALLOC(ref.parts);
    reference_train(c, &ref);
    if (steps == 0) { /* nothing trained (a GPT's --steps 0): the start, bit for bit */
      failed = memcmp(final_weights, ref_w, n * sizeof *ref_w) != 0 || !replicas_ok;
      printf("CHECK %s: 0 steps: the %zu weights the run holds are %s the initial weights one "
             "process makes%s\n",
             verdict(failed), n, failed ? "NOT bit-identical to" : "bit-identical to",
             replicas_ok ? "" : ", but the replicas disagree");
    } else {
      failed = judge(c, losses, parts, final_weights, &ref, replicas_ok, dt_now() - t0);
    }
    free(ref.parts);
    free(ref_loss);
    free(ref_w);
    free(w0);
  }
  fflush(stdout);
  share_verdict(&failed);
  return failed;
}

int dt_check_convergence(const dt_train_config *c, const double *losses, double factor,
                         const char *what) {
  int failed = 0;
  if (dt_rank() == 0) {
    double *ref = malloc((size_t)c->steps * sizeof *ref);
    float *w = malloc((size_t)dt_model_size(c) * 4);
    CHECK_ALLOC(ref);
    CHECK_ALLOC(w);
    dt_reference_run run = {.losses = ref, .weights = w};
    reference_train(c, &run);
    double first = losses[c->start_step], last = losses[c->steps - 1], want = ref[c->steps - 1];
    if (diverged(c, losses, ref))
      failed = 1;
    else {
      failed = !(last <= factor * want && last < first);
      printf("reference (1 process, exact): loss %.6f -> %.6f; %s: %.6f -> %.6f (%.2fx)\n", ref[0],
             want, what, first, last, last / want);
      printf("CHECK %s: %s training converges: final loss %.6f <= %.2f x the exact run's %.6f, "
             "and below its first loss\n",
             failed ? "FAILED" : "PASSED", what, last, factor, want);
    }
    fflush(stdout);
    free(ref);
    free(w);
  }
  share_verdict(&failed);
  return failed;
}
