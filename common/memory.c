/* memory.c: the backend's buffers, accounted by tag.
 *
 * Sharding lessons are about memory: 06_fsdp's table of bytes per rank comes
 * from these counters, not from a formula, so the formula can be checked. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
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

#ifdef DT_CUDA
/* Freed device blocks, kept for the next request of the same size: 06 and 08
 * free a gathered layer after use and gather the next one into a new buffer
 * every layer of every step, and cudaMalloc/cudaFree there would cost far
 * more than the work (cudaFree synchronises the whole device) and distort
 * --prefetch's timing. The counters above still follow dt_alloc and dt_free,
 * so the tables show what the algorithm holds, as PyTorch's
 * memory_allocated does; cached_bytes is what is kept besides. A block is
 * reused on the compute stream, after every earlier use of it: the kernels
 * were queued on that stream, and asynchronous collectives have ended in
 * dt_wait. */
static allocation *cache;
static size_t ncache, cache_cap, cached_bytes;

static void *cache_take(size_t n) {
  for (size_t i = ncache; i > 0; i--)
    if (cache[i - 1].bytes == n) {
      void *p = cache[i - 1].ptr;
      cache[i - 1] = cache[--ncache];
      cached_bytes -= n;
      return p;
    }
  return NULL;
}
static void cache_put(void *p, size_t n) {
  if (ncache == cache_cap) {
    cache_cap = cache_cap ? 2 * cache_cap : 64;
    cache = realloc(cache, cache_cap * sizeof *cache);
    CHECK_ALLOC(cache);
  }
  cache[ncache++] = (allocation){p, n, DT_OTHER};
  cached_bytes += n;
}
void dt_mem_release_cache(void) {
  for (size_t i = 0; i < ncache; i++) CHECK_CUDA(cudaFree(cache[i].ptr));
  ncache = 0, cached_bytes = 0;
}
#endif

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
  return (double)free_bytes + (double)cached_bytes;
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
  p = cache_take(n);
  if (!p && cudaMalloc(&p, n) != cudaSuccess) { /* give the cached blocks back, retry */
    (void)cudaGetLastError();
    dt_mem_release_cache();
    if (cudaMalloc(&p, n) != cudaSuccess) p = NULL;
  }
  if (p) CHECK_CUDA(cudaMemsetAsync(p, 0, n, dt_stream()));
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
  cache_put(buf, a.bytes ? a.bytes : 1);
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
  if (dst == src || !bytes) return;
  const char *d = dst, *s = src;
  if (d < s + bytes && s < d + bytes) { /* overlapping: cudaMemcpy's result is undefined */
    static char *scratch;               /* so through a kept copy, as memmove */
    static size_t scratch_size;
    if (scratch_size < bytes) {
      dt_free(scratch);
      scratch = dt_alloc(bytes, DT_OTHER);
      scratch_size = bytes;
    }
    CHECK_CUDA(cudaMemcpyAsync(scratch, src, bytes, cudaMemcpyDeviceToDevice, dt_stream()));
    src = scratch;
  }
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

/* What the tables of the lessons do not show, said where it exists. */
void dt_print_memory_uncounted(void) {
  size_t rounding = dt_rounding_bytes();
  if (rounding)
    dt_print0("    not in the table: matmul's 16-bit rounding copies of its inputs, %zu bytes "
              "(counted under '%s')\n",
              rounding, dt_tag_name(DT_OTHER));
#ifdef DT_CUDA
  size_t free_bytes = 0, total = 0;
  CHECK_CUDA(cudaMemGetInfo(&free_bytes, &total));
  double other = (double)(total - free_bytes) - (double)(current_total + cached_bytes);
  dt_print0("    not in the table: the CUDA context, cuBLAS's and NCCL's own buffers: %.1f MiB "
            "(GPU %d's memory in use, by every process on it, minus this rank's %.1f MiB from "
            "dt_alloc, %.1f MiB of it cached for reuse)\n",
            other / 1048576.0, dt_device(), (double)(current_total + cached_bytes) / 1048576.0,
            (double)cached_bytes / 1048576.0);
#endif
}

void dt_mem_reset_peaks(void) {
  for (int t = 0; t < DT_NTAGS; t++) peak[t] = current[t];
  peak_total = current_total;
}
