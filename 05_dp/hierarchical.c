/* hierarchical.c: what --hierarchical sends, for 05_dp. The all-reduce itself
 * is common's dt_all_reduce_hierarchical (lesson 03 builds it by hand): a
 * reduce inside each node, an all-reduce among the node leaders, a broadcast
 * inside each node, so only the leaders' bytes cross between nodes. */
#include <stdlib.h>

#include "hierarchical.h"

dt_nodes *hierarchical_split(dt_run *r, int conflict) {
  if (conflict) dt_fail("--hierarchical is blocking and dense: no --overlap or --compress");
  dt_nodes *n = dt_host_alloc(1, sizeof *n);
  *n = dt_nodes_split(r->world, 0);
  r->comms[0] = n->node;
  r->comms[1] = n->leaders;
  return n;
}

void hierarchical_free(dt_nodes *n) {
  if (!n) return;
  dt_nodes_free(n);
  free(n);
}

void hierarchical_report(const dt_nodes *n, const buckets *k, uint64_t P, uint64_t steps) {
  size_t es = dt_dtype_size(k->wire.type);
  dt_counter red = n->node->count[DT_REDUCE], bc = n->node->count[DT_BROADCAST];
  unsigned long long calls = (red.calls + bc.calls) / steps,
                     sent = (red.bytes_sent + bc.bytes_sent) / steps;
  if (n->node->size == 1) /* common returns at once from a collective of one rank */
    dt_print0(
        "  hierarchical           %d node%s; inside node 0 (1 rank) %llu reduce + broadcast "
        "calls/step, rank 0 sent %llu bytes/step (one rank: nothing to reduce or broadcast)\n",
        n->nodes, n->nodes == 1 ? "" : "s", calls, sent);
  else
    dt_print0(
        "  hierarchical           %d node%s; inside node 0 (%d ranks) %llu reduce + broadcast "
        "calls/step, rank 0 sent %llu bytes/step (common's ring model: the root sends the "
        "broadcast's P x %zu = %llu)\n",
        n->nodes, n->nodes == 1 ? "" : "s", n->node->size, calls, sent, es,
        (unsigned long long)(P * es));
  int leaders_rounded, flat_rounded;
  uint64_t leaders = buckets_ring_bytes(k, (uint64_t)n->nodes, &leaders_rounded),
           flat = buckets_ring_bytes(k, (uint64_t)n->ranks, &flat_rounded);
  dt_print0("  across nodes           bytes sent per leader per step %llu, formula 2(M-1)/M x P x "
            "%zu%s = %llu (a flat all-reduce: 2(N-1)/N x P x %zu%s = %llu per rank)\n",
            (unsigned long long)(n->leaders->count[DT_ALL_REDUCE].bytes_sent / steps), es,
            leaders_rounded ? ", rounded down per call" : "", (unsigned long long)leaders, es,
            flat_rounded ? ", rounded down per call" : "", (unsigned long long)flat);
}
