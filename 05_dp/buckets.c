/* buckets.c: 05_dp's gradient buckets, and their start during backward. */
#include <stdio.h>
#include <stdlib.h>

#include "buckets.h"
#include "formulas.h"

void buckets_make(buckets *k, float *g, int64_t L, int64_t DH, double cap, dt_comm *comm,
                  const dt_train_config *c) {
  *k = (buckets){.g = g, .comm = comm};
  k->b = dt_host_alloc((size_t)(2 * L), sizeof(bucket));
  bucket *b = NULL;
  for (int64_t t = 0; t < 2 * L; t++) { /* tensor t of the flat buffer */
    if (!b || (double)b->count * 4 >= cap) {
      b = &k->b[k->n++];
      b->offset = (size_t)(t * DH);
    }
    b->count += (size_t)DH;
    b->ready_layer = L - 1 - t / 2;
  }
  dt_wire_init(&k->wire, c, (size_t)(2 * L * DH));
  k->op = dt_wire_op(&k->wire, DT_AVG);
}

/* In 16 bits each rank divides by N first, so the 16-bit sum is the mean. */
void *bucket_pack(buckets *k, bucket *b) {
  return dt_wire_pack(&k->wire, k->g + b->offset, b->count, b->offset, k->comm->size);
}
void bucket_unpack(buckets *k, bucket *b) {
  dt_wire_unpack(&k->wire, k->g + b->offset, b->count, b->offset);
}

void buckets_ready(buckets *k, int64_t l) {
  for (bucket *b = k->b; b < k->b + k->n; b++) {
    if (b->ready_layer == l) {
      void *p = bucket_pack(k, b);
      b->pending = dt_all_reduce_async(k->comm, p, p, b->count, k->wire.type, k->op);
    } else if (b->pending) {
      dt_test(b->pending);
    }
  }
}

void buckets_describe(const buckets *k, const char *kind, int bucketed, int overlap) {
  dt_print0("%d %sall-reduce%s per step (%s, %s backward)\n", k->n, kind, k->n > 1 ? "s" : "",
            bucketed ? "buckets" : "one per tensor", overlap ? "overlapped with" : "after");
}

uint64_t buckets_ring_bytes(const buckets *k, uint64_t n, int *rounded) {
  size_t *counts = dt_host_alloc((size_t)k->n, sizeof *counts);
  for (int i = 0; i < k->n; i++) counts[i] = k->b[i].count;
  uint64_t sum = dp_ring_bytes(counts, k->n, n, dt_dtype_size(k->wire.type), rounded);
  free(counts);
  return sum;
}

void buckets_free(buckets *k) { free(k->b); }
