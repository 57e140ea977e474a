/* opcount.c: the kernels a process calls, counted (opcount.h). One table
 * fills during a step; at its end it is kept as the last step's, which the
 * training layer records in --report-json. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm_internal.h"

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

/* --report-json's "kernels": the last step's, one object a kernel and
 * shape, in the order the step first called them (rank 0's, as the other
 * figures). A full table says so ("kernels_lost"): never a silent cut. */
void dt_ops_report(void) {
  size_t len = 64 + (size_t)n_last * 160, at = 0;
  char *text = malloc(len);
  CHECK_ALLOC(text);
  at += (size_t)snprintf(text, len, "[");
  for (int i = 0; i < n_last; i++) {
    const dt_op_count *o = &last[i];
    at += (size_t)snprintf(text + at, len - at,
                           "%s\n  {\"kernel\": \"%s\", \"shape\": [%lld, %lld, %lld, %lld, %lld], "
                           "\"calls\": %lld}",
                           i ? "," : "", o->name, (long long)o->s[0], (long long)o->s[1],
                           (long long)o->s[2], (long long)o->s[3], (long long)o->s[4],
                           (long long)o->calls);
  }
  snprintf(text + at, len - at, "]");
  dt_report(NULL, "kernels", "%s", text);
  dt_report(NULL, "kernels_lost", "%lld", (long long)lost_last);
  free(text);
}
