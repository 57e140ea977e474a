/* verify_kernels.c: --verify's list of a step's work. The kernels one step
 * of the lesson called (its --report-json "kernels", counted by
 * common/comm/opcount.c) against 13's list for that shape (plan --predict
 * --json's, kernels_json.c): each kernel at each shape, its calls a step,
 * equal; the first entry that differs named. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verify.h"

typedef struct {
  char name[48];
  long long s[5];
  double calls;
} entry;
enum { MAX = 256 };

/* the entries of "kernels": [...] in text; -1 where it has none */
static int entries(const char *text, entry *e) {
  static const char key[] = "{\"kernel\": \"";
  const char *at = text ? strstr(text, "\"kernels\": [") : NULL;
  if (!at) return -1;
  const char *end = at[12] == ']' ? at : strstr(at, "}]"); /* the list's end: its last } */
  int n = 0;
  for (const char *p = strstr(at, key); p && p < end && n < MAX; p = strstr(p + 1, key)) {
    entry *k = &e[n];
    if (sscanf(
            p,
            "{\"kernel\": \"%47[^\"]\", \"shape\": [%lld, %lld, %lld, %lld, %lld], \"calls\": %lf",
            k->name, &k->s[0], &k->s[1], &k->s[2], &k->s[3], &k->s[4], &k->calls) == 7)
      n++;
  }
  return n;
}

static double calls_of(const entry *e, int n, const entry *k) {
  for (int i = 0; i < n; i++)
    if (!strcmp(e[i].name, k->name) && !memcmp(e[i].s, k->s, sizeof k->s)) return e[i].calls;
  return 0;
}

/* how many kernels at a shape differ in their calls a step (0: the lists
 * are equal), *listed the entries of either list; -1 where a list is
 * missing (why: which) */
int compare_kernels(const char *lesson_json, const char *prediction_log, int *listed, char *why,
                    size_t len) {
  static entry got[MAX];
  static entry want[MAX];
  char *a = verify_slurp(lesson_json), *b = verify_slurp(prediction_log);
  int ng = entries(a, got), nw = entries(b, want), differ = 0;
  *listed = 0;
  if (ng < 0 || nw < 0) {
    snprintf(why, len, "%s", ng < 0 ? "the lesson recorded no kernels" : "13 listed none");
    differ = -1;
  }
  for (int pass = 0; pass < 2 && differ >= 0; pass++) /* the lesson's, then 13's not in it */
    for (int i = 0; i < (pass ? nw : ng); i++) {
      const entry *k = pass ? &want[i] : &got[i];
      double g = calls_of(got, ng, k), w = calls_of(want, nw, k);
      if (pass && g) continue;
      (*listed)++;
      if (g == w) continue;
      if (!differ++)
        snprintf(why, len,
                 "first differing: %s [%lld, %lld, %lld, %lld, %lld]: the lesson %g a "
                 "step, predicted %g",
                 k->name, k->s[0], k->s[1], k->s[2], k->s[3], k->s[4], g, w);
    }
  free(a);
  free(b);
  return differ;
}
