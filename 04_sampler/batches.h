/* batches.h: what sampler.c, the lesson, calls in batches.c (which calls
 * nothing of sampler.c back). */
#ifndef BATCHES_H
#define BATCHES_H

#include <stdint.h>

/* batches.c: up to 16 of count indices as text, " | " before index bar */
char *list(const int64_t *v, int64_t count, int64_t bar);

/* batches.c: lesson 05's global batches of B = 2N over 8N samples, for two
 * epochs, drawn from the sampler and checked against the epoch's shuffle.
 * Returns this rank's samples off their positions. */
int64_t lesson05_batches(int N, int rank, int64_t seed);

#endif
