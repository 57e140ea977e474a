/* table.h: what a mesh prints of itself (table.c): every rank's coordinates
 * and host, the groups of each axis, and a row of the bytes table, a kind of
 * call on one axis beside its formula. Lessons 12 and 14 print them alike. */
#ifndef MESH_TABLE_H
#define MESH_TABLE_H

#include "topology.h"
#include "train.h"

/* Rank 0 prints every rank's coordinates on the mesh n and its host, then
 * each axis's groups (collective over world). */
void mesh_table(dt_comm *world, const int64_t *n, const int64_t *at);
/* One row: calls of one kind on an axis, measured over `steps` steps beside
 * the formula's calls and bytes per step; recorded for --report-json under
 * "axis kind" (dp x cp as dp_cp); bad counts the rows that differ. */
void mesh_row(const char *axis, const char *what, dt_counter got, uint64_t steps, uint64_t calls,
              uint64_t bytes, const char *how, int *bad);
/* how with its " x E" (bytes an element, --precision's) as E's value, in buf
 * (n bytes): "x 4" in fp32, "x 2" in 16 bits */
const char *mesh_how(const char *how, int E, char *buf, size_t n);

#endif
