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
void stash_init(stashes *s, int64_t M, size_t floats);
float *stash_open(stashes *s, int mb); /* mb's slot, taken on first use */
void stash_close(stashes *s, int mb);
void stash_free(stashes *s);

#endif
