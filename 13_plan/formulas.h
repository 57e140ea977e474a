/* formulas.h: bytes, memory and FLOPs per rank per step, each cited in
 * formulas.c to the lesson that prints it. */
#ifndef PLAN_FORMULAS_H
#define PLAN_FORMULAS_H

#include "inputs.h"

typedef struct {
  int64_t params, grads, optim, activ, comm, data, total;
} memory;

void traffic_of(const model *m, const mesh *x, int64_t stage, traffic t[NCOMM][NCOLL]);
memory memory_of(const model *m, const mesh *x, int64_t stage);
double parameters_of(const model *m);
double model_flops(const model *m);                   /* per step: 6 x P x tokens + attention */
double hardware_flops(const model *m, const mesh *x); /* with recomputation */

#endif
