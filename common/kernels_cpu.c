/* kernels_cpu.c: the compute of the cpu backend, plain loops on host memory.
 * kernels.cu holds the same functions as CUDA kernels; the two must agree. */
#include "dt.h"
#include "rng_core.h"

void dt_add(float *dst, const float *src, size_t n) {
  for (size_t i = 0; i < n; i++) dst[i] += src[i];
}

void dt_scale(float *buf, size_t n, float s) {
  for (size_t i = 0; i < n; i++) buf[i] *= s;
}

void dt_fill_uniform(float *buf, size_t n, uint64_t seed, uint64_t stream, uint64_t offset,
                     float lo, float hi) {
  float width = hi - lo;
  for (size_t i = 0; i < n; i++)
    buf[i] = lo + width * dt_rng_core_uniform(seed, stream, offset + i);
}
