/* ops.h: every operation of a step timed here, at its own shape (--measure). */
#ifndef PLAN_OPS_H
#define PLAN_OPS_H

#include "13_plan/compute.h"
#include "dt.h"

/* one op's time here: the fastest of `trials` */
double op_time(const op *o, const model *m, int trials);
/* ops14.c: lesson 14's kernels: the floats of an op's largest buffer, one
 * call on ten such buffers p, and what it reads that a forward makes */
int64_t ops14_largest(const op *o);
void ops14_run(const op *o, float **p);
void ops14_prepare(const op *o, float **p);
/* every op of the mesh's step into c->ops (collective over world) */
void time_ops(dt_comm *world, const model *m, const mesh *x, machine *c);

#endif
