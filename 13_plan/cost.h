/* cost.h: the cost model, the lesson (cost.c): what one collective costs,
 * and what a step costs a rank: compute + communication + bubble. */
#ifndef PLAN_COST_H
#define PLAN_COST_H

#include "formulas.h"
#include "inputs.h"

/* What a step costs on one rank: every figure of the table and of --json. */
typedef struct {
  int64_t stage;           /* whose figures: 12 prints rank 0's, the planner the worst */
  traffic t[NCOMM][NCOLL]; /* per rank per step */
  memory mem;
  double parameters;                                         /* of the whole model */
  double compute_s, comm_s[NCOMM], bubble_s, once_s, step_s; /* once: data, optimizer */
  double model_flops, hardware_flops, tokens;
  int64_t slots, busy_slots; /* 09's plan in the slot model: the step's, and a stage's busy */
  double others_s;           /* the other stages' microbatch, their mean: the bubble's unit */
  int intra[NCOMM];          /* each axis's group inside one node */
} prediction;

double collective_seconds(int coll, int64_t n, double bytes, const channel *k);
void predict(const model *m, const mesh *x, const machine *c, prediction *p);

#endif
