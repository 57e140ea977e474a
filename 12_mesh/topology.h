/* topology.h: the mesh as arithmetic (topology.c), no communicator in it:
 * 12_mesh builds one per axis on it, 13_plan prices meshes with it without
 * building any. */
#ifndef MESH_TOPOLOGY_H
#define MESH_TOPOLOGY_H

#include <stdint.h>

/* The axes, slowest first: rank = ((dp x PP + pp) x CP + cp) x TP + tp, so
 * that a tensor group's ranks are neighbours (one node's fast links). DC is
 * dp x cp, the ranks that hold the same weights, where the gradients meet;
 * NCOMM counts it with the four axes. */
enum { DP, PP, CP, TP, AXES, DC = AXES, NCOMM };
extern const char *const axis_name[NCOMM];  /* "dp", "pp", "cp", "tp", "dp x cp" */
extern const char *const axis_group[NCOMM]; /* "data", "pipeline", "context", "tensor", "dp x cp" */

/* The mesh's sizes n from the flags want: an axis given (want[a] > 0) keeps
 * its size, the free ones (0) take the ranks left over, a prime factor at a
 * time, round-robin from the fastest: tp, cp, pp, dp. Returns the product of
 * the axes given; the mesh is one of N ranks when that divides N and
 * topo_ranks(n) == N (the caller says which is wrong). n may be want. */
int64_t topo_fill(const int64_t *want, int64_t N, int64_t *n);
int64_t topo_ranks(const int64_t *n);
void topo_coords(const int64_t *n, int64_t r, int64_t *at); /* rank r's coordinates */
int64_t topo_size(const int64_t *n, int a);                 /* of a group along a (DC: dp x cp) */
/* Rank r's place in its group along a: its coordinate (DC: dp x CP + cp) */
int64_t topo_place(const int64_t *n, int64_t r, int a);
int topo_along(int a, int b); /* whether the group along a spans coordinate b */
/* The group along a that rank r belongs to, as one number: its other
 * coordinates (a's own left out; DC: dp and cp), the color of a split */
int64_t topo_group(const int64_t *n, int64_t r, int a);
/* Whether ranks r and s differ along a alone, and so share its group */
int topo_together(const int64_t *n, int64_t r, int64_t s, int a);

#endif
