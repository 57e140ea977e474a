/* schedule.h: a pipeline stage's plan and its exchanges with its neighbours
 * (schedule.c): lesson 09 runs them over the world, lesson 12 over its
 * pipeline axis, whatever a stage computes. */
#ifndef PP_SCHEDULE_H
#define PP_SCHEDULE_H

#include "train.h"

typedef struct { /* one action of a stage's plan */
  char type;     /* 'F' (forward) or 'B' (backward) */
  int mb;        /* of this microbatch */
} action;

/* Stage s of N's 2M actions in order, into p; returns how many. GPipe runs
 * all forwards, then all backwards; 1F1B's warm-up fills the pipeline below
 * stage s, after it every forward is followed by the oldest backward. */
int pp_plan(int N, int s, int64_t M, int gpipe, action *p);

/* Between two actions (done: NULL before the first; next: NULL after the
 * last) of stage pp->rank: what `done` produced leaves (a forward's output,
 * fwd_out, to the next stage; a backward's input gradient, bwd_out, to the
 * previous one) and what `next` needs arrives (a forward's input into fwd_in
 * from the previous stage; a backward's output gradient into bwd_in from the
 * next one), n floats each way, in ONE sendrecv, in --precision's format
 * (wire: 2n 16-bit floats of room). Returns 1 when bwd_in was filled. */
int pp_exchange(dt_comm *pp, const dt_wire *wire, const action *done, const action *next,
                float *fwd_out, float *bwd_out, float *fwd_in, float *bwd_in, size_t n);

/* Stage s of N's exchanges per step that have a neighbour to talk to: the
 * sendrecv calls its plan (schedule.c, M microbatches) makes. */
int64_t pp_exchanges(int N, int s, int64_t M, int gpipe);

#endif
