/* nodes.c: ranks grouped by node, and the hierarchical all-reduce.
 *
 * A node is the set of ranks that share memory (MPI_COMM_TYPE_SHARED): on a
 * cluster one machine, on tools/cluster.sh one emulated node. Inside a node
 * ranks talk through shared memory (or NVLink); between nodes through the
 * network, usually the slowest link. The hierarchical all-reduce sends only
 * one rank per node across it: reduce inside each node to its leader,
 * all-reduce among the M leaders, broadcast inside each node. Each leader
 * then sends 2(M-1)/M x S across the network, where a flat ring over all N
 * ranks sends 2(N-1)/N x S across every node boundary it crosses. */
#define _POSIX_C_SOURCE 200809L
#define DT_COMMON_IMPL  /* the functions themselves, not the call-site macros */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm_internal.h"

#define NAME_LEN 64

/* "node0: 0-1, node1: 2-3": every node by hostname, with its world ranks,
 * in the order of their lowest rank. Nodes are told apart by the shared-
 * memory communicator, not by name: loopback nodes share one hostname. */
void dt_describe_nodes(MPI_Comm node, char *out, size_t cap) {
  int rank, size, id;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  DT_MPI(MPI_Allreduce(&rank, &id, 1, MPI_INT, MPI_MIN, node)); /* the node's lowest world rank */
  char mine[NAME_LEN] = {0}, proc[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  MPI_Get_processor_name(proc, &len);
  memcpy(mine, proc, (size_t)(len < NAME_LEN - 1 ? len : NAME_LEN - 1));
  char *names = malloc((size_t)size * NAME_LEN);
  int *ids = malloc((size_t)size * sizeof(int));
  CHECK_ALLOC(names);
  CHECK_ALLOC(ids);
  DT_MPI(MPI_Gather(mine, NAME_LEN, MPI_CHAR, names, NAME_LEN, MPI_CHAR, 0, MPI_COMM_WORLD));
  DT_MPI(MPI_Gather(&id, 1, MPI_INT, ids, 1, MPI_INT, 0, MPI_COMM_WORLD));
  size_t used = 0;
  out[0] = 0;
  for (int r = 0; rank == 0 && r < size && used + 1 < cap; r++) {
    if (ids[r] != r) continue; /* r is the lowest rank of its node: list that node */
    used +=
        (size_t)snprintf(out + used, cap - used, "%s%s:", used ? ", " : "", names + r * NAME_LEN);
    for (int q = r, first = 1; q < size && used + 1 < cap; q++) {
      if (ids[q] != r) continue;
      int run_end = q; /* consecutive ranks of this node print as a range */
      while (run_end + 1 < size && ids[run_end + 1] == r) run_end++;
      used += (size_t)snprintf(out + used, cap - used, run_end > q ? "%s%d-%d" : "%s%d",
                               first ? " " : ",", q, run_end);
      first = 0;
      q = run_end;
    }
  }
  if (used + 1 >= cap && cap > 4) strcpy(out + cap - 4, "...");
  free(names);
  free(ids);
}

dt_nodes dt_nodes_split(dt_comm *world, int ranks_per_node) {
  dt_nodes n = {0};
  int color = world->rank;
  if (ranks_per_node > 0) {
    color = world->rank / ranks_per_node;
  } else {
    MPI_Comm shared;
    DT_MPI(
        MPI_Comm_split_type(world->mpi, MPI_COMM_TYPE_SHARED, world->rank, MPI_INFO_NULL, &shared));
    int r = world->rank;
    DT_MPI(MPI_Allreduce(&r, &color, 1, MPI_INT, MPI_MIN, shared)); /* the node's lowest rank */
    MPI_Comm_free(&shared);
  }
  n.ranks = world->size;
  n.node = dt_comm_split(world, color, world->rank);
  n.leader = n.node->rank == 0;
  /* every rank takes part in the split; the non-leaders' communicator is
   * never used */
  n.leaders = dt_comm_split(world, !n.leader, world->rank);
  int lead = n.leader;
  DT_MPI(MPI_Allreduce(&lead, &n.nodes, 1, MPI_INT, MPI_SUM, world->mpi));
  snprintf(n.node->name, sizeof n.node->name, "node");
  snprintf(n.leaders->name, sizeof n.leaders->name, n.leader ? "node leaders" : "non-leaders");
  return n;
}

void dt_nodes_free(dt_nodes *n) {
  dt_comm_free(n->node);
  dt_comm_free(n->leaders);
  n->node = n->leaders = NULL;
}

void dt_all_reduce_hierarchical(const dt_nodes *n, void *buf, size_t count, dt_dtype t, dt_op op) {
  /* A mean over nodes of unequal size is not the mean of their means: sum
   * everywhere, divide by the total once. */
  dt_op sum = op == DT_AVG ? DT_SUM : op;
  dt_reduce(n->node, buf, buf, count, t, sum, 0);
  if (n->leader) dt_all_reduce(n->leaders, buf, buf, count, t, sum);
  dt_broadcast(n->node, buf, count, t, 0);
  if (op == DT_AVG) {
    if (t != DT_F32)
      dt_fatal(__FILE__, __LINE__, "dt_all_reduce_hierarchical",
               "average needs DT_F32: sum in 16 bits, scale in 32");
    dt_scale(buf, count, 1.0f / (float)n->ranks);
  }
}
