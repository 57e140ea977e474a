/* report.c: what 10_ep measured, beside the formulas: tokens per expert and
 * what capacity dropped, the bytes of each exchange computed from the tokens
 * that crossed, and memory per rank. */
#include <stdio.h>

#include "ep.h"

void tally(model *m, const route *q) {
  for (int64_t p = 0; p < m->N; p++)
    if (p != m->world->rank) {
      m->rows_out += q->sc[p] / (size_t)m->D;
      m->rows_in += q->rc[p] / (size_t)m->D;
    }
  for (int64_t e = 0; e < m->E; e++) m->kept[e] += q->count[e];
}

static void tokens(model *m, dt_run *r, uint64_t steps) {
  int64_t E = m->E, total = (int64_t)steps * m->L * r->c.batch * m->k, dropped = m->dropped;
  dt_host_all_reduce(m->world, m->kept, (size_t)E, DT_I64, DT_SUM); /* bookkeeping */
  dt_host_all_reduce(m->world, &dropped, 1, DT_I64, DT_SUM);
  double per = (double)steps * (double)m->L, max = 0, mean = 0;
  for (int64_t e = 0; e < E; e++) {
    max = (double)m->kept[e] > max ? (double)m->kept[e] : max;
    mean += (double)m->kept[e] / (double)E;
  }
  dt_print0("  tokens per expert      kept, per layer per step, all ranks (capacity N x C = "
            "%lld):\n",
            (long long)(m->N * m->C));
  for (int64_t e = 0; e < E; e++) {
    char bar[41] = "";
    int n = max > 0 ? (int)(40 * (double)m->kept[e] / max + 0.5) : 0;
    for (int i = 0; i < n; i++) bar[i] = '#';
    dt_print0("    expert %3lld (rank %lld) %8.2f %s\n", (long long)e, (long long)(e / m->El),
              (double)m->kept[e] / per, bar);
  }
  dt_print0("  imbalance              %8.2f      max / mean tokens per expert (1: even)\n",
            mean > 0 ? max / mean : 0);
  dt_print0("  dropped                %8lld      of %lld choices (%.2f%%), over capacity: their "
            "tokens keep the residual path only\n",
            (long long)dropped, (long long)total, 100.0 * (double)dropped / (double)total);
  dt_print0("  load-balancing loss    %8.6f      at the last step, aux_coef x E x sum_e f_e P_e "
            "summed over layers, mean over ranks (aux_coef x L = %g when balanced)\n",
            r->parts[r->c.steps - 1], r->c.aux_coef * (double)m->L);
}

static void bytes(model *m, uint64_t steps) {
  uint64_t N = (uint64_t)m->N, L = (uint64_t)m->L, D = (uint64_t)m->D, E = (uint64_t)m->E;
  uint64_t es = dt_dtype_size(m->ws.type); /* 4, or 2 in bf16 */
  uint64_t want[5] = {steps * L * (N - 1) * (E / N) * 8, m->rows_out * D * es, m->rows_in * D * es,
                      m->rows_out * D * es, m->rows_in * D * es};
  const char *name[5] = {"counts", "dispatch", "combine", "dispatch, backward",
                         "combine, backward"};
  const char *how4[5] = {"L x (N-1) x E/N x 8", "tokens sent to other ranks x D x 4",
                         "tokens received from other ranks x D x 4",
                         "tokens sent to other ranks x D x 4",
                         "tokens received from other ranks x D x 4"};
  const char *how2[5] = {"L x (N-1) x E/N x 8", "tokens sent to other ranks x D x 2",
                         "tokens received from other ranks x D x 2",
                         "tokens sent to other ranks x D x 2",
                         "tokens received from other ranks x D x 2"};
  const char **how = es == 4 ? how4 : how2;
  int bad = 0;
  for (int p = 0; p < 5; p++) bad |= m->bytes[p] != want[p];
  dt_print0("  all-to-all bytes sent per rank per step (rank 0), each beside its formula from the "
            "tokens it counted:\n");
  for (int p = 0; p < 5; p++) {
    dt_print0("    %-20s %12.1f   formula %s = %.1f\n", name[p],
              (double)m->bytes[p] / (double)steps, how[p], (double)want[p] / (double)steps);
    dt_report_figure("ep all_to_all bytes", name[p], (double)m->bytes[p] / (double)steps,
                     (double)want[p] / (double)steps);
  }
  dt_host_all_reduce(m->world, &bad, 1, DT_I32, DT_MAX);
  dt_print0("    every rank's bytes equal its formulas: %s (%lld ranks)\n", bad ? "NO" : "yes",
            (long long)N);
  dt_counter ar = m->world->count[DT_ALL_REDUCE];
  uint64_t router = L * D * E * 4, counts = L * E * 4;
  uint64_t ar_want = N > 1 ? 2 * (N - 1) * router / N + 2 * (N - 1) * counts / N : 0;
  dt_report_traffic("ep", DT_ALL_REDUCE, (double)(ar.calls / steps),
                    (double)(ar.bytes_sent / steps), (double)ar_want);
  dt_print0("  all-reduce calls/step  %8llu      bytes sent per rank per step %llu, formula "
            "2(N-1)/N x (L D E router gradients + L E counts) x 4 = %llu\n",
            (unsigned long long)(ar.calls / steps), (unsigned long long)(ar.bytes_sent / steps),
            (unsigned long long)ar_want);
}

void report(model *m, dt_run *r) {
  uint64_t steps = (uint64_t)(r->c.steps - r->c.start_step);
  tokens(m, r, steps);
  bytes(m, steps);
  int64_t L = m->L, D = m->D, H = m->H, E = m->E, R = m->R, k = m->k, M = m->M;
  int64_t P = L * (D * E + m->El * 2 * D * H), W = R * k > M ? R * k : M;
  dt_print0("  expert parameters      %8lld      bytes per layer on each rank, formula E/N x 2DH x "
            "4 = %lld (one process holds E x 2DH x 4 = %lld)\n",
            (long long)(m->El * 2 * D * H * 4), (long long)(m->El * 2 * D * H * 4),
            (long long)(E * 2 * D * H * 4));
  dt_row rows[] = {
      {DT_PARAMS, P * 4, "L x (DE + E/N x 2DH) x 4: the router and this rank's experts", 0},
      {DT_GRADS, P * 4, "the same", 0},
      {DT_OPTIM, r->c.optimizer[0] == 'a' ? 2 * P * 4 : 0, "AdamW m and v: 2 x P x 4 (sgd: 0)", 0},
      {DT_ACTIV,
       ((L + 3) * R * D + L * (R * E + 4 * R * k + R * k * D + M * (D + 2 * H)) + m->N * m->C * H +
        R * E) *
           4,
       "((L+3)RD + L(RE + 4Rk + RkD + M(D+2H)) + NCH + RE) x 4, R = B/N, M = N C E/N", 0},
      {DT_COMMBUF, (R * k * D + 3 * M * D) * 4 + (m->ws.buf ? 4 * W * D : 0),
       m->ws.buf ? "(RkD + 3MD) x 4 + 2 x max(Rk, M) D x 2: send, receive, reorder, 16-bit copies"
                 : "(RkD + 3MD) x 4: send, receive, reorder",
       0}};
  dt_print_memory(rows, 5, NULL);
  dt_print_memory_uncounted();
}
