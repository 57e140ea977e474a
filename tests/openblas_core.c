/* openblas_core.c: which kernel does OpenBLAS run on this CPU? Prints the
 * core name after one small sgemm, so a kernel the CPU cannot execute (set
 * with OPENBLAS_CORETYPE) dies here with SIGILL instead of inside a lesson.
 * Used by tests/suite_kernels.sh. */
#include <cblas.h>
#include <stdio.h>

char *openblas_get_corename(void);

int main(void) {
  enum { N = 64 };
  static float a[N * N], b[N * N], c[N * N];
  for (int i = 0; i < N * N; i++) a[i] = (float)(i % 7), b[i] = (float)(i % 5);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1, a, N, b, N, 0, c, N);
  printf("%s\n", openblas_get_corename());
  return c[N + 1] > 0 ? 0 : 1;
}
