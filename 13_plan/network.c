/* network.c: one collective on a cluster, as NCCL moves its bytes.
 *
 * NCCL's ring is the lesson's (cost.c's collective_seconds): 2(n-1) steps
 * for an all-reduce, n-1 for a gather or a scatter, each rank sending its
 * share over one link a step. What this file gives it is where the links
 * are, as a channel (alpha a step, beta a byte) and a fixed latency (NCCL's
 * own cost model, src/graph/tuning.cc and topo.h):
 *   bandwidth  a ring inside a node runs at the GPU's NVLink bandwidth
 *              (NCCL's: its links x 20 GB/s, A100; x 20.6, H100). Across
 *              nodes, each of NCCL's channels crosses between two nodes
 *              once, and the channels spread over the node's NICs: a
 *              group with `local` ranks a node gets local/gpus_per_node of
 *              the node's NICs (the other groups of the node use the rest
 *              at the same time), so its bus bandwidth is the lesser of
 *              NVLink and those NICs together, one NIC for a group of one
 *              GPU a node (tp inside a node, dp across). The algorithm
 *              bandwidth a caller sees is the bus bandwidth over
 *              2(n-1)/n (all-reduce) or (n-1)/n: the ring's factor.
 *   latency    NCCL's base 8.4 us a collective (Simple protocol), then a
 *              step inside a node at the NVLink hop's latency and a step
 *              between nodes at the network's: 2(nodes - 1) of them for an
 *              all-reduce, nodes - 1 for a gather or a scatter.
 *   tree       for an all-reduce across nodes NCCL may take its double
 *              binary tree: a chain inside each node and log2(nodes) hops
 *              across, down and up again, at the bus bandwidth x 0.92 x
 *              0.85 (tuning.cc's refinements) carrying the buffer twice;
 *              NCCL picks whichever is faster, and so does this.
 * A sendrecv is one message: NVLink's latency and bandwidth inside a node,
 * one NIC's across. */
#include <math.h>

#include "network.h"

static const double nccl_base = 8.4e-6; /* tuning.cc: baseLat, Simple */

int64_t group_local(const mesh *x, int a, int64_t gpn) {
  int64_t stride[AXES], n = 1, local = 0; /* ranks: tp fastest, then cp, pp, dp */
  for (int b = TP; b >= DP; b--) {
    stride[b] = n;
    n *= x->n[b];
  }
  int64_t outer = a == DC ? x->n[DP] : 1, inner = a == DC ? x->n[CP] : x->n[a];
  int first = a == DC ? CP : a;
  for (int64_t i = 0; i < outer; i++)
    for (int64_t j = 0; j < inner; j++) local += i * stride[DP] + j * stride[first] < gpn;
  return local;
}

/* The bus bandwidth of a group: NVLink inside a node; across nodes the
 * node's NICs its share (local of gpus_per_node), NVLink's at most. */
static double bus(int64_t n, int64_t local, const machine *c) {
  double nvlink = 1 / c->intra.beta, nic = 1 / c->inter.beta;
  if (local >= n) return nvlink;
  return fmin(nvlink, c->nics * (double)local / (double)c->gpus_per_node * nic);
}

channel nccl_ring(int coll, int64_t n, int64_t local, const machine *c, double *base) {
  *base = 0;
  if (coll == P2P) return local > 1 ? c->intra : c->inter;
  if (n <= 1) return (channel){0, 0};
  double N = (double)n, nodes = ceil(N / (double)local);
  double steps = coll == AR ? 2 * (N - 1) : N - 1, across = (coll == AR ? 2 : 1) * (nodes - 1);
  *base = nccl_base;
  return (channel){((steps - across) * c->intra.alpha + across * c->inter.alpha) / steps,
                   1 / bus(n, local, c)};
}

double nccl_tree_seconds(int64_t n, int64_t local, double bytes, const machine *c) {
  double nodes = ceil((double)n / (double)local);
  if (nodes < 2) return HUGE_VAL;
  return nccl_base + 2 * (((double)local - 1) * c->intra.alpha + log2(nodes) * c->inter.alpha) +
         2 * bytes / (bus(n, local, c) * 0.92 * 0.85);
}
