/* buffers.c: 10_ep's buffers, what each layer keeps from forward for
 * backward and the step's scratch; their bytes are report.c's formulas. */
#include "ep.h"

static void *alloc(int64_t n, size_t size, dt_tag tag) { return dt_alloc((size_t)n * size, tag); }

void ep_buffers(model *m, const dt_train_config *c) {
  int64_t L = m->L, D = m->D, H = m->H, E = m->E, N = m->N;
  int64_t R = m->R, k = m->k, M = m->M;
  m->x = alloc((L + 1) * R * D, 4, DT_ACTIV), m->y = alloc(R * D, 4, DT_DATA);
  m->dx = alloc(R * D, 4, DT_ACTIV), m->dnext = alloc(R * D, 4, DT_ACTIV);
  m->rt = dt_host_alloc((size_t)L, sizeof *m->rt);
  for (route *q = m->rt; q < m->rt + L; q++) {
    q->probs = alloc(R * E, 4, DT_ACTIV), q->gate = alloc(R * k, 4, DT_ACTIV);
    q->dgate = alloc(R * k, 4, DT_ACTIV), q->ret = alloc(R * k * D, 4, DT_ACTIV);
    q->choice = alloc(R * k, 4, DT_ACTIV), q->pos = alloc(R * k, 4, DT_ACTIV);
    q->xin = alloc(M * D, 4, DT_ACTIV), q->a = alloc(M * H, 4, DT_ACTIV);
    q->h = alloc(M * H, 4, DT_ACTIV);
    q->count = dt_host_alloc((size_t)E, 8), q->rcount = dt_host_alloc((size_t)E, 8);
    q->scount = dt_host_alloc((size_t)E, 8);
    q->rows = dt_host_alloc((size_t)E, 8);
    size_t **v[] = {&q->sc, &q->sd, &q->rc, &q->rd};
    for (int i = 0; i < 4; i++) *v[i] = dt_host_alloc((size_t)N, sizeof(size_t));
  }
  dt_wire_init(&m->ws, c, (size_t)((R * k > M ? R * k : M) * D));
  dt_wire_init(&m->wr, c, (size_t)((R * k > M ? R * k : M) * D));
  m->send = alloc(R * k * D, 4, DT_COMMBUF), m->recv = alloc(M * D, 4, DT_COMMBUF);
  m->xe = alloc(2 * M * D, 4, DT_COMMBUF), m->dh = alloc(N * m->C * H, 4, DT_ACTIV);
  m->dlogits = alloc(R * E, 4, DT_ACTIV);
  m->chosen = dt_host_alloc((size_t)(L * E), 4), m->daux = dt_host_alloc((size_t)(L * E), 4);
  m->samples = dt_host_alloc((size_t)R, sizeof(int64_t));
  m->kept = dt_host_alloc((size_t)E, 8);
  m->cn = dt_host_alloc((size_t)N, sizeof(size_t)),
  m->cd = dt_host_alloc((size_t)N, sizeof(size_t));
  for (int64_t d = 0; d < N; d++) m->cn[d] = (size_t)m->El, m->cd[d] = (size_t)(d * m->El);
}
