/* sequence.c: --sequence-parallel, Megatron's sequence parallelism (gpt.h).
 *
 * Without it every rank of a tensor group holds the whole residual stream,
 * [R, D], and computes the LayerNorms on every row alike; the row-parallel
 * products (after Wo, W2, the embedding, the head's backward) are summed by
 * an all-reduce (07's tp_sum). With it a rank holds Rs = R/tp rows of the
 * stream: its LayerNorms run on those rows, an all-gather gives the
 * column-parallel matmul (Wq|Wk|Wv, W1, the head) every row, and a
 * reduce-scatter in place of the all-reduce leaves each rank the sum of its
 * own rows. An all-reduce is a reduce-scatter and an all-gather: the bytes
 * are the same, the stream's memory is divided by tp. The gains then see
 * a rank's rows only, so their gradients are summed over tp once a step.
 * In 16 bits (--precision) each travels as a 16-bit copy, half the bytes. */
#include "gpt.h"

float *gpt_gather(model *m, const float *own, float *full) {
  if (!m->sp) return (float *)own; /* every row is here already */
  size_t n = (size_t)(m->Rs * m->D);
  void *in = dt_wire_pack(&m->wire, (float *)own, n, 0, 1);
  void *out = m->wire.type == DT_F32 ? (void *)full : (void *)(m->wire.buf + n);
  dt_all_gather(m->axis[TP], in, out, n, m->wire.type);
  dt_wire_unpack(&m->wire, full, (size_t)(m->R * m->D), n);
  return full;
}

float *gpt_partial(const model *m, float *out) { return m->sp ? m->full : out; }

float *gpt_reduce(model *m, float *part, float *own) {
  if (!m->sp) {
    tp_sum(m->axis[TP], &m->wire, part, (size_t)(m->R * m->D));
    return part;
  }
  size_t n = (size_t)(m->Rs * m->D), RD = (size_t)(m->R * m->D);
  void *in = dt_wire_pack(&m->wire, part, RD, 0, 1);
  void *out = m->wire.type == DT_F32 ? (void *)own : (void *)(m->wire.buf + RD);
  dt_reduce_scatter(m->axis[TP], in, out, n, m->wire.type, DT_SUM);
  dt_wire_unpack(&m->wire, own, n, RD);
  return own;
}

void gpt_sum_gains(model *m) {
  if (m->sp && m->n[TP] > 1)
    tp_sum(m->axis[TP], &m->grads, gpt_gains(m, m->g), (size_t)gpt_gains_n(m));
}
