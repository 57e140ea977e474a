/* dt.h: the communication layer, the header every lesson includes (the
 * training lessons 05-09 through train.h).
 *
 * A tiny layer so that the lessons read the same on two backends:
 *   BACKEND=cpu   buffers in host memory, communication with MPI;
 *   BACKEND=cuda  buffers in GPU memory, communication with NCCL (or MPI
 *                 through host staging when ranks outnumber GPUs).
 * Each collective below is a few lines mapping to the NCCL call and the MPI
 * call of the same name (see comm.c). Counts are elements, never bytes. */
#ifndef DT_H
#define DT_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- checks */
/* Print rank, file:line, the failing call and the library's message, then
 * MPI_Abort the whole job: a distributed program must never hang on error. */
void dt_fatal(const char *file, int line, const char *call, const char *msg);

#define CHECK_MPI(call)                                                                            \
  do {                                                                                             \
    int rc_ = (call);                                                                              \
    if (rc_ != MPI_SUCCESS) {                                                                      \
      char msg_[MPI_MAX_ERROR_STRING];                                                             \
      int len_ = 0;                                                                                \
      MPI_Error_string(rc_, msg_, &len_);                                                          \
      dt_fatal(__FILE__, __LINE__, #call, msg_);                                                   \
    }                                                                                              \
  } while (0)

#define CHECK_ALLOC(ptr)                                                                           \
  do {                                                                                             \
    if ((ptr) == NULL) dt_fatal(__FILE__, __LINE__, #ptr, "out of memory");                        \
  } while (0)
/* CHECK_CUDA and CHECK_NCCL live in dt_cuda.h: only cuda-backend code
 * includes the CUDA headers, so lessons compile without them. */

/* A usage error every rank detects alike (bad flag, bad shape): rank 0
 * prints "error: ..." once, every rank finalizes and exits with code 2. */
void dt_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* --------------------------------------------------------------- options */
typedef enum {
  DT_OPT_INT,
  DT_OPT_SIZE,
  DT_OPT_DOUBLE,
  DT_OPT_STRING,
  DT_OPT_FLAG,
  DT_OPT_REFUSED
} dt_opt_kind;

typedef struct {
  const char *name;    /* "--steps" */
  dt_opt_kind kind;    /* INT/SIZE: int64_t*, DOUBLE: double*, STRING: const char**, FLAG: int* */
  void *value;         /* holds the default on entry, the parsed value on exit */
  double min, max;     /* accepted range for numbers */
  const char *choices; /* STRING only: "sgd|adamw", or NULL for any */
  const char *help;
} dt_option;

/* SIZE accepts a byte count with an optional K, M or G suffix (powers of 2).
 * The bounds are stored as double: the cast says that INT64_MAX rounding up
 * to 2^63 is meant (clang warns of the implicit one). */
#define DT_INT(n, p, lo, hi, h)                                                                    \
  { n, DT_OPT_INT, p, (double)(lo), (double)(hi), NULL, h }
#define DT_SIZE(n, p, lo, hi, h)                                                                   \
  { n, DT_OPT_SIZE, p, (double)(lo), (double)(hi), NULL, h }
#define DT_DOUBLE(n, p, lo, hi, h)                                                                 \
  { n, DT_OPT_DOUBLE, p, lo, hi, NULL, h }
#define DT_STRING(n, p, choices, h)                                                                \
  { n, DT_OPT_STRING, p, 0, 0, choices, h }
#define DT_FLAG(n, p, h)                                                                           \
  { n, DT_OPT_FLAG, p, 0, 0, NULL, h }
/* Flags of the table that this lesson does not take (shared ones, such as
 * DT_TRAIN_OPTIONS', it cannot run yet): `names` lists them, "--load --ckpt",
 * and "--precision=fp16" is one choice of a flag. They are left out of
 * --help, and given, refused with `why` (exit 2). Supporting one later is
 * deleting its name here. */
#define DT_REFUSED(names, why)                                                                     \
  { names, DT_OPT_REFUSED, NULL, 0, 0, NULL, why }
#define DT_END                                                                                     \
  { NULL, DT_OPT_INT, NULL, 0, 0, NULL, NULL }

/* --------------------------------------------------------------- runtime */
typedef struct dt_comm dt_comm;

typedef struct {
  const char *name;    /* "01_send_recv" */
  const char *summary; /* one line: what the lesson teaches */
  int min_ranks;       /* fewer ranks is a usage error */
} dt_lesson;

/* MPI_Init, parse the command line (the lesson's options plus the common
 * --comm and --help), pick the GPU from the node-local rank, bootstrap the
 * world communicator and print the banner. Returns the world communicator. */
dt_comm *dt_init(int *argc, char ***argv, const dt_lesson *lesson, dt_option *options);
void dt_finalize(void);

double dt_uptime(void);        /* seconds since dt_init began */
int dt_rank(void);             /* rank in MPI_COMM_WORLD */
int dt_size(void);             /* number of ranks */
int dt_local_rank(void);       /* rank among the ranks of this node */
int dt_device(void);           /* GPU index of this rank, -1 on the cpu backend */
const char *dt_backend(void);  /* "cpu" or "cuda" */
const char *dt_comm_lib(void); /* "MPI (Open MPI v4.1.4)", "NCCL 2.28.3", ... */

/* rank-0 printf, and one line per rank printed in rank order by rank 0
 * (collective), prefixed "[rank r]" */
void dt_print0(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void dt_print_ranks(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ------------------------------------------------------------ collectives */
/* DT_BF16 and DT_F16 hold 16-bit floats (uint16_t storage); they sum in
 * their own precision, as NCCL does (MPI through custom ops). DT_F64 and
 * DT_I64 (double, int64_t) are for bookkeeping on the host. */
typedef enum { DT_F32, DT_I32, DT_BF16, DT_F16, DT_F64, DT_I64 } dt_dtype;
typedef enum { DT_SUM, DT_AVG, DT_MAX, DT_MIN } dt_op;
typedef enum {
  DT_SEND,
  DT_RECV,
  DT_SENDRECV,
  DT_BROADCAST,
  DT_REDUCE,
  DT_ALL_REDUCE,
  DT_ALL_GATHER,
  DT_REDUCE_SCATTER,
  DT_ALL_TO_ALL,
  DT_BARRIER,
  DT_NKINDS
} dt_kind;

/* Per-rank, per-kind counters. bytes_sent: for send/recv-built algorithms the
 * bytes this rank handed to send; for the library collectives the bytes this
 * rank sends in the bandwidth-optimal ring algorithm, the model behind
 * nccl-tests' bus bandwidth (all-reduce 2(N-1)/N*S, all-gather and
 * reduce-scatter (N-1)/N*S, broadcast S on every rank but the ring's last,
 * reduce S on every rank but the root); all-to-all: the blocks this rank
 * sends to the other ranks (its own block stays, and moves nothing). */
typedef struct {
  uint64_t calls, bytes_sent;
  double seconds; /* wall time the caller was blocked in the call or wait */
} dt_counter;

struct dt_comm {
  MPI_Comm mpi;
  int rank, size;
  int nccl;        /* 1: NCCL moves device buffers; 0: MPI (host or staged) */
  void *nccl_comm; /* ncclComm_t on the cuda backend */
  char name[32];   /* "world", "split 1": named in the watchdog message */
  uint64_t seq;    /* operations started on it, numbered in the watchdog message */
  dt_counter count[DT_NKINDS];
};

size_t dt_dtype_size(dt_dtype t);
const char *dt_kind_name(dt_kind k);

dt_counter dt_comm_total(const dt_comm *c); /* summed over kinds */
void dt_comm_reset(dt_comm *c);             /* zero the counters */

/* --report-json FILE (report.c): the figures a run prints, recorded as data
 * beside the print and written by rank 0 at dt_finalize. Only rank 0's
 * records count (others' calls do nothing); a key recorded again replaces
 * the first. Axes as 13_plan names them: dp, pp, cp, tp, dp_cp (the ranks
 * that hold the same weights), ep. calls < 0: the lesson prints none. */
void dt_report_traffic(const char *axis, dt_kind kind, double calls, double bytes, double formula);
void dt_report_figure(const char *section, const char *key, double measured, double formula);
void dt_report_string(const char *section, const char *key, const char *text);
void dt_report_array(const char *key, const double *v, int64_t n);
void dt_report(const char *section, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4))); /* the value as JSON text */
const char *dt_report_path(void);          /* NULL: not asked for */

/* Split into sub-communicators (MPI_Comm_split, and ncclCommSplit on NCCL):
 * ranks with the same color form one, ordered by key. Collective. */
dt_comm *dt_comm_split(dt_comm *parent, int color, int key);
void dt_comm_free(dt_comm *c);

/* Blocking: when they return, the result is in the buffer. */
void dt_send(dt_comm *c, const void *buf, size_t count, dt_dtype t, int peer);
void dt_recv(dt_comm *c, void *buf, size_t count, dt_dtype t, int peer);
/* Both halves at once, so two neighbours exchanging cannot deadlock (MPI
 * pairs them; NCCL groups them). dst or src may be DT_NOBODY to skip a half. */
#define DT_NOBODY (-1)
void dt_sendrecv(dt_comm *c, const void *sendbuf, size_t sendcount, int dst, void *recvbuf,
                 size_t recvcount, int src, dt_dtype t);
void dt_broadcast(dt_comm *c, void *buf, size_t count, dt_dtype t, int root);
/* the reduction lands in recvbuf on root only (recvbuf is ignored elsewhere) */
void dt_reduce(dt_comm *c, const void *sendbuf, void *recvbuf, size_t count, dt_dtype t, dt_op op,
               int root);
/* sendbuf == recvbuf means in place */
void dt_all_reduce(dt_comm *c, const void *sendbuf, void *recvbuf, size_t count, dt_dtype t,
                   dt_op op);
/* count is per rank: recvbuf holds size*count; in place when
 * sendbuf == recvbuf + rank*count */
void dt_all_gather(dt_comm *c, const void *sendbuf, void *recvbuf, size_t count, dt_dtype t);
/* count is per rank: sendbuf holds size*count, recvbuf count; no overlap */
void dt_reduce_scatter(dt_comm *c, const void *sendbuf, void *recvbuf, size_t count, dt_dtype t,
                       dt_op op);
/* Block d of sendbuf goes to rank d, and block s of recvbuf comes from rank
 * s: every rank sends a different block to every other (MPI_Alltoall; on
 * NCCL, grouped sends and receives). count is per block; no overlap. */
void dt_all_to_all(dt_comm *c, const void *sendbuf, void *recvbuf, size_t count, dt_dtype t);
/* The same with a count and a displacement (in elements, from the buffer's
 * start) per peer, so the blocks may differ in size (MPI_Alltoallv): what
 * expert parallelism needs, where each rank sends each other rank the tokens
 * routed to its experts, as many as there happen to be. */
void dt_all_to_allv(dt_comm *c, const void *sendbuf, const size_t *sendcounts,
                    const size_t *sdispls, void *recvbuf, const size_t *recvcounts,
                    const size_t *rdispls, dt_dtype t);
void dt_barrier(dt_comm *c);

/* Asynchronous: start now, finish in dt_wait. The buffers must stay
 * untouched until then. dt_test lets MPI make progress between layers. */
typedef struct dt_request dt_request;
dt_request *dt_all_reduce_async(dt_comm *c, const void *sendbuf, void *recvbuf, size_t count,
                                dt_dtype t, dt_op op);
dt_request *dt_all_gather_async(dt_comm *c, const void *sendbuf, void *recvbuf, size_t count,
                                dt_dtype t);
dt_request *dt_reduce_scatter_async(dt_comm *c, const void *sendbuf, void *recvbuf, size_t count,
                                    dt_dtype t, dt_op op);
/* dt_sendrecv's two halves, in flight together until dt_wait */
dt_request *dt_sendrecv_async(dt_comm *c, const void *sendbuf, size_t sendcount, int dst,
                              void *recvbuf, size_t recvcount, int src, dt_dtype t);
int dt_test(dt_request *r);  /* 1 when complete (the request stays valid) */
void dt_wait(dt_request *r); /* completes and frees the request */

/* Watchdog: every blocking call above waits at most --timeout seconds
 * (default 300). Past that, the stuck rank prints the operation, its
 * sequence number on the communicator, the count, the peer and the lesson's
 * line that called it, and aborts the whole job (MPI_Abort; ncclCommAbort
 * first on NCCL). The macros below record that line; common/ itself defines
 * DT_COMMON_IMPL to see the plain functions. */
void dt_call_site(const char *file, int line);
double dt_timeout(void);
#ifndef DT_COMMON_IMPL
#define DT_SITE(call)          (dt_call_site(__FILE__, __LINE__), call)
#define dt_send(...)           DT_SITE(dt_send(__VA_ARGS__))
#define dt_recv(...)           DT_SITE(dt_recv(__VA_ARGS__))
#define dt_sendrecv(...)       DT_SITE(dt_sendrecv(__VA_ARGS__))
#define dt_broadcast(...)      DT_SITE(dt_broadcast(__VA_ARGS__))
#define dt_all_reduce(...)     DT_SITE(dt_all_reduce(__VA_ARGS__))
#define dt_all_gather(...)     DT_SITE(dt_all_gather(__VA_ARGS__))
#define dt_reduce_scatter(...) DT_SITE(dt_reduce_scatter(__VA_ARGS__))
#define dt_all_to_all(...)     DT_SITE(dt_all_to_all(__VA_ARGS__))
#define dt_all_to_allv(...)    DT_SITE(dt_all_to_allv(__VA_ARGS__))
#define dt_barrier(...)        DT_SITE(dt_barrier(__VA_ARGS__))
#define dt_wait(...)           DT_SITE(dt_wait(__VA_ARGS__))
#endif
/* The same deadline for what is not a collective of this layer: host MPI
 * calls on host memory (losses, timings, verdicts), file writes and reads.
 * DT_MPI(MPI_Allreduce(...)) checks the call and, past --timeout, the
 * watchdog names it ("stuck ... in MPI_Allreduce(...)") with its line.
 * DT_WATCH("what") ... dt_watch_done() brackets anything else that may
 * block (a file on a stalled file system). One at a time: no nesting. */
void dt_watch_call(const char *what, const char *file, int line);
/* the same with a deadline of its own, for a wait known to be longer */
void dt_watch_call_within(const char *what, const char *file, int line, double seconds);
void dt_watch_done(void);
#define DT_WATCH(what) dt_watch_call(what, __FILE__, __LINE__)
#define DT_MPI(call)                                                                               \
  do {                                                                                             \
    dt_watch_call(#call, __FILE__, __LINE__);                                                      \
    dt_mpi_progress(1);                                                                            \
    CHECK_MPI(call);                                                                               \
    dt_mpi_progress(0);                                                                            \
    dt_watch_done();                                                                               \
  } while (0)
/* Around a host MPI call: MPI moves the nonblocking collectives in flight
 * inside any call, into their device buffers, as a GPU would at any time;
 * the cpu's device-boundary mode (boundary.h) opens them for it */
void dt_mpi_progress(int begin);

/* ----------------------------------------------------------- bookkeeping */
/* Facts about a run, not its algorithm: losses, timings, counts, a check's
 * verdict, a checkpoint gathered to rank 0. Host memory, MPI over c's ranks,
 * under the watchdog (named with the caller's line), and never in c's
 * counters: the byte figures hold the algorithm's traffic alone. */
void dt_host_all_reduce_at(const char *file, int line, dt_comm *c, void *buf, size_t count,
                           dt_dtype t, dt_op op); /* in place; no DT_AVG */
void dt_host_reduce_at(const char *file, int line, dt_comm *c, void *buf, size_t count, dt_dtype t,
                       dt_op op, int root); /* in place, the result on root */
void dt_host_broadcast_at(const char *file, int line, dt_comm *c, void *buf, size_t count,
                          dt_dtype t, int root);
/* count per rank; recv (size x count) is used on root only */
void dt_host_gather_at(const char *file, int line, dt_comm *c, const void *send, void *recv,
                       size_t count, dt_dtype t, int root);
void dt_host_barrier_at(const char *file, int line, dt_comm *c);
#define dt_host_all_reduce(...) dt_host_all_reduce_at(__FILE__, __LINE__, __VA_ARGS__)
#define dt_host_reduce(...)     dt_host_reduce_at(__FILE__, __LINE__, __VA_ARGS__)
#define dt_host_broadcast(...)  dt_host_broadcast_at(__FILE__, __LINE__, __VA_ARGS__)
#define dt_host_gather(...)     dt_host_gather_at(__FILE__, __LINE__, __VA_ARGS__)
#define dt_host_barrier(...)    dt_host_barrier_at(__FILE__, __LINE__, __VA_ARGS__)

/* ----------------------------------------------------------------- nodes */
/* The ranks grouped by node (nodes.c). ranks_per_node 0: the real nodes,
 * the ranks that share memory (a machine of a cluster, or an emulated node
 * of tools/cluster.sh); K > 0: emulate nodes of K consecutive ranks. node
 * holds this node's ranks, leaders the node leaders (local rank 0 of every
 * node), used by the leaders only. Collective over world. */
typedef struct {
  dt_comm *node, *leaders;
  int leader, nodes, ranks; /* this rank leads its node; nodes; ranks in all */
} dt_nodes;
dt_nodes dt_nodes_split(dt_comm *world, int ranks_per_node);
void dt_nodes_free(dt_nodes *n);
/* Reduce to each node's leader, all-reduce among the leaders, broadcast
 * inside each node: only the leaders' bytes cross between nodes. In place. */
void dt_all_reduce_hierarchical(const dt_nodes *n, void *buf, size_t count, dt_dtype t, dt_op op);
#ifndef DT_COMMON_IMPL
#define dt_all_reduce_hierarchical(...) DT_SITE(dt_all_reduce_hierarchical(__VA_ARGS__))
#endif

/* ---------------------------------------------------------------- memory */
/* Every buffer is accounted under a tag, so lessons can print memory per rank
 * by kind next to the formulas. */
typedef enum {
  DT_PARAMS,
  DT_GRADS,
  DT_OPTIM,
  DT_ACTIV,
  DT_COMMBUF,
  DT_DATA,
  DT_OTHER,
  DT_NTAGS
} dt_tag;

void *dt_alloc(size_t bytes, dt_tag tag); /* backend memory, zero-filled */
/* Host memory, count x size bytes, zero-filled: the one host allocation of
 * the lessons and common (free() releases it). Out of memory is a clear
 * abort naming the caller's line, never a NULL to check. */
void *dt_host_alloc_at(const char *file, int line, size_t count, size_t size);
#define dt_host_alloc(count, size) dt_host_alloc_at(__FILE__, __LINE__, count, size)
double dt_memory_available(void); /* bytes: free GPU memory or MemAvailable */
float *dt_alloc_f32(size_t count, dt_tag tag);
void dt_free(void *buf);
void dt_copy_to_host(void *host, const void *buf, size_t bytes);
void dt_copy_from_host(void *buf, const void *host, size_t bytes);
void dt_copy(void *dst, const void *src, size_t bytes); /* within the backend */
/* rows of width bytes, spitch apart in src, to dpitch apart in dst (not
 * overlapping), within the backend: one call, not one per row */
void dt_copy_2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                size_t rows);
void dt_zero(void *buf, size_t bytes);

/* Whether host code may read and write dt_alloc's memory itself: on the
 * cpu backend, except in its device-boundary mode (DT_DEVICE_BOUNDARY=1 in
 * the environment), where that memory is out of the host's reach outside
 * the backend's kernels, copies and collectives, as a GPU's is. Code that
 * takes that shortcut (filling a batch in place) asks first, and copies
 * otherwise; docs/gpu.md, "The device boundary on the cpu". */
int dt_host_sees_device(void);

const char *dt_tag_name(dt_tag tag);
size_t dt_mem_current(dt_tag tag);
size_t dt_mem_peak(dt_tag tag);
size_t dt_mem_peak_total(void); /* peak of the sum over tags */
void dt_mem_reset_peaks(void);  /* peaks restart from the current usage */
/* Between dt_mem_aside(1) and dt_mem_aside(0) (nested), buffers are made and
 * freed as any, but counted under no tag, before and after: what the check's
 * one process holds on rank 0 during training stays out of the lesson's
 * tables. A buffer made aside and kept (a kernel's scratch) stays out too. */
void dt_mem_aside(int on);
int dt_mem_is_aside(void);

/* ---------------------------------------------------------------- timing */
double dt_now(void); /* MPI_Wtime, seconds */
/* this thread's CPU time, seconds: what the rank itself computed, whatever
 * else shares its core (ranks oversubscribed on a small machine) */
double dt_cpu_now(void);
void dt_sync(void); /* wait for this rank's queued GPU work; no-op on cpu */
/* Elapsed time of the work queued between start and stop: CUDA events on the
 * GPU (so a kernel's time is measured, not its launch), MPI_Wtime on cpu. */
typedef struct {
  double t0;
  void *ev_start, *ev_stop;
} dt_timer;
void dt_timer_start(dt_timer *t);
double dt_timer_stop(dt_timer *t); /* seconds */
/* The rank's own work over many spans, without a wait in any: on the cpu
 * this thread's CPU time (dt_cpu_now: what the rank computed, whatever
 * else shares its core); on a GPU the work queued in each span, by CUDA
 * events, summed as they complete (dt_work_seconds waits for the last). */
typedef struct {
  double seconds, t0;
  void **events; /* cuda: start, stop of each span not yet summed */
  int n, cap;
} dt_work;
void dt_work_start(dt_work *w);
void dt_work_stop(dt_work *w);
double dt_work_seconds(dt_work *w); /* the spans so far */

/* ----------------------------------------------------------------- trace */
/* --trace FILE: spans per rank as Chrome trace JSON (Perfetto opens it).
 * Collectives record themselves; lessons wrap compute in begin/end. */
void dt_trace_enable(int on); /* collective: also sets the common time origin */
int dt_trace_enabled(void);
double dt_span_begin(void);
void dt_span_end(const char *name, const char *cat, double t0); /* cat: "compute", "comm" */
void dt_trace_write(const char *path);                          /* collective; rank 0 writes */

/* ------------------------------------------------------------------- rng */
/* Counter-based: the value at (seed, stream, index) is a pure function of the
 * three, so any rank can produce any element of any tensor without talking to
 * the others, and the cpu and cuda backends produce the same bits. */
uint64_t dt_rng_u64(uint64_t seed, uint64_t stream, uint64_t index);
float dt_rng_uniform(uint64_t seed, uint64_t stream, uint64_t index); /* [0, 1), 24 bits */
/* normal(0, 1) by Box-Muller from indices 2 index and 2 index + 1 (host) */
float dt_rng_normal(uint64_t seed, uint64_t stream, uint64_t index);

/* --------------------------------------------------------------- kernels */
/* On the backend's memory: host loops on cpu, CUDA kernels on cuda. */
void dt_add(float *dst, const float *src, size_t n); /* dst += src */
void dt_scale(float *buf, size_t n, float s);        /* buf *= s */
/* Mixed precision: float32 <-> 16 bits (t = DT_BF16 or DT_F16), rounding to
 * nearest even, bit-identical on both backends. */
void dt_to_half(const float *src, void *dst, size_t n, dt_dtype t);
void dt_from_half(const void *src, float *dst, size_t n, dt_dtype t);
void dt_round_half(float *buf, size_t n, dt_dtype t);  /* a round trip through 16 bits */
size_t dt_count_nonfinite(const float *buf, size_t n); /* inf and NaN: fp16 overflow */
/* buf[i] = lo + (hi-lo) * uniform(seed, stream, offset + i) */
void dt_fill_uniform(float *buf, size_t n, uint64_t seed, uint64_t stream, uint64_t offset,
                     float lo, float hi);

#ifdef __cplusplus
}
#endif

#endif
