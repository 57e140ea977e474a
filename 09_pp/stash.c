/* stash.c: 09_pp's activation stashes (stash.h). */
#include <stdlib.h>

#include "stash.h"

void stash_init(stashes *s, int64_t M, size_t floats) {
  *s = (stashes){.floats = floats};
  s->slot = dt_host_alloc((size_t)(2 * M), sizeof(float *));
  s->spare = s->slot + M;
}

float *stash_open(stashes *s, int mb) {
  if (!s->slot[mb]) {
    s->slot[mb] = s->nfree ? s->spare[--s->nfree] : dt_alloc_f32(s->floats, DT_ACTIV);
    if (++s->live > s->peak) s->peak = s->live;
  }
  return s->slot[mb];
}

void stash_close(stashes *s, int mb) {
  s->spare[s->nfree++] = s->slot[mb];
  s->slot[mb] = NULL;
  s->live--;
}

void stash_free(stashes *s) {
  for (int k = 0; k < s->nfree; k++) dt_free(s->spare[k]);
  free(s->slot);
}
