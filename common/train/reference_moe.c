/* reference_moe.c: lesson 10's yardstick, the mixture of experts trained in
 * one process with every expert local: no exchange, no reorder, a plain loop
 * over experts. The batch is the ranks' shares one after another, each share
 * a capacity group as in the run, so both drop the same tokens.
 *
 * Routing is a discrete choice: the run's choices are replayed (routing
 * given), and each is judged against this process's own logits: the same
 * experts, a near tie (the chosen ones within DT_ROUTING_TIE, with AdamW
 * or bf16 DT_ROUTING_TIE_DRIFT, of the k-th
 * best logit), or a disagreement, which fails the check (CHECKING.md). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"

/* The run chose rec where this process chose own (both [k]): 0 the same
 * experts, else the margin by which rec's worst falls below own's k-th. */
static double judge(const float *p, const int32_t *own, const int32_t *rec, int64_t k) {
  int same = 1;
  for (int64_t j = 0; j < k; j++) {
    int found = 0;
    for (int64_t i = 0; i < k; i++) found |= rec[j] == own[i];
    same &= found;
  }
  if (same) return 0;
  double margin = 0; /* logit differences are log ratios of probabilities */
  for (int64_t j = 0; j < k; j++) margin = fmax(margin, log(p[own[k - 1]]) - log(p[rec[j]]));
  return fmax(margin, 1e-300);
}

static void replay(dt_routing *rt, int64_t step, int64_t l, const dt_train_config *c,
                   const float *probs, int32_t *choice) {
  int64_t k = c->topk, E = c->experts, R = rt->R;
  for (int64_t g = 0; g < rt->groups; g++)
    for (int64_t t = 0; t < R; t++) {
      const int32_t *rec = rt->choice + (((g * c->steps + step) * c->layers + l) * R + t) * k;
      int32_t *own = choice + (g * R + t) * k;
      double margin = judge(probs + (g * R + t) * E, own, rec, k);
      rt->tokens++;
      if (margin > rt->tie) {
        rt->closest = rt->disagree++ ? fmin(rt->closest, margin) : margin;
      } else if (margin > 0) {
        rt->ties++;
        rt->widest = fmax(rt->widest, margin);
      }
      memcpy(own, rec, (size_t)k * sizeof *own);
    }
}

typedef struct { /* one layer's routing and its experts' rows, kept for backward */
  float *probs, *gate, *dgate;
  int32_t *choice, *row;    /* row [B,k]: the choice's row among its expert's, or -1: dropped */
  int64_t *n;               /* rows per expert */
  float *xin, *a, *h, *out; /* per expert e, rows from e * cap */
} layer;

void dt_reference_train_moe(const dt_train_config *c, dt_reference_run *out) {
  int64_t L = c->layers, D = c->dim, H = c->hidden, B = c->batch, E = c->experts, k = c->topk;
  dt_routing *rt = out->replay.routing;
  dt_kinks *kinks = out->replay.kinks; /* the run's ReLU decisions near 0 */
  int64_t G = rt ? rt->groups : dt_size(), R = B / G, C = dt_moe_capacity(c, R), cap = G * C;
  int64_t PL = dt_params_per_layer(c), n = dt_model_size(c);
  if (rt) /* SGD in fp32 stays within rounding; AdamW and bf16 drift after a flip (CHECKING.md) */
    rt->tie = dt_precision_type(c) == DT_F32 && c->optimizer[0] != 'a' ? DT_ROUTING_TIE
                                                                       : DT_ROUTING_TIE_DRIFT;
  int adamw = c->optimizer[0] == 'a';
  dt_dtype half = dt_precision_type(c); /* bf16: the rows the run exchanges, rounded alike */
  float *w = dt_alloc_f32((size_t)n, DT_PARAMS), *g = dt_alloc_f32((size_t)n, DT_GRADS);
  float *m = adamw ? dt_alloc_f32((size_t)n, DT_OPTIM) : NULL;
  float *v = adamw ? dt_alloc_f32((size_t)n, DT_OPTIM) : NULL;
  float *x = dt_host_alloc((size_t)((L + 1) * B * D), 4), *y = dt_host_alloc((size_t)(B * D), 4);
  float *dx = dt_host_alloc((size_t)(B * D), 4), *dnext = dt_host_alloc((size_t)(B * D), 4);
  float *dout = dt_host_alloc((size_t)(cap * D), 4), *dxin = dt_host_alloc((size_t)(cap * D), 4);
  float *dh = dt_host_alloc((size_t)(cap * H), 4), *dlogits = dt_host_alloc((size_t)(B * E), 4);
  float *f = dt_host_alloc((size_t)E, 4), *daux = dt_host_alloc((size_t)E, 4);
  int64_t *samples = dt_host_alloc((size_t)B, sizeof *samples),
          *count = dt_host_alloc((size_t)E, 8);
  layer *ly = dt_host_alloc((size_t)L, sizeof *ly);
  for (layer *y_ = ly; y_ < ly + L; y_++) {
    y_->probs = dt_host_alloc((size_t)(B * E), 4);
    y_->gate = dt_host_alloc((size_t)(B * k), 4);
    y_->dgate = dt_host_alloc((size_t)(B * k), 4);
    y_->choice = dt_host_alloc((size_t)(B * k), 4);
    y_->row = dt_host_alloc((size_t)(B * k), 4);
    y_->n = dt_host_alloc((size_t)E, 8);
    y_->xin = dt_host_alloc((size_t)(E * cap * D), 4);
    y_->out = dt_host_alloc((size_t)(E * cap * D), 4);
    y_->a = dt_host_alloc((size_t)(E * cap * H), 4);
    y_->h = dt_host_alloc((size_t)(E * cap * H), 4);
  }
  dt_loss_scaler scaler;
  double w0_max = dt_reference_begin(c, w, n, &scaler, out);
  for (int64_t step = 0; step < c->steps; step++) {
    for (int64_t r = 0; r < G; r++) dt_step_samples(c, (int)G, (int)r, step, samples + r * R);
    dt_make_batch(c, samples, B, x, y);
    if (kinks) kinks->step = step;
    for (int64_t l = 0; l < L; l++) {
      layer *q = ly + l;
      const float *wl = w + l * PL, *xl = x + l * B * D;
      float *xn = x + (l + 1) * B * D;
      dt_router_forward(xl, wl, B, D, E, k, q->probs, q->choice);
      if (rt && step >= c->start_step) /* a resumed run recorded its own steps only */
        replay(rt, step, l, c, q->probs, q->choice);
      dt_router_gates(q->probs, q->choice, B, E, k, q->gate);
      memset(q->n, 0, (size_t)E * 8);
      for (int64_t r = 0; r < G; r++) { /* group r's kept choices follow groups 0..r-1's */
        dt_moe_keep(q->choice + r * R * k, R, k, E, C, q->row + r * R * k, count);
        for (int64_t i = r * R * k; i < (r + 1) * R * k; i++)
          if (q->row[i] >= 0) q->row[i] += (int32_t)q->n[q->choice[i]];
        for (int64_t e = 0; e < E; e++) q->n[e] += count[e];
      }
      memcpy(xn, xl, (size_t)(B * D) * 4);
      for (int64_t i = 0; i < B * k; i++)
        if (q->row[i] >= 0)
          memcpy(q->xin + (q->choice[i] * cap + q->row[i]) * D, xl + i / k * D, (size_t)D * 4);
      for (int64_t e = 0; e < E; e++) {
        const float *w1 = wl + D * E + 2 * e * D * H;
        dt_block_forward(q->xin + e * cap * D, w1, w1 + D * H, q->a + e * cap * H,
                         q->h + e * cap * H, q->out + e * cap * D, q->n[e], D, H, 0,
                         &(dt_rows){kinks, NULL, l, e * H});
        if (half != DT_F32) dt_round_half(q->out + e * cap * D, (size_t)(q->n[e] * D), half);
      }
      for (int64_t i = 0; i < B * k; i++)
        if (q->row[i] >= 0) {
          const float *o = q->out + (q->choice[i] * cap + q->row[i]) * D;
          for (int64_t d = 0; d < D; d++) xn[i / k * D + d] += q->gate[i] * o[d];
        }
    }
    double loss =
        dt_mse_forward_backward(x + L * B * D, y, dx, (size_t)(B * D), 1.0 / (double)(B * D));
    double aux = 0;
    if (scaler.scale != 1.0) dt_scale(dx, (size_t)(B * D), (float)scaler.scale); /* fp16 */
    dt_zero(g, (size_t)n * 4);
    for (int64_t l = L - 1; l >= 0; l--) {
      layer *q = ly + l;
      const float *wl = w + l * PL, *xl = x + l * B * D;
      float *gl = g + l * PL;
      memset(count, 0, (size_t)E * 8); /* f: every choice, kept or not, over the whole batch */
      for (int64_t i = 0; i < B * k; i++) count[q->choice[i]]++;
      for (int64_t e = 0; e < E; e++) f[e] = (float)count[e] / (float)(B * k);
      aux += dt_moe_aux(c, q->probs, B, f, scaler.scale, daux);
      memcpy(dnext, dx, (size_t)(B * D) * 4); /* the residual path */
      for (int64_t e = 0; e < E; e++) {
        memset(dout, 0, (size_t)(q->n[e] * D) * 4);
        for (int64_t i = 0; i < B * k; i++)
          if (q->row[i] >= 0 && q->choice[i] == e) {
            const float *dy = dx + i / k * D, *o = q->out + (e * cap + q->row[i]) * D;
            double dg = 0;
            for (int64_t d = 0; d < D; d++) {
              dout[q->row[i] * D + d] = q->gate[i] * dy[d];
              dg += (double)dy[d] * o[d];
            }
            q->dgate[i] = (float)dg;
          }
        const float *w1 = wl + D * E + 2 * e * D * H;
        float *g1 = gl + D * E + 2 * e * D * H;
        dt_block_backward(q->xin + e * cap * D, q->a + e * cap * H, q->h + e * cap * H, w1,
                          w1 + D * H, dout, dxin, g1, g1 + D * H, dh, q->n[e], D, H, 0);
        if (half != DT_F32) dt_round_half(dxin, (size_t)(q->n[e] * D), half);
        for (int64_t i = 0; i < B * k; i++)
          if (q->row[i] >= 0 && q->choice[i] == e)
            for (int64_t d = 0; d < D; d++) dnext[i / k * D + d] += dxin[q->row[i] * D + d];
      }
      for (int64_t i = 0; i < B * k; i++)
        if (q->row[i] < 0) q->dgate[i] = 0; /* a dropped choice added nothing */
      dt_router_backward(xl, wl, q->probs, q->choice, q->gate, q->dgate, daux, B, D, E, k, dlogits,
                         gl, dnext);
      float *t = dx;
      dx = dnext;
      dnext = t;
    }
    out->losses[step] = loss + aux;
    if (out->parts) out->parts[step] = aux;
    /* in bf16 the run's gradients never travel in 16 bits (the router's all-reduce
     * is fp32, the experts' stay home): its token rows do, rounded below */
    dt_reference_update(c, out, &scaler, step, w, g, m, v, (size_t)n, w0_max, 0);
  }
  memcpy(out->weights, w, (size_t)n * 4);
  for (layer *y_ = ly; y_ < ly + L; y_++) {
    void *bufs[] = {y_->probs, y_->gate, y_->dgate, y_->choice, y_->row,
                    y_->n,     y_->xin,  y_->out,   y_->a,      y_->h};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) free(bufs[i]);
  }
  void *host[] = {x, y, dx, dnext, dout, dxin, dh, dlogits, f, daux, samples, count, ly};
  for (size_t i = 0; i < sizeof host / sizeof *host; i++) free(host[i]);
  float *dev[] = {w, g, m, v};
  for (size_t i = 0; i < 4; i++) dt_free(dev[i]);
}
