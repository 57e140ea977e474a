/* buffers.c: where things sit. This rank's weights in one buffer, by class
 * (SHARDS, VOCAB, REPLICAS: who else holds the same elements), each class a
 * segment of the run placed in the whole model; what a stage keeps per
 * microbatch in flight (a slot of 09's stashes), backward's scratch, the
 * step's tokens, their bytes formulas.c's. */
#include <stdlib.h>

#include "gpt.h"

static float *alloc(int64_t n, dt_tag tag) { return n ? dt_alloc_f32((size_t)n, tag) : NULL; }

/* Tensor n of the class: its index in the model, whether tp splits its rows */
static int tensor_is(int64_t *t, int *by_rows, int n, int64_t index, int rows) {
  t[n] = index;
  by_rows[n] = rows;
  return n + 1;
}

/* The tensors of class k in their order in the buffer: each tensor's index
 * in the whole model and whether its shard is by rows (tp's) or whole. */
static int tensors_of(const model *m, const dt_train_config *c, int k, int64_t *t, int *by_rows) {
  static const int shards[] = {DT_GPT_WQ, DT_GPT_WK, DT_GPT_WV, DT_GPT_WO, DT_GPT_W1, DT_GPT_W2};
  int n = 0;
  for (int64_t l = 0; k == SHARDS && l < m->L; l++)
    for (int i = 0; i < 6; i++) { /* Wo and W2 split by rows, the others by columns */
      int j = shards[i];
      n = tensor_is(t, by_rows, n, dt_gpt_tensor(m->l0 + l, j), j == DT_GPT_WO || j == DT_GPT_W2);
    }
  if (k == VOCAB && (m->first || m->last)) n = tensor_is(t, by_rows, n, DT_GPT_WTE, 1); /* rows */
  for (int64_t l = 0; k == REPLICAS && l < m->L; l++) {
    n = tensor_is(t, by_rows, n, dt_gpt_tensor(m->l0 + l, DT_GPT_LN1), 0);
    n = tensor_is(t, by_rows, n, dt_gpt_tensor(m->l0 + l, DT_GPT_LN2), 0);
  }
  if (k == REPLICAS && m->last)
    n = tensor_is(t, by_rows, n, dt_gpt_tensor(c->layers, 0), 0); /* ln_f */
  if (k == REPLICAS && m->first) n = tensor_is(t, by_rows, n, DT_GPT_WPE, 0);
  return n;
}

/* Each class a segment of the run, [lo, hi) of it with --zero 1 (the dp x
 * cp shard this rank steps), its tensors placed in the whole model (07's
 * tp_place_shard; whole tensors as one shard of one). A copy counts once:
 * the tp replicas on tp rank 0, the last stage's wte on the first stage,
 * and without --zero 1 every replica over dp x cp on dc rank 0. */
static void place(model *m, dt_run *r, int64_t lo, int64_t hi) {
  int64_t most = DT_GPT_PER_LAYER * m->L + 2, *t = dt_host_alloc((size_t)most, sizeof *t);
  int *by_rows = dt_host_alloc((size_t)most, sizeof *by_rows);
  for (int k = 0; k < CLASSES; k++) {
    int64_t s = m->at_of[k] > lo ? m->at_of[k] : lo,
            e = m->at_of[k + 1] < hi ? m->at_of[k + 1] : hi;
    if (s >= e) continue;
    int seg = dt_run_segment(r, m->w + s, m->g + s, (size_t)(e - s));
    r->seg[seg].copy = (!m->zero && m->dc->rank != 0) || (k == VOCAB && !m->first) ||
                       (k == REPLICAS && m->at[TP] != 0);
    int64_t i0 = m->at_of[k];
    for (int i = 0, nt = tensors_of(m, &r->c, k, t, by_rows); i < nt; i++) {
      dt_tensor x = dt_model_tensor(&r->c, t[i]);
      int sharded = k != REPLICAS;
      i0 += tp_place_shard(r, seg, 0, &x, by_rows[i], sharded ? (int)m->at[TP] : 0,
                           sharded ? (int)m->n[TP] : 1, s - i0, e - i0);
    }
  }
  free(t);
  free(by_rows);
}

static void sizes(model *m, const dt_train_config *c) {
  int64_t T = m->n[TP];
  m->D = c->dim;
  m->H = c->hidden;
  m->A = c->heads / T;
  m->W = m->D / T;
  m->Hs = m->H / T;
  m->S = c->seq;
  m->V = c->vocab;
  m->Vs = m->V / T;
  m->v0 = m->at[TP] * m->Vs;
  m->Bm = c->batch / (m->n[DP] * m->M);
  m->nl = 4 * m->D * m->W + 2 * m->D * m->Hs;
  int64_t ends = m->first || m->last;
  m->at_of[SHARDS] = 0;
  m->at_of[VOCAB] = m->L * m->nl;
  m->at_of[REPLICAS] = m->at_of[VOCAB] + ends * m->Vs * m->D;
  m->at_of[CLASSES] = m->at_of[REPLICAS] + (2 * m->L + m->last) * m->D + m->first * m->S * m->D;
  m->nw = m->at_of[CLASSES];
}

gpt_share gpt_share_here(const model *m, const dt_run *r) {
  int64_t lo = 0, hi = m->nw;
  if (m->zero) fsdp_range(&m->f, &lo, &hi);
  return (gpt_share){.n = m->n,
                     .s = m->at[PP],
                     .L = m->L,
                     .M = m->M,
                     .R = m->R,
                     .Rs = m->Rs,
                     .D = m->D,
                     .W = m->W,
                     .A = m->A,
                     .Hs = m->Hs,
                     .C = m->cr.C,
                     .Vs = m->Vs,
                     .S = m->S,
                     .nw = m->nw,
                     .shard = m->zero ? m->f.S : 0,
                     .own = hi - lo,
                     .first = m->first,
                     .last = m->last,
                     .gpipe = m->gpipe,
                     .adamw = r->c.optimizer[0] == 'a',
                     .sp = m->sp,
                     .recompute = m->recompute,
                     .wire16 = m->wire.type != DT_F32};
}

void gpt_buffers(model *m, dt_run *r) {
  const dt_train_config *c = &r->c;
  sizes(m, c);
  int64_t lo = 0, hi = m->nw, T = m->n[TP];
  if (m->zero) {
    fsdp_init(&m->f, m->dc, c, 1, m->nw, 1, 0); /* 06's ZeRO-1: the buffer one layer */
    fsdp_range(&m->f, &lo, &hi);
    m->w = m->f.w;
    m->g = m->f.g;
  } else {
    m->w = alloc(m->nw, DT_PARAMS);
    m->g = alloc(m->nw, DT_GRADS);
  }
  place(m, r, lo, hi);
  cp_attn_init(&m->cr, m->axis[CP], c, m->zigzag, m->Bm, m->W, m->A, 1);
  int64_t R = m->cr.R, D = m->D;
  m->R = R;
  m->Rs = m->sp ? R / T : R;
  m->mine = m->sp ? m->at[TP] * m->Rs : 0;
  int64_t Rs = m->Rs;
  gpt_share x = gpt_share_here(m, r); /* a slot's floats as formulas.c counts them */
  m->per_layer = gpt_per_layer(&x);
  m->out = m->L * (m->recompute ? Rs * D : m->per_layer);
  stash_slots(&m->st, m->M, (size_t)gpt_slot(&x));
  m->layer = m->recompute ? alloc(m->per_layer - Rs * D, DT_ACTIV) : NULL;
  m->dx = alloc(Rs * D, DT_ACTIV);
  m->dnext = alloc(Rs * D, DT_ACTIV);
  m->dn = m->sp ? alloc(Rs * D, DT_ACTIV) : NULL;
  m->full = m->sp ? alloc(R * D, DT_ACTIV) : NULL;
  m->dfull = m->sp ? alloc(R * D, DT_ACTIV) : NULL;
  m->dh = alloc(R * D, DT_ACTIV);
  m->du = alloc(R * m->Hs, DT_ACTIV);
  m->dout = alloc(R * m->W, DT_ACTIV);
  m->dqkv = alloc(3 * R * m->W, DT_ACTIV);
  m->dlogits = m->last ? alloc(R * m->Vs, DT_ACTIV) : NULL;
  m->tokens = m->first ? dt_alloc((size_t)(m->M * R) * 4, DT_DATA) : NULL;
  m->targets = m->last ? dt_alloc((size_t)(m->M * R) * 4, DT_DATA) : NULL;
  /* host: the windows, and the step's tokens and targets made from them
   * before one copy each to the backend (text.c reads the text there) */
  m->windows = dt_host_alloc((size_t)(m->Bm * (m->S + 1) + 2 * m->M * R), sizeof *m->windows);
}
