/* formulas.c: 09_pp's printed formulas, pure (formulas.h). */
#include "formulas.h"

#include "train.h"

int64_t pp_bytes(int N, int s, int64_t B, int64_t D, int64_t es) {
  return pp_bytes_v(N, s, B, D, es, 1);
}

int64_t pp_bytes_v(int N, int s, int64_t B, int64_t D, int64_t es, int64_t V) {
  return (2 * V - (s == N - 1) - (s == 0)) * B * D * es;
}

int64_t pp_live(int N, int s, int64_t M, int gpipe) { return gpipe || N - s > M ? M : N - s; }

int64_t pp_slot_bytes(int64_t L, int64_t R, int64_t D, int64_t H) {
  return ((L + 1) * R * D + 2 * L * R * H) * 4;
}

int64_t pp_scratch_bytes(int64_t R, int64_t D, int64_t H) { return (2 * R * D + R * H) * 4; }

int64_t pp_live_any(int N, int s, int64_t M, int V, int gpipe, int zb) {
  return V > 1 ? pp_live_v(N, s, M, V) : zb ? pp_live_zb(N, M) : pp_live(N, s, M, gpipe);
}

void pp_memory(int N, int s, int64_t L, int64_t M, int64_t R, int64_t B, int64_t D, int64_t H,
               const int sched[3], int adamw, int64_t *mem) {
  int64_t weights = L * 2 * D * H, V = sched[0] > 1 ? sched[0] : 1, zb = sched[2];
  int64_t slot = pp_slot_bytes(L / V, R, D, H) + zb * L * R * D * 4; /* zb: B's dy kept for W */
  mem[DT_PARAMS] = mem[DT_GRADS] = weights * 4;
  mem[DT_OPTIM] = adamw ? 2 * weights * 4 : 0;
  mem[DT_ACTIV] =
      pp_live_any(N, s, M, (int)V, sched[1], (int)zb) * slot + pp_scratch_bytes(R, D, H);
  mem[DT_DATA] = (s == 0 || s == N - 1) * 2 * B * D * 4;
}

int64_t pp_warmup_v(int N, int s, int64_t M, int V) {
  int64_t w = 2 * (int64_t)(N - 1 - s) + (int64_t)(V - 1) * N;
  return w < M * V ? w : M * V;
}

int64_t pp_live_v(int N, int s, int64_t M, int V) {
  int64_t k = pp_warmup_v(N, s, M, V) + 1 + (s > 0);
  return k < M * V ? k : M * V;
}

int64_t pp_live_zb(int N, int64_t M) { return N < M ? N : M; }
