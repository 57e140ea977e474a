/* all_reduce.h: what the three files of lesson 03 share. all_reduce.c is the
 * lesson (the naive and ring all-reduce, the bytes each rank must send);
 * measure.c times and checks every variant and prints the tables;
 * hierarchical.c adds the two-level all-reduce across nodes (--hierarchical,
 * --ranks-per-node). all_reduce.c passes its algorithms to the other two
 * (algorithms, below); they call nothing of it. */
#ifndef ALL_REDUCE_H
#define ALL_REDUCE_H

#include "dt.h"

typedef enum { NAIVE, RING, LIBRARY, NVARIANTS } variant;

/* One variant at one size: the slowest rank's mean and median time of one
 * call, the formula of the busiest rank's bytes, this rank's sent and
 * predicted bytes, the busiest rank's, and the wrong elements of all ranks. */
typedef struct {
  double seconds, median, formula;
  uint64_t sent, predicted, sent_max;
  int64_t wrong;
} row;

/* Host copies (in, want, out) and backend buffers (input, buf, scratch) for
 * the largest size, allocated once. */
typedef struct {
  float *in, *want, *out;
  float *input, *buf, *scratch;
} buffers;

/* The lesson's algorithms (all_reduce.c), handed as arguments to the files
 * that time them: all_reduce.c calls measure.c and hierarchical.c,
 * hierarchical.c calls measure.c, and nothing calls back. */
typedef struct {
  /* one all-reduce of buf with variant v */
  void (*run)(dt_comm *w, variant v, float *buf, size_t count, float *scratch, size_t seg);
  /* the bytes this rank should send in one call, from the algorithm alone */
  uint64_t (*predicted_bytes)(const dt_comm *c, variant v, size_t count);
} algorithms;

/* measure.c */
double median(double *t, int64_t n); /* sorts t */
/* every variant at one size: fills r[v], returns the ranks whose bytes miss
 * the formula; times holds NVARIANTS * iters */
int64_t measure(dt_comm *w, const algorithms *alg, const buffers *b, size_t count, size_t seg,
                int64_t warmup, int64_t iters, double *times, row *r);
void print_schedule(const dt_comm *w);
/* rows[k * NVARIANTS + v]: size k = min_bytes * factor^k */
void print_report(dt_comm *w, const row *rows, int nsizes, int64_t min_bytes, int64_t factor);

/* hierarchical.c: flat ring vs hierarchical at count elements, with the
 * inputs in b->input and their sums in b->want; returns the problems found */
int64_t compare_hierarchical(dt_comm *w, const algorithms *alg, int ranks_per_node, size_t count,
                             const buffers *b, size_t seg, int64_t warmup, int64_t iters);

#endif
