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
  travel *t[2] = {&m->kv, &m->dkv};
  for (int i = 0; i < 2 && !m->ulysses; i++) {
    dt_wire_init(&t[i]->wire, c, (size_t)(4 * R * D)); /* 16 bits: as sent, as received */
    t[i]->n = (size_t)(2 * R * D);
    int fp32 = t[i]->wire.type == DT_F32; /* else the wire is the one in flight */
    for (int j = 0; j < 1 + fp32; j++) t[i]->f[j] = alloc(2 * R * D, fp32 ? DT_COMMBUF : DT_ACTIV);
  }
  if (m->ulysses) {
    m->heads = alloc(L * (4 * R * D + R * A) + 4 * R * D, DT_ACTIV);
    m->send = alloc(R * D, DT_COMMBUF);
    m->recv = alloc(R * D, DT_COMMBUF);
    dt_wire_init(&m->a2a, c, (size_t)(2 * R * D));
  }
  m->attn_bytes = in_use() - before;
  dt_wire_init(&m->grads, c, (size_t)(m->L * dt_params_per_layer(c)));
  m->samples = dt_host_alloc((size_t)m->B, sizeof(int64_t));
  m->chunk = dt_host_alloc((size_t)(m->N * m->nc), sizeof(int64_t));
}

float *cp_hop_start(travel *t) {
  t->cur = 0;
  return t->f[0];
}

dt_request *cp_hop_post(model *m, travel *t) {
  int next = (int)((m->rank + 1) % m->N), prev = (int)((m->rank + m->N - 1) % m->N);
  if (t->wire.type == DT_F32)
    return dt_sendrecv_async(m->world, t->f[t->cur], t->n, next, t->f[!t->cur], t->n, prev, DT_F32);
  return dt_sendrecv_async(m->world, dt_wire_pack(&t->wire, t->f[0], t->n, 0, 1), t->n, next,
                           t->wire.buf + t->n, t->n, prev, t->wire.type);
}

float *cp_hop_done(travel *t, dt_request *r) {
  dt_wait(r);
  if (t->wire.type == DT_F32)
    t->cur = !t->cur;
  else
    dt_wire_unpack(&t->wire, t->f[0], t->n, t->n);
  return t->f[t->cur];
}
