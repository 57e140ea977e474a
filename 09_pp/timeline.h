/* timeline.h: a stage's actions, and what 09_pp shows of them (timeline.c):
 * the plan, the measured timeline and the bubble. */
#ifndef PP_TIMELINE_H
#define PP_TIMELINE_H

#include "schedule.h"

/* Every rank's line: its layers (as the lesson words them) and its first 32
 * actions, with V chunks a stage each labelled with its chunk's letter. */
void timeline_plan(dt_comm *world, const action *plan, int n, int V, const char *layers);

/* Each step of a stage runs n actions; each is timed from a clock that
 * every stage starts together, and the fastest step is kept to draw. */
typedef struct timeline timeline;
timeline *timeline_new(int n);
/* the actions run V chunks a stage (interleave.h), or F, B and W (zb: zb.h) */
void timeline_schedule(timeline *t, int V, int zb);
void timeline_start(timeline *t, dt_comm *world); /* a barrier, then the step's clock */
/* Action i began at t0 (dt_span_begin) and has just returned: wait for it
 * to finish, record and trace it. */
void timeline_record(timeline *t, int i, const action *a, double t0);
void timeline_step_end(timeline *t, dt_comm *world); /* after the step's last exchange */
/* Each stage's busy and idle time, the bubble over all steps beside
 * (N-1)/(VM+N-1) (zb: (N-1)/(3M+N-1)), and the fastest step drawn on rank
 * 0. */
void timeline_report(const timeline *t, dt_comm *world, int64_t M);
void timeline_free(timeline *t);

#endif
