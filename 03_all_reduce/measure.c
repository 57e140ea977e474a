/* measure.c: lesson 03's harness, nccl-tests style: every variant timed at
 * every size, its result and its bytes checked, then the tables. The
 * algorithms themselves are in all_reduce.c. */
#include <stdio.h>
#include <stdlib.h>

#include "all_reduce.h"

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}
double median(double *t, int64_t n) {
  qsort(t, (size_t)n, sizeof *t, by_value);
  return (t[(n - 1) / 2] + t[n / 2]) / 2;
}

/* The counter each variant's sends land in: naive uses send/recv, the ring
 * sendrecv, the library its own kind (whose bytes are the ring model). */
static const dt_kind variant_kind[NVARIANTS] = {DT_SEND, DT_SENDRECV, DT_ALL_REDUCE};

/* Every variant at one size, warmup + iters calls each. The variants take
 * turns call by call, so a burst of load from another process on a shared
 * machine slows all three alike. Fills r[v]; returns the ranks whose bytes
 * miss the formula (naive and ring). */
int64_t measure(dt_comm *w, const algorithms *alg, const buffers *b, size_t count, size_t seg,
                int64_t warmup, int64_t iters, double *times, row *r) {
  double S = (double)count * 4, seconds[2 * NVARIANTS] = {0}; /* means, then medians */
  int64_t wrong[NVARIANTS + 1] = {0}, sent_max[NVARIANTS];    /* wrong[3]: byte mismatches */
  dt_comm_reset(w);
  for (int64_t it = 0; it < warmup + iters; it++)
    for (int v = 0; v < NVARIANTS; v++) {
      dt_copy(b->buf, b->input, count * sizeof(float)); /* each call starts from the inputs */
      dt_barrier(w); /* all ranks start together: time the collective, not the skew */
      double t0 = dt_now();
      alg->run(w, (variant)v, b->buf, count, b->scratch, seg);
      dt_sync();
      if (it >= warmup) times[v * iters + it - warmup] = dt_now() - t0;
      if (it == warmup + iters - 1) { /* the last call's result, every element */
        dt_copy_to_host(b->out, b->buf, count * sizeof(float));
        for (size_t i = 0; i < count; i++) wrong[v] += b->out[i] != b->want[i];
      }
    }
  for (int v = 0; v < NVARIANTS; v++) {
    r[v].sent = w->count[variant_kind[v]].bytes_sent / (uint64_t)(warmup + iters);
    r[v].predicted = alg->predicted_bytes(w, (variant)v, count);
    wrong[NVARIANTS] += v != LIBRARY && r[v].sent != r[v].predicted;
    sent_max[v] = (int64_t)r[v].sent;
    for (int64_t i = 0; i < iters; i++) seconds[v] += times[v * iters + i] / iters;
    seconds[NVARIANTS + v] = median(times + v * iters, iters);
  }
  /* the slowest rank's time; the busiest rank's bytes; errors of all ranks */
  dt_host_all_reduce(w, seconds, 2 * NVARIANTS, DT_F64, DT_MAX);
  dt_host_all_reduce(w, sent_max, NVARIANTS, DT_I64, DT_MAX);
  dt_host_all_reduce(w, wrong, NVARIANTS + 1, DT_I64, DT_SUM);
  for (int v = 0; v < NVARIANTS; v++) {
    r[v].seconds = seconds[v];
    r[v].median = seconds[NVARIANTS + v];
    r[v].formula = v == NAIVE ? (double)(w->size - 1) * S : 2.0 * (w->size - 1) / w->size * S;
    r[v].sent_max = (uint64_t)sent_max[v];
    r[v].wrong = wrong[v];
  }
  dt_print0("checked %lld bytes: wrong elements over all ranks: naive %lld, ring %lld, library "
            "%lld; ranks whose sent bytes miss the formula: %lld\n",
            (long long)S, (long long)wrong[NAIVE], (long long)wrong[RING],
            (long long)wrong[LIBRARY], (long long)wrong[NVARIANTS]);
  return wrong[NVARIANTS];
}

/* The ring's schedule, per rank (a few ranks only: one line each). */
void print_schedule(const dt_comm *w) {
  int N = w->size;
  if (N < 2 || N > 8) return;
  char line[256];
  int len = snprintf(line, sizeof line, "reduce-scatter sends chunks");
  for (int s = 0; s < N - 1; s++) len += snprintf(line + len, 16, " %d", (w->rank - s + N) % N);
  len += snprintf(line + len, 64, ", then holds chunk %d summed; all-gather sends chunks",
                  (w->rank + 1) % N);
  for (int s = 0; s < N - 1; s++) len += snprintf(line + len, 16, " %d", (w->rank + 1 - s + N) % N);
  dt_print0("\nring schedule: chunk k holds elements [k*count/N, (k+1)*count/N)\n");
  dt_print_ranks("%s\n", line);
}

/* One table per variant, then what each rank sent at the largest size S,
 * counted by common, beside the formulas. */
void print_report(dt_comm *w, const row *rows, int nsizes, int64_t min_bytes, int64_t factor) {
  static const char *title[NVARIANTS] = {
      "naive all-reduce: reduce to rank 0, send back; formula = rank 0's (N-1)*S",
      "ring all-reduce: reduce-scatter + all-gather; formula = 2(N-1)/N*S",
      "library all-reduce (dt_all_reduce); sent = common's ring model 2(N-1)/N*S"};
  int N = w->size;
  double busbw_factor = 2.0 * (N - 1) / N;
  int64_t S = min_bytes;
  for (int v = 0; v < NVARIANTS; v++) {
    dt_print0("\n%s\n%11s %10s %10s %10s %11s %11s %12s %12s %6s\n", title[v], "bytes", "elements",
              "time(us)", "median(us)", "algbw(GB/s)", "busbw(GB/s)", "sent(B,max)", "formula(B)",
              "wrong");
    S = min_bytes;
    for (int k = 0; k < nsizes; k++, S *= factor) {
      const row *r = &rows[k * NVARIANTS + v];
      double algbw = S / r->seconds / 1e9;
      dt_print0("%11lld %10lld %10.1f %10.1f %11.3f %11.3f %12llu", (long long)S, (long long)S / 4,
                r->seconds * 1e6, r->median * 1e6, algbw, algbw * busbw_factor,
                (unsigned long long)r->sent_max);
      char key[48]; /* the row as data: "ring 1048576" */
      snprintf(key, sizeof key, "%s %lld",
               v == NAIVE  ? "naive"
               : v == RING ? "ring"
                           : "library",
               (long long)S);
      dt_report("all_reduce", key,
                "{\"time_us\": %.6g, \"median_us\": %.6g, \"algbw_GBps\": %.6g, \"busbw_GBps\": "
                "%.6g, \"sent_max\": %llu, \"formula\": %.17g, \"wrong\": %lld}",
                r->seconds * 1e6, r->median * 1e6, algbw, algbw * busbw_factor,
                (unsigned long long)r->sent_max, r->formula, (long long)r->wrong);
      if (r->formula == (double)(uint64_t)r->formula) /* exact when N divides the count */
        dt_print0(" %12llu %6lld\n", (unsigned long long)r->formula, (long long)r->wrong);
      else
        dt_print0(" %12.2f %6lld\n", r->formula, (long long)r->wrong);
    }
  }

  S /= factor; /* the loop leaves S one step past the largest size */
  const row *last = rows + (nsizes - 1) * NVARIANTS;
  dt_print0("\nbytes each rank sent in one all-reduce of S = %lld bytes (counted vs formula):\n",
            (long long)S);
  dt_print_ranks("naive %llu (%s = %llu) | ring %llu (2(N-1)/N*S = %.10g, from chunk sizes %llu) "
                 "| library %llu (model)\n",
                 (unsigned long long)last[NAIVE].sent, w->rank == 0 ? "(N-1)*S" : "S",
                 (unsigned long long)last[NAIVE].predicted, (unsigned long long)last[RING].sent,
                 busbw_factor * S, (unsigned long long)last[RING].predicted,
                 (unsigned long long)last[LIBRARY].sent);
  int64_t sums[2] = {(int64_t)last[NAIVE].sent, (int64_t)last[RING].sent};
  dt_host_all_reduce(w, sums, 2, DT_I64, DT_SUM);
  dt_print0("all ranks together: naive %lld, ring %lld, 2(N-1)*S = %llu: the same bytes, but the "
            "ring spreads them evenly while naive puts half of them on rank 0\n",
            (long long)sums[0], (long long)sums[1],
            (unsigned long long)(2 * (uint64_t)(N - 1) * S));
  if (N > 1)
    dt_print0("at S = %lld: busbw ring / library = %.2f (from medians %.2f), naive / library = "
              "%.2f (from medians %.2f)\n",
              (long long)S, last[LIBRARY].seconds / last[RING].seconds,
              last[LIBRARY].median / last[RING].median, last[LIBRARY].seconds / last[NAIVE].seconds,
              last[LIBRARY].median / last[NAIVE].median);
}
