/* compress.c: --compress topk:R, gradient compression for 05_dp.
 *
 * Each rank sends only its k = R x P largest gradient entries, as (index,
 * value) pairs to every rank (all-gather), and keeps what it did not send as
 * a residual added to next step's gradient (error feedback), so no gradient
 * is lost, only delayed. Every rank then sums the same N sparse vectors in
 * the same order: the replicas stay identical. The selection runs on the
 * host. The residual decides the next step as much as the weights do, so
 * checkpoints hold every rank's (dt_run_rank_state). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress.h"

struct topk {
  int64_t k, P;
  float *residual, *vals, *all_vals; /* backend memory */
  int32_t *idx, *all_idx;
  float *host, *host_vals, *gathered_vals; /* host: P floats, k and N x k */
  int32_t *host_idx, *gathered_idx;
  char what[64]; /* the residual's name in checkpoints */
};

/* The run's verdict with compression: the gradients are not the exact ones,
 * so no run can match one process; it must still learn (CHECKING.md). */
static int converges(dt_run *r) { return dt_check_convergence(&r->c, r->losses, 1.25, "top-k"); }

topk *topk_parse(const char *spec, dt_run *r, int seg, size_t P, int bucketed) {
  const dt_train_config *c = &r->c;
  double ratio = 0;
  char rest = 0;
  if (sscanf(spec, "topk:%lf%c", &ratio, &rest) != 1 || !(ratio > 0 && ratio <= 1))
    dt_fail("--compress %s: expected topk:R with 0 < R <= 1, e.g. topk:0.01", spec);
  if (dt_precision_type(c) != DT_F32) dt_fail("--compress works in fp32 only");
  if (bucketed) dt_fail("--compress replaces the all-reduce: no --overlap or --bucket-mb");
  r->verdict = converges; /* top-k changes the gradients: the check is that it still learns */
  topk *t = dt_host_alloc(1, sizeof *t);
  size_t N = (size_t)dt_size();
  t->P = (int64_t)P;
  t->k = (int64_t)ceil(ratio * (double)P);
  size_t k = (size_t)t->k;
  t->residual = dt_alloc_f32(P, DT_GRADS); /* laid out like the gradients: segment seg */
  snprintf(t->what, sizeof t->what, "--compress topk with k = %lld", (long long)t->k);
  dt_run_rank_state(r, seg, t->residual, t->what);
  t->vals = dt_alloc_f32(k, DT_COMMBUF);
  t->idx = dt_alloc(k * 4, DT_COMMBUF);
  t->all_vals = dt_alloc_f32(N * k, DT_COMMBUF);
  t->all_idx = dt_alloc(N * k * 4, DT_COMMBUF);
  t->host = dt_host_alloc(P, 4);
  t->host_idx = dt_host_alloc(k, 4);
  t->host_vals = dt_host_alloc(k, 4);
  t->gathered_idx = dt_host_alloc(N * k, 4);
  t->gathered_vals = dt_host_alloc(N * k, 4);
  return t;
}

void topk_describe(const topk *t) {
  dt_print0("gradients compressed to their top %lld entries per rank, all-gathered as (index, "
            "value) pairs, with error feedback\n",
            (long long)t->k);
}

void topk_average(topk *t, dt_comm *world, float *g) {
  size_t P = (size_t)t->P, k = (size_t)t->k, N = (size_t)world->size;
  dt_add(t->residual, g, P); /* what to send: this step's gradient + the residual */
  dt_copy_to_host(t->host, t->residual, P * 4);
  dt_topk_indices(t->host, t->P, t->k, t->host_idx);
  for (size_t j = 0; j < k; j++) {
    t->host_vals[j] = t->host[t->host_idx[j]];
    t->host[t->host_idx[j]] = 0;
  }
  dt_copy_from_host(t->residual, t->host, P * 4); /* what stays behind */
  dt_copy_from_host(t->idx, t->host_idx, k * 4);
  dt_copy_from_host(t->vals, t->host_vals, k * 4);
  dt_all_gather(world, t->idx, t->all_idx, k, DT_I32);
  dt_all_gather(world, t->vals, t->all_vals, k, DT_F32);
  dt_copy_to_host(t->gathered_idx, t->all_idx, N * k * 4);
  dt_copy_to_host(t->gathered_vals, t->all_vals, N * k * 4);
  memset(t->host, 0, P * 4);
  for (size_t j = 0; j < N * k; j++) t->host[t->gathered_idx[j]] += t->gathered_vals[j] / (float)N;
  dt_copy_from_host(g, t->host, P * 4);
}

/* What top-k sends, beside what the dense all-reduce would have sent. */
void topk_report(const topk *t, dt_comm *world, uint64_t steps) {
  uint64_t N = (uint64_t)world->size, P = (uint64_t)t->P, k = (uint64_t)t->k;
  uint64_t sent = world->count[DT_ALL_GATHER].bytes_sent / steps, dense = 2 * (N - 1) * P * 4 / N;
  dt_print0("  top-k: k = %llu of %llu gradients per rank; bytes sent per rank per step %llu, "
            "formula (N-1) x k x (4 + 4) = %llu; the dense all-reduce's 2(N-1)/N x P x 4 = %llu "
            "(%.1fx more)\n",
            (unsigned long long)k, (unsigned long long)P, (unsigned long long)sent,
            (unsigned long long)((N - 1) * k * 8), (unsigned long long)dense,
            sent ? (double)dense / (double)sent : 0.0);
}

void topk_free(topk *t) {
  if (!t) return;
  free(t->host);
  free(t->host_idx);
  free(t->host_vals);
  free(t->gathered_idx);
  free(t->gathered_vals);
  free(t);
}
