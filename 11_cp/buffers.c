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
  m->N = m->world->size;
  m->rank = m->world->rank;
  m->nc = m->zigzag ? 2 : 1;
  m->C = c->seq / (m->nc * m->N);
  m->Sl = m->nc * m->C;
  m->R = m->B * m->Sl;
  int64_t L = m->L, R = m->R, D = m->D, H = m->H, A = m->A, C = m->C;
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
  size_t before = in_use(); /* attention's own: kept for backward, blocks, in flight */
  float **per[] = {&m->q, &m->k, &m->v, &m->o};
  for (int i = 0; i < 4; i++) *per[i] = alloc(L * R * D, DT_ACTIV);
  m->lse = alloc(L * R * A, DT_ACTIV);
  m->delta = alloc(R * A, DT_ACTIV);
  m->ob = alloc(C * D, DT_ACTIV);
  m->lseb = alloc(C * A, DT_ACTIV);
  for (int i = 0; i < 2 && !m->ulysses; i++) {
    m->ring[i] = alloc(2 * R * D, DT_COMMBUF);
    m->dkv[i] = alloc(2 * R * D, DT_COMMBUF);
  }
  if (m->ulysses) {
    m->heads = alloc(L * (4 * R * D + R * A) + 4 * R * D, DT_ACTIV);
    m->send = alloc(R * D, DT_COMMBUF);
    m->recv = alloc(R * D, DT_COMMBUF);
  }
  m->attn_bytes = in_use() - before;
  m->samples = dt_host_alloc((size_t)m->B, sizeof(int64_t));
  m->chunk = dt_host_alloc((size_t)(m->N * m->nc), sizeof(int64_t));
}
