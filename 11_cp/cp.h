/* cp.h: what the files of 11_cp share: the model every rank holds whole,
 * this rank's positions of every sequence, and what forward keeps for
 * backward. */
#ifndef CP_H
#define CP_H

#include "ring.h"
#include "train.h"

typedef struct {
  dt_comm *world;
  int64_t L, D, H, A, S, B, N, rank; /* A heads; B sequences, each of S tokens */
  int64_t C, nc, Sl, R;              /* chunks of C tokens, nc of them here: Sl = nc C
                                      * tokens of each sequence, R = B Sl rows */
  int zigzag, ulysses;
  float *w, *g;                   /* the whole model, layer-major as in files */
  float *x, *y, *dx, *dnext;      /* x_0 .. x_L [R,D]; the target; backward's */
  float *q, *k, *v, *o, *lse, *u; /* per layer: [L][R,D], lse [L][R,A], u = x + o Wo */
  float *a, *h, *dh;              /* the MLP's [L][R,H], and its scratch */
  float *du, *dout, *dq;          /* backward's [R,D]; dq: [3][R,D], dq | dk | dv */
  cp_attn cr;                     /* the split, the ring's buffers, the work (ring.c) */
  dt_wire grads, a2a;             /* what the gradients and Ulysses' all-to-alls travel in */
  float *heads, *send, *recv;     /* --ulysses: head-split per layer (ulysses.c); a2a's */
  int64_t *samples, *keys;        /* the step's sequences; each row's key (the check's) */
  dt_kinks *kinks;                /* ReLU's decisions near 0, for the check */
  uint64_t bytes[2];              /* attention's, summed: forward, backward */
  size_t attn_bytes;              /* what attention keeps and moves, as allocated */
  double attn_seconds;            /* in attention, its communication included */
} model;

/* buffers.c: the sizes, and everything but the weights (report.c's formulas) */
void cp_buffers(model *m, const dt_train_config *c);
/* ulysses.c: attention of layer l by all-to-all, head-split in between */
void ulysses_forward(model *m, int64_t l);
void ulysses_backward(model *m, int64_t l);
/* verify.c: --verify-merge runs the merge on rows whose answer is known
 * (the softmax over both blocks' keys at once) and names what is wrong */
typedef void merge_fn(float *o, float *lse, const float *ob, const float *lseb, int64_t n,
                      int64_t D, int64_t A);
void verify_merge(merge_fn *merge);
/* report.c: work per rank for both splits, bytes and memory beside formulas */
void report(model *m, dt_run *r);

#endif
