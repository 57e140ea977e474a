/* stage.h: one step of a pipeline stage (stage.c), whatever it computes:
 * lesson 09 runs its MLP's stages over the world, lesson 12 its
 * transformer blocks' over its pipeline axis. */
#ifndef PP_STAGE_H
#define PP_STAGE_H

#include "schedule.h"
#include "stash.h"
#include "timeline.h"

/* The lesson's part of action a: microbatch a->mb's forward through the
 * stage's layers ('F'), or its backward ('B') from *dx, leaving its input's
 * gradient in *dx. Its slot is the lesson's to open (stash_open: the input
 * may be in it already) and to close after the backward. Returns the
 * action's part of the step's loss. */
typedef double pp_compute(void *lesson, dt_run *r, const action *a);

/* What the walk needs, in three rows of four: where activations travel,
 * the stage's own (09's stashes, plan and timeline), the lesson's. */
typedef struct {
  dt_comm *pp;         /* the stages in order: this one is pp->rank */
  const dt_wire *wire; /* what activations travel in (--precision) */
  size_t n, out;       /* floats of an activation; where a slot holds the stage's output */
  stashes *st;         /* a slot per microbatch (and chunk) in flight, its input x_0 first */
  const action *plan;  /* this stage's (pp_plan, pp_plan_v), nplan actions */
  int nplan;
  timeline *tl;        /* the actions, timed */
  float **dx, **dnext; /* backward's: the gradient that leaves, room for the one that arrives */
  pp_compute *compute; /* the lesson's part of an action, on the lesson's state */
  void *lesson;
} pp_stage;

/* One step: the plan's actions in order, each computed by the lesson and
 * timed, and before each one and after the last its exchanges with the
 * neighbouring stages (pp_exchange). Returns the sum of the actions' loss. */
double pp_step(const pp_stage *s, dt_run *r);

/* With V chunks a stage (interleave.h): chunk c's microbatch mb has slot
 * c M + mb, and the exchanges are the plan's (pp_events), nev of them. */
typedef struct {
  int64_t M;
  const pp_event *ev;
  int nev;
} pp_chunks;
double pp_step_chunks(const pp_stage *s, const pp_chunks *c, dt_run *r);

#endif
