/* rng_core.h: the counter-based generator, shared by host code (rng.c) and
 * CUDA kernels (kernels.cu) so both backends produce identical bits. */
#ifndef DT_RNG_CORE_H
#define DT_RNG_CORE_H

#include <math.h>
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

/* A standard normal draw by Box-Muller from two keyed uniforms of 53 bits
 * (elements 2 index and 2 index + 1 of the stream), u1 in (0, 1] so the log
 * is finite. In double, then rounded once to float: libm's and CUDA's log and
 * cos differ in the last bits of a double, which the rounding to float hides
 * but in rare ties, so the initial weights are drawn on the host alone. */
DT_HOSTDEV static inline float dt_rng_core_normal(uint64_t seed, uint64_t stream, uint64_t index) {
  uint64_t a = dt_rng_core_u64(seed, stream, 2 * index);
  uint64_t b = dt_rng_core_u64(seed, stream, 2 * index + 1);
  double u1 = (double)((a >> 11) + 1) * (1.0 / 9007199254740992.0);
  double u2 = (double)(b >> 11) * (1.0 / 9007199254740992.0);
  return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

#endif
