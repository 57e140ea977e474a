/* formulas.c: 06_fsdp's printed formulas, pure (formulas.h). */
#include "formulas.h"

#include "train.h"

void fsdp_traffic(int64_t L, int64_t N, int64_t S, int64_t es, int zero, int64_t took,
                  int64_t steps, int64_t calls[FSDP_KINDS], int64_t bytes[FSDP_KINDS]) {
  int64_t ring = L * (N - 1) * S * es, per = N == 1 && zero == 3 ? 0 : L; /* alone: shard.c */
  calls[FSDP_GATHER] = zero == 3 ? 2 * per : per * took / steps;
  bytes[FSDP_GATHER] = zero == 3 ? 2 * ring : ring * took / steps;
  calls[FSDP_SCATTER] = zero >= 2 ? per : 0;
  bytes[FSDP_SCATTER] = zero >= 2 ? ring : 0;
  calls[FSDP_REDUCE] = zero == 1 ? per : 0;
  bytes[FSDP_REDUCE] = zero == 1 ? 2 * ring : 0;
}

void fsdp_memory(int64_t L, int64_t N, int64_t S, int64_t D, int64_t H, int64_t b, int zero,
                 int prefetch, int adamw, int half, int64_t *mem) {
  int64_t LS = L * S, NS = N > 1 ? N * S : 0, two = zero == 3 && prefetch && L > 1;
  mem[DT_PARAMS] = 4 * (zero == 3 ? LS + (1 + two) * NS : L * NS);
  mem[DT_GRADS] = 4 * (zero == 1 ? L * NS : LS + NS);
  mem[DT_OPTIM] = (adamw ? 8 : 0) * LS;
  mem[DT_ACTIV] = dt_acts_bytes(L, b, D, H);
  mem[DT_COMMBUF] = half ? 2 * ((zero < 3 && prefetch ? L : 1) * NS + NS + (zero >= 2 ? S : 0)) : 0;
}
