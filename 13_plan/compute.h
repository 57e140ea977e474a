/* compute.h: the operations one stage computes in a step, and what each
 * costs on a machine (measured there, or by a datasheet's roofline). */
#ifndef PLAN_COMPUTE_H
#define PLAN_COMPUTE_H

#include "inputs.h"

typedef struct {
  int k;               /* the kernel: GEMM, MLP_F, ..., below */
  int64_t s[5];        /* its shape */
  double count;        /* per step */
  double flops, bytes; /* of one call */
  int per_micro;       /* in every microbatch's forward or backward (else once a step) */
  int backward;
} op;
enum {
  GEMM,
  MLP_F,
  MLP_B,
  ATT_F,
  ATT_B,
  EW,
  LOSS,
  DATA05,
  DATA11,
  ADAMW,
  SGD,
  FLASH,
  ALLOC,
  NKERNELS
};
extern const char *const kernel_name[NKERNELS];
int ops_of(const model *m, const mesh *x, int64_t stage, int64_t cprank, op *out, int max);
double op_seconds(const op *o, const machine *c); /* one call */
double attention_seconds(const model *m, const mesh *x, int64_t stage, int64_t cprank,
                         const machine *c, int backward); /* one microbatch, one layer */

#endif
