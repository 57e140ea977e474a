/* stats.c: the statistics of many timings the tool uses: a typical one,
 * and a cost line fitted through them. */
#include <math.h>
#include <stdlib.h>

#include "stats.h"

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}
/* The lower quartile of n times (sorts them): a step's messages are
 * typical ones, not the luckiest; the quartile, not the median, so that a
 * burst of another job's load on a shared machine moves it less. */
double quartile(double *t, int n) {
  qsort(t, (size_t)n, sizeof *t, by_value);
  return t[n / 4];
}

/* The fit of t = a x + b y over sizes in ascending order, Hockney's way:
 * alpha from the 3 smallest sizes (latency alone), beta by least squares
 * on the 3 largest sizes up to 4 x the mesh's largest message (largest), less alpha:
 * a cost curve is not a line (a protocol switch, a cache, a shaped link's
 * burst allowance bend it), so it is made straight where this mesh's
 * messages lie. Returns the worst relative residual over every size. */
double fit_line(const double *x, const double *y, const double *t, const double *S, int n,
                double largest, double *a, double *b) {
  double yy = 0, yt = 0, worst = 0;
  int hi = n;
  while (hi > 3 && S[hi - 1] > 4 * largest && largest > 0) hi--;
  *a = 0;
  for (int i = 0; i < 3; i++) *a += t[i] / x[i] / 3;
  for (int i = hi - 3; i < hi; i++) {
    yy += y[i] * y[i];
    yt += y[i] * (t[i] - *a * x[i]);
  }
  *b = yt > 0 ? yt / yy : 0;
  for (int i = 0; i < n; i++) worst = fmax(worst, fabs((*a * x[i] + *b * y[i]) / t[i] - 1));
  return worst;
}
