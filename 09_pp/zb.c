/* zb.c: ZB-H1's plan and its split backward (zb.h). */
#include <stdlib.h>

#include "formulas.h"
#include "interleave.h"
#include "zb.h"

/* The slot model, slot by slot: each stage runs its next F or B if it can,
 * else its oldest W waiting (B's order, 1F1B's: microbatches 0, 1, ...). */
int pp_plan_zb(int N, int s, int64_t M, action *plan, pp_event *ev, int *T) {
  int per = (int)(3 * M), fbn = (int)(2 * M), left = N * per;
  action *all = dt_host_alloc((size_t)(N * (per + fbn)), sizeof *all), *fb = all + N * per;
  int *st = dt_host_alloc((size_t)(5 * N), sizeof *st);     /* a stage's next, n, Bs, Ws, live */
  int *end = dt_host_alloc((size_t)(N * fbn), sizeof *end); /* [stage][F|B][mb]: done at */
  for (int q = 0; q < N; q++) pp_plan(N, q, M, 0, fb + q * fbn);
  for (int i = 0; i < N * fbn; i++) end[i] = 1 << 30;
#define END(q, type, mb) end[(q)*fbn + ((type) == 'B') * M + (mb)]
  int t = 0;
  for (; left; t++) {
    if (t > 4 * per) dt_fail("--schedule zb1: the plan is stuck at slot %d (a bug)", t);
    for (int q = 0; q < N; q++) {
      int *next = st + 5 * q, *n = next + 1, *nb = next + 2, *nw = next + 3, *live = next + 4;
      action *a = *next < fbn ? fb + q * fbn + *next : NULL, *p = all + q * per + *n;
      int ready = a && (a->type == 'F' ? q == 0 || END(q - 1, 'F', a->mb) <= t
                        : q == N - 1   ? END(q, 'F', a->mb) <= t
                                       : END(q + 1, 'B', a->mb) <= t);
      if (ready && a->type == 'F' && *live >= pp_live_zb(N, M)) ready = 0; /* 1F1B's peak */
      if (ready) {
        *p = *a;
        (*next)++;
        *live += a->type == 'F';
        *nb += a->type == 'B';
      } else if (*nw < *nb) {
        *p = (action){.type = 'W', .mb = (*nw)++};
        (*live)--;
      } else {
        continue; /* idle */
      }
      p->at = t;
      if (p->type != 'W') END(q, p->type, p->mb) = t + 1; /* seen from the next slot on */
      (*n)++;
      left--;
    }
  }
#undef END
  *T = t;
  int k = pp_lockstep(N, s, M, 1, all, per, t, plan, ev);
  free(all);
  free(st);
  free(end);
  return k;
}

void zb_input(dt_acts *t, const float *w, float *dy, int64_t L) {
  int64_t R = t->R, D = t->D, H = t->Hs;
  dt_copy(dy + (L - 1) * R * D, t->dx, (size_t)(R * D) * 4); /* kept for W */
  for (int64_t l = L - 1; l >= 0; l--) {
    const float *w1 = w + l * 2 * D * H, *w2 = w1 + D * H;
    float *out = dy + l * R * D, *a = t->a + l * R * H, *in = l ? out - R * D : t->dnext;
    dt_matmul(0, 1, R, H, D, out, w2, t->dh, 0);    /* dh = dout W2^T */
    dt_relu_backward(a, t->dh, a, (size_t)(R * H)); /* da, in a's place: a is not needed again */
    dt_copy(in, out, (size_t)(R * D) * 4);          /* the residual */
    dt_matmul(0, 1, R, D, H, a, w1, in, 1);         /* dx += da W1^T */
  }
  float *g = t->dnext; /* the input's gradient is the next stage's output gradient */
  t->dnext = t->dx;
  t->dx = g;
}

void zb_weights(const dt_acts *t, float *g, const float *dy, int64_t L) {
  int64_t R = t->R, D = t->D, H = t->Hs;
  for (int64_t l = 0; l < L; l++) {
    float *g1 = g + l * 2 * D * H, *g2 = g1 + D * H;
    dt_matmul(1, 0, H, D, R, t->h + l * R * H, dy + l * R * D, g2, 1);  /* dW2 += h^T dout */
    dt_matmul(1, 0, D, H, R, dt_acts_x(t, l), t->a + l * R * H, g1, 1); /* dW1 += x^T da */
  }
}
