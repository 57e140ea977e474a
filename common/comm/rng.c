/* rng.c: host entry points of the counter-based generator (rng_core.h). */
#include "dt.h"
#include "rng_core.h"

uint64_t dt_rng_u64(uint64_t seed, uint64_t stream, uint64_t index) {
  return dt_rng_core_u64(seed, stream, index);
}

float dt_rng_uniform(uint64_t seed, uint64_t stream, uint64_t index) {
  return dt_rng_core_uniform(seed, stream, index);
}

float dt_rng_normal(uint64_t seed, uint64_t stream, uint64_t index) {
  return dt_rng_core_normal(seed, stream, index);
}
