/* buffers.c: what a stage keeps per microbatch in flight (a slot of 09's
 * stashes), backward's scratch and the step's data; their bytes are
 * report.c's formulas. */
#include "mesh.h"

static float *alloc(int64_t n, dt_tag tag) { return dt_alloc_f32((size_t)n, tag); }

/* floats of one layer in a slot: q, k, v, o, lse, u, x', a, h */
static int64_t per_layer(const mesh *m) {
  int64_t R = m->R;
  return 4 * R * m->W + R * m->A + 2 * R * m->D + 2 * R * m->Hs;
}

void mesh_buffers(mesh *m, const dt_train_config *c) {
  int64_t T = m->n[TP];
  m->D = c->dim;
  m->H = c->hidden;
  m->A = c->heads / T;
  m->W = m->D / T;
  m->Hs = m->H / T;
  m->Bm = c->batch / (m->n[DP] * m->M);
  size_t before = dt_mem_current(DT_ACTIV);
  cp_attn_init(&m->cr, m->axis[CP], c, m->zigzag, m->Bm, m->W, m->A, 1);
  m->R = m->cr.R;
  int64_t R = m->R, D = m->D, W = m->W;
  stash_slots(&m->st, m->M, (size_t)(R * D + m->L * per_layer(m))); /* x_0, then the layers */
  m->slot_bytes = m->st.floats * 4;
  m->dx = alloc(R * D, DT_ACTIV);
  m->dnext = alloc(R * D, DT_ACTIV);
  m->dh = alloc(R * m->Hs, DT_ACTIV);
  m->dout = alloc(R * W, DT_ACTIV);
  m->dqkv = alloc(3 * R * W, DT_ACTIV);
  m->scratch_bytes = dt_mem_current(DT_ACTIV) - before;
  if (m->at[PP] == 0 || m->at[PP] == m->n[PP] - 1) { /* made where they are used */
    m->bx = alloc(m->M * R * D, DT_DATA);
    m->by = alloc(m->M * R * D, DT_DATA);
  }
  m->samples = dt_host_alloc((size_t)(c->batch / m->n[DP]), sizeof(int64_t));
  m->keys = dt_host_alloc((size_t)(m->M * R), sizeof(int64_t));
  dt_wire_init(&m->wire, c, (size_t)(2 * R * D));
}

layer_acts mesh_acts(const mesh *m, float *slot, int64_t l) {
  int64_t R = m->R, RD = R * m->D, RW = R * m->W;
  float *at = slot + RD + l * per_layer(m);
  layer_acts p = {.q = at, .k = at + RW, .v = at + 2 * RW, .o = at + 3 * RW, .lse = at + 4 * RW};
  p.u = p.lse + R * m->A;
  p.a = p.u + 2 * RD; /* after u and x' */
  p.h = p.a + R * m->Hs;
  p.x = l == 0 ? slot : at - per_layer(m) + 4 * RW + R * m->A + RD; /* the last layer's x' */
  return p;
}

float *mesh_out(const mesh *m, float *slot) { return mesh_acts(m, slot, m->L - 1).u + m->R * m->D; }
