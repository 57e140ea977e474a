/* ulysses.c: --ulysses, DeepSpeed-Ulysses' attention. An all-to-all turns
 * "S/N positions, all A heads" into "all S positions, A/N heads" (rank d
 * gets heads d A/N .. (d+1) A/N - 1, columns d D/N .. of every row); each
 * rank then attends over whole sequences for its heads, which needs nothing
 * more from anyone, and a second all-to-all brings the output back to the
 * positions' owners. Forward: q, k, v there and o back (four all-to-alls);
 * backward: do there, dq, dk, dv back (four). Each moves (N-1)/N of a rank's
 * [R,D] share. */
#include <math.h>
#include <string.h>

#include "cp.h"

/* per layer, head-split: q, k, v, o [B,S,W] (R D floats each), lse [B,S,A/N]
 * (R A); after the L layers, backward's dO, dQ, dK, dV */
static float *part(const model *m, int64_t l, int64_t i) {
  return m->heads + l * (4 * m->R * m->D + m->R * m->A) + i * m->R * m->D;
}

/* send -> recv, R W floats to each rank, in --precision's type */
static void exchange(model *m, int64_t W) {
  size_t n = (size_t)(m->R * m->D);
  void *out = dt_wire_pack(&m->a2a, m->send, n, 0, 1);
  dt_all_to_all(m->world, out, m->a2a.type == DT_F32 ? (void *)m->recv : m->a2a.buf + n,
                (size_t)(m->R * W), m->a2a.type);
  dt_wire_unpack(&m->a2a, m->recv, n, n);
}

/* Where rank s's chunk j of sequence b sits (C rows): in xh [B,S,W] at its
 * positions in the sequence, and in s's block of the all-to-all. */
static int64_t in_xh(const model *m, int64_t s, int64_t b, int64_t j) {
  return (b * m->S + cp_chunk(&m->cr, s, j) * m->C) * (m->D / m->N);
}
static int64_t in_block(const model *m, int64_t s, int64_t b, int64_t j) {
  return (s * m->R + b * m->Sl + j * m->C) * (m->D / m->N);
}

/* x [R,D] of this rank -> xh [B,S,W]: this rank's heads of every position. */
static void to_heads(model *m, const float *x, float *xh) {
  int64_t N = m->N, W = m->D / N, R = m->R;
  for (int64_t d = 0; d < N; d++) /* block d: my rows, rank d's columns */
    dt_copy_2d(m->send + d * R * W, (size_t)W * 4, x + d * W, (size_t)m->D * 4, (size_t)W * 4,
               (size_t)R);
  exchange(m, W);
  for (int64_t s = 0; s < N; s++) /* block s: rank s's rows, my columns */
    for (int64_t b = 0; b < m->B; b++)
      for (int64_t j = 0; j < m->nc; j++)
        dt_copy(xh + in_xh(m, s, b, j), m->recv + in_block(m, s, b, j), (size_t)(m->C * W) * 4);
}

/* The way back: xh [B,S,W] -> x [R,D]. */
static void from_heads(model *m, const float *xh, float *x) {
  int64_t N = m->N, W = m->D / N, R = m->R;
  for (int64_t s = 0; s < N; s++)
    for (int64_t b = 0; b < m->B; b++)
      for (int64_t j = 0; j < m->nc; j++)
        dt_copy(m->send + in_block(m, s, b, j), xh + in_xh(m, s, b, j), (size_t)(m->C * W) * 4);
  exchange(m, W);
  for (int64_t d = 0; d < N; d++)
    dt_copy_2d(x + d * W, (size_t)m->D * 4, m->recv + d * R * W, (size_t)W * 4, (size_t)W * 4,
               (size_t)R);
}

void ulysses_forward(model *m, int64_t l) {
  int64_t R = m->R, D = m->D, S = m->S, W = D / m->N, A = m->A / m->N;
  float *q = part(m, l, 0), *k = part(m, l, 1), *v = part(m, l, 2), *o = part(m, l, 3),
        *lse = part(m, l, 4);
  to_heads(m, m->q + l * R * D, q);
  to_heads(m, m->k + l * R * D, k);
  to_heads(m, m->v + l * R * D, v);
  dt_work_start(&m->cr.work);
  for (int64_t b = 0; b < m->B; b++) /* the whole sequence is one diagonal block */
    m->cr.scores[0] += A * dt_attn_block_forward(q + b * S * W, k + b * S * W, v + b * S * W, S, S,
                                                 W, A, 1, o + b * S * W, lse + b * S * A);
  dt_work_stop(&m->cr.work);
  from_heads(m, o, m->o + l * R * D);
}

void ulysses_backward(model *m, int64_t l) {
  int64_t R = m->R, D = m->D, S = m->S, W = D / m->N, A = m->A / m->N, n = m->B * S * W;
  float *q = part(m, l, 0), *k = part(m, l, 1), *v = part(m, l, 2), *o = part(m, l, 3),
        *lse = part(m, l, 4);
  float *dout = part(m, m->L, 0), *dq = dout + n, *dk = dq + n, *dv = dk + n;
  to_heads(m, m->dout, dout);
  dt_attn_delta(dout, o, m->B * S, W, A, m->cr.delta);
  dt_zero(dq, (size_t)(3 * n) * 4);
  dt_work_start(&m->cr.work);
  for (int64_t b = 0; b < m->B; b++)
    m->cr.scores[1] +=
        A * dt_attn_block_backward(q + b * S * W, k + b * S * W, v + b * S * W, dout + b * S * W,
                                   m->cr.delta + b * S * A, lse + b * S * A, S, S, W, A, 1,
                                   dq + b * S * W, dk + b * S * W, dv + b * S * W);
  dt_work_stop(&m->cr.work);
  for (int64_t i = 0; i < 3; i++) from_heads(m, dq + i * n, m->dq + i * R * D);
}
