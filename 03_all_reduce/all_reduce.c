/* all_reduce.c: lesson 03, all-reduce three ways: naive, ring, library.
 *
 * All-reduce leaves on every rank the element-wise sum of every rank's buffer:
 * the collective behind data-parallel training (lesson 05 sums gradients with
 * it). We write it twice by hand from send/recv and time both beside the
 * library's, nccl-tests style:
 *   naive    every rank sends its buffer to rank 0, which adds them up and sends
 *            the sum back: rank 0 moves 2(N-1) buffers while the others wait;
 *   ring     cut the buffer into N chunks; a reduce-scatter (N-1 steps) leaves
 *            each rank one fully summed chunk, an all-gather (N-1 steps) hands
 *            every chunk to every rank. Each rank sends 2(N-1)/N of the buffer,
 *            all at the same time: the bandwidth-optimal schedule;
 *   library  dt_all_reduce (MPI_Allreduce, or ncclAllReduce on GPUs).
 * Inputs are small integers, so float sums are exact and checked with ==.
 * The table reports algbw = S/t and busbw = algbw * 2(N-1)/N: busbw is what
 * each link carried, so it can be compared across N and with the hardware. */
#include <stdio.h>
#include <stdlib.h>

#include "dt.h"

typedef enum { NAIVE, RING, LIBRARY, NVARIANTS } variant;
static const char *variant_name[NVARIANTS] = {"naive", "ring", "library"};

static int mod(int a, int n) { return (a % n + n) % n; }

/* Rank r's i-th input: an integer in 0..255, so any sum of N of them is exact
 * in float32. Hashed rather than periodic, so a chunk summed into the wrong
 * place cannot match the expected values by accident. */
static float value(int r, size_t i) { return (float)(dt_rng_u64(3, (uint64_t)r, i) % 256); }

/* ---- naive: reduce everything to rank 0, then send the sum back ---- */
static void naive_all_reduce(dt_comm *c, float *buf, size_t count, float *scratch) {
  if (c->rank != 0) {
    dt_send(c, buf, count, DT_F32, 0);
    dt_recv(c, buf, count, DT_F32, 0);
    return;
  }
  /* Rank 0 receives, adds and sends every byte itself, one peer at a time:
   * its link carries (N-1)*S each way while every other link idles. */
  for (int r = 1; r < c->size; r++) {
    dt_recv(c, scratch, count, DT_F32, r);
    dt_add(buf, scratch, count);
  }
  for (int r = 1; r < c->size; r++) dt_send(c, buf, count, DT_F32, r);
}

/* ---- ring: reduce-scatter, then all-gather ---- */
/* Chunk k of a count-element buffer. The first count % N chunks get one extra
 * element, so any count works, even count < N (some chunks are then empty). */
static size_t chunk_len(size_t count, int n, int k) { return count / n + ((size_t)k < count % n); }
static size_t chunk_start(size_t count, int n, int k) {
  size_t extra = count % n;
  return k * (count / n) + ((size_t)k < extra ? (size_t)k : extra);
}

/* One ring step: send chunk send_k to the next rank while chunk recv_k arrives
 * from the previous one. With scratch (reduce-scatter) the chunk moves in
 * pieces of seg elements, and each piece is added into buf as soon as it
 * lands, while it is still in cache. Without scratch (all-gather) it lands in
 * buf in one go: with nothing to add, pieces would only add handshakes. Every
 * rank loops over the largest chunk's pieces, zero-length ones included, so
 * the two ends of each link pair up exactly. */
static void ring_step(dt_comm *c, float *buf, size_t count, int send_k, int recv_k, float *scratch,
                      size_t seg) {
  int n = c->size, next = (c->rank + 1) % n, prev = (c->rank + n - 1) % n;
  size_t s0 = chunk_start(count, n, send_k), sn = chunk_len(count, n, send_k);
  size_t r0 = chunk_start(count, n, recv_k), rn = chunk_len(count, n, recv_k);
  size_t biggest = chunk_len(count, n, 0);
  if (!scratch || seg == 0 || seg > biggest) seg = biggest;
  for (size_t off = 0; off < biggest; off += seg) {
    size_t sc = off < sn ? (sn - off < seg ? sn - off : seg) : 0;
    size_t rc = off < rn ? (rn - off < seg ? rn - off : seg) : 0;
    dt_sendrecv(c, buf + s0 + off, sc, next, scratch ? scratch : buf + r0 + off, rc, prev, DT_F32);
    if (scratch) dt_add(buf + r0 + off, scratch, rc);
  }
}

static void ring_all_reduce(dt_comm *c, float *buf, size_t count, float *scratch, size_t seg) {
  int n = c->size, r = c->rank;
  /* exercise: the ring all-reduce, its two phases */
  /* Reduce-scatter. At step s rank r passes on chunk r-s, which holds the sum
   * of ranks r-s..r, and adds its own part to chunk r-s-1 arriving from r-1.
   * Each chunk travels the whole ring once, picking up one term per hop:
   * after N-1 steps rank r holds chunk r+1 summed over all N ranks. */
  for (int s = 0; s < n - 1; s++)
    ring_step(c, buf, count, mod(r - s, n), mod(r - s - 1, n), scratch, seg);
  /* All-gather. The finished chunks travel the ring once more, now copied
   * instead of added: at step s rank r forwards chunk r+1-s, the one it
   * finished or just received, and receives chunk r-s in place. */
  for (int s = 0; s < n - 1; s++)
    ring_step(c, buf, count, mod(r + 1 - s, n), mod(r - s, n), NULL, 0);
  /* end of exercise */
}

/* Bytes this rank should send in one call, from the algorithm alone. */
static uint64_t predicted_bytes(const dt_comm *c, variant v, size_t count) {
  uint64_t S = count * sizeof(float), n = (uint64_t)c->size;
  if (v == NAIVE) return c->rank == 0 ? (n - 1) * S : (n > 1 ? S : 0);
  if (v == LIBRARY) return 2 * (n - 1) * S / n; /* common's ring model, not a measurement */
  /* ring: each phase sends every chunk but one (reduce-scatter keeps chunk
   * r+1, all-gather never sends chunk r+2): 2(N-1)/N*S when N divides count */
  if (n == 1) return 0;
  int r1 = (c->rank + 1) % c->size, r2 = (c->rank + 2) % c->size;
  return 2 * S - (chunk_len(count, c->size, r1) + chunk_len(count, c->size, r2)) * sizeof(float);
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* ---- hierarchical, across nodes (--hierarchical, --ranks-per-node K) ----
 * A cluster is nodes of a few GPUs: fast links inside, a slower network
 * between. A flat ring crosses the network at every node edge, each edge
 * carrying 2(N-1)/N*S. The hierarchical all-reduce (common/nodes.c) reduces
 * inside each node to its leader, all-reduces among the M leaders only, then
 * broadcasts inside each node: only the leaders' 2(M-1)/M*S each cross the
 * network. The nodes are the real ones (ranks sharing memory: machines of a
 * cluster, or tools/cluster.sh's emulated nodes), or K consecutive ranks. */

/* Both ways at the largest size, call by call in turn (load from other
 * processes hits both alike): time, correctness, bytes across nodes (all
 * ranks together) next to the formulas. Returns the problems found. */
static long compare_hierarchical(dt_comm *w, int K, size_t count, const float *want, float *input,
                                 float *buf, float *scratch, size_t seg, int64_t warmup,
                                 int64_t iters) {
  int N = w->size;
  dt_nodes nodes = dt_nodes_split(w, K);
  int M = nodes.nodes, first, me = w->rank;
  /* a ring rank's sends cross between nodes when its next rank is on another
   * node (nodes named by their lowest rank) */
  int *lowest = malloc((size_t)N * sizeof(int));
  CHECK_ALLOC(lowest);
  DT_MPI(MPI_Allreduce(&me, &first, 1, MPI_INT, MPI_MIN, nodes.node->mpi));
  DT_MPI(MPI_Allgather(&first, 1, MPI_INT, lowest, 1, MPI_INT, MPI_COMM_WORLD));
  int crosses = lowest[(w->rank + 1) % N] != first, edges = 0;
  for (int r = 0; r < N; r++) edges += lowest[(r + 1) % N] != lowest[r];
  free(lowest);
  double *t = malloc(2 * (size_t)iters * sizeof(double)), med[2];
  uint64_t across[4] = {0, 0, 0, 0}; /* measured flat, hierarchical; predicted flat, hierarchical */
  long wrong = 0;
  float *out = malloc(count * sizeof(float));
  CHECK_ALLOC(t);
  CHECK_ALLOC(out);
  dt_comm_reset(w), dt_comm_reset(nodes.leaders);
  for (int64_t it = 0; it < warmup + iters; it++)
    for (int v = 0; v < 2; v++) {
      dt_copy(buf, input, count * sizeof(float));
      dt_barrier(w);
      double t0 = dt_now();
      if (v == 0)
        ring_all_reduce(w, buf, count, scratch, seg);
      else
        dt_all_reduce_hierarchical(&nodes, buf, count, DT_F32, DT_SUM);
      dt_sync();
      if (it >= warmup) t[v * iters + it - warmup] = dt_now() - t0;
      if (it == warmup + iters - 1) {
        dt_copy_to_host(out, buf, count * sizeof(float));
        for (size_t i = 0; i < count; i++) wrong += out[i] != want[i];
      }
    }
  for (int v = 0; v < 2; v++) {
    qsort(t + v * iters, iters, sizeof *t, by_value);
    med[v] = (t[v * iters + (iters - 1) / 2] + t[v * iters + iters / 2]) / 2;
  }
  uint64_t calls = (uint64_t)(warmup + iters);
  if (crosses)
    across[0] = w->count[DT_SENDRECV].bytes_sent / calls,
    across[2] = predicted_bytes(w, RING, count);
  if (nodes.leader)
    across[1] = nodes.leaders->count[DT_ALL_REDUCE].bytes_sent / calls,
    across[3] = 2 * (uint64_t)(M - 1) * count * sizeof(float) / (uint64_t)M;
  DT_MPI(MPI_Allreduce(MPI_IN_PLACE, across, 4, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD));
  DT_MPI(MPI_Allreduce(MPI_IN_PLACE, med, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  DT_MPI(MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
  /* the formulas; the exact per-rank predictions (chunk sizes, and the
   * model's bytes per call) differ from them only when N or M does not
   * divide the count */
  double S = (double)(count * sizeof(float)), flat = edges * 2.0 * (N - 1) / N * S;
  double hier = 2.0 * (M - 1) * S;
  char edges_text[32] = "M";
  if (edges != (M > 1 ? M : 0)) snprintf(edges_text, sizeof edges_text, "%d edges", edges);
  if (K)
    dt_print0("\nhierarchical all-reduce: %d emulated node(s) of %d ranks (--ranks-per-node %d), "
              "S = %llu bytes\n",
              M, K, K, (unsigned long long)(count * sizeof(float)));
  else
    dt_print0("\nhierarchical all-reduce: %d node(s), the ranks that share memory "
              "(--hierarchical), S = %llu bytes\n",
              M, (unsigned long long)(count * sizeof(float)));
  dt_print0("%-14s %10s %31s   %s\n", "variant", "median(us)", "bytes across nodes (all ranks)",
            "formula");
  dt_print0("%-14s %10.1f %31llu   %s x 2(N-1)/N x S = %.10g\n", "flat ring", med[0] * 1e6,
            (unsigned long long)across[0], edges_text, flat);
  dt_print0("%-14s %10.1f %31llu   M x 2(M-1)/M x S = %.10g (the leaders' library all-reduce: "
            "common's ring model)\n",
            "hierarchical", med[1] * 1e6, (unsigned long long)across[1], hier);
  dt_print0("flat / hierarchical = %.2f (medians of %lld calls each, taking turns); bytes "
            "bound per node link: %.3f\n",
            med[0] / med[1], (long long)iters,
            M > 1 && edges == M ? (2.0 * (N - 1) / N) / (2.0 * (M - 1) / M) : 1.0);
  dt_print0("checked: wrong elements over all ranks, both variants: %ld\n", wrong);
  free(out), free(t);
  dt_nodes_free(&nodes);
  return wrong + (across[0] != across[2]) + (across[1] != across[3]);
}

/* One all-reduce of buf with the chosen variant. */
static void run(dt_comm *w, variant v, float *buf, size_t count, float *scratch, size_t seg) {
  if (v == NAIVE)
    naive_all_reduce(w, buf, count, scratch);
  else if (v == RING)
    ring_all_reduce(w, buf, count, scratch, seg);
  else
    dt_all_reduce(w, buf, buf, count, DT_F32, DT_SUM);
}

/* The counter each variant's sends land in: naive uses send/recv, the ring
 * sendrecv, the library its own kind (whose bytes are the ring model). */
static const dt_kind variant_kind[NVARIANTS] = {DT_SEND, DT_SENDRECV, DT_ALL_REDUCE};

typedef struct {
  double seconds, median, formula; /* mean and median time of one call */
  uint64_t sent_max;
  long wrong;
} row;

int main(int argc, char **argv) {
  int64_t min_bytes = 4096, max_bytes = 16 << 20, factor = 4, iters = 10, warmup = 1, count_opt = 0;
  int64_t seg_bytes = 1 << 20, ranks_per_node = 0;
  int hierarchical = 0, no_sweep = 0;
  dt_option options[] = {
      DT_SIZE("--min-bytes", &min_bytes, 4, 1 << 30, "smallest buffer of the sweep"),
      DT_SIZE("--max-bytes", &max_bytes, 4, 1 << 30, "largest buffer of the sweep"),
      DT_INT("--factor", &factor, 2, 1024, "each size is the previous one times this"),
      DT_INT("--count", &count_opt, 0, 1e8,
             "one all-reduce of this many float32 elements instead of the sweep (any count)"),
      DT_INT("--iters", &iters, 1, 100000, "timed calls per size and variant"),
      DT_INT("--warmup", &warmup, 0, 1000, "untimed calls before them"),
      DT_SIZE("--segment", &seg_bytes, 0, 1 << 30,
              "ring piece: received, then added while in cache (0: whole chunks)"),
      DT_INT("--ranks-per-node", &ranks_per_node, 0, 1 << 20,
             "emulate nodes of K consecutive ranks; adds the hierarchical all-reduce (0: off)"),
      DT_FLAG("--hierarchical", &hierarchical,
              "the hierarchical all-reduce over the real nodes (ranks sharing memory)"),
      DT_FLAG("--no-sweep", &no_sweep,
              "with --hierarchical or --ranks-per-node: only flat vs hierarchical, at --max-bytes"),
      DT_END};
  dt_lesson lesson = {"03_all_reduce", "all-reduce by hand (naive, ring) beside the library's", 1};
  dt_comm *w = dt_init(&argc, &argv, &lesson, options);
  int N = w->size;
  if (min_bytes % 4)
    dt_fail("--min-bytes %lld is not a multiple of 4 (float32 elements)", (long long)min_bytes);
  if (max_bytes % 4)
    dt_fail("--max-bytes %lld is not a multiple of 4 (float32 elements)", (long long)max_bytes);
  if (max_bytes < min_bytes)
    dt_fail("--max-bytes %lld is smaller than --min-bytes %lld", (long long)max_bytes,
            (long long)min_bytes);
  if (ranks_per_node && N % ranks_per_node)
    dt_fail("--ranks-per-node %lld does not divide the %d ranks into whole nodes",
            (long long)ranks_per_node, N);
  if (hierarchical && ranks_per_node)
    dt_fail("--hierarchical uses the real nodes, --ranks-per-node K emulated ones: not both");
  if (no_sweep && !hierarchical && !ranks_per_node)
    dt_fail("--no-sweep leaves only the hierarchical comparison: add --hierarchical or "
            "--ranks-per-node K");
  if (no_sweep) min_bytes = max_bytes;
  if (count_opt) min_bytes = max_bytes = 4 * count_opt;
  size_t seg = (size_t)(seg_bytes + 3) / 4, max_count = (size_t)max_bytes / 4;
  int nsizes = 0;
  for (int64_t S = min_bytes; S <= max_bytes; S *= factor) nsizes++;
  double busbw_factor = 2.0 * (N - 1) / N;

  dt_print0("config: %d size(s) from %lld to %lld bytes (x%lld), float32 sum, %lld timed calls "
            "per size and variant after %lld warm-up, ring pieces of %lld bytes (0: whole "
            "chunks), busbw = algbw * 2(N-1)/N = algbw * %.3f\n",
            nsizes, (long long)min_bytes, (long long)max_bytes, (long long)factor, (long long)iters,
            (long long)warmup, (long long)seg_bytes, busbw_factor);
  if (N > 1 && N <= 8) { /* the ring's schedule, per rank */
    char line[256];
    int len = snprintf(line, sizeof line, "reduce-scatter sends chunks");
    for (int s = 0; s < N - 1; s++) len += snprintf(line + len, 16, " %d", mod(w->rank - s, N));
    len += snprintf(line + len, 64, ", then holds chunk %d summed; all-gather sends chunks",
                    (w->rank + 1) % N);
    for (int s = 0; s < N - 1; s++) len += snprintf(line + len, 16, " %d", mod(w->rank + 1 - s, N));
    dt_print0("\nring schedule: chunk k holds elements [k*count/N, (k+1)*count/N)\n");
    dt_print_ranks("%s\n", line);
  }

  /* Buffers for the largest size, allocated once: the pristine inputs, the
   * buffer reduced in place, the scratch the hand-written variants receive
   * into (naive: a whole buffer; ring: one piece), and host copies. */
  float *in = malloc(max_count * sizeof(float)), *want = malloc(max_count * sizeof(float));
  float *out = malloc(max_count * sizeof(float));
  row *rows = calloc((size_t)NVARIANTS * nsizes, sizeof *rows);
  double *times = malloc(NVARIANTS * iters * sizeof(double));
  CHECK_ALLOC(in);
  CHECK_ALLOC(want);
  CHECK_ALLOC(out);
  CHECK_ALLOC(rows);
  CHECK_ALLOC(times);
  float *input = dt_alloc_f32(max_count, DT_DATA), *buf = dt_alloc_f32(max_count, DT_COMMBUF);
  float *scratch = dt_alloc_f32(max_count, DT_COMMBUF);
  long wrong_total = 0, bad_bytes_total = 0;
  uint64_t sent[NVARIANTS] = {0}, pred[NVARIANTS] = {0};

  dt_print0("\n");
  int64_t S = min_bytes;
  for (int k = 0; k < nsizes; k++, S *= factor) {
    size_t count = (size_t)S / 4;
    for (size_t i = 0; i < count; i++) {
      in[i] = value(w->rank, i), want[i] = 0;
      for (int r = 0; r < N; r++) want[i] += value(r, i);
    }
    dt_copy_from_host(input, in, count * sizeof(float));
    if (no_sweep) continue; /* inputs and sums ready for the comparison alone */
    dt_comm_reset(w);
    double seconds[2 * NVARIANTS] = {0}; /* means, then medians */
    long wrong[NVARIANTS + 1] = {0};     /* the last one counts byte mismatches */
    /* The variants take turns call by call, so a burst of load from another
     * process on a shared machine slows all three alike. */
    for (int64_t it = 0; it < warmup + iters; it++)
      for (int v = 0; v < NVARIANTS; v++) {
        dt_copy(buf, input, count * sizeof(float)); /* each call starts from the inputs */
        dt_barrier(w); /* all ranks start together: time the collective, not the skew */
        double t0 = dt_now();
        run(w, (variant)v, buf, count, scratch, seg);
        dt_sync();
        if (it >= warmup) times[v * iters + it - warmup] = dt_now() - t0;
        if (it == warmup + iters - 1) { /* the last call's result, every element */
          dt_copy_to_host(out, buf, count * sizeof(float));
          for (size_t i = 0; i < count; i++) wrong[v] += out[i] != want[i];
        }
      }
    uint64_t sent_max[NVARIANTS];
    for (int v = 0; v < NVARIANTS; v++) {
      sent[v] = w->count[variant_kind[v]].bytes_sent / (uint64_t)(warmup + iters);
      pred[v] = predicted_bytes(w, (variant)v, count);
      wrong[NVARIANTS] += v != LIBRARY && sent[v] != pred[v];
      double *t = times + v * iters;
      for (int64_t i = 0; i < iters; i++) seconds[v] += t[i] / iters;
      qsort(t, iters, sizeof *t, by_value);
      seconds[NVARIANTS + v] = (t[(iters - 1) / 2] + t[iters / 2]) / 2;
    }
    /* the slowest rank's time; the busiest rank's bytes; errors of all ranks */
    DT_MPI(
        MPI_Allreduce(MPI_IN_PLACE, seconds, 2 * NVARIANTS, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    DT_MPI(MPI_Allreduce(sent, sent_max, NVARIANTS, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD));
    DT_MPI(MPI_Allreduce(MPI_IN_PLACE, wrong, NVARIANTS + 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
    for (int v = 0; v < NVARIANTS; v++)
      rows[v * nsizes + k] =
          (row){seconds[v], seconds[NVARIANTS + v],
                v == NAIVE ? (double)(N - 1) * S : busbw_factor * S, sent_max[v], wrong[v]};
    wrong_total += wrong[NAIVE] + wrong[RING] + wrong[LIBRARY], bad_bytes_total += wrong[NVARIANTS];
    dt_print0("checked %lld bytes: wrong elements over all ranks: naive %ld, ring %ld, library "
              "%ld; ranks whose sent bytes miss the formula: %ld\n",
              (long long)S, wrong[NAIVE], wrong[RING], wrong[LIBRARY], wrong[NVARIANTS]);
  }

  if (no_sweep) {
    S /= factor; /* the largest size */
  } else {       /* the tables, then what each rank sent at S, counted by common */
    for (int v = 0; v < NVARIANTS; v++) {
      dt_print0("\n%s all-reduce%s\n%11s %10s %10s %10s %11s %11s %12s %12s %6s\n", variant_name[v],
                v == NAIVE  ? ": reduce to rank 0, send back; formula = rank 0's (N-1)*S"
                : v == RING ? ": reduce-scatter + all-gather; formula = 2(N-1)/N*S"
                            : " (dt_all_reduce); sent = common's ring model 2(N-1)/N*S",
                "bytes", "elements", "time(us)", "median(us)", "algbw(GB/s)", "busbw(GB/s)",
                "sent(B,max)", "formula(B)", "wrong");
      S = min_bytes;
      for (int k = 0; k < nsizes; k++, S *= factor) {
        row *r = &rows[v * nsizes + k];
        double algbw = S / r->seconds / 1e9;
        dt_print0("%11lld %10lld %10.1f %10.1f %11.3f %11.3f %12llu", (long long)S,
                  (long long)S / 4, r->seconds * 1e6, r->median * 1e6, algbw, algbw * busbw_factor,
                  (unsigned long long)r->sent_max);
        if (r->formula == (double)(uint64_t)r->formula) /* exact when N divides the count */
          dt_print0(" %12llu %6ld\n", (unsigned long long)r->formula, r->wrong);
        else
          dt_print0(" %12.2f %6ld\n", r->formula, r->wrong);
      }
    }

    S /= factor; /* the tables leave S one step past the largest size */
    dt_print0("\nbytes each rank sent in one all-reduce of S = %lld bytes (counted vs formula):\n",
              (long long)S);
    dt_print_ranks("naive %llu (%s = %llu) | ring %llu (2(N-1)/N*S = %.10g, from chunk sizes %llu) "
                   "| library %llu (model)\n",
                   (unsigned long long)sent[NAIVE], w->rank == 0 ? "(N-1)*S" : "S",
                   (unsigned long long)pred[NAIVE], (unsigned long long)sent[RING],
                   busbw_factor * S, (unsigned long long)pred[RING],
                   (unsigned long long)sent[LIBRARY]);
    uint64_t sums[2] = {sent[NAIVE], sent[RING]};
    DT_MPI(MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD));
    dt_print0("all ranks together: naive %llu, ring %llu, 2(N-1)*S = %llu: the same bytes, but the "
              "ring spreads them evenly while naive puts half of them on rank 0\n",
              (unsigned long long)sums[0], (unsigned long long)sums[1],
              (unsigned long long)(2 * (uint64_t)(N - 1) * S));
    row *last = rows + nsizes - 1; /* rows of the largest size: last[v * nsizes] */
    if (N > 1)
      dt_print0("at S = %lld: busbw ring / library = %.2f (from medians %.2f), naive / library = "
                "%.2f (from medians %.2f)\n",
                (long long)S, last[LIBRARY * nsizes].seconds / last[RING * nsizes].seconds,
                last[LIBRARY * nsizes].median / last[RING * nsizes].median,
                last[LIBRARY * nsizes].seconds / last[NAIVE * nsizes].seconds,
                last[LIBRARY * nsizes].median / last[NAIVE * nsizes].median);
  }

  if (ranks_per_node || hierarchical) /* the buffers still hold the largest size's data */
    wrong_total += compare_hierarchical(w, (int)ranks_per_node, (size_t)S / 4, want, input, buf,
                                        scratch, seg, warmup, iters);
  free(in), free(want), free(out), free(rows), free(times);
  dt_free(input), dt_free(buf), dt_free(scratch);
  int ok = wrong_total == 0 && bad_bytes_total == 0;
  if (no_sweep)
    dt_print0("%s: flat ring and hierarchical all-reduce, every element on every rank vs the "
              "exact sum, and bytes across nodes vs the exact predictions: %ld problem(s)\n",
              ok ? "CHECK PASSED" : "CHECK FAILED", wrong_total);
  else
    dt_print0("%s: naive, ring and library all-reduce at %d size(s), every element on every "
              "rank vs the exact sum: %ld wrong (tolerance 0, integer-valued floats); bytes sent "
              "vs formula for naive and ring: %ld mismatch(es)\n",
              ok ? "CHECK PASSED" : "CHECK FAILED", nsizes, wrong_total, bad_bytes_total);
  dt_finalize();
  return ok ? 0 : 1;
}
