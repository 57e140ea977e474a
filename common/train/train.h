/* train.h: the training layer, what every training lesson includes (above
 * dt.h, the communication layer, and sampler.h).
 *
 * Four models, each a kind the lesson names (dt_model_kind). The first is
 * L residual MLP blocks, width D, hidden H, float32, row-major, no biases:
 *   a = x W1;  h = relu(a);  x' = x + h W2;   loss = mean((x_L - y)^2)
 * W1 is [D, H], W2 is [H, D]. The functions take whatever slice of W1 (some
 * columns) and W2 (the matching rows) they are given, so tensor parallelism
 * reuses them unchanged. The mixture of experts puts E such MLPs behind a
 * router in each block; the transformer puts causal attention before the
 * block's MLP. The GPT is nanoGPT's (bias=False) on tokens of a real text,
 * its pieces on any slice of heads, hidden units or vocabulary ("gpt"). */
#ifndef DT_TRAIN_H
#define DT_TRAIN_H

#include <stdint.h>

#include "dt.h"
#include "sampler.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- config */
/* The model a lesson trains, named by the lesson (its main, before
 * dt_run_init): its tensors, its forward pass and its yardstick are this
 * layer's. */
typedef enum {
  DT_MLP,         /* L residual ReLU MLP blocks */
  DT_MOE,         /* each block's MLP a mixture of E experts behind a router */
  DT_TRANSFORMER, /* each block causal attention, then the MLP */
  DT_GPT          /* nanoGPT's GPT on a text: embeddings, pre-norm blocks, a tied head */
} dt_model_kind;

typedef struct dt_text dt_text; /* a text as tokens (text.c; below, "text") */

typedef struct {
  dt_model_kind model;
  int64_t layers, dim, hidden, batch, steps, samples, seed, data_seed;
  double lr, weight_decay, clip;
  double adamw_lr;       /* what --lr 0 means for AdamW (0: 0.003); a lesson may set its own */
  const char *optimizer; /* "sgd" or "adamw" */
  const char *precision; /* "fp32", "bf16", "fp16" */
  double loss_scale;     /* fp16: the initial loss scale */
  int64_t growth_interval;
  const char *save, *load, *dump_data, *trace, *ckpt;
  int64_t save_every;
  int no_check, resume;
  int64_t check_every; /* the check takes every K-th step in one process (1: each) */
  int64_t start_step;  /* set by dt_ckpt_resume: the first step this run trains */
  /* set by dt_run_rank_state: what per-rank state checkpoints hold beside
   * the model (top-k's residual), NULL for none; a resume must match it */
  const char *rank_state;
  /* DT_MOE: E experts a block, each token sent to the k best */
  int64_t experts, topk;
  double capacity_factor, aux_coef;
  /* DT_TRANSFORMER and DT_GPT: sequences of `seq` tokens, `heads` heads */
  int64_t seq, heads;
  /* DT_GPT: the text and its tokens ("char" or "byte"); the vocabulary V,
   * set by dt_train_resolve from the text, padded to a multiple of
   * vocab_multiple (the lesson's: its tensor-parallel ranks; 0: 1) */
  const char *text, *tokens;
  const dt_text *corpus; /* the text, loaded by dt_train_resolve */
  int64_t vocab, vocab_multiple;
  double beta2; /* AdamW's second beta (0: 0.999; the GPT's 0.99) */
  /* DT_GPT: steps of linear warm-up (-1: a tenth of the decay's), then a cosine decay to lr/10
   * at step decay_steps (0: --steps; fixed, a resumed run may train to more steps) */
  int64_t warmup, decay_steps;
  int schedule_auto; /* set by dt_train_resolve: both follow --steps (a resume takes the file's) */
  int64_t eval_every, eval_batches; /* DT_GPT: evaluate every K steps on M fixed batches */
  /* DT_GPT: after training, print `sample` tokens after the prompt */
  int64_t sample, top_k;
  const char *prompt;
  double temperature;
} dt_train_config;

/* Defaults finish in seconds on a laptop CPU. hidden 0 means 4*dim, samples
 * 0 means 8 batches and lr 0 the optimizer's own default; dt_train_resolve
 * fills them in. */
#define DT_TRAIN_DEFAULTS                                                                          \
  {                                                                                                \
    .layers = 4, .dim = 64, .hidden = 0, .batch = 32, .steps = 30, .samples = 0, .seed = 1,        \
    .data_seed = 2, .lr = 0, .weight_decay = 0.01, .clip = 0, .optimizer = "sgd",                  \
    .precision = "fp32", .loss_scale = 65536, .growth_interval = 2000, .check_every = 1            \
  }

/* The flags every training lesson shares; put it first in the option table. */
#define DT_TRAIN_OPTIONS(c)                                                                        \
  DT_INT("--layers", &(c)->layers, 1, 4096, "number of blocks L"),                                 \
      DT_INT("--dim", &(c)->dim, 1, 65536, "model width D"),                                       \
      DT_INT("--hidden", &(c)->hidden, 0, 262144, "hidden width H (0: 4*D)"),                      \
      DT_INT("--batch", &(c)->batch, 1, 1 << 20, "global batch B (samples per step, all ranks)"),  \
      DT_INT("--steps", &(c)->steps, 0, 1000000, "optimizer steps"),                               \
      DT_INT("--samples", &(c)->samples, 0, 1 << 30, "dataset size, a multiple of B (0: 8*B)"),    \
      DT_DOUBLE("--lr", &(c)->lr, 0, 100, dt_lr_help(c)),                                          \
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
      DT_FLAG("--no-check", &(c)->no_check, "skip the comparison with single-process training"),   \
      DT_INT("--check-every", &(c)->check_every, 1, 1 << 30,                                       \
             "compare every N-th step with one process's, from the run's own state")

/* A training step's loss line, on the steps worth reading (the first five
 * of the run, every tenth, the last); `how` says where the number comes from.
 * With part_name (dt_loss_part: a mixture's "balance"), part is a term of the
 * loss printed apart: loss = task + part.
 * Called by every rank every step with the same loss; returns 1 where the
 * loss is not finite or has exploded (10^4 x the run's first), and the run
 * then ends the job at that step (dt_step_end: dt_stop_diverged, a message
 * naming divergence and what to change, exit 2; or a failed check). */
int dt_print_step(const dt_train_config *c, int64_t step, double loss, const char *part_name,
                  double part, const char *how, double seconds);

/* The model's second loss term, printed apart from the task's (a mixture's
 * load-balancing loss: "balance"), or NULL: the loss has one term. */
const char *dt_loss_part(const dt_train_config *c);
/* --lr's help: what 0 means for each optimizer, the lesson's AdamW default */
const char *dt_lr_help(const dt_train_config *c);
/* Fill derived defaults and reject what no lesson can run; dt_fail on error. */
void dt_train_resolve(dt_train_config *c);
void dt_train_print(const dt_train_config *c); /* rank 0: one line of config */
/* 2DH; a mixture DE + 2EDH; a transformer 4D^2 + 2DH; a GPT 2D + 4D^2 + 2DH */
int64_t dt_params_per_layer(const dt_train_config *c);
/* The floats of the whole model: L x dt_params_per_layer, and a GPT's
 * tensors outside its layers, VD + SD before them and D after */
int64_t dt_model_size(const dt_train_config *c);

/* The tensors of the whole model, in the order of its array (files,
 * checkpoints, the check): per layer W1 [D,H] and W2 [H,D]; a mixture's,
 * the router [D,E] and then W1 and W2 of each expert; a transformer's, Wq,
 * Wk, Wv, Wo [D,D] and then W1 and W2. A GPT's: wte [V,D] and wpe [S,D];
 * per layer the gain ln1 [D], Wq, Wk, Wv, Wo [D,D], the gain ln2 [D], W1
 * [D,H] and W2 [H,D], each matrix as the math multiplies it (x W); then the
 * gain ln_f [D] (files map them to nanoGPT's names and layouts). Tensor t's
 * initial values are keyed by (seed, t, element index), so any rank makes
 * any shard and every world size starts alike. */
enum { DT_INIT_UNIFORM, DT_INIT_NORMAL, DT_INIT_ONES };
typedef struct {
  char name[96]; /* "layers.0.w1", "layers.0.router", "layers.0.experts.3.w2", "layers.0.wq", "wte"
                  */
  int64_t at, rows, cols;
  float
      bound;  /* uniform(-bound, bound), 1/sqrt(fan in) as nn.Linear; with DT_INIT_NORMAL the std */
  int init;   /* DT_INIT_UNIFORM (0), DT_INIT_NORMAL (nanoGPT's), DT_INIT_ONES (a gain) */
  int vector; /* one row that files store 1-D, [cols] (a gain) */
  int plain;  /* AdamW leaves it undecayed (a gain, as nanoGPT's optimizer groups) */
} dt_tensor;
int64_t dt_model_tensors(const dt_train_config *c); /* how many */
dt_tensor dt_model_tensor(const dt_train_config *c, int64_t t);
int64_t dt_tensor_at(const dt_train_config *c, int64_t at); /* the tensor holding element at */
/* elements [at, at + n) of the whole model, as they start (host) */
void dt_initial_weights(const dt_train_config *c, float *dst, int64_t at, int64_t n);

/* ---------------------------------------------------------------- kernels */
/* Where arrays live, for every declaration of this header: an array of
 * numbers (floats, token ids, choices) is the backend's memory (dt_alloc:
 * the GPU's on the cuda backend), read and written by the backend's
 * kernels, unless its comment says "host" (the caller's malloc or stack,
 * a file's bytes); configs and structs are host. The
 * cpu's device-boundary mode (DT_DEVICE_BOUNDARY=1, docs/gpu.md) holds the
 * cpu backend to it: a host pointer where this header wants the backend's
 * memory, or the other way round, ends the run naming the call.
 *
 * C[M,N] = op(A) op(B) (+ C when accumulate), row-major; op(X) is X or X^T.
 * A is [M,K] (or [K,M] when trans_a), B is [K,N] (or [N,K] when trans_b). */
void dt_matmul(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, const float *A,
               const float *B, float *C, int accumulate);
void dt_relu_forward(const float *a, float *h, size_t n);
void dt_relu_backward(const float *a, const float *dh, float *da, size_t n); /* da = dh*(a>0) */
/* Returns sum((x-y)^2) * scale (to the host) and writes dx = 2(x-y) * scale. */
double dt_mse_forward_backward(const float *x, const float *y, float *dx, size_t n, double scale);
double dt_sum_squares(const float *x, size_t n);
/* The optimizers read the gradient as g x grad_scale (1: as it is), so that
 * unscaling and clipping cost no pass of their own. */
void dt_sgd_step(float *w, const float *g, size_t n, float lr, float grad_scale);
/* PyTorch AdamW (betas 0.9/beta2, eps 1e-8, decoupled decay), step t >= 1 */
void dt_adamw_step(float *w, const float *g, float *m, float *v, size_t n, float lr,
                   float weight_decay, int64_t t, float grad_scale, float beta2);
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

/* What one optimizer step takes beside the config: AdamW's step count t
 * (from 1), the factor it reads the gradients with (dt_grad_scale's: fp16's
 * unscale and the clip), and this step's learning rate (dt_lr_at). */
typedef struct {
  int64_t t;
  float grad_scale, lr;
} dt_step_scalars;
/* Spans [at[2i], at[2i+1]) of a buffer, i < n, ascending: where AdamW takes
 * no weight decay (the gains: dt_tensor.plain). n 0: decay everywhere. */
typedef struct {
  int64_t *at;
  int n;
} dt_spans;
/* The optimizer the config names, on any contiguous slice (a shard is fine);
 * m and v are AdamW's state (NULL for sgd); plain (NULL: none) its spans
 * without weight decay. It steps with g x k.grad_scale, without changing g. */
void dt_optimizer_step(const dt_train_config *c, float *w, const float *g, float *m, float *v,
                       size_t n, const dt_spans *plain, dt_step_scalars k);
/* The learning rate of step `step` (0-based): c->lr, or a GPT's schedule as
 * nanoGPT's: linear warm-up over c->warmup steps to c->lr, then a cosine
 * down to c->lr / 10 at c->decay_steps, and c->lr / 10 after it. */
double dt_lr_at(const dt_train_config *c, int64_t step);
/* The whole model's spans without weight decay (its plain tensors, merged);
 * free at->at. */
dt_spans dt_model_plain(const dt_train_config *c);
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

/* ------------------------------------------------------------- decisions */
/* Training decides some things discretely, and rounding can tip the
 * decision: ReLU's a > 0 for a pre-activation within rounding of 0, the
 * router's top k (10), fp16's skip of a step whose gradients overflowed. Two
 * correct runs that sum in different orders can decide such a case apart,
 * and what follows differs by far more than rounding. So the run records its
 * decisions, and the check's one process replays them where its own numbers
 * are within rounding of the same kink, and says how many it met
 * (CHECKING.md, "Discrete decisions").
 *
 * ReLU (kinks.c): the run records each pre-activation a = x_i . W1_j within
 * tol |x_i| |W1_j| of 0, tol = K u (K the check's longest sum, u float's unit
 * roundoff), keyed by step, layer, row and hidden unit. */
typedef struct dt_kinks dt_kinks;
/* Where a block's rows and hidden units sit in the whole model: each row's
 * key (its sample; in a sequence, sample x S + position; keys NULL: the row's
 * index, a place in an expert's queue), the block's layer, and the index of
 * its first hidden unit in the layer's (a tensor-parallel slice's offset;
 * expert e's units from e H). keys must stay valid until dt_step_end. */
typedef struct {
  dt_kinks *kinks; /* NULL: nothing to record */
  const int64_t *keys;
  int64_t layer, unit0;
} dt_rows;
/* fp16's skips: at each step compared, whether one process's own gradient
 * overflows as the run's did (run.c records, lockstep.c judges) */
typedef struct {
  const unsigned char *skipped;       /* per step: 1 when the run skipped it */
  int64_t alike, replayed, otherwise; /* what one process decided */
} dt_skips;

/* One block on a slice of Hs hidden units. Forward keeps a = x W1 for the
 * backward pass; out = (residual ? x : 0) + relu(a) W2. rows (NULL: none)
 * says where the rows sit, for the check's replay of ReLU's decisions. */
void dt_block_forward(const float *x, const float *w1, const float *w2, float *a, float *h,
                      float *out, int64_t rows, int64_t D, int64_t Hs, int residual,
                      const dt_rows *where);
/* Given dout, adds dW1 = x^T da and dW2 = h^T dout to dw1/dw2 (zero them
 * first for a fresh gradient) and writes dx = (residual ? dout : 0) + da W1^T.
 * dh is scratch of rows*Hs. */
void dt_block_backward(const float *x, const float *a, const float *h, const float *w1,
                       const float *w2, const float *dout, float *dx, float *dw1, float *dw2,
                       float *dh, int64_t rows, int64_t D, int64_t Hs, int residual);

/* ---------------------------------------------------------------- experts */
/* DT_MOE, the mixture of E experts (moe.c; lesson 10 trains it), each the
 * block's D->H->D ReLU MLP, on the backend's rows (the router's kernels on
 * the cuda backend: moe_kernels.cu; dt_moe_keep and dt_moe_aux's f are host
 * bookkeeping). A block becomes
 *   x' = x + sum over token's kept choices j of gate_j MLP_{e_j}(x).
 * The router: probs = softmax(x Wr) [R,E]; choice [R,k] the k most probable
 * experts, best first, a tie to the lower index; gate [R,k] their
 * probabilities renormalised to sum to 1. */
void dt_router_forward(const float *x, const float *wr, int64_t R, int64_t D, int64_t E, int64_t k,
                       float *probs, int32_t *choice);
void dt_router_gates(const float *probs, const int32_t *choice, int64_t R, int64_t E, int64_t k,
                     float *gate);
/* Capacity of each expert for a group of R tokens: ceil(cf k R / E). */
int64_t dt_moe_capacity(const dt_train_config *c, int64_t R);
/* First come, first served in token order (choice j after j-1), host
 * arrays (the choices copied out): slot [R,k]
 * is the choice's place in its expert's queue, or -1 when the queue was
 * full (the token keeps its residual path only). count[E]: kept per expert.
 * Returns how many choices were dropped. */
int64_t dt_moe_keep(const int32_t *choice, int64_t R, int64_t k, int64_t E, int64_t C,
                    int32_t *slot, int64_t *count);
/* The load-balancing loss of R rows, aux_coef x E x sum_e f_e P_e, with P_e
 * the rows' mean probability of e and f_e the fraction of every rank's
 * choices that went to e; daux[E] gets d/dp of one row, aux_coef E f_e / R,
 * times scale (fp16's loss scale, as the task loss's gradient has it; else 1). */
double dt_moe_aux(const dt_train_config *c, const float *probs, int64_t R, const float *f,
                  double scale, float *daux);
/* Back through the gates and the softmax, from dgate [R,k] and daux [E]
 * (NULL: none): dWr += x^T dlogits, dx += dlogits Wr^T (dlogits: scratch
 * [R,E]). */
void dt_router_backward(const float *x, const float *wr, const float *probs, const int32_t *choice,
                        const float *gate, const float *dgate, const float *daux, int64_t R,
                        int64_t D, int64_t E, int64_t k, float *dlogits, float *dwr, float *dx);

/* The tokens' trip (lesson 10), on the backend's rows; choice i = t k + j
 * of token t goes to row pos[i] of the send order (-1: dropped):
 *   dispatch: send[pos[i]] = x[t];  combine: xn = x + sum_j gate_i ret[pos[i]];
 *   gate backward: back[pos[i]] = gate_i dy[t], dgate_i = dy[t] . ret[pos[i]]
 *   (0 when dropped);  combine backward: dx = dy + sum_j back[pos[i]], the
 *   choices added in choice order, or with expert (choice's, on the backend)
 *   in the experts' order (the yardstick's). */
void dt_moe_dispatch_rows(const float *x, const int32_t *pos, int64_t R, int64_t k, int64_t D,
                          float *send);
void dt_moe_combine(const float *x, const float *gate, const float *ret, const int32_t *pos,
                    int64_t R, int64_t k, int64_t D, float *xn);
void dt_moe_gate_backward(const float *dy, const float *gate, const float *ret, const int32_t *pos,
                          int64_t R, int64_t k, int64_t D, float *back, float *dgate);
void dt_moe_combine_backward(const float *dy, const float *back, const int32_t *pos,
                             const int32_t *expert, int64_t R, int64_t k, int64_t D, float *dx);

/* The flags of the mixture, after DT_TRAIN_OPTIONS in its lesson's table. */
#define DT_MOE_OPTIONS(c)                                                                          \
  DT_INT("--experts", &(c)->experts, 1, 256, "experts E per layer (a multiple of N)"),             \
      DT_INT("--topk", &(c)->topk, 1, 2, "experts k each token is sent to"),                       \
      DT_DOUBLE("--capacity-factor", &(c)->capacity_factor, 1e-9, 1e6,                             \
                "cf: an expert takes at most ceil(cf k R / E) of a rank's R tokens"),              \
      DT_DOUBLE("--aux-coef", &(c)->aux_coef, 0, 1e3, "weight of the load-balancing loss")

/* Routing is a discrete choice, so the check replays the run's (CHECKING.md):
 * at each step it compares, one process takes each token's experts from
 * `choice` and verifies they are the ones it would choose itself, unless the
 * logits it sees are within DT_ROUTING_TIE of a tie (DT_ROUTING_TIE16 in 16
 * bits, where the rows the run sends round by a bf16 or fp16 unit). Capacity
 * groups: one per rank, as the run's. */
#define DT_ROUTING_TIE   1e-4
#define DT_ROUTING_TIE16 1e-2
typedef struct {
  int32_t *choice;                /* the step's, [groups][layers][R][k], rank-major (rank 0) */
  int64_t groups, R;              /* ranks, and the tokens each routes per step */
  int64_t tokens, ties, disagree; /* what the reference found */
  double tie;                     /* the tolerance it used */
  double widest;                  /* the largest margin replayed as a tie */
  double closest;                 /* the smallest margin of a disagreement */
} dt_routing;

/* -------------------------------------------------------------- attention */
/* The transformer's flags (lessons 11 and 12), after DT_TRAIN_OPTIONS. */
#define DT_ATTN_OPTIONS(c)                                                                         \
  DT_INT("--seq", &(c)->seq, 1, 1 << 20, "tokens S per sequence (--batch counts sequences)"),      \
      DT_INT("--heads", &(c)->heads, 1, 4096, "attention heads A (dividing D)")

/* DT_TRANSFORMER's causal attention (attention.c; on the cuda backend
 * attention_kernels.cu, on device rows), on rows of width W
 * (heads x dh columns, head h in columns h dh .. h dh + dh - 1), scores
 * scaled by 1/sqrt(dh). One block: n query rows against nk key/value rows;
 * causal (a diagonal block, n == nk): query i sees keys 0..i, else all.
 * o [n,W] is the block's own softmax-weighted sum of v, lse [n,heads] the
 * log of its softmax's denominator (max included); merging blocks is the
 * caller's. Returns the scores computed per head. */
int64_t dt_attn_block_forward(const float *q, const float *k, const float *v, int64_t n, int64_t nk,
                              int64_t W, int64_t heads, int causal, float *o, float *lse);
/* delta [n,heads]: each row's and head's dout . o, with o the final output */
void dt_attn_delta(const float *dout, const float *o, int64_t n, int64_t W, int64_t heads,
                   float *delta);
/* Back through one block, the probabilities recomputed from the final lse:
 * adds to dq [n,W], dk and dv [nk,W]. Returns the scores recomputed. */
int64_t dt_attn_block_backward(const float *q, const float *k, const float *v, const float *dout,
                               const float *delta, const float *lse, int64_t n, int64_t nk,
                               int64_t W, int64_t heads, int causal, float *dq, float *dk,
                               float *dv);
/* The running result of blocks merged one by one (lessons 11, 12's ring):
 * start empty (o = 0, lse = -inf), then merge each block's o, lse into it
 * by their log-sum-exp (11_cp's cp_merge, its exercise, is the same
 * formula on host rows; this one runs on the backend's memory). */
void dt_attn_start(float *o, float *lse, int64_t n, int64_t W, int64_t heads);
void dt_attn_merge(float *o, float *lse, const float *ob, const float *lseb, int64_t n, int64_t W,
                   int64_t heads);
/* Queries and keys per tile (attention.c): its GEMMs are TILE x TILE x dh
 * (scores) and TILE x dh x TILE (products) */
#define DT_ATTN_TILE 128
/* Forward computes 4 dh flops per score (S = Q K^T, O += P V), backward 10 dh
 * (S again, dP = dO V^T, dV, dK, dQ). What one core's sgemm reaches at the
 * tiles' shapes, those seven GEMMs alone, GFLOP/s: the floor to compare the
 * blocks' rate with. Takes about 50 ms of CPU time. */
double dt_attn_gemm_rate(int64_t dh);
/* the tiles' scratch the blocks keep, (2 TILE^2 + 4 TILE dh) x 4 bytes: one
 * tile of scores and one of dP, and copies of a tile's rows (16-bit inputs,
 * the rate's operands); the same at any S, 0 before the first block */
size_t dt_attn_scratch_bytes(void);

/* ------------------------------------------------------------------- text */
/* A text as tokens (text.c): its characters (the vocabulary is the sorted
 * set of its Unicode code points, as nanoGPT's shakespeare_char prepares
 * it) or its bytes (V = 256). The first 90% of the tokens train, the last
 * 10% validate. V is padded to a multiple (the vocabulary's slices). */
typedef struct {
  int64_t size;    /* V: token ids 0 .. V-1, the last size - used of them padding */
  int64_t used;    /* the tokens the text has (characters), or 256 (bytes), 256 + merges (BPE) */
  int bytes;       /* 1: each byte a token (BPE: before its merges) */
  uint32_t *chars; /* characters: the code point of each id, ascending */
  int64_t merges;  /* BPE (bpe.c): token 256 + k joins pair[2k] and pair[2k + 1] */
  int32_t *pair;
} dt_vocab;
struct dt_text {
  dt_vocab vocab;
  int32_t *ids;     /* the text's tokens */
  int64_t n, train; /* how many; the first `train` of them train */
  int64_t bytes[2]; /* the training and the validation split's bytes (bits per byte) */
};
/* Read and tokenize path (dt_fail with one clear message on a missing,
 * empty or non-UTF-8 file, or one whose splits are shorter than a window of
 * `window` tokens). Rank 0 says when V was padded. */
void dt_text_load(dt_text *t, const char *path, int bytes, int64_t multiple, int64_t window);
void dt_text_free(dt_text *t);
/* The training windows of `step`: samples [b0, b0 + count) of the step's B,
 * each S + 1 tokens from a start keyed by (data seed, step, sample), so any
 * rank draws its own without talking: out [count, S + 1], host */
void dt_text_batch(const dt_train_config *c, int64_t step, int64_t b0, int64_t count, int32_t *out);
/* Evaluation batch j of a split (0 training, 1 validation): B windows, the
 * same at every evaluation and on every mesh (out: host) */
void dt_text_eval_batch(const dt_train_config *c, int split, int64_t j, int32_t *out);
/* UTF-8 text to ids, host (-1 and err: a character not in the vocabulary) */
int64_t dt_vocab_encode(const dt_vocab *v, const char *s, int32_t *ids, int64_t cap, char *err,
                        size_t errlen);
char *dt_vocab_decode(const dt_vocab *v, const int32_t *ids, int64_t n); /* malloc'ed text */
/* The vocabulary as a JSON string's body, each character escaped where JSON
 * needs it (malloc'ed); and back (0, or -1 with err on a malformed one). */
char *dt_vocab_json(const dt_vocab *v);
int dt_vocab_parse(dt_vocab *v, const char *json, size_t len, char *err, size_t errlen);
/* Byte-level BPE (bpe.c, bpe_text.c; minbpe's BasicTokenizer, no pre-split):
 * up to `merges` merges of the n bytes, each the most frequent adjacent pair
 * (ties: the lowest (a, b)) into token 256 + k, into pairs [2 merges]; it
 * stops where no pair occurs twice. Returns how many; out (if not NULL, n
 * ints) gets the merged sequence, *out_n its length. */
int64_t dt_bpe_learn(const int32_t *bytes, int64_t n, int64_t merges, int32_t *pairs, int32_t *out,
                     int64_t *out_n);
/* n bytes (as ints) to tokens, the merges applied in learned order (minbpe's
 * encode); ids may be bytes. Returns the count. */
int64_t dt_bpe_encode(const dt_vocab *v, const int32_t *bytes, int64_t n, int32_t *ids);
/* dt_text_load's, as BPE tokens: `merges` learned from the training split
 * (its first 90% of bytes) by rank 0 and broadcast, or given's (a file's);
 * the splits encoded apart. Collective over the world. */
void dt_text_load_bpe(dt_text *t, const char *path, int64_t merges, const dt_vocab *given,
                      int64_t multiple, int64_t window);
/* The merges as the metadata holds them ("a b a b ...", malloc'ed), and
 * back (0, or -1 with err: garbage, an id not defined before its merge,
 * another count than vocab_used's) */
char *dt_bpe_text(const dt_vocab *v);
int dt_bpe_parse(dt_vocab *v, const char *s, int64_t used, char *err, size_t errlen);
const char *dt_vocab_kind(const dt_vocab *v);            /* "char", "byte" or "bpe" */
const char *dt_vocab_noun(const dt_vocab *v);            /* "characters", "bytes" or "BPE tokens" */
int dt_vocab_same(const dt_vocab *a, const dt_vocab *b); /* the same tokens, id for id */
/* Any vocabulary's encode and decode (BPE's here, the others' text.c's);
 * BPE's text shows a byte that is no printable character as \xNN. */
int64_t dt_tokens_encode(const dt_vocab *v, const char *s, int32_t *ids, int64_t cap, char *err,
                         size_t errlen);
char *dt_tokens_decode(const dt_vocab *v, const int32_t *ids, int64_t n);

/* -------------------------------------------------------------------- gpt */
/* DT_GPT, nanoGPT's GPT with bias=False (gpt.c), on R rows of tokens:
 *   x = wte[token] + wpe[position]
 *   per layer:  x += Attn(LN1(x)) Wo;  x += gelu(LN2(x) W1) W2
 *   logits = LN_f(x) wte^T (the head tied to the embedding);  loss = mean
 *   cross-entropy of each row's next token
 * LayerNorm has a gain and no bias (eps 1e-5), GELU is the tanh form, H =
 * 4D unless --hidden. The pieces below take whatever slice they are given:
 * some heads (Wq, Wk, Wv's columns, Wo's rows), some hidden units (W1's
 * columns, W2's rows), some rows of the vocabulary (wte's), so a lesson
 * composes tensor, vocabulary, pipeline and data parallelism from them.
 * Everything runs on the backend's memory: elementwise and row pieces
 * (gpt_core.h's arithmetic on both backends), attention's blocks
 * (attention.c, attention_kernels.cu), and the whole-model functions
 * further down. */

/* nanoGPT's settings for a GPT run, over DT_TRAIN_DEFAULTS' (a lesson calls
 * it before dt_run_init): AdamW at 1e-3 with betas (0.9, 0.99), weight
 * decay 0.1 on matrices and embeddings (none on gains), the warm-up and
 * cosine schedule, clipping at 1.0, characters of README.md */
void dt_gpt_defaults(dt_train_config *c);

/* LayerNorm over R rows of D: y = (x - mean) rstd g; mean and rstd [R] kept */
void dt_layernorm_forward(const float *x, const float *g, float *y, float *mean, float *rstd,
                          int64_t R, int64_t D);
/* From dy: dx written (accumulate: added to it, a residual's gradient
 * there already), dg += sum over the rows of dy xhat */
void dt_layernorm_backward(const float *x, const float *g, const float *dy, const float *mean,
                           const float *rstd, float *dx, float *dg, int64_t R, int64_t D,
                           int accumulate);
void dt_gelu_forward(const float *a, float *u, size_t n);
void dt_gelu_backward(const float *a, const float *du, float *da, size_t n); /* da = du gelu'(a) */
/* The embedding over a slice of the vocabulary, rows [v0, v0 + Vs) of wte
 * (wte here: that slice, [Vs, D]): out[r] = wte[tokens[r] - v0], zeros for
 * a token of another slice, so the slices' outputs sum to the lookup.
 * tokens [R] on the backend, as wte and out: the kernels read the ids there
 * (a lesson copies a step's ids in once). Backward adds dout[r] into the
 * slice's rows only, each token's rows summed in row order (its buckets
 * made on the backend too: gpt.c). */
void dt_embed_forward(const int32_t *tokens, int64_t R, const float *wte, int64_t v0, int64_t Vs,
                      int64_t D, float *out);
void dt_embed_backward(const int32_t *tokens, int64_t R, const float *dout, int64_t v0, int64_t Vs,
                       int64_t D, float *dwte);
/* count sequences of len rows, positions t0 .. t0 + len - 1 (a context-
 * parallel rank's share): out[k len + i] += wpe[t0 + i]; backward adds each
 * position's gradient, summed over the sequences, into dwpe's rows t0.. */
void dt_positions_forward(const float *wpe, int64_t t0, int64_t len, int64_t count, int64_t D,
                          float *out);
void dt_positions_backward(const float *dout, int64_t t0, int64_t len, int64_t count, int64_t D,
                           float *dwpe);
/* The cross-entropy in pieces, never gathering the logits: logits [R, Vs]
 * of the vocabulary [v0, v0 + Vs), targets [R] and the pieces [R], all on
 * the backend. (a) each row's max; all-reduce them (max) over the slices;
 * (b) given the global max, the sum of e^(l - max); (c) the target's logit
 * where the target is in this slice, else 0; all-reduce (b) and (c) (sum).
 * dt_ce_loss: the sum over the rows of log(sum) + max - target logit (the
 * caller divides by the rows of the mean). Backward: dlogits = (softmax -
 * onehot) x scale (scale: 1 / the rows of the mean, times fp16's scale). */
void dt_ce_max(const float *logits, int64_t R, int64_t Vs, float *mx);
void dt_ce_sumexp(const float *logits, int64_t R, int64_t Vs, const float *mx, float *sum);
void dt_ce_target(const float *logits, int64_t R, int64_t Vs, int64_t v0, const int32_t *targets,
                  float *tl);
double dt_ce_loss(const float *mx, const float *sum, const float *tl, int64_t R);
void dt_ce_backward(const float *logits, int64_t R, int64_t Vs, int64_t v0, const int32_t *targets,
                    const float *mx, const float *sum, float scale, float *dlogits);
/* All the pieces over the whole vocabulary (one slice, v0 = 0): the mean
 * loss of the R rows (to the host: dt_ce_loss's 3R floats), and dlogits
 * with scale / R (NULL: none); targets on the backend. */
double dt_ce_whole(const float *logits, int64_t R, int64_t V, const int32_t *targets, float scale,
                   float *dlogits);

/* One block's weights (or gradients) on a slice: ln1, ln2 [D]; Wq, Wk, Wv
 * [D, Ws] (Ws = heads x dh columns of this slice's heads), Wo [Ws, D]; W1
 * [D, Hs], W2 [Hs, D]. dt_gpt_block_at points them into a whole model. */
typedef struct {
  float *ln1, *wq, *wk, *wv, *wo, *ln2, *w1, *w2;
} dt_gpt_block;
dt_gpt_block dt_gpt_block_at(const dt_train_config *c, float *model, int64_t layer);
/* A GPT's tensors as dt_model_tensor numbers them: wte, wpe, then each
 * layer's eight in dt_gpt_block's order; ln_f after the last layer's, as
 * if it were layer L's first (dt_gpt_tensor(L, 0)). */
enum { DT_GPT_WTE, DT_GPT_WPE };
enum {
  DT_GPT_LN1,
  DT_GPT_WQ,
  DT_GPT_WK,
  DT_GPT_WV,
  DT_GPT_WO,
  DT_GPT_LN2,
  DT_GPT_W1,
  DT_GPT_W2,
  DT_GPT_PER_LAYER
};
static inline int64_t dt_gpt_tensor(int64_t layer, int j) {
  return 2 + DT_GPT_PER_LAYER * layer + j;
}
/* A slice's shape: seqs whole sequences of S rows (R = seqs x S), width D,
 * `heads` heads of dh columns, Hs hidden units. */
typedef struct {
  int64_t seqs, S, D, heads, dh, Hs;
} dt_gpt_shape;
/* Attention on the slice's heads: qkv [3][R, Ws] and o [R, Ws] kept, lse
 * [R, heads]; out = (x ? x : 0) + o Wo, a partial sum over the heads that
 * tensor parallelism all-reduces (pass x on one rank, or after the sum). */
void dt_gpt_attn_forward(const dt_gpt_shape *s, const dt_gpt_block *w, const float *h, float *qkv,
                         float *o, float *lse, const float *x, float *out);
/* Back from dout [R, D]: adds to g's wq, wk, wv, wo; dh = the input's
 * gradient (partial over the heads). scratch: 4 R Ws + R heads floats. */
void dt_gpt_attn_backward(const dt_gpt_shape *s, const dt_gpt_block *w, dt_gpt_block *g,
                          const float *h, const float *qkv, const float *o, const float *lse,
                          const float *dout, float *scratch, float *dh);
/* The MLP on the slice's hidden units: a = h W1, u = gelu(a) [R, Hs] kept;
 * out = (x ? x : 0) + u W2 (partial over the units) */
void dt_gpt_mlp_forward(const dt_gpt_shape *s, const dt_gpt_block *w, const float *h, float *a,
                        float *u, const float *x, float *out);
/* adds to g's w1, w2; dh = the input's gradient (partial); du: [R, Hs] scratch */
void dt_gpt_mlp_backward(const dt_gpt_shape *s, const dt_gpt_block *w, dt_gpt_block *g,
                         const float *h, const float *a, const float *u, const float *dout,
                         float *du, float *dh);

/* The whole model in one process, on the backend's memory (w, g and the
 * activations; the GPU's on the cuda backend): forward over seqs sequences
 * of len <= S positions, inputs and targets [seqs x len] host arrays
 * (copied in, once each; targets NULL: no loss), returning the mean loss; backward, after a
 * forward with targets, adds the gradient of the loss x scale (fp16's loss
 * scale, else 1) to g (the whole model's layout). Attention
 * is attention.c's tiled blocks, or with `materialised` the S x S scores
 * (the yardstick's). */
typedef struct dt_gpt_acts dt_gpt_acts;
dt_gpt_acts *dt_gpt_acts_new(const dt_train_config *c, int64_t seqs, int materialised);
void dt_gpt_acts_free(dt_gpt_acts *a);
double dt_gpt_forward(const dt_train_config *c, const float *w, const int32_t *inputs,
                      const int32_t *targets, int64_t len, dt_gpt_acts *a);
void dt_gpt_backward(const dt_train_config *c, const float *w, dt_gpt_acts *a, double scale,
                     float *g);
/* [seqs x len, V] of the last forward, on the backend's memory */
const float *dt_gpt_logits(const dt_gpt_acts *a);
/* Windows [seqs, S + 1] (text.c's) to inputs and targets [seqs, S], host */
void dt_gpt_split_windows(const int32_t *windows, int64_t seqs, int64_t S, int32_t *inputs,
                          int32_t *targets);

/* Evaluation, the same on every mesh: the mean loss over --eval-batches
 * fixed batches of B windows of each split (text.c), loss[0] training,
 * loss[1] validation; one process, the whole model host (a host copy,
 * copied to the backend's memory for the forward). */
void dt_gpt_evaluate(const dt_train_config *c, const float *host, double loss[2]);
/* Whether to evaluate after step `step` (0-based): every --eval-every
 * steps, and after the last */
int dt_gpt_eval_due(const dt_train_config *c, int64_t step);
/* n tokens after the prompt from the whole model host (a host copy, run on
 * the backend as evaluation's; each token's last logits back), each drawn from
 * softmax(logits / temperature) over the top_k most likely (0: all; never
 * the padding), keyed by (seed, token): the prompt (empty: the vocabulary's
 * first token) and what follows, as text (malloc'ed). A bad prompt: dt_fail. */
char *dt_gpt_sample(const dt_train_config *c, const dt_vocab *vocab, const float *host,
                    const char *prompt, int64_t n, double temperature, int64_t top_k,
                    uint64_t seed);

/* The GPT's flags, after DT_TRAIN_OPTIONS and DT_ATTN_OPTIONS (--seq is the
 * context, --heads the heads). */
#define DT_GPT_OPTIONS(c)                                                                          \
  DT_STRING("--text", &(c)->text, NULL, "train on this UTF-8 text (e.g. README.md)"),              \
      DT_STRING("--tokens", &(c)->tokens, "char|byte|bpe:N",                                       \
                "tokens: characters, bytes (V = 256), or bytes and N BPE merges (V = 256 + N)"),   \
      DT_INT("--warmup", &(c)->warmup, -1, 1 << 30,                                                \
             "steps of linear learning-rate warm-up (-1: a tenth of the decay's)"),                \
      DT_INT("--lr-decay-steps", &(c)->decay_steps, 0, 1 << 30,                                    \
             "the cosine decay reaches lr/10 at this step (0: --steps)"),                          \
      DT_INT("--eval-every", &(c)->eval_every, 0, 1 << 30,                                         \
             "evaluate train and validation loss every N steps (0: never)"),                       \
      DT_INT("--eval-batches", &(c)->eval_batches, 1, 1 << 20,                                     \
             "with --eval-every: fixed batches per evaluation"),                                   \
      DT_INT("--sample", &(c)->sample, 0, 1 << 20,                                                 \
             "print this many sampled tokens after training"),                                     \
      DT_STRING("--prompt", &(c)->prompt, NULL,                                                    \
                "with --sample: the text to continue (e.g. ROMEO:)"),                              \
      DT_DOUBLE("--temperature", &(c)->temperature, 0, 100,                                        \
                "with --sample: divide the logits (0: greedy, the likeliest token each time)"),    \
      DT_INT("--top-k", &(c)->top_k, 0, 1 << 30,                                                   \
             "with --sample: draw among the k likeliest (0: all; more than V: all)")

/* ------------------------------------------------------------------- data */
/* Sample i: x_i from the RNG keyed by (data seed, i), uniform in [-1, 1);
 * y_i = teacher(x_i), one fixed random block (data.c). Rows k = 0..count-1 of
 * x and y ([count, D], backend memory) are samples[k] (host). Any rank can make any
 * sample. Lessons pick the samples with the sampler below: global batch s of
 * an epoch is positions s*B .. s*B+B-1 of that epoch's shuffle, and rank r's
 * share of it is what DistributedSampler gives rank r. */
void dt_make_batch(const dt_train_config *c, const int64_t *samples, int64_t count, float *x,
                   float *y);
int64_t dt_batches_per_epoch(const dt_train_config *c); /* samples / B */
/* Sequences (DT_TRANSFORMER's data, c->seq tokens each; host): positions
 * t0 .. t0+len-1 of each of samples[0..count), sequence k's rows from row k x ld of x and
 * y (D floats a row). Token t's target averages it with the 3 before it
 * (data.c), so earlier positions matter. Any rank can make any window. */
void dt_make_sequences(const dt_train_config *c, const int64_t *samples, int64_t count, int64_t t0,
                       int64_t len, int64_t ld, float *x, float *y);
/* x[0..D) += the sinusoidal encoding of position t (host) */
void dt_add_position(float *x, int64_t D, int64_t t);
/* The transformer's global batch of `step`, whole sequences (host): the B
 * samples of dt_step_samples (into samples[B]), x [B, S, D] the tokens with
 * their positions added (the model's input), y [B, S, D] the targets. What
 * one process trains on and --dump-data writes. */
void dt_sequence_batch(const dt_train_config *c, int64_t step, int64_t *samples, float *x,
                       float *y);
/* The B/replicas samples of `rank` at `step`, drawn through the sampler
 * (the epoch's shard, walked in order, reshuffled each epoch). */
void dt_step_samples(const dt_train_config *c, int replicas, int rank, int64_t step, int64_t *out);

/* -------------------------------------------------------------- reference */
/* The check (check.c, lockstep.c; the criterion in CHECKING.md): at every
 * step it compares (--check-every), one process on rank 0 takes the same
 * step from the run's own state, gathered as a checkpoint gathers it (the
 * weights, AdamW's moments, the loss scale), on the step's global batch:
 * the loss, the gradient, and the optimizer's update. The run's loss and
 * gradient must match within one step's rounding, its update bit for bit.
 * The run's discrete decisions, each NULL where it made none or they are not
 * replayed: the routing (10), ReLU's near 0 (fp32), fp16's skips. */
typedef struct {
  dt_routing *routing;
  dt_kinks *kinks;
  dt_skips *skips;
} dt_decisions;
/* For methods that change the gradients on purpose (top-k compression):
 * the final loss must be within `factor` of the exact reference's and below
 * the run's first loss. Prints both and CHECK PASSED/FAILED; collective. */
int dt_check_convergence(const dt_train_config *c, const double *losses, double factor,
                         const char *what);
/* One process trained alone from the start, the same steps (reference.c):
 * losses[steps] and weights (the whole model, host) are filled; initial
 * (optional, host) gets the weights before step 0, parts (optional) each
 * step's balance loss, clipped the steps --clip scaled down. The
 * trajectory a learner sees beside the verdict, not the verdict. */
typedef struct {
  double *losses;
  float *weights, *initial;
  double *parts;
  int64_t clipped;
} dt_reference_run;
void dt_reference_train(const dt_train_config *c, dt_reference_run *out);

/* ------------------------------------------------------------ checkpoints */
/* safetensors, F32, "layers.{l}.w1" [D,H] and "layers.{l}.w2" [H,D] (each
 * tensor by its dt_model_tensor name; a GPT's by nanoGPT's state_dict names
 * and layouts, with nanoGPT's GPTConfig and the vocabulary in the metadata,
 * lm_head.weight left out as tied), written atomically (temp file, fsync,
 * rename). weights as above, on the host. A GPT's --dump-data is its token
 * windows, "tokens" I32 [steps, B, S + 1] in the global order. */
void dt_save_model(const char *path, const dt_train_config *c, int64_t step, const float *weights);
/* Reads into weights (host); dt_fail with a clear message on a missing
 * file, a corrupt header or shapes that do not match the config (a GPT's:
 * an lm_head.weight that is not wte, another text's vocabulary).
 * Collective: call on every rank. */
void dt_load_model(const char *path, const dt_train_config *c, float *weights);
void dt_dump_data(const char *path, const dt_train_config *c);

/* Checkpoints for resuming (checkpoint.c): weights and AdamW state (m, v:
 * NULL for sgd) as whole host arrays (each tensor by its dt_model_tensor
 * name, a GPT's too), and the step. Save on rank
 * 0 only, after gathering; resume is collective, fills the arrays, sets
 * c->start_step and returns it. Steps start_step .. steps-1 remain. With
 * c->rank_state, e is per-rank state in the same layout: on save every
 * rank's array, rank 0's first (world size x P floats), on resume this
 * rank's own, which only a run at the checkpoint's world size may take. */
void dt_ckpt_save(const dt_train_config *c, int64_t step, const float *w, const float *m,
                  const float *v, const float *e);
int64_t dt_ckpt_resume(dt_train_config *c, float *w, float *m, float *v, float *e);
/* Whether to checkpoint after finishing step index `step` (0-based). */
int dt_ckpt_due(const dt_train_config *c, int64_t step);

/* ----------------------------------------------------------- activations */
/* One micro-batch's activations, R rows through L blocks on a slice of Hs
 * hidden units (all H but in tensor parallelism): x_0 .. x_L [R, D], a and h
 * of each block [R, Hs], the target y, and backward's dx, dnext and dh. */
typedef struct {
  int64_t L, R, D, Hs;
  float *x, *a, *h, *y, *dx, *dnext, *dh;
  dt_rows rows; /* the lesson's: its rows' keys, block 0's layer, its first unit */
} dt_acts;
void dt_acts_alloc(dt_acts *t, int64_t L, int64_t R, int64_t D, int64_t Hs);
/* their DT_ACTIV bytes: ((L+1)RD + 2LRHs + 2RD + RHs) x 4 (y is DT_DATA) */
int64_t dt_acts_bytes(int64_t L, int64_t R, int64_t D, int64_t Hs);
float *dt_acts_x(const dt_acts *t, int64_t l); /* x_l, the input of block l */
/* Block l: x_{l+1} = (residual ? x_l : 0) + relu(x_l W1) W2, traced. */
void dt_acts_forward(dt_acts *t, int64_t l, const float *w1, const float *w2, int residual);
/* Block l backward from dx, the gradient of its output: adds dW1 and dW2
 * to g1 and g2, and dx becomes the gradient of its input x_l. */
void dt_acts_backward(dt_acts *t, int64_t l, const float *w1, const float *w2, float *g1, float *g2,
                      int residual);

/* ------------------------------------------------------------------ wire */
/* What --precision sends (wire.c): in fp32 the floats themselves; in bf16
 * and fp16 a 16-bit copy in buf (count elements, DT_COMMBUF). pack returns
 * what to hand the collective for x[0, n), the copy at buf + at; `divide`
 * > 1 divides x first, so that a DT_AVG, which sums in 16 bits (dt_wire_op),
 * keeps the mean's size as PyTorch's does. unpack brings the result back. */
typedef struct {
  dt_dtype type;
  uint16_t *buf;
} dt_wire;
void dt_wire_init(dt_wire *w, const dt_train_config *c, size_t count);
void *dt_wire_pack(const dt_wire *w, float *x, size_t n, size_t at, int divide);
void dt_wire_unpack(const dt_wire *w, float *x, size_t n, size_t at);
dt_op dt_wire_op(const dt_wire *w, dt_op op);

/* ---------------------------------------------------------------- the run */
/* What every training lesson does the same way, around its own forward,
 * backward and gradient sync (run.c): options and set-up; the state this
 * rank steps, made from the RNG, --load or --resume; each step's optimizer
 * update (fp16 verdict, clip norm, the optimizer), checkpoint, loss line and
 * time; the summary's common lines; the final gather, --save, --trace and
 * the check. A lesson then reads as its layout and its communication:
 *
 *   dt_run run = {.c = DT_TRAIN_DEFAULTS};
 *   dt_comm *world = dt_run_init(&run, &argc, &argv, &lesson, options);
 *   ... allocate w and g, dt_run_segment and dt_run_place them ...
 *   dt_run_begin(&run);
 *   for (int64_t step = run.c.start_step; step < run.c.steps; step++) {
 *     dt_step_begin(&run, step);
 *     ... forward, loss, backward, gradient sync ...
 *     dt_step_update(&run);
 *     dt_step_end(&run, step, loss);
 *   }
 *   dt_run_summary(&run); ... the lesson's tables ...
 *   return dt_run_finish(&run);
 *
 * The whole model, in files and in the check, is the host array of
 * dt_model_tensor's tensors, dt_model_size floats (dt_params_per_layer a
 * layer: W1_0, W2_0, W1_1, ... for the MLP; a GPT's embeddings before its
 * layers and its final gain after). A rank holds segments, each stepped by
 * the optimizer as one contiguous buffer (at the step's dt_lr_at, without
 * weight decay on its plain spans, which dt_run_begin finds from the places),
 * and places say where their elements sit in that array: rows x cols floats,
 * ld apart, from `at`. */
enum { DT_RUN_SEGMENTS = 64, DT_RUN_COMMS = 8 };
typedef struct {
  float *w, *g, *m, *v; /* m, v: AdamW's state, allocated by dt_run_segment (NULL for sgd) */
  float *e;             /* this rank's own state (dt_run_rank_state), or NULL */
  size_t n;
  dt_spans plain; /* set by dt_run_begin from the places: its elements without weight decay */
  /* set by the lesson: another rank holds the same elements and counts them (a
   * router every rank keeps alike; a data replica in a mesh), so the gather,
   * --save and the clip norm leave this copy out */
  int copy;
} dt_segment;
typedef struct {
  int seg;
  int64_t off, at, rows, cols, ld;
} dt_place;
typedef struct dt_run dt_run;
struct dt_run {
  dt_train_config c; /* the options of DT_TRAIN_OPTIONS(&run.c) */
  dt_comm *world;
  /* set by the lesson before dt_run_begin */
  int replicated;               /* every rank holds the whole model: each rank's copy is checked */
  dt_comm *comms[DT_RUN_COMMS]; /* sub-communicators whose time counts as communication */
  double loss_ranks;            /* the step's loss is the sum over ranks / this (0: world size) */
  const char *loss_how;         /* the loss line's source (NULL: "mean over ranks") */
  double part; /* set each step where dt_loss_part names a term: this rank's share */
  /* the lesson's own verdict in place of the comparison with one process (a
   * method that changes the gradients on purpose: dt_check_convergence), or
   * NULL; returns 1 when failed, collective */
  int (*verdict)(dt_run *r);
  /* the state and the bookkeeping, kept by run.c */
  dt_segment seg[DT_RUN_SEGMENTS];
  int nseg, nplace, cap;
  dt_place *place;
  dt_loss_scaler scaler;
  double *losses, *parts; /* per step, means over ranks; parts where dt_loss_part names one */
  double *step_ms;        /* per step: this rank's wall time (rank 0's goes to --report-json) */
  double t_start, t_step, comm_step, compute;
  double first_step, later_steps; /* wall seconds: the first step timed, and the rest */
  double aside; /* wall seconds outside the steps (a GPT's evaluation), left out of their time */
  int64_t steps_timed;
  dt_counter scalars; /* the all-reduces of one float: clip norm, fp16 verdict */
  float *scalar;
  float *host;          /* the whole model on the host (rank 0; every rank when replicated) */
  int64_t step;         /* the step now trained (dt_step_begin) */
  dt_step_scalars used; /* what the last dt_step_update read the gradients with */
  struct dt_lockstep *lockstep; /* the check's, step by step (lockstep.c); NULL: none */
  double held; /* seconds of this step spent on the check's gathers, left out of its time */
  /* what the run decided, which one process replays (the check; train.h's
   * "decisions"): ReLU's near 0, fp16's skips, a mixture's routing */
  dt_kinks *kinks;        /* NULL: none recorded (--no-check, 16 bits) */
  unsigned char *skipped; /* per step: 1 when fp16's overflow skipped it */
  int32_t *routing;       /* DT_MOE: this rank's choices, [steps][L][R][k] */
  int64_t routing_rows;   /* R: the tokens this rank routes per layer and step */
};

/* dt_init, dt_train_resolve and --trace; returns the world. */
dt_comm *dt_run_init(dt_run *r, int *argc, char ***argv, const dt_lesson *lesson,
                     dt_option *options);
/* Its two halves, for a lesson whose config depends on the world (the
 * vocabulary padded to a multiple of its tensor-parallel ranks): dt_init,
 * then dt_train_resolve and the rest. */
dt_comm *dt_run_start(dt_run *r, int *argc, char ***argv, const dt_lesson *lesson,
                      dt_option *options);
void dt_run_resolve(dt_run *r);
/* n floats this rank steps: w and g are the lesson's (g as the optimizer
 * reads it); m and v are allocated here for AdamW. Returns its index. */
int dt_run_segment(dt_run *r, float *w, float *g, size_t n);
/* buf: n floats laid out like segment seg, state of this rank alone that the
 * next step depends on (top-k's error-feedback residual): checkpoints hold
 * every rank's, and --resume restores it at the same world size and refuses
 * another. `what` names it in the checkpoint and in the refusals. */
void dt_run_rank_state(dt_run *r, int seg, float *buf, const char *what);
/* Elements [off, off + rows x cols) of segment seg are rows of cols floats,
 * ld apart, at `at` of the whole model (rows 1: a run of cols floats). */
void dt_run_place(dt_run *r, int seg, int64_t off, int64_t at, int64_t rows, int64_t cols,
                  int64_t ld);
/* The same for elements [lo, hi) of a block of `cols` columns at `at` (ld
 * apart), which may start and end mid-row: a shard of a flattened block. */
void dt_run_place_range(dt_run *r, int seg, int64_t off, int64_t at, int64_t cols, int64_t ld,
                        int64_t lo, int64_t hi);
/* Write --dump-data (the lesson has checked its flags by now), fill the
 * segments (--resume, else --load, else the initial weights keyed
 * by their index in the whole model: any rank makes any shard without
 * talking), print the configuration, zero the counters and memory peaks. */
void dt_run_begin(dt_run *r);
/* Zero the counters and memory peaks again: what a lesson's set-up sent
 * after dt_run_begin (a first gather) is no step's. */
void dt_run_reset(dt_run *r);
void dt_step_begin(dt_run *r, int64_t step);
/* The loss, sum((x - y)^2) x scale, and its gradient dx, with fp16's loss
 * scale folded into dx (the gradients stay scaled until the update). */
double dt_run_loss(dt_run *r, const float *x, const float *y, float *dx, size_t n, double scale);
/* After the gradient sync: the fp16 verdict (any rank's overflow skips the
 * step everywhere), the clip norm over every rank's segments, the optimizer
 * with unscaling and clipping folded in. Returns 1 when the step was taken. */
int dt_step_update(dt_run *r);
/* Checkpoint when due, the loss over the ranks, the step's loss line; a
 * GPT's evaluation when due (dt_gpt_eval_due: the whole model to rank 0,
 * which prints the train and validation loss). No collective of the lesson
 * may be in flight when a checkpoint or an evaluation is due. */
void dt_step_end(dt_run *r, int64_t step, double loss);
void dt_run_summary(dt_run *r); /* the header, time per step, scalars, fp16 */
/* The memory table: each tag's measured peak beside its formula (and, when
 * `other` names it, a column to compare with: "DP (05)"). The lesson ends
 * it with dt_print_memory_uncounted(), after any rows of its own. */
typedef struct {
  dt_tag tag;
  int64_t formula;
  const char *how;
  int64_t other;
} dt_row;
void dt_print_memory(const dt_row *rows, int n, const char *other);
/* The whole model to rank 0 (every rank when replicated), as in files. */
void dt_run_gather(dt_run *r, int which, float *host); /* which: 0 w, 1 m, 2 v, 4 g */
/* n of them at once, one after another in host (n x the model), one collective */
void dt_run_gather_all(dt_run *r, const int *which, int n, float *host);
/* DT_MOE: where the lesson records each layer's choices ([steps][L]
 * [tokens][k], step-major; host: the choices it copied out), which the
 * check gathers step by step to replay; NULL with --no-check (nothing to
 * record). */
int32_t *dt_run_record_routing(dt_run *r, int64_t tokens);
/* Gather, --save, --trace, a GPT's --sample (rank 0 writes text from the
 * whole model), the check, free, finalize: the exit code. */
int dt_run_finish(dt_run *r);

#ifdef __cplusplus
}
#endif
#endif
