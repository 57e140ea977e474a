/* compute14.c: lesson 14's GPT as its code runs a step on one rank
 * (14_gpt/layer.c, gpt.c, common/train's GPT pieces): each kernel call at
 * its shape, in the order a microbatch makes them, for compute.c's list.
 *
 * A layer (R rows of the microbatch, Rs of them in the rank's stream: R/tp
 * with --sequence-parallel; W = D/tp, Hs = H/tp): LayerNorm on Rs rows,
 * Wq, Wk, Wv [R, D] x [D, W], 11's ring on the tp rank's heads, Wo, the
 * residual added, LayerNorm, W1, GELU, W2, the residual; backward the
 * mirror (each weight's gradient X^T dY accumulated, each input's dY W^T),
 * and with --recompute the layer's forward again first. The first stage
 * embeds the tokens of its slice of the vocabulary and adds the positions;
 * the last runs LN_f, the logits [R, V/tp] and the cross-entropy's pieces.
 * Once a step: the gradients zeroed, the average over dp x cp (the comm
 * layer's scaling pass), clipping's norm and AdamW on what the rank steps.
 * The collectives are cost.c's (formulas.c's calls and bytes). */
#include "compute.h"
#include "formulas.h"
#include "oplist.h"

typedef struct {
  int64_t R, Rs, D, W, Hs, Vs;
} dims;

static void ln(op_list *l, const dims *d, int backward, int accumulate, double count) {
  double n = (double)(d->Rs * d->D);
  if (!backward) add(l, LN_F, d->Rs, d->D, 0, 0, 0, count, 7 * n, 4 * (2 * n + 2.0 * d->Rs));
  if (backward)
    add(l, LN_B, d->Rs, d->D, accumulate, 0, 0, count, 12 * n, 4 * (3 + accumulate) * n);
}

static void layer_forward(op_list *l, const model *m, const mesh *x, const dims *d, int64_t s,
                          int64_t c, double per) {
  int64_t R = d->R, D = d->D, W = d->W, Hs = d->Hs;
  ln(l, d, 0, 0, per);
  gemm(l, R, W, D, 0, 0, 3 * per, 4); /* q, k, v */
  ring_ops(l, m, x, s, c, 0);
  gemm(l, R, D, W, 0, 0, per, 4);  /* o Wo: the tp rank's heads' share */
  ew(l, d->Rs * D, 3, 2 * per, 4); /* the residual, after attention and after the MLP */
  ln(l, d, 0, 0, per);
  gemm(l, R, Hs, D, 0, 0, per, 4); /* a = h W1 */
  add(l, GELU_F, R * Hs, 0, 0, 0, 0, per, 10.0 * (double)(R * Hs), 8.0 * (double)(R * Hs));
  gemm(l, R, D, Hs, 0, 0, per, 4); /* u W2 */
}

static void layer_backward(op_list *l, const model *m, const mesh *x, const dims *d, int64_t s,
                           int64_t c, double per) {
  int64_t R = d->R, D = d->D, W = d->W, Hs = d->Hs;
  gemm(l, Hs, D, R, 1, 0, per, 4); /* dW2 += u^T dout */
  gemm(l, R, Hs, D, 0, 1, per, 4); /* du = dout W2^T */
  add(l, GELU_B, R * Hs, 0, 0, 0, 0, per, 12.0 * (double)(R * Hs), 12.0 * (double)(R * Hs));
  gemm(l, D, Hs, R, 1, 0, per, 4); /* dW1 += h^T da */
  gemm(l, R, D, Hs, 0, 1, per, 4); /* dh = da W1^T */
  ln(l, d, 1, 1, per);
  gemm(l, W, D, R, 1, 0, per, 4); /* dWo += o^T d */
  gemm(l, R, W, D, 0, 1, per, 4); /* do = d Wo^T */
  ring_ops(l, m, x, s, c, 1);
  gemm(l, D, W, R, 1, 0, 3 * per, 4); /* dWq, dWk, dWv */
  gemm(l, R, D, W, 0, 1, 3 * per, 4); /* their inputs' gradients, summed */
  ln(l, d, 1, 1, per);
}

/* The model's ends a microbatch: the embedding (first stage), the head and
 * the loss (last), forward or backward */
static void ends(op_list *l, const dims *d, int first, int last, int backward, double M) {
  int64_t R = d->R, D = d->D, Vs = d->Vs;
  double rows = (double)(R * D), logits = (double)(R * Vs);
  if (first && !backward) {
    add(l, EMB_F, R, Vs, D, 0, 0, M, 0, 8 * rows);
    ew(l, d->Rs * D, 3, M, 4); /* the positions added */
  }
  if (last && !backward) {
    ln(l, d, 0, 0, M);
    gemm(l, R, Vs, D, 0, 1, M, 4); /* the logits of the slice, never gathered */
    add(l, CE_F, R, Vs, 0, 0, 0, M, 4 * logits, 12 * logits);
  }
  if (last && backward) {
    add(l, CE_B, R, Vs, 0, 0, 0, M, 4 * logits, 8 * logits);
    gemm(l, Vs, D, R, 1, 0, M, 4); /* dwte += dlogits^T hf */
    gemm(l, R, D, Vs, 0, 0, M, 4); /* dh = dlogits wte */
    ln(l, d, 1, 0, M);
  }
  if (first && backward) {
    add(l, EMB_B, R, Vs, D, 0, 0, M, rows, 12 * rows);
    ew(l, R * D, 3, M, 4); /* the positions' gradient */
  }
}

int gpt14_ops(op_list *l, const model *m, const mesh *x, int64_t s, int64_t c) {
  int64_t T = x->n[TP], G = x->n[DP] * x->n[CP], P = x->n[PP], R = rows_per_micro(m, x);
  dims d = {R, x->sp ? R / T : R, m->D, m->D / T, m->H / T, m->V / T};
  double M = (double)x->M, per = (double)(x->M * stage_layers(m, x, s));
  int first = s == 0, last = s == P - 1;
  l->per_micro = 1;
  ends(l, &d, first, last, 0, M);
  layer_forward(l, m, x, &d, s, c, per);
  l->backward = 1;
  if (x->recompute) layer_forward(l, m, x, &d, s, c, per); /* --recompute: again, in backward */
  ends(l, &d, first, last, 1, M);
  layer_backward(l, m, x, &d, s, c, per);
  l->per_micro = l->backward = 0;
  memory mem = memory_of(m, x, s); /* the rank's floats: its weights' buffer, what it steps */
  int64_t held = mem.grads / 4, stepped = x->adamw ? mem.optim / 8 : held;
  ew(l, held, 1, 1, 4);            /* the gradients zeroed */
  if (G > 1) ew(l, held, 2, 1, 4); /* averaged: the comm layer's 1/G pass */
  add(l, SUMSQ, stepped, 0, 0, 0, 0, 1, 2.0 * (double)stepped, 4.0 * (double)stepped);
  add(l, ADAMW, stepped, 0, 0, 0, 0, 1, 12.0 * (double)stepped, 28.0 * (double)stepped);
  return l->n;
}
