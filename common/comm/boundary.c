/* boundary.c: the cpu backend's device-boundary mode (boundary.h), on with
 * DT_DEVICE_BOUNDARY=1 in the environment.
 *
 * dt_alloc's blocks come from one arena, reserved at start-up and PROT_NONE
 * outside the backend's own work. The kernels (kernels_cpu.c, attention.c,
 * moe.c), the copies and the zero fill of dt_alloc (memory.c) and the cpu's
 * collectives (comm.c, comm_async.c: its NCCL) open it while they run and
 * close it after; they also check that what a GPU would read on the device
 * is the arena's, and the copies and the bookkeeping calls (host.c) that
 * what a GPU would read on the host is not. Host code that reads or writes
 * the arena between them faults, and the handler prints what it touched
 * (which buffer from dt_alloc), the call (the watchdog's MPI call in
 * progress, or the first function of the backtrace outside the C library
 * and MPI) and the backtrace, then lets the fault end the rank.
 *
 * One mprotect of the whole arena each way: the arena is 2 MiB-aligned,
 * huge pages where the kernel allows them (MADV_HUGEPAGE), so a switch
 * costs about 10 us whatever its size (4 KiB pages: tens of us per MiB).
 * Open MPI's single copy between ranks (CMA: a peer reading this rank's
 * buffer while it computes) is turned off in this mode, so a message moves
 * only inside MPI calls: inside the collectives' windows, or inside a host
 * MPI call that was handed device memory, which is what the mode catches. */
#define _POSIX_C_SOURCE  200809L
#define _DEFAULT_SOURCE  /* glibc, musl: MAP_ANONYMOUS, madvise */
#define _DARWIN_C_SOURCE /* macOS: the same */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>
#if defined(__GLIBC__) || defined(__APPLE__)
#include <execinfo.h>
#define HAVE_BACKTRACE 1
#endif

#include "comm_internal.h"

int dt_boundary;

int dt_host_sees_device(void) {
#ifdef DT_CUDA
  return 0;
#else
  return !dt_boundary;
#endif
}

#ifdef DT_CUDA
void dt_boundary_setup(void) {}
void dt_boundary_init(void) {}
void *dt_boundary_alloc(size_t bytes, const char *tag) {
  (void)bytes, (void)tag;
  return NULL;
}
void dt_boundary_free(void *p) { (void)p; }
int dt_boundary_owns(const void *p) {
  (void)p;
  return 0;
}
int dt_kernel_enter(const char *call, const char *names, const void *const *ptrs, int n) {
  (void)call, (void)names, (void)ptrs, (void)n;
  return 0;
}
void dt_kernel_leave(int *scope) { (void)scope; }
void dt_expect_device(const char *call, const char *arg, const void *p, size_t bytes) {
  (void)call, (void)arg, (void)p, (void)bytes;
}
void dt_expect_host(const char *call, const char *arg, const void *p, size_t bytes) {
  (void)call, (void)arg, (void)p, (void)bytes;
}
void dt_expect_collective(const char *call, const void *in, size_t in_bytes, const void *out,
                          size_t out_bytes) {
  (void)call, (void)in, (void)in_bytes, (void)out, (void)out_bytes;
}
void dt_boundary_inflight(int delta) { (void)delta; }
void dt_mpi_progress(int begin) { (void)begin; }
#else

enum { ALIGN = 64 };
#define HUGE     ((size_t)2 << 20)
#define RESERVED ((size_t)64 << 30) /* address space only: pages come as they are touched */

typedef struct {
  char *ptr;
  size_t bytes;
  const char *tag;
  int freed;
} block;

static struct {
  char *base, *top;  /* [base, top) handed out */
  size_t open_bytes; /* what mprotect switches: [base, base + open_bytes), HUGE multiples */
  block *blocks;     /* in address order: the arena grows upward */
  size_t n, cap;
  int depth;    /* kernels running (nested) */
  int inflight; /* nonblocking collectives not yet waited for */
  int progress; /* host MPI calls that opened the arena for them (nested) */
} arena;

static void set_open(int open) {
  if (!arena.open_bytes) return;
  if (mprotect(arena.base, arena.open_bytes, open ? PROT_READ | PROT_WRITE : PROT_NONE) != 0)
    dt_fatal(__FILE__, __LINE__, "mprotect", "the device-boundary arena cannot be switched");
}

void dt_boundary_setup(void) {
  const char *on = getenv("DT_DEVICE_BOUNDARY");
  dt_boundary = on && on[0] && strcmp(on, "0") != 0;
  /* Open MPI's single copy lets a peer read this rank's buffer from outside
   * its MPI calls (a nonblocking send while it computes): off in this mode */
  if (dt_boundary) {
    setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 0);
    setenv("OMPI_MCA_btl_sm_single_copy_mechanism", "none", 0);
  }
}

/* the block holding p, or NULL */
static block *block_of(const void *p) {
  const char *c = p;
  size_t lo = 0, hi = arena.n;
  while (lo < hi) { /* the last block starting at or before p */
    size_t mid = lo + (hi - lo) / 2;
    if (arena.blocks[mid].ptr <= c)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0) return NULL;
  block *b = &arena.blocks[lo - 1];
  return c < b->ptr + (b->bytes ? b->bytes : 1) ? b : NULL;
}

int dt_boundary_owns(const void *p) {
  return dt_boundary && (const char *)p >= arena.base && (const char *)p < arena.top;
}

static void describe(const void *p, char *out, size_t n) {
  const block *b = dt_boundary_owns(p) ? block_of(p) : NULL;
  if (b)
    snprintf(out, n, "byte %zu of a %zu-byte %s buffer from dt_alloc%s",
             (size_t)((const char *)p - b->ptr), b->bytes, b->tag, b->freed ? ", freed" : "");
  else if (dt_boundary_owns(p))
    snprintf(out, n, "the device arena, between dt_alloc's buffers");
  else
    snprintf(out, n, "host memory");
}

/* the function a backtrace line names: "prog(name+0x1f) [0x...]" (glibc),
 * "3   prog   0x... name + 31" (macOS); "" when it names none */
static void frame_name(const char *line, char *out, size_t n) {
  const char *a = strchr(line, '('), *b = a ? strpbrk(a, "+)") : NULL, *plus = strstr(line, " + ");
  out[0] = '\0';
  if (a && b && b > a + 1) {
    snprintf(out, n, "%.*s", (int)(b - a - 1), a + 1);
  } else if (plus) {
    const char *w = plus;
    while (w > line && w[-1] != ' ') w--;
    snprintf(out, n, "%.*s", (int)(plus - w), w);
  }
}

/* One frame of the message: a function and where it is (an inlined one is
 * a frame of its own), or a library's function */
typedef struct {
  char func[160], where[240];
  int lib;
} frame;

/* The executable's frames named with file and line by addr2line (its
 * inlined functions too: -O3 inlines the culprit more often than not),
 * where binutils and /proc are: a debugging mode's luxury, and a fault
 * ends the process anyway. Returns the frames written. */
static int resolve(char **names, int n, frame *out, int cap) {
  int k = 0;
#if defined(__linux__)
  char exe[1024], line[1400], cmd[4096];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  FILE *maps = len > 0 ? fopen("/proc/self/maps", "r") : NULL;
  uintptr_t base = 0;
  if (len > 0) exe[len] = '\0';
  while (maps && fgets(line, sizeof line, maps)) { /* the executable's first mapping */
    unsigned long lo = 0, off = 1;
    if (sscanf(line, "%lx-%*x %*s %lx", &lo, &off) == 2 && off == 0 && strstr(line, exe)) {
      base = (uintptr_t)lo;
      break;
    }
  }
  if (maps) fclose(maps);
  int m = snprintf(cmd, sizeof cmd, "addr2line -a -f -i -e %s", exe);
  int any = 0;
  for (int i = 0; base && i < n && m < (int)sizeof cmd - 40; i++) {
    const char *at = strrchr(names[i], '[');
    unsigned long addr = 0;
    if (strstr(names[i], ".so") || !at || sscanf(at, "[%lx]", &addr) != 1) continue;
    m += snprintf(cmd + m, sizeof cmd - (size_t)m, " %#lx", (unsigned long)(addr - base - 1));
    any = 1;
  }
  snprintf(cmd + m, sizeof cmd - (size_t)m, " 2>/dev/null");
  FILE *p = any ? popen(cmd, "r") : NULL;
  char cwd[1024] = "";
  if (!getcwd(cwd, sizeof cwd)) cwd[0] = '\0';
  size_t cl = strlen(cwd);
  while (p && k < cap && fgets(line, sizeof line, p)) {
    line[strcspn(line, "\n")] = '\0';
    if (!strncmp(line, "0x", 2)) continue; /* -a: a new address */
    frame *f = &out[k];
    snprintf(f->func, sizeof f->func, "%.159s", line);
    if (!fgets(line, sizeof line, p)) break;
    line[strcspn(line, " \n")] = '\0'; /* not " (discriminator 1)" */
    const char *w = cl && !strncmp(line, cwd, cl) && line[cl] == '/' ? line + cl + 1 : line;
    snprintf(f->where, sizeof f->where, "%.239s", w);
    f->lib = 0;
    if (strcmp(f->func, "??")) k++;
  }
  if (p) pclose(p);
#else
  (void)names, (void)n, (void)out, (void)cap;
#endif
  return k;
}

/* The frames from `from` on: the libraries' as backtrace names them, the
 * executable's as addr2line does (or as backtrace does, without it) */
static int frames_of(char **names, int nf, int from, frame *out, int cap) {
  int k = 0;
  for (int i = from; names && i < nf && k < cap; i++) {
    int lib = strstr(names[i], ".so") != NULL;
    if (!lib) { /* a run of the executable's frames, resolved at once */
      int j = i;
      while (j < nf && !strstr(names[j], ".so")) j++;
      int got = resolve(names + i, j - i, out + k, cap - k);
      for (int q = i; !got && q < j && k < cap; q++, k++) {
        frame_name(names[q], out[k].func, sizeof out[k].func);
        snprintf(out[k].where, sizeof out[k].where, "%s", names[q]);
        out[k].lib = 0;
      }
      k += got;
      i = j - 1;
      continue;
    }
    frame_name(names[i], out[k].func, sizeof out[k].func);
    snprintf(out[k].where, sizeof out[k].where, "%.*s", (int)strcspn(names[i], "("), names[i]);
    out[k++].lib = 1;
  }
  return k;
}

/* The first frame that is not this file's: after the signal's trampoline
 * (the first frame in a shared library: the C library's), or after the
 * frames of the check that refused (addr2line's names: they know what the
 * compiler inlined, split or called in a tail jump) */
static int first_frame(const frame *f, int n, int fault) {
  for (int i = 0; i < n; i++) {
    if (fault && f[i].lib) return i + 1;
    if (!fault && !strstr(f[i].where, "boundary.c") && strcmp(f[i].func, "dt_kernel_enter") &&
        strncmp(f[i].func, "dt_expect_", 10))
      return i;
  }
  return 0;
}

/* The culprit the headline names: the first function outside the C library
 * and MPI (an MPI call on device memory: the MPI function and its caller),
 * and not `callee` (the call that refused: its caller is named) */
static void culprit(const frame *f, int n, const char *callee, char *out, size_t cap) {
  int mpi = 0;
  size_t cl = callee ? strcspn(callee, " ") : 0;
  for (int i = 0; i < n; i++) {
    const char *fn = f[i].func;
    if (!fn[0] || (cl && !strncmp(fn, callee, cl))) continue; /* dt_host_all_reduce_at too */
    if (!strncmp(fn, "MPI_", 4) || !strncmp(fn, "PMPI_", 5)) {
      snprintf(out, cap, "%.159s", fn + (fn[0] == 'P'));
      mpi = 1;
      continue;
    }
    if (f[i].lib) continue; /* inside a library: its caller is the culprit */
    size_t len = mpi ? strlen(out) : 0;
    snprintf(out + len, cap - len, "%s%.159s (%.239s)", mpi ? ", called by " : "", fn, f[i].where);
    int j = i + 1; /* and its caller (an inlined body is often the culprit), not a part of it */
    while (j < n && !strcmp(f[j].func, fn)) j++;
    if (!mpi && j < n && !f[j].lib) {
      len = strlen(out);
      snprintf(out + len, cap - len, ", called by %.159s (%.239s)", f[j].func, f[j].where);
    }
    return;
  }
}

/* The message: the headline (its %s: the culprit), the watchdog's call in
 * progress, the frames from the culprit's on */
static void report(const char *headline, int fault, const char *callee) {
  char call[300], who[600] = "host code";
  char **names = NULL;
  int nf = 0;
  static frame f[40];
#ifdef HAVE_BACKTRACE
  void *frames[32];
  nf = backtrace(frames, 32);
  names = backtrace_symbols(frames, nf);
#endif
  int n = frames_of(names, nf, 0, f, 40), from = first_frame(f, n, fault);
  culprit(f + from, n - from, callee, who, sizeof who);
  fprintf(stderr, "[rank %d] device boundary: ", dt_rank());
  fprintf(stderr, headline, who);
  fputc('\n', stderr);
  if (dt_watch_describe(call, sizeof call)) fprintf(stderr, "[rank %d]   in %s\n", dt_rank(), call);
  for (int i = from; i < n && i < from + 14; i++)
    fprintf(stderr, "[rank %d]   %s %s (%s)\n", dt_rank(), i > from ? "  " : "at",
            f[i].func[0] ? f[i].func : "?", f[i].where);
  free(names);
  fflush(stderr);
}

static void on_fault(int sig, siginfo_t *info, void *context) {
  (void)context;
  char what[300], head[600];
  if (!dt_boundary_owns(info->si_addr)) { /* not ours: the fault as it would have been */
    signal(sig, SIG_DFL);
    return;
  }
  describe(info->si_addr, what, sizeof what);
  snprintf(head, sizeof head,
           "%%s touched device memory (%s) outside the backend's kernels and copies", what);
  report(head, 1, NULL);
  /* the fault ends the rank (mpirun then the job), without a core file */
  struct rlimit none = {0, 0};
  setrlimit(RLIMIT_CORE, &none);
  signal(sig, SIG_DFL);
}

void dt_boundary_init(void) {
  if (!dt_boundary) return;
  int flags = MAP_PRIVATE | MAP_ANONYMOUS;
#ifdef MAP_NORESERVE
  flags |= MAP_NORESERVE;
#endif
  char *raw = mmap(NULL, RESERVED + HUGE, PROT_NONE, flags, -1, 0);
  if (raw == MAP_FAILED)
    dt_fatal(__FILE__, __LINE__, "mmap", "DT_DEVICE_BOUNDARY: cannot reserve the device arena");
  arena.base = arena.top = (char *)(((uintptr_t)raw + HUGE - 1) & ~(uintptr_t)(HUGE - 1));
#ifdef MADV_HUGEPAGE
  madvise(arena.base, RESERVED, MADV_HUGEPAGE); /* a hint: 4 KiB pages work, slower */
#endif
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, NULL); /* after MPI_Init: in place of Open MPI's handler */
  sigaction(SIGBUS, &sa, NULL);  /* how macOS reports PROT_NONE */
}

void *dt_boundary_alloc(size_t bytes, const char *tag) {
  size_t n = bytes ? (bytes + ALIGN - 1) / ALIGN * ALIGN : ALIGN;
  for (size_t i = 0; i < arena.n; i++) /* a freed block of this size first */
    if (arena.blocks[i].freed && arena.blocks[i].bytes == bytes) {
      arena.blocks[i].freed = 0;
      arena.blocks[i].tag = tag;
      return arena.blocks[i].ptr;
    }
  if ((size_t)(arena.top - arena.base) + n > RESERVED) return NULL;
  if (arena.n == arena.cap) {
    arena.cap = arena.cap ? 2 * arena.cap : 256;
    arena.blocks = realloc(arena.blocks, arena.cap * sizeof *arena.blocks);
    CHECK_ALLOC(arena.blocks);
  }
  char *p = arena.top;
  arena.blocks[arena.n++] = (block){p, bytes, tag, 0};
  arena.top += n;
  size_t need = (size_t)(arena.top - arena.base);
  if (need > arena.open_bytes) { /* new pages, in the state of the rest */
    size_t grown = (need + HUGE - 1) / HUGE * HUGE;
    if (mprotect(arena.base + arena.open_bytes, grown - arena.open_bytes,
                 arena.depth ? PROT_READ | PROT_WRITE : PROT_NONE) != 0)
      return NULL;
    arena.open_bytes = grown;
  }
  return p;
}

void dt_boundary_free(void *p) {
  block *b = block_of(p);
  if (b && b->ptr == p) b->freed = 1;
}

/* A check refused: the message and the backtrace, then MPI_Abort */
static void refuse(const char *headline, const char *callee) {
  report(headline, 0, callee);
  dt_fatal(__FILE__, __LINE__, "the device boundary", "see the message above");
}

static void whole_range(const char *call, const char *arg, const void *p, size_t bytes,
                        int device) {
  if (!p || !bytes) return;
  const char *c = p;
  const block *b = block_of(p);
  const block *e = block_of(c + bytes - 1);
  int touches = dt_boundary_owns(p) || dt_boundary_owns(c + bytes - 1);
  char what[300], head[900];
  describe(p, what, sizeof what);
  if (device && !(b && b == e)) {
    snprintf(head, sizeof head,
             "%s was handed %s as `%s` (%zu bytes at %p) by %%s, where it takes device memory "
             "(from dt_alloc)%s",
             call, b ? "a range past its buffer's end" : what, arg, bytes, p,
             b ? "" : ": on a GPU it would not be there");
    refuse(head, call);
  }
  if (!device && touches) {
    snprintf(head, sizeof head,
             "%s was handed device memory as `%s` (%s, %zu bytes) by %%s, where it takes host "
             "memory: a GPU's would not be there",
             call, arg, what, bytes);
    refuse(head, call);
  }
}

void dt_expect_device(const char *call, const char *arg, const void *p, size_t bytes) {
  if (dt_boundary) whole_range(call, arg, p, bytes, 1);
}
void dt_expect_host(const char *call, const char *arg, const void *p, size_t bytes) {
  if (dt_boundary) whole_range(call, arg, p, bytes, 0);
}
void dt_expect_collective(const char *call, const void *in, size_t in_bytes, const void *out,
                          size_t out_bytes) {
  dt_expect_device(call, "sendbuf", in, in_bytes);
  dt_expect_device(call, "recvbuf", out, out_bytes);
}

int dt_kernel_enter(const char *call, const char *names, const void *const *ptrs, int n) {
  for (int i = 0; i < n; i++) {
    size_t len = strcspn(names, ",");
    /* the arena's end too: a call of no elements may be handed its buffer's end */
    const char *q = ptrs[i];
    if (q && !(q >= arena.base && q <= arena.top)) {
      char head[600];
      snprintf(head, sizeof head,
               "%s was handed host memory as `%.*s` (%p) by %%s, where it reads device memory "
               "(from dt_alloc): on a GPU the kernel would fault",
               call, (int)len, names, ptrs[i]);
      refuse(head, call);
    }
    names += len + (names[len] == ',');
    while (*names == ' ') names++;
  }
  if (arena.depth++ == 0) set_open(1);
  return 0;
}

void dt_boundary_inflight(int delta) { arena.inflight += delta; }

/* A host MPI call while a nonblocking collective is in flight: MPI moves
 * that collective inside any call, into its device buffers, as a GPU's
 * engine would at any moment; open for it. The call's own buffers are
 * still checked where the layer knows them (host.c's dt_expect_host). */
void dt_mpi_progress(int begin) {
  if (!dt_boundary) return;
  if (begin && arena.inflight) {
    arena.progress++;
    if (arena.depth++ == 0) set_open(1);
  } else if (!begin && arena.progress) {
    arena.progress--;
    if (--arena.depth == 0) set_open(0);
  }
}

void dt_kernel_leave(int *scope) {
  (void)scope;
  if (dt_boundary && --arena.depth == 0) set_open(0);
}
#endif
