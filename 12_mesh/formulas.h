/* formulas.h: 12_mesh's calls, bytes and memory per rank as formulas of the
 * sizes alone (formulas.c): what report.c prints beside its counters, and
 * what 13_plan predicts 12 with. The counters are the other side of the
 * check. */
#ifndef MESH_FORMULAS_H
#define MESH_FORMULAS_H

#include <stdint.h>

#include "topology.h"

/* One axis's collective of a step: its calls and the bytes one rank sends */
typedef struct {
  int64_t calls, bytes;
} mesh_flow;
typedef struct {
  mesh_flow tp, cp, pp, grads, params; /* tp's all-reduces, cp's ring, pp's sendrecvs, dp x cp's
                                        * gradient all-reduce and (--zero 1) parameter gather */
} mesh_traffic;

/* The shape of one rank's share of the mesh n (topology.h): stage s of
 * n[PP], L layers there, M microbatches of R rows D wide, W = D/tp columns
 * of the attention's projections and A heads, Hs = H/tp hidden units, C
 * tokens a chunk of the ring, a layer's n_layer = 4DW + 2DHs floats, shard
 * its part of them along dp x cp with --zero 1 (0 without); wire16 1 where
 * --precision bf16|fp16 sends every message in 16 bits (0: fp32, 4 bytes). */
typedef struct {
  const int64_t *n;
  int64_t s, L, M, R, D, W, A, Hs, C, n_layer, shard;
  int gpipe, adamw, wire16;
  int64_t V; /* --virtual-stages: V chunks of L/V layers (09's interleaved 1F1B); 0 or 1: one */
  int zb;    /* --schedule zb1 (09's ZB-H1): a slot also keeps L(2RD + 3RW) for W */
} mesh_share;

/* With V > 1 or zb1 pp's calls are the plan's (09's pp_events,
 * pp_plan_zb), left 0 here. */
mesh_traffic mesh_traffic_of(const mesh_share *x);
/* Memory by kind, indexed by dt.h's tags (DT_PARAMS .. DT_DATA): the
 * stage's layers of its tp shard (padded shards with --zero 1), AdamW's m
 * and v, the live microbatches' slots and backward's scratch, the ring's
 * buffers (in 16 bits the ring's blocks as floats are activations, and the
 * 16-bit copies of what tp, pp and dp x cp send are communication buffers),
 * the first or last stage's data. */
void mesh_memory(const mesh_share *x, int64_t *mem);

#endif
