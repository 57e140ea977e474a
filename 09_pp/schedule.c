/* schedule.c: a pipeline stage's plan and exchanges (schedule.h). */
#include <stdlib.h>

#include "schedule.h"

int pp_plan(int N, int s, int64_t M, int gpipe, action *p) {
  /* exercise: the schedules, 1F1B's warm-up, steady state and cool-down */
  int n = 0, warm = gpipe ? (int)M : (int)(N - 1 - s < M ? N - 1 - s : M);
  for (int m = 0; m < warm; m++) p[n++] = (action){'F', m};
  for (int m = warm; m < M; m++) {
    p[n++] = (action){'F', m};
    p[n++] = (action){'B', m - warm};
  }
  for (int m = (int)M - warm; m < M; m++) p[n++] = (action){'B', m};
  return n;
  /* end of exercise */
}

/* ONE sendrecv: in 1F1B's steady state stage s sends a forward to s+1 while
 * s+1 sends a backward to s: two blocking sends would wait for each other
 * forever once messages are too big for MPI's eager buffers. */
int pp_exchange(dt_comm *pp, const dt_wire *wire, const action *done, const action *next,
                float *fwd_out, float *bwd_out, float *fwd_in, float *bwd_in, size_t n) {
  float *out = NULL, *in = NULL;
  int dst = DT_NOBODY, src = DT_NOBODY, s = pp->rank, last = pp->size - 1;
  if (done && done->type == 'F' && s < last) {
    out = fwd_out;
    dst = s + 1;
  } else if (done && done->type == 'B' && s > 0) {
    out = bwd_out;
    dst = s - 1;
  }
  if (next && next->type == 'F' && s > 0) {
    in = fwd_in;
    src = s - 1;
  } else if (next && next->type == 'B' && s < last) {
    in = bwd_in;
    src = s + 1;
  }
  if (dst == DT_NOBODY && src == DT_NOBODY) return 0;
  /* In 16 bits: a copy of out is sent, in arrives as a copy and is unpacked. */
  void *recv = in && wire->type != DT_F32 ? (void *)(wire->buf + n) : in;
  dt_sendrecv(pp, out ? dt_wire_pack(wire, out, n, 0, 1) : NULL, out ? n : 0, dst, recv, in ? n : 0,
              src, wire->type);
  if (in) dt_wire_unpack(wire, in, n, n);
  return in != NULL && in == bwd_in;
}

int64_t pp_exchanges(int N, int s, int64_t M, int gpipe) {
  action *plan = dt_host_alloc((size_t)(2 * M), sizeof *plan);
  int n = pp_plan(N, s, M, gpipe, plan), last = N - 1;
  int64_t k = 0;
  for (int i = 0; i <= n; i++) { /* between actions, and after the last: pp_exchange's moments */
    const action *done = i ? &plan[i - 1] : NULL, *next = i < n ? &plan[i] : NULL;
    k += (done && done->type == 'F' && s < last) || (done && done->type == 'B' && s > 0) ||
         (next && next->type == 'F' && s > 0) || (next && next->type == 'B' && s < last);
  }
  free(plan);
  return k;
}
