/* network.h: how NCCL moves a collective's bytes on a cluster's datasheet
 * (network.c), as the lesson's alpha-beta ring (cost.c) takes them. */
#ifndef PLAN_NETWORK_H
#define PLAN_NETWORK_H

#include "inputs.h"

/* the ranks of axis a's group (DC: dp x cp) that share a node */
int64_t group_local(const mesh *x, int a, int64_t gpus_per_node);
/* NCCL's ring over n ranks, `local` of them a node (a sendrecv: local > 1
 * when both ends share one): alpha a step and beta a byte for
 * collective_seconds, and *base, NCCL's fixed latency of a collective */
channel nccl_ring(int coll, int64_t n, int64_t local, const machine *c, double *base);
/* NCCL's tree all-reduce across nodes; HUGE_VAL inside one node */
double nccl_tree_seconds(int64_t n, int64_t local, double bytes, const machine *c);

#endif
