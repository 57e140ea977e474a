/* batches.c: lesson 04's look ahead at lesson 05, which draws its batches
 * from this sampler, and list(), how both files print indices. sampler.c
 * calls into this file, never the other way round. */
#include <stdio.h>
#include <stdlib.h>

#include "batches.h"
#include "dt.h"
#include "sampler.h"

/* At most this many indices per printed line; the checks see all of them. */
#define SHOW 16

char *list(const int64_t *v, int64_t count, int64_t bar) {
  static char out[SHOW * 24 + 64];
  size_t len = 0;
  out[0] = 0;
  if (count == 0) snprintf(out, sizeof out, "(none)");
  for (int64_t i = 0; i < count && i < SHOW; i++) {
    const char *sep = i == 0 ? "" : i == bar ? " | " : " "; /* the bar marks where padding starts */
    len += (size_t)snprintf(out + len, sizeof out - len, "%s%lld", sep, (long long)v[i]);
  }
  if (count > SHOW)
    snprintf(out + len, sizeof out - len, " ... (%lld more)", (long long)(count - SHOW));
  return out;
}

/* Lesson 05 cuts each epoch's shuffled list of samples into global batches
 * of B: batch b is positions b*B .. b*B+B-1, and rank r's share of it is the
 * positions r, r+N, ... inside it, which is just r's own shard walked in
 * order, B/N samples a step (what lesson 05's dt_step_samples draws).
 * Checked here for every step of two epochs. */
int64_t lesson05_batches(int N, int rank, int64_t seed) {
  int64_t B = 2 * N, samples = 8 * N, per_rank = 2, batches = samples / B, wrong = 0;
  dt_sampler s = {
      .dataset_size = samples, .replicas = N, .rank = rank, .shuffle = 1, .seed = (uint64_t)seed};
  int64_t *order = dt_host_alloc((size_t)samples, sizeof *order);
  int64_t *shard = dt_host_alloc((size_t)dt_sampler_num_samples(&s), sizeof *shard);
  for (int64_t step = 0; step < 2 * batches; step++) {
    int64_t epoch = step / batches, first = (step % batches) * B;
    if (step % batches == 0) { /* a new epoch reshuffles */
      dt_shuffle(samples, (uint64_t)seed, epoch, order);
      dt_sampler_indices(&s, epoch, shard);
    }
    const int64_t *got = shard + (step % batches) * per_rank;
    for (int64_t k = 0; k < per_rank; k++) wrong += got[k] != order[first + rank + k * N];
    if (step == 1) {
      dt_print0("\nlesson 05 (B = %lld, %lld samples, data seed %lld): global batch 1 = positions "
                "%lld..%lld of epoch 0's shuffle (training always shuffles): %s\n",
                (long long)B, (long long)samples, (long long)seed, (long long)first,
                (long long)(first + B - 1), list(order + first, B, -1));
      dt_print_ranks("takes positions %lld, %lld: samples %lld %lld (its shard, walked in order)\n",
                     (long long)(first + rank), (long long)(first + rank + N), (long long)got[0],
                     (long long)got[1]);
    }
  }
  free(order);
  free(shard);
  return wrong;
}
