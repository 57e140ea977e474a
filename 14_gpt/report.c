/* report.c: what 14_gpt prints after the run (the mesh's table before it
 * is 12's): each axis's calls and bytes, the vocabulary's among them, the
 * time blocked on each, memory by kind with the logits' share, each beside
 * formulas.c's and checked on every rank; the copies of every replicated
 * weight; the pipeline's bubble (09); then throughput.c's line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "09_pp/formulas.h"
#include "09_pp/interleave.h"
#include "formulas.h"
#include "state.h"

/* a counter and the rows counted apart from it */
static dt_counter plus(dt_counter c, const dt_counter *a, int n) {
  for (int i = 0; i < n; i++) {
    c.calls += a[i].calls;
    c.bytes_sent += a[i].bytes_sent;
  }
  return c;
}

static void bytes(const model *m, const dt_run *r, uint64_t steps, int *bad) {
  gpt_share x = gpt_share_here(m, r);
  gpt_traffic t = gpt_traffic_of(&x);
  if (m->weights.chunks > 1 || m->step.zb) t.pp.calls = m->step.nev; /* the plan's exchanges */
  dt_comm *tp = m->mesh.axis[TP];
  char hb[120]; /* the formula, its E (bytes an element) written out */
#define ROW(axis, what, got, f, how)                                                               \
  mesh_row(axis, what, got, steps, (uint64_t)(f).calls, (uint64_t)(f).bytes,                       \
           mesh_how(how, x.wire16 ? 2 : 4, hb, sizeof hb), bad)
  if (x.wire16)
    dt_print0("  messages in %s: E = 2 bytes an element, half of fp32's (the loss's max and sums "
              "stay fp32, x 4)\n",
              r->c.precision);
  dt_print0("  per rank per step (rank 0)          calls formula  bytes sent     formula\n");
  if (!m->step.sp)
    ROW("tp", "all_reduce (activ)", tp->count[DT_ALL_REDUCE], t.activ,
        "M((4 + 2 recompute)L + first + last) x 2(tp-1)/tp x RD x E: after Wo, W2, the "
        "embedding; their mirrors");
  else {
    ROW("tp", "all_gather (activ)", tp->count[DT_ALL_GATHER], t.gather,
        "M((4 + 2 recompute)L + first + last) x (tp-1) x Rs D x E: before Wq|Wk|Wv, W1, the head");
    ROW("tp", "reduce_scatter (activ)", tp->count[DT_REDUCE_SCATTER], t.scatter,
        "the same: after Wo, W2, the embedding; with the gathers, an all-reduce's bytes");
    ROW("tp", "all_reduce (gains)", tp->count[DT_ALL_REDUCE], t.gains,
        "2(tp-1)/tp x (2L + last) D x E: each rank's rows' share of the gains' gradients");
  }
  ROW("tp", "all_reduce (max)", m->step.ce[0], t.max,
      "last stage: M x 2(tp-1)/tp x R x 4: each row's max over the vocabulary's slices");
  ROW("tp", "all_reduce (sum|target)", m->step.ce[1], t.sums,
      "last stage: M x 2(tp-1)/tp x 2R x 4: sum of e^(logit - max), the target's logit");
  ROW("cp", "sendrecv (K|V, dK|dV)", m->mesh.axis[CP]->count[DT_SENDRECV], t.cp,
      "LM(3cp-2 + recompute (cp-1)) x 2RW x E: 11's ring");
  ROW("pp", "sendrecv (activ)", m->mesh.axis[PP]->count[DT_SENDRECV], t.pp,
      m->weights.chunks > 1
          ? "M x (2V - [s = 0] - [s = pp-1]) x Rs D x E, V chunks; calls: the plan's"
          : "M x (s < pp-1: forward out + s > 0: gradient back) x Rs D x E; calls: the plan's");
  ROW("dp x cp", "all_reduce (grads)", m->mesh.dc->count[DT_ALL_REDUCE], t.grads,
      m->weights.zero ? "2 x (G-1) x S x E, as 06 --zero 1 (the rank's buffer one layer)"
                      : "2(G-1)/G x n x E, G = dp x cp, n this rank's floats");
  if (m->weights.zero)
    ROW("dp x cp", "all_gather (params)", m->mesh.dc->count[DT_ALL_GATHER], t.params,
        "(G-1) x S x E: the stepped shards back to every rank");
  ROW("emb", "all_reduce (tied wte)", m->mesh.emb->count[DT_ALL_REDUCE], t.emb,
      "first and last stage (pp > 1): 2(2-1)/2 x Vs D x E, the embedding's and the head's");
#undef ROW
  /* --report-json: one figure an axis and kind (13_plan's keys), the rows summed */
  dt_counter ar = plus(tp->count[DT_ALL_REDUCE], m->step.ce, 2);
  mesh_flow f[3] = {t.activ.calls ? t.activ : t.gains, t.max, t.sums};
  dt_report_traffic("tp", DT_ALL_REDUCE, (double)(ar.calls / steps),
                    (double)(ar.bytes_sent / steps),
                    (double)(f[0].bytes + f[1].bytes + f[2].bytes));
}

static void memory(const model *m, const dt_run *r, int *bad) {
  gpt_share x = gpt_share_here(m, r);
  int64_t mem[DT_NTAGS], P = m->mesh.n[PP], s = m->mesh.at[PP], V = m->weights.chunks;
  int64_t live = V > 1        ? pp_live_v((int)P, (int)s, m->step.M, (int)V)
                 : m->step.zb ? pp_live_zb((int)P, m->step.M)
                              : pp_live((int)P, (int)s, m->step.M, m->step.gpipe);
  gpt_memory(&x, mem);
  char act[256], comm[240];
  snprintf(act, sizeof act,
           "(live x slot + scratch) x 4, live %lld; a slot %lld floats: %s (x_0, %s%s%s)",
           (long long)live, (long long)gpt_slot(&x),
           m->step.recompute ? "recompute" : "every layer's",
           m->step.recompute ? "each layer's input alone"
           : V > 1           ? "L/V x (LN stats, h1, q k v o, lse, x2, h2, a u, out)"
                             : "L x (LN stats, h1, q k v o, lse, x2, h2, a u, out)",
           m->mesh.last ? ", the head's" : "",
           m->step.zb ? "; zb1's L(2RD + RHs + 3RW) kept for W" : "");
  dt_row rows[] = {
      {DT_PARAMS, mem[DT_PARAMS],
       m->weights.zero
           ? "4 x G S: the rank's buffer, padded, as 06 --zero 1"
           : "4 x n: the layers' tp shards, the vocabulary's rows (first, last), gains, wpe",
       0},
      {DT_GRADS, mem[DT_GRADS], "the same", 0},
      {DT_OPTIM, mem[DT_OPTIM],
       m->weights.zero ? "AdamW m, v: 8 x its shard along dp x cp (sgd: 0)"
                       : "AdamW m, v: 8 x n (sgd: 0)",
       0},
      {DT_ACTIV, mem[DT_ACTIV], act, 0},
      {DT_COMMBUF, mem[DT_COMMBUF], gpt_comm_how(m, comm, sizeof comm), 0},
      {DT_DATA, mem[DT_DATA], "M x R x 4 tokens (first stage), targets (last stage)", 0}};
  dt_print_memory(rows, 6, NULL);
  dt_print_memory_uncounted();
  for (int i = 0; i < 6; i++) *bad += (int64_t)dt_mem_peak(rows[i].tag) != rows[i].formula;
  if (m->mesh.last) /* [B S/cp rows of a microbatch, V/tp]: the vocabulary's slice of the logits */
    dt_print0("    the logits: [R, V/tp] = [%lld, %lld] a microbatch, %lld bytes of activ (live "
              "%lld and dlogits)\n    never gathered: a rank's slice R x V/tp x 4 = %lld bytes, of "
              "[R, V]'s R x V x 4 = %lld\n",
              (long long)m->step.R, (long long)m->weights.Vs,
              (long long)((live + 1) * m->step.R * m->weights.Vs * 4), (long long)live,
              (long long)(m->step.R * m->weights.Vs * 4),
              (long long)(m->step.R * m->weights.V * 4));
  dt_print0("    with R = B/(dp M) x S/cp = %lld rows per microbatch (%lld of them in this rank's "
            "stream), W = D/tp = %lld, Hs = H/tp = %lld, Vs = V/tp = %lld, C = %lld, L = %lld "
            "layer%s a stage, n = %lld\n",
            (long long)m->step.R, (long long)m->step.Rs, (long long)m->weights.W,
            (long long)m->weights.Hs, (long long)m->weights.Vs, (long long)m->step.cr.C,
            (long long)m->weights.L, m->weights.L == 1 ? "" : "s", (long long)m->weights.nw);
}

void gpt_report(model *m, dt_run *r) {
  uint64_t steps = (uint64_t)(r->c.steps - r->c.start_step);
  if (steps == 0) return; /* --steps 0: the model alone, saved or sampled */
  dt_run_summary(r);
  int bad = 0, worst;
  bytes(m, r, steps, &bad);
  worst = bad;
  dt_host_all_reduce(m->mesh.world, &worst, 1, DT_I32, DT_MAX);
  dt_print0("    every rank's calls and bytes equal their formulas: %s (%d rank%s)\n",
            worst ? "NO" : "yes", m->mesh.world->size, m->mesh.world->size == 1 ? "" : "s");
  double ms = 1e3 / (double)steps;
  dt_print0(
      "  time blocked per step (rank 0): tp %.2f ms, cp %.2f ms, pp %.2f ms, dp x cp %.2f ms, "
      "emb %.2f ms (the rest of the step is compute, above)\n",
      dt_comm_total(m->mesh.axis[TP]).seconds * ms, dt_comm_total(m->mesh.axis[CP]).seconds * ms,
      dt_comm_total(m->mesh.axis[PP]).seconds * ms, dt_comm_total(m->mesh.dc).seconds * ms,
      dt_comm_total(m->mesh.emb).seconds * ms);
  if (m->mesh.last && m->mesh.n[TP] > 1)
    dt_print0("  the loss's two all-reduces over tp (rank 0, in its tp time above): max %.3f ms, "
              "sum|target %.3f ms per step, %.3f ms in all\n",
              m->step.ce[0].seconds * ms, m->step.ce[1].seconds * ms,
              (m->step.ce[0].seconds + m->step.ce[1].seconds) * ms);
  bad = 0;
  memory(m, r, &bad);
  dt_host_all_reduce(m->mesh.world, &bad, 1, DT_I32, DT_MAX);
  dt_print0("    every rank's memory equals its formulas: %s (%d rank%s)\n", bad ? "NO" : "yes",
            m->mesh.world->size, m->mesh.world->size == 1 ? "" : "s");
  gpt_replicas(m);
  if (m->weights.chunks > 1 || m->step.zb) /* the plan's bubble, exact, before the clock's */
    pp_slot_model(m->step.T, (int)m->mesh.n[PP], m->step.M, m->weights.chunks, m->step.zb);
  timeline_report(m->step.tl, m->mesh.axis[PP], m->step.M);
  dt_print0("(a stage's busy is its actions' wall time, the tp and cp calls inside them included; "
            "the summary's\n compute is the step less every blocked call)\n");
  gpt_mfu(m, r);
}
