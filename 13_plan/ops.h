/* ops.h: every operation of a step timed here, at its own shape (--measure). */
#ifndef PLAN_OPS_H
#define PLAN_OPS_H

#include "compute.h"
#include "dt.h"

/* one op's time here: the fastest of `trials` */
double op_time(const op *o, const model *m, int trials);
/* every op of the mesh's step into c->ops (collective over world) */
void time_ops(dt_comm *world, const model *m, const mesh *x, machine *c);

#endif
