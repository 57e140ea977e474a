/* formulas.h: 05_dp's bytes and memory per rank as formulas of the sizes
 * alone (formulas.c): what dp.c prints beside its counters, and what
 * 13_plan predicts 05 with. The counters are the other side of the check. */
#ifndef DP_FORMULAS_H
#define DP_FORMULAS_H

#include <stddef.h>
#include <stdint.h>

/* Bytes one rank sends in a step when each of n buckets of counts[i]
 * elements (es bytes each) is ring all-reduced over N ranks, as the
 * counters add them: 2(N-1)/N x a bucket's bytes, in whole bytes per call,
 * so the sum can fall short of 2(N-1)/N x P x es (*rounded: it did). */
uint64_t dp_ring_bytes(const size_t *counts, int n, uint64_t N, uint64_t es, int *rounded);
/* Memory per rank by kind, indexed by dt.h's tags (DT_PARAMS .. DT_ACTIV):
 * the whole model, P = 2LDH floats, its gradients (and as much again for
 * top-k's residual), AdamW's m and v (none for sgd), one micro-step's
 * activations of b rows (dt_acts_bytes). */
void dp_memory(int64_t L, int64_t D, int64_t H, int64_t b, int adamw, int residual, int64_t *mem);

#endif
