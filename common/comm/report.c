/* report.c: --report-json FILE, the figures a run prints, as data.
 *
 * The printed text is for people; a program that reads a run (13_plan's
 * --verify, a student's script, a plot) reads this instead of the columns.
 * Beside a figure it prints, a lesson records the same number here
 * (dt_report_traffic, dt_report_figure); the training layer records what it
 * prints for every lesson (the memory table, each step's time, the verdict).
 * Rank 0 keeps them (its own figures, and those it prints for all) and
 * writes one JSON object when the run ends (dt_finalize), through files.c:
 *   {"lesson": "05_dp", "backend": "cpu", "comm": "MPI (...)", "ranks": 2,
 *    "traffic": {"dp_cp all_reduce": {"calls": 8, "bytes": 524288, "formula": 524288}},
 *    "memory": {"params": {"measured": 524288, "formula": 524288}, ...},
 *    "step_ms": [0.41, ...], "verdict": "PASSED", ...}
 * Axes are named as 13_plan names them (dp, pp, cp, tp, and dp_cp for the
 * ranks that hold the same weights), collectives as dt_kind_name does. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm_internal.h"

typedef struct {
  char section[32], key[64];
  char *value; /* JSON text */
} entry;

static const char *path; /* NULL: not asked for */
static entry *entries;
static int count, cap;

void dt_report_open(const char *file, const dt_lesson *lesson) {
  path = file;
  if (!path) return;
  char err[4608] = "";
  if (dt_rank() == 0) dt_check_output_file("--report-json", path, 0, err, sizeof err);
  DT_MPI(MPI_Bcast(err, sizeof err, MPI_CHAR, 0, MPI_COMM_WORLD));
  if (err[0]) dt_fail("%s", err);
  dt_report_string(NULL, "lesson", lesson->name);
}

const char *dt_report_path(void) { return path; }

static void put(const char *section, const char *key, char *value) {
  for (int i = 0; i < count; i++) /* a figure recorded again replaces the first */
    if (!strcmp(entries[i].section, section ? section : "") && !strcmp(entries[i].key, key)) {
      free(entries[i].value);
      entries[i].value = value;
      return;
    }
  if (count == cap) {
    cap = cap ? 2 * cap : 32;
    entries = realloc(entries, (size_t)cap * sizeof *entries);
    CHECK_ALLOC(entries);
  }
  entry *e = &entries[count++];
  snprintf(e->section, sizeof e->section, "%s", section ? section : "");
  snprintf(e->key, sizeof e->key, "%s", key);
  e->value = value;
}

void dt_report(const char *section, const char *key, const char *fmt, ...) {
  if (!path || dt_rank() != 0) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *value = malloc((size_t)n + 1);
  CHECK_ALLOC(value);
  va_start(ap, fmt);
  vsnprintf(value, (size_t)n + 1, fmt, ap);
  va_end(ap);
  put(section, key, value);
}

void dt_report_string(const char *section, const char *key, const char *text) {
  if (!path || dt_rank() != 0) return;
  char *value = malloc(2 * strlen(text) + 3), *v = value;
  CHECK_ALLOC(value);
  *v++ = '"';
  for (const char *c = text; *c; c++) {
    if (*c == '"' || *c == '\\') *v++ = '\\';
    *v++ = (unsigned char)*c < ' ' ? ' ' : *c; /* a line's text: no control characters */
  }
  *v++ = '"';
  *v = 0;
  put(section, key, value);
}

void dt_report_traffic(const char *axis, dt_kind kind, double calls, double bytes, double formula) {
  char key[64];
  snprintf(key, sizeof key, "%s %s", axis, dt_kind_name(kind));
  if (calls < 0)
    dt_report("traffic", key, "{\"bytes\": %.17g, \"formula\": %.17g}", bytes, formula);
  else
    dt_report("traffic", key, "{\"calls\": %.17g, \"bytes\": %.17g, \"formula\": %.17g}", calls,
              bytes, formula);
}

void dt_report_figure(const char *section, const char *key, double measured, double formula) {
  dt_report(section, key, "{\"measured\": %.17g, \"formula\": %.17g}", measured, formula);
}

void dt_report_array(const char *key, const double *v, int64_t n) {
  if (!path || dt_rank() != 0) return;
  size_t len = 3 + (size_t)n * 26, at = 0;
  char *value = malloc(len);
  CHECK_ALLOC(value);
  at += (size_t)snprintf(value, len, "[");
  for (int64_t i = 0; i < n; i++)
    at += (size_t)snprintf(value + at, len - at, "%s%.6g", i ? ", " : "", v[i]);
  snprintf(value + at, len - at, "]");
  put(NULL, key, value);
}

/* Rank 0, at the end: the entries without a section first, then each
 * section's, in the order they were first recorded. */
void dt_report_write(void) {
  if (!path || dt_rank() != 0) return;
  dt_out o;
  dt_out_open(&o, "--report-json", path);
  dt_out_printf(&o, "{\"backend\": \"%s\", \"comm\": \"%s\", \"ranks\": %d", dt_backend(),
                dt_comm_lib(), dt_size());
  for (int i = 0; i < count; i++)
    if (!entries[i].section[0])
      dt_out_printf(&o, ",\n \"%s\": %s", entries[i].key, entries[i].value);
  for (int i = 0; i < count; i++) {
    const char *s = entries[i].section;
    int first = 1;
    for (int j = 0; j < i && first; j++) first = strcmp(entries[j].section, s) != 0;
    if (!s[0] || !first) continue;
    dt_out_printf(&o, ",\n \"%s\": {", s);
    for (int j = i, n = 0; j < count; j++)
      if (!strcmp(entries[j].section, s))
        dt_out_printf(&o, "%s\"%s\": %s", n++ ? ", " : "", entries[j].key, entries[j].value);
    dt_out_printf(&o, "}");
  }
  dt_out_printf(&o, "}\n");
  dt_out_close(&o);
  for (int i = 0; i < count; i++) free(entries[i].value);
  free(entries);
  entries = NULL;
  count = cap = 0;
}

/* --report-json's "kernels": the last step's, one object a kernel and
 * shape, in the order the step first called them (rank 0's, as the other
 * figures). A full table says so ("kernels_lost"): never a silent cut. */
void dt_ops_report(void) {
  int n_last;
  int64_t lost_last;
  const dt_op_count *last = dt_ops_last(&n_last, &lost_last);
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
