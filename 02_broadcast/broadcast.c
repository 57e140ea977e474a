/* broadcast.c: one rank has a buffer, every rank needs it.
 *
 * Lesson 2 builds broadcast twice out of the send and recv of lesson 1, in the
 * style of mpitutorial's my_bcast, and puts both beside the library call:
 *   linear      the root sends the whole buffer to each rank in turn: N-1 sends;
 *   binomial    every rank that has the data passes it on, so the holders
 *               double each round: ceil(log2 N) rounds;
 *   library     dt_broadcast (MPI_Bcast or ncclBroadcast).
 * It counts who sends which bytes, times the three over a size sweep, checks
 * every result on every rank, and ends with the use in training: rank 0's
 * freshly initialised weights replicated so that all ranks start equal. */
#include <stdio.h>
#include <stdlib.h>

#include "dt.h"

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
static double run(dt_comm *w, int way, float *buf, size_t n, int root, const float *want,
                  float *host, int iters, long *wrong) {
  double times[1000]; /* iters <= 1000, the flag's range */
  for (int it = 0; it < iters; it++) {
    if (w->rank != root) dt_zero(buf, n * sizeof(float));
    dt_barrier(w); /* start together, so no rank's time includes another's lateness */
    double t0 = dt_now();
    ways[way](w, buf, n, root);
    double mine = dt_now() - t0;
    DT_MPI(MPI_Allreduce(&mine, &times[it], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    dt_copy_to_host(host, buf, n * sizeof(float));
    for (size_t i = 0; i < n; i++) *wrong += host[i] != want[i];
  }
  qsort(times, (size_t)iters, sizeof *times, by_value);
  return iters % 2 ? times[iters / 2] : (times[iters / 2 - 1] + times[iters / 2]) / 2;
}

/* FNV-1a over the bytes: equal weights give equal checksums, bit for bit. */
static uint64_t checksum(const float *host, size_t n) {
  const unsigned char *b = (const unsigned char *)host;
  uint64_t h = 14695981039346656037ULL;
  for (size_t i = 0; i < n * sizeof(float); i++) h = (h ^ b[i]) * 1099511628211ULL;
  return h;
}

int main(int argc, char **argv) {
  int64_t root = 0, min_bytes = 4, max_bytes = 16 << 20, iters = 20, params = 1 << 20;
  int64_t seed = 1234;
  dt_option options[] = {
      DT_INT("--root", &root, 0, 65535, "rank that holds the data (0..NP-1)"),
      DT_SIZE("--min-bytes", &min_bytes, 4, 1 << 30, "smallest broadcast of the sweep"),
      DT_SIZE("--max-bytes", &max_bytes, 4, 1 << 30, "largest broadcast (and the byte count)"),
      DT_INT("--iters", &iters, 1, 1000, "timed broadcasts per size and way (fewer when large)"),
      DT_INT("--params", &params, 1, 1 << 28, "floats in the weights replicated at the end"),
      DT_INT("--seed", &seed, 0, 1e15, "seed of the weights' initialisation"),
      DT_END,
  };
  dt_lesson lesson = {"02_broadcast", "linear vs binomial-tree vs library broadcast", 1};
  dt_comm *w = dt_init(&argc, &argv, &lesson, options);
  int N = w->size, R = (int)root, rounds = ceil_log2(N);
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
  float *want = malloc(nmax * sizeof(float)), *host = malloc(nmax * sizeof(float));
  float *buf = dt_alloc_f32(nmax, DT_COMMBUF);
  CHECK_ALLOC(want);
  CHECK_ALLOC(host);
  /* Small integers (exact in float) that depend on the root; never 0. */
  for (size_t i = 0; i < nmax; i++) want[i] = (float)(1 + (i + (size_t)R) % 8191);
  if (w->rank == R) dt_copy_from_host(buf, want, nmax * sizeof(float));
  long wrong = 0, bytes_bad = 0;

  /* ---- step 1: who sends what, from the counters of one broadcast each */
  uint64_t S = (uint64_t)max_bytes, sent[3], calls[3];
  for (int k = 0; k < 3; k++) {
    dt_comm_reset(w);
    run(w, k, buf, nmax, R, want, host, 1, &wrong);
    dt_kind kind = k == 2 ? DT_BROADCAST : DT_SEND;
    sent[k] = w->count[kind].bytes_sent, calls[k] = w->count[kind].calls;
  }
  int rel = (w->rank - R + N) % N, kids = tree_children(rel, N);
  uint64_t formula[3] = {rel == 0 ? (N - 1) * S : 0, kids * S, rel == N - 1 ? 0 : S};
  bytes_bad += (sent[0] != formula[0]) + (sent[1] != formula[1]) + (sent[2] != formula[2]);
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
  uint64_t total[3], root_calls[3] = {calls[0], calls[1], calls[2]};
  DT_MPI(MPI_Allreduce(sent, total, 3, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD));
  DT_MPI(MPI_Bcast(root_calls, 3, MPI_UINT64_T, R, MPI_COMM_WORLD));
  dt_print0("total over %d ranks: linear %llu B, tree %llu B, library %llu B; "
            "formula (N-1)*S = %llu B\n"
            "root's send calls: linear %llu (N-1 = %d), tree %llu (ceil(log2 N) = %d)\n",
            N, (unsigned long long)total[0], (unsigned long long)total[1],
            (unsigned long long)total[2], (unsigned long long)((N - 1) * S),
            (unsigned long long)root_calls[0], N - 1, (unsigned long long)root_calls[1], rounds);
  dt_print0("Each non-root rank receives S exactly once, so every way moves (N-1)*S in all; "
            "they differ in who sends it\nand in how many steps. The library column is the "
            "common layer's ring model (every rank forwards S,\nbut the last): MPI_Bcast and "
            "NCCL choose their own algorithm, which the counter cannot see.\n\n");
  if (w->rank == 0) { /* the totals are the same on every rank: count them once */
    for (int k = 0; k < 3; k++) bytes_bad += total[k] != (N - 1) * S;
    bytes_bad += (root_calls[0] != (uint64_t)(N - 1)) + (root_calls[1] != (uint64_t)rounds);
  }

  /* ---- step 2: the size sweep */
  dt_print0("step 2: time per broadcast (slowest rank, median over the iterations)\n");
  dt_print0("%12s %6s %12s %12s %12s %10s\n", "bytes", "iters", "linear us", "tree us",
            "library us", "lin/tree");
  int sizes = 0;
  for (int64_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4, sizes++) {
    size_t n = (size_t)bytes / sizeof(float);
    /* fewer iterations for large sizes keep the sweep short: 128 MiB per way */
    int it = (int)(iters < (128 << 20) / bytes ? iters : (128 << 20) / bytes);
    it = it < 2 ? 2 : it;
    double t[3];
    for (int k = 0; k < 3; k++) t[k] = run(w, k, buf, n, R, want, host, it, &wrong);
    dt_print0("%12lld %6d %12.1f %12.1f %12.1f %10.2f\n", (long long)bytes, it, t[0] * 1e6,
              t[1] * 1e6, t[2] * 1e6, t[1] > 0 ? t[0] / t[1] : 0.0);
  }
  if (N > 1)
    dt_print0("model: lin/tree = (N-1)/ceil(log2 N) = %.2f when each send costs the same\n\n",
              (double)(N - 1) / rounds);
  else
    dt_print0("(one rank: nothing to send, the times are the calls' overhead)\n\n");

  /* ---- step 3: the use in training. Every rank must start from the same
   * weights, or data-parallel replicas drift apart from step 0. Rank 0 draws
   * them; the others hold zeros until the broadcast (PyTorch's DDP does the
   * same when it wraps a module). */
  size_t P = (size_t)params;
  float *weights = dt_alloc_f32(P, DT_PARAMS), *local = dt_alloc_f32(P, DT_PARAMS);
  float *wh = malloc(P * sizeof(float)), *lh = malloc(P * sizeof(float));
  CHECK_ALLOC(wh);
  CHECK_ALLOC(lh);
  if (w->rank == 0) dt_fill_uniform(weights, P, (uint64_t)seed, 0, 0, -0.05f, 0.05f);
  dt_copy_to_host(wh, weights, P * sizeof(float));
  dt_print0("step 3: replicate rank 0's freshly initialised weights (%zu floats, %zu bytes)\n", P,
            P * sizeof(float));
  dt_print_ranks("before: checksum %016llx\n", (unsigned long long)checksum(wh, P));
  dt_barrier(w);
  double t0 = dt_now(), mine, slowest;
  dt_broadcast(w, weights, P, DT_F32, 0);
  mine = dt_now() - t0;
  DT_MPI(MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  dt_copy_to_host(wh, weights, P * sizeof(float));
  uint64_t sum = checksum(wh, P), lo, hi;
  dt_print_ranks("after dt_broadcast: checksum %016llx\n", (unsigned long long)sum);
  DT_MPI(MPI_Allreduce(&sum, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD));
  DT_MPI(MPI_Allreduce(&sum, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD));
  /* The RNG is counter-based: the value at (seed, stream, index) is a pure
   * function of the three, so every rank can draw rank 0's weights itself,
   * with no communication at all. Later lessons initialise this way. */
  t0 = dt_now();
  dt_fill_uniform(local, P, (uint64_t)seed, 0, 0, -0.05f, 0.05f);
  dt_sync();
  double draw = dt_now() - t0;
  dt_copy_to_host(lh, local, P * sizeof(float));
  long differ = 0;
  for (size_t i = 0; i < P; i++) differ += lh[i] != wh[i];
  dt_print_ranks("drawn locally from the counter-based RNG: checksum %016llx, %ld elements "
                 "differ\n",
                 (unsigned long long)checksum(lh, P), differ);
  dt_print0(
      "broadcast: %.1f us (slowest rank); local draw on rank 0: %.1f us, no communication\n\n",
      slowest * 1e6, draw * 1e6);

  long totals[3] = {wrong, bytes_bad, differ}, all[3];
  DT_MPI(MPI_Allreduce(totals, all, 3, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
  int ok = all[0] == 0 && all[1] == 0 && all[2] == 0 && lo == hi;
  dt_print0("CHECK %s: linear, tree and library broadcast from root %d, %d sizes, every result "
            "on %d ranks: %ld wrong elements (exact compare); bytes vs formula: %ld mismatches; "
            "weights checksums %s on all ranks, %ld elements differ from the local RNG draw\n",
            ok ? "PASSED" : "FAILED", R, sizes, N, all[0], all[1], lo == hi ? "equal" : "DIFFER",
            all[2]);
  free(want), free(host), free(wh), free(lh);
  dt_free(buf), dt_free(weights), dt_free(local);
  dt_finalize();
  return ok ? 0 : 1;
}
