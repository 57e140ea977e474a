/* report.c: what 11_cp measured, beside the formulas: each rank's attention
 * work and time (the split's balance), the bytes attention moved, memory. */
#include <stdio.h>
#include <stdlib.h>

#include "cp.h"
#include "formulas.h"

/* q.k scores x heads rank r computes per layer per sequence, forward (backward
 * recomputes as many): the pairs on or below the diagonal of its chunks. */
static int64_t work(const model *m, int zigzag, int ulysses, int64_t r) {
  int64_t A = m->A, N = m->N, S = m->S, C = S / (zigzag ? 2 * N : N);
  if (ulysses) return A / N * S * (S + 1) / 2; /* whole sequences, A/N heads */
  if (zigzag) return A * ((2 * N - 1) * C * C + C * (C + 1));
  return A * (r * C * C + C * (C + 1) / 2);
}

static void balance(model *m, uint64_t steps) {
  int64_t N = m->N, per = m->L * m->B, mine[2] = {m->cr.scores[0], m->cr.scores[1]},
          dh = m->D / m->A;
  /* GFLOP/s in the blocks, and sgemm alone at the tiles' shapes, both on
   * the rank's own clock (a core's CPU time, or its GPU's events), measured
   * by every rank at once, as the blocks ran */
  double flops = (double)dh * (4.0 * (double)m->cr.scores[0] + 10.0 * (double)m->cr.scores[1]);
  double busy = dt_work_seconds(&m->cr.work);
  int gpu = dt_device() >= 0;
  double t[4] = {busy * 1e3 / (double)steps, m->attn_seconds * 1e3 / (double)steps,
                 flops / busy / 1e9, dt_attn_gemm_rate(dh)};
  int64_t *all = dt_host_alloc((size_t)(2 * N), 8);
  double *ms = dt_host_alloc((size_t)(4 * N), 8);
  dt_host_gather(m->world, mine, all, 2, DT_I64, 0); /* bookkeeping */
  dt_host_gather(m->world, t, ms, 4, DT_F64, 0);
  dt_print0("  attention work per rank: q.k scores x heads per layer per sequence, forward "
            "(backward recomputes as many); ms per step in the score blocks (%s), and in attention "
            "with its waits (wall):\n",
            gpu ? "the GPU's time, by CUDA events"
                : "the rank's CPU time: its own work, whatever shares its core");
  int same = 1;
  for (int64_t r = 0; r < N && m->rank == 0; r++) {
    int64_t f = all[2 * r] / (int64_t)steps / per, b = all[2 * r + 1] / (int64_t)steps / per;
    int64_t want = work(m, m->zigzag, m->ulysses, r);
    same &= f == want && b == want;
    dt_print0("    rank %lld %10lld   formula %s = %lld   backward %lld   %7.2f ms  %7.2f ms\n",
              (long long)r, (long long)f,
              m->ulysses  ? "A/N x S(S+1)/2"
              : m->zigzag ? "A((2N-1)C^2 + C(C+1)), C = S/2N"
                          : "A(r C^2 + C(C+1)/2), C = S/N",
              (long long)want, (long long)b, ms[4 * r], ms[4 * r + 1]);
  }
  int64_t first = work(m, 0, 0, 0), last = work(m, 0, 0, N - 1);
  char zz[32] = "S not a multiple of 2N", us[32] = "A not a multiple of N";
  if (m->S % (2 * N) == 0) snprintf(zz, sizeof zz, "%lld", (long long)work(m, 1, 0, 0));
  if (m->A % N == 0) snprintf(us, sizeof us, "%lld", (long long)work(m, 0, 1, 0));
  dt_print0("    every rank's work equals its formula: %s (%lld ranks)\n", same ? "yes" : "NO",
            (long long)N);
  dt_print0("  attention's rate in its score blocks (4 dh flops a score forward, 10 dh backward), "
            "beside %s's sgemm alone at the tiles' shapes (%d x %d x dh, %d x dh x %d; dh "
            "%lld), each rank measuring at once:\n",
            gpu ? "its GPU" : "one core", DT_ATTN_TILE, DT_ATTN_TILE, DT_ATTN_TILE, DT_ATTN_TILE,
            (long long)dh);
  for (int64_t r = 0; r < N && m->rank == 0; r++)
    dt_print0("    rank %lld   %7.2f GFLOP/s   sgemm %7.2f GFLOP/s   %5.1f%%\n", (long long)r,
              ms[4 * r + 2], ms[4 * r + 3], 100 * ms[4 * r + 2] / ms[4 * r + 3]);
  dt_print0("    the splits: contiguous from %lld (rank 0) to %lld (rank N-1), %.2f times (2N-1 = "
            "%lld as C grows); zigzag every rank %s; Ulysses every rank %s; all ranks together "
            "A S(S+1)/2 = %lld\n",
            (long long)first, (long long)last, (double)last / (double)first, (long long)(2 * N - 1),
            zz, us, (long long)(m->A * m->S * (m->S + 1) / 2));
  free(all);
  free(ms);
}

static void bytes(model *m, dt_run *r, uint64_t steps) {
  uint64_t N = (uint64_t)m->N, E = dt_dtype_size(m->grads.type);
  int64_t want[2]; /* formulas.c */
  cp_attention_bytes(m->L, m->N, m->R, m->D, (int64_t)E, m->ulysses, want);
  const char *how[2] = {"L x (N-1) hops x [K|V] 2RD x E", /* E: bytes an element travels in */
                        "L x ((N-1) hops of [K|V] + N of [dK|dV]) x 2RD x E"};
  if (m->ulysses) {
    how[0] = "L x 4 all-to-alls (q, k, v; o back) x (N-1)/N x RD x E";
    how[1] = "L x 4 all-to-alls (do; dq, dk, dv back) x (N-1)/N x RD x E";
  }
  int bad = m->bytes[0] != (uint64_t)want[0] * steps || m->bytes[1] != (uint64_t)want[1] * steps;
  dt_print0("  attention bytes sent per rank per step (rank 0), beside the formulas (R = B S/N "
            "rows, E = %llu bytes an element, %s%s):\n",
            (unsigned long long)E, r->c.precision, E == 2 ? ": half of fp32's" : "");
  const char *name[2] = {"forward", "backward"};
  for (int p = 0; p < 2; p++)
    dt_print0("    %-8s %14.1f   formula %s = %.1f\n", name[p], (double)m->bytes[p] / (double)steps,
              how[p], (double)want[p]);
  dt_report_traffic("cp", m->ulysses ? DT_ALL_TO_ALL : DT_SENDRECV, -1,
                    (double)(m->bytes[0] + m->bytes[1]) / (double)steps,
                    (double)(want[0] + want[1]));
  dt_host_all_reduce(m->world, &bad, 1, DT_I32, DT_MAX);
  dt_print0("    every rank's bytes equal its formulas: %s (%lld ranks)\n", bad ? "NO" : "yes",
            (long long)N);
  dt_counter ar = m->world->count[DT_ALL_REDUCE];
  double grads = (double)cp_gradient_bytes(m->N, m->L * dt_params_per_layer(&r->c), (int64_t)E);
  dt_report_traffic("dp_cp", DT_ALL_REDUCE, (double)(ar.calls / steps),
                    (double)ar.bytes_sent / (double)steps, grads);
  dt_print0("  all-reduce calls/step  %8llu      bytes sent per rank per step %.1f, formula "
            "2(N-1)/N x P x E = %.1f (the gradients, averaged as in 05)\n",
            (unsigned long long)(ar.calls / steps), (double)ar.bytes_sent / (double)steps, grads);
}

/* What attention keeps and moves per rank, beside its formula: fp32 keeps
 * the travelling blocks in floats, 16 bits keeps one float copy of each (the
 * one computed on) and the wire's two 16-bit ones: the same bytes. */
static void memory(model *m, dt_run *r) {
  int64_t L = m->L, D = m->D, H = m->H, A = m->A, R = m->R, C = m->C, S = m->S;
  int half = m->grads.type != DT_F32;
  int64_t attn = cp_attention_floats(L, R, D, A, C, m->ulysses, half), mem[DT_NTAGS];
  cp_memory(L, R, D, H, A, C, m->ulysses, half, r->c.optimizer[0] == 'a', mem); /* formulas.c */
  const char *how[2][2] = {
      {"(4LRD + (L+1)RA + C(D+A) + 8RD) x 4", "(4LRD + (L+1)RA + C(D+A) + 4RD) x 4 + 8RD x 2"},
      {"(4LRD + (L+1)RA + C(D+A) + L(4RD+RA) + 6RD) x 4",
       "(4LRD + (L+1)RA + C(D+A) + L(4RD+RA) + 6RD) x 4 + 2RD x 2"}};
  dt_print0("  attention memory       %8zu      bytes per rank, formula %s = %lld: no score is "
            "stored; one process with the scores materialised keeps L x B x A x S^2 x 4 = %lld "
            "for the scores alone\n",
            m->attn_bytes, how[m->ulysses][half], (long long)(attn * 4),
            (long long)(L * m->B * A * S * S * 4));
  int64_t T = DT_ATTN_TILE, dh = D / A;
  dt_print0(
      "    and the tiles' scratch: %zu bytes, formula (2 T^2 + 4 T dh) x 4 = %lld, T = %lld (one "
      "tile of scores, one of dP, copies of a tile's rows): the same at any S\n",
      dt_attn_scratch_bytes(), (long long)((2 * T * T + 4 * T * dh) * 4), (long long)T);
  const char *activ[2][2] = {
      {"((6L+8)RD + (L+1)RA + (2L+1)RH + C(D+A)) x 4, R = B S/N",
       "((6L+12)RD + (L+1)RA + (2L+1)RH + C(D+A)) x 4, R = B S/N: 4RD the blocks computed on"},
      {"((6L+8)RD + (L+1)RA + (2L+1)RH + C(D+A) + L(4RD+RA) + 4RD) x 4, R = B S/N",
       "((6L+8)RD + (L+1)RA + (2L+1)RH + C(D+A) + L(4RD+RA) + 4RD) x 4, R = B S/N"}};
  const char *comm[2][2] = {
      {"8RD x 4: [K|V] and [dK|dV], two each", "(8RD + P) x 2: [K|V] and [dK|dV] in 16 bits, "
                                               "two each (sent, received); the gradients"},
      {"2RD x 4: all-to-all send, receive",
       "2RD x 4 + (2RD + P) x 2: all-to-all send, receive, both in 16 bits; the gradients"}};
  dt_row rows[] = {
      {DT_PARAMS, mem[DT_PARAMS], "L x (4D^2 + 2DH) x 4: the whole model on every rank", 0},
      {DT_GRADS, mem[DT_GRADS], "the same", 0},
      {DT_OPTIM, mem[DT_OPTIM], "AdamW m and v: 2 x P x 4 (sgd: 0)", 0},
      {DT_ACTIV, mem[DT_ACTIV], activ[m->ulysses][half], 0},
      {DT_COMMBUF, mem[DT_COMMBUF], comm[m->ulysses][half], 0},
      {DT_DATA, mem[DT_DATA], "RD x 4: the targets", 0}};
  dt_print_memory(rows, 6, NULL);
  dt_print_memory_uncounted();
}

void report(model *m, dt_run *r) {
  uint64_t steps = (uint64_t)(r->c.steps - r->c.start_step);
  balance(m, steps);
  bytes(m, r, steps);
  memory(m, r);
}
