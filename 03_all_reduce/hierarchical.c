/* hierarchical.c: lesson 03's all-reduce across nodes (--hierarchical,
 * --ranks-per-node K).
 *
 * A cluster is nodes of a few GPUs: fast links inside, a slower network
 * between. A flat ring crosses the network at every node edge, each edge
 * carrying 2(N-1)/N*S. The hierarchical all-reduce (common/comm/nodes.c) reduces
 * inside each node to its leader, all-reduces among the M leaders only, then
 * broadcasts inside each node: only the leaders' 2(M-1)/M*S each cross the
 * network. The nodes are the real ones (ranks sharing memory: machines of a
 * cluster, or tools/cluster.sh's emulated nodes), or K consecutive ranks. */
#include <stdio.h>
#include <stdlib.h>

#include "all_reduce.h"

/* The ring edges that cross between nodes (nodes named by their lowest rank);
 * *crosses: whether this rank's own sends do. */
static int node_edges(dt_comm *w, const dt_nodes *nodes, int *crosses) {
  int N = w->size, first = w->rank, edges = 0;
  int *lowest = dt_host_alloc((size_t)N, sizeof(int));
  dt_host_all_reduce(nodes->node, &first, 1, DT_I32, DT_MIN);
  dt_host_gather(w, &first, lowest, 1, DT_I32, 0);
  dt_host_broadcast(w, lowest, (size_t)N, DT_I32, 0);
  *crosses = lowest[(w->rank + 1) % N] != first;
  for (int r = 0; r < N; r++) edges += lowest[(r + 1) % N] != lowest[r];
  free(lowest);
  return edges;
}

/* Both ways at count elements, call by call in turn (load from other
 * processes hits both alike): time, correctness, bytes across nodes (all
 * ranks together) next to the formulas. Returns the problems found. */
int64_t compare_hierarchical(dt_comm *w, const algorithms *alg, int K, size_t count,
                             const buffers *b, size_t seg, int64_t warmup, int64_t iters) {
  int N = w->size, crosses;
  dt_nodes nodes = dt_nodes_split(w, K);
  int M = nodes.nodes, edges = node_edges(w, &nodes, &crosses);
  double *t = dt_host_alloc(2 * (size_t)iters, sizeof(double)), med[2];
  int64_t across[4] = {0, 0, 0, 0}; /* measured flat, hierarchical; predicted flat, hierarchical */
  int64_t wrong = 0;
  dt_comm_reset(w);
  dt_comm_reset(nodes.leaders);
  for (int64_t it = 0; it < warmup + iters; it++)
    for (int v = 0; v < 2; v++) {
      dt_copy(b->buf, b->input, count * sizeof(float));
      dt_barrier(w);
      double t0 = dt_now();
      if (v == 0)
        alg->run(w, RING, b->buf, count, b->scratch, seg);
      else
        dt_all_reduce_hierarchical(&nodes, b->buf, count, DT_F32, DT_SUM);
      dt_sync();
      if (it >= warmup) t[v * iters + it - warmup] = dt_now() - t0;
      if (it == warmup + iters - 1) {
        dt_copy_to_host(b->out, b->buf, count * sizeof(float));
        for (size_t i = 0; i < count; i++) wrong += b->out[i] != b->want[i];
      }
    }
  for (int v = 0; v < 2; v++) med[v] = median(t + v * iters, iters);
  uint64_t calls = (uint64_t)(warmup + iters);
  if (crosses) {
    across[0] = (int64_t)(w->count[DT_SENDRECV].bytes_sent / calls);
    across[2] = (int64_t)alg->predicted_bytes(w, RING, count);
  }
  if (nodes.leader) {
    across[1] = (int64_t)(nodes.leaders->count[DT_ALL_REDUCE].bytes_sent / calls);
    across[3] = (int64_t)(2 * (uint64_t)(M - 1) * count * sizeof(float) / (uint64_t)M);
  }
  dt_host_all_reduce(w, across, 4, DT_I64, DT_SUM);
  dt_host_all_reduce(w, med, 2, DT_F64, DT_MAX);
  dt_host_all_reduce(w, &wrong, 1, DT_I64, DT_SUM);
  /* the formulas; the exact per-rank predictions (chunk sizes, and the
   * model's bytes per call) differ from them only when N or M does not
   * divide the count */
  double S = (double)(count * sizeof(float)), flat = edges * 2.0 * (N - 1) / N * S;
  double hier = 2.0 * (M - 1) * S;
  char edges_text[32] = "M";
  if (edges != (M > 1 ? M : 0)) snprintf(edges_text, sizeof edges_text, "%d edges", edges);
  if (K)
    dt_print0("\nhierarchical all-reduce: %d emulated node(s) of %d ranks (--ranks-per-node %d), "
              "S = %llu bytes\n",
              M, K, K, (unsigned long long)(count * sizeof(float)));
  else
    dt_print0("\nhierarchical all-reduce: %d node(s), the ranks that share memory "
              "(--hierarchical), S = %llu bytes\n",
              M, (unsigned long long)(count * sizeof(float)));
  dt_print0("%-14s %10s %31s   %s\n", "variant", "median(us)", "bytes across nodes (all ranks)",
            "formula");
  dt_print0("%-14s %10.1f %31lld   %s x 2(N-1)/N x S = %.10g\n", "flat ring", med[0] * 1e6,
            (long long)across[0], edges_text, flat);
  dt_print0("%-14s %10.1f %31lld   M x 2(M-1)/M x S = %.10g (the leaders' library all-reduce: "
            "common's ring model)\n",
            "hierarchical", med[1] * 1e6, (long long)across[1], hier);
  dt_print0("flat / hierarchical = %.2f (medians of %lld calls each, taking turns); bytes "
            "bound per node link: %.3f\n",
            med[0] / med[1], (long long)iters,
            M > 1 && edges == M ? (2.0 * (N - 1) / N) / (2.0 * (M - 1) / M) : 1.0);
  dt_print0("checked: wrong elements over all ranks, both variants: %lld\n", (long long)wrong);
  free(t);
  dt_nodes_free(&nodes);
  return wrong + (across[0] != across[2]) + (across[1] != across[3]);
}
