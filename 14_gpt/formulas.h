/* formulas.h: 14_gpt's calls, bytes, memory and FLOPs per rank as formulas
 * of the sizes alone (formulas.c): what report.c prints beside its
 * counters, and what 13_plan can predict 14 with. The counters are the
 * other side of the check. */
#ifndef GPT_FORMULAS_H
#define GPT_FORMULAS_H

#include <stdint.h>

#include "12_mesh/formulas.h" /* mesh_flow: a collective's calls and bytes a step */

typedef struct {
  mesh_flow activ;           /* tp: all-reduces of [R, D] (without sequence parallelism) */
  mesh_flow gather, scatter; /* tp, sequence parallelism: all-gathers, reduce-scatters of [Rs, D] */
  mesh_flow max, sums;     /* tp: the cross-entropy's all-reduces, each row's max, [sum | target] */
  mesh_flow gains;         /* tp, sequence parallelism: the gains' gradients */
  mesh_flow cp, pp;        /* 11's ring, 09's sendrecvs */
  mesh_flow grads, params; /* dp x cp: the gradients' all-reduce, (--zero 1) the shards' gather */
  mesh_flow emb;           /* the tied weight's two gradients, first and last stage */
} gpt_traffic;

/* One rank's share of the mesh n (12's topology.h): stage s of n[PP], L
 * layers there (from the first stage: first, last: it holds the embedding,
 * the head), M microbatches of R rows, Rs of them in its residual stream
 * (R/tp with sequence parallelism), D wide; W = D/tp columns of the
 * attention's projections and A heads, Hs = H/tp hidden units, C tokens a
 * chunk of the ring, Vs = V/tp rows of the vocabulary, S the context; nw
 * the floats it holds (the layers' tp shards 4DW + 2DHs each, its wte rows,
 * the gains, wpe), own the ones it steps (with --zero 1 its shard along dp
 * x cp, padded to shard; else nw); wire16 1 where --precision bf16|fp16
 * sends its messages in 16 bits (all but the cross-entropy's pieces; 0:
 * fp32, 4 bytes an element). */
typedef struct {
  const int64_t *n;
  int64_t s, L, M, R, Rs, D, W, A, Hs, C, Vs, S, nw, shard, own;
  int first, last, gpipe, adamw, sp, recompute, wire16;
  int64_t chunks; /* --virtual-stages V: V chunks of L/V layers (09's interleave.c); 0, 1: one */
  int zb;         /* --schedule zb1 (09's ZB-H1): a slot also keeps gpt_kept for W */
} gpt_share;

/* The share from the whole model's sizes, plain numbers: the mesh n, stage
 * s holding L layers, M microbatches of R rows, C tokens a chunk, the
 * model's D, H, heads, V and S, the rank's place dc along dp x cp, --zero
 * 1 and --sequence-parallel (the flags that shape no size are the
 * caller's). One spelling for 14 (buffers.c) and 13's table of it. */
typedef struct {
  const int64_t *n;
  int64_t s, L, M, R, C, D, H, heads, V, S, dc;
  int zero, sp;
} gpt_sizes;
gpt_share gpt_share_sized(const gpt_sizes *z);
/* where each class of the rank's buffer starts (buffers.c: the tp shards,
 * the vocabulary, the replicas: the gains then wpe), at[3] its end, nw */
void gpt_classes(const gpt_share *x, int64_t at[4]);

/* With V > 1 or zb1 pp's calls are the plan's (09's pp_events,
 * pp_plan_zb), left 0 here. */
gpt_traffic gpt_traffic_of(const gpt_share *x);
/* Memory by kind, indexed by dt.h's tags (DT_PARAMS .. DT_DATA): the
 * weights and gradients (fsdp's padded buffer with --zero 1), AdamW's m and
 * v of what it steps, the live microbatches' slots and the scratch, the
 * ring's buffers (in 16 bits its blocks' floats are activations, and the
 * 16-bit copies of the rows and gradients communication buffers), the
 * tokens (first stage) and targets (last). */
void gpt_memory(const gpt_share *x, int64_t *mem);
/* Activations' floats: one microbatch's slot (with V chunks a chunk's,
 * the head's room in every slot of the last stage), and a layer's */
int64_t gpt_slot(const gpt_share *x);
int64_t gpt_per_layer(const gpt_share *x);
/* zb1: what B keeps for W, L(2RD + RHs + 3RW) floats (dy, dx2, da, dq dk dv) */
int64_t gpt_kept(const gpt_share *x);
/* The whole model's FLOPs a step, as nanoGPT's estimate_mfu counts them:
 * (6 N + 12 L D S) per token, N the parameters but wpe, B S tokens; and
 * what --recompute adds: the layers' forward once more, (2 (4D^2 + 2DH) +
 * 4 D S) L per token. */
double gpt_model_flops(int64_t L, int64_t D, int64_t H, int64_t V, int64_t S, int64_t B);
double gpt_recompute_flops(int64_t L, int64_t D, int64_t H, int64_t S, int64_t B);

#endif
