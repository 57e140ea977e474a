/* plans.c: a stage's plan for any of 09's schedules (plans.h). */
#include <stdlib.h>

#include "interleave.h"
#include "plans.h"
#include "zb.h"

pp_shape pp_plan_any(int N, int s, int64_t M, int V, int gpipe, int zb, action *plan,
                     pp_event *ev) {
  pp_shape k = {0, 0, (int)(2 * (M + N - 1)), (int)(2 * M), 0};
  if (zb) {
    k.nev = pp_plan_zb(N, s, M, plan, ev, &k.T);
    k.n = k.busy = (int)(3 * M);
  } else if (V > 1) {
    k.n = k.busy = pp_plan_v(N, s, M, V, plan);
    k.nev = pp_events(N, s, M, V, plan, ev, &k.T);
  } else {
    k.n = pp_plan(N, s, M, gpipe, plan);
    k.nev = (int)pp_exchanges(N, s, M, gpipe);
  }
  for (int i = 0; i < k.n; i++) k.parked += plan[i].parked;
  return k;
}

pp_shape pp_plan_count(int N, int s, int64_t M, int V, int gpipe, int zb) {
  action *plan = dt_host_alloc((size_t)(3 * M * V), sizeof *plan);
  pp_event *ev = dt_host_alloc((size_t)(4 * M * V + 1), sizeof *ev);
  pp_shape k = pp_plan_any(N, s, M, V, gpipe, zb, plan, ev);
  free(plan);
  free(ev);
  return k;
}
