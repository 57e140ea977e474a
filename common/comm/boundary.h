/* boundary.h: the cpu backend's device-boundary mode (boundary.c), for the
 * files of common/ only: the backend's kernels, copies and collectives say
 * where they begin and end and which of their arguments are device memory.
 *
 * On a GPU, host code cannot read device memory, MPI must never see it, and
 * a kernel cannot read host memory; the cpu backend allows all three, so a
 * bug of that kind passes every cpu test and crashes on a GPU's first step.
 * With DT_DEVICE_BOUNDARY=1 in the environment, dt_alloc's memory lies in an
 * arena that is PROT_NONE except while a kernel, a copy or a collective of
 * the backend runs, and what reaches across the boundary ends the run with a
 * message naming the call. On the cuda backend everything here is a no-op:
 * the GPU enforces it. */
#ifndef DT_BOUNDARY_H
#define DT_BOUNDARY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

extern int dt_boundary; /* the mode is on (set once, by dt_boundary_init) */

/* dt_init, before MPI_Init: read DT_DEVICE_BOUNDARY; after it, the arena
 * and the handler that names what touched it */
void dt_boundary_setup(void);
void dt_boundary_init(void);
/* the arena's blocks, for dt_alloc (tag: its name, for messages) */
void *dt_boundary_alloc(size_t bytes, const char *tag);
void dt_boundary_free(void *p);
int dt_boundary_owns(const void *p); /* p lies in the arena: device memory */

/* A kernel, copy or collective runs from enter to leave (nested: the
 * outermost opens and closes the arena). enter checks the pointers named in
 * `names` ("x, w, out": ptrs[i] NULL or device memory) and returns 0. */
int dt_kernel_enter(const char *call, const char *names, const void *const *ptrs, int n);
void dt_kernel_leave(int *scope);
/* A range handed to call as `arg` must be device memory (whole), or host
 * memory (no byte of it in the arena): else the run ends, naming both */
void dt_expect_device(const char *call, const char *arg, const void *p, size_t bytes);
void dt_expect_host(const char *call, const char *arg, const void *p, size_t bytes);
/* a collective's input and output (bytes each; NULL: none): device memory,
 * as NCCL's */
void dt_expect_collective(const char *call, const void *in, size_t in_bytes, const void *out,
                          size_t out_bytes);

/* nonblocking collectives started and not yet waited for (comm_async.c):
 * while any is, a host MPI call opens the arena (dt_mpi_progress, dt.h) */
void dt_boundary_inflight(int delta);

/* DT_KERNEL("dt_add", dst, src): the rest of the enclosing block is the
 * kernel's (the arena open), and each pointer named is device memory (or
 * NULL). The cuda backend's kernels need none of it. */
#ifdef DT_CUDA
#define DT_KERNEL(call, ...) ((void)0)
#else
#define DT_KERNEL(call, ...)                                                                       \
  __attribute__((cleanup(dt_kernel_leave), unused)) int dt_kernel_scope_ =                         \
      dt_boundary ? dt_kernel_enter(                                                               \
                        call, #__VA_ARGS__, (const void *const[]){__VA_ARGS__},                    \
                        (int)(sizeof((const void *const[]){__VA_ARGS__}) / sizeof(const void *)))  \
                  : 0
#endif

#ifdef __cplusplus
}
#endif
#endif
