/* memory.c: the backend's buffers, accounted by tag.
 *
 * Sharding lessons are about memory: 06_fsdp's table of bytes per rank comes
 * from these counters, not from a formula, so the formula can be checked. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm_internal.h"
#if defined(__GLIBC__) && !defined(DT_CUDA) /* set by <stdio.h> above on glibc alone */
#include <malloc.h>                         /* mallopt: glibc's; musl and macOS have no such knob */
#endif
#if defined(__GLIBC__) && defined(__x86_64__)
#include <cpuid.h>
#include <gnu/libc-version.h>
#include <unistd.h>
#endif
#ifdef DT_CUDA
#include "dt_cuda.h"
#endif

typedef struct {
  void *ptr;
  size_t bytes;
  dt_tag tag; /* DT_NTAGS: made aside (dt_mem_aside), in no count */
} allocation;

static allocation *live; /* a short list: lessons hold tens of buffers */
static size_t nlive, cap;
static size_t current[DT_NTAGS], peak[DT_NTAGS], current_total, peak_total;
static int aside; /* depth of dt_mem_aside(1) */

/* Freed blocks, kept for the next request of the same size: 06 and 08 free
 * a gathered layer and its gradient after use and ask for the next layer's
 * every layer of every step.
 *  - cuda: cudaMalloc/cudaFree there would cost far more than the work
 *    (cudaFree synchronises the whole device) and distort --prefetch's
 *    timing. A block is reused on the compute stream, after every earlier
 *    use of it: the kernels were queued on that stream, and asynchronous
 *    collectives have ended in dt_wait.
 *  - cpu: Open MPI's memory hooks drop what it knows of a buffer when it is
 *    freed, and learn it again at the next collective on a new one at the
 *    same address: 06 --zero 3's reduce-scatter of a 128 KiB gradient took
 *    102-104 us a call beside 28 us on a kept buffer (NP=2, shared memory;
 *    the step's communication 0.57-0.63 ms). Not under AddressSanitizer,
 *    which must see every free to catch a use after it.
 * The counters above still follow dt_alloc and dt_free, so the tables show
 * what the algorithm holds, as PyTorch's memory_allocated does;
 * cached_bytes is what is kept besides. */
#if defined(__SANITIZE_ADDRESS__)
#define DT_KEEP_FREED 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DT_KEEP_FREED 0
#endif
#endif
#ifndef DT_KEEP_FREED
#define DT_KEEP_FREED 1
#endif
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
  if (!DT_KEEP_FREED) {
    if (dt_boundary_owns(p))
      dt_boundary_free(p);
    else
      free(p);
    return;
  }
  if (ncache == cache_cap) {
    cache_cap = cache_cap ? 2 * cache_cap : 64;
    cache = realloc(cache, cache_cap * sizeof *cache);
    CHECK_ALLOC(cache);
  }
  cache[ncache++] = (allocation){p, n, DT_OTHER};
  cached_bytes += n;
}
void dt_mem_release_cache(void) {
#ifdef DT_CUDA
  for (size_t i = 0; i < ncache; i++) CHECK_CUDA(cudaFree(cache[i].ptr));
#else
  for (size_t i = 0; i < ncache; i++)
    if (dt_boundary_owns(cache[i].ptr))
      dt_boundary_free(cache[i].ptr);
    else
      free(cache[i].ptr);
#endif
  ncache = 0;
  cached_bytes = 0;
}

void dt_mem_init(void) {
  dt_boundary_init();
#if defined(__GLIBC__) && !defined(DT_CUDA)
  /* 06 and 08 allocate and free a layer's buffers every step (their memory
   * tables measure that). glibc returned such blocks to the kernel (mmap,
   * munmap), so every step page-faulted them in again: keep freed memory in
   * the heap instead (06 --zero 3, L=4 D=256 H=1024 B=64: 44.4 -> 35.4-36.7 ms
   * per step at NP=1, 39.4 -> 29.0-29.8 at NP=2). Other C libraries keep
   * their own policy: musl, macOS (the sources must build on any C11 + POSIX
   * libc; tests/suite_portability.sh compiles them against musl). */
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
}

/* glibc before 2.39 copies with `rep movsb` on AMD CPUs where the
 * destination lies just past the source modulo a page, which those CPUs run
 * several times slower than the vector loop (glibc bug 30994). Open MPI's
 * reduce-scatter copies between heap blocks of one size, which lie so or
 * not by chance of the heap's layout: 06 --zero 3's step took 0.88-1.13 ms
 * in some runs and 0.47 ms in others (NP=2, EPYC, glibc 2.36; a 128 KiB
 * reduce-scatter 25-106 us), a swing no cost model (13) can predict. Such a
 * process starts itself again at once, before MPI knows of it: the same
 * process and arguments, with glibc's own switch for it in GLIBC_TUNABLES.
 * Not under valgrind (it would run the new image outside valgrind); a
 * GLIBC_TUNABLES that names the switch already is left as it is. */
void dt_mem_reexec(char **argv) {
#if defined(__GLIBC__) && defined(__x86_64__) && !defined(DT_CUDA)
  unsigned r[4]; /* eax, ebx, ecx, edx */
  int major = 0, minor = 0;
  const char *old = getenv("GLIBC_TUNABLES"), *pre = getenv("LD_PRELOAD");
  if (sscanf(gnu_get_libc_version(), "%d.%d", &major, &minor) != 2 || major * 100 + minor >= 239 ||
      !__get_cpuid(0, &r[0], &r[1], &r[2], &r[3]) || r[1] != 0x68747541 /* "Auth" enticAMD */ ||
      (old && strstr(old, "x86_rep_movsb_threshold")) || (pre && strstr(pre, "vgpreload")) ||
      !argv || !argv[0])
    return;
  char tunables[1024];
  snprintf(tunables, sizeof tunables, "%s%sglibc.cpu.x86_rep_movsb_threshold=4194304",
           old ? old : "", old && *old ? ":" : "");
  /* where this fails, the process goes on as before: slower copies, same results */
  if (setenv("GLIBC_TUNABLES", tunables, 1) == 0) execv("/proc/self/exe", argv);
#else
  (void)argv;
#endif
}

const char *dt_tag_name(dt_tag tag) {
  static const char *names[DT_NTAGS] = {"params", "grads", "optim", "activ",
                                        "comm",   "data",  "other"};
  return names[tag];
}

static char memory_source[512] = "MemAvailable of this machine";
const char *dt_memory_source(void) { return memory_source; }

#ifndef DT_CUDA
static double read_number(const char *dir, const char *file, const char *key) {
  char path[4096], line[256];
  double v = -1;
  snprintf(path, sizeof path, "%s/%s", dir, file);
  FILE *f = fopen(path, "r");
  size_t klen = key ? strlen(key) : 0;
  while (f && fgets(line, sizeof line, f)) {
    if (key && (strncmp(line, key, klen) != 0 || line[klen] != ' ')) continue;
    if (sscanf(line + klen, "%lf", &v) != 1) v = -1; /* "max": no limit */
    break;
  }
  if (f) fclose(f);
  return v;
}

/* A scheduler (Slurm, Kubernetes, Docker) confines a job to a cgroup whose
 * memory limit can be far below the machine's free memory; past it the
 * kernel kills the job without a word. Walk from this process's cgroup to
 * the root (the limit of any ancestor binds too) and return what the
 * tightest one still allows, or -1 when none is set. cgroup v2 (memory.max)
 * and v1 (memory.limit_in_bytes); reclaimable page cache counts as free. */
static double cgroup_available(void) {
  char line[1024], rel[1024] = "";
  int v1 = 0;
  FILE *f = fopen("/proc/self/cgroup", "r");
  while (f && fgets(line, sizeof line, f)) {
    char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;
    if (!b) continue;
    b[strcspn(b, "\n")] = '\0';
    *b = '\0';
    int memory_v1 = strstr(a + 1, "memory") != NULL, unified = a[1] == '\0';
    if (memory_v1 || (unified && !v1)) {
      snprintf(rel, sizeof rel, "%s", b + 1);
      v1 = memory_v1;
    }
  }
  if (f) fclose(f);
  if (!rel[0]) return -1;
  const char *root = v1 ? "/sys/fs/cgroup/memory" : "/sys/fs/cgroup";
  const char *limit_file = v1 ? "memory.limit_in_bytes" : "memory.max";
  const char *usage_file = v1 ? "memory.usage_in_bytes" : "memory.current";
  const char *cache_key = v1 ? "total_inactive_file" : "inactive_file";
  double best = -1;
  for (;;) {
    char dir[2100];
    snprintf(dir, sizeof dir, "%s%s", root, strcmp(rel, "/") == 0 ? "" : rel);
    double limit = read_number(dir, limit_file, NULL);
    if (limit > 0 && limit < 0x1p60) { /* v1 writes "no limit" as ~2^63 */
      double used = read_number(dir, usage_file, NULL),
             cache = read_number(dir, "memory.stat", cache_key);
      double left = limit - (used > 0 ? used : 0) + (cache > 0 ? cache : 0);
      if (left < 0) left = 0;
      if (best < 0 || left < best) {
        best = left;
        snprintf(memory_source, sizeof memory_source,
                 "under the job's cgroup memory limit: %.300s/%s = %.2f GiB, %.2f GiB in use", dir,
                 limit_file, limit / 1073741824.0, (used > 0 ? used : 0) / 1073741824.0);
      }
    }
    char *slash = strrchr(rel, '/');
    if (!slash || strcmp(rel, "/") == 0) break;
    if (slash == rel)
      rel[1] = '\0';
    else
      *slash = '\0';
  }
  return best;
}
#endif

/* What a new allocation may use: free GPU memory, or the kernel's estimate
 * of available host memory (MemAvailable), or less when the job's cgroup
 * limit allows less. dt_memory_source says which. */
double dt_memory_available(void) {
#ifdef DT_CUDA
  size_t free_bytes = 0, total = 0;
  CHECK_CUDA(cudaMemGetInfo(&free_bytes, &total));
  snprintf(memory_source, sizeof memory_source, "free memory of this rank's GPU");
  return (double)free_bytes + (double)cached_bytes;
#else
  double kib = -1;
  FILE *f = fopen("/proc/meminfo", "r");
  char line[128];
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "MemAvailable: %lf kB", &kib) == 1) break;
  if (f) fclose(f);
  double machine = kib < 0 ? 1e18 : kib * 1024; /* unknown: do not refuse */
  double job = cgroup_available();
  if (job >= 0 && job < machine) /* cgroup_available named the limit */
    return job + (double)cached_bytes;
  snprintf(memory_source, sizeof memory_source, "MemAvailable of this machine");
  return machine + (double)cached_bytes;
#endif
}

void *dt_host_alloc_at(const char *file, int line, size_t count, size_t size) {
  void *p = calloc(count ? count : 1, size ? size : 1);
  if (!p) dt_fatal(file, line, "dt_host_alloc", "out of memory");
  return p;
}

void *dt_alloc(size_t bytes, dt_tag tag) {
  void *p = NULL;
  size_t n = bytes ? bytes : 1;
  /* Ask first: a request the machine cannot hold gets a clear message, not
   * the OOM killer or a swap storm. Small ones are not worth the look. */
  if (bytes > (64u << 20) && (double)bytes > dt_memory_available()) {
    char msg[800];
    double left = dt_memory_available();
    snprintf(msg, sizeof msg, "%.2f GiB of %s asked for, only %.2f GiB available (%s)",
             bytes / 1073741824.0, dt_tag_name(tag), left / 1073741824.0, dt_memory_source());
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
  p = cache_take(n);
  if (!p && dt_boundary) p = dt_boundary_alloc(n, dt_tag_name(tag));
  if (!p && posix_memalign(&p, 64, n) != 0) { /* give the kept blocks back, retry */
    dt_mem_release_cache();
    if (posix_memalign(&p, 64, n) != 0) p = NULL;
  }
  if (p) {
    DT_KERNEL("dt_alloc (its zero fill)", p);
    memset(p, 0, n);
  }
#endif
  if (!p) dt_fatal(__FILE__, __LINE__, "dt_alloc", "out of memory");
  if (nlive == cap) {
    cap = cap ? 2 * cap : 64;
    live = realloc(live, cap * sizeof *live);
    CHECK_ALLOC(live);
  }
  if (aside) { /* bookkeeping's: counted nowhere */
    live[nlive++] = (allocation){p, bytes, DT_NTAGS};
    return p;
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
  if (a.tag != DT_NTAGS) {
    current[a.tag] -= a.bytes;
    current_total -= a.bytes;
  }
  cache_put(buf, a.bytes ? a.bytes : 1);
}

void dt_mem_aside(int on) { aside += on ? 1 : -1; }
int dt_mem_is_aside(void) { return aside > 0; }

/* The copies on the cpu backend: memcpy, with the device-boundary mode's
 * checks of which side of the boundary each buffer is on (boundary.h) */
void dt_copy_to_host(void *host, const void *buf, size_t bytes) {
#ifdef DT_CUDA
  CHECK_CUDA(cudaMemcpyAsync(host, buf, bytes, cudaMemcpyDeviceToHost, dt_stream()));
  CHECK_CUDA(cudaStreamSynchronize(dt_stream()));
#else
  dt_expect_host("dt_copy_to_host", "host", host, bytes);
  dt_expect_device("dt_copy_to_host", "buf", buf, bytes);
  DT_KERNEL("dt_copy_to_host", buf);
  if (host != buf && bytes) memcpy(host, buf, bytes);
#endif
}

void dt_copy_from_host(void *buf, const void *host, size_t bytes) {
#ifdef DT_CUDA
  CHECK_CUDA(cudaMemcpyAsync(buf, host, bytes, cudaMemcpyHostToDevice, dt_stream()));
  CHECK_CUDA(cudaStreamSynchronize(dt_stream())); /* the host buffer may be reused at once */
#else
  dt_expect_host("dt_copy_from_host", "host", host, bytes);
  dt_expect_device("dt_copy_from_host", "buf", buf, bytes);
  DT_KERNEL("dt_copy_from_host", buf);
  if (host != buf && bytes) memcpy(buf, host, bytes);
#endif
}

void dt_copy(void *dst, const void *src, size_t bytes) {
  DT_OP("dt_copy", bytes / 4, 2, 0, 0, 0);
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
  dt_expect_device("dt_copy", "dst", dst, bytes);
  dt_expect_device("dt_copy", "src", src, bytes);
  DT_KERNEL("dt_copy", dst);
  if (dst != src && bytes) memmove(dst, src, bytes);
#endif
}

void dt_copy_2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                size_t rows) {
  if (!width || !rows) return;
#ifdef DT_CUDA
  CHECK_CUDA(cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, rows, cudaMemcpyDeviceToDevice,
                               dt_stream()));
#else
  dt_expect_device("dt_copy_2d", "dst", dst, (rows - 1) * dpitch + width);
  dt_expect_device("dt_copy_2d", "src", src, (rows - 1) * spitch + width);
  DT_KERNEL("dt_copy_2d", dst);
  for (size_t i = 0; i < rows; i++)
    memcpy((char *)dst + i * dpitch, (const char *)src + i * spitch, width);
#endif
}

void dt_zero(void *buf, size_t bytes) {
  DT_OP("dt_zero", bytes / 4, 1, 0, 0, 0);
#ifdef DT_CUDA
  CHECK_CUDA(cudaMemsetAsync(buf, 0, bytes, dt_stream()));
#else
  dt_expect_device("dt_zero", "buf", buf, bytes);
  DT_KERNEL("dt_zero", buf);
  memset(buf, 0, bytes);
#endif
}

size_t dt_mem_current(dt_tag tag) { return current[tag]; }
size_t dt_mem_peak(dt_tag tag) { return peak[tag]; }
size_t dt_mem_peak_total(void) { return peak_total; }

#ifdef DT_CUDA
/* What the tables of the lessons do not show on a GPU (dt_print_memory_uncounted). */
void dt_print_memory_outside(void) {
  size_t free_bytes = 0, total = 0;
  CHECK_CUDA(cudaMemGetInfo(&free_bytes, &total));
  double other = (double)(total - free_bytes) - (double)(current_total + cached_bytes);
  dt_print0("    not in the table: the CUDA context, cuBLAS's and NCCL's own buffers: %.1f MiB "
            "(GPU %d's memory in use, by every process on it, minus this rank's %.1f MiB from "
            "dt_alloc, %.1f MiB of it cached for reuse)\n",
            other / 1048576.0, dt_device(), (double)(current_total + cached_bytes) / 1048576.0,
            (double)cached_bytes / 1048576.0);
}
#endif

void dt_mem_reset_peaks(void) {
  for (int t = 0; t < DT_NTAGS; t++) peak[t] = current[t];
  peak_total = current_total;
}
