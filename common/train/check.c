/* check.c: the verdict of every training lesson, "this distributed run
 * computed what one process computes". CHECKING.md derives the criterion;
 * lockstep.c compares the run with one process step by step, from the run's
 * own state, and this file puts the verdict together after training: the
 * replicas of data parallelism bit for bit, the lockstep's figures, and,
 * shown beside them but not judged, the trajectory: how far one process
 * trained alone from the start ends from the run. Under AdamW rounding
 * grows a little every step, so that distance is what rounding does to a
 * long run, not a test of it (CHECKING.md, "Why not compare the ends").
 * Divergence is named where it happens (dt_print_step). */
#define DT_COMMON_IMPL
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"

static void share_verdict(int *failed) {
  dt_lockstep_wait(failed,
                   "MPI_Bcast of the check's verdict (rank 0 trains one process meanwhile)");
}

/* A loss that is no longer a number, or that grew DIVERGED-fold since the
 * first step, does not come back: training has diverged (dt_blew_up). */
static int first_blown(const double *x, int64_t from, int64_t to) { /* 1-based, 0: none */
  for (int64_t s = from; s < to; s++)
    if (dt_blew_up(x[s], x[from])) return (int)s + 1;
  return 0;
}

/* Top-k compression's check, at its end: the run itself stopped at its first
 * blown-up step (dt_print_step), so what is left is one process diverging
 * where this run did not. Either way it is named, never scored. */
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

/* A diverged loss does not come back. Stop at once, and say why. Where the
 * check compared this step, one process took it from the run's own state
 * (lockstep.c): if its loss blows up too, and no step before was off, the
 * configuration does not train (lower --lr); else the distributed step is
 * wrong, a failed check. Where it did not (--check-every), rank 0 trains
 * the same steps in one process from the start. Every rank holds the same
 * loss here, so every rank stops at the same step. */
void dt_stop_diverged(dt_run *r, int64_t step) {
  const dt_train_config *c = &r->c;
  double loss = r->losses[step], first = r->losses[c->start_step];
  char why[96];
  if (isfinite(loss))
    snprintf(why, sizeof why, "%g, %.0e times the %g of step %lld", loss, loss / first, first,
             (long long)c->start_step + 1);
  else
    snprintf(why, sizeof why, "%s", isnan(loss) ? "NaN" : "infinite");
  /* one process: -1 not asked (--no-check), else 1 + the step it blew up at, or 0 */
  int alike = -1, off = -1,
      from_state = r->lockstep && (step - c->start_step) % c->check_every == 0;
  double ref_loss = 0;
  if (!c->no_check) {
    if (dt_rank() == 0 && from_state) {
      off = dt_lockstep_diverged(r->lockstep, step, &ref_loss);
      alike = off < 0 && dt_blew_up(ref_loss, first) ? (int)step + 1 : 0;
    } else if (dt_rank() == 0) {
      dt_train_config one = *c;
      one.steps = step + 1;
      one.start_step = 0;
      one.save = one.ckpt = one.trace = NULL;
      double *losses = dt_host_alloc((size_t)one.steps, sizeof *losses);
      float *w = dt_host_alloc((size_t)dt_model_size(c), sizeof *w);
      dt_reference_run run = {.losses = losses, .weights = w};
      dt_mem_aside(1);
      dt_reference_train(&one, &run);
      dt_mem_aside(0);
      alike = first_blown(losses, 0, step + 1);
      ref_loss = losses[step];
      free(losses);
      free(w);
    }
    share_verdict(&alike);
  }
  const char *remedy = dt_precision_type(c) == DT_F32 ? "" : ", or train in --precision fp32";
  if (alike == 0) {
    if (dt_rank() == 0 && off >= 0)
      printf("CHECK FAILED: this run diverged at step %lld (the loss is %s), and the check found "
             "its step %lld off before (above): the distributed step is wrong, not the learning "
             "rate\n",
             (long long)step + 1, why, (long long)off + 1);
    else if (dt_rank() == 0)
      printf("CHECK FAILED: this run diverged at step %lld (the loss is %s) where one process, %s, "
             "computes a loss of %g: the distributed step is wrong, not the learning rate\n",
             (long long)step + 1, why,
             from_state ? "from the run's own state at that step" : "training the same steps",
             ref_loss);
    fflush(stdout);
    dt_finalize();
    exit(1);
  }
  char alike_text[200] = "not compared with one process (--no-check: run without it to tell a "
                         "bug from a learning rate). Likely";
  if (alike > 0)
    snprintf(alike_text, sizeof alike_text, "one process diverges alike (at step %d%s):", alike,
             from_state ? ", from the run's own state" : "");
  dt_fail("training diverged at step %lld: the loss is %s; %s the updates are too large for this "
          "model: lower --lr (now %g; try %g)%s%s",
          (long long)step + 1, why, alike_text, c->lr, c->lr / 10,
          c->clip > 0 ? "" : ", or bound each update with --clip 1", remedy);
}

int dt_print_step(const dt_train_config *c, int64_t step, double loss, const char *part_name,
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
  return dt_blew_up(loss, first) && !(isfinite(loss) && step == c->start_step);
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

/* Tensor t of w against ref, relative to how far training moved it (ref -
 * w0) in L2: the same meaning at any size, step count and learning rate. */
static double moved_rel(const dt_train_config *c, int64_t t, const float *w, const float *ref,
                        const float *w0) {
  dt_tensor x = dt_model_tensor(c, t);
  double diff2 = 0, move2 = 0;
  for (int64_t i = x.at; i < x.at + x.rows * x.cols; i++) {
    double d = (double)w[i] - ref[i], m = (double)ref[i] - w0[i];
    diff2 += d * d;
    move2 += m * m;
  }
  return diff2 == 0 ? 0 : sqrt(diff2 / fmax(move2, 1e-300));
}

/* One process trained alone from the start: where the run ends beside it.
 * Not judged: the lockstep is the verdict. Returns 1 if the start differs
 * bit for bit (--steps 0, where nothing else is compared). */
static int trajectory(const dt_train_config *c, const double *losses, const float *w,
                      double one_step, int off, int replicas_ok) {
  size_t n = (size_t)dt_model_size(c), steps = (size_t)c->steps;
  double *ref_loss = dt_host_alloc(steps + 1, sizeof(double)); /* + 1: none at --steps 0 */
  float *ref_w = dt_host_alloc(n, 4), *w0 = dt_host_alloc(n, 4);
  double t0 = dt_now();
  dt_reference_run ref = {.losses = ref_loss, .weights = ref_w, .initial = w0};
  dt_mem_aside(1);
  dt_reference_train(c, &ref);
  dt_mem_aside(0);
  int failed = 0;
  if (steps == 0) { /* nothing trained (a GPT's --steps 0): the start, bit for bit */
    failed = memcmp(w, ref_w, n * sizeof *ref_w) != 0 || !replicas_ok;
    printf("CHECK %s: 0 steps: the %zu weights the run holds are %s the initial weights one "
           "process makes%s\n",
           failed ? "FAILED" : "PASSED", n, failed ? "NOT bit-identical to" : "bit-identical to",
           replicas_ok ? "" : ", but the replicas disagree");
  } else {
    double loss = 0, most = 0;
    int64_t worst = 0;
    for (int64_t s = c->start_step; s < c->steps; s++)
      loss = fmax(loss, fabs(losses[s] - ref_loss[s]) / ref_loss[0]);
    for (int64_t t = 0; t < dt_model_tensors(c); t++) {
      double d = moved_rel(c, t, w, ref_w, w0);
      if (!(d <= most)) {
        most = d;
        worst = t;
      }
    }
    char how[200] = "the check found a step off (above): not rounding's";
    if (!off)
      snprintf(how, sizeof how,
               "each step compared differed by rounding alone (at most %.2e of a gradient, above), "
               "and %lld "
               "steps carried it that far",
               one_step, (long long)(c->steps - c->start_step));
    printf("trajectory (shown, not judged): one process trained alone from the start (%.2f s) "
           "ends %.2e of its movement from this run (%s), its losses within %.2e of the first; "
           "%s (CHECKING.md, \"Why not compare the ends\")\n",
           dt_now() - t0, most, dt_model_tensor(c, worst).name, loss, how);
  }
  free(ref_loss);
  free(ref_w);
  free(w0);
  return failed;
}

int dt_check_run(dt_run *r) {
  const dt_train_config *c = &r->c;
  size_t n = (size_t)dt_model_size(c);
  int replicas_ok = r->replicated && dt_size() > 1 ? replicas_agree(r->host, n) : 1;
  int failed = 0;
  if (dt_rank() == 0) {
    double one_step = 0;
    if (r->lockstep)
      failed = dt_lockstep_verdict(
          r->lockstep, replicas_ok ? NULL : "rank 0 matches, but the replicas disagree", &one_step);
    failed |= trajectory(c, r->losses, r->host, one_step, failed, replicas_ok);
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
    dt_reference_train(c, &run);
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
