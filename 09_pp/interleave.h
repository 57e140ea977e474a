/* interleave.h: interleaved 1F1B (Narayanan et al. 2021, Megatron-LM's
 * virtual pipeline), interleave.c. Each of the N stages holds V chunks of
 * the model: chunk c of stage s is virtual stage c N + s, so a microbatch
 * goes round the ring of stages V times forward and V times back. The
 * bubble is the same N-1 slots of fill and drain, but of actions V times
 * shorter: (N-1)/(VM + N-1) of the step. */
#ifndef PP_INTERLEAVE_H
#define PP_INTERLEAVE_H

#include "schedule.h"

/* Refuses (exit 2, with the reason) V chunks a stage where they cannot
 * run: with GPipe, on one stage, where the N V virtual stages do not split
 * the L layers evenly, where N does not divide M. */
void interleave_check(int64_t N, int64_t L, int64_t M, int64_t V, const char *schedule);

/* Stage s's 2MV actions in Megatron's order, into p; returns how many.
 * Forward k runs chunk (k mod NV)/N of microbatch (k div NV) N + k mod N
 * (the microbatches in groups of N, each group through every chunk in
 * turn); backward k the same microbatch through the chunks last to first.
 * A warm-up of pp_warmup_v forwards (formulas.h), then one forward and one backward,
 * then the backwards left. M must be a multiple of N. */
int pp_plan_v(int N, int s, int64_t M, int V, action *p);
/* Stage s's plan (pp_plan_v's 2MV actions, each with its `at` and
 * `parked`) into plan, and the walk's exchanges for it into ev (room for
 * 4MV + 1); returns how many. Every stage's plan is played in the
 * slot model (each action one slot, each starting when its stage is free and
 * its input made; messages free), which sets each action's `at` and the
 * step's length in slots, *T. A message leaves at the end of the slot that
 * made it, and every stage exchanges at that slot boundary, in lockstep:
 * first the forward ring (to s+1, from s-1), then the backward one; a stage
 * runs them before its first action that starts at or after the boundary.
 * So what it receives may wait in its slot: a backward's gradient then
 * sits in its output's place (`parked`). */
int pp_events(int N, int s, int64_t M, int V, action *plan, pp_event *ev, int *T);
/* Prints (rank 0) the step's T slots in the slot model, for V chunks a
 * stage or (zb) ZB-H1, and its bubble beside the formula's. */
void pp_slot_model(int T, int N, int64_t M, int64_t V, int zb);

/* The same for plans already played (zb.c): all holds every stage's per
 * actions with their `at`, T slots; stage s's plan, with `parked`, goes to
 * plan and its exchanges to ev (returns how many). W actions exchange
 * nothing. */
int pp_lockstep(int N, int s, int64_t M, int V, action *all, int per, int T, action *plan,
                pp_event *ev);

#endif
