/* tensor.c: tensor parallelism's pieces (tensor.h), for lessons 07 and 08. */
#include "tensor.h"

int64_t tp_slice(const dt_train_config *c, int T) {
  if (c->hidden % T != 0)
    dt_fail("--hidden %lld does not split over %d tensor-parallel ranks: each holds H/%d hidden "
            "units (W1's columns, W2's rows); try --hidden %lld (or another multiple of %d)",
            (long long)c->hidden, T, T, (long long)((c->hidden / T + 1) * T), T);
  return c->hidden / T;
}

void tp_sum(dt_comm *tp, const dt_wire *wire, float *buf, size_t n) {
  if (tp->size == 1) return; /* the partial is the whole: nothing to sum, nothing to round */
  void *p = dt_wire_pack(wire, buf, n, 0, 1);
  dt_all_reduce(tp, p, p, n, wire->type, DT_SUM);
  dt_wire_unpack(wire, buf, n, 0);
}

/* exercise: the f/g pair (forward and backward of a tensor-parallel block) */
/* f, forward: the identity (x_l is whole on every rank); g: the sum. */
void tp_forward(dt_acts *act, int64_t l, const float *w1, const float *w2, dt_comm *tp,
                const dt_wire *wire) {
  size_t n = (size_t)(act->R * act->D);
  dt_acts_forward(act, l, w1, w2, 0); /* x_l+1 = h_s W2_s, a partial sum */
  tp_sum(tp, wire, dt_acts_x(act, l + 1), n);
  dt_add(dt_acts_x(act, l + 1), dt_acts_x(act, l), n); /* once, not once per rank */
}

/* g, backward: the identity (every W2_s gets the whole dout); f: the sum,
 * layer 0's too (x_0 is data, but an embedding below would need it). */
void tp_backward(dt_acts *act, int64_t l, const float *w1, const float *w2, float *g1, float *g2,
                 dt_comm *tp, const dt_wire *wire) {
  size_t n = (size_t)(act->R * act->D);
  dt_acts_backward(act, l, w1, w2, g1, g2, 0); /* dx = da_s W1_s^T, partial; dnext: dout */
  tp_sum(tp, wire, act->dx, n);
  dt_add(act->dx, act->dnext, n); /* the residual path */
}
/* end of exercise */

int64_t tp_place_shard(dt_run *r, int seg, int64_t off, const dt_tensor *x, int by_rows, int t,
                       int T, int64_t lo, int64_t hi) {
  int64_t rows = by_rows ? x->rows / T : x->rows, cols = by_rows ? x->cols : x->cols / T;
  int64_t n = rows * cols, a = lo > 0 ? lo : 0, b = hi < n ? hi : n;
  int64_t at = x->at + (by_rows ? t * rows * x->cols : t * cols); /* the shard's first element */
  if (a < b) dt_run_place_range(r, seg, off + a - lo, at, cols, x->cols, a, b);
  return n;
}

void tp_place(dt_run *r, int seg, int64_t off, int64_t l, int t, int T, int64_t lo, int64_t hi) {
  /* W1 by columns, then W2 by rows */
  dt_tensor w1 = dt_model_tensor(&r->c, 2 * l), w2 = dt_model_tensor(&r->c, 2 * l + 1);
  int64_t n = tp_place_shard(r, seg, off, &w1, 0, t, T, lo, hi);
  tp_place_shard(r, seg, off, &w2, 1, t, T, lo - n, hi - n);
}
