/* formulas.c: 05_dp's printed formulas, pure (formulas.h). */
#include "formulas.h"

#include "train.h"

uint64_t dp_ring_bytes(const size_t *counts, int n, uint64_t N, uint64_t es, int *rounded) {
  uint64_t sum = 0;
  *rounded = 0;
  for (int i = 0; N > 1 && i < n; i++) {
    uint64_t twice = 2 * (N - 1) * counts[i] * es;
    sum += twice / N;
    *rounded |= twice % N != 0;
  }
  return sum;
}

void dp_memory(int64_t L, int64_t D, int64_t H, int64_t b, int adamw, int residual, int64_t *mem) {
  int64_t P = L * 2 * D * H;
  mem[DT_PARAMS] = P * 4;
  mem[DT_GRADS] = P * 4 * (residual ? 2 : 1);
  mem[DT_OPTIM] = adamw ? 2 * P * 4 : 0;
  mem[DT_ACTIV] = dt_acts_bytes(L, b, D, H);
}
