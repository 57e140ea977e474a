/* memory.c: the backend's buffers, accounted by tag.
 *
 * Sharding lessons are about memory: 06_fsdp's table of bytes per rank comes
 * from these counters, not from a formula, so the formula can be checked. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt.h"
#ifdef DT_CUDA
#include "dt_cuda.h"
#endif

typedef struct {
  void *ptr;
  size_t bytes;
  dt_tag tag;
} allocation;

static allocation *live; /* a short list: lessons hold tens of buffers */
static size_t nlive, cap;
static size_t current[DT_NTAGS], peak[DT_NTAGS], current_total, peak_total;

const char *dt_tag_name(dt_tag tag) {
  static const char *names[DT_NTAGS] = {"params", "grads", "optim", "activ",
                                        "comm",   "data",  "other"};
  return names[tag];
}

/* What a new allocation may use: free GPU memory, or the kernel's estimate
 * of available host memory (MemAvailable). */
double dt_memory_available(void) {
#ifdef DT_CUDA
  size_t free_bytes = 0, total = 0;
  CHECK_CUDA(cudaMemGetInfo(&free_bytes, &total));
  return (double)free_bytes;
#else
  double kib = -1;
  FILE *f = fopen("/proc/meminfo", "r");
  char line[128];
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "MemAvailable: %lf kB", &kib) == 1) break;
  if (f) fclose(f);
  return kib < 0 ? 1e18 : kib * 1024; /* unknown: do not refuse */
#endif
}

void *dt_alloc(size_t bytes, dt_tag tag) {
  void *p = NULL;
  size_t n = bytes ? bytes : 1;
  /* Ask first: a request the machine cannot hold gets a clear message, not
   * the OOM killer or a swap storm. Small ones are not worth the look. */
  if (bytes > (64u << 20) && (double)bytes > dt_memory_available()) {
    char msg[160];
    snprintf(msg, sizeof msg, "%.2f GiB of %s asked for, only %.2f GiB available",
             bytes / 1073741824.0, dt_tag_name(tag), dt_memory_available() / 1073741824.0);
    dt_fatal(__FILE__, __LINE__, "dt_alloc", msg);
  }
#ifdef DT_CUDA
  if (cudaMalloc(&p, n) != cudaSuccess)
    p = NULL;
  else
    CHECK_CUDA(cudaMemsetAsync(p, 0, n, dt_stream()));
#else
  if (posix_memalign(&p, 64, n) != 0)
    p = NULL;
  else
    memset(p, 0, n);
#endif
  if (!p) dt_fatal(__FILE__, __LINE__, "dt_alloc", "out of memory");
  if (nlive == cap) {
    cap = cap ? 2 * cap : 64;
    live = realloc(live, cap * sizeof *live);
    CHECK_ALLOC(live);
  }
  live[nlive++] = (allocation){p, bytes, tag};
  current[tag] += bytes;
  current_total += bytes;
  if (current[tag] > peak[tag]) peak[tag] = current[tag];
  if (current_total > peak_total) peak_total = current_total;
  return p;
}

float *dt_alloc_f32(size_t count, dt_tag tag) { return dt_alloc(count * sizeof(float), tag); }

void dt_free(void *buf) {
  if (!buf) return;
  size_t i = nlive;
  while (i > 0 && live[i - 1].ptr != buf) i--; /* recent buffers are freed first */
  if (i == 0) dt_fatal(__FILE__, __LINE__, "dt_free", "pointer was not returned by dt_alloc");
  allocation a = live[i - 1];
  live[i - 1] = live[--nlive];
  current[a.tag] -= a.bytes;
  current_total -= a.bytes;
#ifdef DT_CUDA
  CHECK_CUDA(cudaFree(buf));
#else
  free(buf);
#endif
}

void dt_copy_to_host(void *host, const void *buf, size_t bytes) {
#ifdef DT_CUDA
  CHECK_CUDA(cudaMemcpyAsync(host, buf, bytes, cudaMemcpyDeviceToHost, dt_stream()));
  CHECK_CUDA(cudaStreamSynchronize(dt_stream()));
#else
  if (host != buf && bytes) memcpy(host, buf, bytes);
#endif
}

void dt_copy_from_host(void *buf, const void *host, size_t bytes) {
#ifdef DT_CUDA
  CHECK_CUDA(cudaMemcpyAsync(buf, host, bytes, cudaMemcpyHostToDevice, dt_stream()));
  CHECK_CUDA(cudaStreamSynchronize(dt_stream())); /* the host buffer may be reused at once */
#else
  if (host != buf && bytes) memcpy(buf, host, bytes);
#endif
}

void dt_copy(void *dst, const void *src, size_t bytes) {
#ifdef DT_CUDA
  CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, dt_stream()));
#else
  if (dst != src && bytes) memmove(dst, src, bytes);
#endif
}

void dt_zero(void *buf, size_t bytes) {
#ifdef DT_CUDA
  CHECK_CUDA(cudaMemsetAsync(buf, 0, bytes, dt_stream()));
#else
  memset(buf, 0, bytes);
#endif
}

size_t dt_mem_current(dt_tag tag) { return current[tag]; }
size_t dt_mem_peak(dt_tag tag) { return peak[tag]; }
size_t dt_mem_peak_total(void) { return peak_total; }

void dt_mem_reset_peaks(void) {
  for (int t = 0; t < DT_NTAGS; t++) peak[t] = current[t];
  peak_total = current_total;
}
