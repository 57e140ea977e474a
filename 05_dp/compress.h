/* compress.h: --compress topk:R for 05_dp (compress.c). */
#ifndef DP_COMPRESS_H
#define DP_COMPRESS_H

#include "train.h"

typedef struct topk topk;
/* Parse "topk:R" and make the buffers, the residual laid out like segment
 * seg's gradients (checkpointed per rank); dt_fail on what it cannot run
 * with (16 bits, buckets or overlap: `bucketed`). The run's check becomes
 * one of convergence: the gradients are not the exact ones. */
topk *topk_parse(const char *spec, dt_run *r, int seg, size_t P, int bucketed);
void topk_describe(const topk *t);
/* Replaces the all-reduce: g becomes the average of every rank's top k. */
void topk_average(topk *t, dt_comm *world, float *g);
void topk_report(const topk *t, dt_comm *world, uint64_t steps);
void topk_free(topk *t);

#endif
