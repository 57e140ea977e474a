/* schedule.h: a pipeline stage's plan and its exchanges with its neighbours
 * (schedule.c): lesson 09 runs them over the world, lesson 12 over its
 * pipeline axis, whatever a stage computes. */
#ifndef PP_SCHEDULE_H
#define PP_SCHEDULE_H

#include "train.h"

typedef struct { /* one action of a stage's plan */
  char type;     /* 'F' (forward) or 'B' (backward) */
  int mb;        /* of this microbatch */
  int chunk;     /* of the stage's chunk (interleave.c; 0 without virtual stages) */
  int at;        /* its slot where every action takes one (interleave.c) */
  int parked;    /* a backward whose gradient arrived early, into its slot */
} action;

/* One sendrecv of the walk, before action pos of the plan (pos = n: after
 * the last): what out produced leaves for stage dst (a forward's output, a
 * backward's input gradient), what in needs arrives from stage src (a
 * forward's input, a backward's output gradient); DT_NOBODY: no half. */
typedef struct {
  int pos, dst, src;
  action out, in;
} pp_event;

/* Stage s of N's 2M actions in order, into p; returns how many. GPipe runs
 * all forwards, then all backwards; 1F1B's warm-up fills the pipeline below
 * stage s, after it every forward is followed by the oldest backward. */
int pp_plan(int N, int s, int64_t M, int gpipe, action *p);

/* The walk's exchange for a plan of GPipe or 1F1B between two actions
 * (done: NULL before the first; next: NULL after the last) of stage s of
 * N, into e: what `done` produced leaves (a forward's output to the next
 * stage, a backward's input gradient to the previous one) and what `next`
 * needs arrives, in ONE sendrecv. Returns 0 when neither has a neighbour. */
int pp_pair(int N, int s, const action *done, const action *next, pp_event *e);

/* Event e's sendrecv: out (n floats) to e->dst, in from e->src, in
 * --precision's format (wire: 2n 16-bit floats of room). */
void pp_exchange(dt_comm *pp, const dt_wire *wire, const pp_event *e, float *out, float *in,
                 size_t n);

/* Stage s of N's exchanges per step that have a neighbour to talk to: the
 * sendrecv calls its plan (schedule.c, M microbatches) makes. */
int64_t pp_exchanges(int N, int s, int64_t M, int gpipe);

#endif
