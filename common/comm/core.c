/* core.c: the facts of this process (who it is, its GPU and stream), how a
 * failure ends the job, printing on rank 0, the clock and timers. The bottom
 * of common: it calls nothing of common; dt_init (runtime.c) sets the facts. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "comm_internal.h"

dt_process dt_rt = {.device = -1};

void dt_fatal(const char *file, int line, const char *call, const char *msg) {
  fprintf(stderr, "[rank %d] %s:%d: %s failed: %s\n", dt_rt.rank, file, line, call, msg);
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  abort(); /* not reached: keeps the compiler sure we never return */
}

int dt_rank(void) { return dt_rt.rank; }
int dt_size(void) { return dt_rt.size; }
int dt_local_rank(void) { return dt_rt.local_rank; }
int dt_device(void) { return dt_rt.device; }
const char *dt_comm_lib(void) { return dt_rt.comm_lib; }
#ifdef DT_CUDA
const char *dt_backend(void) { return "cuda"; }
cudaStream_t dt_stream(void) { return dt_rt.stream; }
cudaStream_t dt_side_stream(void) { return dt_rt.side_stream; }
#else
const char *dt_backend(void) { return "cpu"; }
#endif

double dt_uptime(void) { return MPI_Wtime() - dt_rt.start; }

const char *dt_kind_name(dt_kind k) {
  static const char *names[DT_NKINDS] = {"send",       "recv",       "sendrecv",   "broadcast",
                                         "reduce",     "all_reduce", "all_gather", "reduce_scatter",
                                         "all_to_all", "barrier"};
  return names[k];
}

void dt_print0(const char *fmt, ...) {
  if (dt_rt.rank != 0) return;
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  fflush(stdout);
}

double dt_now(void) { return MPI_Wtime(); }

double dt_cpu_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void dt_sync(void) {
#ifdef DT_CUDA
  CHECK_CUDA(cudaStreamSynchronize(dt_rt.stream));
#endif
}

void dt_timer_start(dt_timer *t) {
#ifdef DT_CUDA
  if (!t->ev_start) {
    CHECK_CUDA(cudaEventCreate((cudaEvent_t *)&t->ev_start));
    CHECK_CUDA(cudaEventCreate((cudaEvent_t *)&t->ev_stop));
  }
  CHECK_CUDA(cudaEventRecord((cudaEvent_t)t->ev_start, dt_rt.stream));
#else
  t->t0 = MPI_Wtime();
#endif
}

double dt_timer_stop(dt_timer *t) {
#ifdef DT_CUDA
  float ms = 0;
  CHECK_CUDA(cudaEventRecord((cudaEvent_t)t->ev_stop, dt_rt.stream));
  CHECK_CUDA(cudaEventSynchronize((cudaEvent_t)t->ev_stop));
  CHECK_CUDA(cudaEventElapsedTime(&ms, (cudaEvent_t)t->ev_start, (cudaEvent_t)t->ev_stop));
  return ms * 1e-3;
#else
  return MPI_Wtime() - t->t0;
#endif
}

#ifdef DT_CUDA
/* Sum the spans whose stop event has happened (wait: all of them), keep the
 * rest; their events go back to be reused. */
static void work_collect(dt_work *w, int wait) {
  int kept = 0;
  for (int i = 0; i + 1 < w->n; i += 2) {
    cudaEvent_t a = (cudaEvent_t)w->events[i];
    cudaEvent_t b = (cudaEvent_t)w->events[i + 1];
    if (wait) CHECK_CUDA(cudaEventSynchronize(b));
    cudaError_t state = cudaEventQuery(b);
    if (state == cudaErrorNotReady) {
      w->events[kept++] = a;
      w->events[kept++] = b;
      continue;
    }
    CHECK_CUDA(state);
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
    w->seconds += ms * 1e-3;
    CHECK_CUDA(cudaEventDestroy(a));
    CHECK_CUDA(cudaEventDestroy(b));
  }
  w->n = kept;
}
#endif

void dt_work_start(dt_work *w) {
#ifdef DT_CUDA
  work_collect(w, 0); /* what has finished, so few events are ever held */
  if (w->n + 2 > w->cap) {
    w->cap = w->cap ? 2 * w->cap : 16;
    w->events = realloc(w->events, (size_t)w->cap * sizeof *w->events);
    CHECK_ALLOC(w->events);
  }
  for (int i = 0; i < 2; i++) CHECK_CUDA(cudaEventCreate((cudaEvent_t *)&w->events[w->n + i]));
  CHECK_CUDA(cudaEventRecord((cudaEvent_t)w->events[w->n], dt_rt.stream));
#else
  w->t0 = dt_cpu_now();
#endif
}

void dt_work_stop(dt_work *w) {
#ifdef DT_CUDA
  CHECK_CUDA(cudaEventRecord((cudaEvent_t)w->events[w->n + 1], dt_rt.stream));
  w->n += 2;
#else
  w->seconds += dt_cpu_now() - w->t0;
#endif
}

double dt_work_seconds(dt_work *w) {
#ifdef DT_CUDA
  work_collect(w, 1);
#endif
  return w->seconds;
}
