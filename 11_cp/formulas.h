/* formulas.h: 11_cp's bytes and memory per rank as formulas of the sizes
 * alone (formulas.c): what report.c prints beside its counters, and what
 * 13_plan predicts 11 with. The counters are the other side of the check. */
#ifndef CP_FORMULAS_H
#define CP_FORMULAS_H

#include <stdint.h>

/* Attention's bytes per step of one rank, want[0] forward and want[1]
 * backward; returns the ring's messages (-1 for Ulysses): L layers, N
 * ranks, R rows of D floats (es bytes each). The ring sends [K|V] (2RD) N-1 hops forward; backward
 * [K|V] again N-1 hops and [dK|dV] N hops home. Ulysses: 4 all-to-alls of RD each way, (N-1)/N of
 * them leaving. */
int64_t cp_attention_bytes(int64_t L, int64_t N, int64_t R, int64_t D, int64_t es, int ulysses,
                           int64_t want[2]);
/* The gradients' all-reduce: 2(N-1)/N x P x es bytes, in whole bytes */
int64_t cp_gradient_bytes(int64_t N, int64_t P, int64_t es);
/* What attention keeps and moves per rank, in floats (report.c's first
 * line): q, k, v, o of L layers, their log-sum-exps, a chunk's block (C
 * tokens), the ring's [K|V] and [dK|dV] in flight or Ulysses' head-split
 * rows; A heads, `half`: 16-bit wire copies. */
int64_t cp_attention_floats(int64_t L, int64_t R, int64_t D, int64_t A, int64_t C, int ulysses,
                            int half);
/* Memory per rank by kind, indexed by dt.h's tags (DT_PARAMS .. DT_DATA):
 * the whole model P = L(4D^2 + 2DH) floats, its gradients, AdamW's m and v,
 * the activations of R rows (H the MLP's width), the wire's buffers, the
 * targets. */
void cp_memory(int64_t L, int64_t R, int64_t D, int64_t H, int64_t A, int64_t C, int ulysses,
               int half, int adamw, int64_t *mem);

#endif
