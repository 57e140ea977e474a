/* kernels.cu: the elementwise compute of the cuda backend. Each function
 * matches the one of the same name in kernels_cpu.c and runs on this rank's
 * stream; the training kernels (matmul, relu, loss, optimizers) are
 * common/train's. */
#include <stdio.h>
#include <stdlib.h>

#include "dt_cuda.h"
#include "half_core.h"
#include "opcount.h"
#include "rng_core.h"

static unsigned blocks_for(size_t n) { return (unsigned)((n + 255) / 256); }
#define GRID(n) blocks_for(n), 256, 0, dt_stream()
#define INDEX   (blockIdx.x * (size_t)blockDim.x + threadIdx.x)

__global__ static void add_kernel(float *dst, const float *src, size_t n) {
  size_t i = INDEX;
  if (i < n) dst[i] += src[i];
}
__global__ static void scale_kernel(float *buf, size_t n, float s) {
  size_t i = INDEX;
  if (i < n) buf[i] *= s;
}
/* __fmul_rn/__fadd_rn forbid fusing into an FMA, so the bits match the cpu. */
__global__ static void uniform_kernel(float *buf, size_t n, uint64_t seed, uint64_t stream,
                                      uint64_t offset, float lo, float width) {
  size_t i = INDEX;
  if (i < n)
    buf[i] = __fadd_rn(lo, __fmul_rn(width, dt_rng_core_uniform(seed, stream, offset + i)));
}
__global__ static void to_half_kernel(const float *src, uint16_t *dst, size_t n, int bf16) {
  size_t i = INDEX;
  if (i < n) dst[i] = bf16 ? dt_f32_to_bf16(src[i]) : dt_f32_to_f16(src[i]);
}
__global__ static void from_half_kernel(const uint16_t *src, float *dst, size_t n, int bf16) {
  size_t i = INDEX;
  if (i < n) dst[i] = bf16 ? dt_bf16_to_f32(src[i]) : dt_f16_to_f32(src[i]);
}
__global__ static void round_half_kernel(const float *src, float *dst, size_t n, int bf16) {
  size_t i = INDEX;
  if (i < n)
    dst[i] = bf16 ? dt_bf16_to_f32(dt_f32_to_bf16(src[i])) : dt_f16_to_f32(dt_f32_to_f16(src[i]));
}
__global__ static void nonfinite_kernel(const float *x, size_t n, unsigned long long *count) {
  size_t i = INDEX;
  if (i < n && !isfinite(x[i])) atomicAdd(count, 1ull);
}

#define LAUNCHED() CHECK_CUDA(cudaGetLastError())

extern "C" void dt_add(float *dst, const float *src, size_t n) {
  DT_OP("dt_add", n, 3, 0, 0, 0);
  if (n) {
    add_kernel<<<GRID(n)>>>(dst, src, n);
    LAUNCHED();
  }
}
extern "C" void dt_scale(float *buf, size_t n, float s) {
  DT_OP("dt_scale", n, 2, 1, 0, 0);
  if (n) {
    scale_kernel<<<GRID(n)>>>(buf, n, s);
    LAUNCHED();
  }
}
extern "C" void dt_fill_uniform(float *buf, size_t n, uint64_t seed, uint64_t stream,
                                uint64_t offset, float lo, float hi) {
  DT_OP("dt_fill_uniform", n, 0, 0, 0, 0);
  if (n) {
    uniform_kernel<<<GRID(n)>>>(buf, n, seed, stream, offset, lo, hi - lo);
    LAUNCHED();
  }
}
extern "C" void dt_to_half(const float *src, void *dst, size_t n, dt_dtype t) {
  DT_OP("dt_to_half", n, 0, 0, 0, 0);
  if (n) {
    to_half_kernel<<<GRID(n)>>>(src, (uint16_t *)dst, n, t == DT_BF16);
    LAUNCHED();
  }
}
extern "C" void dt_from_half(const void *src, float *dst, size_t n, dt_dtype t) {
  DT_OP("dt_from_half", n, 0, 0, 0, 0);
  if (n) {
    from_half_kernel<<<GRID(n)>>>((const uint16_t *)src, dst, n, t == DT_BF16);
    LAUNCHED();
  }
}
extern "C" void dt_round_half(float *buf, size_t n, dt_dtype t) {
  DT_OP("dt_round_half", n, 0, 0, 0, 0);
  if (n) {
    round_half_kernel<<<GRID(n)>>>(buf, buf, n, t == DT_BF16);
    LAUNCHED();
  }
}
static unsigned long long *count_slot; /* device counter, made at the first count */
extern "C" size_t dt_count_nonfinite(const float *buf, size_t n) {
  DT_OP("dt_count_nonfinite", n, 0, 0, 0, 0);
  unsigned long long count = 0;
  if (!count_slot) CHECK_CUDA(cudaMalloc(&count_slot, sizeof *count_slot));
  CHECK_CUDA(cudaMemsetAsync(count_slot, 0, sizeof *count_slot, dt_stream()));
  if (n) {
    nonfinite_kernel<<<GRID(n)>>>(buf, n, count_slot);
    LAUNCHED();
  }
  CHECK_CUDA(
      cudaMemcpyAsync(&count, count_slot, sizeof count, cudaMemcpyDeviceToHost, dt_stream()));
  CHECK_CUDA(cudaStreamSynchronize(dt_stream())); /* the host decides whether to step */
  return (size_t)count;
}
