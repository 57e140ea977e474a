/* measure.h: --measure, this machine as the cost model needs it. */
#ifndef PLAN_MEASURE_H
#define PLAN_MEASURE_H

#include "13_plan/inputs.h"
#include "dt.h"

/* Collective over world; fills c (every rank), ends with the check of the
 * ring's alpha-beta terms: returns the problems found. */
int measure(dt_comm *world, const model *m, const mesh *x, machine *c);

#endif
