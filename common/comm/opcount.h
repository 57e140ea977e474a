/* opcount.h: the kernels a process calls, counted (opcount.c), so that a
 * run can say which kernels one step called, at which shapes, how often,
 * and 13_plan's --verify can hold its list of a step's work against it.
 *
 * Each public kernel entry point of common/ opens with DT_OP(name, five
 * numbers of its shape): the outermost call counts, a kernel another one
 * calls does not (dt_block_forward counts once, not its two dt_matmul). The
 * same line sits in kernels_cpu.c and in kernels.cu's host wrapper, so the
 * cpu tests prove what a GPU counts. The cost in a step: an increment into
 * a small fixed table, no allocation, no sync. One thread calls kernels
 * (the watchdog's thread calls none), so the table needs no lock. */
#ifndef DT_OPCOUNT_H
#define DT_OPCOUNT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { DT_OPS_MAX = 128 };
typedef struct {
  const char *name; /* the entry point's name, a string literal */
  int64_t s[5];     /* its shape, as 13_plan's op lists it (0 where unused) */
  int64_t calls;
} dt_op_count;

extern int dt_op_depth; /* > 0 inside a kernel counted, or while counting is set aside */
int dt_op_enter(const char *name, int64_t a, int64_t b, int64_t c, int64_t d, int64_t e);
static inline void dt_op_leave(int *scope) {
  (void)scope;
  dt_op_depth--;
}
/* the step's window (common/train/run.c): the table emptied at its start,
 * kept at its end; what the training layer does for the check, set aside */
void dt_ops_step_begin(void);
void dt_ops_step_end(void);
void dt_ops_aside(int on);
/* the last step's kernels (n of them; those past the table's DT_OPS_MAX
 * entries in *lost) */
const dt_op_count *dt_ops_last(int *n, int64_t *lost);
void dt_ops_report(void); /* report.c: rank 0's last step into --report-json */

#ifdef __cplusplus
}
struct dt_op_scope {
  dt_op_scope(const char *n, int64_t a, int64_t b, int64_t c, int64_t d, int64_t e) {
    dt_op_enter(n, a, b, c, d, e);
  }
  ~dt_op_scope() { dt_op_depth--; }
};
#define DT_OP(name, a, b, c, d, e)                                                                 \
  dt_op_scope dt_op_scope_(name, (int64_t)(a), (int64_t)(b), (int64_t)(c), (int64_t)(d),           \
                           (int64_t)(e))
#else
#define DT_OP(name, a, b, c, d, e)                                                                 \
  __attribute__((cleanup(dt_op_leave), unused)) int dt_op_scope_ =                                 \
      dt_op_enter(name, (int64_t)(a), (int64_t)(b), (int64_t)(c), (int64_t)(d), (int64_t)(e))
#endif

#endif
