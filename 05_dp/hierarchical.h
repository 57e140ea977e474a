/* hierarchical.h: --hierarchical's traffic report for 05_dp. */
#ifndef DP_HIERARCHICAL_H
#define DP_HIERARCHICAL_H

#include "buckets.h"
#include "train.h"

/* The ranks by node (dt_nodes_split), their communicators' time counted
 * in the run's; dt_fail with overlap or compression (`conflict`). */
dt_nodes *hierarchical_split(dt_run *r, int conflict);
void hierarchical_free(dt_nodes *n); /* NULL: nothing */
/* What crosses between nodes per step (the buckets k of P gradients), beside
 * the flat all-reduce's bytes; rank 0 leads node 0. */
void hierarchical_report(const dt_nodes *n, const buckets *k, uint64_t P, uint64_t steps);

#endif
