/* oplist.h: how compute.c and the lessons' kinds (kinds.h) list a stage's
 * operations: each with its kernel, its shape, how often a step runs it
 * (times l->times), its FLOPs and its bytes, in a microbatch's forward or
 * backward or once a step (l->per_micro, l->backward). */
#ifndef PLAN_OPLIST_H
#define PLAN_OPLIST_H

#include "device.h"
#include "inputs.h"

typedef struct {
  op *o;
  int n, max;
  int per_micro, backward;
  double times;
} op_list;

static inline void add(op_list *l, int k, int64_t a, int64_t b, int64_t c, int64_t d, int64_t e,
                       double count, double flops, double bytes) {
  if (count <= 0 || l->n >= l->max) return;
  l->o[l->n++] =
      (op){k, {a, b, c, d, e}, count * l->times, flops, bytes, l->per_micro, l->backward};
}
/* C = op(A) op(B), A transposed (ta) only for a weight's gradient, which
 * accumulates (C +=): timed so where measured, priced so from a datasheet */
static inline void gemm(op_list *l, int64_t m, int64_t n, int64_t k, int ta, int tb, double count,
                        double es) {
  add(l, GEMM, m, n, k, ta, tb, count, 2.0 * (double)m * (double)n * (double)k,
      es * (double)(m * k + k * n + m * n));
}
/* n elements read and written `passes` times: the planner's generic pass;
 * a lesson's passes are the kernels it calls (op_kernel): 1 dt_zero, 2
 * dt_copy, 3 dt_add, and ew_scale's dt_scale (a copy's bytes, s[2] 1) */
static inline void ew(op_list *l, int64_t n, int passes, double count, double es) {
  add(l, EW, n, passes, 0, 0, 0, count, (double)n * (passes - 1), es * (double)n * passes);
}
static inline void ew_scale(op_list *l, int64_t n, double count, double es) {
  add(l, EW, n, 2, 1, 0, 0, count, (double)n, es * (double)n * 2);
}

#endif
