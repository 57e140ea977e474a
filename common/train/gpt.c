/* gpt.c: nanoGPT's GPT (bias=False), DT_GPT (train.h, "gpt"): the pieces a
 * lesson composes on the slice it holds (attention on some heads, the MLP
 * on some hidden units, the cross-entropy's pieces over some of the
 * vocabulary), and the whole model in one process, built from the same
 * pieces: the yardstick's forward and backward, evaluation and sampling.
 *
 * Per layer, pre-norm:  h1 = LN1(x);  x2 = x + Attn(h1) Wo;
 *                       h2 = LN2(x2); x' = x2 + gelu(h2 W1) W2
 * and logits = LN_f(x_L) wte^T. Attention is attention.c's tiles, or its
 * plainest form with the scores materialised. Everything runs on the
 * backend's memory (the GPU's on the cuda backend): the whole model's
 * activations too; tokens come from the host and are copied in, and the
 * host sees only what a printed loss or the sampler's draw needs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"

/* ---------------------------------------------------------------- pieces */
/* (a), (b), (c) of the cross-entropy over logits [R, Vs], into mx, sum and
 * tl [R] on the backend: the slices' pieces, or the whole row's. */
static void ce_pieces(const float *logits, int64_t R, int64_t Vs, int64_t v0,
                      const int32_t *targets, float *mx, float *sum, float *tl) {
  dt_ce_max(logits, R, Vs, mx);
  dt_ce_sumexp(logits, R, Vs, mx, sum);
  dt_ce_target(logits, R, Vs, v0, targets, tl);
}

double dt_ce_loss(const float *mx, const float *sum, const float *tl, int64_t R) {
  float *h = dt_host_alloc((size_t)(3 * R), sizeof *h);
  dt_copy_to_host(h, mx, (size_t)R * 4);
  dt_copy_to_host(h + R, sum, (size_t)R * 4);
  dt_copy_to_host(h + 2 * R, tl, (size_t)R * 4);
  double loss = 0;
  for (int64_t r = 0; r < R; r++) loss += log((double)h[R + r]) + h[r] - h[2 * R + r];
  free(h);
  return loss;
}

double dt_ce_whole(const float *logits, int64_t R, int64_t V, const int32_t *targets, float scale,
                   float *dlogits) {
  float *p = dt_alloc_f32((size_t)(3 * R), DT_ACTIV);
  ce_pieces(logits, R, V, 0, targets, p, p + R, p + 2 * R);
  double loss = dt_ce_loss(p, p + R, p + 2 * R, R) / (double)R;
  if (dlogits) dt_ce_backward(logits, R, V, 0, targets, p, p + R, scale / (float)R, dlogits);
  dt_free(p);
  return loss;
}

/* The embedding's backward, in two kernels on the backend's memory: the
 * slice's rows bucketed by token (gpt_core.h's dt_token_bucket, one thread
 * a token id), then each token's gradient summed from its rows in row
 * order. The token ids stay where they are (device memory): no copy to the
 * host and back, no wait in the step; the buckets' scratch is kept. */
void dt_embed_backward(const int32_t *tokens, int64_t R, const float *dout, int64_t v0, int64_t Vs,
                       int64_t D, float *dwte) {
  DT_OP("dt_embed_backward", R, Vs, D, 0, 0); /* one kernel to the step's list: its two inside */
  static int64_t *offsets;                    /* backend scratch, kept: [Vs + 1] and [R] */
  static int32_t *rows;
  static int64_t have_v, have_r;
  if (R <= 0 || Vs <= 0 || D <= 0) return;
  if (Vs > have_v || R > have_r) {
    dt_free(offsets);
    dt_free(rows);
    have_v = Vs > have_v ? Vs : have_v;
    have_r = R > have_r ? R : have_r;
    offsets = dt_alloc((size_t)(have_v + 1) * sizeof *offsets, DT_OTHER);
    rows = dt_alloc((size_t)have_r * sizeof *rows, DT_OTHER);
  }
  dt_embed_buckets(tokens, R, v0, Vs, offsets, rows);
  dt_embed_rows_sum(offsets, rows, dout, Vs, D, dwte);
}

dt_gpt_block dt_gpt_block_at(const dt_train_config *c, float *model, int64_t layer) {
  float *p[8];
  for (int j = 0; j < 8; j++) p[j] = model + dt_model_tensor(c, dt_gpt_tensor(layer, j)).at;
  return (dt_gpt_block){p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]};
}

/* out = (x ? x : 0) + y W (partial over the slice's rows of W): the two
 * projections back into the residual stream */
static void project_out(const float *y, const float *wt, int64_t R, int64_t K, int64_t D,
                        const float *x, float *out) {
  if (x && x != out) dt_copy(out, x, (size_t)(R * D) * 4);
  dt_matmul(0, 0, R, D, K, y, wt, out, x != NULL);
}

/* Attention's forward on the slice: saved is lse [R, heads] (the tiles'),
 * or with mat the probabilities [seqs][heads][S, S] (the materialised). */
static void attention(const dt_gpt_shape *s, const dt_gpt_block *w, const float *h, float *qkv,
                      float *o, float *saved, dt_heads_scratch *mat, const float *x, float *out) {
  int64_t S = s->S, R = s->seqs * S, D = s->D, Ws = s->heads * s->dh;
  float *q = qkv, *k = qkv + R * Ws, *v = qkv + 2 * R * Ws;
  dt_matmul(0, 0, R, Ws, D, h, w->wq, q, 0);
  dt_matmul(0, 0, R, Ws, D, h, w->wk, k, 0);
  dt_matmul(0, 0, R, Ws, D, h, w->wv, v, 0);
  for (int64_t b = 0; b < s->seqs; b++) {
    int64_t at = b * S * Ws;
    if (mat)
      dt_attend_materialised(mat, q + at, k + at, v + at, saved + b * s->heads * S * S, o + at);
    else
      dt_attn_block_forward(q + at, k + at, v + at, S, S, Ws, s->heads, 1, o + at,
                            saved + b * S * s->heads);
  }
  project_out(o, w->wo, R, Ws, D, x, out);
}

static void attention_backward(const dt_gpt_shape *s, const dt_gpt_block *w, dt_gpt_block *g,
                               const float *h, const float *qkv, const float *o, const float *saved,
                               dt_heads_scratch *mat, const float *dout, float *scratch,
                               float *dh) {
  int64_t S = s->S, R = s->seqs * S, D = s->D, Ws = s->heads * s->dh;
  const float *q = qkv, *k = qkv + R * Ws, *v = qkv + 2 * R * Ws;
  float *dq = scratch, *dk = dq + R * Ws, *dv = dk + R * Ws, *dO = dv + R * Ws;
  float *delta = dO + R * Ws;
  dt_matmul(1, 0, Ws, D, R, o, dout, g->wo, 1);  /* dWo += o^T dout */
  dt_matmul(0, 1, R, Ws, D, dout, w->wo, dO, 0); /* do = dout Wo^T */
  if (!mat) dt_attn_delta(dO, o, R, Ws, s->heads, delta);
  dt_zero(dq, (size_t)(3 * R * Ws) * 4); /* the blocks add to them */
  for (int64_t b = 0; b < s->seqs; b++) {
    int64_t at = b * S * Ws;
    if (mat)
      dt_attend_materialised_backward(mat, q + at, k + at, v + at, saved + b * s->heads * S * S,
                                      dO + at, dq + at, dk + at, dv + at);
    else
      dt_attn_block_backward(q + at, k + at, v + at, dO + at, delta + b * S * s->heads,
                             saved + b * S * s->heads, S, S, Ws, s->heads, 1, dq + at, dk + at,
                             dv + at);
  }
  const float *d3[3] = {dq, dk, dv}, *w3[3] = {w->wq, w->wk, w->wv};
  float *g3[3] = {g->wq, g->wk, g->wv};
  for (int i = 0; i < 3; i++) {
    dt_matmul(1, 0, D, Ws, R, h, d3[i], g3[i], 1);      /* dW += h^T d */
    dt_matmul(0, 1, R, D, Ws, d3[i], w3[i], dh, i > 0); /* dh (+)= d W^T */
  }
}

void dt_gpt_attn_forward(const dt_gpt_shape *s, const dt_gpt_block *w, const float *h, float *qkv,
                         float *o, float *lse, const float *x, float *out) {
  attention(s, w, h, qkv, o, lse, NULL, x, out);
}

void dt_gpt_attn_backward(const dt_gpt_shape *s, const dt_gpt_block *w, dt_gpt_block *g,
                          const float *h, const float *qkv, const float *o, const float *lse,
                          const float *dout, float *scratch, float *dh) {
  attention_backward(s, w, g, h, qkv, o, lse, NULL, dout, scratch, dh);
}

void dt_gpt_mlp_forward(const dt_gpt_shape *s, const dt_gpt_block *w, const float *h, float *a,
                        float *u, const float *x, float *out) {
  int64_t R = s->seqs * s->S;
  dt_matmul(0, 0, R, s->Hs, s->D, h, w->w1, a, 0); /* a = h W1 */
  dt_gelu_forward(a, u, (size_t)(R * s->Hs));
  project_out(u, w->w2, R, s->Hs, s->D, x, out);
}

void dt_gpt_mlp_backward(const dt_gpt_shape *s, const dt_gpt_block *w, dt_gpt_block *g,
                         const float *h, const float *a, const float *u, const float *dout,
                         float *du, float *dh) {
  int64_t R = s->seqs * s->S, D = s->D, Hs = s->Hs;
  dt_matmul(1, 0, Hs, D, R, u, dout, g->w2, 1);  /* dW2 += u^T dout */
  dt_matmul(0, 1, R, Hs, D, dout, w->w2, du, 0); /* du = dout W2^T */
  dt_gelu_backward(a, du, du, (size_t)(R * Hs)); /* da = du gelu'(a), in place */
  dt_matmul(1, 0, D, Hs, R, h, du, g->w1, 1);    /* dW1 += h^T da */
  dt_matmul(0, 1, R, D, Hs, du, w->w1, dh, 0);   /* dh = da W1^T */
}

void dt_gpt_split_windows(const int32_t *windows, int64_t seqs, int64_t S, int32_t *inputs,
                          int32_t *targets) {
  for (int64_t b = 0; b < seqs; b++) {
    memcpy(inputs + b * S, windows + b * (S + 1), (size_t)S * sizeof *inputs);
    memcpy(targets + b * S, windows + b * (S + 1) + 1, (size_t)S * sizeof *targets);
  }
}

/* ------------------------------------------------------- the whole model */
/* Per layer l (of L), rows R = seqs x S at most: */
enum {
  X,     /* its input [R, D]; X of layer L is the last block's output */
  H1,    /* LN1(x) [R, D] */
  MEAN1, /* [R], and RSTD1 */
  RSTD1,
  QKV,   /* [3][R, D] */
  O,     /* [R, D] */
  SAVED, /* lse [R, A], or the probabilities [seqs][A][S, S] */
  X2,    /* x + Attn [R, D] */
  H2,    /* LN2(x2) */
  MEAN2,
  RSTD2,
  A, /* h2 W1 [R, H] */
  U, /* gelu(a) */
  KINDS
};
struct dt_gpt_acts { /* all on the backend's memory, under DT_OTHER: not a lesson's */
  int64_t seqs, S, len;
  int materialised;
  dt_heads_scratch mat;
  float *layer[KINDS]; /* L (X: L + 1) of each, `size` floats apart */
  int64_t size[KINDS];
  float *hf, *meanf, *rstdf, *logits, *pieces; /* LN_f, the logits [R, V], mx/sum/tl [3][R] */
  int32_t *inputs, *targets;                   /* [R] of the last forward, copied in */
  float *dx, *dh, *du, *scratch, *dlogits;     /* backward's */
};

/* The whole model's buffers are the yardstick's and evaluation's, not a
 * lesson's: DT_OTHER keeps them out of the lessons' memory tables */
static float *other(int64_t n) { return dt_alloc_f32((size_t)n, DT_OTHER); }

dt_gpt_acts *dt_gpt_acts_new(const dt_train_config *c, int64_t seqs, int materialised) {
  int64_t L = c->layers, D = c->dim, H = c->hidden, S = c->seq, A = c->heads, R = seqs * S;
  dt_gpt_acts *a = dt_host_alloc(1, sizeof *a); /* the struct itself: host */
  int64_t saved = materialised ? seqs * A * S * S : R * A;
  int64_t size[KINDS] = {R * D, R * D, R, R, 3 * R * D, R * D, saved,
                         R * D, R * D, R, R, R * H,     R * H};
  *a = (dt_gpt_acts){.seqs = seqs, .S = S, .materialised = materialised};
  for (int k = 0; k < KINDS; k++) {
    a->size[k] = size[k];
    a->layer[k] = other((L + (k == X)) * size[k]);
  }
  if (materialised) dt_heads_scratch_init(&a->mat, S, D, A);
  a->hf = other(R * D + 2 * R);
  a->meanf = a->hf + R * D;
  a->rstdf = a->meanf + R;
  a->logits = other(2 * R * c->vocab + 3 * R);
  a->dlogits = a->logits + R * c->vocab;
  a->pieces = a->dlogits + R * c->vocab;
  a->inputs = dt_alloc((size_t)(2 * R) * sizeof *a->inputs, DT_OTHER);
  a->targets = a->inputs + R;
  a->dx = other(2 * R * D + R * H + 4 * R * D + R * A);
  a->dh = a->dx + R * D;
  a->du = a->dh + R * D;
  a->scratch = a->du + R * H;
  return a;
}

void dt_gpt_acts_free(dt_gpt_acts *a) {
  if (!a) return;
  for (int k = 0; k < KINDS; k++) dt_free(a->layer[k]);
  if (a->materialised) dt_heads_scratch_free(&a->mat);
  void *bufs[] = {a->hf, a->logits, a->inputs, a->dx};
  for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) dt_free(bufs[i]);
  free(a);
}

const float *dt_gpt_logits(const dt_gpt_acts *a) { return a->logits; }

static float *act(const dt_gpt_acts *a, int kind, int64_t l) {
  return a->layer[kind] + l * a->size[kind];
}

static dt_gpt_shape shape_of(const dt_train_config *c, const dt_gpt_acts *a) {
  return (dt_gpt_shape){a->seqs, a->len, c->dim, c->heads, c->dim / c->heads, c->hidden};
}

double dt_gpt_forward(const dt_train_config *c, const float *w, const int32_t *inputs,
                      const int32_t *targets, int64_t len, dt_gpt_acts *a) {
  int64_t D = c->dim, V = c->vocab, R = a->seqs * len;
  float *model = (float *)w; /* dt_gpt_block's pointers: read only here */
  a->len = len;
  a->mat.S = len; /* the materialised scratch holds S x S; len <= S */
  dt_gpt_shape s = shape_of(c, a);
  /* the tokens, made on the host, to the backend: the lookup's and the
   * loss's kernels read them there, and backward's lookup after */
  dt_copy_from_host(a->inputs, inputs, (size_t)R * sizeof *inputs);
  if (targets) dt_copy_from_host(a->targets, targets, (size_t)R * sizeof *targets);
  dt_embed_forward(a->inputs, R, w, 0, V, D, act(a, X, 0));
  dt_positions_forward(w + dt_model_tensor(c, 1).at, 0, len, a->seqs, D, act(a, X, 0));
  for (int64_t l = 0; l < c->layers; l++) {
    dt_gpt_block b = dt_gpt_block_at(c, model, l);
    dt_layernorm_forward(act(a, X, l), b.ln1, act(a, H1, l), act(a, MEAN1, l), act(a, RSTD1, l), R,
                         D);
    attention(&s, &b, act(a, H1, l), act(a, QKV, l), act(a, O, l), act(a, SAVED, l),
              a->materialised ? &a->mat : NULL, act(a, X, l), act(a, X2, l));
    dt_layernorm_forward(act(a, X2, l), b.ln2, act(a, H2, l), act(a, MEAN2, l), act(a, RSTD2, l), R,
                         D);
    dt_gpt_mlp_forward(&s, &b, act(a, H2, l), act(a, A, l), act(a, U, l), act(a, X2, l),
                       act(a, X, l + 1));
  }
  const float *lnf = w + dt_model_tensor(c, dt_gpt_tensor(c->layers, 0)).at;
  dt_layernorm_forward(act(a, X, c->layers), lnf, a->hf, a->meanf, a->rstdf, R, D);
  dt_matmul(0, 1, R, V, D, a->hf, w, a->logits, 0); /* the head: wte, tied */
  if (!targets) return 0;
  ce_pieces(a->logits, R, V, 0, a->targets, a->pieces, a->pieces + R, a->pieces + 2 * R);
  return dt_ce_loss(a->pieces, a->pieces + R, a->pieces + 2 * R, R) / (double)R;
}

void dt_gpt_backward(const dt_train_config *c, const float *w, dt_gpt_acts *a, double scale,
                     float *g) {
  int64_t D = c->dim, V = c->vocab, R = a->seqs * a->len;
  dt_gpt_shape s = shape_of(c, a);
  float *model = (float *)w, *dx = a->dx, *dh = a->dh;
  dt_ce_backward(a->logits, R, V, 0, a->targets, a->pieces, a->pieces + R,
                 (float)(scale / (double)R), a->dlogits);
  dt_matmul(1, 0, V, D, R, a->dlogits, a->hf, g, 1); /* dwte += dlogits^T hf */
  dt_matmul(0, 0, R, D, V, a->dlogits, w, dh, 0);    /* dhf = dlogits wte */
  int64_t lnf = dt_model_tensor(c, dt_gpt_tensor(c->layers, 0)).at;
  dt_layernorm_backward(act(a, X, c->layers), w + lnf, dh, a->meanf, a->rstdf, dx, g + lnf, R, D,
                        0);
  for (int64_t l = c->layers - 1; l >= 0; l--) { /* dx: the gradient of the block's output */
    dt_gpt_block b = dt_gpt_block_at(c, model, l), gb = dt_gpt_block_at(c, g, l);
    dt_gpt_mlp_backward(&s, &b, &gb, act(a, H2, l), act(a, A, l), act(a, U, l), dx, a->du, dh);
    dt_layernorm_backward(act(a, X2, l), b.ln2, dh, act(a, MEAN2, l), act(a, RSTD2, l), dx, gb.ln2,
                          R, D, 1);
    attention_backward(&s, &b, &gb, act(a, H1, l), act(a, QKV, l), act(a, O, l), act(a, SAVED, l),
                       a->materialised ? &a->mat : NULL, dx, a->scratch, dh);
    dt_layernorm_backward(act(a, X, l), b.ln1, dh, act(a, MEAN1, l), act(a, RSTD1, l), dx, gb.ln1,
                          R, D, 1);
  }
  dt_embed_backward(a->inputs, R, dx, 0, V, D, g);
  dt_positions_backward(dx, 0, a->len, a->seqs, D, g + dt_model_tensor(c, 1).at);
}

/* ---------------------------------------------------- evaluation, sampling */
int dt_gpt_eval_due(const dt_train_config *c, int64_t step) {
  return c->eval_every > 0 && ((step + 1) % c->eval_every == 0 || step == c->steps - 1);
}

/* The whole model, gathered on the host (dt_run_gather), to the backend's
 * memory where the forward's kernels read it: once an evaluation or a
 * sample, not once a batch or a token */
static float *model_in(const dt_train_config *c, const float *host) {
  size_t n = (size_t)dt_model_size(c);
  float *w = other((int64_t)n);
  dt_copy_from_host(w, host, n * 4);
  return w;
}

void dt_gpt_evaluate(const dt_train_config *c, const float *host, double loss[2]) {
  int64_t B = c->batch, S = c->seq;
  float *w = model_in(c, host);
  dt_gpt_acts *a = dt_gpt_acts_new(c, B, 0);
  int32_t *win = dt_host_alloc((size_t)(B * (S + 1) + 2 * B * S), sizeof *win);
  int32_t *in = win + B * (S + 1), *tg = in + B * S;
  for (int split = 0; split < 2; split++) {
    double sum = 0;
    for (int64_t j = 0; j < c->eval_batches; j++) {
      dt_text_eval_batch(c, split, j, win);
      dt_gpt_split_windows(win, B, S, in, tg);
      sum += dt_gpt_forward(c, w, in, tg, S, a);
    }
    loss[split] = sum / (double)c->eval_batches;
  }
  free(win);
  dt_gpt_acts_free(a);
  dt_free(w);
}

static int descending(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x < y) - (x > y);
}

/* One token from the logits of a position: the padding never, the top k
 * (ties with the k-th kept, as nanoGPT's), softmax at the temperature,
 * drawn by u in [0, 1); temperature 0: the argmax, no draw. */
static int32_t draw(const float *logits, const dt_vocab *v, double temperature, int64_t top_k,
                    double u, double *p) {
  int64_t n = v->used;
  if (temperature == 0) { /* greedy: the likeliest token (the first of ties) */
    int64_t best = 0;
    for (int64_t j = 1; j < n; j++) best = logits[j] > logits[best] ? j : best;
    return (int32_t)best;
  }
  double kth = -INFINITY;
  if (top_k > 0 && top_k < n) { /* the k-th largest: sorted copy */
    for (int64_t j = 0; j < n; j++) p[j] = logits[j];
    qsort(p, (size_t)n, sizeof *p, descending);
    kth = p[top_k - 1];
  }
  double mx = -INFINITY, sum = 0;
  for (int64_t j = 0; j < n; j++) mx = logits[j] >= kth && logits[j] > mx ? logits[j] : mx;
  for (int64_t j = 0; j < n; j++)
    sum += p[j] = logits[j] >= kth ? exp(((double)logits[j] - mx) / temperature) : 0;
  int64_t j = 0;
  for (double at = u * sum; j < n - 1 && (at -= p[j]) >= 0; j++) continue;
  while (p[j] == 0 && j > 0) j--; /* rounding past the end: the last drawable */
  return (int32_t)j;
}

char *dt_gpt_sample(const dt_train_config *c, const dt_vocab *vocab, const float *host,
                    const char *prompt, int64_t n, double temperature, int64_t top_k,
                    uint64_t seed) {
  int64_t S = c->seq, have = (int64_t)strlen(prompt), V = c->vocab;
  int32_t *ids = dt_host_alloc((size_t)(have + n + 1), sizeof *ids);
  char err[160];
  int64_t k = dt_tokens_encode(vocab, prompt, ids, have + 1, err, sizeof err);
  if (k < 0) dt_fail("--prompt: %s", err);
  if (k == 0) ids[k++] = 0; /* nothing to continue: the vocabulary's first token */
  float *w = model_in(c, host);
  dt_gpt_acts *a = dt_gpt_acts_new(c, 1, 0);
  double *p = dt_host_alloc((size_t)V, sizeof *p);
  float *last = dt_host_alloc((size_t)V, sizeof *last);
  for (int64_t i = 0; i < n; i++, k++) {
    int64_t len = k < S ? k : S; /* the context: the last S tokens at most */
    dt_gpt_forward(c, w, ids + k - len, NULL, len, a);
    /* the last position's logits to the host: the draw is a host loop
     * (a sort for top k, one uniform number), and its token is the next
     * forward's input, made on the host: one row of V floats a token */
    dt_copy_to_host(last, dt_gpt_logits(a) + (len - 1) * V, (size_t)V * sizeof *last);
    double u = (double)(dt_rng_u64(seed, 0, (uint64_t)i) >> 11) * (1.0 / 9007199254740992.0);
    ids[k] = draw(last, vocab, temperature, top_k, u, p);
  }
  char *text = dt_tokens_decode(vocab, ids, k);
  free(last);
  dt_free(w);
  free(p);
  free(ids);
  dt_gpt_acts_free(a);
  return text;
}
