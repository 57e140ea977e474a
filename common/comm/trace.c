/* trace.c: --trace FILE, a Chrome trace (JSON) of what each rank did when.
 * Open it in Perfetto (ui.perfetto.dev) or chrome://tracing: one track per
 * rank, compute spans from the lessons, communication spans recorded by the
 * collectives themselves. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm_internal.h"
#ifdef DT_CUDA
#include "dt_cuda.h"
#endif

typedef struct {
  char name[24], cat[8];
  double t0, t1;
} span;

static span *spans;
static size_t nspans, cap;
static int enabled;
static double origin;

void dt_trace_enable(int on) {
  enabled = on;
  DT_MPI(MPI_Barrier(MPI_COMM_WORLD)); /* a common time origin for all ranks */
  origin = dt_now();
}
int dt_trace_enabled(void) { return enabled; }

double dt_span_begin(void) {
  if (enabled) dt_sync(); /* on a GPU, time the work, not its launch */
  return dt_now();
}

void dt_span_end(const char *name, const char *cat, double t0) {
  if (!enabled) return;
  dt_sync();
  if (nspans == cap) {
    cap = cap ? 2 * cap : 1024;
    spans = realloc(spans, cap * sizeof *spans);
    CHECK_ALLOC(spans);
  }
  span *s = &spans[nspans++];
  snprintf(s->name, sizeof s->name, "%s", name);
  snprintf(s->cat, sizeof s->cat, "%s", cat);
  s->t0 = t0 - origin;
  s->t1 = dt_now() - origin;
}

void dt_trace_write(const char *path) {
  int size = dt_size(), mine = (int)(nspans * sizeof(span));
  int *counts = malloc((size_t)size * sizeof(int)), *offsets = malloc((size_t)size * sizeof(int));
  CHECK_ALLOC(counts);
  CHECK_ALLOC(offsets);
  DT_MPI(MPI_Allgather(&mine, 1, MPI_INT, counts, 1, MPI_INT, MPI_COMM_WORLD));
  int total = 0;
  for (int r = 0; r < size; r++) {
    offsets[r] = total;
    total += counts[r];
  }
  span *all = dt_rank() == 0 ? malloc((size_t)total + 1) : NULL;
  DT_MPI(MPI_Gatherv(spans, mine, MPI_BYTE, all, counts, offsets, MPI_BYTE, 0, MPI_COMM_WORLD));
  if (dt_rank() == 0) {
    dt_out f;
    dt_out_open(&f, "--trace", path);
    dt_out_printf(&f, "{\"traceEvents\":[\n");
    int first = 1;
    for (int r = 0; r < size; r++) {
      dt_out_printf(&f,
                    "%s{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":%d,\"args\":{"
                    "\"name\":\"rank %d\"}}",
                    first ? "" : ",\n", r, r);
      first = 0;
      span *s = (span *)((char *)all + offsets[r]);
      for (int i = 0; i < counts[r] / (int)sizeof(span); i++)
        dt_out_printf(&f,
                      ",\n{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":0,\"tid\":%d,"
                      "\"ts\":%.3f,\"dur\":%.3f}",
                      s[i].name, s[i].cat, r, s[i].t0 * 1e6, (s[i].t1 - s[i].t0) * 1e6);
    }
    dt_out_printf(&f, "\n]}\n");
    dt_out_close(&f);
    printf("trace: %d spans from %d ranks written to %s (open in ui.perfetto.dev)\n",
           total / (int)sizeof(span), size, path);
  }
  free(all);
  free(counts);
  free(offsets);
}
