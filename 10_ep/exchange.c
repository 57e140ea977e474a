/* exchange.c: 10_ep's all-to-all-v, the library's or by hand, each phase's
 * bytes counted on its own row.
 *
 * By hand, as mpitutorial writes a broadcast beside MPI_Bcast: in round i
 * (1 .. N-1) each rank sends to rank + i and receives from rank - i, so in
 * every round every rank sends once and receives once, and no two ranks
 * wait on each other; its own block is a copy. Bit for bit the library's
 * result: the rows are moved, never added. */
#include <string.h>

#include "ep.h"

void hand_all_to_allv(dt_comm *w, const void *send, const size_t *sc, const size_t *sd, void *recv,
                      const size_t *rc, const size_t *rd, dt_dtype t) {
  int N = w->size, me = w->rank;
  size_t es = dt_dtype_size(t);
  if (sc[me]) dt_copy((char *)recv + rd[me] * es, (const char *)send + sd[me] * es, sc[me] * es);
  for (int i = 1; i < N; i++) {
    int to = (me + i) % N, from = (me - i + N) % N;
    dt_sendrecv(w, (const char *)send + sd[to] * es, sc[to], to, (char *)recv + rd[from] * es,
                rc[from], from, t);
  }
}

void exchange(model *m, int p, const float *send, const size_t *sc, const size_t *sd, float *recv,
              const size_t *rc, const size_t *rd) {
  uint64_t before = dt_comm_total(m->world).bytes_sent;
  if (m->hand)
    hand_all_to_allv(m->world, send, sc, sd, recv, rc, rd, DT_F32);
  else
    dt_all_to_allv(m->world, send, sc, sd, recv, rc, rd, DT_F32);
  m->bytes[p] += dt_comm_total(m->world).bytes_sent - before;
}

/* E/N counts to each rank: how many of my tokens each of its experts gets.
 * Blocks of one size: the plain all-to-all (by hand, the same rounds). */
void exchange_counts(model *m, const int64_t *send, int64_t *recv) {
  uint64_t before = dt_comm_total(m->world).bytes_sent;
  if (m->hand)
    hand_all_to_allv(m->world, send, m->cn, m->cd, recv, m->cn, m->cd, DT_I64);
  else
    dt_all_to_all(m->world, send, recv, (size_t)m->El, DT_I64);
  m->bytes[COUNTS] += dt_comm_total(m->world).bytes_sent - before;
}
