/* blas_cuda.h: what the training layer's CUDA files (kernels.cu,
 * attention_kernels.cu) share: the rank's cuBLAS handle, made once by
 * kernels.cu on the rank's stream, and the check of its calls. */
#ifndef DT_BLAS_CUDA_H
#define DT_BLAS_CUDA_H

#include <cublas_v2.h>

#include "dt_cuda.h"

#define CHECK_CUBLAS(call)                                                                         \
  do {                                                                                             \
    cublasStatus_t st_ = (call);                                                                   \
    if (st_ != CUBLAS_STATUS_SUCCESS)                                                              \
      dt_fatal(__FILE__, __LINE__, #call, cublasGetStatusString(st_));                             \
  } while (0)

cublasHandle_t dt_blas(void); /* kernels.cu: created on first use */

#endif
