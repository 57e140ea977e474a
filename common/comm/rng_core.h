/* rng_core.h: the counter-based generator, shared by host code (rng.c) and
 * CUDA kernels (kernels.cu) so both backends produce identical bits. */
#ifndef DT_RNG_CORE_H
#define DT_RNG_CORE_H

#include <stdint.h>

#ifdef __CUDACC__
#define DT_HOSTDEV __host__ __device__
#else
#define DT_HOSTDEV
#endif

/* splitmix64's finalizer: a bijection on 64 bits that scrambles every input
 * bit into every output bit. */
DT_HOSTDEV static inline uint64_t dt_mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

DT_HOSTDEV static inline uint64_t dt_rng_core_u64(uint64_t seed, uint64_t stream, uint64_t index) {
  return dt_mix64(dt_mix64(dt_mix64(seed) + stream) + index);
}

/* The top 24 bits make a float in [0, 1) exactly: no rounding, so no
 * difference between backends. */
DT_HOSTDEV static inline float dt_rng_core_uniform(uint64_t seed, uint64_t stream, uint64_t index) {
  return (float)(dt_rng_core_u64(seed, stream, index) >> 40) * (1.0f / 16777216.0f);
}

#endif
