/* ops.h: every operation of a step timed here, at its own shape (--measure). */
#ifndef PLAN_OPS_H
#define PLAN_OPS_H

#include "13_plan/compute.h"
#include "dt.h"
#include "train.h"

/* op_run.c: an op's buffers (ten of its largest size, op_largest floats,
 * and its batch's samples), one call of its kernel on them, and its time
 * here: the fastest of `trials` */
typedef struct {
  float *p[10];
  size_t n;
} scratch;
typedef struct {
  scratch b;
  dt_train_config cfg;
  int64_t *samples;
} bench;
int64_t op_largest(const op *o);
void bench_init(bench *h, const op *o, const model *m);
void bench_free(bench *h);
void op_run(const op *o, scratch *b, const dt_train_config *cfg, const int64_t *samples);
double op_time(const op *o, const model *m, int trials);
/* ops14.c: lesson 14's kernels: the floats of an op's largest buffer, one
 * call on ten such buffers p, and what it reads that a forward makes */
int64_t ops14_largest(const op *o);
void ops14_run(const op *o, float **p);
void ops14_prepare(const op *o, float **p);
/* every op of the mesh's step into c->ops (collective over world) */
void time_ops(dt_comm *world, const model *m, const mesh *x, machine *c);

#endif
