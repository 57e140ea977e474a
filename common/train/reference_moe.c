/* reference_moe.c: lesson 10's yardstick, the mixture of experts computed in
 * one process with every expert local: no exchange, no reorder, a plain loop
 * over experts. The batch is the ranks' shares one after another, each share
 * a capacity group as in the run, so both drop the same tokens.
 *
 * Routing is a discrete choice: the run's choices are replayed (routing
 * given), and each is judged against this process's own logits: the same
 * experts, a near tie (the chosen ones within DT_ROUTING_TIE of the k-th
 * best logit, DT_ROUTING_TIE16 in 16 bits), or a disagreement, which fails
 * the check (CHECKING.md). */
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

static void replay(dt_routing *rt, int64_t l, const dt_train_config *c, const float *probs,
                   int32_t *choice) {
  int64_t k = c->topk, E = c->experts, R = rt->R;
  for (int64_t g = 0; g < rt->groups; g++)
    for (int64_t t = 0; t < R; t++) {
      const int32_t *rec = rt->choice + ((g * c->layers + l) * R + t) * k;
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

/* One layer's routing and its experts' rows, kept for backward. probs,
 * gate, dgate, dchoice, dpos and the rows on the backend; choice, pos (and
 * hprobs, for the replay) on the host, where the queues are made: on the
 * cpu backend the same arrays. */
typedef struct {
  float *probs, *hprobs, *gate, *dgate;
  int32_t *choice, *dchoice, *row; /* row [B,k]: the choice's row among its expert's, or -1 */
  int32_t *pos, *dpos;             /* [B,k]: its row in xin, e cap + row, or -1: dropped */
  int64_t *n;                      /* rows per expert */
  float *xin, *a, *h, *out;        /* per expert e, rows from e * cap */
} layer;

/* The sizes of a run: B rows in G groups of R, each expert's capacity C a
 * group, cap = G C rows an expert. */
typedef struct {
  int64_t L, D, H, B, E, k, G, R, C, cap;
} shape;

static void *dev(int64_t n) { return dt_alloc((size_t)n * 4, DT_OTHER); }
static void *mirror(void *d, int64_t n) {
  return dt_host_sees_device() ? d : dt_host_alloc((size_t)n, 4);
}

static layer *layers_new(const shape *z) {
  int64_t B = z->B, E = z->E, k = z->k, ec = z->E * z->cap;
  layer *ly = dt_host_alloc((size_t)z->L, sizeof *ly);
  for (layer *q = ly; q < ly + z->L; q++) {
    *q = (layer){.probs = dev(B * E),
                 .gate = dev(B * k),
                 .dgate = dev(B * k),
                 .dchoice = dev(B * k),
                 .dpos = dev(B * k),
                 .xin = dev(ec * z->D),
                 .out = dev(ec * z->D),
                 .a = dev(ec * z->H),
                 .h = dev(ec * z->H)};
    q->hprobs = mirror(q->probs, B * E);
    q->choice = mirror(q->dchoice, B * k);
    q->pos = mirror(q->dpos, B * k);
    q->row = dt_host_alloc((size_t)(B * k), 4);
    q->n = dt_host_alloc((size_t)E, 8);
  }
  return ly;
}

static void layers_free(layer *ly, int64_t L) {
  int gpu = !dt_host_sees_device();
  for (layer *q = ly; q < ly + L; q++) {
    void *d[] = {q->probs, q->gate, q->dgate, q->dchoice, q->dpos, q->xin, q->out, q->a, q->h};
    for (size_t i = 0; i < sizeof d / sizeof *d; i++) dt_free(d[i]);
    void *h[] = {q->row, q->n, gpu ? q->hprobs : NULL, gpu ? q->choice : NULL, gpu ? q->pos : NULL};
    for (size_t i = 0; i < sizeof h / sizeof *h; i++) free(h[i]);
  }
  free(ly);
}

/* The router of layer l, the run's choices replayed, and the queues: group
 * r's kept choices follow groups 0..r-1's in each expert's rows. */
static void route_layer(const dt_train_config *c, const shape *z, layer *q, dt_routing *rt,
                        int64_t l, const float *xl, const float *wl) {
  int64_t B = z->B, E = z->E, k = z->k, R = z->R, count[256];
  dt_router_forward(xl, wl, B, z->D, E, k, q->probs, q->dchoice);
  if (rt) {
    dt_copy_to_host(q->hprobs, q->probs, (size_t)(B * E) * 4);
    dt_copy_to_host(q->choice, q->dchoice, (size_t)(B * k) * 4);
    replay(rt, l, c, q->hprobs, q->choice);
    dt_copy_from_host(q->dchoice, q->choice, (size_t)(B * k) * 4);
  } else
    dt_copy_to_host(q->choice, q->dchoice, (size_t)(B * k) * 4);
  dt_router_gates(q->probs, q->dchoice, B, E, k, q->gate);
  memset(q->n, 0, (size_t)E * 8);
  for (int64_t r = 0; r < z->G; r++) {
    dt_moe_keep(q->choice + r * R * k, R, k, E, z->C, q->row + r * R * k, count);
    for (int64_t i = r * R * k; i < (r + 1) * R * k; i++)
      if (q->row[i] >= 0) q->row[i] += (int32_t)q->n[q->choice[i]];
    for (int64_t e = 0; e < E; e++) q->n[e] += count[e];
  }
  for (int64_t i = 0; i < B * k; i++)
    q->pos[i] = q->row[i] < 0 ? -1 : (int32_t)(q->choice[i] * z->cap + q->row[i]);
  dt_copy_from_host(q->dpos, q->pos, (size_t)(B * k) * 4);
}

/* x' = x + the gate-weighted sum of each token's kept experts' outputs. */
static void forward_layer(const shape *z, layer *q, dt_kinks *kinks, int64_t l, const float *xl,
                          const float *wl, float *xn, dt_dtype half) {
  int64_t D = z->D, H = z->H, cap = z->cap;
  dt_moe_dispatch_rows(xl, q->dpos, z->B, z->k, D, q->xin);
  for (int64_t e = 0; e < z->E; e++) {
    const float *w1 = wl + D * z->E + 2 * e * D * H;
    dt_block_forward(q->xin + e * cap * D, w1, w1 + D * H, q->a + e * cap * H, q->h + e * cap * H,
                     q->out + e * cap * D, q->n[e], D, H, 0, &(dt_rows){kinks, NULL, l, e * H});
    if (half != DT_F32) dt_round_half(q->out + e * cap * D, (size_t)(q->n[e] * D), half);
  }
  dt_moe_combine(xl, q->gate, q->out, q->dpos, z->B, z->k, D, xn);
}

/* Back from dx to dnext through the experts, the gates and the router
 * (the router's gradient and the experts' added to gl); dout, dxin [E cap,
 * D] and dh [cap, H] scratch. */
static void backward_layer(const shape *z, layer *q, const float *xl, const float *wl, float *gl,
                           const float *daux, const float *dx, float *dnext, float *dout,
                           float *dxin, float *dh, float *dlogits, dt_dtype half) {
  int64_t D = z->D, H = z->H, E = z->E, cap = z->cap;
  dt_moe_gate_backward(dx, q->gate, q->out, q->dpos, z->B, z->k, D, dout, q->dgate);
  for (int64_t e = 0; e < E; e++) {
    const float *w1 = wl + D * E + 2 * e * D * H;
    float *g1 = gl + D * E + 2 * e * D * H, *de = dxin + e * cap * D;
    dt_block_backward(q->xin + e * cap * D, q->a + e * cap * H, q->h + e * cap * H, w1, w1 + D * H,
                      dout + e * cap * D, de, g1, g1 + D * H, dh, q->n[e], D, H, 0);
    if (half != DT_F32) dt_round_half(de, (size_t)(q->n[e] * D), half);
  }
  /* the residual path, then each token's experts in their order */
  dt_moe_combine_backward(dx, dxin, q->dpos, q->dchoice, z->B, z->k, D, dnext);
  dt_router_backward(xl, wl, q->probs, q->dchoice, q->gate, q->dgate, daux, z->B, D, E, z->k,
                     dlogits, gl, dnext);
}

/* The balance loss of layer l's routing: f_e from every choice, kept or
 * not, over the whole batch; daux [E] on the backend. */
static double balance(const dt_train_config *c, const shape *z, const layer *q, double scale,
                      float *daux) {
  int64_t count[256] = {0}, E = z->E;
  float f[256];
  for (int64_t i = 0; i < z->B * z->k; i++) count[q->choice[i]]++;
  for (int64_t e = 0; e < E; e++) f[e] = (float)count[e] / (float)(z->B * z->k);
  return dt_moe_aux(c, q->probs, z->B, f, scale, daux);
}

typedef struct {
  shape z;
  layer *ly;
  float *x, *y, *dx, *dnext, *dout, *dxin, *dh, *dlogits, *daux;
  int64_t *samples;
} moe;

static double moe_gradient(dt_one *o, int64_t step, const float *w, float *g, double scale,
                           double *part) {
  const dt_train_config *c = o->c;
  moe *b = o->own;
  const shape *z = &b->z;
  dt_routing *rt = o->replay ? o->replay->routing : NULL; /* the run's choices of this step */
  dt_kinks *kinks = o->replay ? o->replay->kinks : NULL;  /* its ReLU decisions near 0 */
  int64_t L = z->L, D = z->D, B = z->B, PL = dt_params_per_layer(c);
  dt_dtype half = dt_precision_type(c); /* bf16: the rows the run exchanges, rounded alike */
  float *x = b->x, *dx = b->dx, *dnext = b->dnext;
  for (int64_t r = 0; r < z->G; r++)
    dt_step_samples(c, (int)z->G, (int)r, step, b->samples + r * z->R);
  dt_make_batch(c, b->samples, B, x, b->y);
  if (kinks) kinks->step = step;
  for (int64_t l = 0; l < L; l++) {
    route_layer(c, z, b->ly + l, rt, l, x + l * B * D, w + l * PL);
    forward_layer(z, b->ly + l, kinks, l, x + l * B * D, w + l * PL, x + (l + 1) * B * D, half);
  }
  double loss =
      dt_mse_forward_backward(x + L * B * D, b->y, dx, (size_t)(B * D), 1.0 / (double)(B * D));
  double aux = 0;
  if (scale != 1.0) dt_scale(dx, (size_t)(B * D), (float)scale); /* fp16 */
  dt_zero(g, (size_t)dt_model_size(c) * 4);
  for (int64_t l = L - 1; l >= 0; l--) {
    aux += balance(c, z, b->ly + l, scale, b->daux);
    backward_layer(z, b->ly + l, x + l * B * D, w + l * PL, g + l * PL, b->daux, dx, dnext, b->dout,
                   b->dxin, b->dh, b->dlogits, half);
    float *t = dx;
    dx = dnext;
    dnext = t;
  }
  *part = aux;
  return loss + aux;
}

static void moe_release(dt_one *o) {
  moe *b = o->own;
  layers_free(b->ly, b->z.L);
  float *bufs[] = {b->x, b->y, b->dx, b->dnext, b->dout, b->dxin, b->dh, b->dlogits, b->daux};
  for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) dt_free(bufs[i]);
  free(b->samples);
  free(b);
}

void dt_one_moe(dt_one *o) {
  const dt_train_config *c = o->c;
  dt_routing *rt = o->replay ? o->replay->routing : NULL;
  moe *b = dt_host_alloc(1, sizeof *b);
  shape *z = &b->z;
  *z = (shape){.L = c->layers,
               .D = c->dim,
               .H = c->hidden,
               .B = c->batch,
               .E = c->experts,
               .k = c->topk,
               .G = rt ? rt->groups : dt_size()};
  z->R = z->B / z->G;
  z->C = dt_moe_capacity(c, z->R);
  z->cap = z->G * z->C;
  int64_t L = z->L, D = z->D, B = z->B, E = z->E, ec = E * z->cap;
  /* in fp32 the two sides' logits differ by rounding alone; 16 bits round the rows the run sends */
  if (rt) rt->tie = dt_precision_type(c) == DT_F32 ? DT_ROUTING_TIE : DT_ROUTING_TIE16;
  b->x = dev((L + 1) * B * D);
  b->y = dev(B * D);
  b->dx = dev(B * D);
  b->dnext = dev(B * D);
  b->dout = dev(ec * D);
  b->dxin = dev(ec * D);
  b->dh = dev(z->cap * z->H);
  b->dlogits = dev(B * E);
  b->daux = dev(E);
  b->samples = dt_host_alloc((size_t)B, sizeof(int64_t));
  b->ly = layers_new(z);
  o->own = b;
  o->round16 = 0; /* in bf16 its gradients never travel in 16 bits (the router's all-reduce is
                   * fp32, the experts' stay home): its token rows do, rounded in the layers */
  o->gradient = moe_gradient;
  o->release = moe_release;
}
