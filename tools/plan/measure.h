/* measure.h: --measure, this machine as the cost model needs it. */
#ifndef PLAN_MEASURE_H
#define PLAN_MEASURE_H

#include "13_plan/inputs.h"
#include "dt.h"

/* Collective over world; fills c (every rank), ends with the check of the
 * ring's alpha-beta terms: returns the problems found. */
int measure(dt_comm *world, const model *m, const mesh *x, machine *c);
/* collectives.c: the collectives over the world on buf and tmp (n x 512 Ki
 * floats each), fitted into c->ar, rs, ag where messages up to `largest`
 * bytes lie; the sizes whose alpha-beta terms differ from what 03's ring
 * sent */
int measure_collectives(dt_comm *world, machine *c, float *buf, float *tmp, double largest);

#endif
