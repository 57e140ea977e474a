/* buffers.c: 10_ep's buffers, what each layer keeps from forward for
 * backward and the step's scratch; their bytes are report.c's formulas. */
#include "ep.h"

static void *alloc(int64_t n, size_t size, dt_tag tag) { return dt_alloc((size_t)n * size, tag); }

void ep_buffers(model *m, const dt_train_config *c) {
  int64_t L = m->L, D = m->D, H = m->H, E = m->E, N = m->N;
  int64_t R = m->R, k = m->k, M = m->M;
  int gpu = !dt_host_sees_device(); /* a GPU, or the cpu in its device-boundary mode */
  float **act[] = {&m->x, &m->dx, &m->dnext, &m->dh, &m->dlogits};
  int64_t act_n[] = {(L + 1) * R * D, R * D, R * D, N * m->C * H, R * E};
  for (int i = 0; i < 5; i++) *act[i] = alloc(act_n[i], 4, DT_ACTIV);
  m->y = alloc(R * D, 4, DT_DATA);
  m->rt = dt_host_alloc((size_t)L, sizeof *m->rt);
  for (route *q = m->rt; q < m->rt + L; q++) {
    float **f[] = {&q->probs, &q->gate, &q->dgate, &q->ret, &q->xin, &q->a, &q->h};
    int64_t f_n[] = {R * E, R * k, R * k, R * k * D, M * D, M * H, M * H};
    for (int i = 0; i < 7; i++) *f[i] = alloc(f_n[i], 4, DT_ACTIV);
    q->dchoice = alloc(R * k, 4, DT_ACTIV);
    q->dpos = alloc(R * k, 4, DT_ACTIV);
    /* the counts MPI sends are made on the host from them: on a GPU, copies */
    q->choice = gpu ? dt_host_alloc((size_t)(R * k), 4) : q->dchoice;
    q->pos = gpu ? dt_host_alloc((size_t)(R * k), 4) : q->dpos;
    int64_t **n[] = {&q->count, &q->scount, &q->rcount, &q->rows};
    for (int i = 0; i < 4; i++) *n[i] = dt_host_alloc((size_t)E, 8);
    size_t **v[] = {&q->sc, &q->sd, &q->rc, &q->rd};
    for (int i = 0; i < 4; i++) *v[i] = dt_host_alloc((size_t)N, sizeof(size_t));
  }
  dt_wire_init(&m->ws, c, (size_t)((R * k > M ? R * k : M) * D));
  dt_wire_init(&m->wr, c, (size_t)((R * k > M ? R * k : M) * D));
  m->send = alloc(R * k * D, 4, DT_COMMBUF);
  m->recv = alloc(M * D, 4, DT_COMMBUF);
  m->xe = alloc(2 * M * D, 4, DT_COMMBUF);
  m->chosen = dt_host_alloc((size_t)(L * E), 4);
  m->dchosen = gpu ? alloc(L * E, 4, DT_OTHER) : m->chosen;
  m->daux = gpu ? alloc(L * E, 4, DT_OTHER) : dt_host_alloc((size_t)(L * E), 4);
  m->dcount = gpu ? alloc(2 * E, 8, DT_OTHER) : NULL;
  m->samples = dt_host_alloc((size_t)R, sizeof(int64_t));
  m->kept = dt_host_alloc((size_t)E, 8);
  m->cn = dt_host_alloc((size_t)N, sizeof(size_t));
  m->cd = dt_host_alloc((size_t)N, sizeof(size_t));
  for (int64_t d = 0; d < N; d++) {
    m->cn[d] = (size_t)m->El;
    m->cd[d] = (size_t)(d * m->El);
  }
}
