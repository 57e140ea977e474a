/* shape.h: a mesh's shape, what it needs of the model, and its groups as
 * built (shape.c), on any mesh's sizes n and coordinates at: lesson 12's
 * transformer and lesson 14's GPT take them alike. */
#ifndef MESH_SHAPE_H
#define MESH_SHAPE_H

#include "topology.h"
#include "train.h"

/* The sizes n (the flags: 0 for the free axes, which take the ranks left
 * over, topology.c's rule), for a job of N ranks; dt_fail says what is wrong. */
void mesh_shape(int64_t *n, int64_t N);
/* What the mesh n cannot split (heads, hidden units, layers, the sequence in
 * cp or 2 cp chunks, the batch into dp x M microbatches): dt_fail says which */
void mesh_check(const int64_t *n, int64_t M, int zigzag, const dt_train_config *c);
/* Every communicator holds the ranks the coordinates say, in their order, or
 * dt_fail names the first group that does not, beside the right ones; then
 * names each communicator by its axis ("tp", ..., "dp x cp"), as the
 * watchdog reports a stuck call. axis[a] along a, dc along dp x cp. */
void mesh_verify(dt_comm *world, dt_comm *const *axis, dt_comm *dc, const int64_t *n,
                 const int64_t *at);
/* The ranks that share rank r's group along axis a (DC: dp x cp) on the mesh
 * n of N ranks, as the coordinates define it, appended to buf as "{4, 5}". */
void mesh_group(const int64_t *n, int64_t N, int64_t r, int a, char *buf, size_t len);

#endif
