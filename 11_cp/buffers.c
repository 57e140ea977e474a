/* buffers.c: 11_cp's buffers, what each layer keeps from forward for
 * backward and the step's scratch; their bytes are report.c's formulas. */
#include "cp.h"

static void *alloc(int64_t n, dt_tag tag) { return dt_alloc((size_t)n * 4, tag); }

static size_t in_use(void) { return dt_mem_current(DT_ACTIV) + dt_mem_current(DT_COMMBUF); }

void cp_buffers(model *m, const dt_train_config *c) {
  m->L = c->layers;
  m->D = c->dim;
  m->H = c->hidden;
  m->A = c->heads;
  m->S = c->seq;
  m->B = c->batch;
  size_t before = in_use(); /* attention's own: kept for backward, blocks, in flight */
  cp_attn_init(&m->cr, m->world, c, m->zigzag, m->B, m->D, m->A, !m->ulysses);
  size_t ring = in_use() - before;
  m->N = m->cr.N;
  m->rank = m->cr.rank;
  m->nc = m->cr.nc;
  m->C = m->cr.C;
  m->Sl = m->cr.Sl;
  m->R = m->cr.R;
  int64_t L = m->L, R = m->R, D = m->D, H = m->H, A = m->A;
  m->x = alloc((L + 1) * R * D, DT_ACTIV);
  m->y = alloc(R * D, DT_DATA);
  m->dx = alloc(R * D, DT_ACTIV);
  m->dnext = alloc(R * D, DT_ACTIV);
  m->u = alloc(L * R * D, DT_ACTIV);
  m->a = alloc(L * R * H, DT_ACTIV);
  m->h = alloc(L * R * H, DT_ACTIV);
  m->dh = alloc(R * H, DT_ACTIV);
  m->du = alloc(R * D, DT_ACTIV);
  m->dout = alloc(R * D, DT_ACTIV);
  m->dq = alloc(3 * R * D, DT_ACTIV);
  before = in_use();
  float **per[] = {&m->q, &m->k, &m->v, &m->o};
  for (int i = 0; i < 4; i++) *per[i] = alloc(L * R * D, DT_ACTIV);
  m->lse = alloc(L * R * A, DT_ACTIV);
  if (m->ulysses) {
    m->heads = alloc(L * (4 * R * D + R * A) + 4 * R * D, DT_ACTIV);
    m->send = alloc(R * D, DT_COMMBUF);
    m->recv = alloc(R * D, DT_COMMBUF);
    dt_wire_init(&m->a2a, c, (size_t)(2 * R * D));
  }
  m->attn_bytes = ring + in_use() - before;
  dt_wire_init(&m->grads, c, (size_t)(m->L * dt_params_per_layer(c)));
  m->samples = dt_host_alloc((size_t)m->B, sizeof(int64_t));
  m->keys = dt_host_alloc((size_t)m->R, sizeof(int64_t));
}
