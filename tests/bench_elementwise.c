/* bench_elementwise.c: the cpu backend's elementwise work of one 05_dp step,
 * the part of a step that the compiler flags decide (the GEMMs are
 * OpenBLAS's own code): at NP=1 with L=4 D=256 H=1024 B=64, four ReLU
 * forward and four ReLU backward passes over B x H, one SGD step over the
 * 2LDH parameters, the loss and one batch of inputs. Prints the fastest of
 * 300 rounds of each (noise from other processes only ever adds time).
 * Not a unit test; `make bench-flags` builds common with each candidate OPT
 * and runs it, which is how the Makefile's default OPT was chosen. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "train.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  const int64_t L = 4, D = 256, H = 1024, B = 64, P = L * 2 * D * H;
  float *w = calloc((size_t)P, 4), *g = malloc((size_t)P * 4), *a = malloc((size_t)(B * H) * 4),
        *h = malloc((size_t)(B * H) * 4), *dh = malloc((size_t)(B * H) * 4),
        *x = malloc((size_t)(B * D) * 4), *y = malloc((size_t)(B * D) * 4),
        *dx = malloc((size_t)(B * D) * 4);
  if (!w || !g || !a || !h || !dh || !x || !y || !dx) return 1;
  for (int64_t i = 0; i < B * H; i++) /* signs that no branch predictor learns */
    a[i] = (float)((i * 7919) % 1000) / 500.0f - 1.0f, dh[i] = 0.1f;
  for (int64_t i = 0; i < P; i++) g[i] = 1e-3f * (float)(i % 13);
  for (int64_t i = 0; i < B * D; i++) x[i] = 0.5f, y[i] = 0.25f;
  double best[4] = {1e9, 1e9, 1e9, 1e9}, sink = 0;
  for (int rep = 0; rep < 300; rep++) {
    double t[5];
    t[0] = now();
    for (int l = 0; l < L; l++) dt_relu_forward(a, h, (size_t)(B * H));
    t[1] = now();
    for (int l = 0; l < L; l++) dt_relu_backward(a, dh, dh, (size_t)(B * H));
    t[2] = now();
    dt_sgd_step(w, g, (size_t)P, 0.2f, 1.0f);
    t[3] = now();
    sink += dt_mse_forward_backward(x, y, dx, (size_t)(B * D), 1e-3);
    dt_fill_uniform(x, (size_t)(B * D), 1, 2, 3, -1, 1);
    t[4] = now();
    for (int k = 0; k < 4; k++)
      if (t[k + 1] - t[k] < best[k]) best[k] = t[k + 1] - t[k];
  }
  printf("relu forward x4 %.3f ms | relu backward x4 %.3f ms | sgd %.3f ms | loss + batch %.3f ms "
         "| total %.3f ms%s\n",
         best[0] * 1e3, best[1] * 1e3, best[2] * 1e3, best[3] * 1e3,
         (best[0] + best[1] + best[2] + best[3]) * 1e3, sink < 0 ? " " : "");
  free(w), free(g), free(a), free(h), free(dh), free(x), free(y), free(dx);
  MPI_Finalize();
  return 0;
}
