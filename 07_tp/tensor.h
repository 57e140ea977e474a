/* tensor.h: the pieces of tensor parallelism (Megatron's MLP) that lesson 07
 * runs and lesson 08 composes with FSDP (tensor.c). A block's H hidden units
 * are cut into T slices of Hs = H/T: shard t holds W1's columns and W2's
 * rows t*Hs .. (t+1)*Hs-1. Every rank of a tensor-parallel group sees the
 * same rows of the batch, so its block output and its input gradient are
 * partial sums over the group. */
#ifndef TP_TENSOR_H
#define TP_TENSOR_H
#include "train.h"

/* H/T hidden units per shard: --hidden must split over the T shards, or
 * dt_fail says so (exit 2, before any work). */
int64_t tp_slice(const dt_train_config *c, int T);

/* Megatron's g (forward) and f (backward): the partial [rows, D] sums of the
 * group, all-reduced (SUM) in place over tp in --precision's wire format.
 * A SUM: each partial is a piece of the value, not an estimate of it. */
void tp_sum(dt_comm *tp, const dt_wire *wire, float *buf, size_t n);

/* Block l on this rank's slice (w1 [D, Hs], w2 [Hs, D]): the partial output,
 * summed over tp, then the residual x_l added once, not once per rank. */
void tp_forward(dt_acts *act, int64_t l, const float *w1, const float *w2, dt_comm *tp,
                const dt_wire *wire);
/* Its mirror: act->dx, the output's gradient, becomes the input's: the
 * partial da_s W1_s^T summed over tp, plus the residual path. The weight
 * gradients, added to g1 and g2, are complete on their own rank. */
void tp_backward(dt_acts *act, int64_t l, const float *w1, const float *w2, float *g1, float *g2,
                 dt_comm *tp, const dt_wire *wire);

/* Where shard t (of T) of a tensor of the whole model (dt_model_tensor)
 * sits: its columns t cols/T .. (by_rows 0) or its rows (by_rows 1),
 * flattened row-major; elements [lo, hi) of that flat shard (clamped to it)
 * lie from offset off of segment seg (off: where element lo would be).
 * Returns the shard's size, so that shards of several tensors laid end to
 * end are placed by calling it for each, lo and hi less the sizes before. */
int64_t tp_place_shard(dt_run *r, int seg, int64_t off, const dt_tensor *x, int by_rows, int t,
                       int T, int64_t lo, int64_t hi);
/* Shard t of layer l of the MLP, its 2 x D x Hs elements flattened as
 * [W1[:, t*Hs:(t+1)*Hs] (D x Hs, row-major) | W2[t*Hs:(t+1)*Hs, :] (Hs x D)];
 * elements [lo, hi) of it lie at offset off of segment seg (07: the whole
 * shard, lo 0, hi 2DHs; 08: a piece). */
void tp_place(dt_run *r, int seg, int64_t off, int64_t l, int t, int T, int64_t lo, int64_t hi);
#endif
