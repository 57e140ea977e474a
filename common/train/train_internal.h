/* train_internal.h: what the files of the training layer (common/train/)
 * share with each other, not with the lessons. */
#ifndef DT_TRAIN_INTERNAL_H
#define DT_TRAIN_INTERNAL_H

#include <math.h>
#include <stdio.h>

#include "comm_internal.h"
#include "kinks_core.h"
#include "train.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The cpu backend's loops that compute bound a step (AdamW, GELU, attention's
 * tiles) have a second copy for AVX2 (8 floats an instruction, not SSE's 4),
 * taken where the CPU has it: `static WIDE void f_wide(...) { f_body(...); }`,
 * called when HAVE_WIDE. IEEE arithmetic rounds alike at any width, and
 * -std=c11 fuses no multiply-add, so both copies give the same bits. */
#if defined(__x86_64__) && defined(__GNUC__)
#define WIDE      __attribute__((target("avx2")))
#define HAVE_WIDE __builtin_cpu_supports("avx2")
#else
#define WIDE
#define HAVE_WIDE 0
#endif

/* text.c: the code point at s[i] and its length in bytes, or 0 where the
 * bytes are not UTF-8 there */
int dt_utf8_at(const unsigned char *s, size_t n, size_t i, uint32_t *cp);

/* kernels_cpu.c / kernels.cu: one-time setup (BLAS threads, cuBLAS handle),
 * done by dt_train_resolve or the first kernel that needs it */
void dt_kernels_init(void);
/* bytes held by matmul's 16-bit rounding copies (dt_alloc'ed, DT_OTHER) */
size_t dt_rounding_bytes(void);
/* what dt_matmul rounds its inputs to (dt_set_matmul_inputs; DT_F32: nothing) */
dt_dtype dt_matmul_inputs(void);
/* The cpu backend's (kernels_cpu.c, OpenBLAS): C = alpha op(A) op(B) + beta C,
 * row-major blocks of wider arrays (lda, ldb, ldc), no rounding of the
 * inputs (the caller rounds): attention.c's tiles. The cuda backend's tiles
 * call cuBLAS (attention_kernels.cu). */
void dt_host_gemm(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                  const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                  int64_t ldc);
/* The embedding's backward in its two kernels (gpt.c's dt_embed_backward
 * calls them), everything on the backend: the slice's rows bucketed by
 * token (gpt_core.h's dt_token_bucket: offsets [Vs + 1], rows [R]), then
 * dwte[v] += the rows rows[offsets[v] .. offsets[v + 1]) of dout, in that
 * order (dt_rows_sum_core) */
void dt_embed_buckets(const int32_t *tokens, int64_t R, int64_t v0, int64_t Vs, int64_t *offsets,
                      int32_t *rows);
void dt_embed_rows_sum(const int64_t *offsets, const int32_t *rows, const float *dout, int64_t Vs,
                       int64_t D, float *dwte);
/* the rows of samples rows[0..count) of the data set, each cols wide, as
 * dt_fill_block makes row rows[k] of the full matrix: one launch for all */
void dt_fill_rows(float *buf, const int64_t *rows, int64_t count, int64_t cols, uint64_t seed,
                  uint64_t stream, float bound);

/* state.c: a whole model's array (host) to this rank's segments (which: 0
 * w, 1 m, 2 v, 3 the rank's own state, 4 g), and this rank's elements back
 * in their places, 0 elsewhere */
void dt_run_scatter(dt_run *r, int which, const float *model);
void dt_run_gather_own(dt_run *r, int which, float *model);

/* One process's model, the check's yardstick (reference.c, the MLP;
 * reference_moe.c, reference_attn.c, reference_gpt.c): gradient() computes
 * the loss of `step`'s global batch at the whole model's weights w and its
 * gradient into g (both backend memory, g overwritten), fp16's loss scale
 * folded into the loss's gradient; *part: a mixture's balance loss, within
 * the loss. Where replay is given, the run's decisions of that step are
 * replayed (and counted there). */
typedef struct dt_one dt_one;
struct dt_one {
  const dt_train_config *c;
  dt_decisions *replay; /* NULL: decide everything itself */
  int round16; /* in 16 bits the run's gradients travel in 16 bits: one trip (not the mixture's) */
  double (*gradient)(dt_one *o, int64_t step, const float *w, float *g, double scale, double *part);
  void (*release)(dt_one *o);
  void *own; /* the kind's buffers */
};
dt_one *dt_one_new(const dt_train_config *c, dt_decisions *replay);
void dt_one_free(dt_one *o);
void dt_one_moe(dt_one *o);  /* reference_moe.c */
void dt_one_attn(dt_one *o); /* reference_attn.c */
void dt_one_gpt(dt_one *o);  /* reference_gpt.c */
/* The optimizer on the whole model (backend memory) at step's learning
 * rate, AdamW's count taken, the gradients read x grad_scale */
void dt_one_update(const dt_train_config *c, int64_t step, float *w, const float *g, float *m,
                   float *v, size_t n, int64_t taken, float grad_scale);

/* lockstep.c: the check, step by step (CHECKING.md). new at dt_run_begin
 * (NULL: nothing to compare); gather at dt_step_update's start, before the
 * optimizer (the run's state and gradient, when the step is compared); step
 * at dt_step_end, after the loss (the state after it; rank 0 computes the
 * same step in one process and compares; collective). verdict after
 * training, on rank 0: prints the figures, worst step by step, and returns
 * 1 if any is past its bound, or a decision is not rounding's;
 * worst_one_step: the largest gradient figure, for the trajectory line. */
typedef struct dt_lockstep dt_lockstep;
dt_lockstep *dt_lockstep_new(dt_run *r);
void dt_lockstep_gather(dt_run *r);
/* --resume: the whole model and moments as the checkpoint holds them (host,
 * every rank), where one process starts the first step from */
void dt_lockstep_start_from(dt_lockstep *k, const float *w, const float *m, const float *v);
void dt_lockstep_step(dt_run *r, int64_t step);
int dt_lockstep_verdict(dt_lockstep *k, const char *other, double *worst_one_step);
void dt_lockstep_free(dt_lockstep *k);
/* Every rank waits for rank 0's x (a verdict, or that it is done), watched
 * with an allowance for one process's work on rank 0 meanwhile */
void dt_lockstep_wait(int *x, const char *what);
/* A loss that is no longer a number, or that grew 10^4-fold since the first
 * step, does not come back: training has diverged. */
static inline int dt_blew_up(double loss, double first) {
  return !isfinite(loss) || loss > 1e4 * first;
}
/* check.c: a diverged run stopped at `step`, every rank alike, with why:
 * the configuration (exit 2) or the distributed step (CHECK FAILED, 1) */
void dt_stop_diverged(dt_run *r, int64_t step);
/* lockstep.c: where the check compared `step` (rank 0): one process's loss
 * from the run's state there (*one_loss), and the first step found off
 * before it, or -1 */
int64_t dt_lockstep_diverged(const dt_lockstep *k, int64_t step, double *one_loss);
/* check.c: the verdict after training (replicas, the lockstep's figures, the
 * trajectory beside them); collective, 0 or 1 on every rank */
int dt_check_run(dt_run *r);

/* attention.c: causal attention the plainest way, one sequence of S rows
 * of width D (heads x dh columns) at a time, each head's S x S
 * probabilities materialised (p [heads][S, S], kept for backward), through
 * dt_matmul on the backend's rows: the transformer's and the GPT's
 * yardsticks. */
/* the softmax of one head's S x S scores p [S,S] (scaled, masked after the
 * diagonal), and back: dp = dS from P and dP; attn_core.h's rows, looped
 * (attention.c) or launched (attention_kernels.cu) */
void dt_softmax_causal(float *p, int64_t S, float scale);
void dt_softmax_causal_backward(const float *p, float *dp, int64_t S, float scale);
typedef struct {
  int64_t S, D, heads, dh;
  float *qh, *kh, *vh, *oh, *dp; /* one head of one sequence: [S,dh]; dp [S,S] */
} dt_heads_scratch;
void dt_heads_scratch_init(dt_heads_scratch *s, int64_t S, int64_t D, int64_t heads);
void dt_heads_scratch_free(dt_heads_scratch *s);
void dt_attend_materialised(dt_heads_scratch *s, const float *q, const float *k, const float *v,
                            float *p, float *o);
/* back from dout [S,D]: dq, dk, dv [S,D] written */
void dt_attend_materialised_backward(dt_heads_scratch *s, const float *q, const float *k,
                                     const float *v, const float *p, const float *dout, float *dq,
                                     float *dk, float *dv);

/* gpt_names.c: a GPT file tensor under nanoGPT's name and layout, made of
 * `parts` tensors of the model's array (c_attn: Wq, Wk, Wv) stacked along
 * its rows, each transposed where nn.Linear stores [out, in]. */
typedef struct {
  char name[96];
  int ndim;
  int64_t shape[2]; /* [shape[0]] when 1-D (a gain) */
  int parts, transpose;
  int64_t part[3]; /* their indices in dt_model_tensor's order */
} dt_file_tensor;
int64_t dt_gpt_file_tensors(const dt_train_config *c);
dt_file_tensor dt_gpt_file_tensor(const dt_train_config *c, int64_t i);
/* the model's array to the file tensor's layout (out: shape[0] x shape[1]
 * floats), and back */
void dt_gpt_file_pack(const dt_train_config *c, const dt_file_tensor *f, const float *model,
                      float *out);
void dt_gpt_file_unpack(const dt_train_config *c, const dt_file_tensor *f, const float *in,
                        float *model);

/* kinks.c: ReLU's decisions near 0 (train.h, "decisions"). A run records
 * them a step at a time; at a step the check compares, every rank's go to
 * rank 0 (sorted by layer, row and unit), where one process replays them
 * and counts what it met, over the steps compared. */
typedef struct {
  int64_t step, layer, row, unit; /* row: its key (dt_rows); unit: in the whole layer */
  double a, scale;                /* the run's pre-activation, and |x_i| |W1_j| */
} dt_kink;
struct dt_kinks {
  int replay;     /* 0: a run records; 1: one process replays */
  float tol;      /* K u */
  int64_t step;   /* the step now trained */
  dt_rows *calls; /* the run: this step's block calls, until their hits get keys */
  int64_t ncalls, callcap;
  dt_kink *k; /* the step's: a rank's, then on rank 0 every rank's, sorted */
  int64_t n, cap;
  int64_t decisions, lost; /* made; near 0 but not recorded (a full record) */
  /* what one process met: near 0 in both runs, of them decided otherwise
   * (replayed); near 0 in the run's numbers only, or in its own only */
  int64_t met, flipped, run_only, own_only;
};
dt_kinks *dt_kinks_new(const dt_train_config *c, int replay);
void dt_kinks_free(dt_kinks *k);
/* dt_block_forward's: a = x W1 of a [rows, Hs] block met, before relu */
void dt_kinks_meet(const dt_rows *where, const float *x, const float *w1, float *a, int64_t rows,
                   int64_t D, int64_t Hs);
void dt_kinks_step_end(dt_kinks *k); /* the step's hits get their keys */
/* The run's record of the step (k, every rank's, then cleared) to rank 0's
 * replay (into; NULL elsewhere): collective, bookkeeping. keep 0 drops the
 * step's record unread (a step not compared). */
void dt_kinks_pass(dt_kinks *k, dt_kinks *into, dt_comm *world, int keep);
/* Rank 0, after one process replayed: the line that says what it met over
 * the steps compared, and whether rounding explains it; 1: it does not. */
int dt_kinks_verdict(const dt_kinks *k, char *why, size_t len);
/* the backend's part (kernels_cpu.c, kernels.cu): append the hits of one
 * block call, |a_ij| <= tol |x_i| |W1_j|, to the backend's record; fetch
 * returns this step's (host) and how many did not fit, and starts anew */
void dt_kinks_scan(int64_t call, const float *x, const float *w1, const float *a, int64_t rows,
                   int64_t D, int64_t Hs, float tol);
int64_t dt_kinks_fetch(const dt_kink_hit **hits, int64_t *lost);
/* the check's longest sum, K = max(B, D, H, B x seq, a GPT's V) */
int64_t dt_check_longest_sum(const dt_train_config *c);

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
