/* zb.h: the zero-bubble schedule ZB-H1 (Qi et al. 2024), zb.c. A backward
 * is two passes: B, the input's gradient, which the stage before waits for,
 * and W, the weights' gradients, which nobody waits for. 1F1B runs them
 * together; ZB-H1 runs each W where the stage would otherwise wait, so the
 * fill and drain cost a forward and a B, not a whole backward: with F, B
 * and W alike, (N-1)/(3M + N-1) of the step, against 1F1B's
 * (N-1)/(M + N-1) of a step as long. */
#ifndef PP_ZB_H
#define PP_ZB_H

#include "schedule.h"

/* Stage s's 3M actions, into plan, and its exchanges into ev (room for
 * 4M + 1; returns how many), *T the step's slots. Every stage keeps 1F1B's
 * order of F and B and plays it in the slot model (each action one slot,
 * messages free); a W runs where the next F or B cannot: its input not yet
 * made, or an F while the stage holds N microbatches (1F1B's peak, its first
 * stage's), each held until its W; the W's left end the step. The
 * exchanges are interleave.c's, in lockstep at the slots' boundaries. */
int pp_plan_zb(int N, int s, int64_t M, action *plan, pp_event *ev, int *T);

/* B through 09's L MLP blocks of act (weights w, layer l at l 2DH: W1
 * [D,H], W2 [H,D]): from act->dx, the output's gradient, to the input's,
 * left in act->dx; each block's output gradient kept in dy (L x [R,D]), its
 * pre-activation's in a's place, for W. */
void zb_input(dt_acts *act, const float *w, float *dy, int64_t L);
/* W: the blocks' weight gradients added to g (laid out as w), from what B
 * kept */
void zb_weights(const dt_acts *act, float *g, const float *dy, int64_t L);

#endif
