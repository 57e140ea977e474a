/* opcount.c: the kernels a process calls, counted (opcount.h). One table
 * fills during a step; at its end it is kept as the last step's, which
 * report.c writes into --report-json (it calls nothing: every kernel of
 * common/ calls it). */
#include <string.h>

#include "opcount.h"

int dt_op_depth;
static dt_op_count now[DT_OPS_MAX], last[DT_OPS_MAX];
static int n_now, n_last;
static int64_t lost_now, lost_last;

static int same(const dt_op_count *o, const char *name, const int64_t *s) {
  for (int k = 0; k < 5; k++) /* the shape first: it tells most entries apart */
    if (o->s[k] != s[k]) return 0;
  return o->name == name || !strcmp(o->name, name); /* a literal may differ by file */
}

int dt_op_enter(const char *name, int64_t a, int64_t b, int64_t c, int64_t d, int64_t e) {
  static int hint;             /* the entry after the last one hit: a step repeats its pattern */
  if (dt_op_depth++) return 0; /* called by a kernel counted already */
  const int64_t s[5] = {a, b, c, d, e};
  for (int k = 0; k < n_now; k++) {
    int i = (hint + k) % n_now;
    if (same(&now[i], name, s)) {
      now[i].calls++;
      hint = i + 1;
      return 0;
    }
  }
  if (n_now == DT_OPS_MAX) {
    lost_now++;
    return 0;
  }
  now[n_now++] = (dt_op_count){name, {a, b, c, d, e}, 1};
  hint = n_now;
  return 0;
}

void dt_ops_step_begin(void) {
  n_now = 0;
  lost_now = 0;
}

void dt_ops_step_end(void) {
  memcpy(last, now, (size_t)n_now * sizeof *now);
  n_last = n_now;
  lost_last = lost_now;
}

void dt_ops_aside(int on) { dt_op_depth += on ? 1 : -1; }

const dt_op_count *dt_ops_last(int *n, int64_t *lost) {
  *n = n_last;
  *lost = lost_last;
  return last;
}
