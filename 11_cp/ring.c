/* ring.c: the split of every sequence and ring attention (ring.h).
 *
 * Rank i holds chunk i of N (contiguous) or chunks i and 2N-1-i of 2N
 * (zigzag: every rank the same share of the causal triangle). K and V blocks
 * go around the ring in N-1 hops, the next hop in flight while this one is
 * computed, each block's result merged into the running one by its
 * log-sum-exp, exact; blocks above the causal diagonal are skipped, diagonal
 * blocks masked. Backward goes around again, recomputing probabilities from
 * the saved log-sum-exp; dK and dV travel with K and V and end at their
 * owner. */
#include <math.h>
#include <string.h>

#include "opcount.h"
#include "ring.h"

static void *alloc(int64_t n, dt_tag tag) { return dt_alloc((size_t)n * 4, tag); }

void cp_attn_init(cp_attn *a, dt_comm *comm, const dt_train_config *c, int zigzag, int64_t B,
                  int64_t W, int64_t A, int ring) {
  *a = (cp_attn){.comm = comm,
                 .N = comm->size,
                 .rank = comm->rank,
                 .B = B,
                 .S = c->seq,
                 .W = W,
                 .A = A,
                 .zigzag = zigzag};
  a->nc = zigzag ? 2 : 1;
  a->C = a->S / (a->nc * a->N);
  a->Sl = a->nc * a->C;
  a->R = B * a->Sl;
  a->ob = alloc(a->C * W, DT_ACTIV);
  a->lseb = alloc(a->C * A, DT_ACTIV);
  a->delta = alloc(a->R * A, DT_ACTIV);
  int gpu = !dt_host_sees_device(); /* a GPU, or the cpu in its device-boundary mode */
  a->stage = gpu ? dt_host_alloc((size_t)(2 * a->R * c->dim), sizeof(float)) : NULL;
  a->merge = gpu ? dt_attn_merge : cp_merge;
  travel *t[2] = {&a->kv, &a->dkv};
  for (int i = 0; i < 2 && ring; i++) {
    dt_wire_init(&t[i]->wire, c, (size_t)(4 * a->R * W)); /* 16 bits: as sent, as received */
    t[i]->n = (size_t)(2 * a->R * W);
    int fp32 = t[i]->wire.type == DT_F32; /* else the wire is the one in flight */
    for (int j = 0; j < 1 + fp32; j++)
      t[i]->f[j] = alloc(2 * a->R * W, fp32 ? DT_COMMBUF : DT_ACTIV);
  }
}

int64_t cp_chunk(const cp_attn *a, int64_t s, int64_t j) {
  return a->zigzag && j == 1 ? 2 * a->N - 1 - s : s;
}

/* Every rank of the ring takes the same sequences, its own chunks of each;
 * positions from each token's place in the whole sequence. Made on the
 * host (the data's generator is host code): on the cuda backend in the
 * staging rows, then one copy each of x and y to the device per call. */
void cp_inputs(const cp_attn *a, const dt_train_config *c, const int64_t *samples, float *x,
               float *y) {
  int64_t D = c->dim, C = a->C, Sl = a->Sl, RD = a->R * D;
  float *hx = a->stage ? a->stage : x, *hy = a->stage ? a->stage + RD : y;
  for (int64_t j = 0; j < a->nc; j++)
    dt_make_sequences(c, samples, a->B, cp_chunk(a, a->rank, j) * C, C, Sl, hx + j * C * D,
                      hy + j * C * D);
  for (int64_t b = 0; b < a->B; b++)
    for (int64_t i = 0; i < Sl; i++)
      dt_add_position(hx + (b * Sl + i) * D, D, cp_chunk(a, a->rank, i / C) * C + i % C);
  dt_copy_from_host(x, hx, (size_t)RD * 4); /* the same rows on the cpu: nothing copied */
  dt_copy_from_host(y, hy, (size_t)RD * 4);
}

void cp_keys(const cp_attn *a, const int64_t *samples, int64_t *keys) {
  for (int64_t b = 0; b < a->B; b++)
    for (int64_t i = 0; i < a->Sl; i++)
      keys[b * a->Sl + i] = samples[b] * a->S + cp_chunk(a, a->rank, i / a->C) * a->C + i % a->C;
}

void cp_merge(float *o, float *lse, const float *ob, const float *lseb, int64_t n, int64_t D,
              int64_t A) {
  DT_OP("dt_attn_merge", n, D, A, 0, 0); /* the GPU's dt_attn_merge, here by hand: counted as it */
  /* exercise: merging two blocks of attention by their log-sum-exp */
  int64_t dh = D / A;
  for (int64_t i = 0; i < n * A; i++) { /* row i / A, head i % A */
    float mx = fmaxf(lse[i], lseb[i]), sa = expf(lse[i] - mx), sb = expf(lseb[i] - mx);
    float *oi = o + i / A * D + i % A * dh;
    const float *bi = ob + i / A * D + i % A * dh;
    for (int64_t d = 0; d < dh; d++) oi[d] = (sa * oi[d] + sb * bi[d]) / (sa + sb);
    lse[i] = mx + logf(sa + sb);
  }
  /* end of exercise */
}

/* What a pass around the ring computes into: forward o and lse; backward
 * dq and dkv's [dK | dV] (dkv non-NULL), from dout and forward's lse. */
typedef struct {
  float *o, *lse;
  const float *saved_lse, *dout;
  float *dq, *dkv;
} pass;

/* This rank's queries against the keys and values of rank src: every pair
 * of chunks on or below the causal diagonal. */
static void attend(cp_attn *a, const float *q, const float *kv, pass *p, int64_t src) {
  int64_t R = a->R, W = a->W, A = a->A, C = a->C;
  const float *k = kv, *v = kv + R * W;
  dt_work_start(&a->work); /* the rank's own work: its CPU time, or its GPU's */
  for (int64_t b = 0; b < a->B; b++)
    for (int64_t jq = 0; jq < a->nc; jq++)
      for (int64_t jk = 0; jk < a->nc; jk++) {
        int64_t cq = cp_chunk(a, a->rank, jq), ck = cp_chunk(a, src, jk);
        int64_t rq = b * a->Sl + jq * C, rk = b * a->Sl + jk * C;
        if (ck > cq) continue; /* entirely above the diagonal */
        if (!p->dkv) {
          a->scores[0] += A * dt_attn_block_forward(q + rq * W, k + rk * W, v + rk * W, C, C, W, A,
                                                    ck == cq, a->ob, a->lseb);
          a->merge(p->o + rq * W, p->lse + rq * A, a->ob, a->lseb, C, W, A);
        } else
          a->scores[1] += A * dt_attn_block_backward(
                                  q + rq * W, k + rk * W, v + rk * W, p->dout + rq * W,
                                  a->delta + rq * A, p->saved_lse + rq * A, C, C, W, A, ck == cq,
                                  p->dq + rq * W, p->dkv + rk * W, p->dkv + R * W + rk * W);
      }
  dt_work_stop(&a->work);
}

/* One hop of a travelling block: start gives the float block to fill (this
 * rank's own), post sends the current block to the next rank and receives
 * the previous rank's, done waits and gives the received block as floats. */
static float *hop_start(travel *t) {
  t->cur = 0;
  return t->f[0];
}

static dt_request *hop_post(cp_attn *a, travel *t) {
  int next = (int)((a->rank + 1) % a->N), prev = (int)((a->rank + a->N - 1) % a->N);
  if (t->wire.type == DT_F32)
    return dt_sendrecv_async(a->comm, t->f[t->cur], t->n, next, t->f[!t->cur], t->n, prev, DT_F32);
  return dt_sendrecv_async(a->comm, dt_wire_pack(&t->wire, t->f[0], t->n, 0, 1), t->n, next,
                           t->wire.buf + t->n, t->n, prev, t->wire.type);
}

static float *hop_done(travel *t, dt_request *r) {
  dt_wait(r);
  if (t->wire.type == DT_F32)
    t->cur = !t->cur;
  else
    dt_wire_unpack(&t->wire, t->f[0], t->n, t->n);
  return t->f[t->cur];
}

/* K and V around the ring: at hop j this rank holds rank (me - j)'s. */
static void ring(cp_attn *a, const float *q, const float *k, const float *v, pass *p) {
  int64_t RW = a->R * a->W, N = a->N, me = a->rank;
  float *kv = hop_start(&a->kv);
  int backward = p->dq != NULL;
  dt_copy(kv, k, (size_t)RW * 4);
  dt_copy(kv + RW, v, (size_t)RW * 4);
  if (backward) {
    p->dkv = hop_start(&a->dkv);
    dt_zero(p->dkv, (size_t)(2 * RW) * 4);
  }
  for (int64_t hop = 0; hop < N; hop++) {
    /* the next block travels while this one is computed */
    dt_request *in_flight = hop < N - 1 ? hop_post(a, &a->kv) : NULL;
    attend(a, q, kv, p, (me - hop + N) % N);
    if (backward && N > 1) /* dK, dV follow their block; the last hop takes them home */
      p->dkv = hop_done(&a->dkv, hop_post(a, &a->dkv));
    if (in_flight) kv = hop_done(&a->kv, in_flight);
  }
  if (backward) dt_copy(p->dq + RW, p->dkv, (size_t)(2 * RW) * 4); /* this rank's dK | dV */
}

void cp_ring_forward(cp_attn *a, const float *q, const float *k, const float *v, float *o,
                     float *lse) {
  dt_attn_start(o, lse, a->R, a->W, a->A);
  pass p = {.o = o, .lse = lse};
  ring(a, q, k, v, &p);
}

void cp_ring_backward(cp_attn *a, const float *q, const float *k, const float *v, const float *o,
                      const float *lse, const float *dout, float *dqkv) {
  dt_attn_delta(dout, o, a->R, a->W, a->A, a->delta);
  dt_zero(dqkv, (size_t)(a->R * a->W) * 4);
  pass p = {.saved_lse = lse, .dout = dout, .dq = dqkv};
  ring(a, q, k, v, &p);
}
