/* cp_ring.c: 11's ring of attention blocks as the cost model lists it, for
 * the transformer's stages (lesson_mesh.c) and 14's GPT (lesson14.c). */
#include "lessons.h"

/* The attention blocks rank c of the cp ring computes for one sequence, as
 * 11_cp/ring.c's attend() walks them: its chunks' queries against every
 * rank's chunks on or below the causal diagonal (diagonal blocks masked). */
static void blocks(const mesh *x, int64_t c, int64_t *causal, int64_t *full) {
  int64_t N = x->n[CP], nc = x->zigzag ? 2 : 1;
  *causal = *full = 0;
  for (int64_t src = 0; src < N; src++)
    for (int64_t jq = 0; jq < nc; jq++)
      for (int64_t jk = 0; jk < nc; jk++) {
        int64_t cq = x->zigzag && jq ? 2 * N - 1 - c : c,
                ck = x->zigzag && jk ? 2 * N - 1 - src : src;
        *causal += ck == cq;
        *full += ck < cq;
      }
}

/* 11's ring on one layer of a microbatch, forward or backward, as its
 * cp_ring_forward and cp_ring_backward run on cp rank c (11_cp/ring.c, which
 * 12 and 14 call), each kernel as they call it: forward o and the
 * log-sum-exp started, K and V copied to travel, its blocks (each merged);
 * backward the delta, dq zeroed, K and V copied, dK|dV zeroed, its blocks,
 * this rank's dK|dV copied home. Per is the layers' and microbatches' count. */
void ring_ops(op_list *l, const model *m, const mesh *x, int64_t s, int64_t c, int backward) {
  int64_t T = x->n[TP], R = rows_per_micro(m, x), W = m->D / T, A = m->A / T;
  int64_t Bm = m->B / (x->n[DP] * x->M), C = m->S / (x->n[CP] * (x->zigzag ? 2 : 1)), k1, k2;
  double per = (double)(x->M * stage_layers(m, x, s)), rw = (double)(R * W);
  blocks(x, c, &k1, &k2);
  if (!backward) {
    add(l, ATT_START, R, W, A, 0, 0, per, 0, 4 * (rw + (double)(R * A)));
    ew(l, R * W, 2, 2 * per, 4); /* K, V */
    add(l, ATT_F, C, W, A, 1, C, per * (double)(Bm * k1), 2.0 * (double)(C * C * W),
        16.0 * (double)(C * W));
    add(l, ATT_F, C, W, A, 0, C, per * (double)(Bm * k2), 4.0 * (double)(C * C * W),
        16.0 * (double)(C * W));
    return;
  }
  add(l, ATT_DELTA, R, W, A, 0, 0, per, 2 * rw, 4 * (2 * rw + (double)(R * A)));
  ew(l, R * W, 1, per, 4);     /* dq */
  ew(l, R * W, 2, 2 * per, 4); /* K, V */
  ew(l, 2 * R * W, 1, per, 4); /* dK|dV */
  add(l, ATT_B, C, W, A, 1, C, per * (double)(Bm * k1), 5.0 * (double)(C * C * W),
      28.0 * (double)(C * W));
  add(l, ATT_B, C, W, A, 0, C, per * (double)(Bm * k2), 10.0 * (double)(C * C * W),
      28.0 * (double)(C * W));
  ew(l, 2 * R * W, 2, per, 4); /* this rank's dK|dV home */
}
