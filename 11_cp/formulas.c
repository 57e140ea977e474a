/* formulas.c: 11_cp's printed formulas, pure (formulas.h). */
#include "formulas.h"

#include "train.h"

int64_t cp_attention_bytes(int64_t L, int64_t N, int64_t R, int64_t D, int64_t es, int ulysses,
                           int64_t want[2]) {
  int64_t RDE = R * D * es;
  want[0] = L * (N - 1) * 2 * RDE;
  want[1] = N > 1 ? L * (2 * N - 1) * 2 * RDE : 0;
  if (ulysses) want[0] = want[1] = L * 4 * (N - 1) * RDE / N;
  return ulysses ? -1 : N > 1 ? L * (3 * N - 2) : 0;
}

int64_t cp_gradient_bytes(int64_t N, int64_t P, int64_t es) { return 2 * (N - 1) * P * es / N; }

int64_t cp_attention_floats(int64_t L, int64_t R, int64_t D, int64_t A, int64_t C, int ulysses,
                            int half) {
  int64_t RD = R * D;
  return 4 * L * RD + (L + 1) * R * A + C * (D + A) +
         (ulysses ? L * (4 * RD + R * A) + 6 * RD + half * RD : 8 * RD);
}

void cp_memory(int64_t L, int64_t R, int64_t D, int64_t H, int64_t A, int64_t C, int ulysses,
               int half, int adamw, int64_t *mem) {
  int64_t P = L * (4 * D * D + 2 * D * H), RD = R * D;
  mem[DT_PARAMS] = mem[DT_GRADS] = P * 4;
  mem[DT_OPTIM] = adamw ? 2 * P * 4 : 0;
  mem[DT_ACTIV] = ((6 * L + 8) * RD + (L + 1) * R * A + (2 * L + 1) * R * H + C * (D + A) +
                   (ulysses ? L * (4 * RD + R * A) + 4 * RD : half * 4 * RD)) *
                  4;
  mem[DT_COMMBUF] = ulysses ? 2 * RD * 4 + half * (2 * RD + P) * 2
                    : half  ? (8 * RD + P) * 2
                            : 8 * RD * 4;
  mem[DT_DATA] = RD * 4;
}
