/* runtime.c: start-up and shut-down (dt_init, dt_finalize), the top of the
 * communication layer: it calls the files below, none calls it.
 *
 * Start-up order matters: MPI first (it tells us who we are), then the
 * flags (so --help works anywhere), then the GPU from the node-local rank,
 * then the communicator (NCCL needs its GPU chosen before it starts). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm_internal.h"
#ifdef DT_CUDA
#include "dt_cuda.h"
#endif

/* what start-up finds besides the facts of core.c (dt_rt) */
static struct {
  int local_size, nodes;
  char notice[160]; /* printed under the banner, which must stay the first line */
  dt_comm *world;
} rt;

/* "Open MPI v4.1.4, package: ..." -> "Open MPI v4.1.4" */
static void mpi_library_name(char *out, size_t n) {
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(version, &len);
  version[strcspn(version, ",\n")] = '\0';
  snprintf(out, n, "MPI (%.100s)", version);
}

#ifdef DT_CUDA
/* Why a rank has no GPU, said by the lowest such rank through rank 0: the
 * CUDA error (no device, driver too old, no permission) is the diagnosis. */
static void fail_without_gpu(int ngpus, cudaError_t err) {
  int mine = ngpus > 0 ? dt_rt.size : dt_rt.rank, first = dt_rt.size;
  DT_MPI(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  if (first == dt_rt.size) return;
  char why[256];
  const char *visible = getenv("CUDA_VISIBLE_DEVICES");
  snprintf(why, sizeof why, "%s%s%s%s",
           err != cudaSuccess ? cudaGetErrorString(err) : "cudaGetDeviceCount found 0 devices",
           visible ? " (CUDA_VISIBLE_DEVICES=" : "", visible ? visible : "", visible ? ")" : "");
  DT_MPI(MPI_Bcast(why, sizeof why, MPI_CHAR, first, MPI_COMM_WORLD));
  dt_fail("this binary was built with BACKEND=cuda but rank %d sees no CUDA GPU: %s; "
          "rebuild with 'make BACKEND=cpu' to run on CPUs",
          first, why);
}

/* Each rank takes GPU local_rank % (GPUs it sees): one GPU per rank when a
 * node has enough, or when a scheduler gives each rank its own through
 * CUDA_VISIBLE_DEVICES (then every rank sees one, its "GPU 0"). Whether ranks
 * share a GPU is decided by comparing the GPUs' UUIDs across ranks, not by
 * counting: NCCL (before 2.30) refuses two ranks of one communicator on one
 * GPU, and then collectives stage through host memory over MPI. Returns
 * whether NCCL is used. */
static int choose_device(const char *comm_choice, char *gpu_name, size_t n) {
  int ngpus = 0;
  cudaError_t err = cudaGetDeviceCount(&ngpus);
  if (err != cudaSuccess) ngpus = 0;
  fail_without_gpu(ngpus, err);
  dt_rt.device = dt_rt.local_rank % ngpus;
  CHECK_CUDA(cudaSetDevice(dt_rt.device));
  CHECK_CUDA(cudaStreamCreateWithFlags(&dt_rt.stream, cudaStreamNonBlocking));
  CHECK_CUDA(cudaStreamCreateWithFlags(&dt_rt.side_stream, cudaStreamNonBlocking));
  struct cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, dt_rt.device));
  snprintf(gpu_name, n, "%.100s", prop.name);

  /* UUIDs are unique across machines too, so the world can compare them */
  enum { U = sizeof prop.uuid.bytes };
  char *uuids = malloc((size_t)dt_rt.size * U);
  CHECK_ALLOC(uuids);
  DT_MPI(MPI_Allgather(prop.uuid.bytes, U, MPI_BYTE, uuids, U, MPI_BYTE, MPI_COMM_WORLD));
  int distinct = 0;
  for (int r = 0; r < dt_rt.size; r++) {
    int seen = 0;
    for (int q = 0; q < r && !seen; q++)
      seen = !memcmp(uuids + (size_t)r * U, uuids + (size_t)q * U, U);
    distinct += !seen;
  }
  free(uuids);
  int shared = distinct < dt_rt.size;

  int nccl_version = 0;
  ncclGetVersion(&nccl_version);
  if (shared && strcmp(comm_choice, "nccl") == 0)
    dt_fail("--comm nccl: %d ranks share %d GPU(s), and NCCL %d refuses two ranks of one "
            "communicator on one GPU (\"Duplicate GPU detected\"); use --comm mpi or at most one "
            "rank per GPU",
            dt_rt.size, distinct, nccl_version);
  int use_nccl = strcmp(comm_choice, "mpi") != 0 && !shared;
  if (use_nccl)
    snprintf(dt_rt.comm_lib, sizeof dt_rt.comm_lib, "NCCL %d.%d.%d", nccl_version / 10000,
             nccl_version / 100 % 100, nccl_version % 100);
  if (shared)
    snprintf(rt.notice, sizeof rt.notice,
             "note: %d ranks share %d GPU(s); collectives stage through host memory over MPI\n",
             dt_rt.size, distinct);
  return use_nccl;
}
#endif

dt_comm *dt_init(int *argc, char ***argv, const dt_lesson *lesson, dt_option *options) {
  dt_mem_reexec(*argv);
  dt_boundary_setup(); /* DT_DEVICE_BOUNDARY: settings MPI_Init reads */
  CHECK_MPI(MPI_Init(argc, argv));
  dt_rt.start = MPI_Wtime();
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN); /* so CHECK_MPI sees errors */
  MPI_Comm_rank(MPI_COMM_WORLD, &dt_rt.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &dt_rt.size);

  const char *comm_choice = "auto", *report = NULL;
  double timeout = 0;
  if (dt_cli_parse(*argc, *argv, lesson, options, &comm_choice, &timeout, &report)) {
    MPI_Finalize();
    exit(0);
  }
  dt_watchdog_start(timeout);
  /* Ranks that share memory share a node: their order picks the GPU. Both
   * calls wait for every rank, so the watchdog is already running. */
  MPI_Comm node;
  DT_MPI(
      MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, dt_rt.rank, MPI_INFO_NULL, &node));
  MPI_Comm_rank(node, &dt_rt.local_rank);
  MPI_Comm_size(node, &rt.local_size);
  char hosts[200];
  dt_describe_nodes(node, hosts, sizeof hosts);
  MPI_Comm_free(&node);
  int leader = dt_rt.local_rank == 0;
  DT_MPI(MPI_Allreduce(&leader, &rt.nodes, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  if (dt_rt.size < lesson->min_ranks)
    dt_fail("%s needs at least %d ranks, got %d: run it as 'mpirun -np %d %s'", lesson->name,
            lesson->min_ranks, dt_rt.size, lesson->min_ranks < 4 ? 4 : lesson->min_ranks,
            (*argv)[0]);

  mpi_library_name(dt_rt.comm_lib, sizeof dt_rt.comm_lib);
  char devices[160] = "CPU only";
  int use_nccl = 0;
#ifdef DT_CUDA
  char gpu[128];
  use_nccl = choose_device(comm_choice, gpu, sizeof gpu);
  snprintf(devices, sizeof devices, "GPU %d of rank 0: %s", dt_rt.device, gpu);
#else
  if (strcmp(comm_choice, "nccl") == 0)
    dt_fail("--comm nccl needs the cuda backend; this binary was built with BACKEND=cpu");
#endif
  dt_mem_init();
  rt.world = dt_comm_create(MPI_COMM_WORLD, use_nccl);
  char on_nodes[216] = ""; /* which ranks run where, once there is more than one node */
  if (rt.nodes > 1) snprintf(on_nodes, sizeof on_nodes, " (%s)", hosts);
  dt_print0("%s | backend %s | comm %s | %d rank%s on %d node%s%s | %s\n", lesson->name,
            dt_backend(), dt_rt.comm_lib, dt_rt.size, dt_rt.size == 1 ? "" : "s", rt.nodes,
            rt.nodes == 1 ? "" : "s", on_nodes, devices);
  dt_print0("%s\n%s", lesson->summary, rt.notice);
  dt_report_open(report, lesson);
  return rt.world;
}

void dt_finalize(void) {
  dt_report_write();
  dt_comm_free(rt.world);
  dt_comm_release_staging();
  dt_mem_release_cache();
#ifdef DT_CUDA
  cudaStreamDestroy(dt_rt.stream);
  cudaStreamDestroy(dt_rt.side_stream);
#endif
  dt_watch_finalize();
  dt_watchdog_stop();
}
