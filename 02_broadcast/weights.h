/* weights.h: lesson 02's use in training (weights.c), called by broadcast.c. */
#ifndef WEIGHTS_H
#define WEIGHTS_H

#include "dt.h"

/* Step 3: rank 0 draws params weights from seed and broadcasts them; every
 * rank then draws them itself from the counter-based RNG. *equal: the
 * checksums after the broadcast agree on all ranks. Returns this rank's
 * elements that differ from its own draw. Collective. */
int64_t replicate_weights(dt_comm *w, size_t params, uint64_t seed, int *equal);

#endif
