/* comm_async.c: collectives that start now and finish in dt_wait, so a
 * lesson can overlap communication with computation (05_dp --overlap,
 * 06_fsdp --prefetch).
 *
 * NCCL: the collective runs on a second stream that first waits for the
 * compute stream (its inputs are ready), so it overlaps the kernels queued
 * after it; dt_wait polls its end under the watchdog (a hung NCCL call is
 * named, not waited on forever), then the compute stream goes on.
 * MPI: MPI_I* calls. MPI progresses a nonblocking collective only while the
 * rank is inside MPI, which is why lessons call dt_test between layers.
 * One rank: complete at once, uncounted, as the blocking calls (comm.c). */
#define _POSIX_C_SOURCE 200809L
#define DT_COMMON_IMPL  /* the functions themselves, not the call-site macros */
#include <stdlib.h>
#include <string.h>

#include "comm_internal.h"
#ifdef DT_CUDA
#include "dt_cuda.h"
#define STAGED_ASYNC 1 /* the MPI path of the cuda backend always stages */
#else
#define STAGED_ASYNC 0
#endif

struct dt_request {
  dt_comm *c;
  dt_kind kind;
  dt_op op;
  dt_dtype t;
  MPI_Request mpi, mpi_send; /* mpi_send: a sendrecv's send half */
  void *host_in, *host_out;  /* host copies when device data goes over MPI */
  void *result;              /* the caller's buffer MPI's result belongs in */
  size_t result_count;
  void *done_event; /* NCCL: recorded on the side stream */
  double seconds;   /* time the caller spent in start and wait */
  int mpi_done;
  int in_flight; /* started, not alone: counted by the device-boundary mode (boundary.h) */
};

static dt_request *request_new(dt_comm *c, dt_kind k, dt_dtype t, dt_op op, void *result,
                               size_t result_count) {
  dt_request *r = calloc(1, sizeof *r);
  CHECK_ALLOC(r);
  *r = (dt_request){.c = c,
                    .kind = k,
                    .op = op,
                    .t = t,
                    .mpi = MPI_REQUEST_NULL,
                    .mpi_send = MPI_REQUEST_NULL,
                    .result = result,
                    .result_count = result_count};
  r->seconds = -dt_now();
  return r;
}

/* The cpu's MPI calls on device memory are its NCCL's: the device-boundary
 * mode's arena open around them (boundary.h), and only then: in that mode
 * Open MPI moves a message inside its calls alone. */
#define ON_DEVICE(call)                                                                            \
  do {                                                                                             \
    if (dt_boundary) dt_kernel_enter(#call, "", NULL, 0);                                          \
    CHECK_MPI(call);                                                                               \
    dt_kernel_leave(NULL);                                                                         \
  } while (0)

/* MPI must not see device memory: give it host copies. */
static const void *async_in(dt_request *r, const void *buf, size_t bytes) {
#ifdef DT_CUDA
  r->host_in = malloc(bytes);
  CHECK_ALLOC(r->host_in);
  dt_copy_to_host(r->host_in, buf, bytes);
  return r->host_in;
#else
  (void)r, (void)bytes;
  return buf;
#endif
}
static void *async_out(dt_request *r, size_t bytes) {
#ifdef DT_CUDA
  r->host_out = malloc(bytes);
  CHECK_ALLOC(r->host_out);
  return r->host_out;
#else
  (void)bytes;
  return r->result;
#endif
}

/* A communicator of one rank: the result is the input, there is nothing to
 * wait for; an out-of-place call copies. */
static dt_request *alone(dt_comm *c, dt_kind k, const void *sendbuf, void *recvbuf, size_t bytes) {
  if (c->size > 1) return NULL;
  if (sendbuf != recvbuf) dt_copy(recvbuf, sendbuf, bytes);
  dt_request *r = request_new(c, k, DT_F32, DT_SUM, recvbuf, 0);
  r->mpi_done = 1;
  return r;
}

static dt_request *started(dt_request *r, uint64_t bytes) {
  r->in_flight = 1;
  dt_boundary_inflight(1);
  r->c->count[r->kind].calls++;
  r->c->count[r->kind].bytes_sent += bytes;
  r->seconds += dt_now();
  return r;
}

#ifdef DT_CUDA
/* Order the side stream after the compute stream, so the inputs are ready. */
static cudaStream_t side_stream_after_compute(void) {
  cudaEvent_t ready;
  CHECK_CUDA(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  CHECK_CUDA(cudaEventRecord(ready, dt_stream()));
  CHECK_CUDA(cudaStreamWaitEvent(dt_side_stream(), ready, 0));
  CHECK_CUDA(cudaEventDestroy(ready));
  return dt_side_stream();
}
static void record_done(dt_request *r) {
  CHECK_CUDA(cudaEventCreateWithFlags((cudaEvent_t *)&r->done_event, cudaEventDisableTiming));
  CHECK_CUDA(cudaEventRecord((cudaEvent_t)r->done_event, dt_side_stream()));
}
#endif

dt_request *dt_all_reduce_async(dt_comm *c, const void *sendbuf, void *recvbuf, size_t count,
                                dt_dtype t, dt_op op) {
  size_t bytes = count * dt_dtype_size(t);
  dt_expect_collective("dt_all_reduce_async", sendbuf, bytes, recvbuf, bytes);
  dt_request *one = alone(c, DT_ALL_REDUCE, sendbuf, recvbuf, bytes);
  if (one) return one;
  dt_request *r = request_new(c, DT_ALL_REDUCE, t, op, recvbuf, count);
#ifdef DT_CUDA
  if (c->nccl) {
    CHECK_NCCL(ncclAllReduce(sendbuf, recvbuf, count, dt_nccl_type(t), dt_nccl_op(op),
                             (ncclComm_t)c->nccl_comm, side_stream_after_compute()));
    record_done(r);
    return started(r, dt_ring_bytes(c, DT_ALL_REDUCE, bytes));
  }
#endif
  const void *s = async_in(r, sendbuf, bytes);
  void *out = r->host_in ? r->host_in : recvbuf; /* staged: reduce in the host copy */
  r->host_out = r->host_in ? r->host_in : NULL;
  r->host_in = NULL;
  ON_DEVICE(MPI_Iallreduce(s == out ? MPI_IN_PLACE : s, out, dt_mpi_count(count), dt_mpi_type(t),
                           dt_mpi_op(op, t), c->mpi, &r->mpi));
  return started(r, dt_ring_bytes(c, DT_ALL_REDUCE, bytes));
}

dt_request *dt_all_gather_async(dt_comm *c, const void *sendbuf, void *recvbuf, size_t count,
                                dt_dtype t) {
  size_t bytes = count * dt_dtype_size(t);
  dt_expect_collective("dt_all_gather_async", sendbuf, bytes, recvbuf, bytes * (size_t)c->size);
  dt_request *one = alone(c, DT_ALL_GATHER, sendbuf, recvbuf, bytes);
  if (one) return one;
  dt_request *r = request_new(c, DT_ALL_GATHER, t, DT_SUM, recvbuf, count * c->size);
#ifdef DT_CUDA
  if (c->nccl) {
    CHECK_NCCL(ncclAllGather(sendbuf, recvbuf, count, dt_nccl_type(t), (ncclComm_t)c->nccl_comm,
                             side_stream_after_compute()));
    record_done(r);
    return started(r, dt_ring_bytes(c, DT_ALL_GATHER, bytes));
  }
#endif
  int in_place = sendbuf == (const char *)recvbuf + (size_t)c->rank * bytes;
  const void *s = in_place && !STAGED_ASYNC ? MPI_IN_PLACE : async_in(r, sendbuf, bytes);
  void *out = async_out(r, bytes * c->size);
  ON_DEVICE(MPI_Iallgather(s, dt_mpi_count(count), dt_mpi_type(t), out, dt_mpi_count(count),
                           dt_mpi_type(t), c->mpi, &r->mpi));
  return started(r, dt_ring_bytes(c, DT_ALL_GATHER, bytes));
}

dt_request *dt_reduce_scatter_async(dt_comm *c, const void *sendbuf, void *recvbuf, size_t count,
                                    dt_dtype t, dt_op op) {
  size_t bytes = count * dt_dtype_size(t);
  dt_expect_collective("dt_reduce_scatter_async", sendbuf, bytes * (size_t)c->size, recvbuf, bytes);
  dt_request *one = alone(c, DT_REDUCE_SCATTER, sendbuf, recvbuf, bytes);
  if (one) return one;
  dt_request *r = request_new(c, DT_REDUCE_SCATTER, t, op, recvbuf, count);
#ifdef DT_CUDA
  if (c->nccl) {
    CHECK_NCCL(ncclReduceScatter(sendbuf, recvbuf, count, dt_nccl_type(t), dt_nccl_op(op),
                                 (ncclComm_t)c->nccl_comm, side_stream_after_compute()));
    record_done(r);
    return started(r, dt_ring_bytes(c, DT_REDUCE_SCATTER, bytes));
  }
#endif
  const void *s = async_in(r, sendbuf, bytes * c->size);
  void *out = async_out(r, bytes);
  ON_DEVICE(MPI_Ireduce_scatter_block(s, out, dt_mpi_count(count), dt_mpi_type(t), dt_mpi_op(op, t),
                                      c->mpi, &r->mpi));
  return started(r, dt_ring_bytes(c, DT_REDUCE_SCATTER, bytes));
}

/* The ring's hop (11_cp): this rank's block to dst while src's arrives,
 * both halves in flight at once, so neighbours cannot deadlock. */
dt_request *dt_sendrecv_async(dt_comm *c, const void *sendbuf, size_t sendcount, int dst,
                              void *recvbuf, size_t recvcount, int src, dt_dtype t) {
  size_t es = dt_dtype_size(t);
  dt_expect_collective("dt_sendrecv_async", sendbuf, sendcount * es, recvbuf, recvcount * es);
  dt_request *one = c->size == 1 && dst == 0 && src == 0
                        ? alone(c, DT_SENDRECV, sendbuf, recvbuf, sendcount * es)
                        : NULL;
  if (one) return one;
  dt_request *r = request_new(c, DT_SENDRECV, t, DT_SUM, recvbuf, recvcount);
#ifdef DT_CUDA
  if (c->nccl) {
    cudaStream_t side = side_stream_after_compute();
    CHECK_NCCL(ncclGroupStart());
    CHECK_NCCL(ncclSend(sendbuf, sendcount, dt_nccl_type(t), dst, (ncclComm_t)c->nccl_comm, side));
    CHECK_NCCL(ncclRecv(recvbuf, recvcount, dt_nccl_type(t), src, (ncclComm_t)c->nccl_comm, side));
    CHECK_NCCL(ncclGroupEnd());
    record_done(r);
    return started(r, sendcount * es);
  }
#endif
  const void *s = async_in(r, sendbuf, sendcount * es);
  void *out = async_out(r, recvcount * es);
  ON_DEVICE(MPI_Irecv(out, dt_mpi_count(recvcount), dt_mpi_type(t), src, 0, c->mpi, &r->mpi));
  ON_DEVICE(MPI_Isend(s, dt_mpi_count(sendcount), dt_mpi_type(t), dst, 0, c->mpi, &r->mpi_send));
  return started(r, sendcount * es);
}

int dt_test(dt_request *r) {
#ifdef DT_CUDA
  if (r->done_event) { /* an error, CUDA's or NCCL's, is an error, not "not ready" */
    cudaError_t state = cudaEventQuery((cudaEvent_t)r->done_event);
    if (state == cudaSuccess) return 1;
    if (state != cudaErrorNotReady) CHECK_CUDA(state);
    ncclResult_t async = ncclSuccess;
    CHECK_NCCL(ncclCommGetAsyncError((ncclComm_t)r->c->nccl_comm, &async));
    if (async != ncclSuccess)
      dt_fatal(__FILE__, __LINE__, dt_kind_name(r->kind), ncclGetErrorString(async));
    return 0;
  }
#endif
  if (!r->mpi_done && r->mpi_send != MPI_REQUEST_NULL) {
    int sent = 0;
    ON_DEVICE(MPI_Test(&r->mpi_send, &sent, MPI_STATUS_IGNORE));
    if (!sent) return 0;
  }
  if (!r->mpi_done) ON_DEVICE(MPI_Test(&r->mpi, &r->mpi_done, MPI_STATUS_IGNORE));
  return r->mpi_done;
}

void dt_wait(dt_request *r) {
  double t0 = dt_now();
#ifdef DT_CUDA
  if (r->done_event) { /* the host polls its end under the deadline */
    dt_watch_begin(r->c, r->kind, r->result_count, -1);
    dt_nccl_wait_event(r->c, r->done_event);
    dt_watch_end();
    CHECK_CUDA(cudaStreamWaitEvent(dt_stream(), (cudaEvent_t)r->done_event, 0));
    CHECK_CUDA(cudaEventDestroy((cudaEvent_t)r->done_event));
  }
#endif
  if (!r->done_event) {
    if (!r->mpi_done) { /* under the watchdog */
      dt_watch_begin(r->c, r->kind, r->result_count, -1);
      ON_DEVICE(MPI_Wait(&r->mpi_send, MPI_STATUS_IGNORE)); /* NULL but for a sendrecv */
      ON_DEVICE(MPI_Wait(&r->mpi, MPI_STATUS_IGNORE));
      dt_watch_end();
    }
    if (r->host_out)
      dt_copy_from_host(r->result, r->host_out, r->result_count * dt_dtype_size(r->t));
    if (r->kind != DT_ALL_GATHER) dt_finish_avg(r->c, r->result, r->result_count, r->t, r->op);
  }
  if (r->in_flight) dt_boundary_inflight(-1);
  if (r->c->size > 1) {
    r->c->count[r->kind].seconds += r->seconds + dt_now() - t0;
    dt_span_end("wait", "comm", t0);
  }
  free(r->host_in);
  free(r->host_out);
  free(r);
}
