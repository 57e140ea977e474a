/* state.h: what the files of 14_gpt share: the rank's state, as 05-12 call
 * it the model, in three parts: what the mesh is (12's coordinates and
 * communicators), what the weights are (this rank's piece of the GPT and
 * of the vocabulary, one buffer), what a step holds (its microbatches, the
 * slots a pipeline stage keeps in flight, the scratch, the tokens); the
 * views of the weights; each file's entry points. Apart from gpt.c, the
 * lesson, so that every file can include it and none calls back up. */
#ifndef GPT_STATE_H
#define GPT_STATE_H

#include "06_fsdp/shard.h"
#include "07_tp/tensor.h"
#include "09_pp/schedule.h"
#include "09_pp/stage.h"
#include "09_pp/stash.h"
#include "09_pp/timeline.h"
#include "11_cp/ring.h"
#include "12_mesh/shape.h"
#include "12_mesh/table.h"
#include "12_mesh/topology.h"
#include "defaults.h" /* gpt_defaults */
#include "formulas.h" /* gpt_share */
#include "train.h"

/* The classes of what a rank holds, by who else holds the same elements:
 * tp shards (the layers' matrices), the vocabulary's rows (wte's slice, on
 * the first and the last stage), the tp replicas (the gains, wpe). */
enum { SHARDS, VOCAB, REPLICAS, CLASSES };

/* What the mesh is (12): this rank's coordinates and communicators */
typedef struct {
  dt_comm *world, *axis[AXES]; /* axis[a]: the ranks that differ from this one in a alone */
  dt_comm *dc;                 /* data x context: the ranks that hold the same weights */
  dt_comm *emb; /* the first and the last stage of this (dp, cp, tp): wte's two copies */
  int64_t n[AXES], at[AXES];
  int first, last; /* this stage holds the embedding, the head */
} gpt_mesh;

/* What the weights are: this rank's share of the GPT and of the
 * vocabulary, one buffer by class (buffers.c) */
typedef struct {
  int64_t L, l0, D, H, A, W, Hs, S; /* L layers from l0; A heads, W = D/tp, Hs = H/tp units */
  int64_t chunks, Lc;         /* --virtual-stages V: V chunks of Lc layers (09's interleave.c) */
  int64_t V, Vs, v0;          /* the vocabulary: this tp rank's rows [v0, v0 + Vs), Vs = V/tp */
  int64_t nl, nw;             /* a layer's matrices here, 4DW + 2DHs; all of this rank's floats */
  int64_t at_of[CLASSES + 1]; /* where each class starts in w (the last: n) */
  float *w, *g;               /* one buffer each (fsdp's with --zero 1) */
  int64_t zero;               /* --zero 1: the optimizer state sharded over dp x cp (06) */
  fsdp f;                     /* its shards along dc */
  dt_wire grads; /* what gradients travel in: dp x cp, the tied weight's, the gains' (wires.c) */
} gpt_weights;

/* What a step holds: its microbatches' rows, the plan that walks them, a
 * slot each in flight, backward's scratch, the tokens */
typedef struct {
  int64_t M, Bm, R, Rs;   /* M microbatches of Bm sequences: R rows each, Rs of them held */
  int64_t mine;           /* the first of the Rs rows (sequence parallelism's share; else 0) */
  int64_t per_layer, out; /* a layer's floats in a slot (formulas.c's); where x_L sits there */
  int64_t kept;           /* where zb1's gradients kept for W start in a slot (layer.c) */
  int gpipe, zigzag, zb;  /* 09's schedule (zb: ZB-H1), 11's split */
  int sp, recompute;      /* --sequence-parallel, --recompute (layer.c) */
  cp_attn cr;             /* the ring along cp, on this tp rank's heads (11) */
  stashes st;             /* per microbatch in flight: x_0, each layer's, the head's (buffers.c) */
  action *plan;           /* this stage's schedule (09) */
  int nplan;
  pp_event *ev; /* with chunks, its exchanges (09's pp_events), nev of them; T slots */
  int nev, T;
  timeline *tl; /* its actions, timed: the bubble (09) */
  dt_wire wire; /* what the residual stream's rows travel in along tp and pp (--precision) */
  float *dx, *dnext, *dn, *full, *dfull, *dh, *du, *dout, *dqkv, *dlogits, *layer; /* scratch */
  int32_t *tokens, *targets; /* M x [R] (first stage, last stage), the backend's */
  int32_t *windows;          /* host: [Bm, S+1], then the tokens, targets staged */
  dt_counter ce[2];          /* the cross-entropy's all-reduces on tp: the max, the sums */
} gpt_step;

/* The rank's state, as 05-12 call it the model */
typedef struct {
  gpt_mesh mesh;
  gpt_weights weights;
  gpt_step step;
} model;

/* The vocabulary's rows [Vs, D]; the stage's gains, ln1 ln2 ... (ln_f on
 * the last stage: [D]), 2LD (+ D) of them; wpe [S, D] (first stage) */
static inline float *gpt_wte(const model *m, float *w) { return w + m->weights.at_of[VOCAB]; }
static inline float *gpt_gains(const model *m, float *w) { return w + m->weights.at_of[REPLICAS]; }
static inline int64_t gpt_gains_n(const model *m) {
  return (2 * m->weights.L + m->mesh.last) * m->weights.D;
}
static inline float *gpt_lnf(const model *m, float *w) {
  return gpt_gains(m, w) + 2 * m->weights.L * m->weights.D;
}
static inline float *gpt_wpe(const model *m, float *w) { return gpt_gains(m, w) + gpt_gains_n(m); }

/* gpt.c: an all-reduce over tp of the cross-entropy's pieces (n floats of
 * buf, op), counted on the report's own row, not tp's all_reduce (activ) */
void gpt_pieces(model *m, float *buf, int64_t n, dt_op op, dt_counter *row);

/* buffers.c: the weights' buffer and its places in the whole model, the
 * slots, the scratch, the step's tokens' buffers (formulas.c counts them) */
void gpt_buffers(model *m, dt_run *r);
/* This rank's share as formulas.c takes it (the slot, the report's rows) */
gpt_share gpt_share_here(const model *m, const dt_run *r);

/* tokens.c: the step's windows to this rank's rows: tokens (first stage)
 * and targets (last) of every microbatch, row b Sl + i at its global
 * position (11's chunks); the positions' embedding of rows [r0, r0 + n)
 * of a microbatch added to out (forward), or their gradient added to dwpe
 * (backward) */
void gpt_tokens(model *m, const dt_train_config *c, int64_t step);
void gpt_positions(const model *m, const float *wpe, int64_t r0, int64_t n, float *out);
void gpt_positions_backward(const model *m, const float *dout, int64_t r0, int64_t n, float *dwpe);

/* layer.c: layer l of a microbatch's slot, forward and backward (with
 * --recompute backward runs its forward again first); tensor
 * parallelism's exchanges of the residual stream, which the embedding and
 * the head share. With --sequence-parallel a rank holds Rs = R/tp rows of
 * it: gpt_gather all-gathers its own rows (own, [Rs,D], possibly in place
 * in full) into full [R,D] and returns full; gpt_reduce reduce-scatters a
 * partial sum [R,D] into own [Rs,D] and returns own. Without, gather
 * returns own (every row is there) and reduce all-reduces part in place
 * (07's tp_sum) and returns it. gpt_partial: where a row-parallel product
 * goes before its reduce (out itself without). gpt_sum_gains adds the
 * gains' gradients over tp (each rank saw its own rows). */
void gpt_layer_forward(model *m, float *slot, int64_t c, int64_t l);  /* chunk c's layer l */
void gpt_layer_backward(model *m, float *slot, int64_t c, int64_t l); /* zb1: B alone */
void gpt_layer_weights(model *m, float *slot, int64_t c, int64_t l);  /* zb1: W */
float *gpt_gather(model *m, const float *own, float *full);
float *gpt_reduce(model *m, float *part, float *own);
float *gpt_partial(const model *m, float *out);
void gpt_sum_gains(model *m);
/* What the mesh cannot run, said before any work: sequence parallelism's
 * rows that do not split over tp, zb1 with --recompute */
void gpt_check(const model *m, const dt_train_config *c);

/* chunks.c: 09's refusals of --schedule with --virtual-stages (exit 2,
 * before any work); the stage's plan, 09's for --schedule, or with V chunks
 * (--virtual-stages) its interleaved 1F1B and exchanges; local layer j's
 * place in the whole model; one step of the plan through 09's walk */
void gpt_plan_check(const model *m, const dt_train_config *c, const char *schedule);
void gpt_plan(model *m);
int64_t gpt_layer(const model *m, int64_t j);
double gpt_walk(const model *m, const pp_stage *stage, dt_run *r);

/* wires.c: --precision's wires (none in fp32, nor where nothing travels);
 * the report's comm row's formula, in the bytes of buf; the copies of every
 * replicated weight compared, element for element (with --zero 1 in 16
 * bits a shard's owner keeps the fp32 master, the others its 16-bit copy:
 * compared in 16 bits), printed */
void gpt_wires(model *m, const dt_train_config *c);
const char *gpt_comm_how(const model *m, char *buf, size_t n);
void gpt_replicas(const model *m);

/* report.c: after the run the run's summary, each axis's calls and bytes,
 * memory, beside formulas.c's (nothing after --steps 0); throughput.c: the
 * throughput and its MFU */
void gpt_report(model *m, dt_run *r);
void gpt_mfu(const model *m, const dt_run *r);

#endif
