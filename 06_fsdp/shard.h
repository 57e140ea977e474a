/* shard.h: sharded data parallelism's pieces (06_fsdp; 08_fsdp_tp reuses
 * them on one axis of its mesh).
 *
 * A layer's parameters, n floats, are cut over the F ranks of a communicator
 * into F shards of S = ceil(n/F) floats (the last padded with zeros): rank f
 * owns [f*S, (f+1)*S) of every layer and steps only those, with their
 * optimizer state. What else it keeps depends on the ZeRO stage:
 *   1  every layer's full parameters and gradients (all-reduced as in 05);
 *   2  the full parameters, and the gradient of its shard only;
 *   3  (FSDP) its shards only: a layer's parameters are gathered for each
 *      use and freed after, its gradient reduce-scattered at once. */
#ifndef FSDP_SHARD_H
#define FSDP_SHARD_H

#include "train.h"

typedef struct {
  dt_comm *comm;        /* the F ranks that share each layer */
  int zero, prefetch;   /* ZeRO stage; gather a layer before it is needed */
  int64_t L, n, S, NS;  /* layers; floats of a layer, of a shard, of a padded layer (F x S) */
  float *w, *g;         /* stages 1-2: the full parameters (l at l*NS); stage 1: gradients */
  float *ws, *gs;       /* this rank's shards (l at l*S) of what w and g do not hold */
  float **full;         /* layer l's full parameters, while they exist */
  dt_request **pending; /* layer l's all-gather, while in flight */
  uint16_t **half;      /* 16 bits: layer l's parameters as they travel */
  dt_wire wire;         /* --precision: a layer's gradient and a shard, as they travel */
  dt_op op;             /* the gradients': DT_AVG (a sum of what was divided, in 16 bits) */
} fsdp;

/* Allocate what stage `zero` keeps for L layers of n floats (06 and 08:
 * the whole model's; 12: a pipeline stage's). */
void fsdp_init(fsdp *f, dt_comm *comm, const dt_train_config *c, int64_t L, int64_t n, int zero,
               int prefetch);
/* This rank's [lo, hi) of a layer, without the padding. */
void fsdp_range(const fsdp *f, int64_t *lo, int64_t *hi);
/* Hand the run what this rank steps (its shard of every layer) as segments;
 * returns the first. Layer l's shard is segment fsdp_segment(f, first, l, &off)
 * from element off: the caller places it in the whole model. */
int fsdp_register(fsdp *f, dt_run *r);
int fsdp_segment(const fsdp *f, int first, int64_t l, int64_t *off);
/* Layer l's full parameters, ready to compute with (gathered now, or the
 * prefetch waited for); release after use (stage 3 frees them). */
float *fsdp_params(fsdp *f, int64_t l);
void fsdp_prefetch(fsdp *f, int64_t l); /* with --prefetch, for l in [0, L) */
void fsdp_release(fsdp *f, int64_t l);
/* Where layer l's gradient is made (n floats, zeroed), and its reduction
 * over the F ranks: all-reduced (stage 1) or reduce-scattered into the
 * shard (stages 2-3, then the buffer is freed). */
float *fsdp_grad(fsdp *f, int64_t l);
void fsdp_reduce(fsdp *f, int64_t l, float *g);
/* After dt_run_begin filled the shards: stages 1-2 make every rank's full
 * copy, a set-up counted nowhere (dt_run_reset). */
void fsdp_start(fsdp *f, dt_run *r);
/* After the optimizer stepped the shards: stages 1-2 gather them into the
 * full copies (asynchronously with --prefetch). */
void fsdp_step_taken(fsdp *f);
void fsdp_land(fsdp *f); /* wait for every gather in flight */
/* The stage and layout line, and each rank's shard (w1: W1's floats in a
 * layer; R of the B samples per rank). */
void fsdp_describe(const fsdp *f, int64_t w1, int64_t R, int64_t B);
void fsdp_free(fsdp *f);

#endif
