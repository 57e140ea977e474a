/* verify.h: --verify, the prediction beside the lessons' own figures. */
#ifndef PLAN_VERIFY_H
#define PLAN_VERIFY_H

#include <stddef.h>

#include "13_plan/formulas.h"

/* verify_shapes.c: a shape --verify runs: its ranks, the lesson and its flags,
 * and the plan's flags that describe the same mesh */
typedef struct {
  int np;
  const char *lesson, *flags, *plan;
} verify_shape;
enum { VERIFY_NSHAPES = 30 };
extern const verify_shape *const verify_shapes; /* VERIFY_NSHAPES of them */
/* label holds one of list's comma-separated texts (one ending in '$' must end it) */
int verify_holds_any(const char *label, const char *list);

void verify_keep_env(void); /* before MPI_Init: the launcher's variables are not a child's */
int verify(const char *self, int quick, const char *only); /* the shapes that failed */
/* for the tool's other checks (published.c): the environment a child plan
 * or mpirun runs in (MPI_Init's variables dropped), a command's output into
 * a log (its status), a JSON number ("key": value) in a text, or NAN, and a
 * file's text */
void verify_child_env(void);
int verify_sh(const char *cmd, const char *log);
double verify_json(const char *text, const char *key);
char *verify_slurp(const char *path); /* a file's whole text (freed by the caller), or NULL */

/* verify_figures.c: a run's figures; -1 where the lesson records none */
typedef struct {
  traffic t[NCOMM][NCOLL];
  int64_t mem[6];
  double step_ms, parts[NCOMM + 2]; /* predicted: compute, comm by axis, bubble */
  int64_t bubble_slots; /* a stage's idle slots in 09's plan (V > 1, zb1; -1: none printed) */
} figures;
void parse_lesson(const char *json, figures *f);    /* its --report-json */
void parse_prediction(const char *log, figures *f); /* plan --predict --json's output */
/* every figure the lesson printed against the prediction: how many it
 * printed, and how many differ (each named into why) */
void compare_figures(const figures *got, const figures *want, int *printed, int *differ, char *why,
                     size_t len);

/* verify_kernels.c: the lesson's kernels a step against 13's list: how
 * many differ (the first named in why), -1 where not compared (why) */
int compare_kernels(const char *lesson_json, const char *prediction_log, int *listed, char *why,
                    size_t len);

#endif
