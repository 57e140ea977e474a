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
 * The tables (report.c) show algbw = S/t and busbw = algbw * 2(N-1)/N: busbw
 * is what each link carried, comparable across N and with the hardware.
 * hierarchical.c adds the all-reduce across nodes (--hierarchical). */
#include <stdio.h>
#include <stdlib.h>

#include "all_reduce.h"

static int64_t min_bytes = 4096, max_bytes = 16 << 20, factor = 4, iters = 10, warmup = 1;
static int64_t count_opt = 0, seg_bytes = 1 << 20, ranks_per_node = 0;
static int hierarchical = 0, no_sweep = 0;

static int mod(int a, int n) { return (a % n + n) % n; }

/* Rank r's i-th input: an integer in 0..255, so any sum of N of them is exact
 * in float32. Hashed rather than periodic, so a chunk summed into the wrong
 * place cannot match the expected values by accident. */
static float value(int r, size_t i) { return (float)(dt_rng_u64(3, (uint64_t)r, i) % 256); }

/* This rank's inputs at count elements, and the exact sums of all ranks'. */
static void fill_inputs(const dt_comm *w, const buffers *b, size_t count) {
  for (size_t i = 0; i < count; i++) {
    b->in[i] = value(w->rank, i);
    b->want[i] = 0;
    for (int r = 0; r < w->size; r++) b->want[i] += value(r, i);
  }
  dt_copy_from_host(b->input, b->in, count * sizeof(float));
}

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

/* One all-reduce of buf with the chosen variant. */
static void all_reduce(dt_comm *w, variant v, float *buf, size_t count, float *scratch,
                       size_t seg) {
  if (v == NAIVE)
    naive_all_reduce(w, buf, count, scratch);
  else if (v == RING)
    ring_all_reduce(w, buf, count, scratch, seg);
  else
    dt_all_reduce(w, buf, buf, count, DT_F32, DT_SUM);
}

static void check_flags(int N) {
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
}

int main(int argc, char **argv) {
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
  int N = w->size, nsizes = 0;
  check_flags(N);
  for (int64_t S = min_bytes; S <= max_bytes; S *= factor) nsizes++;
  size_t seg = (size_t)(seg_bytes + 3) / 4, max_count = (size_t)max_bytes / 4, count = 0;
  dt_print0("config: %d size(s) from %lld to %lld bytes (x%lld), float32 sum, %lld timed calls "
            "per size and variant after %lld warm-up, ring pieces of %lld bytes (0: whole "
            "chunks), busbw = algbw * 2(N-1)/N = algbw * %.3f\n",
            nsizes, (long long)min_bytes, (long long)max_bytes, (long long)factor, (long long)iters,
            (long long)warmup, (long long)seg_bytes, 2.0 * (N - 1) / N);
  if (N == 1)
    dt_print0("note: one rank: an all-reduce in place has nothing to move or add, so each variant "
              "returns at once; the times are a call's overhead, and algbw is no bandwidth\n");
  print_schedule(w);

  /* Host copies (inputs, sums, results), then backend buffers: the inputs,
   * the buffer reduced in place, and the scratch the hand-written variants
   * receive into (naive: a whole buffer; ring: one piece). */
  float *host = dt_host_alloc(3 * max_count, sizeof(float));
  row *rows = dt_host_alloc((size_t)NVARIANTS * nsizes, sizeof *rows);
  double *times = dt_host_alloc(NVARIANTS * iters, sizeof(double));
  buffers b = {.in = host, .want = host + max_count, .out = host + 2 * max_count};
  b.input = dt_alloc_f32(max_count, DT_DATA);
  b.buf = dt_alloc_f32(max_count, DT_COMMBUF);
  b.scratch = dt_alloc_f32(max_count, DT_COMMBUF);
  int64_t wrong = 0, bad_bytes = 0;
  const algorithms alg = {all_reduce, predicted_bytes};
  dt_print0("\n");
  for (int k = 0; k < nsizes; k++) {
    count = k == 0 ? (size_t)min_bytes / 4 : count * (size_t)factor;
    fill_inputs(w, &b, count);
    if (no_sweep) continue; /* inputs and sums ready for the comparison alone */
    row *r = rows + k * NVARIANTS;
    bad_bytes += measure(w, &alg, &b, count, seg, warmup, iters, times, r);
    wrong += r[NAIVE].wrong + r[RING].wrong + r[LIBRARY].wrong;
  }
  if (!no_sweep) print_report(w, rows, nsizes, min_bytes, factor);
  if (ranks_per_node || hierarchical) /* the buffers still hold the largest size's data */
    wrong += compare_hierarchical(w, &alg, (int)ranks_per_node, count, &b, seg, warmup, iters);

  int ok = wrong == 0 && bad_bytes == 0;
  dt_report_string(NULL, "verdict", ok ? "PASSED" : "FAILED");
  if (no_sweep)
    dt_print0("%s: flat ring and hierarchical all-reduce, every element on every rank vs the "
              "exact sum, and bytes across nodes vs the exact predictions: %lld problem(s)\n",
              ok ? "CHECK PASSED" : "CHECK FAILED", (long long)wrong);
  else
    dt_print0("%s: naive, ring and library all-reduce at %d size(s), every element on every "
              "rank vs the exact sum: %lld wrong (tolerance 0, integer-valued floats); bytes sent "
              "vs formula for naive and ring: %lld mismatch(es)\n",
              ok ? "CHECK PASSED" : "CHECK FAILED", nsizes, (long long)wrong, (long long)bad_bytes);
  free(host);
  free(rows);
  free(times);
  dt_free(b.input);
  dt_free(b.buf);
  dt_free(b.scratch);
  dt_finalize();
  return ok ? 0 : 1;
}
