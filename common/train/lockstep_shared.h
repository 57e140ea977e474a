/* lockstep_shared.h: what the check's three files share (lockstep.c, the steps;
 * lockstep_compare.c, one step's figures; lockstep_verdict.c, the table).
 * Private to common/train: the lessons see train_internal.h's dt_lockstep_*. */
#ifndef DT_LOCKSTEP_SHARED_H
#define DT_LOCKSTEP_SHARED_H

#include "train_internal.h"

#define U32 (1.0 / 16777216.0) /* float32's unit roundoff, 2^-24 */
/* fp16's largest value, and the limit its rounding turns to inf */
#define F16_LARGEST 65520.0

typedef struct {
  double value; /* NaN is the worst */
  int64_t step, tensor;
} worst;

struct dt_lockstep {
  const dt_train_config *c;
  size_t n; /* the whole model's floats */
  int adamw;
  /* the run's, gathered: on rank 0 two blocks of the whole model's arrays
   * one after another (a gather of several is one collective), pre: the
   * state at the step's start (w, and AdamW's m and v) and the gradient its
   * optimizer read; post: the state after it. Elsewhere pre is the scratch
   * every gather passes through. */
  float *pre, *post;
  int slots;           /* the state's arrays: 1 (w), or 3 (w, m, v) */
  float *w0, *m0, *v0; /* in pre */
  float *g;            /* in pre, after the state */
  float *w1, *m1, *v1; /* in post */
  int held;            /* pre holds the start of the next step (the last one's end) */
  int replicated;      /* every rank holds the whole model (05), N > 1 */
  float *theirs;       /* replicated runs, ranks but 0: rank 0's weights, to compare with */
  dt_loss_scaler scaler;
  /* one process (rank 0; backend memory but hg) */
  dt_one *one;
  float *W, *G, *M, *V, *hg, *hu; /* hg: its gradient; hu: its update, on the host */
  dt_decisions replay;
  dt_kinks *kinks;
  dt_routing routing;
  dt_skips skips;
  /* the figures, over the steps compared */
  int64_t steps;
  worst loss;
  worst part;
  worst grad;
  worst factor;
  int64_t off, off_step, off_at; /* elements of the update not bit for bit; the first's step, at */
  int64_t replicas, replicas_step; /* weights of a replica not rank 0's; the first step */
  int64_t clipped;                 /* steps compared whose factor --clip set below 1 */
  const char *off_what;            /* "weight", "first moment", "second moment" */
  int64_t failed_at;               /* the first step off, -1: none */
  char why[400];                   /* and why, for the verdict */
  int64_t blown_step; /* the step where the run's loss blew up, and one process's loss */
  double blown_loss;
  double seconds;
};

/* The bounds (CHECKING.md, "One step's rounding"). In fp32 the run and one
 * process differ by the order of their sums: a sum of K terms in another
 * order differs by at most K u of its terms' size, K the step's longest sum
 * (dt_check_longest_sum), and ReLU's decisions near 0 are replayed. In 16
 * bits the run rounds to 16 bits what it sends, where one process does not,
 * and a value near a rounding boundary or near ReLU's 0 (not replayed in 16
 * bits) lands a 16-bit unit or a whole decision apart: the loss within 2,
 * each gradient within 32 units of bf16 (u = 2^-8), the coarser of the two
 * formats, whose one-step figures fp16's equal. */
#define U_BF16 (1.0 / 256.0)
typedef struct {
  double loss, grad;
  char how_loss[64], how_grad[48];
} bounds;
bounds dt_lockstep_bounds(const dt_train_config *c);
/* The factor the gradient is read with: the run's squared norm is summed in
 * double per rank, rounded to float and all-reduced in float (N terms), so
 * it differs from one process's by at most N u relative, the norm by half
 * that; the factor and fp16's 1/scale each round to float once. */
static inline double dt_lockstep_factor_bound(int ranks) { return ((double)ranks + 2) * U32; }

/* Rank 0: one process takes the step from the run's state; the figures, and
 * at the first step off, why, with the tensors whose gradient is off. */
void dt_lockstep_compare(dt_run *r, dt_lockstep *k, int64_t step, int64_t replicas);

#endif
