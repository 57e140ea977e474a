/* stash.h: 09_pp's activation stashes, one per microbatch in flight (stash.c). */
#ifndef PP_STASH_H
#define PP_STASH_H

#include "train.h"

/* A microbatch's stash lives from its input's arrival to the end of its
 * backward. Freed slots are reused, like PyTorch's caching allocator, so the
 * DT_ACTIV peak counts the slots the schedule really needed at once. */
typedef struct {
  float **slot, **spare; /* slot[mb] while mb is in flight; spare: slots to reuse */
  int nfree, live, peak; /* peak: the most in flight at once */
  size_t floats;         /* of one slot */
} stashes;
/* Room for M microbatches' slots of `floats` each, whatever a stage keeps
 * (lesson 12: its transformer blocks' activations). */
void stash_slots(stashes *s, int64_t M, size_t floats);
/* Slots for M microbatches' x_0..x_L [R,D], a and h [R,H] of L layers,
 * and `extra` floats after them (zb.c: the blocks' output gradients); act
 * gets the backward's scratch (dx, dnext, dh) of its own. */
void stash_init(stashes *s, dt_acts *act, int64_t M, int64_t L, int64_t R, int64_t D, int64_t H,
                int64_t extra);
float *stash_open(stashes *s, int mb); /* mb's slot, taken on first use */
/* act works on microbatch mb's slot (and y on its rows of by, if any);
 * returns its x_0 */
float *stash_acts(stashes *s, dt_acts *act, int mb, float *by);
void stash_close(stashes *s, int mb);
void stash_free(stashes *s);

#endif
