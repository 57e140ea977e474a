/* stash.c: 09_pp's activation stashes (stash.h). */
#include <stdlib.h>

#include "stash.h"

void stash_init(stashes *s, dt_acts *act, int64_t M, int64_t L, int64_t R, int64_t D, int64_t H,
                int64_t extra) {
  *act = (dt_acts){.L = L, .R = R, .D = D, .Hs = H}; /* x, a, h: the slots' */
  act->dx = dt_alloc_f32((size_t)(R * D), DT_ACTIV);
  act->dnext = dt_alloc_f32((size_t)(R * D), DT_ACTIV);
  act->dh = dt_alloc_f32((size_t)(R * H), DT_ACTIV);
  stash_slots(s, M, (size_t)((L + 1) * R * D + 2 * L * R * H + extra));
}

void stash_slots(stashes *s, int64_t M, size_t floats) {
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

float *stash_acts(stashes *s, dt_acts *act, int mb, float *by) {
  act->x = stash_open(s, mb);
  act->a = act->x + (act->L + 1) * act->R * act->D;
  act->h = act->a + act->L * act->R * act->Hs;
  if (by) act->y = by + mb * act->R * act->D;
  return act->x;
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
