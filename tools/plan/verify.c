/* verify.c: --verify, the prediction set beside the lessons' own figures.
 *
 * For each shape: this program measures the machine at the shape's ranks
 * (`mpirun -np N plan --measure`, the rates at that very mesh's shapes),
 * the lesson runs (`mpirun -np N lesson --steps 200 --no-check`), and
 * `plan --predict --json` predicts it from the machine file just written.
 * Every byte count and memory row the lesson prints must equal the
 * prediction, and so must the kernels one step called, each at its shape
 * (verify_kernels.c), where 13 lists a lesson's kernels (kinds.h). The step time (the lower
 * quartile of the printed steps after the first, as --measure takes of the collectives: a typical
 * step, not the luckiest of twenty) must be within 20% where the ranks have a core each. Where it
 * misses, the machine is measured again at once and the run judged against that prediction too (a
 * run can fall on the other side of a change of the machine's speed from the measurement before
 * it); a shape that still misses is measured and run again after the others, four times at most,
 * every attempt printed (a shared machine's load changes from one run to
 * the next).
 * With more ranks than cores a rank waits for a core at every message,
 * which the model, a core per rank, does not describe: reported, not
 * judged. mpirun is $MPIRUN (default mpirun), so emulated nodes work:
 * MPIRUN="mpirun --hostfile $CLUSTER_HOSTFILE". */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dt.h"
#include "verify.h"

extern char **environ;
static char **kept;
static int nkept;

/* MPI_Init (even as a singleton) adds its variables to the environment; a
 * child mpirun that inherits them believes it runs inside this job. */
void verify_keep_env(void) {
  for (char **e = environ; *e; e++) nkept++;
  kept = calloc((size_t)nkept + 1, sizeof *kept);
  for (int i = 0; kept && i < nkept; i++) kept[i] = strdup(environ[i]);
}

void verify_child_env(void) {
  char names[256][128];
  int n = 0;
  for (char **e = environ; *e && n < 256; e++) {
    int old = 0;
    for (int i = 0; i < nkept && !old; i++) old = !strcmp(kept[i], *e);
    if (!old && strchr(*e, '=')) snprintf(names[n++], 128, "%.*s", (int)(strchr(*e, '=') - *e), *e);
  }
  for (int i = 0; i < n; i++) unsetenv(names[i]);
}

enum { ATTEMPTS = 5 }; /* the first, and up to four more where the time misses */

int verify_sh(const char *cmd, const char *log) {
  char full[2400];
  snprintf(full, sizeof full, "%s >%s 2>&1 </dev/null", cmd, log);
  return system(full);
}

enum { OK, TIME_OFF, FAILED };

/* --measure at shape i's ranks into its machine file `tag`, then --predict
 * from it into `want`; the commands' status. */
static int measure_predict(const char *self, const char *mpirun, const char *flags, int i,
                           const char *tag, figures *want) {
  const verify_shape *s = &verify_shapes[i];
  char cmd[2048], log[2][256], file[256];
  snprintf(file, sizeof file, "build/plan/verify-%d%s.json", i, tag);
  for (int k = 0; k < 2; k++)
    snprintf(log[k], sizeof log[k], "build/plan/verify-%d%s-%c.log", i, tag, "mp"[k]);
  snprintf(cmd, sizeof cmd, "%s%s -np %d %s --measure --timeout 120 --machine %s %s", mpirun, flags,
           s->np, self, file, s->plan);
  int rc = verify_sh(cmd, log[0]);
  snprintf(cmd, sizeof cmd, "%s --predict --json --machine %s %s", self, file, s->plan);
  rc |= verify_sh(cmd, log[1]);
  parse_prediction(log[1], want);
  return rc;
}

/* One attempt at shape i: measure, run, predict, compare; prints its row.
 * Where the time misses, the machine is measured again at once and the
 * run judged against that prediction too: this VM's speed moves in spells
 * of a second or two (a core's step 3.3 ms, then 5.5 for a while, then
 * 3.3: 13_plan/README.md), and a run of a second can fall on the other
 * side of a change from the measurement before it. */
static int attempt(const char *self, const char *mpirun, int i, int timed, int tries, int last) {
  const verify_shape *s = &verify_shapes[i];
  char cmd[2048], log[3][256], why[1024] = "", flags[64];
  snprintf(flags, sizeof flags, "%s%s", timed ? "" : " --oversubscribe",
           getuid() ? "" : " --allow-run-as-root");
  for (int k = 0; k < 3; k++)
    snprintf(log[k], sizeof log[k], "build/plan/verify-%d-%c.log", i, "mlp"[k]);
  figures got, want, after;
  int rc = measure_predict(self, mpirun, flags, i, "", &want);
  char report[256];
  snprintf(report, sizeof report, "build/plan/verify-%d-l.json", i);
  remove(report); /* a run that fails writes none: no figure of an earlier one is read */
  snprintf(cmd, sizeof cmd,
           "%s%s -np %d ./%s --steps 200 --no-check --timeout 120 --report-json %s %s", mpirun,
           flags, s->np, s->lesson, report, s->flags);
  rc |= verify_sh(cmd, log[1]);
  parse_lesson(report, &got);
  int printed = 0, differ = 0;
  compare_figures(&got, &want, &printed, &differ, why, sizeof why);
  char kwhy[512] = ""; /* the list of a step's kernels, the lesson's against 13's */
  int listed, kdiff = compare_kernels(report, log[2], &listed, kwhy, sizeof kwhy);
  double ratio = want.step_ms / got.step_ms, ratio_after = 0;
  int ok_time = !timed || fabs(ratio - 1) <= 0.2;
  int fail = rc != 0 || differ > 0 || kdiff != 0 || printed == 0 || got.step_ms >= 1e30;
  if (!fail && !ok_time) {
    rc |= measure_predict(self, mpirun, flags, i, "-after", &after);
    ratio_after = after.step_ms / got.step_ms;
    ok_time = fabs(ratio_after - 1) <= 0.2;
    fail = rc != 0;
  }
  char label[64], again_at_once[96] = "";
  snprintf(label, sizeof label, "%.12s %s", s->lesson, s->flags[0] ? s->flags : "(defaults)");
  if (ratio_after > 0)
    snprintf(again_at_once, sizeof again_at_once, " (measured again after the run: %.3f ms, %.2f)",
             after.step_ms, ratio_after);
  dt_print0("  %-36s %2d  %5d of %-5d  %17.3f  %8.3f  %5.2f  %s%s%s\n", label, s->np,
            printed - differ, printed, want.step_ms, got.step_ms, ratio,
            fail      ? "FAILED"
            : !timed  ? "reported: more ranks than cores, each waits for a core at every message"
            : ok_time ? "ok"
            : !last   ? "time off: measured and run again after the others"
                      : "TIME OFF",
            again_at_once, tries ? " (again)" : "");
  dt_print0("      predicted: compute %.3f, tp %.3f, cp %.3f, pp %.3f, dp x cp %.3f, bubble "
            "%.3f ms\n",
            want.parts[0], want.parts[TP], want.parts[CP], want.parts[PP], want.parts[DC],
            want.parts[NCOMM]);
  if (kdiff < 0)
    dt_print0("      kernels a step: not compared: %s\n", kwhy);
  else
    dt_print0("      kernels a step: %d of %d equal the prediction%s%s\n", listed - kdiff, listed,
              kdiff ? "; " : "", kwhy);
  if (fail) {
    char said[256] = "";
    for (int k = 0; k < 3 && !said[0]; k++) { /* a command's own complaint, if it made one */
      FILE *in = fopen(log[k], "r");
      while (in && fgets(said, sizeof said, in) && strncmp(said, "error: ", 7)) said[0] = 0;
      if (in) fclose(in);
    }
    said[strcspn(said, "\n")] = 0;
    dt_print0("      %s%s%s (logs: %s, %s, %s)\n", rc ? "a command failed: " : "", said,
              why[0]    ? why
              : printed ? ""
                        : "no figure parsed",
              log[0], log[1], log[2]);
  }
  return fail ? FAILED : ok_time ? OK : TIME_OFF;
}

/* Every shape once; then the shapes whose time missed, again, after the
 * others and a pause: a burst of another job's load on a shared machine
 * lasts seconds, and trying again at once meets the same burst. */
int verify(const char *self, int quick, const char *only) {
  const char *mpirun = getenv("MPIRUN") ? getenv("MPIRUN") : "mpirun";
  int64_t cores = sysconf(_SC_NPROCESSORS_ONLN);
  int bad = 0, judged = 0, reported = 0, n = VERIFY_NSHAPES;
  int state[VERIFY_NSHAPES] = {OK}; /* a shape --quick leaves out: not judged */
  int picked[VERIFY_NSHAPES], any = 0;
  char names[1024] = "";
  for (int i = 0; i < n; i++) { /* --shapes: the lesson and its flags hold the text */
    char label[128];
    snprintf(label, sizeof label, "%s %s", verify_shapes[i].lesson, verify_shapes[i].flags);
    any += picked[i] = !only || verify_holds_any(label, only);
    if (!strstr(names, verify_shapes[i].lesson))
      snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "",
               verify_shapes[i].lesson);
  }
  if (!any) dt_fail("--shapes '%s': no shape of --verify holds it; its lessons: %s", only, names);
  verify_child_env();
  if (verify_sh("mkdir -p build/plan", "/dev/null") != 0)
    dt_fail("--verify: cannot make build/plan");
  dt_print0(
      "verify: each shape measured here (plan --measure at its ranks), run (--steps 200 "
      "--no-check --report-json) and predicted (plan --predict --json); bytes, memory and the "
      "kernels a step calls must equal, the step time (the lower quartile of "
      "the steps after the first) be within 20%% "
      "where ranks <= cores (%lld)\n  shape                                np  figures "
      "equal   step ms: predicted  measured  ratio  verdict\n",
      (long long)cores);
  for (int pass = 0; pass < ATTEMPTS; pass++) {
    int again = 0;
    for (int i = 0; i < n; i++) {
      int timed = verify_shapes[i].np <= cores;
      if (!picked[i] || (pass == 0 && quick && !timed) || (pass > 0 && state[i] != TIME_OFF))
        continue;
      again += pass > 0;
      if (pass > 0 && again == 1) sleep(3);
      state[i] = attempt(self, mpirun, i, timed, pass, pass == ATTEMPTS - 1);
      if (pass == 0) {
        judged += timed;
        reported += !timed;
      }
    }
  }
  for (int i = 0; i < n; i++) bad += (!quick || verify_shapes[i].np <= cores) && state[i] != OK;
  dt_print0("%s: --verify: bytes, memory and kernels equal the prediction on every shape, step "
            "time within "
            "20%% on the %d shape(s) of ranks <= cores; %d oversubscribed shape(s) reported, not "
            "judged (%d problem(s))\n",
            bad ? "CHECK FAILED" : "CHECK PASSED", judged, reported, bad);
  return bad;
}
