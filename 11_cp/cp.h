/* cp.h: what the files of 11_cp share: the model every rank holds whole,
 * this rank's positions of every sequence, and what forward keeps for
 * backward. */
#ifndef CP_H
#define CP_H

#include "train.h"

/* A block that travels around the ring, [K|V] or [dK|dV] (n floats): the
 * attention reads it as floats, it travels in --precision's type. fp32: f[0]
 * and f[1] in turn, one sent while the other receives. bf16|fp16: f[0] only,
 * the wire holding it as sent [0, n) and as received [n, 2n). */
typedef struct {
  float *f[2];
  dt_wire wire;
  size_t n;
  int cur;
} travel;

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
  float *du, *dout, *dq, *delta;  /* backward's [R,D], delta [R,A] */
  travel kv, dkv;                 /* [K | V] of a rank, travelling; [dK | dV] */
  dt_wire grads, a2a;             /* what the gradients and Ulysses' all-to-alls travel in */
  float *ob, *lseb;               /* one block's result, [C,D] and [C,A] */
  float *heads, *send, *recv;     /* --ulysses: head-split per layer (ulysses.c); a2a's */
  int64_t *samples;
  int64_t *chunk;      /* [N][nc]: the global index of rank s's j-th chunk (cp.c's split) */
  uint64_t bytes[2];   /* attention's, summed: forward, backward */
  int64_t scores[2];   /* q.k scores x heads: forward, backward (recomputed) */
  size_t attn_bytes;   /* what attention keeps and moves, as allocated */
  double attn_seconds; /* in attention, its communication included */
  double work_seconds; /* CPU time in its score blocks alone: the split's balance */
} model;

/* buffers.c: the sizes, and everything but the weights (report.c's formulas) */
void cp_buffers(model *m, const dt_train_config *c);
/* One hop of a travelling block: start gives the float block to fill (this
 * rank's own), post sends the current block to the next rank and receives
 * the previous rank's, done waits and gives the received block as floats. */
float *cp_hop_start(travel *t);
dt_request *cp_hop_post(model *m, travel *t);
float *cp_hop_done(travel *t, dt_request *r);
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
