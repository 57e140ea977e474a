/* hierarchical.h: --hierarchical's traffic report for 05_dp. */
#ifndef DP_HIERARCHICAL_H
#define DP_HIERARCHICAL_H

#include "train.h"

/* The ranks by node (dt_nodes_split), their communicators' time counted
 * in the run's; dt_fail with overlap or compression (`conflict`). */
dt_nodes *hierarchical_split(dt_run *r, int conflict);
void hierarchical_free(dt_nodes *n); /* NULL: nothing */
/* What crosses between nodes per step (S = P x es bytes of gradients),
 * beside the flat all-reduce's bytes; rank 0 leads node 0. */
void hierarchical_report(const dt_nodes *n, uint64_t P, size_t es, uint64_t steps);

#endif
