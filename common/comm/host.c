/* host.c: bookkeeping traffic (dt.h): host buffers straight to MPI, timed by
 * the watchdog under the caller's line, and never counted (a device buffer
 * handed here ends the run in the device-boundary mode, boundary.h); and the lines of
 * every rank printed in rank order. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "comm_internal.h"

#define HOST_CALL(what, call)                                                                      \
  do {                                                                                             \
    dt_watch_call(what, file, line);                                                               \
    dt_mpi_progress(1);                                                                            \
    CHECK_MPI(call);                                                                               \
    dt_mpi_progress(0);                                                                            \
    dt_watch_done();                                                                               \
  } while (0)

void dt_host_all_reduce_at(const char *file, int line, dt_comm *c, void *buf, size_t count,
                           dt_dtype t, dt_op op) {
  dt_expect_host("dt_host_all_reduce", "buf", buf, count * dt_dtype_size(t));
  if (op == DT_AVG) dt_fatal(file, line, "dt_host_all_reduce", "DT_AVG: sum, then divide");
  HOST_CALL("MPI_Allreduce (bookkeeping)", MPI_Allreduce(MPI_IN_PLACE, buf, dt_mpi_count(count),
                                                         dt_mpi_type(t), dt_mpi_op(op, t), c->mpi));
}

void dt_host_reduce_at(const char *file, int line, dt_comm *c, void *buf, size_t count, dt_dtype t,
                       dt_op op, int root) {
  dt_expect_host("dt_host_reduce", "buf", buf, count * dt_dtype_size(t));
  if (op == DT_AVG) dt_fatal(file, line, "dt_host_reduce", "DT_AVG: sum, then divide");
  HOST_CALL("MPI_Reduce (bookkeeping)",
            MPI_Reduce(c->rank == root ? MPI_IN_PLACE : buf, buf, dt_mpi_count(count),
                       dt_mpi_type(t), dt_mpi_op(op, t), root, c->mpi));
}

void dt_host_broadcast_at(const char *file, int line, dt_comm *c, void *buf, size_t count,
                          dt_dtype t, int root) {
  dt_expect_host("dt_host_broadcast", "buf", buf, count * dt_dtype_size(t));
  HOST_CALL("MPI_Bcast (bookkeeping)",
            MPI_Bcast(buf, dt_mpi_count(count), dt_mpi_type(t), root, c->mpi));
}

void dt_host_gather_at(const char *file, int line, dt_comm *c, const void *send, void *recv,
                       size_t count, dt_dtype t, int root) {
  dt_expect_host("dt_host_gather", "send", send, count * dt_dtype_size(t));
  if (c->rank == root)
    dt_expect_host("dt_host_gather", "recv", recv, count * dt_dtype_size(t) * (size_t)c->size);
  HOST_CALL("MPI_Gather (bookkeeping)",
            MPI_Gather(send, dt_mpi_count(count), dt_mpi_type(t), recv, dt_mpi_count(count),
                       dt_mpi_type(t), root, c->mpi));
}

void dt_host_barrier_at(const char *file, int line, dt_comm *c) {
  HOST_CALL("MPI_Barrier (bookkeeping)", MPI_Barrier(c->mpi));
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
  char *all = dt_rank() == 0 ? malloc((size_t)dt_size() * LINE) : NULL;
  if (dt_rank() == 0) CHECK_ALLOC(all);
  DT_MPI(MPI_Gather(line, LINE, MPI_CHAR, all, LINE, MPI_CHAR, 0, MPI_COMM_WORLD));
  if (dt_rank() == 0) {
    for (int r = 0; r < dt_size(); r++) printf("[rank %d] %s", r, all + (size_t)r * LINE);
    fflush(stdout);
    free(all);
  }
}
