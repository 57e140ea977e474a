/* broadcast.c: one rank has a buffer, every rank needs it.
 *
 * Lesson 2 builds broadcast twice out of the send and recv of lesson 1, in the
 * style of mpitutorial's my_bcast, and puts both beside the library call:
 *   linear      the root sends the whole buffer to each rank in turn: N-1 sends;
 *   binomial    every rank that has the data passes it on, so the holders
 *               double each round: ceil(log2 N) rounds;
 *   library     dt_broadcast (MPI_Bcast or ncclBroadcast).
 * It counts who sends which bytes, times the three over a size sweep, checks
 * every result on every rank, and ends with the use in training (weights.c):
 * rank 0's freshly initialised weights replicated so that all ranks start
 * equal. */
#include <stdio.h>
#include <stdlib.h>

#include "weights.h"

static int64_t root_rank = 0, min_bytes = 4, max_bytes = 16 << 20, iters = 20, params = 1 << 20;
static int64_t seed = 1234;

/* The root sends to everyone itself: its link carries N-1 copies, one after
 * the other, while every other link idles and the last rank waits longest. */
static void my_linear_broadcast(dt_comm *c, float *buf, size_t count, int root) {
  if (c->rank == root) {
    for (int r = 0; r < c->size; r++)
      if (r != root) dt_send(c, buf, count, DT_F32, r);
  } else {
    dt_recv(c, buf, count, DT_F32, root);
  }
}

/* Binomial tree. Ranks are renumbered relative to the root, rel = (rank -
 * root + N) % N, so the root is always 0 and any root works. In round k
 * (mask = 2^k) the ranks with rel < mask already hold the data, and each sends
 * it to rel + mask: the holders double every round. A rank receives once, in
 * the round where mask <= rel < 2*mask, from rel - mask; ranks beyond the
 * holders wait in that recv, so the blocking calls cannot deadlock. */
static void my_tree_broadcast(dt_comm *c, float *buf, size_t count, int root) {
  /* exercise: the binomial-tree broadcast */
  int N = c->size, rel = (c->rank - root + N) % N;
  for (int mask = 1; mask < N; mask <<= 1) {
    if (rel < mask) {
      if (rel + mask < N) dt_send(c, buf, count, DT_F32, (rel + mask + root) % N);
    } else if (rel < 2 * mask) {
      dt_recv(c, buf, count, DT_F32, (rel - mask + root) % N);
    }
  }
  /* end of exercise */
}

static void library_broadcast(dt_comm *c, float *buf, size_t count, int root) {
  dt_broadcast(c, buf, count, DT_F32, root);
}

typedef void (*broadcast_fn)(dt_comm *, float *, size_t, int);
static const broadcast_fn ways[3] = {my_linear_broadcast, my_tree_broadcast, library_broadcast};

/* The formulas: how many ranks a tree rank sends to, and the rounds. */
static int tree_children(int rel, int N) {
  int n = 0;
  for (int mask = 1; mask < N; mask <<= 1) n += rel < mask && rel + mask < N;
  return n;
}
static int ceil_log2(int N) {
  int k = 0;
  while ((1 << k) < N) k++;
  return k;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Time `iters` broadcasts. Before each one the receivers' buffers are zeroed
 * (the root never sends a 0), so a rank that received nothing cannot pass;
 * after each one every rank compares its whole buffer with the root's values
 * (the root too: a broadcast must not change its data). The copy and the
 * check stay outside the timed region. A broadcast is done when the last rank
 * has the data, so each one counts the slowest rank's time; the median over
 * the iterations ignores the few that the OS scheduler stretched (ranks that
 * share a core get descheduled for whole time slices). */
static double run(dt_comm *w, int way, float *buf, size_t n, const float *want, float *host,
                  int iters, int64_t *wrong) {
  double times[1000]; /* iters <= 1000, the flag's range */
  for (int it = 0; it < iters; it++) {
    if (w->rank != (int)root_rank) dt_zero(buf, n * sizeof(float));
    dt_barrier(w); /* start together, so no rank's time includes another's lateness */
    double t0 = dt_now();
    ways[way](w, buf, n, (int)root_rank);
    times[it] = dt_now() - t0;
    dt_host_all_reduce(w, &times[it], 1, DT_F64, DT_MAX);
    dt_copy_to_host(host, buf, n * sizeof(float));
    for (size_t i = 0; i < n; i++) *wrong += host[i] != want[i];
  }
  qsort(times, (size_t)iters, sizeof *times, by_value);
  return iters % 2 ? times[iters / 2] : (times[iters / 2 - 1] + times[iters / 2]) / 2;
}

/* Step 1: one broadcast each way, and who sent which bytes, from the
 * counters, beside the formulas. Returns the mismatches (totals: rank 0). */
static int64_t step1_counters(dt_comm *w, float *buf, const float *want, float *host,
                              int64_t *wrong) {
  int N = w->size, R = (int)root_rank, rounds = ceil_log2(N);
  size_t n = (size_t)max_bytes / sizeof(float);
  uint64_t S = (uint64_t)max_bytes, sent[3];
  int64_t total[3], root_calls[3], bad = 0;
  for (int k = 0; k < 3; k++) {
    dt_comm_reset(w);
    run(w, k, buf, n, want, host, 1, wrong);
    dt_kind kind = k == 2 ? DT_BROADCAST : DT_SEND;
    sent[k] = w->count[kind].bytes_sent;
    total[k] = (int64_t)sent[k];
    root_calls[k] = (int64_t)w->count[kind].calls;
  }
  int rel = (w->rank - R + N) % N, kids = tree_children(rel, N);
  uint64_t formula[3] = {rel == 0 ? (N - 1) * S : 0, kids * S, rel == N - 1 ? 0 : S};
  bad += (sent[0] != formula[0]) + (sent[1] != formula[1]) + (sent[2] != formula[2]);
  dt_print0("step 1: one broadcast of S = %llu bytes from root %d each way\n"
            "  linear: the root sends N-1 = %d times; tree: ceil(log2 N) = %d rounds\n",
            (unsigned long long)S, R, N - 1, rounds);
  for (int mask = 1; mask < N && N <= 16; mask <<= 1) {
    dt_print0("  tree round %d:", ceil_log2(mask) + 1);
    for (int r = 0; r < mask && r + mask < N; r++)
      dt_print0(" %d->%d", (r + R) % N, (r + mask + R) % N);
    dt_print0("\n");
  }
  dt_print0("bytes handed to send on each rank (rel = relative rank):\n");
  dt_print_ranks("rel %d | linear %llu B (formula %llu) | tree %llu B (formula %d children*S = "
                 "%llu) | library %llu B (ring model)\n",
                 rel, (unsigned long long)sent[0], (unsigned long long)formula[0],
                 (unsigned long long)sent[1], kids, (unsigned long long)formula[1],
                 (unsigned long long)sent[2]);
  dt_host_all_reduce(w, total, 3, DT_I64, DT_SUM);
  dt_host_broadcast(w, root_calls, 3, DT_I64, R);
  dt_print0("total over %d ranks: linear %lld B, tree %lld B, library %lld B; "
            "formula (N-1)*S = %llu B\n"
            "root's send calls: linear %lld (N-1 = %d), tree %lld (ceil(log2 N) = %d)\n",
            N, (long long)total[0], (long long)total[1], (long long)total[2],
            (unsigned long long)((N - 1) * S), (long long)root_calls[0], N - 1,
            (long long)root_calls[1], rounds);
  dt_print0("Each non-root rank receives S exactly once, so every way moves (N-1)*S in all; "
            "they differ in who sends it\nand in how many steps. The library column is the "
            "common layer's ring model (every rank forwards S,\nbut the last): MPI_Bcast and "
            "NCCL choose their own algorithm, which the counter cannot see.\n\n");
  if (w->rank == 0) { /* the totals are the same on every rank: count them once */
    for (int k = 0; k < 3; k++) bad += total[k] != (int64_t)((N - 1) * S);
    bad += (root_calls[0] != N - 1) + (root_calls[1] != rounds);
  }
  return bad;
}

/* Step 2: the three ways timed over the sizes; returns how many sizes. */
static int step2_sweep(dt_comm *w, float *buf, const float *want, float *host, int64_t *wrong) {
  int N = w->size, sizes = 0;
  dt_print0("step 2: time per broadcast (slowest rank, median over the iterations)\n");
  dt_print0("%12s %6s %12s %12s %12s %10s\n", "bytes", "iters", "linear us", "tree us",
            "library us", "lin/tree");
  for (int64_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4, sizes++) {
    size_t n = (size_t)bytes / sizeof(float);
    /* fewer iterations for large sizes keep the sweep short: 128 MiB per way */
    int it = (int)(iters < (128 << 20) / bytes ? iters : (128 << 20) / bytes);
    it = it < 2 ? 2 : it;
    double t[3];
    for (int k = 0; k < 3; k++) t[k] = run(w, k, buf, n, want, host, it, wrong);
    dt_print0("%12lld %6d %12.1f %12.1f %12.1f %10.2f\n", (long long)bytes, it, t[0] * 1e6,
              t[1] * 1e6, t[2] * 1e6, t[1] > 0 ? t[0] / t[1] : 0.0);
  }
  if (N > 1)
    dt_print0("model: lin/tree = (N-1)/ceil(log2 N) = %.2f when each send costs the same\n\n",
              (double)(N - 1) / ceil_log2(N));
  else
    dt_print0("(one rank: nothing to send, the times are the calls' overhead)\n\n");
  return sizes;
}

int main(int argc, char **argv) {
  dt_option options[] = {
      DT_INT("--root", &root_rank, 0, 65535, "rank that holds the data (0..NP-1)"),
      DT_SIZE("--min-bytes", &min_bytes, 4, 1 << 30, "smallest broadcast of the sweep"),
      DT_SIZE("--max-bytes", &max_bytes, 4, 1 << 30, "largest broadcast (and the byte count)"),
      DT_INT("--iters", &iters, 1, 1000, "timed broadcasts per size and way (fewer when large)"),
      DT_INT("--params", &params, 1, 1 << 28, "floats in the weights replicated at the end"),
      DT_INT("--seed", &seed, 0, 1e15, "seed of the weights' initialisation"),
      DT_END,
  };
  dt_lesson lesson = {"02_broadcast", "linear vs binomial-tree vs library broadcast", 1};
  dt_comm *w = dt_init(&argc, &argv, &lesson, options);
  int N = w->size, R = (int)root_rank;
  if (R >= N) dt_fail("--root %d is not a rank: with %d ranks it must be 0..%d", R, N, N - 1);
  if (min_bytes % 4 || max_bytes % 4)
    dt_fail("--%s-bytes %lld is not a multiple of 4: the elements are 4-byte floats",
            min_bytes % 4 ? "min" : "max", (long long)(min_bytes % 4 ? min_bytes : max_bytes));
  if (min_bytes > max_bytes)
    dt_fail("--min-bytes %lld is larger than --max-bytes %lld", (long long)min_bytes,
            (long long)max_bytes);
  dt_print0("config: root %d, sizes %lld..%lld bytes (x4 per row), %lld iterations, "
            "%lld weights, seed %lld\n\n",
            R, (long long)min_bytes, (long long)max_bytes, (long long)iters, (long long)params,
            (long long)seed);

  size_t nmax = (size_t)max_bytes / sizeof(float);
  float *want = dt_host_alloc(2 * nmax, sizeof(float)), *host = want + nmax;
  float *buf = dt_alloc_f32(nmax, DT_COMMBUF);
  /* Small integers (exact in float) that depend on the root; never 0. */
  for (size_t i = 0; i < nmax; i++) want[i] = (float)(1 + (i + (size_t)R) % 8191);
  if (w->rank == R) dt_copy_from_host(buf, want, nmax * sizeof(float));

  int64_t wrong = 0, bytes_bad = step1_counters(w, buf, want, host, &wrong);
  int sizes = step2_sweep(w, buf, want, host, &wrong);
  int equal = 0;
  int64_t differ = replicate_weights(w, (size_t)params, (uint64_t)seed, &equal);

  int64_t all[3] = {wrong, bytes_bad, differ};
  dt_host_all_reduce(w, all, 3, DT_I64, DT_SUM);
  int ok = all[0] == 0 && all[1] == 0 && all[2] == 0 && equal;
  dt_report_string(NULL, "verdict", ok ? "PASSED" : "FAILED");
  dt_print0("CHECK %s: linear, tree and library broadcast from root %d, %d sizes, every result "
            "on %d ranks: %lld wrong elements (exact compare); bytes vs formula: %lld "
            "mismatches; weights checksums %s on all ranks, %lld elements differ from the local "
            "RNG draw\n",
            ok ? "PASSED" : "FAILED", R, sizes, N, (long long)all[0], (long long)all[1],
            equal ? "equal" : "DIFFER", (long long)all[2]);
  free(want);
  dt_free(buf);
  dt_finalize();
  return ok ? 0 : 1;
}
