/* unit.h: the few lines every unit test program shares: EXPECT, which counts
 * a check and prints the failing condition with rank and line, and the
 * verdict, summed over the ranks into the exit code. */
#ifndef DT_UNIT_H
#define DT_UNIT_H

#include <stdio.h>

#include "train.h"

static int failures = 0, checks = 0;

#define EXPECT(cond, ...)                                                                          \
  do {                                                                                             \
    checks++;                                                                                      \
    if (!(cond)) {                                                                                 \
      failures++;                                                                                  \
      printf("[rank %d] %s:%d: expected %s: ", dt_rank(), __FILE__, __LINE__, #cond);              \
      printf(__VA_ARGS__);                                                                         \
      printf("\n");                                                                                \
    }                                                                                              \
  } while (0)

/* The larger of a and b, a NaN in either kept (fmax passes over one): the
 * tests' running maxima use it, not fmax. Debian 12's GCC 12.2 for arm64
 * stops with an internal compiler error vectorizing an fmax reduction over
 * floats widened to double at -O3 (make test-arm64 met it three times);
 * this form it compiles. tests/suite_style.sh keeps fmax out of them. */
static inline double unit_max(double a, double b) { return a != a ? a : b > a || b != b ? b : a; }

/* Collective: prints UNIT PASSED/FAILED on rank 0, finalizes, returns the
 * exit code. */
static int unit_verdict(void) {
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  dt_print0("%s: %d checks per rank, %d failures over %d ranks\n",
            total ? "UNIT FAILED" : "UNIT PASSED", checks, total, dt_size());
  dt_finalize();
  return total ? 1 : 0;
}

#endif
