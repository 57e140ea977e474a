/* device.h: one operation of a step, and what it costs a device
 * (device.c): measured there, or from a datasheet by its shape. */
#ifndef PLAN_DEVICE_H
#define PLAN_DEVICE_H

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
  BGEMM, /* a batched GEMM: m n k and the batch */
  LN_F,  /* 14's kernels, each as it calls it: LayerNorm (rows, D; backward: accumulate) */
  LN_B,
  GELU_F, /* GELU's tanh form over n */
  GELU_B,
  EMB_F, /* the embedding's rows of a vocabulary slice: tokens R, Vs, D */
  EMB_B,
  CE_F, /* the cross-entropy's pieces over R rows of a slice of Vs (forward: each row's max) */
  CE_B,
  SUMSQ,     /* the gradients' squares summed (clipping's norm): n */
  ATT_START, /* 11's ring: o and the log-sum-exp started (R, W, heads) */
  ATT_DELTA, /* the backward's delta, rowsum(dO o O) (R, W, heads) */
  CE_SUM,    /* the cross-entropy's sums of exp (R, Vs) */
  CE_TGT,    /* its target's logit (R, Vs), and the loss read on the host */
  POS_F,     /* the positions' rows added: a run of len positions (len, 1, D) */
  POS_B,     /* their gradient summed into dwpe (len, 1, D) */
  RELU_B,    /* ZB-H1's B (09, 12): ReLU's gradient over n, apart from the block's backward */
  NKERNELS
};
extern const char *const kernel_name[NKERNELS];
double op_seconds(const op *o, const machine *c); /* one call */
/* The lessons' entry point (common/, opcount.h) that op o is, as the
 * lessons' --report-json names it; NULL where o is costed but no kernel
 * (06's fresh pages) or no lesson's (the planner's own passes, fused
 * attention, batched GEMMs; 11's chunks made on the host, DATA11) */
const char *op_kernel(const op *o);

#endif
