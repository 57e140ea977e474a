/* comm_internal.h: what the files of common/ share with each other, not with the
 * lessons. */
#ifndef DT_COMM_INTERNAL_H
#define DT_COMM_INTERNAL_H

#include <stdio.h>
#include <sys/types.h>

#include "boundary.h"
#include "dt.h"
#include "opcount.h"
#ifdef DT_CUDA
#include "dt_cuda.h"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* core.c: the facts of this process, set by dt_init (runtime.c) */
typedef struct {
  int rank, size, local_rank, device;
  char comm_lib[128];
  double start; /* MPI_Wtime after MPI_Init */
#ifdef DT_CUDA
  cudaStream_t stream, side_stream;
#endif
} dt_process;
extern dt_process dt_rt;

/* cli.c: parse argv into the lesson's options and the common ones. Returns 1
 * when --help was asked for (the usage has been printed on rank 0). Bad input
 * ends the program through dt_fail. */
int dt_cli_parse(int argc, char **argv, const dt_lesson *lesson, dt_option *options,
                 const char **comm_choice, double *timeout, const char **report);
/* report.c: --report-json's path checked at start-up (collective), and the
 * file written by rank 0 when the run ends */
void dt_report_open(const char *path, const dt_lesson *lesson);
void dt_report_write(void);

/* nodes.c: "node0: 0-1, node1: 2-3" on rank 0 (collective over the world;
 * node is this rank's shared-memory communicator) */
void dt_describe_nodes(MPI_Comm node, char *out, size_t cap);

/* watchdog.c: what the blocking call in progress is, and its deadline */
void dt_watch_begin(const dt_comm *c, dt_kind k, size_t count, int peer);
void dt_watch_end(void);
void dt_watchdog_start(double timeout); /* --timeout: what dt_timeout returns */
void dt_watchdog_stop(void);
/* MPI_Finalize under the watchdog: it waits for every rank, and one stopped
 * or stuck elsewhere would keep the others in it forever (dt_fail,
 * dt_finalize) */
void dt_watch_finalize(void);
/* the call the deadline watches now, "what, called from file:line" (0: none) */
int dt_watch_describe(char *out, size_t n);
#ifdef DT_CUDA
/* NCCL work is asynchronous: these poll until the compute stream is idle, or
 * the event has happened, checking NCCL's errors, under the deadline. */
void dt_nccl_complete(dt_comm *c);
void dt_nccl_wait_event(dt_comm *c, void *event);
#endif

/* memory.c: allocator settings (dt_init); the kept freed blocks, freed
 * (dt_finalize); on the cuda backend what the GPU holds outside dt_alloc,
 * printed under the memory tables */
void dt_mem_init(void);
void dt_mem_reexec(char **argv); /* first of all: may start the process again */
void dt_mem_release_cache(void);
#ifdef DT_CUDA
void dt_print_memory_outside(void);
#endif

/* files.c: write a file as files.c describes: open, write or printf, close;
 * any failure names the flag and path and aborts. */
typedef struct {
  FILE *f;
  const char *flag, *shown; /* "--save", and the path as the user gave it */
  int in_place;             /* a device or FIFO (--trace only): no temporary, no rename */
  char path[4096], tmp[4128], what[4200];
} dt_out;
void dt_out_open(dt_out *o, const char *flag, const char *path);
void dt_out_write(dt_out *o, const void *buf, size_t bytes);
void dt_out_printf(dt_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void dt_out_close(dt_out *o);
/* "a regular file", "a FIFO", ...; dir and base of path ("out.st" -> ".", "out.st") */
const char *dt_file_kind(mode_t m);
void dt_split_path(const char *path, char *dir, size_t dn, char *base, size_t bn);
/* Checked at start-up, before a run's work: can `path` take the file that
 * `flag` writes (in_place: a device or FIFO may be written into)? 0, or
 * the message in err. Removes the temporaries interrupted saves left
 * beside it (NAME.tmp.PID of a PID no longer running; prefix "": any). */
int dt_check_output_file(const char *flag, const char *path, int in_place, char *err, size_t n);
int dt_probe_dir(const char *dir, char *why, size_t n); /* can this process create files there? */
void dt_clean_stale(const char *dir, const char *prefix);

/* memory.c: where dt_memory_available's figure came from, for messages */
const char *dt_memory_source(void);

/* comm.c */
dt_comm *dt_comm_create(MPI_Comm mpi, int use_nccl);
void dt_comm_release_staging(void);
#ifdef DT_CUDA
void dt_comm_abort_nccl(void); /* dt_fail: abort every live NCCL communicator */
#endif
MPI_Datatype dt_mpi_type(dt_dtype t);
MPI_Op dt_mpi_op(dt_op op, dt_dtype t);
int dt_mpi_count(size_t count);
uint64_t dt_ring_bytes(dt_comm *c, dt_kind k, size_t bytes);
void dt_finish_avg(dt_comm *c, void *buf, size_t count, dt_dtype t, dt_op op);
#ifdef DT_CUDA
ncclDataType_t dt_nccl_type(dt_dtype t);
ncclRedOp_t dt_nccl_op(dt_op op);
#endif

#ifdef __cplusplus
}
#endif
#endif
