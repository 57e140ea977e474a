/* stats.h: a typical one of many timings (measure.c, ops.c, verify.c). */
#ifndef PLAN_STATS_H
#define PLAN_STATS_H

double quartile(double *t, int n); /* the lower quartile of n times (sorts them) */

#endif
