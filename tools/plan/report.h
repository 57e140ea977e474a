/* report.h: a prediction as a table a person reads, or as JSON. */
#ifndef PLAN_REPORT_H
#define PLAN_REPORT_H

#include "13_plan/cost.h"
#include "13_plan/device.h"

void report_table(const model *m, const mesh *x, const machine *c, const prediction *p);
void report_json(const model *m, const mesh *x, const machine *c, const prediction *p);

/* kernels_json.c: 13's list of rank 0's step as the kernels it calls */
typedef struct {
  const char *name; /* the lessons' entry point (op_kernel) */
  int64_t s[5];
  double calls; /* a step */
} kernel_count;
int kernel_list(const model *m, const mesh *x, kernel_count *k, int max, op *apart, int *napart);
void report_kernels(const model *m, const mesh *x); /* ,"kernels": [...] of --json */

#endif
