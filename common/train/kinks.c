/* kinks.c: ReLU's decisions within rounding of 0, recorded by a run and
 * replayed by the check's one process (CHECKING.md, "Discrete decisions").
 *
 * relu(a) decides a > 0. Where a pre-activation lies within rounding of 0,
 * two correct runs that sum in different orders can land on either side:
 * one sends that row's gradient through the unit and the other does not,
 * and the two models then differ by the row's whole share of the unit's
 * gradient, not by a rounding error. So the run records every
 * pre-activation within tol |x_i| |W1_j| of 0 (tol = K u: the rounding bound
 * of a dot product, with K the check's longest sum), keyed by step, layer,
 * row and unit. At each step the check compares, every rank's records go to
 * rank 0, where one process, taking the same step from the run's state,
 * meets the same keys; where its own value is within the same tolerance it
 * takes the run's side (replayed), and it counts what it met: near 0 in
 * both, of them decided apart, and near 0 in one run only. A forward pass
 * that is wrong, or rows keyed wrong, shows in those counts; a replay
 * changes one process only where its own number is within rounding of 0, so
 * it cannot make a wrong run match. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"

#define U32 (1.0 / 16777216.0) /* float32's unit roundoff, 2^-24 */

int64_t dt_check_longest_sum(const dt_train_config *c) {
  int64_t K = c->batch > c->dim ? c->batch : c->dim;
  if (c->hidden > K) K = c->hidden;
  int seqs = c->model == DT_TRANSFORMER || c->model == DT_GPT;
  if (seqs && c->batch * c->seq > K) /* a gradient sums B x seq rows */
    K = c->batch * c->seq;
  if (c->model == DT_GPT && c->vocab > K) /* and the head's, V logits */
    K = c->vocab;
  return K;
}

dt_kinks *dt_kinks_new(const dt_train_config *c, int replay) {
  dt_kinks *k = dt_host_alloc(1, sizeof *k);
  k->replay = replay;
  k->tol = (float)((double)dt_check_longest_sum(c) * U32);
  return k;
}

void dt_kinks_free(dt_kinks *k) {
  if (!k) return;
  free(k->calls);
  free(k->k);
  free(k);
}

static void *grow(void *p, int64_t *cap, int64_t need, size_t size) {
  if (need <= *cap) return p;
  *cap = need > 2 * *cap ? need : 2 * *cap;
  p = realloc(p, (size_t)*cap * size);
  CHECK_ALLOC(p);
  return p;
}

/* The run: the call logged, its hits found by the backend (a kernel on cuda,
 * which keeps them until the step ends: no copy, no wait in the step). */
static void record(dt_kinks *k, const dt_rows *where, const float *x, const float *w1,
                   const float *a, int64_t rows, int64_t D, int64_t Hs) {
  k->calls = grow(k->calls, &k->callcap, k->ncalls + 1, sizeof *k->calls);
  k->calls[k->ncalls] = *where;
  dt_kinks_scan(k->ncalls++, x, w1, a, rows, D, Hs, k->tol);
  k->decisions += rows * Hs;
}

void dt_kinks_step_end(dt_kinks *k) {
  if (!k || k->replay) return;
  int64_t lost = 0;
  const dt_kink_hit *h = NULL;
  int64_t n = dt_kinks_fetch(&h, &lost);
  k->k = grow(k->k, &k->cap, k->n + n, sizeof *k->k);
  for (int64_t i = 0; i < n; i++) {
    const dt_rows *c = &k->calls[h[i].call];
    k->k[k->n++] = (dt_kink){k->step,           c->layer, c->keys ? c->keys[h[i].i] : h[i].i,
                             c->unit0 + h[i].j, h[i].a,   h[i].scale};
  }
  k->lost += lost;
  k->ncalls = 0;
}

static int by_key(const void *pa, const void *pb) {
  const dt_kink *a = pa;
  const dt_kink *b = pb;
  int64_t x[4] = {a->step, a->layer, a->row, a->unit}, y[4] = {b->step, b->layer, b->row, b->unit};
  for (int i = 0; i < 4; i++)
    if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
  return 0;
}

/* Bookkeeping, outside the counters: each rank's records of the step
 * padded to the longest, gathered, packed and sorted on rank 0. */
void dt_kinks_pass(dt_kinks *k, dt_kinks *into, dt_comm *world, int keep) {
  enum { WORDS = sizeof(dt_kink) / 8 };
  int64_t made[2] = {k->decisions, k->lost}, P = world->size;
  k->decisions = k->lost = 0;
  if (!keep) { /* every rank alike: a step the check does not compare */
    k->n = 0;
    return;
  }
  int64_t most = k->n;
  int64_t *counts = dt_host_alloc((size_t)P, 8);
  dt_host_gather(world, &k->n, counts, 1, DT_I64, 0);
  dt_host_all_reduce(world, &most, 1, DT_I64, DT_MAX);
  dt_host_reduce(world, made, 2, DT_I64, DT_SUM, 0);
  dt_kink *mine = dt_host_alloc((size_t)(most ? most : 1), sizeof *mine);
  if (k->n) memcpy(mine, k->k, (size_t)k->n * sizeof *mine);
  dt_kink *all = dt_host_alloc(world->rank == 0 ? (size_t)(P * most) + 1 : 1, sizeof *all);
  dt_host_gather(world, mine, all, (size_t)(most * WORDS), DT_I64, 0);
  free(mine);
  k->n = 0;
  if (world->rank == 0) {
    int64_t n = 0;
    for (int64_t r = 0; r < P; r++)
      for (int64_t i = 0; i < counts[r]; i++) all[n++] = all[r * most + i];
    qsort(all, (size_t)n, sizeof *all, by_key);
    free(into->k);
    into->k = all;
    into->n = into->cap = n;
    into->decisions += made[0];
    into->lost += made[1];
  } else {
    free(all);
  }
  free(counts);
}

/* The first record at or after (step, layer, row, unit) */
static int64_t lower(const dt_kinks *k, dt_kink key) {
  int64_t lo = 0, hi = k->n;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (by_key(&k->k[mid], &key) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

typedef struct {
  int64_t key, i;
} keyed_row;
static int by_row_key(const void *pa, const void *pb) {
  const keyed_row *a = pa;
  const keyed_row *b = pb;
  return a->key < b->key ? -1 : a->key > b->key;
}

/* The row of the block that has `key` (keys NULL: the key is the row), or -1 */
static int64_t find_row(const keyed_row *sorted, int64_t rows, int have_keys, int64_t key) {
  if (!have_keys) return key >= 0 && key < rows ? key : -1;
  keyed_row want = {key, 0};
  const keyed_row *f = bsearch(&want, sorted, (size_t)rows, sizeof *sorted, by_row_key);
  return f ? f->i : -1;
}

/* A view of n floats of backend memory on the host (a copy on cuda) */
static float *host_view(const float *buf, int64_t n, int *copied) {
  *copied = !dt_host_sees_device();
  if (!*copied) return (float *)buf;
  float *h = dt_host_alloc((size_t)n, 4);
  dt_copy_to_host(h, buf, (size_t)n * 4);
  return h;
}

/* Near 0 in one process's own numbers, where the run recorded nothing */
static int64_t own_only(const dt_kinks *k, const float *x, const float *w1, const float *a,
                        const unsigned char *seen, int64_t rows, int64_t D, int64_t Hs) {
  float *wn = dt_host_alloc((size_t)Hs, 4);
  for (int64_t d = 0; d < D; d++) /* row by row: each column's terms in order, as the kernel's */
    for (int64_t j = 0; j < Hs; j++) wn[j] = dt_kink_sq_add(wn[j], w1[d * Hs + j]);
  for (int64_t j = 0; j < Hs; j++) wn[j] = sqrtf(wn[j]);
  int64_t n = 0;
  for (int64_t i = 0; i < rows; i++) {
    float xn = 0;
    for (int64_t d = 0; d < D; d++) xn = dt_kink_sq_add(xn, x[i * D + d]);
    xn = sqrtf(xn);
    for (int64_t j = 0; j < Hs; j++)
      n += !seen[i * Hs + j] && dt_kink_near(a[i * Hs + j], xn * wn[j], k->tol);
  }
  free(wn);
  return n;
}

/* One process: the run's records for this block's rows and units, met. */
static void replay(dt_kinks *k, const dt_rows *where, const float *x, const float *w1, float *a,
                   int64_t rows, int64_t D, int64_t Hs) {
  int cx, cw, ca;
  float *hx = host_view(x, rows * D, &cx), *hw = host_view(w1, D * Hs, &cw),
        *ha = host_view(a, rows * Hs, &ca);
  keyed_row *sorted = dt_host_alloc((size_t)rows, sizeof *sorted);
  for (int64_t i = 0; where->keys && i < rows; i++) sorted[i] = (keyed_row){where->keys[i], i};
  if (where->keys) qsort(sorted, (size_t)rows, sizeof *sorted, by_row_key);
  unsigned char *seen = dt_host_alloc((size_t)(rows * Hs), 1);
  int changed = 0;
  for (int64_t r = lower(k, (dt_kink){k->step, where->layer, INT64_MIN, INT64_MIN, 0, 0});
       r < k->n && k->k[r].step == k->step && k->k[r].layer == where->layer; r++) {
    const dt_kink *rec = &k->k[r];
    int64_t i = find_row(sorted, rows, where->keys != NULL, rec->row), j = rec->unit - where->unit0;
    if (i < 0 || j < 0 || j >= Hs) continue; /* another block's */
    float *own = &ha[i * Hs + j];
    seen[i * Hs + j] = 1;
    if (!dt_kink_near(*own, (float)rec->scale, k->tol)) {
      k->run_only++;
      continue;
    }
    k->met++;
    if ((*own > 0) != (rec->a > 0)) { /* decided apart by rounding: the run's side */
      k->flipped++;
      *own = (float)rec->a;
      changed = 1;
    }
  }
  k->own_only += own_only(k, hx, hw, ha, seen, rows, D, Hs);
  if (ca && changed) dt_copy_from_host(a, ha, (size_t)(rows * Hs) * 4);
  if (cx) free(hx);
  if (cw) free(hw);
  if (ca) free(ha);
  free(sorted);
  free(seen);
}

void dt_kinks_meet(const dt_rows *where, const float *x, const float *w1, float *a, int64_t rows,
                   int64_t D, int64_t Hs) {
  if (!where || !where->kinks || rows * Hs == 0) return;
  if (where->kinks->replay)
    replay(where->kinks, where, x, w1, a, rows, D, Hs);
  else
    record(where->kinks, where, x, w1, a, rows, D, Hs);
}

/* A correct run differs from one process by rounding, far below tol: a
 * decision within tol of 0 in both falls on opposite sides only when 0 lies
 * between the two, which a rounding-sized difference makes rare; and a value
 * near 0 in one run and not the other must sit at the tolerance's edge. */
#define FLIP_SHARE 0.0625 /* of the decisions met near 0 in both */
#define EDGE_SHARE 0.25   /* near 0 in one run only, of those met */
#define SLACK      2      /* a count this small is never more than rounding */

int dt_kinks_verdict(const dt_kinks *k, char *why, size_t len) {
  int64_t flip_bound = (int64_t)(FLIP_SHARE * (double)k->met) + SLACK,
          edge_bound = (int64_t)(EDGE_SHARE * (double)k->met) + SLACK,
          edge = k->run_only + k->own_only;
  printf("ReLU decisions: %lld made in the steps compared; %lld within K u |x| |W1| of 0 in both "
         "(K u %.1e), %lld of them decided apart by rounding, replayed in one process; near 0 in "
         "one only: %lld",
         (long long)k->decisions, (long long)k->met, (double)k->tol, (long long)k->flipped,
         (long long)edge);
  if (k->lost)
    printf("; %lld near 0 not recorded (the record was full): not replayed", (long long)k->lost);
  printf("\n");
  why[0] = 0;
  if (k->flipped > flip_bound)
    snprintf(why, len,
             "%lld ReLU decisions near 0 fell apart, more than rounding flips (at most %lld: "
             "1/%.0f of the %lld met, + %d)",
             (long long)k->flipped, (long long)flip_bound, 1 / FLIP_SHARE, (long long)k->met,
             SLACK);
  else if (edge > edge_bound)
    snprintf(why, len,
             "%lld pre-activations near 0 in one run only, more than rounding explains (at most "
             "%lld: 1/%.0f of the %lld met, + %d): the rows' keys or the forward pass differ",
             (long long)edge, (long long)edge_bound, 1 / EDGE_SHARE, (long long)k->met, SLACK);
  if (why[0]) printf("  FAIL ReLU: %s\n", why);
  return why[0] != 0;
}
