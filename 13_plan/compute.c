/* compute.c: the operations one stage computes in a step, and their cost.
 *
 * ops_of lists them as the lessons' code calls them (12_mesh/mesh.c,
 * 11_cp/cp.c and ring.c, 05/06/09 on common/train's blocks), each with its
 * shape, how often a step runs it, its FLOPs and the bytes it reads and
 * writes; for the planner's GPT block Megatron's products, attention (fused
 * as FlashAttention, or materialised), the elementwise passes, the output
 * layer and the optimizer. op_seconds costs one call: on a machine that
 * --measure timed, the time of that very kernel at that very shape; on a
 * datasheet (or a shape the machine file lacks) by the roofline, the longer
 * of FLOPs at the large-GEMM rate and bytes at the memory bandwidth. */
#include <string.h>

#include "compute.h"
#include "formulas.h"

const char *const kernel_name[NKERNELS] = {"gemm", "mlp_f", "mlp_b",  "att_f",  "att_b",
                                           "ew",   "loss",  "data05", "data11", "adamw",
                                           "sgd",  "flash", "alloc"};

typedef struct {
  op *o;
  int n, max;
  int per_micro, backward;
  double times;
} list;

static void add(list *l, int k, int64_t a, int64_t b, int64_t c, int64_t d, int64_t e, double count,
                double flops, double bytes) {
  if (count <= 0 || l->n >= l->max) return;
  l->o[l->n++] =
      (op){k, {a, b, c, d, e}, count * l->times, flops, bytes, l->per_micro, l->backward};
}
static void gemm(list *l, int64_t m, int64_t n, int64_t k, int ta, int tb, double count,
                 double es) {
  add(l, GEMM, m, n, k, ta, tb, count, 2.0 * (double)m * (double)n * (double)k,
      es * (double)(m * k + k * n + m * n));
}
static void ew(list *l, int64_t n, int passes, double count,
               double es) { /* 1 zero, 2 copy, 3 add */
  add(l, EW, n, passes, 0, 0, 0, count, (double)n * (passes - 1), es * (double)n * passes);
}

/* The attention blocks rank c of the cp ring computes for one sequence, as
 * 11_cp/ring.c's attend() walks them: its chunks' queries against every
 * rank's chunks on or below the causal diagonal (diagonal blocks masked). */
static void blocks(const mesh *x, int64_t c, int64_t *causal, int64_t *full) {
  int64_t N = x->n[CP], nc = x->zigzag ? 2 : 1;
  *causal = *full = 0;
  for (int64_t src = 0; src < N; src++)
    for (int64_t jq = 0; jq < nc; jq++)
      for (int64_t jk = 0; jk < nc; jk++) {
        int64_t cq = x->zigzag && jq ? 2 * N - 1 - c : c,
                ck = x->zigzag && jk ? 2 * N - 1 - src : src;
        *causal += ck == cq;
        *full += ck < cq;
      }
}

/* 11's and 12's transformer layer (tp = 1 for 11, whose MLP adds the residual itself) */
static void transformer(list *l, const model *m, const mesh *x, int64_t s, int64_t c) {
  int64_t T = x->n[TP], R = rows_per_micro(m, x), D = m->D, W = D / T, A = m->A / T, Hs = m->H / T;
  int64_t L = stage_layers(m, x, s), Bm = m->B / (x->n[DP] * x->M), nc = x->zigzag ? 2 : 1;
  int64_t C = m->S / (x->n[CP] * nc), k1, k2, res = m->kind == CP11, P = x->n[PP];
  blocks(x, c, &k1, &k2);
  double per = (double)(x->M * L);
  l->per_micro = 1;
  gemm(l, R, W, D, 0, 0, 3 * per, 4); /* q, k, v */
  ew(l, R * W, 1, per, 4);            /* the ring's start: o zeroed, K|V copied */
  ew(l, 2 * R * W, 2, per, 4);
  add(l, ATT_F, C, W, A, 1, 0, per * (double)(Bm * k1), 2.0 * (double)(C * C * W),
      16.0 * (double)(C * W));
  add(l, ATT_F, C, W, A, 0, 0, per * (double)(Bm * k2), 4.0 * (double)(C * C * W),
      16.0 * (double)(C * W));
  gemm(l, R, D, W, 0, 0, per, 4); /* o Wo */
  ew(l, R * D, 3, 2 * per, 4);    /* the residual, twice: after attention and after the MLP */
  add(l, MLP_F, R, D, Hs, res, 0, per, 4.0 * (double)(R * D * Hs),
      4.0 * (double)(2 * R * D + 2 * D * Hs + 2 * R * Hs));
  if (s == 0) ew(l, R * D, 2, (double)x->M, 4); /* the microbatch into its slot */
  l->backward = 1;
  add(l, MLP_B, R, D, Hs, res, 0, per, 8.0 * (double)(R * D * Hs),
      4.0 * (double)(3 * R * D + 4 * D * Hs + 3 * R * Hs));
  gemm(l, W, D, R, 1, 0, per, 4); /* dWo */
  gemm(l, R, W, D, 0, 1, per, 4); /* do */
  ew(l, R * W, 2, 2 * per, 4);    /* delta, dq zeroed */
  ew(l, 2 * R * W, 2, 2 * per, 4);
  ew(l, 2 * R * W, 1, per, 4);
  add(l, ATT_B, C, W, A, 1, 0, per * (double)(Bm * k1), 5.0 * (double)(C * C * W),
      28.0 * (double)(C * W));
  add(l, ATT_B, C, W, A, 0, 0, per * (double)(Bm * k2), 10.0 * (double)(C * C * W),
      28.0 * (double)(C * W));
  gemm(l, D, W, R, 1, 0, 3 * per, 4); /* dWq, dWk, dWv */
  gemm(l, R, D, W, 0, 1, 3 * per, 4); /* their inputs' gradients */
  ew(l, R * D, 3, 2 * per, 4);
  if (s == P - 1)
    add(l, LOSS, R * D, 0, 0, 0, 0, (double)x->M, 3.0 * (double)(R * D), 12.0 * (double)(R * D));
  l->per_micro = l->backward = 0;
  if (s == 0 || s == P - 1 || res) /* cp's chunks of the step's sequences */
    add(l, DATA11, Bm, m->S, x->n[CP], 2 * c + x->zigzag, D, (double)x->M, 0,
        8.0 * (double)(R * D));
}

/* 05-09's residual MLP blocks (common/train/model.c): 2 products each way */
static void mlp(list *l, const model *m, const mesh *x, int64_t s) {
  int64_t R = rows_per_micro(m, x), D = m->D, H = m->H, L = stage_layers(m, x, s), P = x->n[PP];
  double per = (double)(x->M * L);
  l->per_micro = 1;
  add(l, MLP_F, R, D, H, 1, 0, per, 4.0 * (double)(R * D * H),
      4.0 * (double)(2 * R * D + 2 * D * H + 2 * R * H));
  if (s == 0 && P > 1) ew(l, R * D, 2, (double)x->M, 4);
  l->backward = 1;
  add(l, MLP_B, R, D, H, 1, 0, per, 8.0 * (double)(R * D * H),
      4.0 * (double)(3 * R * D + 4 * D * H + 3 * R * H));
  if (s == P - 1)
    add(l, LOSS, R * D, 0, 0, 0, 0, (double)x->M, 3.0 * (double)(R * D), 12.0 * (double)(R * D));
  l->per_micro = l->backward = 0;
  int64_t rows = m->kind == PP09 ? m->B : R; /* 09 makes the whole batch on its end stages */
  if (s == 0 || s == P - 1) add(l, DATA05, rows, D, 0, 0, 0, 1, 0, 8.0 * (double)(rows * D));
}

/* The planner's GPT block, per microbatch, on a tp rank: Megatron's four
 * products (QKV and W1 by columns, Wo and W2 by rows), attention, two layer
 * norms, two residual adds and GELU (the passes read and write [s b, D] or
 * [s b, F/t]); backward twice the forward's products and passes, and with
 * full recomputation the forward once more. */
static void gpt(list *l, const model *m, const mesh *x, int64_t s) {
  int64_t T = x->n[TP], C = x->n[CP], tok = rows_per_micro(m, x), D = m->D, F = m->H, P = x->n[PP];
  int64_t L = stage_layers(m, x, s), A = m->A / T, dh = m->D / m->A, Sq = m->S / C;
  double es = x->bf16 ? 2 : 4, per = (double)(x->M * L), b = (double)(tok / Sq);
  /* keys a query sees, on the busiest rank: causal with flash (zigzag halves
   * every rank's share), every key with the scores materialised */
  double keys = !x->flash             ? (double)m->S
                : x->zigzag || C == 1 ? (double)m->S / 2
                                      : (double)m->S - (double)Sq / 2;
  double att = 4.0 * b * (double)(A * Sq * dh) * keys, scores = b * (double)(A * Sq) * keys;
  for (int pass = 0; pass < 2 + x->recompute; pass++) {
    double k = pass == 1 ? 2 : 1; /* backward: the inputs' and the weights' gradients */
    l->per_micro = 1;
    l->backward = pass > 0;
    gemm(l, tok, 3 * D / T, D, 0, 0, k * per, es);
    gemm(l, tok, D, D / T, 0, 0, k * per, es);
    gemm(l, tok, F / T, D, 0, 0, k * per, es);
    gemm(l, tok, D, F / T, 0, 0, k * per, es);
    add(l, FLASH, tok, A, dh, (int64_t)keys, x->flash, k * per, att,
        x->flash ? es * 4.0 * (double)(tok * A * dh) : 8.0 * scores);
    ew(l, tok * (5 * D + F / T), 4, k * per,
       es); /* 2 norms, 2 adds (3 passes), GELU: ~4 passes of [s b, 5D + F/t] */
    if (s == P - 1)
      gemm(l, tok, (m->V + T - 1) / T, D, 0, 0, k * (double)x->M, es); /* the output layer */
    if (s == P - 1 && pass == 0)
      ew(l, tok * ((m->V + T - 1) / T), 3, 2.0 * (double)x->M, 4); /* softmax, loss */
  }
  l->per_micro = l->backward = 0;
}

int ops_of(const model *m, const mesh *x, int64_t s, int64_t c, op *out, int max) {
  list l = {.o = out, .max = max, .times = 1};
  int64_t G = x->n[DP] * x->n[CP], T = x->n[TP], L = stage_layers(m, x, s);
  int64_t n = m->kind == MESH12 ? 4 * m->D * (m->D / T) + 2 * m->D * (m->H / T)
              : m->kind == CP11 ? 4 * m->D * m->D + 2 * m->D * m->H
                                : 2 * m->D * m->H;
  int64_t shard = (n + G - 1) / G, stepped = L * (m->kind == FSDP06 || x->zero ? shard : n);
  if (m->kind == MESH12 || m->kind == CP11) transformer(&l, m, x, s, c);
  if (m->kind == DP05 || m->kind == FSDP06 || m->kind == PP09) mlp(&l, m, x, s);
  if (m->kind == GPT) {
    gpt(&l, m, x, s);
    double p = parameters_of(m) / (double)(T * x->n[PP]) / (x->zero ? (double)G : 1);
    add(&l, EW, (int64_t)p, 28, 0, 0, 0, 1, 0,
        28 * p); /* Adam: 28 bytes a parameter read and written */
    return l.n;
  }
  if (m->kind != FSDP06 || x->zero == 1)
    ew(&l, L * (x->zero ? G * shard : n), 1, 1, 4); /* g zeroed */
  if (m->kind == FSDP06 &&
      x->zero >= 2) /* 06's transient layers: gradients (2, 3), parameters (3) */
    add(&l, ALLOC, G * shard, 0, 0, 0, 0, (double)(L * (x->zero == 3 ? 3 : 1)), 0,
        4.0 * (double)(G * shard));
  /* the gradients are averaged: MPI sums, then the comm layer scales the
   * result by 1/G (dt_finish_avg), a pass over each call's buffer */
  int64_t avg = m->kind == DP05                ? m->D * m->H
                : x->zero || m->kind == FSDP06 ? (x->zero == 1 ? G * shard : shard)
                                               : L * n;
  double calls = m->kind == DP05 ? 2.0 * (double)L : x->zero || m->kind == FSDP06 ? (double)L : 1;
  if (G > 1) ew(&l, avg, 2, calls, 4);
  add(&l, x->adamw ? ADAMW : SGD, stepped, 0, 0, 0, 0, 1, 12.0 * (double)stepped,
      28.0 * (double)stepped);
  return l.n;
}

double op_seconds(const op *o, const machine *c) {
  for (int i = 0; c->measured && i < c->nops; i++)
    if (c->ops[i].k == o->k && !memcmp(c->ops[i].s, o->s, sizeof o->s)) return c->ops[i].seconds;
  double rate = c->flops * c->eff,
         f = o->k == GEMM || o->k == MLP_F || o->k == MLP_B || o->k == FLASH ? o->flops / rate : 0;
  double b = o->bytes / c->hbm_bw;
  return f > b ? f : b;
}

/* One layer's attention blocks of one microbatch on cp rank c: what a
 * hop's transfer can hide behind (11's ring overlaps them). */
double attention_seconds(const model *m, const mesh *x, int64_t s, int64_t c, const machine *k,
                         int backward) {
  op o[64];
  int n = ops_of(m, x, s, c, o, 64);
  double t = 0, per = (double)(x->M * stage_layers(m, x, s));
  for (int i = 0; i < n; i++)
    if (o[i].k == (backward ? ATT_B : ATT_F) || (o[i].k == FLASH && o[i].backward == backward))
      t += o[i].count / per * op_seconds(&o[i], k);
  return t;
}
