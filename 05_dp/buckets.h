/* buckets.h: 05_dp's gradient buckets (buckets.c). */
#ifndef DP_BUCKETS_H
#define DP_BUCKETS_H

#include "train.h"

typedef struct {        /* whole gradient tensors, all-reduced together */
  size_t offset, count; /* elements of the flat gradient buffer */
  int64_t ready_layer;  /* complete once this layer's backward is done */
  dt_request *pending;
} bucket;

typedef struct {
  bucket *b;
  int n;
  float *g;      /* the flat gradient buffer, layers in reverse */
  dt_comm *comm; /* the ranks that average */
  dt_wire wire;  /* what gradients travel in (--precision) */
  dt_op op;      /* DT_AVG; in 16 bits a sum of what pack divided by N */
} buckets;

/* Greedy, like PyTorch DDP: the 2L tensors of DH floats in ready order,
 * into buckets of at least cap bytes (0: one tensor each). */
void buckets_make(buckets *k, float *g, int64_t L, int64_t DH, double cap, dt_comm *comm,
                  const dt_train_config *c);
/* What to all-reduce for bucket b, and back to fp32 after (--precision). */
void *bucket_pack(buckets *k, bucket *b);
void bucket_unpack(buckets *k, bucket *b);
/* --overlap: layer l's backward is done; start the buckets it completed, and
 * let the others progress (MPI progresses only inside MPI calls). */
void buckets_ready(buckets *k, int64_t l);
/* "8 all-reduces per step (one per tensor, after backward)"; kind: "" or
 * "hierarchical " */
void buckets_describe(const buckets *k, const char *kind, int bucketed, int overlap);
/* What common's counters add up for one ring all-reduce of every bucket over
 * n ranks (formulas.h's dp_ring_bytes of the buckets' sizes). */
uint64_t buckets_ring_bytes(const buckets *k, uint64_t n, int *rounded);
void buckets_free(buckets *k);

#endif
