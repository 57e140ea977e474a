/* buffers.c: where things sit. A layer's weights on this rank, for the run
 * (its place in the whole model) and for the lesson (a view); what a stage
 * keeps per microbatch in flight (a slot of 09's stashes), backward's
 * scratch and the step's data, their bytes report.c's formulas; the views
 * of a layer's activations in a slot. */
#include "mesh.h"

static float *alloc(int64_t n, dt_tag tag) { return dt_alloc_f32((size_t)n, tag); }

/* floats of one layer in a slot: q, k, v, o, lse, u, x', a, h */
static int64_t per_layer(const model *m) {
  int64_t R = m->R;
  return 4 * R * m->W + R * m->A + 2 * R * m->D + 2 * R * m->Hs;
}

/* where layer l's output x' sits in a slot: after x_0, the layers before,
 * and its own q, k, v, o, lse, u */
static int64_t output_at(const model *m, int64_t l) {
  int64_t R = m->R;
  return R * m->D + l * per_layer(m) + 4 * R * m->W + R * m->A + R * m->D;
}

void mesh_buffers(model *m, const dt_train_config *c) {
  int64_t T = m->n[TP];
  m->D = c->dim;
  m->H = c->hidden;
  m->A = c->heads / T;
  m->W = m->D / T;
  m->Hs = m->H / T;
  m->Bm = c->batch / (m->n[DP] * m->M);
  cp_attn_init(&m->cr, m->axis[CP], c, m->zigzag, m->Bm, m->W, m->A, 1);
  m->R = m->cr.R;
  int64_t R = m->R, D = m->D, W = m->W;
  int64_t kept = m->zb * m->Lc * (2 * R * D + 3 * R * W); /* zb1: what B keeps for W (zb.c) */
  stash_slots(&m->st, m->M * m->V, (size_t)(R * D + m->Lc * per_layer(m) + kept)); /* x_0, ... */
  m->dx = alloc(R * D, DT_ACTIV);
  m->dnext = alloc(R * D, DT_ACTIV);
  m->dh = alloc(R * m->Hs, DT_ACTIV);
  m->dout = alloc(R * W, DT_ACTIV);
  m->dqkv = alloc(3 * R * W, DT_ACTIV);
  if (m->at[PP] == 0 || m->at[PP] == m->n[PP] - 1) { /* made where they are used */
    m->bx = alloc(m->M * R * D, DT_DATA);
    m->by = alloc(m->M * R * D, DT_DATA);
  }
  m->samples = dt_host_alloc((size_t)(c->batch / m->n[DP]), sizeof(int64_t));
  m->keys = dt_host_alloc((size_t)(m->M * R), sizeof(int64_t));
  int travels = m->n[TP] > 1 || m->n[PP] > 1; /* tp's sums, pp's sendrecvs: out, then in */
  dt_wire_init(&m->wire, c, (size_t)(travels ? 2 * R * D : 0));
}

void mesh_place_layer(const model *m, dt_run *r, int seg, int64_t off, int64_t lg, int64_t lo,
                      int64_t hi) {
  static const int by_rows[6] = {0, 0, 0, 1, 0, 1}; /* Wo and W2 */
  int64_t base = 0;
  for (int j = 0; j < 6; j++) {
    dt_tensor x = dt_model_tensor(&r->c, 6 * lg + j);
    base += tp_place_shard(r, seg, off, &x, by_rows[j], (int)m->at[TP], (int)m->n[TP], lo - base,
                           hi - base);
  }
}

layer_weights mesh_weights(const model *m, float *w, int64_t l) {
  int64_t DW = m->D * m->W;
  float *at = w + l * m->ld;
  return (layer_weights){at,          at + DW,     at + 2 * DW,
                         at + 3 * DW, at + 4 * DW, at + 4 * DW + m->D * m->Hs};
}

layer_acts mesh_acts(const model *m, float *slot, int64_t l) {
  int64_t R = m->R, RD = R * m->D, RW = R * m->W;
  float *at = slot + RD + l * per_layer(m);
  layer_acts p = {.q = at, .k = at + RW, .v = at + 2 * RW, .o = at + 3 * RW, .lse = at + 4 * RW};
  p.u = p.lse + R * m->A;
  p.a = p.u + 2 * RD; /* after u and x' */
  p.h = p.a + R * m->Hs;
  p.x = l == 0 ? slot : slot + output_at(m, l - 1); /* x_0, or the layer before's x' */
  return p;
}

/* 07's MLP pieces see u as their x_0 and x' as x_1, a one-layer dt_acts */
dt_acts mesh_mlp(const model *m, layer_acts p, int64_t l) {
  dt_rows rows = m->rows;
  rows.layer += l;
  return (dt_acts){.L = 1,
                   .R = m->R,
                   .D = m->D,
                   .Hs = m->Hs,
                   .x = p.u,
                   .a = p.a,
                   .h = p.h,
                   .dx = m->dx,
                   .dnext = m->dnext,
                   .dh = m->dh,
                   .rows = rows};
}

size_t mesh_out(const model *m) { return (size_t)output_at(m, m->Lc - 1); }

int64_t mesh_layer(const model *m, int64_t j) {
  return m->V == 1 ? m->l0 + j : (j / m->Lc * m->n[PP] + m->at[PP]) * m->Lc + j % m->Lc;
}
