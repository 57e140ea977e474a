/* mesh.h: what the files of 12_mesh share: the rank's state, as 05-11 call
 * it the model (the mesh's sizes, this rank's coordinates and communicators,
 * its piece of the model, the pieces it composes), and the views of a layer's
 * weights and of what a pipeline stage keeps per microbatch in flight. */
#ifndef MESH_H
#define MESH_H

#include "06_fsdp/shard.h"
#include "07_tp/tensor.h"
#include "09_pp/schedule.h"
#include "09_pp/stash.h"
#include "09_pp/timeline.h"
#include "11_cp/ring.h"
#include "shape.h"
#include "table.h"
#include "topology.h"
#include "train.h"

typedef struct {
  /* the mesh: its sizes, this rank's place and communicators (shape.c) */
  dt_comm *world, *axis[AXES]; /* axis[a]: the ranks that differ from this one in a alone */
  dt_comm *dc;                 /* data x context: the ranks that hold the same weights */
  int64_t n[AXES], at[AXES];   /* the mesh's sizes, this rank's coordinates */
  int64_t zero;                /* --zero 1: the optimizer state sharded over dp x cp */
  int gpipe, zigzag, zb;       /* --schedule gpipe, zb1 (ZB-H1: zb.c); --split zigzag */
  /* the sizes of this rank's share */
  int64_t V, Lc;                 /* --virtual-stages: V chunks of Lc layers (09's interleave.c) */
  int64_t L, l0, D, H, A, W, Hs; /* L layers from l0 here; this tp rank's A heads, W = D/tp
                                  * columns of Wq, Wk, Wv (rows of Wo) and Hs = H/tp units */
  int64_t M, Bm, R;              /* M microbatches of Bm sequences: R rows here each */
  int64_t n_layer, ld;           /* a layer's floats here, 4DW + 2DHs; w's layer stride */
  /* the weights, and the earlier lessons' pieces, each on its axis */
  float *w, *g; /* layer l's [Wq | Wk | Wv | Wo | W1 | W2] shards at l x ld (mesh_weights) */
  fsdp f;       /* --zero 1: the optimizer's shards along dc (06) */
  cp_attn cr;   /* the ring along cp, on this tp rank's heads (11) */
  stashes st;   /* per microbatch in flight: x_0, then each layer's (mesh_acts) */
  action *plan; /* this stage's schedule (09) */
  int nplan;
  pp_event *ev; /* with chunks, its exchanges (09's pp_events), nev of them; T slots */
  int nev, T;
  timeline *tl;  /* its actions, timed: the bubble (09) */
  dt_wire wire;  /* what activations travel in along tp and pp (--precision) */
  dt_wire grads; /* what the gradients travel in along dp x cp (without --zero 1) */
  /* backward's scratch, the step's data (buffers.c) */
  float *dx, *dnext, *dh, *dout, *dqkv; /* [R,D] x 2, [R,Hs], [R,W], 3[R,W] */
  float *bx, *by;   /* the step's inputs (first stage) and targets (last), M x [R,D] */
  int64_t *samples; /* this data rank's sequences of the step */
  int64_t *keys;    /* M x [R]: each row's key, and where the forward's sit (the check's) */
  dt_rows rows;     /* the microbatch's keys, for the check's record of ReLU's decisions */
} model;

/* Layer l's weights on this rank, its tp shard: Wq, Wk, Wv [D,W] (its
 * heads' columns), Wo [W,D] (their rows), W1 [D,Hs], W2 [Hs,D]; of m->w, or
 * their gradients of m->g. */
typedef struct {
  float *wq, *wk, *wv, *wo, *w1, *w2;
} layer_weights;

/* One layer's activations of a microbatch, in its slot: the input x, q, k,
 * v, o [R,W], lse [R,A], u = x + attention [R,D], right after it the
 * output x' [R,D] (the MLP's dt_acts sees u as its x_0 and x' as x_1), and
 * the MLP's a, h [R,Hs]. */
typedef struct {
  float *x, *q, *k, *v, *o, *lse, *u, *a, *h;
} layer_acts;

/* buffers.c: the slots, the scratch and the data (report.c's formulas) */
void mesh_buffers(model *m, const dt_train_config *c);
/* Layer lg of the model as this rank holds it, [Wq | Wk | Wv | Wo | W1 | W2]
 * of its tp shard (07), [lo, hi) of it at off of the run's segment seg */
void mesh_place_layer(const model *m, dt_run *r, int seg, int64_t off, int64_t lg, int64_t lo,
                      int64_t hi);
layer_weights mesh_weights(const model *m, float *w, int64_t l); /* layer l of m->w or m->g */
layer_acts mesh_acts(const model *m, float *slot, int64_t l);    /* layer l of a slot */
dt_acts mesh_mlp(const model *m, layer_acts p, int64_t l);       /* its MLP, for 07's pieces */
size_t mesh_out(const model *m); /* where a slot holds the chunk's output x_Lc */
/* Local layer j's place in the whole model: the stage's run of layers, or
 * with V chunks chunk j / Lc's, virtual stage (j / Lc) pp + s's */
int64_t mesh_layer(const model *m, int64_t j);
/* zb.c: --schedule zb1's backward of layer l of a slot, split: B, the
 * input's gradient from m->dx's (left in m->dx), keeping what W needs
 * after the slot's layers (report.c's formula: L(2RD + 3RW) floats); W,
 * the weights' gradients added to m->g */
void mesh_zb_input(model *m, float *slot, int64_t l);
void mesh_zb_weights(model *m, float *slot, int64_t l);
/* report.c: bytes per axis, time per axis, memory */
void mesh_report(model *m, dt_run *r);

#endif
