/* report.h: a prediction as a table a person reads, or as JSON. */
#ifndef PLAN_REPORT_H
#define PLAN_REPORT_H

#include "13_plan/cost.h"

void report_table(const model *m, const mesh *x, const machine *c, const prediction *p);
void report_json(const model *m, const mesh *x, const machine *c, const prediction *p);

#endif
