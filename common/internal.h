/* internal.h: what the files of common/ share with each other, not with the
 * lessons. */
#ifndef DT_INTERNAL_H
#define DT_INTERNAL_H

#include "dt.h"

/* cli.c: parse argv into the lesson's options and the common ones. Returns 1
 * when --help was asked for (the usage has been printed on rank 0). Bad input
 * ends the program through dt_fail. */
int dt_cli_parse(int argc, char **argv, const dt_lesson *lesson, dt_option *options,
                 const char **comm_choice);

/* nodes.c: "node0: 0-1, node1: 2-3" on rank 0 (collective over the world;
 * node is this rank's shared-memory communicator) */
void dt_describe_nodes(MPI_Comm node, char *out, size_t cap);

/* kernels_cpu.c / kernels.cu: one-time setup (BLAS threads, cuBLAS handle) */
void dt_kernels_init(void);

/* watchdog.c: what the blocking call in progress is, and its deadline */
void dt_watch_begin(const dt_comm *c, dt_kind k, size_t count, int peer);
void dt_watch_end(void);
void dt_watchdog_start(void);
void dt_watchdog_stop(void);
#ifdef DT_CUDA
void dt_nccl_complete(dt_comm *c);
#endif

/* comm.c */
dt_comm *dt_comm_create(MPI_Comm mpi, int use_nccl);
void dt_comm_release_staging(void);
MPI_Datatype dt_mpi_type(dt_dtype t);
MPI_Op dt_mpi_op(dt_op op, dt_dtype t);
int dt_mpi_count(size_t count);
uint64_t dt_ring_bytes(dt_comm *c, dt_kind k, size_t bytes);
void dt_finish_avg(dt_comm *c, void *buf, size_t count, dt_dtype t, dt_op op);
#ifdef DT_CUDA
#include <nccl.h>
ncclDataType_t dt_nccl_type(dt_dtype t);
ncclRedOp_t dt_nccl_op(dt_op op);
#endif

#endif
