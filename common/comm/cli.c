/* cli.c: the one flag parser of every lesson, and dt_fail, how a usage error
 * ends the job.
 *
 * Every rank parses the same argv and so reaches the same verdict; a bad
 * value ends the job through dt_fail (one message from rank 0, exit 2)
 * instead of a crash, a hang, or a silently clamped value. */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm_internal.h"

static const char *comm_choice_value = "auto";
static int help_asked = 0;
static double timeout_seconds = 300;   /* handed to the watchdog by dt_init */
static const char *report_json = NULL; /* handed to report.c by dt_init */
static dt_option common_options[] = {
    DT_STRING("--report-json", &report_json, NULL,
              "write the figures the run prints (bytes, memory, steps, verdict) as JSON here"),
    DT_DOUBLE("--timeout", &timeout_seconds, 0.01, 1e7,
              "seconds a communication call may block before the watchdog aborts the job"),
    DT_STRING("--comm", &comm_choice_value, "auto|nccl|mpi",
              "communication library (auto: NCCL when every rank has its own GPU)"),
    DT_FLAG("--help", &help_asked, "print this help and exit"),
    DT_END,
};

void dt_fail(const char *fmt, ...) {
  if (dt_rank() == 0) { /* one write: mpirun forwards stdout and stderr apart, so a line
                        written in pieces can be cut by the banner */
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(line, sizeof line, "error: ");
    vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    strcat(line, "\n");
    fputs(line, stderr);
    fflush(stderr);
  }
#ifdef DT_CUDA
  dt_comm_abort_nccl(); /* NCCL's threads and GPU memory end with their communicators */
#endif
  dt_watch_finalize();
  exit(2);
}

static const char *kind_meta(const dt_option *o) {
  switch (o->kind) {
  case DT_OPT_INT: return "N";
  case DT_OPT_SIZE: return "BYTES";
  case DT_OPT_DOUBLE: return "X";
  case DT_OPT_STRING: return o->choices ? o->choices : "TEXT";
  default: return "";
  }
}

/* The DT_REFUSED entry of the table that names flag `name` whole, or, given
 * a value, that flag with that value ("--precision=fp16"); NULL if none. */
static const dt_option *refusal(const dt_option *options, const char *name, const char *value) {
  size_t len = strlen(name), vlen = value ? strlen(value) : 0;
  for (const dt_option *o = options; o && o->name; o++) {
    if (o->kind != DT_OPT_REFUSED) continue;
    for (const char *t = o->name + strspn(o->name, " "); *t; t += strspn(t, " ")) {
      size_t n = strcspn(t, " ");
      if (strncmp(t, name, len) == 0 &&
          (n == len || (value && n == len + 1 + vlen && t[len] == '=' &&
                        strncmp(t + len + 1, value, vlen) == 0)))
        return o;
      t += n;
    }
  }
  return NULL;
}

static void refuse(const dt_lesson *lesson, const dt_option *options, const dt_option *o,
                   const char *value) {
  const dt_option *r = refusal(options, o->name, value);
  if (r)
    dt_fail("%s%s%s: %s does not take it: %s", o->name, value ? " " : "", value ? value : "",
            lesson->name, r->help);
}

/* One line of --help; a STRING's choices without those the lesson refuses. */
static void print_option(const dt_option *options, const dt_option *o) {
  char left[96], dflt[64] = "", choices[64] = "";
  const char *meta = kind_meta(o);
  if (o->kind == DT_OPT_STRING && o->choices) {
    for (const char *c = o->choices; *c; c += *c == '|') {
      size_t n = strcspn(c, "|");
      char one[32];
      snprintf(one, sizeof one, "%.*s", (int)n, c);
      if (!refusal(options, o->name, one))
        snprintf(choices + strlen(choices), sizeof choices - strlen(choices), "%s%s",
                 choices[0] ? "|" : "", one);
      c += n;
    }
    meta = choices;
  }
  snprintf(left, sizeof left, "%s %s", o->name, meta);
  switch (o->kind) {
  case DT_OPT_INT:
  case DT_OPT_SIZE:
    snprintf(dflt, sizeof dflt, " (default %lld)", (long long)*(int64_t *)o->value);
    break;
  case DT_OPT_DOUBLE: snprintf(dflt, sizeof dflt, " (default %g)", *(double *)o->value); break;
  case DT_OPT_STRING:
    if (*(const char **)o->value)
      snprintf(dflt, sizeof dflt, " (default %s)", *(const char **)o->value);
    break;
  default: break;
  }
  /* two spaces at least between the columns: scripts read the left one so */
  printf("  %-28s%s%s%s\n", left, strlen(left) < 28 ? " " : "  ", o->help, dflt);
}

static void print_usage(const dt_lesson *lesson, const char *program, const dt_option *options) {
  printf("%s: %s\n\nusage: mpirun -np N %s [flags]   (N >= %d)\n\nflags:\n", lesson->name,
         lesson->summary, program, lesson->min_ranks);
  const dt_option *lists[2] = {options, common_options}, *bytes = NULL;
  for (int l = 0; l < 2; l++)
    for (const dt_option *o = lists[l]; o && o->name; o++)
      if (o->kind != DT_OPT_REFUSED && !refusal(options, o->name, NULL)) {
        print_option(options, o);
        if (o->kind == DT_OPT_SIZE && (!bytes || strcmp(o->name, "--max-bytes") == 0)) bytes = o;
      }
  if (bytes) /* the footer only where a flag takes BYTES */
    printf("\nBYTES takes a K, M or G suffix (powers of 1024): %s 64M\n", bytes->name);
}

static dt_option *find(dt_option *options, const char *name, size_t len) {
  dt_option *lists[2] = {options, common_options};
  for (int l = 0; l < 2; l++)
    for (dt_option *o = lists[l]; o && o->name; o++)
      if (o->kind != DT_OPT_REFUSED && strlen(o->name) == len && strncmp(o->name, name, len) == 0)
        return o;
  return NULL;
}

static const char *what_kind(const dt_option *o) {
  return o->kind == DT_OPT_INT ? "whole number" : o->kind == DT_OPT_SIZE ? "byte count" : "number";
}

/* Strict number parsing: the whole text must be a number in range. */
static double parse_number(const dt_option *o, const char *text) {
  char *end = NULL;
  errno = 0;
  double v = strtod(text, &end);
  if (end == text || *end != '\0' || isspace((unsigned char)text[0]))
    dt_fail("%s: '%s' is not a %s (run with --help)", o->name, text, what_kind(o));
  if (errno == ERANGE || !isfinite(v) || v < o->min || v > o->max)
    dt_fail("%s: %s is out of range; it must be between %g and %g", o->name, text, o->min, o->max);
  return v;
}

/* The option's bounds as integers (INT64_MAX is 2^63 as a double). */
static int64_t int_bound(double b) {
  return b >= 0x1p63 ? INT64_MAX : b <= -0x1p63 ? INT64_MIN : (int64_t)b;
}

/* Integers never go through a double: 2^53 + 1 and INT64_MAX stay exact. */
static int64_t parse_integer(const dt_option *o, const char *text) {
  char *end = NULL;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  int overflow = errno == ERANGE, shift = 0;
  if (o->kind == DT_OPT_SIZE && end != text && *end) {
    shift = *end == 'K' || *end == 'k'   ? 10
            : *end == 'M' || *end == 'm' ? 20
            : *end == 'G' || *end == 'g' ? 30
                                         : 0;
    if (shift) {
      end++;
      if (*end == 'i' && end[1] == 'B')
        end += 2;
      else if (*end == 'B')
        end++;
    }
  }
  if (end == text || *end != '\0' || isspace((unsigned char)text[0]))
    dt_fail("%s: '%s' is not a %s (run with --help)", o->name, text, what_kind(o));
  if (shift && (v > (INT64_MAX >> shift) || v < -(INT64_MAX >> shift)))
    overflow = 1;
  else
    v *= (long long)1 << shift;
  int64_t lo = int_bound(o->min), hi = int_bound(o->max);
  if (overflow || v < lo || v > hi)
    dt_fail("%s: %s is out of range; it must be between %lld and %lld", o->name, text,
            (long long)lo, (long long)hi);
  return v;
}

static void set_value(dt_option *o, const char *text) {
  if (text[0] == '\0') dt_fail("%s: the value is empty (run with --help)", o->name);
  switch (o->kind) {
  case DT_OPT_INT:
  case DT_OPT_SIZE: *(int64_t *)o->value = parse_integer(o, text); break;
  case DT_OPT_DOUBLE: *(double *)o->value = parse_number(o, text); break;
  case DT_OPT_STRING:
    if (o->choices) {
      size_t len = strlen(text);
      const char *c = o->choices;
      int ok = 0;
      while (*c && !ok) {
        size_t n = strcspn(c, "|");
        /* "bpe:N": "bpe:" and any text, its number judged by the lesson */
        int any = n >= 2 && c[n - 2] == ':' && c[n - 1] == 'N';
        ok = any ? len >= n - 1 && strncmp(c, text, n - 1) == 0
                 : n == len && strncmp(c, text, n) == 0;
        c += n + (c[n] == '|');
      }
      if (!ok) dt_fail("%s: '%s' is not one of %s", o->name, text, o->choices);
    }
    *(const char **)o->value = text;
    break;
  case DT_OPT_FLAG:
  case DT_OPT_REFUSED: break;
  }
}

int dt_cli_parse(int argc, char **argv, const dt_lesson *lesson, dt_option *options,
                 const char **comm_choice, double *timeout, const char **report) {
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (strcmp(arg, "-h") == 0) arg = "--help";
    if (strncmp(arg, "--", 2) != 0)
      dt_fail("unexpected argument '%s': flags start with -- (run with --help)", arg);
    const char *eq = strchr(arg, '=');
    size_t name_len = eq ? (size_t)(eq - arg) : strlen(arg);
    dt_option *o = find(options, arg, name_len);
    if (!o) dt_fail("unknown flag '%.*s' (run with --help to see the flags)", (int)name_len, arg);
    refuse(lesson, options, o, NULL);
    if (o->kind == DT_OPT_FLAG) {
      if (eq) dt_fail("%s takes no value", o->name);
      *(int *)o->value = 1;
      continue;
    }
    if (!eq && i + 1 >= argc) dt_fail("%s needs a value (run with --help)", o->name);
    set_value(o, eq ? eq + 1 : argv[++i]);
    if (o->kind == DT_OPT_STRING) refuse(lesson, options, o, *(const char **)o->value);
  }
  *comm_choice = comm_choice_value;
  *timeout = timeout_seconds;
  *report = report_json;
  if (help_asked && dt_rank() == 0) print_usage(lesson, argv[0], options);
  return help_asked;
}
