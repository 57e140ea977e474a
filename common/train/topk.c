/* topk.c: the k entries of largest magnitude, in O(n) on average
 * (quickselect), for 05_dp's --compress topk:R. On the host: on the cuda
 * backend the lesson copies the gradient over first. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train.h"

/* The k-th largest of a[0..n-1] (1 <= k <= n); a is reordered. */
static float kth_largest(float *a, int64_t n, int64_t k) {
  int64_t lo = 0, hi = n - 1, want = k - 1;
  while (lo < hi) {
    float pivot = a[lo + (hi - lo) / 2];
    int64_t i = lo, j = hi;
    while (i <= j) { /* descending: larger values to the left */
      while (a[i] > pivot) i++;
      while (a[j] < pivot) j--;
      if (i <= j) {
        float t = a[i];
        a[i++] = a[j];
        a[j--] = t;
      }
    }
    if (want <= j)
      hi = j;
    else if (want >= i)
      lo = i;
    else
      break;
  }
  return a[want];
}

void dt_topk_indices(const float *x, int64_t n, int64_t k, int32_t *idx) {
  float *mag = malloc((size_t)n * sizeof *mag);
  CHECK_ALLOC(mag);
  for (int64_t i = 0; i < n; i++) mag[i] = fabsf(x[i]);
  float threshold = kth_largest(mag, n, k);
  int64_t taken = 0;
  for (int64_t i = 0; i < n && taken < k; i++) /* everything above the k-th ... */
    if (fabsf(x[i]) > threshold) idx[taken++] = (int32_t)i;
  for (int64_t i = 0; i < n && taken < k; i++) /* ... then ties, in index order */
    if (fabsf(x[i]) == threshold) idx[taken++] = (int32_t)i;
  free(mag);
}
