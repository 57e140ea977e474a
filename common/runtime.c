/* runtime.c: start-up, device choice, the banner, errors, printing, timers.
 *
 * Start-up order matters: MPI first (it tells us who we are), then the
 * flags (so --help works anywhere), then the GPU from the node-local rank,
 * then the communicator (NCCL needs its GPU chosen before it starts). */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#ifdef DT_CUDA
#include "dt_cuda.h"
#endif

static struct {
  int rank, size, local_rank, local_size, nodes, device;
  char comm_lib[128];
  char notice[160]; /* printed under the banner, which must stay the first line */
  dt_comm *world;
#ifdef DT_CUDA
  cudaStream_t stream, side_stream;
#endif
} rt = {.device = -1};

void dt_fatal(const char *file, int line, const char *call, const char *msg) {
  fprintf(stderr, "[rank %d] %s:%d: %s failed: %s\n", rt.rank, file, line, call, msg);
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  abort(); /* not reached: keeps the compiler sure we never return */
}

void dt_fail(const char *fmt, ...) {
  if (rt.rank == 0) { /* one write: mpirun forwards stdout and stderr apart, so a line
                        written in pieces can be cut by the banner */
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(line, sizeof line, "error: ");
    vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    strcat(line, "\n");
    fputs(line, stderr);
    fflush(stderr);
  }
  MPI_Finalize();
  exit(2);
}

int dt_rank(void) { return rt.rank; }
int dt_size(void) { return rt.size; }
int dt_local_rank(void) { return rt.local_rank; }
int dt_device(void) { return rt.device; }
const char *dt_comm_lib(void) { return rt.comm_lib; }
#ifdef DT_CUDA
const char *dt_backend(void) { return "cuda"; }
cudaStream_t dt_stream(void) { return rt.stream; }
cudaStream_t dt_side_stream(void) { return rt.side_stream; }
#else
const char *dt_backend(void) { return "cpu"; }
#endif

/* "Open MPI v4.1.4, package: ..." -> "Open MPI v4.1.4" */
static void mpi_library_name(char *out, size_t n) {
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(version, &len);
  version[strcspn(version, ",\n")] = '\0';
  snprintf(out, n, "MPI (%.100s)", version);
}

#ifdef DT_CUDA
/* One GPU per rank when there are enough; otherwise ranks share GPUs and
 * NCCL (before 2.30) refuses them, so collectives stage through host memory
 * over MPI. Returns whether NCCL is used. */
static int choose_device(const char *comm_choice, char *gpu_name, size_t n) {
  int ngpus = 0;
  if (cudaGetDeviceCount(&ngpus) != cudaSuccess) ngpus = 0;
  int fewest = 0, shared = 0, local_shared = rt.local_size > ngpus;
  MPI_Allreduce(&ngpus, &fewest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (fewest == 0)
    dt_fail("this binary was built with BACKEND=cuda but a rank sees no CUDA GPU; "
            "rebuild with 'make BACKEND=cpu' to run on CPUs");
  MPI_Allreduce(&local_shared, &shared, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  int nccl_version = 0;
  ncclGetVersion(&nccl_version);
  if (shared && strcmp(comm_choice, "nccl") == 0)
    dt_fail("--comm nccl: %d ranks share %d GPU(s) on a node, and NCCL %d refuses two ranks "
            "of one communicator on one GPU (\"Duplicate GPU detected\"); use --comm mpi or at "
            "most one rank per GPU",
            rt.local_size, ngpus, nccl_version);
  rt.device = rt.local_rank % ngpus;
  CHECK_CUDA(cudaSetDevice(rt.device));
  CHECK_CUDA(cudaStreamCreateWithFlags(&rt.stream, cudaStreamNonBlocking));
  CHECK_CUDA(cudaStreamCreateWithFlags(&rt.side_stream, cudaStreamNonBlocking));
  struct cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, rt.device));
  snprintf(gpu_name, n, "%.100s", prop.name);
  int use_nccl = strcmp(comm_choice, "mpi") != 0 && !shared;
  if (use_nccl)
    snprintf(rt.comm_lib, sizeof rt.comm_lib, "NCCL %d.%d.%d", nccl_version / 10000,
             nccl_version / 100 % 100, nccl_version % 100);
  if (shared)
    snprintf(rt.notice, sizeof rt.notice,
             "note: %d ranks share %d GPU(s) on a node; collectives stage through host memory "
             "over MPI\n",
             rt.local_size, ngpus);
  return use_nccl;
}
#endif

dt_comm *dt_init(int *argc, char ***argv, const dt_lesson *lesson, dt_option *options) {
  CHECK_MPI(MPI_Init(argc, argv));
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN); /* so CHECK_MPI sees errors */
  MPI_Comm_rank(MPI_COMM_WORLD, &rt.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &rt.size);

  /* Ranks that share memory share a node: their order picks the GPU. */
  MPI_Comm node;
  CHECK_MPI(
      MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rt.rank, MPI_INFO_NULL, &node));
  MPI_Comm_rank(node, &rt.local_rank);
  MPI_Comm_size(node, &rt.local_size);
  char hosts[200];
  dt_describe_nodes(node, hosts, sizeof hosts);
  MPI_Comm_free(&node);
  int leader = rt.local_rank == 0;
  MPI_Allreduce(&leader, &rt.nodes, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);

  const char *comm_choice = "auto";
  if (dt_cli_parse(*argc, *argv, lesson, options, &comm_choice)) {
    MPI_Finalize();
    exit(0);
  }
  dt_watchdog_start(); /* knows --timeout now */
  if (rt.size < lesson->min_ranks)
    dt_fail("%s needs at least %d ranks, got %d: run it as 'mpirun -np %d %s'", lesson->name,
            lesson->min_ranks, rt.size, lesson->min_ranks < 4 ? 4 : lesson->min_ranks, (*argv)[0]);

  mpi_library_name(rt.comm_lib, sizeof rt.comm_lib);
  char devices[160] = "CPU only";
  int use_nccl = 0;
#ifdef DT_CUDA
  char gpu[128];
  use_nccl = choose_device(comm_choice, gpu, sizeof gpu);
  snprintf(devices, sizeof devices, "GPU %d of rank 0: %s", rt.device, gpu);
#else
  if (strcmp(comm_choice, "nccl") == 0)
    dt_fail("--comm nccl needs the cuda backend; this binary was built with BACKEND=cpu");
#endif
  dt_kernels_init();
  rt.world = dt_comm_create(MPI_COMM_WORLD, use_nccl);
  char on_nodes[216] = ""; /* which ranks run where, once there is more than one node */
  if (rt.nodes > 1) snprintf(on_nodes, sizeof on_nodes, " (%s)", hosts);
  dt_print0("%s | backend %s | comm %s | %d rank%s on %d node%s%s | %s\n", lesson->name,
            dt_backend(), rt.comm_lib, rt.size, rt.size == 1 ? "" : "s", rt.nodes,
            rt.nodes == 1 ? "" : "s", on_nodes, devices);
  dt_print0("%s\n%s", lesson->summary, rt.notice);
  return rt.world;
}

void dt_finalize(void) {
  dt_watchdog_stop();
  dt_comm_free(rt.world);
  dt_comm_release_staging();
#ifdef DT_CUDA
  cudaStreamDestroy(rt.stream);
  cudaStreamDestroy(rt.side_stream);
#endif
  MPI_Finalize();
}

void dt_print0(const char *fmt, ...) {
  if (rt.rank != 0) return;
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  fflush(stdout);
}

/* Lines printed by each rank would interleave at random; gathering them to
 * rank 0 prints them in rank order. */
void dt_print_ranks(const char *fmt, ...) {
  enum { LINE = 512 };
  char line[LINE];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, LINE, fmt, ap);
  va_end(ap);
  char *all = rt.rank == 0 ? malloc((size_t)rt.size * LINE) : NULL;
  if (rt.rank == 0) CHECK_ALLOC(all);
  CHECK_MPI(MPI_Gather(line, LINE, MPI_CHAR, all, LINE, MPI_CHAR, 0, MPI_COMM_WORLD));
  if (rt.rank == 0) {
    for (int r = 0; r < rt.size; r++) printf("[rank %d] %s", r, all + (size_t)r * LINE);
    fflush(stdout);
    free(all);
  }
}

double dt_now(void) { return MPI_Wtime(); }

void dt_sync(void) {
#ifdef DT_CUDA
  CHECK_CUDA(cudaStreamSynchronize(rt.stream));
#endif
}

void dt_timer_start(dt_timer *t) {
#ifdef DT_CUDA
  if (!t->ev_start) {
    CHECK_CUDA(cudaEventCreate((cudaEvent_t *)&t->ev_start));
    CHECK_CUDA(cudaEventCreate((cudaEvent_t *)&t->ev_stop));
  }
  CHECK_CUDA(cudaEventRecord((cudaEvent_t)t->ev_start, rt.stream));
#else
  t->t0 = MPI_Wtime();
#endif
}

double dt_timer_stop(dt_timer *t) {
#ifdef DT_CUDA
  float ms = 0;
  CHECK_CUDA(cudaEventRecord((cudaEvent_t)t->ev_stop, rt.stream));
  CHECK_CUDA(cudaEventSynchronize((cudaEvent_t)t->ev_stop));
  CHECK_CUDA(cudaEventElapsedTime(&ms, (cudaEvent_t)t->ev_start, (cudaEvent_t)t->ev_stop));
  return ms * 1e-3;
#else
  return MPI_Wtime() - t->t0;
#endif
}
