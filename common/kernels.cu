/* kernels.cu: the compute of the cuda backend. Each kernel matches the loop
 * of the same name in kernels_cpu.c, and runs on this rank's stream. */
#include "dt_cuda.h"
#include "rng_core.h"

static unsigned blocks_for(size_t n) { return (unsigned)((n + 255) / 256); }

__global__ static void add_kernel(float *dst, const float *src, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) dst[i] += src[i];
}

__global__ static void scale_kernel(float *buf, size_t n, float s) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) buf[i] *= s;
}

/* __fmul_rn/__fadd_rn forbid fusing into an FMA, so the bits match the cpu. */
__global__ static void fill_uniform_kernel(float *buf, size_t n, uint64_t seed, uint64_t stream,
                                           uint64_t offset, float lo, float width) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n)
    buf[i] = __fadd_rn(lo, __fmul_rn(width, dt_rng_core_uniform(seed, stream, offset + i)));
}

extern "C" void dt_add(float *dst, const float *src, size_t n) {
  if (n == 0) return;
  add_kernel<<<blocks_for(n), 256, 0, dt_stream()>>>(dst, src, n);
  CHECK_CUDA(cudaGetLastError());
}

extern "C" void dt_scale(float *buf, size_t n, float s) {
  if (n == 0) return;
  scale_kernel<<<blocks_for(n), 256, 0, dt_stream()>>>(buf, n, s);
  CHECK_CUDA(cudaGetLastError());
}

extern "C" void dt_fill_uniform(float *buf, size_t n, uint64_t seed, uint64_t stream,
                                uint64_t offset, float lo, float hi) {
  if (n == 0) return;
  fill_uniform_kernel<<<blocks_for(n), 256, 0, dt_stream()>>>(buf, n, seed, stream, offset, lo,
                                                              hi - lo);
  CHECK_CUDA(cudaGetLastError());
}
