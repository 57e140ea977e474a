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

/* elements [0, end) of a buffer hold all of its blocks */
static size_t span(const size_t *count, const size_t *at, int64_t N) {
  size_t end = 0;
  for (int64_t r = 0; r < N; r++) end = at[r] + count[r] > end ? at[r] + count[r] : end;
  return end;
}

/* In bf16 the rows travel as 16-bit copies (half the bytes); the experts'
 * matmuls round their inputs to bf16 anyway. */
void exchange(model *m, int p, const float *send, const size_t *sc, const size_t *sd, float *recv,
              const size_t *rc, const size_t *rd) {
  uint64_t before = dt_comm_total(m->world).bytes_sent;
  dt_dtype t = m->ws.type;
  const void *s = send;
  void *r = recv;
  if (t != DT_F32) {
    dt_to_half(send, m->ws.buf, span(sc, sd, m->N), t);
    s = m->ws.buf;
    r = m->wr.buf;
  }
  if (m->hand)
    hand_all_to_allv(m->world, s, sc, sd, r, rc, rd, t);
  else
    dt_all_to_allv(m->world, s, sc, sd, r, rc, rd, t);
  if (t != DT_F32) dt_from_half(m->wr.buf, recv, span(rc, rd, m->N), t);
  m->bytes[p] += dt_comm_total(m->world).bytes_sent - before;
}

/* Received rows sit by source rank, then expert; the experts want them by
 * expert, then source: copy block by block, either way. */
void reorder(const model *m, const route *q, float *rank_major, float *expert_major,
             int to_experts) {
  size_t at = 0, D = (size_t)m->D;
  for (int64_t e = 0; e < m->El; e++)
    for (int64_t s = 0; s < m->N; s++) {
      size_t from = q->rd[s] / D, n = (size_t)q->rcount[s * m->El + e];
      for (int64_t f = 0; f < e; f++) from += (size_t)q->rcount[s * m->El + f];
      float *rm = rank_major + from * D, *em = expert_major + at * D;
      if (n) dt_copy(to_experts ? em : rm, to_experts ? rm : em, n * D * 4);
      at += n;
    }
}

/* E/N counts to each rank: how many of my tokens each of its experts gets.
 * Blocks of one size: the plain all-to-all (by hand, the same rounds). */
void exchange_counts(model *m, const int64_t *send, int64_t *recv) {
  uint64_t before = dt_comm_total(m->world).bytes_sent;
  const int64_t *s = send;
  int64_t *r = recv, E = m->E;
  if (m->dcount) { /* on a GPU the collectives take device buffers */
    dt_copy_from_host(m->dcount, send, (size_t)E * 8);
    s = m->dcount;
    r = m->dcount + E;
  }
  if (m->hand)
    hand_all_to_allv(m->world, s, m->cn, m->cd, r, m->cn, m->cd, DT_I64);
  else
    dt_all_to_all(m->world, s, r, (size_t)m->El, DT_I64);
  if (m->dcount) dt_copy_to_host(recv, r, (size_t)E * 8);
  m->bytes[COUNTS] += dt_comm_total(m->world).bytes_sent - before;
}
