/* weights.c: lesson 02's use in training. Every rank must start from the
 * same weights, or data-parallel replicas drift apart from step 0. Rank 0
 * draws them; the others hold zeros until the broadcast (PyTorch's DDP does
 * the same when it wraps a module). */
#include <stdio.h>
#include <stdlib.h>

#include "weights.h"

/* FNV-1a over the bytes: equal weights give equal checksums, bit for bit. */
static uint64_t checksum(const float *host, size_t n) {
  const unsigned char *b = (const unsigned char *)host;
  uint64_t h = 14695981039346656037ULL;
  for (size_t i = 0; i < n * sizeof(float); i++) h = (h ^ b[i]) * 1099511628211ULL;
  return h;
}

int64_t replicate_weights(dt_comm *w, size_t P, uint64_t seed, int *equal) {
  float *weights = dt_alloc_f32(P, DT_PARAMS), *local = dt_alloc_f32(P, DT_PARAMS);
  float *wh = dt_host_alloc(2 * P, sizeof(float)), *lh = wh + P;
  if (w->rank == 0) dt_fill_uniform(weights, P, seed, 0, 0, -0.05f, 0.05f);
  dt_copy_to_host(wh, weights, P * sizeof(float));
  dt_print0("step 3: replicate rank 0's freshly initialised weights (%zu floats, %zu bytes)\n", P,
            P * sizeof(float));
  dt_print_ranks("before: checksum %016llx\n", (unsigned long long)checksum(wh, P));
  dt_barrier(w);
  double t0 = dt_now();
  dt_broadcast(w, weights, P, DT_F32, 0);
  double slowest = dt_now() - t0;
  dt_host_all_reduce(w, &slowest, 1, DT_F64, DT_MAX);
  dt_copy_to_host(wh, weights, P * sizeof(float));
  uint64_t sum = checksum(wh, P);
  int64_t lo = (int64_t)sum, hi = (int64_t)sum; /* the bits, compared for equality only */
  dt_print_ranks("after dt_broadcast: checksum %016llx\n", (unsigned long long)sum);
  dt_host_all_reduce(w, &lo, 1, DT_I64, DT_MIN);
  dt_host_all_reduce(w, &hi, 1, DT_I64, DT_MAX);
  *equal = lo == hi;
  /* The RNG is counter-based: the value at (seed, stream, index) is a pure
   * function of the three, so every rank can draw rank 0's weights itself,
   * with no communication at all. Later lessons initialise this way. */
  t0 = dt_now();
  dt_fill_uniform(local, P, seed, 0, 0, -0.05f, 0.05f);
  dt_sync();
  double draw = dt_now() - t0;
  dt_copy_to_host(lh, local, P * sizeof(float));
  int64_t differ = 0;
  for (size_t i = 0; i < P; i++) differ += lh[i] != wh[i];
  dt_print_ranks("drawn locally from the counter-based RNG: checksum %016llx, %lld elements "
                 "differ\n",
                 (unsigned long long)checksum(lh, P), (long long)differ);
  dt_print0(
      "broadcast: %.1f us (slowest rank); local draw on rank 0: %.1f us, no communication\n\n",
      slowest * 1e6, draw * 1e6);
  free(wh);
  dt_free(weights);
  dt_free(local);
  return differ;
}
