/* buffers.c: where things sit. This rank's weights in one buffer, by class
 * (SHARDS, VOCAB, REPLICAS: who else holds the same elements), each class a
 * segment of the run placed in the whole model; what a stage keeps per
 * microbatch in flight (a slot of 09's stashes), backward's scratch, the
 * step's tokens, their bytes formulas.c's. */
#include <stdlib.h>

#include "state.h"

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
  for (int64_t l = 0; k == SHARDS && l < m->weights.L; l++)
    for (int i = 0; i < 6; i++) { /* Wo and W2 split by rows, the others by columns */
      int j = shards[i];
      n = tensor_is(t, by_rows, n, dt_gpt_tensor(gpt_layer(m, l), j),
                    j == DT_GPT_WO || j == DT_GPT_W2);
    }
  if (k == VOCAB && (m->mesh.first || m->mesh.last))
    n = tensor_is(t, by_rows, n, DT_GPT_WTE, 1); /* rows */
  for (int64_t l = 0; k == REPLICAS && l < m->weights.L; l++) {
    n = tensor_is(t, by_rows, n, dt_gpt_tensor(gpt_layer(m, l), DT_GPT_LN1), 0);
    n = tensor_is(t, by_rows, n, dt_gpt_tensor(gpt_layer(m, l), DT_GPT_LN2), 0);
  }
  if (k == REPLICAS && m->mesh.last)
    n = tensor_is(t, by_rows, n, dt_gpt_tensor(c->layers, 0), 0); /* ln_f */
  if (k == REPLICAS && m->mesh.first) n = tensor_is(t, by_rows, n, DT_GPT_WPE, 0);
  return n;
}

/* Each class a segment of the run, [lo, hi) of it with --zero 1 (the dp x
 * cp shard this rank steps), its tensors placed in the whole model (07's
 * tp_place_shard; whole tensors as one shard of one). A copy counts once:
 * the tp replicas on tp rank 0, the last stage's wte on the first stage,
 * and without --zero 1 every replica over dp x cp on dc rank 0. */
static void place(model *m, dt_run *r, int64_t lo, int64_t hi) {
  int64_t most = DT_GPT_PER_LAYER * m->weights.L + 2, *t = dt_host_alloc((size_t)most, sizeof *t);
  int *by_rows = dt_host_alloc((size_t)most, sizeof *by_rows);
  for (int k = 0; k < CLASSES; k++) {
    int64_t s = m->weights.at_of[k] > lo ? m->weights.at_of[k] : lo,
            e = m->weights.at_of[k + 1] < hi ? m->weights.at_of[k + 1] : hi;
    if (s >= e) continue;
    int seg = dt_run_segment(r, m->weights.w + s, m->weights.g + s, (size_t)(e - s));
    r->seg[seg].copy = (!m->weights.zero && m->mesh.dc->rank != 0) ||
                       (k == VOCAB && !m->mesh.first) || (k == REPLICAS && m->mesh.at[TP] != 0);
    int64_t i0 = m->weights.at_of[k];
    for (int i = 0, nt = tensors_of(m, &r->c, k, t, by_rows); i < nt; i++) {
      dt_tensor x = dt_model_tensor(&r->c, t[i]);
      int sharded = k != REPLICAS;
      i0 += tp_place_shard(r, seg, 0, &x, by_rows[i], sharded ? (int)m->mesh.at[TP] : 0,
                           sharded ? (int)m->mesh.n[TP] : 1, s - i0, e - i0);
    }
  }
  free(t);
  free(by_rows);
}

/* the share's sizes (formulas.c's gpt_share_sized): R rows a microbatch
 * once 11's ring has cut them (0 before: the buffer's layout needs none) */
static gpt_sizes sizes_of(const model *m, const dt_train_config *c, int64_t R) {
  return (gpt_sizes){.n = m->mesh.n,
                     .s = m->mesh.at[PP],
                     .L = m->weights.L,
                     .M = m->step.M,
                     .R = R,
                     .C = R ? m->step.cr.C : 0,
                     .D = c->dim,
                     .H = c->hidden,
                     .heads = c->heads,
                     .V = c->vocab,
                     .S = c->seq,
                     .dc = m->mesh.dc->rank,
                     .zero = m->weights.zero,
                     .sp = m->step.sp};
}

static void sizes(model *m, const dt_train_config *c) {
  gpt_sizes z = sizes_of(m, c, 0);
  gpt_share x = gpt_share_sized(&z);
  m->weights.D = x.D;
  m->weights.H = c->hidden;
  m->weights.A = x.A;
  m->weights.W = x.W;
  m->weights.Hs = x.Hs;
  m->weights.S = x.S;
  m->weights.V = c->vocab;
  m->weights.Vs = x.Vs;
  m->weights.v0 = m->mesh.at[TP] * x.Vs;
  m->step.Bm = c->batch / (m->mesh.n[DP] * m->step.M);
  m->weights.nl = 4 * x.D * x.W + 2 * x.D * x.Hs;
  gpt_classes(&x, m->weights.at_of); /* SHARDS, VOCAB, REPLICAS and the end */
  m->weights.nw = x.nw;
}

gpt_share gpt_share_here(const model *m, const dt_run *r) {
  gpt_sizes z = sizes_of(m, &r->c, m->step.R);
  gpt_share x = gpt_share_sized(&z);
  x.chunks = m->weights.chunks;
  x.zb = m->step.zb;
  x.gpipe = m->step.gpipe;
  x.adamw = r->c.optimizer[0] == 'a';
  x.recompute = m->step.recompute;
  x.wire16 = m->step.wire.type != DT_F32;
  return x;
}

void gpt_buffers(model *m, dt_run *r) {
  const dt_train_config *c = &r->c;
  sizes(m, c);
  int64_t lo = 0, hi = m->weights.nw, T = m->mesh.n[TP];
  if (m->weights.zero) {
    fsdp_init(&m->weights.f, m->mesh.dc, c, 1, m->weights.nw, 1,
              0); /* 06's ZeRO-1: the buffer one layer */
    fsdp_range(&m->weights.f, &lo, &hi);
    m->weights.w = m->weights.f.w;
    m->weights.g = m->weights.f.g;
  } else {
    m->weights.w = alloc(m->weights.nw, DT_PARAMS);
    m->weights.g = alloc(m->weights.nw, DT_GRADS);
  }
  place(m, r, lo, hi);
  cp_attn_init(&m->step.cr, m->mesh.axis[CP], c, m->step.zigzag, m->step.Bm, m->weights.W,
               m->weights.A, 1);
  int64_t R = m->step.cr.R, D = m->weights.D;
  m->step.R = R;
  m->step.Rs = m->step.sp ? R / T : R;
  m->step.mine = m->step.sp ? m->mesh.at[TP] * m->step.Rs : 0;
  int64_t Rs = m->step.Rs;
  gpt_share x = gpt_share_here(m, r); /* a slot's floats as formulas.c counts them */
  m->step.per_layer = gpt_per_layer(&x);
  m->step.out = m->weights.Lc * (m->step.recompute ? Rs * D : m->step.per_layer); /* a chunk's */
  stash_slots(&m->step.st, m->step.M * m->weights.chunks, (size_t)gpt_slot(&x));
  m->step.kept = gpt_slot(&x) - gpt_kept(&x); /* zb1's, after the rest */
  m->step.layer = m->step.recompute ? alloc(m->step.per_layer - Rs * D, DT_ACTIV) : NULL;
  m->step.dx = alloc(Rs * D, DT_ACTIV);
  m->step.dnext = alloc(Rs * D, DT_ACTIV);
  m->step.dn = m->step.sp ? alloc(Rs * D, DT_ACTIV) : NULL;
  m->step.full = m->step.sp ? alloc(R * D, DT_ACTIV) : NULL;
  m->step.dfull = m->step.sp ? alloc(R * D, DT_ACTIV) : NULL;
  m->step.dh = alloc(R * D, DT_ACTIV);
  m->step.du = alloc(R * m->weights.Hs, DT_ACTIV);
  m->step.dout = alloc(R * m->weights.W, DT_ACTIV);
  m->step.dqkv = alloc(3 * R * m->weights.W, DT_ACTIV);
  m->step.dlogits = m->mesh.last ? alloc(R * m->weights.Vs, DT_ACTIV) : NULL;
  m->step.tokens = m->mesh.first ? dt_alloc((size_t)(m->step.M * R) * 4, DT_DATA) : NULL;
  m->step.targets = m->mesh.last ? dt_alloc((size_t)(m->step.M * R) * 4, DT_DATA) : NULL;
  /* host: the windows, and the step's tokens and targets made from them
   * before one copy each to the backend (text.c reads the text there) */
  m->step.windows = dt_host_alloc((size_t)(m->step.Bm * (m->weights.S + 1) + 2 * m->step.M * R),
                                  sizeof *m->step.windows);
}
