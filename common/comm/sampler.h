/* sampler.h: which samples each rank reads (lesson 04; the training layer
 * draws every batch through it). */
#ifndef DT_SAMPLER_H
#define DT_SAMPLER_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- sampler */
/* torch.utils.data.DistributedSampler: shuffle with (seed + epoch), pad by
 * wrapping around to a multiple of replicas (or drop the tail), then rank r
 * takes positions r, r + replicas, r + 2*replicas, ... */
typedef struct {
  int64_t dataset_size;
  int replicas, rank, shuffle, drop_last;
  uint64_t seed;
} dt_sampler;
int64_t dt_sampler_num_samples(const dt_sampler *s);                       /* per rank */
void dt_sampler_indices(const dt_sampler *s, int64_t epoch, int64_t *out); /* num_samples */
void dt_shuffle(int64_t n, uint64_t seed, int64_t epoch, int64_t *perm);   /* perm of 0..n-1 */

#ifdef __cplusplus
}
#endif
#endif
