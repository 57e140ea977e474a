/* test_moe.c: lesson 10's mixture of experts held to arithmetic written
 * apart from moe_core.h. The lesson's one-process yardstick
 * (reference_moe.c) runs the same bodies as the lesson (the router, the
 * gates, the balance loss, the tokens' trip: moe_core.h), so a bug in them
 * would pass 10's check; test_model's router and trip tests compare the
 * backend with those bodies. Here instead:
 *   - the router's forward (softmax, top k best first with a tie to the
 *     lower index, the renormalised gates, the balance loss
 *     aux_coef x E x sum_e f_e P_e and its d/dp) against plain loops in
 *     double, on random logits and on exact ones with ties;
 *   - central differences of a scalar loss through the library's whole MoE
 *     path (router, gates, capacity, dispatch, the experts' MLPs, combine,
 *     the task loss plus the balance loss) against its backward, for the
 *     router's weights, the experts' and the input, the choices and ReLU's
 *     sides held: a step that flips either is skipped (and counted). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"
#include "unit.h"

static float *uniform(size_t n, uint64_t stream, float lo, float hi) {
  float *h = malloc(n * 4);
  for (size_t i = 0; i < n; i++) h[i] = lo + (hi - lo) * (float)dt_rng_uniform(77, stream, i);
  return h;
}
static float *on_device(const float *host, size_t n) {
  float *d = dt_alloc_f32(n, DT_OTHER);
  dt_copy_from_host(d, host, n * 4);
  return d;
}
static void *to_host(const void *dev, size_t bytes) {
  void *h = malloc(bytes);
  dt_copy_to_host(h, dev, bytes);
  return h;
}

/* The router in double, from its definition: p = softmax(x Wr) per token;
 * k choices, each the most probable expert not yet taken, a tie to the
 * lower index; gates p_c / sum of the chosen p; f_e the fraction of the
 * R k choices that went to e, P_e the mean of p_e over the tokens,
 * aux = coef E sum_e f_e P_e, and d aux / d p_te = coef E f_e / R. */
static double plain_router(const float *x, const float *wr, int64_t R, int64_t D, int64_t E,
                           int64_t k, double coef, double *p, int32_t *choice, double *gate,
                           double *daux) {
  for (int64_t t = 0; t < R; t++) {
    double *row = p + t * E, mx = -INFINITY, sum = 0, chosen = 0;
    for (int64_t e = 0; e < E; e++) {
      row[e] = 0;
      for (int64_t d = 0; d < D; d++) row[e] += (double)x[t * D + d] * wr[d * E + e];
      mx = unit_max(mx, row[e]);
    }
    for (int64_t e = 0; e < E; e++) sum += row[e] = exp(row[e] - mx);
    for (int64_t e = 0; e < E; e++) row[e] /= sum;
    for (int64_t j = 0; j < k; j++) {
      int64_t best = -1;
      for (int64_t e = 0; e < E; e++) {
        int taken = 0;
        for (int64_t i = 0; i < j; i++) taken |= choice[t * k + i] == e;
        if (!taken && (best < 0 || row[e] > row[best])) best = e;
      }
      choice[t * k + j] = (int32_t)best;
      chosen += row[best];
    }
    for (int64_t j = 0; j < k; j++) gate[t * k + j] = row[choice[t * k + j]] / chosen;
  }
  double aux = 0;
  for (int64_t e = 0; e < E; e++) {
    double f = 0, P = 0;
    for (int64_t i = 0; i < R * k; i++) f += choice[i] == e;
    for (int64_t t = 0; t < R; t++) P += p[t * E + e];
    f /= (double)(R * k);
    aux += f * (P / (double)R);
    daux[e] = coef * (double)E * f / (double)R;
  }
  return coef * (double)E * aux;
}

/* The library's router (dt_router_forward, dt_router_gates, dt_moe_aux) on
 * x and wr against plain_router: the choices equal but where the plain
 * probabilities of the k-th and the next best lie within 1e-5 (a near tie
 * the float logits may decide apart; none with exact logits), the
 * probabilities, gates, balance loss and its d/dp within 2e-6. */
static void test_router_plain(const char *what, const float *x, const float *wr, int64_t R,
                              int64_t D, int64_t E, int64_t k) {
  dt_train_config c = DT_TRAIN_DEFAULTS;
  c.experts = E, c.topk = k, c.aux_coef = 0.3;
  double *p = malloc((size_t)(R * E) * 8), *gate = malloc((size_t)(R * k) * 8);
  double *daux = malloc((size_t)E * 8);
  int32_t *choice = malloc((size_t)(R * k) * 4);
  double aux = plain_router(x, wr, R, D, E, k, c.aux_coef, p, choice, gate, daux);
  float *dX = on_device(x, (size_t)(R * D)), *dW = on_device(wr, (size_t)(D * E));
  float *dP = dt_alloc_f32((size_t)(R * E), DT_OTHER),
        *dG = dt_alloc_f32((size_t)(R * k), DT_OTHER);
  float *dA = dt_alloc_f32((size_t)E, DT_OTHER);
  int32_t *dC = dt_alloc((size_t)(R * k) * 4, DT_OTHER);
  dt_router_forward(dX, dW, R, D, E, k, dP, dC);
  dt_router_gates(dP, dC, R, E, k, dG);
  float *gp = to_host(dP, (size_t)(R * E) * 4), *gg = to_host(dG, (size_t)(R * k) * 4);
  int32_t *gc = to_host(dC, (size_t)(R * k) * 4);
  /* f from the library's own choices, as reference_moe.c counts them */
  float *f = calloc((size_t)E, 4);
  for (int64_t i = 0; i < R * k; i++) f[gc[i]] += 1.0f / (float)(R * k);
  double got = dt_moe_aux(&c, dP, R, f, 1.0, dA);
  float *ga = to_host(dA, (size_t)E * 4);
  int64_t near = 0, wrong = 0, ties = 0;
  double ep = 0, eg = 0, ed = 0;
  for (int64_t t = 0; t < R; t++) {
    int same = !memcmp(gc + t * k, choice + t * k, (size_t)k * 4);
    double kth = p[t * E + choice[t * k + k - 1]], next = -1;
    for (int64_t e = 0; e < E; e++) {
      int in = 0;
      for (int64_t j = 0; j < k; j++) in |= choice[t * k + j] == e;
      if (!in) next = unit_max(next, p[t * E + e]);
      ep = unit_max(ep, fabs(gp[t * E + e] - p[t * E + e]));
    }
    ties += kth == next;
    int tie = kth - next < 1e-5;
    for (int64_t j = 0; j + 1 < k; j++) /* the order among the chosen, too */
      tie |= p[t * E + choice[t * k + j]] - p[t * E + choice[t * k + j + 1]] < 1e-5;
    if (!same && tie)
      near++;
    else if (!same)
      wrong++;
    else
      for (int64_t j = 0; j < k; j++) eg = unit_max(eg, fabs(gg[t * k + j] - gate[t * k + j]));
  }
  /* the balance loss against the plain one of the library's choices (the
   * same unless a near tie fell the other way: then none counted above) */
  double want = 0;
  for (int64_t e = 0; e < E; e++) {
    double P = 0;
    for (int64_t t = 0; t < R; t++) P += p[t * E + e];
    want += (double)f[e] * P / (double)R;
    double d = c.aux_coef * (double)E * f[e] / (double)R;
    ed = unit_max(ed, fabs(ga[e] - d) / (d > 0 ? d : 1)); /* an expert no token chose: d 0 */
  }
  want *= c.aux_coef * (double)E;
  double ea = fabs(got - want) / want;
  if (!near) ea = unit_max(ea, fabs(got - aux) / aux);
  int exact = !strcmp(what, "tied"); /* exact logits: a tie is a tie, none near */
  EXPECT(!wrong && near <= (exact ? 0 : R / 8),
         "router %s R %lld E %lld k %lld: the choices (top k, a tie to the lower index) as "
         "the plain loop's: %lld apart, %lld of them near ties (allowed: %lld)",
         what, (long long)R, (long long)E, (long long)k, (long long)(wrong + near), (long long)near,
         (long long)(exact ? 0 : R / 8));
  EXPECT(!exact || ties >= R / 4,
         "router %s k %lld: only %lld tokens with a tie at the k-th choice", what, (long long)k,
         (long long)ties);
  EXPECT(ep <= 2e-6 && eg <= 2e-6 && ea <= 2e-6 && ed <= 2e-6,
         "router %s R %lld E %lld k %lld against the plain loop in double: probabilities off "
         "by %.2e, gates %.2e, balance loss %.2e (relative), its d/dp %.2e (relative)",
         what, (long long)R, (long long)E, (long long)k, ep, eg, ea, ed);
  if (getenv("DT_TEST_VERBOSE"))
    printf("router %s: probs %.2e gates %.2e aux %.2e daux %.2e, near ties %lld, exact %lld\n",
           what, ep, eg, ea, ed, (long long)near, (long long)ties);
  void *host[] = {p, gate, daux, choice, gp, gg, gc, f, ga};
  for (size_t i = 0; i < sizeof host / sizeof *host; i++) free(host[i]);
  void *dev[] = {dX, dW, dP, dG, dA, dC};
  for (size_t i = 0; i < sizeof dev / sizeof *dev; i++) dt_free(dev[i]);
}

static void test_router_forward(void) {
  int64_t shapes[][4] = {{37, 12, 8, 2}, {29, 7, 5, 1}, {64, 16, 4, 2}}; /* R, D, E, k */
  for (int s = 0; s < 3; s++) {
    int64_t R = shapes[s][0], D = shapes[s][1], E = shapes[s][2], k = shapes[s][3];
    float *x = uniform((size_t)(R * D), 1 + (uint64_t)s, -1, 1);
    float *wr = uniform((size_t)(D * E), 11 + (uint64_t)s, -1, 1);
    test_router_plain("random", x, wr, R, D, E, k);
    free(x), free(wr);
  }
  /* Exact logits (small integers, sums exact in any order) and ties:
   * experts 1 and 3 alike, 4 and 5 alike, and a token all zeros (every
   * expert tied): the lower index must win, in either place of the k. */
  int64_t R = 24, D = 5, E = 6;
  float *x = malloc((size_t)(R * D) * 4), *wr = malloc((size_t)(D * E) * 4);
  for (int64_t i = 0; i < R * D; i++) x[i] = (float)((i * 7 + i / D) % 5) - 2;
  for (int64_t d = 0; d < D; d++) x[d] = 0;
  for (int64_t d = 0; d < D; d++)
    for (int64_t e = 0; e < E; e++) {
      int64_t col = e == 3 ? 1 : e == 5 ? 4 : e;
      wr[d * E + e] = (float)((d * 3 + col * 5) % 7 - 3) * 0.25f;
    }
  for (int64_t k = 1; k <= 2; k++) test_router_plain("tied", x, wr, R, D, E, k);
  free(x), free(wr);
}

/* ------------------------------------------- finite differences, the path */
typedef struct {
  int64_t R, D, H, E, k, C;
  dt_train_config c;
  float *x, *wr, *w1, *w2, *y; /* host: [R,D], [D,E], E x [D,H], E x [H,D], [R,D] */
} moe_case;

typedef struct {
  float *wr, *w1, *w2, *x; /* the gradients, host */
} moe_grads;

/* The loss through the library's path, task (mean squared error of x') +
 * balance; its choices and ReLU's sides (rows in send order) to *choice
 * and *side (malloc'ed); with g, the backward's gradients too. */
static double moe_loss(const moe_case *m, int32_t **choice, uint8_t **side, moe_grads *g) {
  int64_t R = m->R, D = m->D, H = m->H, E = m->E, k = m->k, n = R * k;
  float *dX = on_device(m->x, (size_t)(R * D)), *dW = on_device(m->wr, (size_t)(D * E));
  float *W1 = on_device(m->w1, (size_t)(E * D * H)), *W2 = on_device(m->w2, (size_t)(E * H * D));
  float *Y = on_device(m->y, (size_t)(R * D));
  float *P = dt_alloc_f32((size_t)(R * E), DT_OTHER), *G = dt_alloc_f32((size_t)n, DT_OTHER);
  int32_t *C = dt_alloc((size_t)n * 4, DT_OTHER), *dpos = dt_alloc((size_t)n * 4, DT_OTHER);
  dt_router_forward(dX, dW, R, D, E, k, P, C);
  dt_router_gates(P, C, R, E, k, G);
  int32_t *ch = to_host(C, (size_t)n * 4), *slot = malloc((size_t)n * 4);
  int32_t *pos = malloc((size_t)n * 4);
  int64_t *count = malloc((size_t)E * sizeof *count), *at = malloc((size_t)E * sizeof *at);
  float *f = calloc((size_t)E, 4);
  for (int64_t i = 0; i < n; i++) f[ch[i]] += 1.0f / (float)n;
  dt_moe_keep(ch, R, k, E, m->C, slot, count);
  int64_t rows = 0;
  for (int64_t e = 0; e < E; e++) at[e] = rows, rows += count[e];
  for (int64_t i = 0; i < n; i++) pos[i] = slot[i] < 0 ? -1 : (int32_t)(at[ch[i]] + slot[i]);
  dt_copy_from_host(dpos, pos, (size_t)n * 4);
  size_t rD = (size_t)(rows * D) + 1, rH = (size_t)(rows * H) + 1;
  float *send = dt_alloc_f32(rD, DT_OTHER), *ret = dt_alloc_f32(rD, DT_OTHER);
  float *a = dt_alloc_f32(rH, DT_OTHER), *h = dt_alloc_f32(rH, DT_OTHER);
  float *xn = dt_alloc_f32((size_t)(R * D), DT_OTHER),
        *dxn = dt_alloc_f32((size_t)(R * D), DT_OTHER);
  float *daux = dt_alloc_f32((size_t)E, DT_OTHER);
  dt_moe_dispatch_rows(dX, dpos, R, k, D, send);
  for (int64_t e = 0; e < E; e++)
    if (count[e])
      dt_block_forward(send + at[e] * D, W1 + e * D * H, W2 + e * H * D, a + at[e] * H,
                       h + at[e] * H, ret + at[e] * D, count[e], D, H, 0, NULL);
  dt_moe_combine(dX, G, ret, dpos, R, k, D, xn);
  double loss = dt_mse_forward_backward(xn, Y, dxn, (size_t)(R * D), 1.0 / (double)(R * D));
  loss += dt_moe_aux(&m->c, P, R, f, 1.0, daux);
  float *ha = to_host(a, rH * 4);
  *side = calloc((size_t)(n * H), 1); /* rows <= n */
  for (int64_t i = 0; i < rows * H; i++) (*side)[i] = ha[i] > 0;
  *choice = ch;
  if (g) {
    float *back = dt_alloc_f32(rD, DT_OTHER), *dsend = dt_alloc_f32(rD, DT_OTHER);
    float *dgate = dt_alloc_f32((size_t)n, DT_OTHER), *dh = dt_alloc_f32(rH, DT_OTHER);
    float *g1 = dt_alloc_f32((size_t)(E * D * H), DT_OTHER);
    float *g2 = dt_alloc_f32((size_t)(E * H * D), DT_OTHER);
    float *gw = dt_alloc_f32((size_t)(D * E), DT_OTHER),
          *gx = dt_alloc_f32((size_t)(R * D), DT_OTHER);
    float *dl = dt_alloc_f32((size_t)(R * E), DT_OTHER);
    dt_moe_gate_backward(dxn, G, ret, dpos, R, k, D, back, dgate);
    for (int64_t e = 0; e < E; e++)
      if (count[e])
        dt_block_backward(send + at[e] * D, a + at[e] * H, h + at[e] * H, W1 + e * D * H,
                          W2 + e * H * D, back + at[e] * D, dsend + at[e] * D, g1 + e * D * H,
                          g2 + e * H * D, dh, count[e], D, H, 0);
    dt_moe_combine_backward(dxn, dsend, dpos, NULL, R, k, D, gx);
    dt_router_backward(dX, dW, P, C, G, dgate, daux, R, D, E, k, dl, gw, gx);
    g->wr = to_host(gw, (size_t)(D * E) * 4);
    g->w1 = to_host(g1, (size_t)(E * D * H) * 4);
    g->w2 = to_host(g2, (size_t)(E * H * D) * 4);
    g->x = to_host(gx, (size_t)(R * D) * 4);
    void *dev[] = {back, dsend, dgate, dh, g1, g2, gw, gx, dl};
    for (size_t i = 0; i < sizeof dev / sizeof *dev; i++) dt_free(dev[i]);
  }
  void *host[] = {slot, pos, count, at, f, ha};
  for (size_t i = 0; i < sizeof host / sizeof *host; i++) free(host[i]);
  void *dev[] = {dX, dW, W1, W2, Y, P, G, C, dpos, send, ret, a, h, xn, dxn, daux};
  for (size_t i = 0; i < sizeof dev / sizeof *dev; i++) dt_free(dev[i]);
  return loss;
}

/* Central differences of moe_loss in each weight and input (step eps)
 * against the backward's gradient: the worst difference over the tensor's
 * largest gradient, either's. A step that changes a choice or a ReLU side measures
 * another function: skipped, and at most a quarter of a tensor may be. */
static void test_moe_gradients(int64_t R, int64_t D, int64_t H, int64_t E, int64_t k, int64_t C,
                               double coef) {
  moe_case m = {R, D, H, E, k, C, DT_TRAIN_DEFAULTS, NULL, NULL, NULL, NULL, NULL};
  m.c.experts = E, m.c.topk = k, m.c.aux_coef = coef;
  m.x = uniform((size_t)(R * D), 21, -1, 1);
  m.wr = uniform((size_t)(D * E), 22, -1, 1);
  m.w1 = uniform((size_t)(E * D * H), 23, -0.6f, 0.6f);
  m.w2 = uniform((size_t)(E * H * D), 24, -0.6f, 0.6f);
  m.y = uniform((size_t)(R * D), 25, -1.5f, 1.5f);
  moe_grads g;
  int32_t *c0;
  uint8_t *s0;
  moe_loss(&m, &c0, &s0, &g);
  float *tensors[4] = {m.wr, m.w1, m.w2, m.x}, *grads[4] = {g.wr, g.w1, g.w2, g.x};
  size_t sizes[4] = {(size_t)(D * E), (size_t)(E * D * H), (size_t)(E * H * D), (size_t)(R * D)};
  const char *names[4] = {"the router's weights", "the experts' W1", "the experts' W2",
                          "the input"};
  const float eps = 5e-3f;
  for (int t = 0; t < 4; t++) {
    double worst = 0, size = 1e-30;
    size_t skipped = 0;
    for (size_t i = 0; i < sizes[t]; i++) {
      float keep = tensors[t][i];
      double l[2];
      int held = 1;
      for (int s = 0; s < 2; s++) {
        int32_t *c;
        uint8_t *side;
        tensors[t][i] = s ? keep - eps : keep + eps;
        l[s] = moe_loss(&m, &c, &side, NULL);
        held &= !memcmp(c, c0, (size_t)(R * k) * 4) && !memcmp(side, s0, (size_t)(R * k * H));
        free(c), free(side);
      }
      tensors[t][i] = keep;
      if (!held) {
        skipped++;
        continue;
      }
      double fd = (l[0] - l[1]) / (2.0 * eps);
      worst = unit_max(worst, fabs(fd - grads[t][i]));
      size = unit_max(size, fmax(fabs(fd), fabs(grads[t][i])));
    }
    EXPECT(worst / size < 1e-3 && skipped <= sizes[t] / 4,
           "finite differences through the MoE (R %lld E %lld k %lld capacity %lld, aux_coef "
           "%g) of %s (step %g): off by %.2e of the largest (%.2e), %zu of %zu steps "
           "skipped (a choice or a ReLU side changed)",
           (long long)R, (long long)E, (long long)k, (long long)C, coef, names[t], eps,
           worst / size, size, skipped, sizes[t]);
    if (getenv("DT_TEST_VERBOSE"))
      printf("fd k %lld %s: %.2e of %.2e, skipped %zu of %zu\n", (long long)k, names[t],
             worst / size, size, skipped, sizes[t]);
  }
  void *host[] = {m.x, m.wr, m.w1, m.w2, m.y, g.wr, g.w1, g.w2, g.x, c0, s0};
  for (size_t i = 0; i < sizeof host / sizeof *host; i++) free(host[i]);
}

int main(int argc, char **argv) {
  dt_lesson lesson = {"test_moe",
                      "the mixture of experts against plain loops and finite "
                      "differences",
                      1};
  dt_init(&argc, &argv, &lesson, NULL);
  test_router_forward();
  /* 13 tokens, 4 experts of capacity 6: some choices dropped (k 2) */
  test_moe_gradients(13, 6, 5, 4, 2, 6, 0.3);
  test_moe_gradients(11, 5, 4, 3, 1, 4, 0.3);
  return unit_verdict();
}
