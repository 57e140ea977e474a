/* dt_cuda.h: for cuda-backend code in common/ only. Lessons never include
 * it, which is why they compile as plain C on both backends. */
#ifndef DT_CUDA_H
#define DT_CUDA_H

#include <cuda_runtime.h>
#include <nccl.h>

#include "dt.h"

#define CHECK_CUDA(call)                                                                           \
  do {                                                                                             \
    cudaError_t err_ = (call);                                                                     \
    if (err_ != cudaSuccess) dt_fatal(__FILE__, __LINE__, #call, cudaGetErrorString(err_));        \
  } while (0)

#define CHECK_NCCL(call)                                                                           \
  do {                                                                                             \
    ncclResult_t res_ = (call);                                                                    \
    if (res_ != ncclSuccess) dt_fatal(__FILE__, __LINE__, #call, ncclGetErrorString(res_));        \
  } while (0)

#ifdef __cplusplus
extern "C" {
#endif
/* This rank's compute stream: kernels and blocking collectives run on it, in
 * order, so no explicit synchronisation is needed between them. */
cudaStream_t dt_stream(void);
/* A second stream for asynchronous collectives, ordered against the compute
 * stream with events, so communication can overlap computation. */
cudaStream_t dt_side_stream(void);
#ifdef __cplusplus
}
#endif

#endif
