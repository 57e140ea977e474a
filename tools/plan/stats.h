/* stats.h: a typical one of many timings (measure.c, ops.c, verify.c), and
 * a line fitted through them (measure.c, collectives.c). */
#ifndef PLAN_STATS_H
#define PLAN_STATS_H

double quartile(double *t, int n); /* the lower quartile of n times (sorts them) */
/* t = a x + b y over n sizes S ascending, alpha from the smallest, beta
 * where messages up to `largest` bytes lie: the worst relative residual */
double fit_line(const double *x, const double *y, const double *t, const double *S, int n,
                double largest, double *a, double *b);

#endif
