/* openblas_core.c: which kernel does OpenBLAS run on this CPU? Prints the
 * core name after one small sgemm, so a kernel the CPU cannot execute (set
 * with OPENBLAS_CORETYPE) dies here with SIGILL instead of inside a lesson;
 * with --config, OpenBLAS's build line ("OpenBLAS 0.3.21 DYNAMIC_ARCH ...").
 * Used by tests/suite_kernels.sh and bench/check.sh. */
#include <cblas.h>
#include <stdio.h>

#include <string.h>

char *openblas_get_corename(void);
char *openblas_get_config(void);

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--config") == 0) {
    printf("%s\n", openblas_get_config());
    return 0;
  }
  enum { N = 64 };
  static float a[N * N], b[N * N], c[N * N];
  for (int i = 0; i < N * N; i++) a[i] = (float)(i % 7), b[i] = (float)(i % 5);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1, a, N, b, N, 0, c, N);
  printf("%s\n", openblas_get_corename());
  return c[N + 1] > 0 ? 0 : 1;
}
