/* stats.c: the one statistic of many timings that 13_plan uses. */
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
