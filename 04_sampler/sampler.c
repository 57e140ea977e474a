/* sampler.c: which samples does each rank train on?
 *
 * Lesson 4 is torch.utils.data.DistributedSampler, the piece that splits a
 * data set of n samples over N data-parallel ranks without communicating:
 *   1. every rank draws the same permutation of 0..n-1 from (seed + epoch),
 *      so the order changes each epoch and yet all ranks agree on it;
 *   2. the list is padded by wrapping around to total_size, a multiple of N
 *      (or with --drop-last its tail is cut off to a multiple of N), so that
 *      every rank gets the same number of samples, hence the same number of
 *      steps, and no rank waits forever in an all-reduce the others skipped;
 *   3. rank r takes positions r, r+N, r+2N, ...: num_samples = total_size/N.
 * The sampler itself lives in common (common/comm/sampler.h, sampler.c) because
 * lessons 05-09 draw their batches through it. This lesson prints each rank's
 * share, all-gathers the shares to prove that they cover the data set with
 * exactly the padding as duplicates, and shows how lesson 05 cuts an epoch
 * into global batches. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batches.h"
#include "dt.h"
#include "sampler.h"

static int64_t n = 10, epochs = 3, seed = 0;
static int no_shuffle = 0, drop_last = 0;
/* The formulas, computed in main on their own to hold the sampler to them. */
static int64_t want_ns, want_total, want_pad, want_drop;

/* A measured number over the epochs, shown as lo..hi when it varied. */
static void widen(int64_t v, int64_t *lo, int64_t *hi) {
  if (v < *lo) *lo = v;
  if (v > *hi) *hi = v;
}
static void row(const char *name, int64_t lo, int64_t hi, const char *formula, int64_t want) {
  char m[48];
  if (lo == hi)
    snprintf(m, sizeof m, "%lld", (long long)lo);
  else
    snprintf(m, sizeof m, "%lld..%lld", (long long)lo, (long long)hi);
  dt_print0("  %-22s %10s | %s = %lld\n", name, m, formula, (long long)want);
}

typedef struct {
  int64_t distinct, duplicates, missing, problems, changed;
} tally;

/* Host scratch for the checks, and the all-gather's backend buffers. */
typedef struct {
  int64_t *check, *padded, *prev, *seen;
  int32_t *host, *send, *recv;
} buffers;

static buffers alloc_buffers(int64_t ns, int64_t total) {
  buffers b = {dt_host_alloc((size_t)(ns + 1), sizeof(int64_t)),
               dt_host_alloc((size_t)(total + 1), sizeof(int64_t)),
               dt_host_alloc((size_t)(total + 1), sizeof(int64_t)),
               dt_host_alloc((size_t)n, sizeof(int64_t)),
               dt_host_alloc((size_t)(total + 1), sizeof(int32_t)),
               dt_alloc((size_t)ns * 4, DT_COMMBUF),
               dt_alloc((size_t)total * 4, DT_COMMBUF)};
  return b;
}

/* Check the all-gathered list, put back in position order (padded[p] is the
 * sample at position p of the epoch's padded list). Every rank runs this on
 * its own copy of the gather, so a rank that received something else fails. */
static tally check_padded(const int64_t *padded, int64_t total, int64_t *seen) {
  tally t = {0};
  memset(seen, 0, (size_t)n * sizeof *seen);
  for (int64_t p = 0; p < total; p++) {
    if (padded[p] < 0 || padded[p] >= n) {
      t.problems++;
      continue;
    }
    if (seen[padded[p]]++ == 0) t.distinct++;
    /* A repeat is honest only as padding: past position n, a copy of p - n. */
    else if (p < n || padded[p] != padded[p - n])
      t.problems++;
    if (no_shuffle && padded[p] != p % n) t.problems++; /* no shuffle: 0, 1, ..., n-1, 0, ... */
  }
  t.duplicates = total - t.distinct;
  t.missing = n - t.distinct;
  return t;
}

/* One epoch's shares: the same as a sampler seeded seed + e draws at epoch
 * 0, then all-gathered: covered once, duplicates only as padding, and a new
 * order against the previous epoch (prev). Returns the problems found;
 * widens the summary's ranges. */
static int64_t check_epoch(dt_comm *w, const dt_sampler *s, int64_t e, const int64_t *mine,
                           int64_t ns, buffers *b, tally *lo, tally *hi) {
  int N = w->size;
  int64_t total = ns * N, problems = 0;
  /* The permutation depends on seed + epoch alone: epoch e equals epoch 0
   * of a sampler seeded seed + e (PyTorch seeds its generator the same). */
  if (!no_shuffle) {
    dt_sampler s0 = *s;
    s0.seed = (uint64_t)(seed + e);
    dt_sampler_indices(&s0, 0, b->check);
    for (int64_t k = 0; k < ns; k++) problems += b->check[k] != mine[k];
  }
  for (int64_t k = 0; k < ns; k++) b->host[k] = (int32_t)mine[k];
  /* Collectives move backend memory (GPU buffers on cuda): copy in and out. */
  dt_copy_from_host(b->send, b->host, (size_t)ns * 4);
  dt_all_gather(w, b->send, b->recv, (size_t)ns, DT_I32);
  dt_copy_to_host(b->host, b->recv, (size_t)total * 4);
  /* The gather is rank-major (rank q's k-th sample sits at q*ns + k) and
   * that sample is position q + k*N of the padded list. */
  for (int64_t p = 0; p < total; p++) b->padded[p] = b->host[(p % N) * ns + p / N];
  tally t = check_padded(b->padded, total, b->seen);
  problems += t.problems + (t.duplicates != want_pad) + (t.missing != want_drop);
  dt_print0("all-gathered %lld indices, in position order: %s\n", (long long)total,
            list(b->padded, total, drop_last ? -1 : n));
  dt_print0("  %lld distinct, %lld missing, %lld duplicate%s%s\n", (long long)t.distinct,
            (long long)t.missing, (long long)t.duplicates, t.duplicates == 1 ? "" : "s",
            t.duplicates ? ", every one at a padded position p >= n holding position p - n" : "");
  widen(t.distinct, &lo->distinct, &hi->distinct);
  widen(t.duplicates, &lo->duplicates, &hi->duplicates);
  widen(t.missing, &lo->missing, &hi->missing);
  if (e > 0) {
    int64_t changed = 0;
    for (int64_t p = 0; p < total; p++) changed += b->padded[p] != b->prev[p];
    dt_print0("  %lld of %lld positions differ from epoch %lld\n", (long long)changed,
              (long long)total, (long long)e - 1);
    widen(changed, &lo->changed, &hi->changed);
    /* A repeated order is a bug without doubt only when n! is large: n = 3
     * has 6 orders, and a repeat is mere chance. */
    if (no_shuffle ? changed != 0 : changed == 0 && total >= 8) problems++;
  }
  memcpy(b->prev, b->padded, (size_t)total * sizeof *b->prev);
  return problems;
}

/* Every rank must hold the same count, or the all-gather (and in training
 * the all-reduce of every step) would not match up. Prints the summary;
 * returns the problems found. */
static int64_t summary(dt_comm *w, int64_t ns, const tally *lo, const tally *hi) {
  int64_t ns_min = ns, ns_max = ns, ns_sum = ns;
  dt_host_all_reduce(w, &ns_min, 1, DT_I64, DT_MIN);
  dt_host_all_reduce(w, &ns_max, 1, DT_I64, DT_MAX);
  dt_host_all_reduce(w, &ns_sum, 1, DT_I64, DT_SUM);
  dt_print0("\nsummary over %lld epoch%s: measured (all-gathered indices) | formula\n",
            (long long)epochs, epochs > 1 ? "s" : "");
  row("num_samples per rank", ns_min, ns_max, drop_last ? "floor(n/N)" : "ceil(n/N)", want_ns);
  row("total_size", ns_sum, ns_sum, "num_samples x N", want_total);
  row("duplicates", lo->duplicates, hi->duplicates,
      drop_last ? "padding, none with drop_last" : "padding = total_size - n", want_pad);
  row("missing", lo->missing, hi->missing,
      drop_last ? "dropped = n - total_size" : "dropped, none without drop_last", want_drop);
  row("distinct", lo->distinct, hi->distinct, "n - dropped", n - want_drop);
  if (epochs > 1 && no_shuffle)
    row("positions changed", lo->changed, hi->changed, "none without shuffle", 0);
  else if (epochs > 1)
    row("positions changed", lo->changed, hi->changed, "new order each epoch; at most total_size",
        ns * w->size);
  return (ns_min != want_ns) + (ns_max != want_ns) + (ns_sum != want_total);
}

int main(int argc, char **argv) {
  dt_option options[] = {
      DT_INT("--dataset-size", &n, 1, 1 << 22, "samples in the data set, n"),
      DT_INT("--epochs", &epochs, 1, 1000, "epochs to draw"),
      DT_INT("--seed", &seed, 0, INT64_MAX, "shuffle seed; epoch e uses seed + e"),
      DT_FLAG("--no-shuffle", &no_shuffle, "keep the order 0..n-1 every epoch"),
      DT_FLAG("--drop-last", &drop_last, "cut the tail to a multiple of N instead of padding"),
      DT_END};
  dt_lesson lesson = {"04_sampler",
                      "DistributedSampler: shuffle per epoch, pad to a multiple of N, rank r "
                      "takes r, r+N, ...",
                      1};
  dt_comm *w = dt_init(&argc, &argv, &lesson, options);
  int N = w->size, rank = w->rank;
  dt_sampler s = {.dataset_size = n,
                  .replicas = N,
                  .rank = rank,
                  .shuffle = !no_shuffle,
                  .drop_last = drop_last,
                  .seed = (uint64_t)seed};
  int64_t ns = dt_sampler_num_samples(&s), total = ns * N;
  want_ns = drop_last ? n / N : (n + N - 1) / N;
  want_total = want_ns * N;
  want_pad = drop_last ? 0 : want_total - n;
  want_drop = drop_last ? n - want_total : 0;
  dt_print0("config: n = %lld samples, N = %d ranks, %lld epochs, shuffle %s (seed %lld), "
            "drop_last %s\n",
            (long long)n, N, (long long)epochs, no_shuffle ? "off" : "on", (long long)seed,
            drop_last ? "on" : "off");
  dt_print0("formulas: num_samples = %s(n/N) = %s(%lld/%d) = %lld per rank, total_size = "
            "num_samples x N = %lld, padding = %lld, dropped = %lld\n",
            drop_last ? "floor" : "ceil", drop_last ? "floor" : "ceil", (long long)n, N,
            (long long)want_ns, (long long)want_total, (long long)want_pad, (long long)want_drop);

  int64_t *mine = dt_host_alloc((size_t)(ns + 1), sizeof *mine);
  buffers b = alloc_buffers(ns, total);
  tally lo = {n, n, n, 0, total}, hi = {0, 0, 0, 0, 0};
  int64_t problems = 0;
  for (int64_t e = 0; e < epochs; e++) {
    /* exercise: DistributedSampler (shuffle with seed + epoch, pad, take every N-th) */
    dt_sampler_indices(&s, e, mine);
    /* end of exercise */
    dt_print0("\nepoch %lld\n", (long long)e);
    dt_print_ranks("positions %d + %dk, k < %lld: %s\n", rank, N, (long long)ns,
                   list(mine, ns, -1));
    problems += check_epoch(w, &s, e, mine, ns, &b, &lo, &hi);
  }
  problems += summary(w, ns, &lo, &hi);
  int64_t wrong05 = lesson05_batches(N, rank, seed);
  dt_print_ranks("checks: %lld problems, %lld of lesson 05's samples off their positions\n",
                 (long long)problems, (long long)wrong05);

  int64_t sum[2] = {problems, wrong05};
  dt_host_all_reduce(w, sum, 2, DT_I64, DT_SUM);
  int failed = sum[0] + sum[1] != 0;
  dt_report_string(NULL, "verdict", failed ? "FAILED" : "PASSED");
  dt_print0(
      "\nCHECK %s: %lld epoch(s) all-gathered and checked by %d ranks: coverage, duplicates = "
      "padding (%lld), missing = dropped (%lld), num_samples = %lld; %lld problems, %lld "
      "wrong lesson-05 samples (exact, tolerance 0)\n",
      failed ? "FAILED" : "PASSED", (long long)epochs, N, (long long)want_pad, (long long)want_drop,
      (long long)want_ns, (long long)sum[0], (long long)sum[1]);
  dt_free(b.send);
  dt_free(b.recv);
  free(b.check);
  free(b.padded);
  free(b.prev);
  free(b.seen);
  free(b.host);
  free(mine);
  dt_finalize();
  return failed;
}
