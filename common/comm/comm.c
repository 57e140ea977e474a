/* comm.c: the collectives, each a few lines per library.
 *
 * Three paths, one API:
 *   cpu backend          MPI on the caller's host buffers;
 *   cuda backend, NCCL   NCCL on the device buffers, on this rank's stream;
 *   cuda backend, MPI    device -> host copy, MPI, host -> device copy, because
 *                        Debian's Open MPI is not CUDA-aware: MPI must never
 *                        see a device pointer.
 * Every call adds to the communicator's counters (calls, bytes, seconds).
 * On a communicator of one rank the collectives are no-ops (the result is
 * the input): nothing moves, nothing is copied unless the call is out of
 * place, nothing is counted, no 1/N pass for an average. */
#define _POSIX_C_SOURCE 200809L
#define DT_COMMON_IMPL  /* the functions themselves, not the call-site macros */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm_internal.h"
#include "half_core.h"
#ifdef DT_CUDA
#include "dt_cuda.h"
#define STAGED(c) (!(c)->nccl) /* device buffers that MPI must not see */
#else
#define STAGED(c) 0
#endif

size_t dt_dtype_size(dt_dtype t) {
  static const size_t size[] = {
      [DT_F32] = 4, [DT_I32] = 4, [DT_BF16] = 2, [DT_F16] = 2, [DT_F64] = 8, [DT_I64] = 8};
  return size[t];
}
MPI_Datatype dt_mpi_type(dt_dtype t) {
  switch (t) {
  case DT_F32: return MPI_FLOAT;
  case DT_I32: return MPI_INT32_T;
  case DT_F64: return MPI_DOUBLE;
  case DT_I64: return MPI_INT64_T;
  default: return MPI_UINT16_T;
  }
}

/* MPI knows no 16-bit floats: they travel as uint16 and are added by these
 * operations, which round each partial sum back to 16 bits as NCCL does. */
#define HALF_OP(name, to_f32, from_f32, combine)                                                   \
  static void name(void *in, void *inout, int *len, MPI_Datatype *type) {                          \
    (void)type;                                                                                    \
    const uint16_t *a = in;                                                                        \
    uint16_t *b = inout;                                                                           \
    for (int i = 0; i < *len; i++) {                                                               \
      float x = to_f32(a[i]), y = to_f32(b[i]);                                                    \
      b[i] = from_f32(combine);                                                                    \
    }                                                                                              \
  }
HALF_OP(bf16_sum, dt_bf16_to_f32, dt_f32_to_bf16, x + y)
HALF_OP(bf16_max, dt_bf16_to_f32, dt_f32_to_bf16, x > y ? x : y)
HALF_OP(f16_sum, dt_f16_to_f32, dt_f32_to_f16, x + y)
HALF_OP(f16_max, dt_f16_to_f32, dt_f32_to_f16, x > y ? x : y)
HALF_OP(bf16_min, dt_bf16_to_f32, dt_f32_to_bf16, x < y ? x : y)
HALF_OP(f16_min, dt_f16_to_f32, dt_f32_to_f16, x < y ? x : y)

/* MPI has no average: sum, then scale by 1/N (see dt_finish_avg). */
MPI_Op dt_mpi_op(dt_op op, dt_dtype t) {
  static MPI_Op half_ops[6] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL,
                               MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
  static MPI_User_function *fns[6] = {bf16_sum, bf16_max, bf16_min, f16_sum, f16_max, f16_min};
  if (t != DT_BF16 && t != DT_F16) return op == DT_MAX ? MPI_MAX : op == DT_MIN ? MPI_MIN : MPI_SUM;
  int i = (t == DT_F16) * 3 + (op == DT_MAX) + 2 * (op == DT_MIN);
  if (half_ops[i] == MPI_OP_NULL) CHECK_MPI(MPI_Op_create(fns[i], 1, &half_ops[i]));
  return half_ops[i];
}
#ifdef DT_CUDA
ncclDataType_t dt_nccl_type(dt_dtype t) {
  switch (t) {
  case DT_F32: return ncclFloat32;
  case DT_I32: return ncclInt32;
  case DT_BF16: return ncclBfloat16;
  case DT_F64: return ncclFloat64;
  case DT_I64: return ncclInt64;
  default: return ncclFloat16;
  }
}
ncclRedOp_t dt_nccl_op(dt_op op) {
  return op == DT_MAX ? ncclMax : op == DT_MIN ? ncclMin : op == DT_AVG ? ncclAvg : ncclSum;
}
#endif

/* MPI counts are ints: refuse, rather than wrap, a larger message. */
int dt_mpi_count(size_t count) {
  if (count > (size_t)INT32_MAX)
    dt_fatal(__FILE__, __LINE__, "MPI count", "more than 2^31-1 elements");
  return (int)count;
}

#ifdef DT_CUDA
/* The live NCCL communicators, so that dt_fail can abort them: an exit
 * without it leaves NCCL's proxy threads and buffers to the process's end. */
enum { MAX_NCCL = 64 };
static dt_comm *live_nccl[MAX_NCCL];
static void nccl_remember(dt_comm *c) {
  for (int i = 0; i < MAX_NCCL; i++)
    if (!live_nccl[i]) {
      live_nccl[i] = c;
      return;
    }
}
static void nccl_forget(dt_comm *c) {
  for (int i = 0; i < MAX_NCCL; i++)
    if (live_nccl[i] == c) live_nccl[i] = NULL;
}
/* Abort, not destroy: a failing run may leave operations in flight that the
 * other ranks will never match, and ncclCommDestroy would wait for them. */
void dt_comm_abort_nccl(void) {
  for (int i = 0; i < MAX_NCCL; i++)
    if (live_nccl[i]) {
      ncclCommAbort((ncclComm_t)live_nccl[i]->nccl_comm);
      live_nccl[i]->nccl = 0;
      live_nccl[i] = NULL;
    }
}
#endif

dt_comm *dt_comm_create(MPI_Comm mpi, int use_nccl) {
  dt_comm *c = calloc(1, sizeof *c);
  CHECK_ALLOC(c);
  c->mpi = mpi;
  MPI_Comm_rank(mpi, &c->rank);
  MPI_Comm_size(mpi, &c->size);
  c->nccl = use_nccl;
  snprintf(c->name, sizeof c->name, "%s", mpi == MPI_COMM_WORLD ? "world" : "split");
#ifdef DT_CUDA
  if (use_nccl) { /* the bootstrap: rank 0 makes the id, MPI carries it to all */
    ncclUniqueId id;
    if (c->rank == 0) CHECK_NCCL(ncclGetUniqueId(&id));
    DT_MPI(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, mpi));
    CHECK_NCCL(ncclCommInitRank((ncclComm_t *)&c->nccl_comm, c->size, id, c->rank));
    nccl_remember(c);
  }
#endif
  return c;
}

dt_comm *dt_comm_split(dt_comm *parent, int color, int key) {
  MPI_Comm sub;
  DT_MPI(MPI_Comm_split(parent->mpi, color, key, &sub));
  MPI_Comm_set_errhandler(sub, MPI_ERRORS_RETURN);
  dt_comm *c = dt_comm_create(sub, 0);
  snprintf(c->name, sizeof c->name, "split %d", color);
#ifdef DT_CUDA
  c->nccl = parent->nccl;
  if (c->nccl) {
    CHECK_NCCL(ncclCommSplit((ncclComm_t)parent->nccl_comm, color, key, (ncclComm_t *)&c->nccl_comm,
                             NULL));
    nccl_remember(c);
  }
#endif
  return c;
}

void dt_comm_free(dt_comm *c) {
  if (!c) return;
#ifdef DT_CUDA
  if (c->nccl) {
    nccl_forget(c);
    ncclCommDestroy((ncclComm_t)c->nccl_comm);
  }
#endif
  if (c->mpi != MPI_COMM_WORLD) MPI_Comm_free(&c->mpi);
  free(c);
}

dt_counter dt_comm_total(const dt_comm *c) {
  dt_counter t = {0, 0, 0.0};
  for (int k = 0; k < DT_NKINDS; k++) {
    t.calls += c->count[k].calls;
    t.bytes_sent += c->count[k].bytes_sent;
    t.seconds += c->count[k].seconds;
  }
  return t;
}

void dt_comm_reset(dt_comm *c) { memset(c->count, 0, sizeof c->count); }

/* ---- timing and counting ---- */
static double begin(dt_comm *c, dt_kind k, size_t count, int peer) {
  c->seq++;
  dt_watch_begin(c, k, count, peer); /* from here on, the watchdog minds the deadline */
  /* the cpu's collectives are its NCCL: MPI on device memory (boundary.h) */
  if (dt_boundary) dt_kernel_enter(dt_kind_name(k), "", NULL, 0);
#ifdef DT_CUDA
  /* Let the stream's earlier work finish, so the seconds counted are the
   * collective's alone; polled under the deadline, never a bare sync. */
  if (c->nccl) dt_nccl_complete(c);
#endif
  return dt_now();
}

static void finish(dt_comm *c, dt_kind k, uint64_t bytes, double t0) {
#ifdef DT_CUDA
  if (c->nccl) dt_nccl_complete(c); /* blocking means the result is there on return */
#endif
  c->count[k].calls++;
  c->count[k].bytes_sent += bytes;
  c->count[k].seconds += dt_now() - t0;
  dt_span_end(dt_kind_name(k), "comm", t0);
  dt_kernel_leave(NULL);
  dt_watch_end();
}

/* Bytes a rank sends in the ring algorithm (see dt.h). */
uint64_t dt_ring_bytes(dt_comm *c, dt_kind k, size_t bytes) {
  uint64_t n = (uint64_t)c->size;
  switch (k) {
  case DT_ALL_REDUCE: return 2 * (n - 1) * bytes / n;
  case DT_ALL_GATHER:
  case DT_REDUCE_SCATTER: return (n - 1) * bytes; /* bytes per rank */
  default: return 0;
  }
}

/* ---- host staging (cuda backend without NCCL) ---- */
static void *staging[2];
static size_t staging_size[2];

static void *stage(int slot, size_t bytes) {
  if (staging_size[slot] < bytes) {
    free(staging[slot]);
    staging[slot] = malloc(bytes);
    CHECK_ALLOC(staging[slot]);
    staging_size[slot] = bytes;
  }
  return staging[slot];
}

/* MPI's all-to-all-v counts and displacements are ints: 4N of them, kept. */
static int *int_counts, int_counts_n;

void dt_comm_release_staging(void) {
  free(int_counts);
  int_counts = NULL;
  int_counts_n = 0;
  for (int s = 0; s < 2; s++) {
    free(staging[s]);
    staging[s] = NULL;
    staging_size[s] = 0;
  }
}

/* The buffer MPI reads: the caller's own, or a host copy of device data. */
static const void *mpi_in(dt_comm *c, const void *buf, size_t bytes, int slot) {
  (void)c;
  if (!STAGED(c)) return buf;
  void *host = stage(slot, bytes);
  dt_copy_to_host(host, buf, bytes);
  return host;
}
/* The buffer MPI writes, and the copy back to the device afterwards. */
static void *mpi_out(dt_comm *c, void *buf, size_t bytes, int slot) {
  (void)c;
  return STAGED(c) ? stage(slot, bytes) : buf;
}
static void mpi_out_done(dt_comm *c, void *buf, const void *host, size_t bytes) {
  (void)c, (void)buf, (void)host, (void)bytes;
  if (STAGED(c)) dt_copy_from_host(buf, host, bytes);
}

/* One rank's result, or the copy an out-of-place call needs: 1 when done. */
static int alone(dt_comm *c, const void *sendbuf, void *recvbuf, size_t bytes) {
  if (c->size > 1) return 0;
  if (recvbuf && sendbuf != recvbuf) dt_copy(recvbuf, sendbuf, bytes);
  return 1;
}

void dt_finish_avg(dt_comm *c, void *buf, size_t count, dt_dtype t, dt_op op) {
  if (op != DT_AVG || c->size == 1) return;
  if (t != DT_F32)
    dt_fatal(__FILE__, __LINE__, "dt_op DT_AVG",
             "average needs DT_F32: sum in 16 bits, scale in 32");
  dt_scale(buf, count, 1.0f / (float)c->size);
}

/* ---- point to point ---- */
void dt_send(dt_comm *c, const void *buf, size_t count, dt_dtype t, int peer) {
  size_t bytes = count * dt_dtype_size(t);
  dt_expect_collective("dt_send", buf, bytes, NULL, 0);
  double t0 = begin(c, DT_SEND, count, peer);
#ifdef DT_CUDA
  if (c->nccl) CHECK_NCCL(ncclSend(buf, count, dt_nccl_type(t), peer, c->nccl_comm, dt_stream()));
#endif
  if (!c->nccl) {
    CHECK_MPI(
        MPI_Send(mpi_in(c, buf, bytes, 0), dt_mpi_count(count), dt_mpi_type(t), peer, 0, c->mpi));
  }
  finish(c, DT_SEND, bytes, t0);
}

void dt_recv(dt_comm *c, void *buf, size_t count, dt_dtype t, int peer) {
  size_t bytes = count * dt_dtype_size(t);
  dt_expect_collective("dt_recv", NULL, 0, buf, bytes);
  double t0 = begin(c, DT_RECV, count, peer);
#ifdef DT_CUDA
  if (c->nccl) CHECK_NCCL(ncclRecv(buf, count, dt_nccl_type(t), peer, c->nccl_comm, dt_stream()));
#endif
  if (!c->nccl) {
    void *host = mpi_out(c, buf, bytes, 0);
    CHECK_MPI(
        MPI_Recv(host, dt_mpi_count(count), dt_mpi_type(t), peer, 0, c->mpi, MPI_STATUS_IGNORE));
    mpi_out_done(c, buf, host, bytes);
  }
  finish(c, DT_RECV, 0, t0);
}

void dt_sendrecv(dt_comm *c, const void *sendbuf, size_t sendcount, int dst, void *recvbuf,
                 size_t recvcount, int src, dt_dtype t) {
  if (dst == DT_NOBODY) sendcount = 0; /* a missing half moves nothing, whatever its count */
  if (src == DT_NOBODY) recvcount = 0;
  size_t es = dt_dtype_size(t), sbytes = sendcount * es;
  dt_expect_collective("dt_sendrecv", sendbuf, sbytes, recvbuf, recvcount * es);
  double t0 = begin(c, DT_SENDRECV, sendcount, dst);
#ifdef DT_CUDA
  if (c->nccl) { /* grouped: NCCL starts both together, so neither waits on the other */
    CHECK_NCCL(ncclGroupStart());
    if (dst != DT_NOBODY)
      CHECK_NCCL(ncclSend(sendbuf, sendcount, dt_nccl_type(t), dst, c->nccl_comm, dt_stream()));
    if (src != DT_NOBODY)
      CHECK_NCCL(ncclRecv(recvbuf, recvcount, dt_nccl_type(t), src, c->nccl_comm, dt_stream()));
    CHECK_NCCL(ncclGroupEnd());
  }
#endif
  if (!c->nccl) {
    const void *s = dst == DT_NOBODY ? sendbuf : mpi_in(c, sendbuf, sbytes, 0);
    void *r = src == DT_NOBODY ? recvbuf : mpi_out(c, recvbuf, recvcount * es, 1);
    CHECK_MPI(MPI_Sendrecv(s, dt_mpi_count(sendcount), dt_mpi_type(t),
                           dst == DT_NOBODY ? MPI_PROC_NULL : dst, 0, r, dt_mpi_count(recvcount),
                           dt_mpi_type(t), src == DT_NOBODY ? MPI_PROC_NULL : src, 0, c->mpi,
                           MPI_STATUS_IGNORE));
    if (src != DT_NOBODY) mpi_out_done(c, recvbuf, r, recvcount * es);
  }
  finish(c, DT_SENDRECV, sbytes, t0);
}

/* ---- collectives ---- */
void dt_broadcast(dt_comm *c, void *buf, size_t count, dt_dtype t, int root) {
  size_t bytes = count * dt_dtype_size(t);
  dt_expect_collective("dt_broadcast", buf, bytes, NULL, 0);
  if (alone(c, buf, buf, bytes)) return;
  double t0 = begin(c, DT_BROADCAST, count, root);
#ifdef DT_CUDA
  if (c->nccl)
    CHECK_NCCL(ncclBroadcast(buf, buf, count, dt_nccl_type(t), root, c->nccl_comm, dt_stream()));
#endif
  if (!c->nccl) {
    void *host = c->rank == root ? (void *)mpi_in(c, buf, bytes, 0) : mpi_out(c, buf, bytes, 0);
    CHECK_MPI(MPI_Bcast(host, dt_mpi_count(count), dt_mpi_type(t), root, c->mpi));
    if (c->rank != root) mpi_out_done(c, buf, host, bytes);
  }
  /* ring model: every rank forwards S except the last in the chain from root */
  int last = (root + c->size - 1) % c->size;
  finish(c, DT_BROADCAST, c->rank == last ? 0 : bytes, t0);
}

void dt_reduce(dt_comm *c, const void *sendbuf, void *recvbuf, size_t count, dt_dtype t, dt_op op,
               int root) {
  size_t bytes = count * dt_dtype_size(t);
  dt_expect_collective("dt_reduce", sendbuf, bytes, c->rank == root ? recvbuf : NULL, bytes);
  if (alone(c, sendbuf, recvbuf, bytes)) return;
  double t0 = begin(c, DT_REDUCE, count, root);
#ifdef DT_CUDA
  if (c->nccl)
    CHECK_NCCL(ncclReduce(sendbuf, recvbuf, count, dt_nccl_type(t), dt_nccl_op(op), root,
                          c->nccl_comm, dt_stream()));
#endif
  if (!c->nccl) {
    int mine = c->rank == root, in_place = mine && sendbuf == recvbuf && !STAGED(c);
    const void *s = in_place ? MPI_IN_PLACE : mpi_in(c, sendbuf, bytes, 0);
    void *r = mine ? mpi_out(c, recvbuf, bytes, 1) : NULL;
    CHECK_MPI(
        MPI_Reduce(s, r, dt_mpi_count(count), dt_mpi_type(t), dt_mpi_op(op, t), root, c->mpi));
    if (mine) {
      mpi_out_done(c, recvbuf, r, bytes);
      dt_finish_avg(c, recvbuf, count, t, op);
    }
  }
  /* ring model: every rank but the root passes S along the chain to it */
  finish(c, DT_REDUCE, c->rank == root ? 0 : bytes, t0);
}

void dt_all_reduce(dt_comm *c, const void *sendbuf, void *recvbuf, size_t count, dt_dtype t,
                   dt_op op) {
  size_t bytes = count * dt_dtype_size(t);
  dt_expect_collective("dt_all_reduce", sendbuf, bytes, recvbuf, bytes);
  if (alone(c, sendbuf, recvbuf, bytes)) return;
  double t0 = begin(c, DT_ALL_REDUCE, count, -1);
#ifdef DT_CUDA
  if (c->nccl)
    CHECK_NCCL(ncclAllReduce(sendbuf, recvbuf, count, dt_nccl_type(t), dt_nccl_op(op), c->nccl_comm,
                             dt_stream()));
#endif
  if (!c->nccl) {
    const void *s = mpi_in(c, sendbuf, bytes, 0);
    void *r = STAGED(c) ? (void *)s : recvbuf; /* staged: reduce in the host copy */
    CHECK_MPI(MPI_Allreduce(s == r ? MPI_IN_PLACE : s, r, dt_mpi_count(count), dt_mpi_type(t),
                            dt_mpi_op(op, t), c->mpi));
    mpi_out_done(c, recvbuf, r, bytes);
    dt_finish_avg(c, recvbuf, count, t, op);
  }
  finish(c, DT_ALL_REDUCE, dt_ring_bytes(c, DT_ALL_REDUCE, bytes), t0);
}

void dt_all_gather(dt_comm *c, const void *sendbuf, void *recvbuf, size_t count, dt_dtype t) {
  size_t bytes = count * dt_dtype_size(t);
  dt_expect_collective("dt_all_gather", sendbuf, bytes, recvbuf, bytes * (size_t)c->size);
  if (alone(c, sendbuf, recvbuf, bytes)) return;
  double t0 = begin(c, DT_ALL_GATHER, count, -1);
#ifdef DT_CUDA
  if (c->nccl)
    CHECK_NCCL(ncclAllGather(sendbuf, recvbuf, count, dt_nccl_type(t), c->nccl_comm, dt_stream()));
#endif
  if (!c->nccl) {
    int in_place = sendbuf == (const char *)recvbuf + (size_t)c->rank * bytes && !STAGED(c);
    const void *s = in_place ? MPI_IN_PLACE : mpi_in(c, sendbuf, bytes, 0);
    void *r = mpi_out(c, recvbuf, bytes * c->size, 1);
    CHECK_MPI(MPI_Allgather(s, dt_mpi_count(count), dt_mpi_type(t), r, dt_mpi_count(count),
                            dt_mpi_type(t), c->mpi));
    mpi_out_done(c, recvbuf, r, bytes * c->size);
  }
  finish(c, DT_ALL_GATHER, dt_ring_bytes(c, DT_ALL_GATHER, bytes), t0);
}

void dt_reduce_scatter(dt_comm *c, const void *sendbuf, void *recvbuf, size_t count, dt_dtype t,
                       dt_op op) {
  size_t bytes = count * dt_dtype_size(t);
  dt_expect_collective("dt_reduce_scatter", sendbuf, bytes * (size_t)c->size, recvbuf, bytes);
  if (alone(c, sendbuf, recvbuf, bytes)) return;
  double t0 = begin(c, DT_REDUCE_SCATTER, count, -1);
#ifdef DT_CUDA
  if (c->nccl)
    CHECK_NCCL(ncclReduceScatter(sendbuf, recvbuf, count, dt_nccl_type(t), dt_nccl_op(op),
                                 c->nccl_comm, dt_stream()));
#endif
  if (!c->nccl) {
    const void *s = mpi_in(c, sendbuf, bytes * c->size, 0);
    void *r = mpi_out(c, recvbuf, bytes, 1);
    CHECK_MPI(MPI_Reduce_scatter_block(s, r, dt_mpi_count(count), dt_mpi_type(t), dt_mpi_op(op, t),
                                       c->mpi));
    mpi_out_done(c, recvbuf, r, bytes);
    dt_finish_avg(c, recvbuf, count, t, op);
  }
  finish(c, DT_REDUCE_SCATTER, dt_ring_bytes(c, DT_REDUCE_SCATTER, bytes), t0);
}

static int *mpi_counts(int n) {
  if (int_counts_n < 4 * n) {
    free(int_counts);
    int_counts = malloc(4 * (size_t)n * sizeof *int_counts);
    CHECK_ALLOC(int_counts);
    int_counts_n = 4 * n;
  }
  return int_counts;
}

void dt_all_to_all(dt_comm *c, const void *sendbuf, void *recvbuf, size_t count, dt_dtype t) {
  size_t bytes = count * dt_dtype_size(t);
  dt_expect_collective("dt_all_to_all", sendbuf, bytes * (size_t)c->size, recvbuf,
                       bytes * (size_t)c->size);
  if (alone(c, sendbuf, recvbuf, bytes)) return;
  double t0 = begin(c, DT_ALL_TO_ALL, count, -1);
#ifdef DT_CUDA
  if (c->nccl) { /* NCCL has no all-to-all call: one send and one receive per peer, grouped */
    CHECK_NCCL(ncclGroupStart());
    for (int p = 0; p < c->size; p++) {
      CHECK_NCCL(ncclSend((const char *)sendbuf + (size_t)p * bytes, count, dt_nccl_type(t), p,
                          c->nccl_comm, dt_stream()));
      CHECK_NCCL(ncclRecv((char *)recvbuf + (size_t)p * bytes, count, dt_nccl_type(t), p,
                          c->nccl_comm, dt_stream()));
    }
    CHECK_NCCL(ncclGroupEnd());
  }
#endif
  if (!c->nccl) {
    size_t all = bytes * (size_t)c->size;
    const void *s = mpi_in(c, sendbuf, all, 0);
    void *r = mpi_out(c, recvbuf, all, 1);
    CHECK_MPI(MPI_Alltoall(s, dt_mpi_count(count), dt_mpi_type(t), r, dt_mpi_count(count),
                           dt_mpi_type(t), c->mpi));
    mpi_out_done(c, recvbuf, r, all);
  }
  finish(c, DT_ALL_TO_ALL, (uint64_t)(c->size - 1) * bytes, t0);
}

void dt_all_to_allv(dt_comm *c, const void *sendbuf, const size_t *sendcounts,
                    const size_t *sdispls, void *recvbuf, const size_t *recvcounts,
                    const size_t *rdispls, dt_dtype t) {
  size_t es = dt_dtype_size(t), sent = 0, send_end = 0, recv_end = 0;
  for (int p = 0; p < c->size; p++) {
    if (p != c->rank) sent += sendcounts[p] * es;
    if (sdispls[p] + sendcounts[p] > send_end) send_end = sdispls[p] + sendcounts[p];
    if (rdispls[p] + recvcounts[p] > recv_end) recv_end = rdispls[p] + recvcounts[p];
  }
  dt_expect_collective("dt_all_to_allv", sendbuf, send_end * es, recvbuf, recv_end * es);
  if (c->size == 1) {
    if (sendcounts[0])
      dt_copy((char *)recvbuf + rdispls[0] * es, (const char *)sendbuf + sdispls[0] * es,
              sendcounts[0] * es);
    return;
  }
  double t0 = begin(c, DT_ALL_TO_ALL, sent / es, -1);
#ifdef DT_CUDA
  if (c->nccl) { /* grouped sends and receives; a rank's own block is a copy */
    CHECK_NCCL(ncclGroupStart());
    for (int p = 0; p < c->size; p++) {
      if (p == c->rank) continue;
      if (sendcounts[p])
        CHECK_NCCL(ncclSend((const char *)sendbuf + sdispls[p] * es, sendcounts[p], dt_nccl_type(t),
                            p, c->nccl_comm, dt_stream()));
      if (recvcounts[p])
        CHECK_NCCL(ncclRecv((char *)recvbuf + rdispls[p] * es, recvcounts[p], dt_nccl_type(t), p,
                            c->nccl_comm, dt_stream()));
    }
    CHECK_NCCL(ncclGroupEnd());
    if (sendcounts[c->rank])
      dt_copy((char *)recvbuf + rdispls[c->rank] * es,
              (const char *)sendbuf + sdispls[c->rank] * es, sendcounts[c->rank] * es);
  }
#endif
  if (!c->nccl) {
    int n = c->size, *k = mpi_counts(n);
    for (int p = 0; p < n; p++) {
      k[p] = dt_mpi_count(sendcounts[p]);
      k[n + p] = dt_mpi_count(sdispls[p]);
      k[2 * n + p] = dt_mpi_count(recvcounts[p]);
      k[3 * n + p] = dt_mpi_count(rdispls[p]);
    }
    const void *s = mpi_in(c, sendbuf, send_end * es, 0);
    void *r = mpi_out(c, recvbuf, recv_end * es, 1);
    /* staged: the whole span comes back, so the gaps between blocks must hold the device's */
    if (STAGED(c)) dt_copy_to_host(r, recvbuf, recv_end * es);
    CHECK_MPI(MPI_Alltoallv(s, k, k + n, dt_mpi_type(t), r, k + 2 * n, k + 3 * n, dt_mpi_type(t),
                            c->mpi));
    mpi_out_done(c, recvbuf, r, recv_end * es);
  }
  finish(c, DT_ALL_TO_ALL, sent, t0);
}

void dt_barrier(dt_comm *c) {
  double t0 = begin(c, DT_BARRIER, 0, -1);
  CHECK_MPI(MPI_Barrier(c->mpi));
  finish(c, DT_BARRIER, 0, t0);
}
