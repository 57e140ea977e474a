/* 10_ep: expert parallelism.
 *
 * Each block's MLP becomes a mixture of E experts: a router picks k of them
 * for every token and the token's output is the gate-weighted sum of theirs
 * (common/train/moe.c). The experts are split E/N per rank; the router is
 * replicated, as the whole model is in 05. The tokens travel to the experts,
 * not the experts to the tokens:
 *   route -> count tokens per rank -> exchange counts (all-to-all) ->
 *   exchange tokens (all-to-all-v) -> reorder rank-major to expert-major ->
 *   experts -> undo the reorder -> combine (all-to-all-v back) ->
 *   gate-weighted sum in the original token order.
 * Backward runs the same exchanges in reverse. An expert sees every rank's
 * tokens, each rank's loss a mean over its own, so its gradient is 1/N of
 * the sum; the router's gradient is all-reduced as 05's are. The run
 * (common/train/run.c) does the rest, and ends by training the same model in
 * one process and comparing, the routing replayed (CHECKING.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ep.h"

static int64_t expert_offset(const model *m, int64_t l, int64_t e) {
  return (l * m->El + e) * 2 * m->D * m->H;
}
/* Expert e lives on rank e / (E/N), the e % (E/N)-th of its experts. */
static int64_t owner(const model *m, int64_t e) { return e / m->El; }
static int64_t local(const model *m, int64_t e) { return e % m->El; }

/* The router on every rank; experts r E/N .. (r+1) E/N - 1 on rank r. */
static void layout(model *m, dt_run *r) {
  dt_train_config *c = &r->c;
  int64_t L = c->layers, D = c->dim, H = c->hidden, E = c->experts, N = m->world->size;
  if (E % N != 0)
    dt_fail("--experts %lld: %lld experts do not split over %lld ranks; choose a multiple of %lld",
            (long long)E, (long long)E, (long long)N, (long long)N);
  if (c->batch % N != 0)
    dt_fail("global batch %lld does not split over %lld ranks: choose --batch divisible by %lld",
            (long long)c->batch, (long long)N, (long long)N);
  m->L = L;
  m->D = D;
  m->H = H;
  m->R = r->c.batch / N;
  m->E = E;
  m->k = c->topk;
  m->N = N;
  m->El = E / N;
  m->C = dt_moe_capacity(c, m->R);
  m->M = N * m->C * m->El;
  size_t nr = (size_t)(L * D * E), ne = (size_t)(L * m->El * 2 * D * H);
  m->rw = dt_alloc_f32(nr, DT_PARAMS);
  m->rg = dt_alloc_f32(nr, DT_GRADS);
  m->ew = dt_alloc_f32(ne, DT_PARAMS);
  m->eg = dt_alloc_f32(ne, DT_GRADS);
  int router = dt_run_segment(r, m->rw, m->rg, nr), experts = dt_run_segment(r, m->ew, m->eg, ne);
  r->seg[router].copy = m->world->rank != 0; /* every rank's alike: rank 0's counts */
  for (int64_t l = 0; l < L; l++) {
    int64_t at = l * dt_params_per_layer(c);
    dt_run_place(r, router, l * D * E, at, 1, D * E, D * E);
    dt_run_place(r, experts, expert_offset(m, l, 0),
                 at + D * E + m->world->rank * m->El * 2 * D * H, 1, m->El * 2 * D * H, 0);
  }
  ep_buffers(m, c);
  m->record = dt_run_record_routing(r, m->R); /* for the check */
  m->kinks = r->kinks;
}

/* Route this rank's tokens and send each kept choice to its expert's rank. */
static void dispatch(model *m, int64_t l, int64_t step) {
  route *q = &m->rt[l];
  int64_t R = m->R, D = m->D, E = m->E, k = m->k, N = m->N;
  float *x = m->x + l * R * D;
  dt_router_forward(x, m->rw + l * D * E, R, D, E, k, q->probs, q->dchoice);
  dt_router_gates(q->probs, q->dchoice, R, E, k, q->gate);
  dt_copy_to_host(q->choice, q->dchoice, (size_t)(R * k) * 4); /* the counts' (cpu: itself) */
  m->dropped += dt_moe_keep(q->choice, R, k, E, m->C, q->pos, q->count);
  for (int64_t i = 0; i < R * k; i++) m->chosen[l * E + q->choice[i]] += 1;
  if (m->record) memcpy(m->record + (step * m->L + l) * R * k, q->choice, (size_t)(R * k) * 4);
  for (int64_t e = 0; e < E; e++) q->scount[owner(m, e) * m->El + local(m, e)] = q->count[e];
  /* exercise: the send counts and displacements of the dispatch */
  int64_t first[256], rows = 0; /* first[d E/N + j]: the first row for rank d's expert j */
  for (int64_t d = 0; d < N; d++) {
    q->sd[d] = (size_t)(rows * D);
    for (int64_t j = d * m->El; j < (d + 1) * m->El; j++) {
      first[j] = rows;
      rows += q->scount[j];
    }
    q->sc[d] = (size_t)(rows * D) - q->sd[d];
  }
  for (int64_t i = 0; i < R * k; i++)
    if (q->pos[i] >= 0)
      q->pos[i] += (int32_t)first[owner(m, q->choice[i]) * m->El + local(m, q->choice[i])];
  /* end of exercise */
  if (m->verify) verify_dispatch(m, q);
  dt_copy_from_host(q->dpos, q->pos, (size_t)(R * k) * 4);
  dt_moe_dispatch_rows(x, q->dpos, R, k, D, m->send);
  exchange_counts(m, q->scount, q->rcount);
  size_t at = 0;
  for (int64_t s = 0; s < N; s++) {
    int64_t n = 0;
    for (int64_t e = 0; e < m->El; e++) n += q->rcount[s * m->El + e];
    q->rd[s] = at;
    q->rc[s] = (size_t)(n * D);
    at += q->rc[s];
  }
  tally(m, q);
  for (int64_t e = 0; e < m->El; e++) {
    q->rows[e] = 0;
    for (int64_t s = 0; s < N; s++) q->rows[e] += q->rcount[s * m->El + e];
  }
  exchange(m, DISPATCH, m->send, q->sc, q->sd, m->recv, q->rc, q->rd);
  reorder(m, q, m->recv, q->xin, 1);
}

/* This rank's experts on the rows they received, and the results sent home,
 * where x_{l+1} = x_l + the gate-weighted sum of each token's kept choices. */
static void experts_and_combine(model *m, int64_t l) {
  route *q = &m->rt[l];
  int64_t R = m->R, D = m->D, H = m->H, k = m->k, at = 0;
  for (int64_t e = 0; e < m->El; e++) {
    const float *w1 = m->ew + expert_offset(m, l, e);
    dt_rows where = {m->kinks, NULL, l, (m->world->rank * m->El + e) * H}; /* a queue's rows */
    if (q->rows[e])
      dt_block_forward(q->xin + at * D, w1, w1 + D * H, q->a + at * H, q->h + at * H,
                       m->xe + at * D, q->rows[e], D, H, 0, &where);
    at += q->rows[e];
  }
  reorder(m, q, m->recv, m->xe, 0);
  exchange(m, COMBINE, m->recv, q->rc, q->rd, q->ret, q->sc, q->sd);
  float *x = m->x + l * R * D; /* a dropped choice leaves the residual path alone */
  dt_moe_combine(x, q->gate, q->ret, q->dpos, R, k, D, x + R * D);
}

/* From dy = dL/dx_{l+1} (m->dx) to dL/dx_l (m->dnext, then swapped in). */
static void backward(model *m, int64_t l) {
  route *q = &m->rt[l];
  int64_t R = m->R, D = m->D, H = m->H, E = m->E, k = m->k, at = 0;
  const float *dy = m->dx;
  /* the gate scales what goes back, and has a gradient */
  dt_moe_gate_backward(dy, q->gate, q->ret, q->dpos, R, k, D, m->send, q->dgate);
  exchange(m, DISPATCH_BACK, m->send, q->sc, q->sd, m->recv, q->rc, q->rd);
  float *dout = m->xe, *dxin = m->xe + m->M * D;
  reorder(m, q, m->recv, dout, 1);
  for (int64_t e = 0; e < m->El; e++) {
    const float *w1 = m->ew + expert_offset(m, l, e);
    float *g1 = m->eg + expert_offset(m, l, e);
    if (q->rows[e])
      dt_block_backward(q->xin + at * D, q->a + at * H, q->h + at * H, w1, w1 + D * H,
                        dout + at * D, dxin + at * D, g1, g1 + D * H, m->dh, q->rows[e], D, H, 0);
    at += q->rows[e];
  }
  reorder(m, q, m->recv, dxin, 0);
  exchange(m, COMBINE_BACK, m->recv, q->rc, q->rd, m->send, q->sc, q->sd);
  dt_moe_combine_backward(dy, m->send, q->dpos, NULL, R, k, D, m->dnext); /* + the residual */
  dt_router_backward(m->x + l * R * D, m->rw + l * D * E, q->probs, q->dchoice, q->gate, q->dgate,
                     m->daux + l * E, R, D, E, k, m->dlogits, m->rg + l * D * E, m->dnext);
  float *t = m->dx;
  m->dx = m->dnext;
  m->dnext = t;
}

/* One step: the loss a mean over this rank's tokens, plus the balance term,
 * whose f_e counts every rank's choices. */
static double train_step(model *m, dt_run *r, int64_t step) {
  int64_t L = m->L, R = m->R, D = m->D, E = m->E;
  dt_step_samples(&r->c, (int)m->N, m->world->rank, step, m->samples);
  dt_make_batch(&r->c, m->samples, R, m->x, m->y);
  dt_zero(m->rg, (size_t)(L * D * E) * 4);
  dt_zero(m->eg, (size_t)(L * m->El * 2 * D * m->H) * 4);
  memset(m->chosen, 0, (size_t)(L * E) * 4);
  for (int64_t l = 0; l < L; l++) {
    dispatch(m, l, step);
    experts_and_combine(m, l);
  }
  double loss =
      dt_run_loss(r, m->x + L * R * D, m->y, m->dx, (size_t)(R * D), 1.0 / (double)(R * D));
  dt_copy_from_host(m->dchosen, m->chosen, (size_t)(L * E) * 4); /* a GPU's collective: */
  dt_all_reduce(m->world, m->dchosen, m->dchosen, (size_t)(L * E), DT_F32, DT_SUM);
  dt_copy_to_host(m->chosen, m->dchosen, (size_t)(L * E) * 4); /* on device (cpu: nothing) */
  r->part = 0; /* the balance loss, which the step line prints apart from the task's */
  for (int64_t l = 0; l < L; l++) {
    for (int64_t e = 0; e < E; e++) m->chosen[l * E + e] /= (float)(r->c.batch * m->k); /* f_e */
    r->part +=
        dt_moe_aux(&r->c, m->rt[l].probs, R, m->chosen + l * E, r->scaler.scale, m->daux + l * E);
  }
  for (int64_t l = L - 1; l >= 0; l--) backward(m, l);
  dt_all_reduce(m->world, m->rg, m->rg, (size_t)(L * D * E), DT_F32, DT_AVG);
  if (m->N > 1) dt_scale(m->eg, (size_t)(L * m->El * 2 * D * m->H), 1.0f / (float)m->N);
  return loss + r->part;
}

int main(int argc, char **argv) {
  dt_run run = {.c = DT_TRAIN_DEFAULTS};
  run.c.model = DT_MOE;
  run.c.experts = 8;
  run.c.topk = 2;
  run.c.capacity_factor = 1.25;
  run.c.aux_coef = 0.01;
  run.c.optimizer = "adamw"; /* SGD at 05's lr barely moves experts that see k/E of the tokens */
  run.c.adamw_lr = 0.0005; /* 05's 0.003 diverges in 3000 steps here (README: training for long) */
  const char *a2a = "library";
  model m = {0};
  dt_option options[] = {
      DT_TRAIN_OPTIONS(&run.c), DT_MOE_OPTIONS(&run.c),
      DT_FLAG("--verify-dispatch", &m.verify,
              "check every layer's send counts, displacements and rows before they travel"),
      DT_STRING("--all-to-all", &a2a, "library|hand",
                "the library's all-to-all, or sendrecv rounds"),
      DT_END};
  dt_lesson lesson = {"10_ep",
                      "expert parallel training: tokens travel to the experts by all-to-all", 1};
  dt_comm *world = dt_run_init(&run, &argc, &argv, &lesson, options);
  m.world = world;
  m.hand = strcmp(a2a, "hand") == 0;
  layout(&m, &run);
  dt_run_begin(&run);
  dt_print0("expert parallel: %lld experts of %lld per rank, each token to %lld; capacity %lld "
            "tokens per expert of a rank's %lld (ceil(cf k R / E), cf %g); %s all-to-all\n",
            (long long)m.El, (long long)m.E, (long long)m.k, (long long)m.C, (long long)m.R,
            run.c.capacity_factor, m.hand ? "hand (N-1 sendrecv rounds)" : "library");
  for (int64_t step = run.c.start_step; step < run.c.steps; step++) {
    dt_step_begin(&run, step);
    double loss = train_step(&m, &run, step);
    dt_step_update(&run);
    dt_step_end(&run, step, loss);
  }
  dt_run_summary(&run);
  report(&m, &run);
  return dt_run_finish(&run);
}
