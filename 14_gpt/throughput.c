/* throughput.c: 14_gpt's last line, the tokens a second and the model
 * FLOPs utilisation against sgemm's rate measured now at the MLP's shape
 * (apart from report.c, which prints the tables beside the formulas). */
#define _POSIX_C_SOURCE 200809L /* sysconf */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formulas.h"
#include "state.h"

/* sgemm's rate at the MLP's shape, GFLOP/s on the rank's own clock (a
 * core's CPU time, or its GPU's: CUDA events): the yardstick of the model
 * FLOPs utilisation, as a GPU's peak is nanoGPT's */
static double gemm_rate(int64_t M, int64_t N, int64_t K) {
  float *a = dt_alloc_f32((size_t)(M * K + K * N + M * N), DT_OTHER), *b = a + M * K,
        *c = b + K * N;
  double best = 0;
  for (int round = 0; round < 3; round++) {
    int64_t reps = 0;
    dt_work w = {0};
    for (; dt_work_seconds(&w) < 0.05; reps++) {
      dt_work_start(&w);
      dt_matmul(0, 0, M, N, K, a, b, c, 0);
      dt_work_stop(&w);
    }
    double rate = 2.0 * (double)(M * N * K) * (double)reps / dt_work_seconds(&w) / 1e9;
    best = best > rate ? best : rate;
    free(w.events);
  }
  dt_free(a);
  return best;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

void gpt_mfu(const model *m, const dt_run *r) {
  const dt_train_config *c = &r->c;
  int64_t n = c->steps - c->start_step, ranks = m->mesh.world->size,
          cores = sysconf(_SC_NPROCESSORS_ONLN);
  double *ms = dt_host_alloc((size_t)n, sizeof *ms);
  memcpy(ms, r->step_ms + c->start_step, (size_t)n * sizeof *ms);
  qsort(ms, (size_t)n, sizeof *ms, by_value);
  double step = ms[n / 2] / 1e3, tokens = (double)(c->batch * c->seq);
  double flops = gpt_model_flops(c->layers, c->dim, c->hidden, c->vocab, c->seq, c->batch);
  int gpu = dt_device() >= 0; /* a GPU a rank: the ranks' GPUs; else the cores they keep busy */
  int64_t busy = gpu || ranks < cores ? ranks : cores;
  double rate = m->mesh.world->rank == 0 ? gemm_rate(m->step.R, m->weights.Hs, m->weights.D) : 0;
  char of[160];
  if (gpu)
    snprintf(of, sizeof of, "%lld rank%s GPUs, each a GPU of its own", (long long)ranks,
             ranks == 1 ? "'s" : "s'");
  else
    snprintf(of, sizeof of, "min(%lld rank%s, %lld core%s)", (long long)ranks,
             ranks == 1 ? "" : "s", (long long)cores, cores == 1 ? "" : "s");
  dt_print0("throughput: %.0f tokens/s (the median step, %.2f ms, of B x S = %.0f tokens)\n"
            "  model FLOPs %.3f GFLOP a step (nanoGPT's 6N + 12 L D S a token): %.2f GFLOP/s\n"
            "  MFU %.1f%% of %lld x %.2f GFLOP/s: sgemm [R x D] x [D x H/tp] on %s, measured now "
            "%s,\n  x %s\n",
            tokens / step, step * 1e3, tokens, flops / 1e9, flops / step / 1e9,
            100 * flops / step / 1e9 / ((double)busy * rate), (long long)busy, rate,
            gpu ? "rank 0's GPU" : "one core", gpu ? "by CUDA events" : "in CPU time", of);
  if (m->step.recompute) {
    double extra = gpt_recompute_flops(c->layers, c->dim, c->hidden, c->seq, c->batch);
    dt_print0(
        "  --recompute: %.3f GFLOP more a step (the layers' forward again, %.0f%% of the model "
        "FLOPs): the hardware's utilisation %.1f%%\n",
        extra / 1e9, 100 * extra / flops,
        100 * (flops + extra) / step / 1e9 / ((double)busy * rate));
  }
  dt_report(NULL, "mfu", "%.6g", flops / step / 1e9 / ((double)busy * rate));
  free(ms);
}
