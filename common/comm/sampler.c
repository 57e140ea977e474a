/* sampler.c: torch.utils.data.DistributedSampler, and the shuffle under it. */
#include <stdlib.h>

#include "comm_internal.h"
#include "sampler.h"

int64_t dt_sampler_num_samples(const dt_sampler *s) {
  int64_t n = s->dataset_size, N = s->replicas;
  if (s->drop_last && n % N != 0) return n / N; /* drop the tail */
  return (n + N - 1) / N;                       /* pad by wrapping around */
}

/* Fisher-Yates, with the random choice at step i keyed by (seed + epoch, i):
 * every rank computes the same permutation without communicating. */
void dt_shuffle(int64_t n, uint64_t seed, int64_t epoch, int64_t *perm) {
  for (int64_t i = 0; i < n; i++) perm[i] = i;
  for (int64_t i = n - 1; i > 0; i--) {
    int64_t j = (int64_t)(dt_rng_u64(seed + (uint64_t)epoch, 0, (uint64_t)i) % (uint64_t)(i + 1));
    int64_t t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
}

void dt_sampler_indices(const dt_sampler *s, int64_t epoch, int64_t *out) {
  int64_t n = s->dataset_size, per_rank = dt_sampler_num_samples(s);
  int64_t *order = malloc((size_t)n * sizeof *order);
  CHECK_ALLOC(order);
  if (s->shuffle)
    dt_shuffle(n, s->seed, epoch, order);
  else
    for (int64_t i = 0; i < n; i++) order[i] = i;
  /* position p of the padded list is order[p % n]: the wrap-around padding */
  for (int64_t k = 0; k < per_rank; k++) out[k] = order[(s->rank + k * s->replicas) % n];
  free(order);
}
