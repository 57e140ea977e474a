/* compute.h: the operations one stage computes in a step (what each costs
 * a device: device.h). */
#ifndef PLAN_COMPUTE_H
#define PLAN_COMPUTE_H

#include "device.h"
#include "inputs.h"

int ops_of(const model *m, const mesh *x, int64_t stage, int64_t cprank, op *out, int max);
double attention_seconds(const model *m, const mesh *x, int64_t stage, int64_t cprank,
                         const machine *c, int backward); /* one microbatch, one layer */

#endif
