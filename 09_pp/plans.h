/* plans.h: the plan 09 runs for a stage, whatever its schedule (plans.c):
 * GPipe's and 1F1B's (schedule.c), interleaved 1F1B's (interleave.c) and
 * ZB-H1's (zb.c), with the figures the slot model gives it. 09 runs it;
 * 13_plan prices the same plan (its exchanges, its slots), not a second
 * spelling of it. */
#ifndef PP_PLANS_H
#define PP_PLANS_H

#include "schedule.h"

typedef struct {
  int n;      /* the stage's actions */
  int nev;    /* its exchanges (sendrecv calls) a step */
  int T;      /* the step's slots in the slot model, every action one */
  int busy;   /* of them the stage's: 2M (GPipe, 1F1B), 2VM (V chunks), 3M (ZB-H1's F, B, W) */
  int parked; /* its backwards whose gradient waits in their slot (stage.c copies it out) */
} pp_shape;

/* Stage s of N's plan for M microbatches into plan (room for 3MV
 * actions), and with V > 1 or zb its exchanges into ev (room for 4MV + 1).
 * GPipe and 1F1B take 2(M + N-1) slots (N-1 of fill and N-1 of drain);
 * the others' slots are their plan played (interleave.c, zb.c). */
pp_shape pp_plan_any(int N, int s, int64_t M, int V, int gpipe, int zb, action *plan, pp_event *ev);
/* The same, its buffers its own: the figures alone */
pp_shape pp_plan_count(int N, int s, int64_t M, int V, int gpipe, int zb);

#endif
