/* verify_figures.c: --verify's figures: a lesson's, read from its
 * --report-json (common/comm/report.c), the prediction's, read from plan
 * --predict --json, and the two compared, each figure that differs named. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stats.h"
#include "verify.h"

static const char *const mem_name[6] = {"params", "grads", "optim", "activ", "comm", "data"};

/* The number after "key": in text, or NAN; within [text, end) when end. */
static double number_in(const char *text, const char *end, const char *key) {
  char k[96];
  snprintf(k, sizeof k, "\"%s\": ", key);
  const char *at = text ? strstr(text, k) : NULL;
  return at && (!end || at < end) ? strtod(at + strlen(k), NULL) : NAN;
}

/* A lesson's figures from its --report-json (rank 0's, the numbers it
 * prints, common/comm/report.c), never from its printed columns; -1 where
 * it records none. The step time: the lower quartile of its steps after the
 * first, as --measure takes of the collectives. */
void parse_lesson(const char *json, figures *f) {
  char *file = verify_slurp(json);
  const char *text = file ? file : "";
  memset(f, 0xff, sizeof *f); /* -1 everywhere */
  f->step_ms = 1e30;
  const char *sent = strstr(text, "\"traffic\": {"), *memory = strstr(text, "\"memory\": {");
  for (int a = PP; a < NCOMM && sent; a++)
    for (int k = 0; k < NCOLL; k++) {
      char key[64];
      snprintf(key, sizeof key, "\"%s %s\": {", a == DC ? "dp_cp" : axis_name[a], coll_name[k]);
      if (a == PP && k == AR) /* 14's tied weight, first and last stage: 13's pp all-reduce */
        snprintf(key, sizeof key, "\"emb all_reduce\": {");
      const char *at = strstr(sent, key), *end = at ? strchr(at, '}') : NULL;
      double calls = number_in(at, end, "calls"), bytes = number_in(at, end, "bytes");
      if (at) f->t[a][k] = (traffic){isnan(calls) ? -1 : (int64_t)calls, (int64_t)bytes};
    }
  for (int k = 0; k < 6 && memory; k++) {
    char key[32];
    snprintf(key, sizeof key, "\"%s\": {", mem_name[k]);
    const char *at = strstr(memory, key), *end = at ? strchr(at, '}') : NULL;
    if (at) f->mem[k] = (int64_t)number_in(at, end, "measured");
  }
  double steps[4096];
  int nsteps = 0;
  const char *at = strstr(text, "\"step_ms\": [");
  for (char *p = at ? strchr(at, '[') + 1 : NULL, *next; p && nsteps < 4096; p = next + 1) {
    double v = strtod(p, &next);
    if (next == p) break;
    if (p != strchr(at, '[') + 1) steps[nsteps++] = v; /* after the first */
    if (*next != ',') break;
  }
  if (nsteps) f->step_ms = quartile(steps, nsteps);
  const char *slots = strstr(text, "\"bubble_slots\": {"); /* 09's interleave.c */
  if (slots) f->bubble_slots = (int64_t)number_in(slots, strchr(slots, '}'), "measured");
  free(file);
}

char *verify_slurp(const char *path) {
  FILE *in = fopen(path, "r");
  if (!in) return NULL;
  fseek(in, 0, SEEK_END);
  long n = ftell(in);
  rewind(in);
  char *text = n >= 0 ? malloc((size_t)n + 1) : NULL;
  size_t got = text ? fread(text, 1, (size_t)n, in) : 0;
  if (text) text[got] = 0;
  fclose(in);
  return text;
}

double verify_json(const char *text, const char *key) {
  char k[64];
  snprintf(k, sizeof k, "\"%s\": ", key);
  const char *at = strstr(text, k);
  return at ? strtod(at + strlen(k), NULL) : NAN;
}

void parse_prediction(const char *log, figures *f) {
  char *file = verify_slurp(log);
  const char *text = file ? file : "";
  memset(f, 0, sizeof *f);
  for (int a = PP; a < NCOMM; a++)
    for (int k = 0; k < NCOLL; k++) {
      char key[64];
      snprintf(key, sizeof key, "\"%s %s\": [", a == DC ? "dp_cp" : axis_name[a], coll_name[k]);
      const char *at = strstr(text, key);
      long long calls, bytes;
      if (at && sscanf(at + strlen(key), "%lld, %lld", &calls, &bytes) == 2)
        f->t[a][k] = (traffic){calls, bytes};
    }
  for (int k = 0; k < 6; k++) f->mem[k] = (int64_t)verify_json(text, mem_name[k]);
  f->step_ms = 1e3 * verify_json(text, "step_time_s");
  f->bubble_slots = (int64_t)verify_json(text, "bubble_slots");
  static const char *parts[NCOMM + 2] = {"compute_s", "pp", "cp", "tp", "dp_cp", "bubble_s"};
  const char *comm = strstr(text, "\"comm_s\": {"); /* the axes' names are the mesh's keys too */
  for (int i = 0; i < NCOMM + 1; i++)
    f->parts[i] = 1e3 * verify_json(i && i < NCOMM && comm ? comm : text, parts[i]);
  free(file);
}

/* Every figure the lesson printed against the prediction: how many it
 * printed, and how many differ (each named). */
void compare_figures(const figures *got, const figures *want, int *printed, int *differ, char *why,
                     size_t len) {
  for (int a = PP; a < NCOMM; a++)
    for (int k = 0; k < NCOLL; k++) {
      const traffic *g = &got->t[a][k];
      const traffic *w = &want->t[a][k];
      if (g->bytes < 0 && g->calls < 0) continue;
      (*printed)++;
      if ((g->calls >= 0 && g->calls != w->calls) || (g->bytes >= 0 && g->bytes != w->bytes)) {
        (*differ)++;
        snprintf(why + strlen(why), len - strlen(why),
                 " [%s %s: %lld calls %lld B, predicted %lld %lld]", axis_name[a], coll_name[k],
                 (long long)g->calls, (long long)g->bytes, (long long)w->calls,
                 (long long)w->bytes);
      }
    }
  if (got->bubble_slots >= 0) { /* 09's plan in the slot model: a stage's idle slots */
    (*printed)++;
    if (got->bubble_slots != want->bubble_slots) {
      (*differ)++;
      snprintf(why + strlen(why), len - strlen(why), " [bubble slots: %lld, predicted %lld]",
               (long long)got->bubble_slots, (long long)want->bubble_slots);
    }
  }
  for (int k = 0; k < 6; k++) {
    if (got->mem[k] < 0) continue;
    (*printed)++;
    if (got->mem[k] != want->mem[k]) {
      (*differ)++;
      snprintf(why + strlen(why), len - strlen(why), " [%s: %lld, predicted %lld]", mem_name[k],
               (long long)got->mem[k], (long long)want->mem[k]);
    }
  }
}
