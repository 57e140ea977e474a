/* ring.h: context parallelism's pieces (ring.c): the split of every sequence
 * over the ranks of a communicator (contiguous or zigzag) and ring attention
 * over it. Lesson 11 runs them over the world on every head; lesson 12 over
 * its context axis, on the heads of its tensor-parallel rank. */
#ifndef CP_RING_H
#define CP_RING_H

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
  dt_comm *comm;               /* the ring: N ranks, this one `rank` */
  int64_t N, rank, B, S, W, A; /* B sequences of S tokens; rows W floats wide: A heads */
  int zigzag;
  int64_t C, nc, Sl, R; /* chunks of C tokens, nc of them here: Sl = nc C tokens of each
                         * sequence, R = B Sl rows */
  travel kv, dkv;       /* [K | V] of a rank, travelling; [dK | dV] */
  float *ob, *lseb;     /* one block's result, [C,W] and [C,A] */
  float *delta;         /* backward's [R,A]: each row's and head's dout . o */
  float *stage;         /* cuda backend: the step's x and y made on the host, [2][R,D] */
  /* cp_merge on the cpu backend; the cuda backend's the same formula on
   * device rows (train.h's dt_attn_merge) */
  void (*merge)(float *o, float *lse, const float *ob, const float *lseb, int64_t n, int64_t D,
                int64_t A);
  int64_t scores[2]; /* q.k scores x heads: forward, backward (recomputed) */
  dt_work work;      /* in the score blocks alone, the split's balance: CPU time, or the GPU's */
} cp_attn;

/* The split of B sequences of c->seq tokens over comm, and attention's
 * buffers for rows W wide (ring 0: the blocks' and delta only, no ring in
 * flight; else the blocks travel in c's --precision). The sequence must
 * split into N (zigzag: 2N) chunks: the lesson says so first. */
void cp_attn_init(cp_attn *a, dt_comm *comm, const dt_train_config *c, int zigzag, int64_t B,
                  int64_t W, int64_t A, int ring);
/* The global index of rank s's j-th chunk (of N, or of 2N for zigzag). */
int64_t cp_chunk(const cp_attn *a, int64_t s, int64_t j);
/* This rank's chunks of sequences samples[0..B): x with each token's global
 * position added, and y; rows b Sl .. b Sl + Sl - 1 are sequence b's. */
void cp_inputs(const cp_attn *a, const dt_train_config *c, const int64_t *samples, float *x,
               float *y);
/* Each of this rank's R rows' key for the check (train.h's dt_rows): row
 * b Sl + i is token cp position of sequence samples[b]: samples[b] x S + it. */
void cp_keys(const cp_attn *a, const int64_t *samples, int64_t *keys);
/* Attention of this rank's R rows, q, k, v [R,W], against every earlier
 * position, K and V travelling around the ring: o [R,W] and lse [R,A]. */
void cp_ring_forward(cp_attn *a, const float *q, const float *k, const float *v, float *o,
                     float *lse);
/* Back from dout [R,W], with forward's o and lse: dqkv [3][R,W] gets dq,
 * dk and dv of this rank's rows (dK and dV travel home with K and V). */
void cp_ring_backward(cp_attn *a, const float *q, const float *k, const float *v, const float *o,
                      const float *lse, const float *dout, float *dqkv);
/* One block's attention (ob, lseb) merged into the running result (o, lse)
 * of the same n rows D wide (A heads): softmax over both blocks' keys. */
void cp_merge(float *o, float *lse, const float *ob, const float *lseb, int64_t n, int64_t D,
              int64_t A);

#endif
