/* train.h: the training layer, what lessons 05-09 include (above dt.h, the
 * communication layer, and sampler.h).
 *
 * L residual MLP blocks, width D, hidden H, float32, row-major, no biases:
 *   a = x W1;  h = relu(a);  x' = x + h W2;   loss = mean((x_L - y)^2)
 * W1 is [D, H], W2 is [H, D]. The functions take whatever slice of W1 (some
 * columns) and W2 (the matching rows) they are given, so tensor parallelism
 * reuses them unchanged. */
#ifndef DT_TRAIN_H
#define DT_TRAIN_H

#include <stdint.h>

#include "dt.h"
#include "sampler.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- config */
typedef struct {
  int64_t layers, dim, hidden, batch, steps, samples, seed, data_seed;
  double lr, weight_decay, clip;
  const char *optimizer; /* "sgd" or "adamw" */
  const char *precision; /* "fp32", "bf16", "fp16" */
  double loss_scale;     /* fp16: the initial loss scale */
  int64_t growth_interval;
  const char *save, *load, *dump_data, *trace, *ckpt;
  int64_t save_every;
  int no_check, resume;
  int64_t start_step; /* set by dt_ckpt_resume: the first step this run trains */
} dt_train_config;

/* Defaults finish in seconds on a laptop CPU. hidden 0 means 4*dim, samples
 * 0 means 8 batches and lr 0 the optimizer's own default; dt_train_resolve
 * fills them in. */
#define DT_TRAIN_DEFAULTS                                                                          \
  {                                                                                                \
    .layers = 4, .dim = 64, .hidden = 0, .batch = 32, .steps = 30, .samples = 0, .seed = 1,        \
    .data_seed = 2, .lr = 0, .weight_decay = 0.01, .clip = 0, .optimizer = "sgd",                  \
    .precision = "fp32", .loss_scale = 65536, .growth_interval = 2000                              \
  }

/* The flags every training lesson shares; put it first in the option table. */
#define DT_TRAIN_OPTIONS(c)                                                                        \
  DT_INT("--layers", &(c)->layers, 1, 4096, "number of blocks L"),                                 \
      DT_INT("--dim", &(c)->dim, 1, 65536, "model width D"),                                       \
      DT_INT("--hidden", &(c)->hidden, 0, 262144, "hidden width H (0: 4*D)"),                      \
      DT_INT("--batch", &(c)->batch, 1, 1 << 20, "global batch B (samples per step, all ranks)"),  \
      DT_INT("--steps", &(c)->steps, 1, 1000000, "optimizer steps"),                               \
      DT_INT("--samples", &(c)->samples, 0, 1 << 30, "dataset size, a multiple of B (0: 8*B)"),    \
      DT_DOUBLE("--lr", &(c)->lr, 0, 100, "learning rate (0: 0.2 for sgd, 0.003 for adamw)"),      \
      DT_STRING("--optimizer", &(c)->optimizer, "sgd|adamw", "optimizer"),                         \
      DT_STRING("--precision", &(c)->precision, "fp32|bf16|fp16",                                  \
                "16-bit matmul inputs and communication; fp32 master weights, optimizer"),         \
      DT_DOUBLE("--loss-scale", &(c)->loss_scale, 1, 1e30, "fp16: the initial loss scale"),        \
      DT_INT("--growth-interval", &(c)->growth_interval, 1, 1 << 30,                               \
             "fp16: double the loss scale after this many steps without overflow"),                \
      DT_DOUBLE("--weight-decay", &(c)->weight_decay, 0, 1, "AdamW's decoupled weight decay"),     \
      DT_DOUBLE("--clip", &(c)->clip, 0, 1e9, "clip the gradients' global norm to this (0: off)"), \
      DT_INT("--seed", &(c)->seed, 0, INT64_MAX, "seed of the initial weights"),                   \
      DT_INT("--data-seed", &(c)->data_seed, 0, INT64_MAX, "seed of the data and the shuffle"),    \
      DT_STRING("--save", &(c)->save, NULL, "write the trained model to this safetensors file"),   \
      DT_STRING("--load", &(c)->load, NULL, "start from this safetensors file"),                   \
      DT_STRING("--dump-data", &(c)->dump_data, NULL, "write every step's global batch (x, y)"),   \
      DT_STRING("--trace", &(c)->trace, NULL, "write a Chrome trace (JSON) of compute and comm"),  \
      DT_STRING("--ckpt", &(c)->ckpt, NULL, "checkpoint folder for --save-every and --resume"),    \
      DT_INT("--save-every", &(c)->save_every, 0, 1 << 30, "checkpoint every K steps (0: never)"), \
      DT_FLAG("--resume", &(c)->resume, "continue from the latest checkpoint in --ckpt"),          \
      DT_FLAG("--no-check", &(c)->no_check, "skip the comparison with single-process training")

/* A training step's loss line, on the steps worth reading (the first five
 * of the run, every tenth, the last); `how` says where the number comes from.
 * Called by every rank every step with the same loss: a loss that is not
 * finite or has exploded (10^4 x the run's first) ends the job there with a
 * message naming divergence and what to change (dt_fail, exit 2). */
void dt_print_step(const dt_train_config *c, int64_t step, double loss, const char *how,
                   double seconds);

/* Fill derived defaults and reject what no lesson can run; dt_fail on error. */
void dt_train_resolve(dt_train_config *c);
void dt_train_print(const dt_train_config *c);         /* rank 0: one line of config */
int64_t dt_params_per_layer(const dt_train_config *c); /* 2*D*H */

/* ---------------------------------------------------------------- kernels */
/* C[M,N] = op(A) op(B) (+ C when accumulate), row-major; op(X) is X or X^T.
 * A is [M,K] (or [K,M] when trans_a), B is [K,N] (or [N,K] when trans_b). */
void dt_matmul(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, const float *A,
               const float *B, float *C, int accumulate);
void dt_relu_forward(const float *a, float *h, size_t n);
void dt_relu_backward(const float *a, const float *dh, float *da, size_t n); /* da = dh*(a>0) */
/* Returns sum((x-y)^2) * scale and writes dx = 2(x-y) * scale. */
double dt_mse_forward_backward(const float *x, const float *y, float *dx, size_t n, double scale);
double dt_sum_squares(const float *x, size_t n);
/* The optimizers read the gradient as g x grad_scale (1: as it is), so that
 * unscaling and clipping cost no pass of their own. */
void dt_sgd_step(float *w, const float *g, size_t n, float lr, float grad_scale);
/* PyTorch AdamW (betas 0.9/0.999, eps 1e-8, decoupled decay), step t >= 1 */
void dt_adamw_step(float *w, const float *g, float *m, float *v, size_t n, float lr,
                   float weight_decay, int64_t t, float grad_scale);
/* Fill a rows x cols block of a tensor whose full rows have full_cols
 * columns, starting at (row0, col0), with uniform(-bound, bound) values
 * keyed by the element's index in the full tensor. */
void dt_fill_block(float *buf, int64_t rows, int64_t cols, int64_t full_cols, int64_t row0,
                   int64_t col0, uint64_t seed, uint64_t stream, float bound);

/* DT_F32 (default), or round both inputs of every dt_matmul to 16 bits and
 * accumulate in float32, as tensor cores do (the products are exact). */
void dt_set_matmul_inputs(dt_dtype t);
/* Under a lesson's memory table: what it leaves out, where there is some
 * (matmul's 16-bit rounding copies; on a GPU the CUDA context, cuBLAS and
 * NCCL). */
void dt_print_memory_uncounted(void);

/* Mixed precision. The 16-bit type of --precision (DT_F32 for fp32): what
 * matmul inputs are rounded to and what gradients, parameters and
 * activations travel in. Master weights and optimizer state stay float32. */
dt_dtype dt_precision_type(const dt_train_config *c);

/* fp16's dynamic loss scaling, as torch.cuda.amp.GradScaler does it: the
 * loss gradient is multiplied by `scale` before backward, so small gradients
 * survive fp16; a step whose gradients overflowed (inf or NaN) is skipped and
 * the scale halved; after growth_interval good steps in a row it doubles.
 * For fp32 and bf16 the scale stays 1 and nothing is ever skipped. */
typedef struct {
  double scale;
  int64_t good_steps, skipped, taken; /* taken: AdamW's step count t */
  int quiet;                          /* no "step skipped" line (the reference's) */
} dt_loss_scaler;
void dt_scaler_init(dt_loss_scaler *s, const dt_train_config *c);
/* After the gradients are complete (communicated): 1 to take the step (then
 * multiply the gradients by 1/scale_used first), 0 to skip it. */
int dt_scaler_update(dt_loss_scaler *s, const dt_train_config *c, int found_nonfinite,
                     double *scale_used);

/* The optimizer the config names, on any contiguous slice (a shard is fine);
 * m and v are AdamW's state (NULL for sgd); step t counts from 1. It steps
 * with g x grad_scale, without changing g: pass dt_grad_scale's factor. */
void dt_optimizer_step(const dt_train_config *c, float *w, const float *g, float *m, float *v,
                       size_t n, int64_t t, float grad_scale);
/* torch.nn.utils.clip_grad_norm_: the factor to scale every gradient by,
 * given the squared global norm (1 when clipping is off or not needed). */
float dt_clip_factor(const dt_train_config *c, double global_sq_norm);
/* What the optimizer multiplies the gradients by: fp16's 1/scale_used times
 * the clip factor of the unscaled gradients, whose squared global norm is
 * sq_norm / scale_used^2 (sq_norm of the gradients as they are; pass 0 when
 * clipping is off: the norm is computed only when it is used). One pass
 * (the optimizer's) replaces a dt_scale pass for each factor. */
float dt_grad_scale(const dt_train_config *c, double scale_used, double sq_norm);

/* The indices of the k entries of x (host) with the largest magnitude, in
 * O(n) on average; ties are broken by index, so every run picks the same. */
void dt_topk_indices(const float *x, int64_t n, int64_t k, int32_t *idx);

/* ------------------------------------------------------------------ model */
/* Tensor t of the model: layer t/2, W1 when t is even, W2 when odd. Its
 * initial values are keyed by (seed, t, element index), so any rank can make
 * any shard of any tensor, and every world size starts from the same model. */
void dt_init_w1(const dt_train_config *c, int64_t layer, float *w1, int64_t col0, int64_t cols);
void dt_init_w2(const dt_train_config *c, int64_t layer, float *w2, int64_t row0, int64_t rows);

/* One block on a slice of Hs hidden units. Forward keeps a = x W1 for the
 * backward pass; out = (residual ? x : 0) + relu(a) W2. */
void dt_block_forward(const float *x, const float *w1, const float *w2, float *a, float *h,
                      float *out, int64_t rows, int64_t D, int64_t Hs, int residual);
/* Given dout, adds dW1 = x^T da and dW2 = h^T dout to dw1/dw2 (zero them
 * first for a fresh gradient) and writes dx = (residual ? dout : 0) + da W1^T.
 * dh is scratch of rows*Hs. */
void dt_block_backward(const float *x, const float *a, const float *h, const float *w1,
                       const float *w2, const float *dout, float *dx, float *dw1, float *dw2,
                       float *dh, int64_t rows, int64_t D, int64_t Hs, int residual);

/* ------------------------------------------------------------------- data */
/* Sample i: x_i from the RNG keyed by (data seed, i), uniform in [-1, 1);
 * y_i = teacher(x_i), one fixed random block (data.c). Rows k = 0..count-1 of
 * x and y ([count, D], backend memory) are samples[k]. Any rank can make any
 * sample. Lessons pick the samples with the sampler below: global batch s of
 * an epoch is positions s*B .. s*B+B-1 of that epoch's shuffle, and rank r's
 * share of it is what DistributedSampler gives rank r. */
void dt_make_batch(const dt_train_config *c, const int64_t *samples, int64_t count, float *x,
                   float *y);
int64_t dt_batches_per_epoch(const dt_train_config *c); /* samples / B */
/* The B/replicas samples of `rank` at `step`, drawn through the sampler
 * (the epoch's shard, walked in order, reshuffled each epoch). */
void dt_step_samples(const dt_train_config *c, int replicas, int rank, int64_t step, int64_t *out);

/* -------------------------------------------------------------- reference */
/* Train the same config in one process on rank 0 and compare (check.c, the
 * criterion in CHECKING.md): per-step loss and final weights (full W1/W2 of
 * every layer, host copies, layer-major: W1_0, W2_0, W1_1, ...; on rank 0).
 * replicated: every rank holds the whole model in final_weights, and all
 * copies must be bit-identical. Prints each figure beside its bound and CHECK
 * PASSED or CHECK FAILED on rank 0; returns 0 or 1 on every rank (collective). */
int dt_check_against_reference(const dt_train_config *c, const double *losses,
                               const float *final_weights, int replicated);
/* For methods that change the gradients on purpose (top-k compression):
 * the final loss must be within `factor` of the exact reference's and below
 * the run's first loss. Prints both and CHECK PASSED/FAILED; collective. */
int dt_check_convergence(const dt_train_config *c, const double *losses, double factor,
                         const char *what);
/* The reference trainer itself. losses[steps] and weights (as above, host)
 * are filled; initial (optional, host) gets the weights before step 0; reach
 * is how far the optimizer could move any one weight in the steps run. */
typedef struct {
  double *losses;
  float *weights, *initial;
  double reach;
} dt_reference_run;
void dt_reference_train(const dt_train_config *c, dt_reference_run *out);
double dt_adamw_max_update(int64_t t); /* |m_hat / (sqrt(v_hat) + eps)| <= this at step t */

/* ------------------------------------------------------------ checkpoints */
/* safetensors, F32, "layers.{l}.w1" [D,H] and "layers.{l}.w2" [H,D], written
 * atomically (temp file, fsync, rename). weights as above, on the host. */
void dt_save_model(const char *path, const dt_train_config *c, int64_t step, const float *weights);
/* Reads into weights (host); dt_fail with a clear message on a missing
 * file, a corrupt header or shapes that do not match the config. Collective:
 * call on every rank. */
void dt_load_model(const char *path, const dt_train_config *c, float *weights);
void dt_dump_data(const char *path, const dt_train_config *c);

/* Checkpoints for resuming (checkpoint.c): weights and AdamW state (m, v:
 * NULL for sgd) as whole layer-major host arrays, and the step. Save on rank
 * 0 only, after gathering; resume is collective, fills the arrays, sets
 * c->start_step and returns it. Steps start_step .. steps-1 remain. */
void dt_ckpt_save(const dt_train_config *c, int64_t step, const float *w, const float *m,
                  const float *v);
int64_t dt_ckpt_resume(dt_train_config *c, float *w, float *m, float *v);
/* Whether to checkpoint after finishing step index `step` (0-based). */
int dt_ckpt_due(const dt_train_config *c, int64_t step);

#ifdef __cplusplus
}
#endif
#endif
