/* schedule.c: a pipeline stage's plan and exchanges (schedule.h). */
#include <stdlib.h>

#include "schedule.h"

int pp_plan(int N, int s, int64_t M, int gpipe, action *p) {
  /* exercise: the schedules, 1F1B's warm-up, steady state and cool-down */
  int n = 0, warm = gpipe ? (int)M : (int)(N - 1 - s < M ? N - 1 - s : M);
  for (int m = 0; m < warm; m++) p[n++] = (action){.type = 'F', .mb = m};
  for (int m = warm; m < M; m++) {
    p[n++] = (action){.type = 'F', .mb = m};
    p[n++] = (action){.type = 'B', .mb = m - warm};
  }
  for (int m = (int)M - warm; m < M; m++) p[n++] = (action){.type = 'B', .mb = m};
  return n;
  /* end of exercise */
}

/* ONE sendrecv: in 1F1B's steady state stage s sends a forward to s+1 while
 * s+1 sends a backward to s: two blocking sends would wait for each other
 * forever once messages are too big for MPI's eager buffers. */
int pp_pair(int N, int s, const action *done, const action *next, pp_event *e) {
  int last = N - 1;
  *e = (pp_event){0, DT_NOBODY, DT_NOBODY, {0}, {0}};
  if (done && done->type == 'F' && s < last) e->dst = s + 1;
  if (done && done->type == 'B' && s > 0) e->dst = s - 1;
  if (next && next->type == 'F' && s > 0) e->src = s - 1;
  if (next && next->type == 'B' && s < last) e->src = s + 1;
  if (e->dst != DT_NOBODY) e->out = *done;
  if (e->src != DT_NOBODY) e->in = *next;
  return e->dst != DT_NOBODY || e->src != DT_NOBODY;
}

void pp_exchange(dt_comm *pp, const dt_wire *wire, const pp_event *e, float *out, float *in,
                 size_t n) {
  /* In 16 bits: a copy of out is sent, in arrives as a copy and is unpacked. */
  void *recv = in && wire->type != DT_F32 ? (void *)(wire->buf + n) : in;
  dt_sendrecv(pp, out ? dt_wire_pack(wire, out, n, 0, 1) : NULL, out ? n : 0, e->dst, recv,
              in ? n : 0, e->src, wire->type);
  if (in) dt_wire_unpack(wire, in, n, n);
}

int64_t pp_exchanges(int N, int s, int64_t M, int gpipe) {
  action *plan = dt_host_alloc((size_t)(2 * M), sizeof *plan);
  int n = pp_plan(N, s, M, gpipe, plan);
  int64_t k = 0;
  pp_event e;
  for (int i = 0; i <= n; i++) /* between actions, and after the last: the walk's moments */
    k += pp_pair(N, s, i ? &plan[i - 1] : NULL, i < n ? &plan[i] : NULL, &e);
  free(plan);
  return k;
}
