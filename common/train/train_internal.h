/* train_internal.h: what the files of the training layer (common/train/)
 * share with each other, not with the lessons. */
#ifndef DT_TRAIN_INTERNAL_H
#define DT_TRAIN_INTERNAL_H

#include <stdio.h>

#include "comm_internal.h"
#include "train.h"

#ifdef __cplusplus
extern "C" {
#endif

/* kernels_cpu.c / kernels.cu: one-time setup (BLAS threads, cuBLAS handle),
 * done by dt_train_resolve or the first kernel that needs it */
void dt_kernels_init(void);
/* bytes held by matmul's 16-bit rounding copies (dt_alloc'ed, DT_OTHER) */
size_t dt_rounding_bytes(void);
/* what dt_matmul rounds its inputs to (dt_set_matmul_inputs; DT_F32: nothing) */
dt_dtype dt_matmul_inputs(void);
/* On host memory, either backend: C = alpha op(A) op(B) + beta C, row-major
 * blocks of wider arrays (lda, ldb, ldc), no rounding of the inputs (the
 * caller rounds). attention.c's tiles: OpenBLAS on cpu, a plain host loop in
 * the cuda build (lesson 11 runs on the cpu backend only). */
void dt_host_gemm(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                  const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                  int64_t ldc);
/* the rows of samples rows[0..count) of the data set, each cols wide, as
 * dt_fill_block makes row rows[k] of the full matrix: one launch for all */
void dt_fill_rows(float *buf, const int64_t *rows, int64_t count, int64_t cols, uint64_t seed,
                  uint64_t stream, float bound);

/* reference.c: what the reference trainers of the new models (the mixture,
 * the transformer) share: the start (initial weights of the whole model on
 * the host, the scaler, the initial copy; returns the largest |w|, for the
 * reach) and the step after backward */
double dt_reference_begin(const dt_train_config *c, float *w, int64_t n, dt_loss_scaler *scaler,
                          dt_reference_run *out);
void dt_reference_update(const dt_train_config *c, dt_loss_scaler *scaler, float *w, float *g,
                         float *m, float *v, size_t n, double w0_max, double *reach, int round16);

/* outputs.c: check the output paths at start-up (collective: rank 0 looks,
 * every rank fails alike) */
void dt_check_outputs(const dt_train_config *c);

/* The readers of files from disk, untrusted input, over an open stream or
 * bytes so that tests/fuzz_*.c drive them without files. On a bad file err
 * (or why) says what is wrong; nothing else is touched. safetensors.c: */
void dt_read_tensors(FILE *f, uint64_t size, const char *path, const dt_train_config *c,
                     const char *prefix, float *dst, int64_t *step, char *err, size_t errlen);
/* checkpoint.c: the step the manifest's text names, or -1 */
int64_t dt_manifest_parse(const char *text, size_t n, char *why, size_t whylen);

#ifdef __cplusplus
}
#endif
#endif
