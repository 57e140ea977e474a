/* lockstep_verdict.c: the check's table after training (lockstep_shared.h): each
 * figure's worst over the steps compared beside its bound, the replayed
 * decisions counted, and the verdict line. */
#include <stdio.h>

#include "lockstep_shared.h"

#define MARK(ok) ((ok) ? "ok" : "FAIL")

static void at(const worst *w, char *buf, size_t len, const dt_train_config *c) {
  if (w->tensor >= 0)
    snprintf(buf, len, "step %lld, %s", (long long)w->step + 1, dt_model_tensor(c, w->tensor).name);
  else
    snprintf(buf, len, "step %lld", (long long)w->step + 1);
}

int dt_lockstep_verdict(dt_lockstep *k, const char *other, double *worst_one_step) {
  const dt_train_config *c = k->c;
  bounds b = dt_lockstep_bounds(c);
  double lb = b.loss, gb = b.grad, fb = dt_lockstep_factor_bound(dt_size());
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
