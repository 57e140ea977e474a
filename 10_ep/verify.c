/* verify.c: --verify-dispatch, for the exercise and for anyone changing the
 * dispatch. Rank d reads the block this rank sends it as the counts'
 * all-to-all told it: scount[d E/N + j] rows for its expert j, experts in
 * order, each expert's tokens in slot order. So the send counts and
 * displacements, and each kept choice's row, are checked against that
 * before anything travels, and the first mismatch is said in words. */
#include <stdio.h>

#include "ep.h"

void verify_dispatch(model *m, const route *q) {
  int64_t D = m->D, El = m->El, k = m->k, N = m->N, seen[256] = {0};
  char what[480] = "";
  for (int64_t d = 0; d < N && !what[0]; d++) {
    int64_t want = 0;
    for (int64_t j = 0; j < El; j++) want += q->scount[d * El + j];
    if (q->sc[d] != (size_t)(want * D))
      snprintf(what, sizeof what,
               "sends rank %lld %zu floats (sc[%lld]), but rank %lld is told %lld tokens (%lld "
               "floats) come from here, for its experts %lld-%lld",
               (long long)d, q->sc[d], (long long)d, (long long)d, (long long)want,
               (long long)(want * D), (long long)(d * El), (long long)(d * El + El - 1));
    else if (q->sd[d] + q->sc[d] > (size_t)(m->R * k * D))
      snprintf(what, sizeof what,
               "rank %lld's block (sd[%lld] = %zu, %zu floats) ends past the "
               "send buffer's %lld floats",
               (long long)d, (long long)d, q->sd[d], q->sc[d], (long long)(m->R * k * D));
  }
  for (int64_t i = 0; i < m->R * k && !what[0]; i++) {
    int64_t e = q->choice[i], d = e / El, kept = seen[e]++ < m->C;
    if (!kept && q->pos[i] >= 0)
      snprintf(what, sizeof what,
               "token %lld's choice %lld (expert %lld) is over capacity and "
               "must stay -1, but was given row %d",
               (long long)(i / k), (long long)(i % k), (long long)e, q->pos[i]);
    if (!kept) continue;
    int64_t row = (int64_t)(q->sd[d] / (size_t)D) + seen[e] - 1;
    for (int64_t j = d * El; j < e; j++) row += q->scount[j];
    if (q->pos[i] != row)
      snprintf(what, sizeof what,
               "token %lld's choice %lld (expert %lld, on rank %lld) sits at row %d of the send "
               "buffer, but rank %lld reads row %lld as expert %lld's token #%lld: it would "
               "compute on another token, or on nothing",
               (long long)(i / k), (long long)(i % k), (long long)e, (long long)d, q->pos[i],
               (long long)d, (long long)row, (long long)e, (long long)(seen[e] - 1));
  }
  int bad = what[0] != 0;
  dt_host_all_reduce(m->world, &bad, 1, DT_I32, DT_MAX); /* bookkeeping: every rank stops alike */
  if (!bad) return;
  dt_print_ranks("%s\n", what[0] ? what : "its dispatch is as the receivers expect");
  dt_fail("--verify-dispatch: tokens would arrive where they should not (each rank's first "
          "problem above). Rank d's block must hold, from sd[d], its experts' tokens expert by "
          "expert, each in slot order: sc[d] = their count x D");
}
