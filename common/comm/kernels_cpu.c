/* kernels_cpu.c: the elementwise compute of the cpu backend, on host memory:
 * plain loops, each a kernel of the device-boundary mode (DT_KERNEL,
 * boundary.h). kernels.cu holds the same functions for the GPU; the training
 * kernels (matmul, relu, loss, optimizers) are common/train's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "comm_internal.h"
#include "half_core.h"
#include "rng_core.h"

void dt_add(float *dst, const float *src, size_t n) {
  DT_OP("dt_add", n, 3, 0, 0, 0);
  DT_KERNEL("dt_add", dst, src);
  for (size_t i = 0; i < n; i++) dst[i] += src[i];
}

void dt_scale(float *buf, size_t n, float s) {
  DT_OP("dt_scale", n, 2, 1, 0, 0);
  DT_KERNEL("dt_scale", buf);
  for (size_t i = 0; i < n; i++) buf[i] *= s;
}

void dt_fill_uniform(float *buf, size_t n, uint64_t seed, uint64_t stream, uint64_t offset,
                     float lo, float hi) {
  DT_OP("dt_fill_uniform", n, 0, 0, 0, 0);
  DT_KERNEL("dt_fill_uniform", buf);
  float width = hi - lo;
  for (size_t i = 0; i < n; i++)
    buf[i] = lo + width * dt_rng_core_uniform(seed, stream, offset + i);
}

void dt_to_half(const float *src, void *dst, size_t n, dt_dtype t) {
  DT_OP("dt_to_half", n, 0, 0, 0, 0);
  DT_KERNEL("dt_to_half", src, dst);
  uint16_t *h = dst;
  for (size_t i = 0; i < n; i++)
    h[i] = t == DT_BF16 ? dt_f32_to_bf16(src[i]) : dt_f32_to_f16(src[i]);
}

void dt_from_half(const void *src, float *dst, size_t n, dt_dtype t) {
  DT_OP("dt_from_half", n, 0, 0, 0, 0);
  DT_KERNEL("dt_from_half", src, dst);
  const uint16_t *h = src;
  for (size_t i = 0; i < n; i++) dst[i] = t == DT_BF16 ? dt_bf16_to_f32(h[i]) : dt_f16_to_f32(h[i]);
}

void dt_round_half(float *buf, size_t n, dt_dtype t) {
  DT_OP("dt_round_half", n, 0, 0, 0, 0);
  DT_KERNEL("dt_round_half", buf);
  for (size_t i = 0; i < n; i++)
    buf[i] = t == DT_BF16 ? dt_bf16_to_f32(dt_f32_to_bf16(buf[i]))
                          : dt_f16_to_f32(dt_f32_to_f16(buf[i]));
}

size_t dt_count_nonfinite(const float *buf, size_t n) {
  DT_OP("dt_count_nonfinite", n, 0, 0, 0, 0);
  DT_KERNEL("dt_count_nonfinite", buf);
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) bad += !isfinite(buf[i]);
  return bad;
}
