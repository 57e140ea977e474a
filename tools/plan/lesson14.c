/* lesson14.c: lesson 14's GPT as the cost model's table (13_plan/kinds.h)
 * takes it, the one file of the planner that includes 14_gpt: its
 * defaults (14_gpt/defaults.c), its formulas (14_gpt/formulas.c) on the
 * rank's share, and each kernel call of a step at its shape, in the order
 * a microbatch makes them (14_gpt/layer.c, gpt.c, common/train's GPT
 * pieces).
 *
 * A layer (R rows of the microbatch, Rs of them in the rank's stream: R/tp
 * with --sequence-parallel; W = D/tp, Hs = H/tp): LayerNorm on Rs rows,
 * Wq, Wk, Wv [R, D] x [D, W], 11's ring on the tp rank's heads, Wo, the
 * residual added, LayerNorm, W1, GELU, W2, the residual; backward the
 * mirror (each weight's gradient X^T dY accumulated, each input's dY W^T),
 * and with --recompute the layer's forward again first. The first stage
 * embeds the tokens of its slice of the vocabulary and adds the positions;
 * the last runs LN_f, the logits [R, V/tp] and the cross-entropy's pieces.
 * Once a step: the gradients zeroed, averaged over dp x cp (the comm
 * layer's scaling pass), clipping's norm and AdamW, a segment at a time. */
#include "13_plan/block.h"
#include "14_gpt/defaults.h"
#include "14_gpt/formulas.h"
#include "lessons.h"

typedef struct {
  int64_t R, Rs, D, W, Hs, Vs, C; /* C: a chunk of a sequence, cp's share of it */
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
  if (x->zb) ew(l, R * D, 2, 2 * per, 4); /* zb1's B keeps dy and dx2 for W (layer.c's input) */
}

/* The positions of rows [0, n) (14_gpt/tokens.c's runs: each a chunk of C
 * positions, the last cut short), forward or backward (k) */
static void positions(op_list *l, int k, int64_t n, int64_t C, int64_t D, double M) {
  double run = (double)(C * D), tail = (double)(n % C * D);
  add(l, k, C, 1, D, 0, 0, M * (double)(n / C), run, 12 * run);
  add(l, k, n % C, 1, D, 0, 0, n % C ? M : 0, tail, 12 * tail);
}

/* The model's ends a microbatch: the embedding (first stage), the head and
 * the loss (last), forward or backward */
static void ends(op_list *l, const dims *d, int first, int last, int backward, double M) {
  int64_t R = d->R, D = d->D, Vs = d->Vs;
  double rows = (double)(R * D), logits = (double)(R * Vs), r = (double)R;
  if (first && !backward) {
    add(l, EMB_F, R, Vs, D, 0, 0, M, 0, 8 * rows);
    positions(l, POS_F, d->Rs, d->C, D, M); /* the rank's stream's rows */
  }
  if (last && !backward) {
    ln(l, d, 0, 0, M);
    gemm(l, R, Vs, D, 0, 1, M, 4); /* the logits of the slice, never gathered */
    add(l, CE_F, R, Vs, 0, 0, 0, M, logits, 4 * (logits + r));           /* each row's max */
    add(l, CE_SUM, R, Vs, 0, 0, 0, M, 3 * logits, 4 * (logits + 2 * r)); /* sum exp(x - max) */
    add(l, CE_TGT, R, Vs, 0, 0, 0, M, 0, 12 * r); /* the target's logit, where in the slice */
  }
  if (last && backward) {
    add(l, CE_B, R, Vs, 0, 0, 0, M, 4 * logits, 8 * logits);
    gemm(l, Vs, D, R, 1, 0, M, 4); /* dwte += dlogits^T hf */
    gemm(l, R, D, Vs, 0, 0, M, 4); /* dh = dlogits wte */
    ln(l, d, 1, 0, M);
  }
  if (first && backward) {
    add(l, EMB_B, R, Vs, D, 0, 0, M, rows, 12 * rows);
    positions(l, POS_B, R, d->C, D, M); /* the positions' gradient, from every row */
  }
}

/* Stage s of gpt14 as 14's formulas take a rank's share, from the sizes
 * alone as 14 takes its own (formulas.c's gpt_share_sized): rank 0 of its
 * dp x cp group, tp rank 0 */
static gpt_share gpt_share_of(const model *m, const mesh *x, int64_t s) {
  gpt_sizes z = {.n = x->n,
                 .s = s,
                 .L = stage_layers(m, x, s),
                 .M = x->M,
                 .R = rows_per_micro(m, x),
                 .C = m->S / (x->n[CP] * (x->zigzag ? 2 : 1)),
                 .D = m->D,
                 .H = m->H,
                 .heads = m->A,
                 .V = m->V,
                 .S = m->S,
                 .zero = x->zero,
                 .sp = x->sp};
  gpt_share h = gpt_share_sized(&z);
  h.gpipe = x->gpipe;
  h.adamw = x->adamw;
  h.recompute = x->recompute == RECOMPUTE_FULL;
  h.chunks = x->V;
  h.zb = x->zb;
  return h;
}

/* Once a step on what the rank steps, [0, own) of its buffer: each of
 * 14's classes of weights (buffers.c: the tp shards, the vocabulary, the
 * replicas, their gains then wpe) a segment, its squares summed for the
 * clipping's norm where it is no copy (the last stage's wte), and stepped */
static void step_ops(op_list *l, const model *m, const mesh *x, int64_t s) {
  gpt_share h = gpt_share_of(m, x, s);
  int64_t at[4];
  gpt_classes(&h, at);
  for (int k = 0; k < 3; k++) {
    int64_t a = at[k], b = at[k + 1] < h.own ? at[k + 1] : h.own;
    if (a >= b) continue;
    if (k != 1 || h.first) /* the last stage's wte: a copy, its norm counted on the first */
      add(l, SUMSQ, b - a, 0, 0, 0, 0, 1, 2.0 * (double)(b - a), 4.0 * (double)(b - a));
    step_segment(l, x->adamw, a, b, at[2], k == 2 ? at[2] + (2 * h.L + h.last) * h.D : at[2], h.D);
  }
}

static void gpt14_ops(op_list *l, const model *m, const mesh *x, int64_t s, int64_t c) {
  int64_t T = x->n[TP], G = x->n[DP] * x->n[CP], P = x->n[PP], R = rows_per_micro(m, x);
  dims d = {R,
            x->sp ? R / T : R,
            m->D,
            m->D / T,
            m->H / T,
            m->V / T,
            m->S / (x->n[CP] * (x->zigzag ? 2 : 1))};
  double M = (double)x->M, per = (double)(x->M * stage_layers(m, x, s));
  int first = s == 0, last = s == P - 1;
  l->per_micro = 1;
  ends(l, &d, first, last, 0, M);
  layer_forward(l, m, x, &d, s, c, per);
  l->backward = 1;
  if (x->recompute) layer_forward(l, m, x, &d, s, c, per); /* --recompute: again, in backward */
  ends(l, &d, first, last, 1, M);
  layer_backward(l, m, x, &d, s, c, per);
  parked_ops(l, x, s, (x->sp ? R / T : R) * m->D); /* 09's walk: a parked backward's copy */
  l->per_micro = l->backward = 0;
  memory mem = memory_of(m, x, s); /* the rank's floats: its weights' buffer */
  int64_t held = mem.grads / 4;
  ew(l, held, 1, 1, 4);               /* the gradients zeroed */
  if (G > 1) ew_scale(l, held, 1, 4); /* averaged: the comm layer's 1/G pass */
  step_ops(l, m, x, s);
}

static double gpt14_params(const model *m) {
  int64_t D = m->D, L = m->L;
  return (double)(m->V * D + m->S * D + L * (4 * D * D + 2 * D * m->H + 2 * D) + D);
}
/* 14's own count, nanoGPT's: wpe's parameters left out */
static double gpt14_flops(const model *m) {
  return gpt_model_flops(m->L, m->D, m->H, m->V, m->S, m->B);
}
static double gpt14_recompute(const model *m, const mesh *x) {
  return x->recompute ? gpt_recompute_flops(m->L, m->D, m->H, m->S, m->B) : 0;
}

/* 14's traffic as 13's axes hold it: tp's all-reduces summed (the
 * activations' or the gains', the loss's max and sums: one row of its
 * report JSON), and the tied weight's all-reduce between the first and the
 * last stage (14's emb: two ranks of the pipeline axis) as pp's all-reduce */
static void gpt14_traffic(const model *m, const mesh *x, int64_t s, traffic t[NCOMM][NCOLL]) {
  gpt_share sh = gpt_share_of(m, x, s);
  gpt_traffic f = gpt_traffic_of(&sh);
  mesh_flow ar[4] = {f.activ, f.gains, f.max, f.sums};
  for (int i = 0; i < 4; i++)
    t[TP][AR] = (traffic){t[TP][AR].calls + ar[i].calls, t[TP][AR].bytes + ar[i].bytes};
  t[TP][AG] = (traffic){f.gather.calls, f.gather.bytes};
  t[TP][RS] = (traffic){f.scatter.calls, f.scatter.bytes};
  t[CP][P2P] = (traffic){f.cp.calls, f.cp.bytes};
  t[PP][P2P] = (traffic){f.pp.calls, f.pp.bytes};
  if (x->V > 1 || x->zb) /* 14 walks 09's interleaved or ZB-H1 plan: its exchanges */
    t[PP][P2P].calls = block_exchanges(x, s); /* 13_plan/block.c: 09's plans.c */
  t[PP][AR] = (traffic){f.emb.calls, f.emb.bytes};
  t[DC][AR] = (traffic){f.grads.calls, f.grads.bytes};
  t[DC][AG] = (traffic){f.params.calls, f.params.bytes};
}

static void gpt14_memory(const model *m, const mesh *x, int64_t s, int64_t mem[DT_NTAGS]) {
  gpt_share sh = gpt_share_of(m, x, s);
  gpt_memory(&sh, mem);
}

const kind_fns gpt14_kind = {.params = gpt14_params,
                             .model_flops = gpt14_flops,
                             .recompute_flops = gpt14_recompute,
                             .traffic = gpt14_traffic,
                             .memory = gpt14_memory,
                             .ops = gpt14_ops};

/* 14's model as 14 makes it by default: its own defaults (14_gpt/defaults.c),
 * resolved as common/train resolves them (the MLP 4D wide); V from the text */
void gpt14_model(model *m) {
  dt_train_config c = DT_TRAIN_DEFAULTS;
  gpt_defaults(&c);
  *m = (model){.kind = GPT14,
               .name = "gpt14",
               .L = c.layers,
               .D = c.dim,
               .A = c.heads,
               .H = c.hidden ? c.hidden : 4 * c.dim,
               .S = c.seq,
               .B = c.batch};
}

/* gpt14's V: the text's tokens padded to a multiple of tp, read by the
 * loader 14 reads it with (common/train's dt_text_load, the multiple 14's
 * main sets), or --vocab padded so. The prediction reads its input where
 * the lesson does, never from the run it is checked against (the run's
 * report would hand it the very figure), and no number in verify.c's table
 * goes stale when the text (README.md) changes. */
void gpt14_vocab(model *m, const char *text, int byte, int64_t T) {
  if (m->V) {
    m->V = (m->V + T - 1) / T * T;
    return;
  }
  dt_train_config c = DT_TRAIN_DEFAULTS;
  gpt_defaults(&c);
  dt_text t = {0};
  dt_text_load(&t, text ? text : c.text, byte, T, m->S + 1);
  m->V = t.vocab.size;
  dt_text_free(&t);
}
