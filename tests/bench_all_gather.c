/* bench_all_gather.c: the library's all-gather (dt_all_gather, the call
 * 14_gpt's --sequence-parallel and 06's shards make) timed at one size, for
 * bench/vocab.sh: what gathering 14_gpt's logits [R, V] over tp ranks would
 * cost, each rank's slice [R, V/tp] the count. nccl-tests style: t is the
 * median of the timed calls on each rank, the slowest rank's; algbw = S / t
 * with S = N x count x 4 the gathered buffer, busbw = algbw x (N-1)/N, the
 * share each rank receives from the others. The last call's result is checked
 * element by element against what every rank sent (integers below 2^24:
 * exact in float32), and the bytes the comm layer counted against
 * (N-1) x count x 4 a rank. Not a unit test (no test_ prefix): `make
 * bench-vocab` builds and runs it; by hand:
 *   make build/cpu/bench_all_gather && mpirun -np 4 build/cpu/bench_all_gather --count 1048576 */
#include <stdio.h>
#include <stdlib.h>

#include "dt.h"

static int64_t count = 1 << 20, iters = 10, warmup = 2;

/* rank s's element i: hashed, so a slice delivered to the wrong place or
 * shifted cannot match by accident */
static float value(int s, size_t i) { return (float)(dt_rng_u64(11, (uint64_t)s, i) >> 40); }

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  dt_option options[] = {
      DT_INT("--count", &count, 1, 1LL << 32, "floats each rank contributes (its slice)"),
      DT_INT("--iters", &iters, 1, 100000, "timed calls"),
      DT_INT("--warmup", &warmup, 0, 1000, "untimed calls before them"), DT_END};
  dt_lesson lesson = {"bench_all_gather", "the library's all-gather at one size", 2};
  dt_comm *w = dt_init(&argc, &argv, &lesson, options);
  int N = w->size, me = w->rank;
  size_t n = (size_t)count, all = n * (size_t)N;
  float *host = dt_host_alloc(all, sizeof(float));
  double *times = dt_host_alloc((size_t)iters, sizeof(double));
  float *send = dt_alloc_f32(n, DT_COMMBUF), *recv = dt_alloc_f32(all, DT_COMMBUF);
  for (size_t i = 0; i < n; i++) host[i] = value(me, i);
  dt_copy_from_host(send, host, n * 4);
  uint64_t sent = 0;
  for (int64_t it = 0; it < warmup + iters; it++) {
    dt_barrier(w); /* all ranks start together: time the collective, not the skew */
    uint64_t before = dt_comm_total(w).bytes_sent;
    double t0 = dt_now();
    dt_all_gather(w, send, recv, n, DT_F32);
    dt_sync();
    if (it >= warmup) times[it - warmup] = dt_now() - t0;
    sent = dt_comm_total(w).bytes_sent - before;
  }
  qsort(times, (size_t)iters, sizeof(double), by_value);
  double med = (times[(iters - 1) / 2] + times[iters / 2]) / 2;
  dt_copy_to_host(host, recv, all * 4);
  int64_t err[2] = {0}; /* wrong elements, ranks whose bytes miss the formula */
  for (int s = 0; s < N; s++)
    for (size_t i = 0; i < n; i++) err[0] += host[(size_t)s * n + i] != value(s, i);
  uint64_t formula = (uint64_t)(N - 1) * n * 4;
  err[1] = sent != formula;
  dt_host_all_reduce(w, &med, 1, DT_F64, DT_MAX);
  dt_host_all_reduce(w, err, 2, DT_I64, DT_SUM);
  double S = (double)all * 4;
  dt_print0("all_gather: %d ranks, %lld floats each (a slice of %lld bytes), S = N x count x 4 = "
            "%.0f bytes gathered; each rank receives (N-1) x count x 4 = %llu bytes\n",
            N, (long long)count, (long long)count * 4, S, (unsigned long long)formula);
  dt_print0("time: %.3f ms (the median of %lld calls after %lld warm-up, the slowest rank's); "
            "algbw S/t %.3f GB/s, busbw x (N-1)/N %.3f GB/s\n",
            med * 1e3, (long long)iters, (long long)warmup, S / med / 1e9,
            S / med / 1e9 * (N - 1) / N);
  dt_print0("bytes sent per rank (rank 0) %llu, formula (N-1) x count x 4 = %llu\n",
            (unsigned long long)sent, (unsigned long long)formula);
  int64_t bad = err[0] + err[1];
  dt_print0("%s: every element on every rank vs what its sender put there (%lld wrong), every "
            "rank's bytes vs the formula (%lld off)\n",
            bad ? "CHECK FAILED" : "CHECK PASSED", (long long)err[0], (long long)err[1]);
  dt_free(recv);
  dt_free(send);
  free(host);
  free(times);
  dt_finalize();
  return bad ? 1 : 0;
}
