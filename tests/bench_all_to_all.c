/* bench_all_to_all.c: 10_ep's two all-to-alls timed side by side, nccl-tests
 * style: the hand one (10_ep/exchange.c, the very function the lesson calls
 * with --all-to-all hand: N-1 rounds of sendrecv) and the library's, both as
 * dt_all_to_all (blocks of one size, what 10_ep sends the counts with) and
 * as dt_all_to_allv (a count and a displacement per peer, what it sends the
 * tokens with; here every count alike).
 *
 * S is what each rank sends in all, its own block included: S/N to every
 * rank. algbw = S / t; busbw = algbw x (N-1)/N, the share that crosses to
 * other ranks (nccl-tests' factor for all-to-all). t: the median over the
 * timed calls of one rank's time, the slowest rank's. The variants take turns
 * call by call, so load from other processes hits all three alike. The last
 * call of each is checked element by element against the values every rank
 * sent (integers below 2^24: exact in float32), and hand against library byte
 * for byte; the bytes common counted against (N-1) x S/N.
 * Not a unit test (no test_ prefix): `make bench` builds and runs it
 * (bench/ep.sh); by hand:
 *   make build/cpu/bench_all_to_all && mpirun -np 4 build/cpu/bench_all_to_all */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "10_ep/ep.h"

enum { HAND, LIB, LIBV, NV };
static const char *names[NV] = {"hand", "library", "library_v"};

static int64_t min_bytes = 1 << 10, max_bytes = 64 << 20, factor = 4, iters = 20, warmup = 2;
static int64_t call_bytes = 1 << 30;

/* Rank s's element i of its block for rank d: hashed, so a block delivered
 * to the wrong place or shifted cannot match by accident. */
static float value(int s, int d, int N, size_t i) {
  return (float)(dt_rng_u64(7, (uint64_t)(s * N + d), i) >> 40);
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void one_call(dt_comm *w, int v, const float *send, float *recv, size_t block,
                     const size_t *cnt, const size_t *dsp) {
  if (v == HAND)
    hand_all_to_allv(w, send, cnt, dsp, recv, cnt, dsp, DT_F32);
  else if (v == LIB)
    dt_all_to_all(w, send, recv, block, DT_F32);
  else
    dt_all_to_allv(w, send, cnt, dsp, recv, cnt, dsp, DT_F32);
}

int main(int argc, char **argv) {
  dt_option options[] = {
      DT_SIZE("--min-bytes", &min_bytes, 4, 1LL << 32, "smallest S (bytes each rank sends in all)"),
      DT_SIZE("--max-bytes", &max_bytes, 4, 1LL << 32, "largest S"),
      DT_INT("--factor", &factor, 2, 1024, "each size is the previous one times this"),
      DT_INT("--iters", &iters, 1, 100000, "timed calls per size and variant (at most)"),
      DT_INT("--warmup", &warmup, 0, 1000, "untimed calls before them"),
      DT_SIZE("--call-bytes", &call_bytes, 1, 1LL << 40,
              "fewer timed calls where iters x S exceeds this (3 at least)"),
      DT_END};
  dt_lesson lesson = {"bench_all_to_all", "10_ep's hand all-to-all beside the library's", 2};
  dt_comm *w = dt_init(&argc, &argv, &lesson, options);
  int N = w->size, me = w->rank;
  if (max_bytes < min_bytes)
    dt_fail("--max-bytes %lld is smaller than --min-bytes %lld", (long long)max_bytes,
            (long long)min_bytes);
  if (min_bytes < 4 * N)
    dt_fail("--min-bytes %lld: less than one float32 for each of the %d ranks",
            (long long)min_bytes, N);
  size_t max_count = (size_t)max_bytes / 4 / (size_t)N * (size_t)N;
  float *host = dt_host_alloc(3 * max_count, sizeof(float)), *want = host + max_count,
        *ref = host + 2 * max_count;
  double *times = dt_host_alloc((size_t)(NV * iters), sizeof(double));
  size_t *cnt = dt_host_alloc((size_t)N, sizeof(size_t)),
         *dsp = dt_host_alloc((size_t)N, sizeof(size_t));
  float *send = dt_alloc_f32(max_count, DT_COMMBUF), *recv[NV];
  for (int v = 0; v < NV; v++) recv[v] = dt_alloc_f32(max_count, DT_COMMBUF);
  dt_print0(
      "config: S from %lld to %lld bytes (x%lld), float32, S/N to each of N = %d ranks; up to "
      "%lld timed calls per size and variant (fewer past %lld bytes in all, 3 at least) after "
      "%lld warm-up; busbw = algbw x (N-1)/N = algbw x %.3f\n",
      (long long)min_bytes, (long long)max_bytes, (long long)factor, N, (long long)iters,
      (long long)call_bytes, (long long)warmup, (double)(N - 1) / N);
  dt_print0("%11s %6s %10s %10s %10s %9s %9s %9s %12s %12s %6s %6s\n", "bytes", "iters", "hand_us",
            "lib_us", "libv_us", "hand_bus", "lib_bus", "libv_bus", "sent(B)", "formula(B)",
            "wrong", "differ");
  int64_t bad = 0;
  for (int64_t S0 = min_bytes; S0 <= max_bytes; S0 *= factor) {
    size_t block = (size_t)S0 / 4 / (size_t)N, count = block * (size_t)N;
    double S = (double)count * 4;
    int64_t it_n = iters;
    if ((double)it_n * S > (double)call_bytes) it_n = (int64_t)((double)call_bytes / S);
    if (it_n < 3) it_n = 3;
    if (it_n > iters) it_n = iters;
    for (int d = 0; d < N; d++) {
      cnt[d] = block;
      dsp[d] = (size_t)d * block;
      for (size_t i = 0; i < block; i++) {
        host[d * block + i] = value(me, d, N, i);
        want[d * block + i] = value(d, me, N, i);
      }
    }
    dt_copy_from_host(send, host, count * 4);
    uint64_t sent[NV] = {0};
    for (int64_t it = 0; it < warmup + it_n; it++)
      for (int v = 0; v < NV; v++) {
        dt_barrier(w); /* all ranks start together: time the exchange, not the skew */
        uint64_t before = dt_comm_total(w).bytes_sent;
        double t0 = dt_now();
        one_call(w, v, send, recv[v], block, cnt, dsp);
        dt_sync();
        if (it >= warmup) times[v * it_n + it - warmup] = dt_now() - t0;
        sent[v] = dt_comm_total(w).bytes_sent - before;
      }
    /* per variant: the median, then the slowest rank's; errors of all ranks */
    double med[NV];
    int64_t err[2 * NV + 1] = {0}; /* wrong elements, differing bytes, sent != formula */
    uint64_t formula = (uint64_t)(N - 1) * block * 4;
    for (int v = 0; v < NV; v++) {
      qsort(times + v * it_n, (size_t)it_n, sizeof(double), by_value);
      med[v] = (times[v * it_n + (it_n - 1) / 2] + times[v * it_n + it_n / 2]) / 2;
      err[2 * NV] += sent[v] != formula;
    }
    dt_copy_to_host(ref, recv[HAND], count * 4);
    for (int v = 0; v < NV; v++) {
      float *out = v == HAND ? ref : host; /* the inputs are on the device now */
      if (v != HAND) dt_copy_to_host(out, recv[v], count * 4);
      for (size_t i = 0; i < count; i++) {
        err[v] += out[i] != want[i];
        err[NV + v] += memcmp(out + i, ref + i, 4) != 0; /* byte for byte against the hand one */
      }
    }
    dt_host_all_reduce(w, med, NV, DT_F64, DT_MAX);
    dt_host_all_reduce(w, err, 2 * NV + 1, DT_I64, DT_SUM);
    int64_t wrong = err[HAND] + err[LIB] + err[LIBV], differ = err[NV + LIB] + err[NV + LIBV];
    double f = (double)(N - 1) / N / 1e9;
    dt_print0("%11.0f %6lld %10.1f %10.1f %10.1f %9.3f %9.3f %9.3f %12llu %12llu %6lld %6lld\n", S,
              (long long)it_n, med[HAND] * 1e6, med[LIB] * 1e6, med[LIBV] * 1e6, S / med[HAND] * f,
              S / med[LIB] * f, S / med[LIBV] * f, (unsigned long long)sent[HAND],
              (unsigned long long)formula, (long long)wrong, (long long)differ);
    bad += wrong + differ + err[2 * NV];
  }
  dt_print0("%s: %s, %s and %s all-to-all at every size: every element on every rank vs what its "
            "sender put there, hand vs library byte for byte, bytes sent vs (N-1) x S/N: %lld "
            "problem(s)\n",
            bad ? "CHECK FAILED" : "CHECK PASSED", names[HAND], names[LIB], names[LIBV],
            (long long)bad);
  for (int v = 0; v < NV; v++) dt_free(recv[v]);
  dt_free(send);
  free(host);
  free(times);
  free(cnt);
  free(dsp);
  dt_finalize();
  return bad ? 1 : 0;
}
