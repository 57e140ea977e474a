/* op_run.c: one operation of a step run on buffers of its size, as the
 * lesson calls its kernel (dt_matmul, common/train's blocks and attention,
 * 11's merge and split, the optimizer, 14's kernels in ops14.c), and timed
 * alone: the fastest of a few trials (ops.c times and replays them all). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "11_cp/ring.h"
#include "ops.h"
#include "train.h"

void op_run(const op *o, scratch *b, const dt_train_config *cfg, const int64_t *samples) {
  float **p = b->p;
  int64_t *s = (int64_t *)o->s;
  switch (o->k) {
  case GEMM: /* A transposed: a weight's gradient, accumulated (C += A^T B) as every lesson
              * adds it; OpenBLAS's beta 0 clears C first, twice the time at a microbatch's K */
    dt_matmul((int)s[3], (int)s[4], s[0], s[1], s[2], p[0], p[1], p[2], (int)s[3]);
    break;
  case MLP_F:
    dt_block_forward(p[0], p[1], p[2], p[3], p[4], p[5], s[0], s[1], s[2], (int)s[3], NULL);
    break;
  case MLP_B:
    dt_block_backward(p[0], p[3], p[4], p[1], p[2], p[5], p[6], p[7], p[8], p[9], s[0], s[1], s[2],
                      (int)s[3]);
    break;
  case ATT_F:
    dt_attn_block_forward(p[0], p[1], p[2], s[0], s[0], s[1], s[2], (int)s[3], p[3], p[4]);
    /* 11's ring: its exercise's host loop, or on device memory the backend's */
    (dt_host_sees_device() ? cp_merge : dt_attn_merge)(p[5], p[6], p[3], p[4], s[0], s[1], s[2]);
    break;
  case ATT_B:
    dt_attn_block_backward(p[0], p[1], p[2], p[3], p[7], p[4], s[0], s[0], s[1], s[2], (int)s[3],
                           p[5], p[6], p[8]);
    break;
  case EW:
    if (s[1] == 1)
      dt_zero(p[0], (size_t)s[0] * 4);
    else if (s[1] == 2 && s[2] == 1)
      dt_scale(p[0], (size_t)s[0], 0.5f);
    else if (s[1] == 2)
      dt_copy(p[0], p[1], (size_t)s[0] * 4);
    else
      dt_add(p[0], p[1], (size_t)s[0]);
    break;
  case ATT_START: dt_attn_start(p[0], p[1], s[0], s[1], s[2]); break;
  case ATT_DELTA: dt_attn_delta(p[0], p[1], s[0], s[1], s[2], p[2]); break;
  case RELU_B: dt_relu_backward(p[0], p[1], p[0], (size_t)s[0]); break; /* da in a's place */
  case LOSS: dt_mse_forward_backward(p[0], p[1], p[2], (size_t)s[0], 1.0); break;
  case DATA11: {
    cp_attn a = {.N = s[2], .rank = s[3] / 2, .B = s[0], .S = s[1], .zigzag = (int)(s[3] % 2)};
    a.nc = a.zigzag ? 2 : 1;
    a.C = s[1] / (a.nc * a.N);
    a.Sl = a.nc * a.C;
    a.R = a.B * a.Sl;
    /* as 11 makes them where the host cannot write device memory: in host
     * rows, copied in (the cpu's device-boundary mode: a GPU's are not timed) */
    if (!dt_host_sees_device()) a.stage = dt_host_alloc((size_t)(2 * a.R * cfg->dim), 4);
    cp_inputs(&a, cfg, samples, p[0], p[1]);
    free(a.stage);
    break;
  }
  case DATA05: dt_make_batch(cfg, samples, s[0], p[0], p[1]); break;
  case ADAMW:
    dt_adamw_step(p[0], p[1], p[2], p[3], (size_t)s[0], 0.001f, 0.01f, 10, 1.0f, 0.999f);
    break;
  case SGD: dt_sgd_step(p[0], p[1], (size_t)s[0], 0.1f, 1.0f); break;
  case ALLOC: { /* 06's transient layer: fresh pages, written (faulted in) by its collective */
    float *fresh = dt_alloc_f32((size_t)s[0], DT_OTHER);
    dt_zero(fresh, (size_t)s[0] * 4);
    dt_free(fresh);
    break;
  }
  default: ops14_run(o, p); /* 14's kernels */
  }
}

/* The largest buffer the op touches, in floats; op_time holds ten. */
int64_t op_largest(const op *o) {
  const int64_t *s = o->s;
  switch (o->k) {
  case GEMM: return (s[0] > s[1] ? s[0] : s[1]) * (s[2] > s[1] ? s[2] : s[1]);
  case MLP_F:
  case MLP_B: return s[0] * (s[1] > s[2] ? s[1] : s[2]) + s[1] * s[2];
  case ATT_F:
  case ATT_B: return 2 * s[0] * (s[1] + s[2]);
  case ATT_START:
  case ATT_DELTA: return s[0] * (s[1] + s[2]);
  case DATA11: return s[0] * s[1] * s[4];
  case DATA05: return s[0] * s[1];
  default: return ops14_largest(o);
  }
}

void bench_init(bench *h, const op *o, const model *m) {
  const int64_t *s = o->s;
  h->b.n = (size_t)op_largest(o) + 64;
  for (int i = 0; i < 10; i++) {
    h->b.p[i] = dt_alloc_f32(h->b.n, DT_OTHER);
    dt_fill_uniform(h->b.p[i], h->b.n, 7, (uint64_t)i, 0, -1, 1);
  }
  h->cfg = (dt_train_config)DT_TRAIN_DEFAULTS;
  h->cfg.dim = o->k == DATA11 ? s[4] : o->k == DATA05 ? s[1] : m->D;
  h->cfg.seq = o->k == DATA11 ? s[1] : 0;
  h->samples = dt_host_alloc((size_t)(s[0] + 1), sizeof *h->samples);
  for (int64_t i = 0; i <= s[0]; i++) h->samples[i] = i;
  ops14_prepare(o, h->b.p);
  if (o->k == ATT_B) { /* a forward first: backward needs its log-sum-exp */
    op f = *o;
    f.k = ATT_F;
    op_run(&f, &h->b, &h->cfg, h->samples); /* its lse lands in p[4], where ATT_B reads it */
  }
}

void bench_free(bench *h) {
  for (int i = 0; i < 10; i++) dt_free(h->b.p[i]);
  free(h->samples);
}

/* The fastest of `trials` trials after a warm-up; a trial repeats a short
 * op until it lasts 100 us, so the clock's grain does not count. */
double op_time(const op *o, const model *m, int trials) {
  bench h;
  bench_init(&h, o, m);
  double t0 = dt_now(), best = 1e30;
  op_run(o, &h.b, &h.cfg, h.samples);
  dt_sync();
  double once = dt_now() - t0;
  int reps = once >= 1e-4 ? 1 : (int)fmin(1000, 1e-4 / fmax(once, 1e-7)) + 1;
  for (int trial = 0; trial < trials; trial++) {
    t0 = dt_now();
    for (int r = 0; r < reps; r++) op_run(o, &h.b, &h.cfg, h.samples);
    dt_sync();
    best = fmin(best, (dt_now() - t0) / reps);
  }
  bench_free(&h);
  return best;
}
