/* compute.c: the operations one stage computes in a step, and their cost.
 *
 * ops_of lists them, each with its shape, how often a step runs it, its
 * FLOPs and the bytes it reads and writes: for a lesson's model as the
 * lesson's code calls them (its kind's entry of kinds.h's table); for the
 * planner's GPT block Megatron's products, attention (fused as
 * FlashAttention, or materialised), the elementwise passes, the model's
 * ends and the optimizer. What each costs a device is device.c's. */

#include "compute.h"
#include "block.h"
#include "kinds.h"
#include "oplist.h"

/* A layer of the planner's GPT block on one rank, for one microbatch: its
 * tokens (b s/cp), the rows of its elementwise passes (1/tp of them with
 * sequence parallelism), its widths on the rank (Q, K and V's, the MLP's),
 * and the keys a query sees on the busiest cp rank: causal with flash
 * (zigzag halves every rank's share), every key materialised. */
typedef struct {
  int64_t tok, rows, D, dh, heads, q, kv, f, f1, Sq, keys;
  double b, per, es;
  int dropout;
} layer_shape;

static layer_shape shape_of(const model *m, const mesh *x, int64_t s) {
  int64_t T = x->n[TP], C = x->n[CP], tok = rows_per_micro(m, x), dh = m->D / m->A;
  layer_shape g = {.tok = tok,
                   .rows = x->sp ? tok / T : tok,
                   .D = m->D,
                   .dh = dh,
                   .heads = m->A / T,
                   .q = m->A / T * dh,
                   .kv = kv_heads(m) / T * dh,
                   .f = m->H / T,
                   .f1 = (m->swiglu ? 2 : 1) * (m->H / T),
                   .Sq = m->S / C,
                   .b = (double)(tok / (m->S / C)),
                   .per = (double)(x->M * stage_layers(m, x, s)),
                   .es = x->bf16 ? 2 : 4,
                   .dropout = x->dropout};
  g.keys = !x->flash ? m->S : x->zigzag || C == 1 ? m->S / 2 : m->S - g.Sq / 2;
  return g;
}

/* Megatron's four products (QKV and the MLP's first by columns, Wo and its
 * last by rows): forward X W; backward dX = dY W^T and dW = X^T dY, whose
 * output is the weight's (its tiles, its waves). */
static void products(op_list *l, const layer_shape *g, int backward) {
  const int64_t out[4] = {g->q + 2 * g->kv, g->D, g->f1, g->D}, in[4] = {g->D, g->q, g->D, g->f};
  for (int i = 0; i < 4; i++) {
    if (!backward) gemm(l, g->tok, out[i], in[i], 0, 0, g->per, g->es);
    if (backward) gemm(l, g->tok, in[i], out[i], 0, 1, g->per, g->es);
    if (backward) gemm(l, in[i], out[i], g->tok, 1, 0, g->per, g->es);
  }
}

/* The attention core. Fused (FlashAttention): forward 4 b a s keys dh
 * FLOPs, backward 2.5 times as many (its 5 products to 2, Dao 2023), Q, K,
 * V and O read and written once. Materialised, as 2021's Megatron: QK^T
 * and PV batched over b a/t, the scores scaled, masked and softmaxed in one
 * pass, dropped out in another where the run drops out (backward: 3 passes
 * each, and the dropout's mask read). */
static void core(op_list *l, const layer_shape *g, int backward, int flash) {
  double fwd = 4.0 * g->b * (double)(g->heads * g->Sq * g->keys * g->dh);
  if (flash) {
    double io = g->es * (double)(g->tok * (2 * g->q + 2 * g->kv));
    add(l, FLASH, g->tok, g->heads, g->dh, g->keys, 1, g->per, (backward ? 2.5 : 1) * fwd,
        (backward ? 2 : 1) * io);
    return;
  }
  int64_t batch = (int64_t)g->b * g->heads, scores = batch * g->Sq * g->keys;
  double k = backward ? 2 : 1, drop = g->dropout ? 2 : 1;
  add(l, BGEMM, g->Sq, g->keys, g->dh, batch, 0, k * g->per, fwd / 2,
      g->es * (double)(batch * (g->Sq * g->dh + g->keys * g->dh + g->Sq * g->keys)));
  add(l, BGEMM, g->Sq, g->dh, g->keys, batch, 0, k * g->per, fwd / 2,
      g->es * (double)(batch * (g->Sq * g->keys + g->keys * g->dh + g->Sq * g->dh)));
  ew(l, scores, backward ? 3 : 2, drop * g->per, g->es);
  if (g->dropout) ew(l, scores, 1, g->per, 1); /* its mask, a byte each: written, then read */
}

/* The elementwise passes of a layer, each reading and writing its rows:
 * two norms, two residual adds (a dropout's mask with them where the run
 * drops out), GELU (in, out) or SwiGLU (gate and up in, their product
 * out), and llama's rotary embedding of Q and K; backward reads the saved
 * input and the gradient and writes the gradient (SwiGLU: two of each). */
static void passes(op_list *l, const model *m, const layer_shape *g, int backward) {
  ew(l, g->rows * g->D, backward ? 3 : 2, 2 * g->per, g->es);
  ew(l, g->rows * g->D, backward ? 2 : 3, 2 * g->per, g->es);
  if (g->dropout) ew(l, g->rows * g->D, 1, 2 * g->per, 1);
  ew(l, g->tok * g->f, m->swiglu ? (backward ? 5 : 3) : (backward ? 3 : 2), g->per, g->es);
  if (m->llama) ew(l, g->tok * (g->q + g->kv), backward ? 3 : 2, g->per, g->es);
}

/* The model's ends: the embedding's gather (its gradient's scatter) on the
 * first stage; the final norm, the output layer (a tp rank's rows of the
 * padded vocabulary) and the loss's softmax in fp32 on the last. */
static void ends(op_list *l, const model *m, const mesh *x, const layer_shape *g, int64_t s,
                 int backward) {
  int64_t T = x->n[TP], Vs = padded_vocab(m, T) / T;
  double M = (double)x->M;
  if (s == 0) ew(l, g->tok * g->D, 2, M, g->es);
  if (s != x->n[PP] - 1) return;
  ew(l, g->rows * g->D, backward ? 3 : 2, M, g->es);
  if (!backward) gemm(l, g->tok, Vs, g->D, 0, 0, M, g->es);
  if (backward) gemm(l, g->tok, g->D, Vs, 0, 1, M, g->es);
  if (backward) gemm(l, g->D, Vs, g->tok, 1, 0, M, g->es);
  ew(l, g->tok * Vs, 3, M, 4);
}

/* The planner's GPT block on stage s, a tp and cp rank: forward, backward,
 * and the forward again where recomputed (all of it with full
 * recomputation; with selective, attention's core alone: Korthikanti et
 * al.), in the backward's time. */
static void gpt(op_list *l, const model *m, const mesh *x, int64_t s) {
  layer_shape g = shape_of(m, x, s);
  int passes_run = x->recompute == RECOMPUTE_NONE ? 2 : 3;
  l->per_micro = 1;
  for (int pass = 0; pass < passes_run; pass++) {
    int back = pass == 1;
    l->backward = pass > 0;
    core(l, &g, back, x->flash);
    if (pass == 2 && x->recompute == RECOMPUTE_SELECTIVE) continue;
    products(l, &g, back);
    passes(l, m, &g, back);
    if (pass < 2) ends(l, m, x, &g, s, back);
  }
  l->per_micro = l->backward = 0;
}

int ops_of(const model *m, const mesh *x, int64_t s, int64_t c, op *out, int max) {
  op_list l = {.o = out, .max = max, .times = 1};
  if (m->kind < GPT) { /* a lesson's, as its code calls them (kinds.h) */
    kind_of(m)->ops(&l, m, x, s, c);
    return l.n;
  }
  if (m->kind == GPT) {
    int64_t G = x->n[DP] * x->n[CP];
    gpt(&l, m, x, s);
    double p = block_stage_params(m, x, s) / (x->zero ? (double)G : 1);
    add(&l, EW, (int64_t)p, 28, 0, 0, 0, 1, 0,
        28 * p); /* Adam: 28 bytes a parameter read and written */
  }
  return l.n;
}

/* One layer's attention blocks of one microbatch on cp rank c: what a
 * hop's transfer can hide behind (11's ring overlaps them). */
double attention_seconds(const model *m, const mesh *x, int64_t s, int64_t c, const machine *k,
                         int backward) {
  op o[160];
  int n = ops_of(m, x, s, c, o, 160);
  double t = 0, per = (double)(x->M * stage_layers(m, x, s));
  for (int i = 0; i < n; i++)
    if (o[i].k == (backward ? ATT_B : ATT_F) || (o[i].k == FLASH && o[i].backward == backward))
      t += o[i].count / per * op_seconds(&o[i], k);
  return t;
}
