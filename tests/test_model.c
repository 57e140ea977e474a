/* test_model.c: unit tests of the model layer: kernels against naive loops
 * (odd shapes, every transpose, accumulate), a finite-difference gradient
 * check of the block and the loss, AdamW against its formula, both
 * optimizers against optim_core.h's bodies bit for bit, a safetensors
 * round trip, the reference trainer's loss falling, and ReLU's decisions near
 * 0 recorded, keyed, replayed and judged (kinks.c); the router (moe.c) beside
 * moe_core.h's bodies. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moe_core.h"
#include "optim_core.h"
#include "train_internal.h"
#include "unit.h"

static float *on_device(const float *host, size_t n) {
  float *d = dt_alloc_f32(n, DT_OTHER);
  dt_copy_from_host(d, host, n * 4);
  return d;
}
static float *random_host(size_t n, uint64_t stream) {
  float *h = malloc(n * 4);
  for (size_t i = 0; i < n; i++) h[i] = 2 * dt_rng_uniform(99, stream, i) - 1;
  return h;
}

static void test_matmul(int ta, int tb, int64_t M, int64_t N, int64_t K, int acc) {
  float *A = random_host((size_t)(M * K), 1), *B = random_host((size_t)(K * N), 2);
  float *C = random_host((size_t)(M * N), 3), *got = malloc((size_t)(M * N) * 4);
  float *dA = on_device(A, (size_t)(M * K)), *dB = on_device(B, (size_t)(K * N));
  float *dC = on_device(C, (size_t)(M * N));
  dt_matmul(ta, tb, M, N, K, dA, dB, dC, acc);
  dt_copy_to_host(got, dC, (size_t)(M * N) * 4);
  double worst = 0;
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      double s = acc ? C[i * N + j] : 0;
      for (int64_t k = 0; k < K; k++)
        s += (double)(ta ? A[k * M + i] : A[i * K + k]) * (tb ? B[j * K + k] : B[k * N + j]);
      worst = unit_max(worst, fabs(s - got[i * N + j]));
    }
  EXPECT(worst < 1e-4, "matmul ta=%d tb=%d %lldx%lldx%lld acc=%d: max error %g", ta, tb,
         (long long)M, (long long)N, (long long)K, acc, worst);
  free(A), free(B), free(C), free(got);
  dt_free(dA), dt_free(dB), dt_free(dC);
}

/* loss(W) for one block on a fixed batch, in double on the host copies */
static double block_loss(const dt_train_config *c, float *x, float *w1, float *w2, float *y,
                         int64_t rows) {
  int64_t D = c->dim, H = c->hidden;
  float *a = dt_alloc_f32((size_t)(rows * H), DT_ACTIV),
        *h = dt_alloc_f32((size_t)(rows * H), DT_ACTIV);
  float *out = dt_alloc_f32((size_t)(rows * D), DT_ACTIV),
        *dx = dt_alloc_f32((size_t)(rows * D), DT_ACTIV);
  dt_block_forward(x, w1, w2, a, h, out, rows, D, H, 1, NULL);
  double loss = dt_mse_forward_backward(out, y, dx, (size_t)(rows * D), 1.0 / (double)(rows * D));
  dt_free(a), dt_free(h), dt_free(out), dt_free(dx);
  return loss;
}

static void test_gradients(void) {
  dt_train_config c = DT_TRAIN_DEFAULTS;
  c.dim = 5, c.hidden = 7, c.batch = 3;
  dt_train_resolve(&c);
  int64_t D = c.dim, H = c.hidden, R = c.batch;
  float *w1 = dt_alloc_f32((size_t)(D * H), DT_PARAMS),
        *w2 = dt_alloc_f32((size_t)(H * D), DT_PARAMS);
  dt_init_w1(&c, 0, w1, 0, H), dt_init_w2(&c, 0, w2, 0, H);
  float *x = dt_alloc_f32((size_t)(R * D), DT_DATA), *y = dt_alloc_f32((size_t)(R * D), DT_DATA);
  int64_t samples[3] = {4, 0, 9};
  dt_make_batch(&c, samples, R, x, y);
  dt_scale(y, (size_t)(R * D), 1.5f); /* a target the block does not already hit */
  float *a = dt_alloc_f32((size_t)(R * H), DT_ACTIV), *h = dt_alloc_f32((size_t)(R * H), DT_ACTIV);
  float *out = dt_alloc_f32((size_t)(R * D), DT_ACTIV),
        *dout = dt_alloc_f32((size_t)(R * D), DT_ACTIV);
  float *dx = dt_alloc_f32((size_t)(R * D), DT_ACTIV),
        *dh = dt_alloc_f32((size_t)(R * H), DT_ACTIV);
  float *g1 = dt_alloc_f32((size_t)(D * H), DT_GRADS),
        *g2 = dt_alloc_f32((size_t)(H * D), DT_GRADS);
  dt_block_forward(x, w1, w2, a, h, out, R, D, H, 1, NULL);
  dt_mse_forward_backward(out, y, dout, (size_t)(R * D), 1.0 / (double)(R * D));
  dt_block_backward(x, a, h, w1, w2, dout, dx, g1, g2, dh, R, D, H, 1);
  /* relu has a kink at 0: a step that pushes some a across it measures the
   * wrong slope. Keep every step smaller than the smallest |a|. */
  float *host_a = malloc((size_t)(R * H) * 4), min_a = 1e9f;
  dt_copy_to_host(host_a, a, (size_t)(R * H) * 4);
  for (int64_t i = 0; i < R * H; i++) min_a = fminf(min_a, fabsf(host_a[i]));
  free(host_a);
  float eps = fminf(1e-2f, 0.5f * min_a);
  float *tensors[3] = {w1, w2, x}, *grads[3] = {g1, g2, dx};
  size_t sizes[3] = {(size_t)(D * H), (size_t)(H * D), (size_t)(R * D)};
  const char *names[3] = {"dW1", "dW2", "dx"};
  for (int t = 0; t < 3; t++) {
    float *host = malloc(sizes[t] * 4), *grad = malloc(sizes[t] * 4);
    dt_copy_to_host(host, tensors[t], sizes[t] * 4);
    dt_copy_to_host(grad, grads[t], sizes[t] * 4);
    double worst = 0;
    for (size_t i = 0; i < sizes[t]; i++) { /* central differences */
      float keep = host[i];
      host[i] = keep + eps;
      dt_copy_from_host(tensors[t], host, sizes[t] * 4);
      double up = block_loss(&c, x, w1, w2, y, R);
      host[i] = keep - eps;
      dt_copy_from_host(tensors[t], host, sizes[t] * 4);
      double down = block_loss(&c, x, w1, w2, y, R);
      host[i] = keep;
      dt_copy_from_host(tensors[t], host, sizes[t] * 4);
      worst = unit_max(worst, fabs((up - down) / (2 * eps) - grad[i]));
    }
    EXPECT(worst < 2e-4, "finite differences of %s (step %g): max error %g", names[t], eps, worst);
    free(host), free(grad);
  }
  float *bufs[] = {w1, w2, x, y, a, h, out, dout, dx, dh, g1, g2};
  for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) dt_free(bufs[i]);
}

static void test_adamw(void) {
  float w = 0.5f, g = 0.2f, m = 0, v = 0, *dw = on_device(&w, 1), *dg = on_device(&g, 1);
  float *dm = on_device(&m, 1), *dv = on_device(&v, 1);
  double pw = 0.5, pm = 0, pv = 0, lr = 0.1, wd = 0.01;
  for (int t = 1; t <= 3; t++) { /* torch.optim.AdamW, written out */
    dt_adamw_step(dw, dg, dm, dv, 1, (float)lr, (float)wd, t, 1.0f, 0.999f);
    pw *= 1 - lr * wd;
    pm = 0.9 * pm + 0.1 * 0.2f;
    pv = 0.999 * pv + 0.001 * 0.2f * 0.2f;
    pw -= lr / (1 - pow(0.9, t)) * pm / (sqrt(pv) / sqrt(1 - pow(0.999, t)) + 1e-8);
  }
  dt_copy_to_host(&w, dw, 4);
  EXPECT(fabs(w - pw) < 1e-6, "adamw: %.8f vs %.8f", w, pw);
  dt_free(dw), dt_free(dg), dt_free(dm), dt_free(dv);
}

/* The optimizers on the backend against optim_core.h's bodies run here on
 * the host, bit for bit: on a GPU, that nvcc fused no multiply-add the cpu
 * rounds twice (the cpu and the GPU then save the same weights) */
static void test_optimizer_bits(void) {
  enum { N = 1000 };
  float *w = random_host(N, 11), *g = random_host(N, 12), *m = calloc(N, 4), *v = calloc(N, 4);
  float *sw = malloc(N * 4), *dw = on_device(w, N), *dg = on_device(g, N), *dm = on_device(m, N);
  float *dv = on_device(v, N), *ds = on_device(w, N);
  memcpy(sw, w, N * 4);
  for (int t = 1; t <= 3; t++) {
    float lr = 0.01f, wd = 0.1f, gs = 0.7f, b2 = 0.99f;
    dt_adamw_step(dw, dg, dm, dv, N, lr, wd, t, gs, b2);
    dt_sgd_step(ds, dg, N, lr, gs);
    float bias1 = 1.0f - powf(0.9f, (float)t), bias2_sqrt = sqrtf(1.0f - powf(b2, (float)t));
    for (int i = 0; i < N; i++) {
      w[i] =
          dt_adamw_core(w[i], g[i], &m[i], &v[i], gs, lr / bias1, 1.0f - lr * wd, bias2_sqrt, b2);
      sw[i] = dt_sgd_core(sw[i], g[i], lr, gs);
    }
  }
  float *hw = malloc(N * 4), *hs = malloc(N * 4), *hm = malloc(N * 4), *hv = malloc(N * 4);
  dt_copy_to_host(hw, dw, N * 4);
  dt_copy_to_host(hs, ds, N * 4);
  dt_copy_to_host(hm, dm, N * 4);
  dt_copy_to_host(hv, dv, N * 4);
  EXPECT(!memcmp(hw, w, N * 4) && !memcmp(hm, m, N * 4) && !memcmp(hv, v, N * 4),
         "AdamW on the backend: optim_core.h's bits (weights, m, v; 3 steps of %d)", N);
  EXPECT(!memcmp(hs, sw, N * 4), "SGD on the backend: optim_core.h's bits (3 steps of %d)", N);
  void *h[] = {w, g, m, v, sw, hw, hs, hm, hv};
  for (size_t i = 0; i < sizeof h / sizeof *h; i++) free(h[i]);
  float *d[] = {dw, dg, dm, dv, ds};
  for (size_t i = 0; i < sizeof d / sizeof *d; i++) dt_free(d[i]);
}

static void test_checkpoint_and_reference(void) {
  dt_train_config c = DT_TRAIN_DEFAULTS;
  c.layers = 2, c.dim = 16, c.batch = 8, c.steps = 30;
  dt_train_resolve(&c);
  size_t n = (size_t)(c.layers * dt_params_per_layer(&c));
  double *loss = malloc((size_t)c.steps * sizeof(double));
  float *w = malloc(n * 4), *back = malloc(n * 4);
  dt_reference_run ref = {.losses = loss, .weights = w};
  dt_reference_train(&c, &ref);
  EXPECT(loss[c.steps - 1] < 0.7 * loss[0], "loss falls: %g -> %g", loss[0], loss[c.steps - 1]);
  char path[64];
  snprintf(path, sizeof path, "build/test-model-%d.safetensors", dt_rank());
  dt_save_model(path, &c, c.steps, w);
  memset(back, 0, n * 4);
  dt_load_model(path, &c, back);
  EXPECT(memcmp(w, back, n * 4) == 0, "checkpoint reloads bit-exactly");
  remove(path);
  free(loss), free(w), free(back);
}

/* ReLU's decisions near 0 (kinks.c). A block whose pre-activation a_00 is
 * put at 0.4 of the tolerance above 0: a run records it under its row's key
 * and unit; one process that computes it below 0 (within the tolerance)
 * takes the run's side; a record whose key is no row here, or whose unit is
 * another slice's, is left alone; and the counts are judged. */
static void test_kinks(void) {
  dt_train_config c = DT_TRAIN_DEFAULTS;
  c.dim = 8, c.hidden = 16, c.batch = 4;
  dt_train_resolve(&c);
  int64_t D = c.dim, H = c.hidden, R = 3;
  float *x = random_host((size_t)(R * D), 11), *w1 = random_host((size_t)(D * H), 12);
  float *w2 = random_host((size_t)(H * D), 13);
  double xn = 0, wn = 0, dot = 0;
  for (int64_t d = 0; d < D; d++) xn += (double)x[d] * x[d];
  for (int64_t d = 0; d < D - 1; d++) dot += (double)x[d] * w1[d * H];
  dt_kinks *rec = dt_kinks_new(&c, 0);
  float tol = rec->tol;
  for (int64_t d = 0; d < D - 1; d++) wn += (double)w1[d * H] * w1[d * H];
  double near = 0.4 * tol * sqrt(xn) * sqrt(wn); /* 0.4 of the tolerance: far beyond rounding */
  w1[(D - 1) * H] = (float)((near - dot) / x[D - 1]); /* a_00 = +near */
  wn = 0;
  for (int64_t d = 0; d < D; d++) wn += (double)w1[d * H] * w1[d * H];
  double scale = sqrt(xn) * sqrt(wn);
  float *dx = on_device(x, (size_t)(R * D)), *dw1 = on_device(w1, (size_t)(D * H));
  float *dw2 = on_device(w2, (size_t)(H * D));
  float *a = dt_alloc_f32((size_t)(R * H), DT_ACTIV), *h = dt_alloc_f32((size_t)(R * H), DT_ACTIV);
  float *out = dt_alloc_f32((size_t)(R * D), DT_ACTIV), *ha = malloc((size_t)(R * H) * 4);
  int64_t keys[3] = {40, 7, 12};
  rec->step = 5;
  dt_block_forward(dx, dw1, dw2, a, h, out, R, D, H, 1, &(dt_rows){rec, keys, 2, 32});
  dt_kinks_step_end(rec);
  dt_copy_to_host(ha, a, (size_t)(R * H) * 4);
  int found = 0;
  for (int64_t i = 0; i < rec->n; i++)
    found |= rec->k[i].step == 5 && rec->k[i].layer == 2 && rec->k[i].row == 40 &&
             rec->k[i].unit == 32 && rec->k[i].a == ha[0] &&
             fabs(rec->k[i].scale - scale) < 1e-5 * scale;
  EXPECT(found && ha[0] > 0 && fabsf(ha[0]) <= tol * scale,
         "the run records a_00 = %g (tolerance %g) under key 40, unit 32: %lld records", ha[0],
         tol * scale, (long long)rec->n);
  EXPECT(rec->decisions == R * H, "decisions %lld, want %lld", (long long)rec->decisions,
         (long long)(R * H));
  /* one process: a_00 computed as -a_00 (rounding put it below 0), the run's
   * +a_00 replayed; a record of a key not here and one of another slice's
   * unit are not this block's */
  dt_kinks *rep = dt_kinks_new(&c, 1);
  dt_kink recs[] = {
      {5, 2, 7, 40, 0.5, scale}, {5, 2, 12, 31, 0.5, scale}, {5, 2, 40, 32, ha[0], scale}};
  rep->k = malloc(sizeof recs);
  memcpy(rep->k, recs, sizeof recs);
  rep->n = rep->cap = 3;
  rep->step = 5;
  w1[(D - 1) * H] = (float)((-near - dot) / x[D - 1]); /* a_00 = -near */
  dt_copy_from_host(dw1, w1, (size_t)(D * H) * 4);
  int64_t own[3] = {40, 12, 7}; /* the same rows in another order: found by key */
  float *x2 = malloc((size_t)(R * D) * 4);
  for (int64_t i = 0; i < R; i++) memcpy(x2 + i * D, x + (i == 0 ? 0 : 3 - i) * D, (size_t)D * 4);
  dt_copy_from_host(dx, x2, (size_t)(R * D) * 4);
  dt_block_forward(dx, dw1, dw2, a, h, out, R, D, H, 1, &(dt_rows){rep, own, 2, 32});
  dt_copy_to_host(ha, a, (size_t)(R * H) * 4);
  EXPECT(rep->met == 1 && rep->flipped == 1 && ha[0] == recs[2].a,
         "one process takes the run's side: met %lld flipped %lld, a_00 %g (run's %g)",
         (long long)rep->met, (long long)rep->flipped, ha[0], recs[2].a);
  EXPECT(rep->run_only == 1, "the run's 0.5 at key 7 is near 0 in the run only: %lld",
         (long long)rep->run_only);
  /* the verdict: at most 1/16 of those met + 2 may fall apart */
  char why[256];
  dt_kinks j = {.met = 100, .flipped = 8};
  EXPECT(!dt_kinks_verdict(&j, why, sizeof why), "8 of 100 flipped pass: %s", why);
  j.flipped = 9;
  EXPECT(dt_kinks_verdict(&j, why, sizeof why) && strstr(why, "more than rounding"),
         "9 of 100 flipped fail: '%s'", why);
  j = (dt_kinks){.met = 100, .run_only = 20, .own_only = 7};
  EXPECT(!dt_kinks_verdict(&j, why, sizeof why), "27 of 100 near 0 in one run only pass");
  j.own_only = 8;
  EXPECT(dt_kinks_verdict(&j, why, sizeof why) && strstr(why, "keys"),
         "28 of 100 near 0 in one run only fail: '%s'", why);
  dt_kinks_free(rec);
  dt_kinks_free(rep);
  free(x), free(x2), free(w1), free(w2), free(ha);
  dt_free(dx), dt_free(dw1), dt_free(dw2), dt_free(a), dt_free(h), dt_free(out);
}

/* a backend buffer's n bytes on the host (malloc'ed) */
static void *to_host(const void *dev, size_t bytes) {
  void *h = malloc(bytes);
  dt_copy_to_host(h, dev, bytes);
  return h;
}

/* The router (moe.c, or moe_kernels.cu on a GPU) beside moe_core.h's bodies
 * run here on the same inputs: the gates, the balance loss and the backward
 * to the logits give the same bits (no libm call in them); the softmax the
 * same bits on the cpu (glibc's expf both), and a few ulp apart on a GPU
 * (CUDA's expf), the same choices. The backend against the bodies: the
 * bodies' arithmetic itself is test_moe.c's (plain loops, finite
 * differences). */
static void test_router(int64_t R, int64_t D, int64_t E, int64_t k) {
  dt_train_config c = DT_TRAIN_DEFAULTS;
  c.experts = E;
  c.aux_coef = 0.01;
  float *x = random_host((size_t)(R * D), 40), *wr = random_host((size_t)(D * E), 41);
  float *dg = random_host((size_t)(R * k), 42), *f = random_host((size_t)E, 43);
  float *dX = on_device(x, (size_t)(R * D)), *dW = on_device(wr, (size_t)(D * E));
  float *dP = dt_alloc_f32((size_t)(R * E), DT_OTHER),
        *dG = dt_alloc_f32((size_t)(R * k), DT_OTHER);
  float *dDg = on_device(dg, (size_t)(R * k)), *dA = dt_alloc_f32((size_t)E, DT_OTHER);
  float *dL = dt_alloc_f32((size_t)(R * E), DT_OTHER),
        *dgw = dt_alloc_f32((size_t)(D * E), DT_OTHER);
  float *ddx = dt_alloc_f32((size_t)(R * D), DT_OTHER);
  int32_t *dC = dt_alloc((size_t)(R * k) * 4, DT_OTHER);
  dt_matmul(0, 0, R, E, D, dX, dW, dP, 0); /* the logits, as the router computes them */
  float *p = to_host(dP, (size_t)(R * E) * 4);
  int32_t *c0 = malloc((size_t)(R * k) * 4);
  for (int64_t t = 0; t < R; t++) dt_router_row(p + t * E, E, k, c0 + t * k);
  dt_router_forward(dX, dW, R, D, E, k, dP, dC);
  float *gp = to_host(dP, (size_t)(R * E) * 4);
  int32_t *gc = to_host(dC, (size_t)(R * k) * 4);
  double e = 0;
  for (int64_t i = 0; i < R * E; i++) e = unit_max(e, fabs((double)gp[i] - p[i]));
  int gpu = dt_device() >= 0, same_c = !memcmp(gc, c0, (size_t)(R * k) * 4);
  EXPECT(same_c && (gpu ? e <= 1e-6 : e == 0),
         "router R %lld E %lld k %lld: the softmax's %s (off by %.2e), the same choices: %s",
         (long long)R, (long long)E, (long long)k, gpu ? "values" : "bits", e,
         same_c ? "yes" : "no");
  float *g = malloc((size_t)(R * k) * 4), *dl = malloc((size_t)(R * E) * 4), *da = malloc(E * 4);
  for (int64_t t = 0; t < R; t++) dt_router_gate_row(gp + t * E, gc + t * k, k, g + t * k);
  dt_router_gates(dP, dC, R, E, k, dG);
  float *gg = to_host(dG, (size_t)(R * k) * 4);
  EXPECT(!memcmp(g, gg, (size_t)(R * k) * 4), "router gates: the body's bits");
  double aux = 0;
  for (int64_t j = 0; j < E; j++) {
    aux += f[j] * dt_moe_prob_sum(gp, R, E, j) / (double)R;
    da[j] = (float)(2.0 * c.aux_coef * (double)E * f[j] / (double)R);
  }
  aux *= c.aux_coef * (double)E;
  double got = dt_moe_aux(&c, dP, R, f, 2.0, dA);
  float *ga = to_host(dA, (size_t)E * 4);
  EXPECT(got == aux && !memcmp(da, ga, (size_t)E * 4), "balance loss and d/dp: the bodies' bits");
  for (int64_t t = 0; t < R; t++)
    dt_router_grad_row(gp + t * E, g + t * k, dg + t * k, gc + t * k, da, E, k, dl + t * E);
  dt_router_backward(dX, dW, dP, dC, dG, dDg, dA, R, D, E, k, dL, dgw, ddx);
  float *gl = to_host(dL, (size_t)(R * E) * 4);
  EXPECT(!memcmp(dl, gl, (size_t)(R * E) * 4), "router backward to the logits: the body's bits");
  void *host[] = {x, wr, dg, f, p, c0, gp, gc, g, dl, da, gg, ga, gl};
  for (size_t i = 0; i < sizeof host / sizeof *host; i++) free(host[i]);
  void *dev[] = {dX, dW, dP, dG, dDg, dA, dL, dgw, ddx, dC};
  for (size_t i = 0; i < sizeof dev / sizeof *dev; i++) dt_free(dev[i]);
}

/* The tokens' trip (lesson 10) on the backend beside moe_core.h's bodies:
 * the same bits (no libm call in them). Token t's choices t k + j go to
 * rows pos (some dropped: -1), of experts expert (distinct per token). */
static void test_trip(int64_t R, int64_t k, int64_t D) {
  int64_t n = R * k, rows = n + 3;
  float *x = random_host((size_t)(R * D), 50), *gate = random_host((size_t)n, 51);
  float *ret = random_host((size_t)(rows * D), 52), *dy = random_host((size_t)(R * D), 53);
  int32_t *pos = malloc((size_t)n * 4), *ex = malloc((size_t)n * 4);
  for (int64_t i = 0; i < n; i++) { /* every fifth dropped; the rest rows backwards */
    pos[i] = i % 5 == 4 ? -1 : (int32_t)(rows - 1 - i);
    ex[i] = (int32_t)((i % k) * 7 + (i / k) % 3) * (i % 2 ? 1 : 2) % 11;
  }
  for (int64_t t = 0; t < R && k == 2; t++) /* distinct experts in a token */
    if (ex[t * k] == ex[t * k + 1]) ex[t * k + 1] = (ex[t * k] + 1) % 11;
  float *want = calloc((size_t)(rows * D), 4), *back = calloc((size_t)(rows * D), 4);
  float *wx = malloc((size_t)(R * D) * 4), *wg = malloc((size_t)n * 4), *got;
  float *dX = on_device(x, (size_t)(R * D)), *dG = on_device(gate, (size_t)n);
  float *dR = on_device(ret, (size_t)(rows * D)), *dY = on_device(dy, (size_t)(R * D));
  float *dS = on_device(want, (size_t)(rows * D)), *dO = dt_alloc_f32((size_t)(R * D), DT_OTHER);
  float *dDg = dt_alloc_f32((size_t)n, DT_OTHER);
  int32_t *dP = dt_alloc((size_t)n * 4, DT_OTHER), *dE = dt_alloc((size_t)n * 4, DT_OTHER);
  dt_copy_from_host(dP, pos, (size_t)n * 4);
  dt_copy_from_host(dE, ex, (size_t)n * 4);
  for (int64_t i = 0; i < n; i++)
    if (pos[i] >= 0) memcpy(want + pos[i] * D, x + i / k * D, (size_t)D * 4);
  dt_moe_dispatch_rows(dX, dP, R, k, D, dS);
  got = to_host(dS, (size_t)(rows * D) * 4);
  EXPECT(!memcmp(got, want, (size_t)(rows * D) * 4), "dispatch: the rows in place");
  free(got);
  for (int64_t e = 0; e < R * D; e++)
    wx[e] = dt_moe_combine_core(x, gate, ret, pos, k, D, e / D, e % D);
  dt_moe_combine(dX, dG, dR, dP, R, k, D, dO);
  got = to_host(dO, (size_t)(R * D) * 4);
  EXPECT(!memcmp(got, wx, (size_t)(R * D) * 4), "combine: the body's bits");
  free(got);
  for (int64_t i = 0; i < n; i++)
    wg[i] = pos[i] < 0 ? 0
                       : dt_moe_gate_grad_core(dy + i / k * D, ret + pos[i] * D, gate[i],
                                               back + pos[i] * D, D);
  dt_moe_gate_backward(dY, dG, dR, dP, R, k, D, dS, dDg);
  float *gb = to_host(dS, (size_t)(rows * D) * 4), *gd = to_host(dDg, (size_t)n * 4);
  int ok = !memcmp(gd, wg, (size_t)n * 4);
  for (int64_t i = 0; i < n; i++)
    ok &= pos[i] < 0 || !memcmp(gb + pos[i] * D, back + pos[i] * D, (size_t)D * 4);
  EXPECT(ok, "gate backward: the body's bits");
  for (int o = 0; o < 2; o++) { /* choice order, the experts' */
    for (int64_t e = 0; e < R * D; e++)
      wx[e] = dt_moe_combine_grad_core(dy, ret, pos, o ? ex : NULL, k, D, e / D, e % D);
    dt_moe_combine_backward(dY, dR, dP, o ? dE : NULL, R, k, D, dO);
    got = to_host(dO, (size_t)(R * D) * 4);
    EXPECT(!memcmp(got, wx, (size_t)(R * D) * 4), "combine backward (%s order): the body's bits",
           o ? "the experts'" : "choice");
    free(got);
  }
  void *host[] = {x, gate, ret, dy, pos, ex, want, back, wx, wg, gb, gd};
  for (size_t i = 0; i < sizeof host / sizeof *host; i++) free(host[i]);
  void *dev[] = {dX, dG, dR, dY, dS, dO, dDg, dP, dE};
  for (size_t i = 0; i < sizeof dev / sizeof *dev; i++) dt_free(dev[i]);
}

int main(int argc, char **argv) {
  dt_lesson lesson = {"test_model", "unit tests of the model layer", 1};
  dt_init(&argc, &argv, &lesson, NULL);
  int64_t shapes[][3] = {{1, 1, 1}, {3, 5, 7}, {17, 9, 33}, {64, 48, 31}};
  for (int s = 0; s < 4; s++)
    for (int f = 0; f < 4; f++)
      test_matmul(f & 1, f >> 1, shapes[s][0], shapes[s][1], shapes[s][2], s % 2);
  test_gradients();
  test_adamw();
  test_optimizer_bits();
  test_checkpoint_and_reference();
  test_kinks();
  test_router(37, 12, 8, 2);
  test_router(5, 3, 3, 1);
  test_trip(23, 2, 9);
  test_trip(6, 1, 4);
  return unit_verdict();
}
