/* published.c: --verify-published, the planner against the published record.
 *
 * 13_plan/published.tsv holds runs that papers and official repositories
 * published, one a line: each as it ran (its model, its mesh, its ZeRO
 * stage, recomputation, schedule and batch, its cluster: plan's flags) and
 * the figure it published, in the source's own unit (a step's seconds,
 * tokens a second a GPU, or TFLOP/s a GPU by the source's own formula),
 * with where it is printed and what it counts. Each run is planned as a
 * user would plan it (plan --predict --json, a program run: a run the
 * planner cannot express is refused as the user would see it), and the
 * prediction is set beside the figure in the same unit. The ratio is the
 * predicted throughput over the published one: above 1 the planner is
 * optimistic. Nothing is fitted to a row: every row is the same model, its
 * numbers the preset's, each cited in 13_plan/README.md. */
#define _POSIX_C_SOURCE 200809L /* popen */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt.h"
#include "published.h"
#include "verify.h"

typedef struct {
  char id[48], cluster[48], flags[800], unit[24], counts[240], source[480];
  int year;
  long long gpus;
  double figure;
} run;

/* The units a source publishes, and how a prediction is put in them. */
enum { STEP, TOKENS, TFLOPS_MEGATRON, MFU_MEGATRON, NUNITS };
static const char *const unit_name[NUNITS] = {"s/step", "tokens/s/gpu", "tflops/gpu-megatron",
                                              "mfu-megatron"};
static const char *const unit_shown[NUNITS] = {"s a step", "tokens/s/GPU", "TFLOP/s/GPU", "% MFU"};

static int unit_of(const char *name) {
  for (int u = 0; u < NUNITS; u++)
    if (!strcmp(name, unit_name[u])) return u;
  return -1;
}

/* One line of the file: id, year, gpus, cluster, flags, figure, unit,
 * what the figure counts, source; tab-separated. 0 where it is no run. */
static int parse_run(char *line, run *r) {
  char *field[9];
  int n = 0;
  line[strcspn(line, "\r\n")] = 0;
  if (line[0] == '#' || !line[0]) return 0;
  for (char *at = line; n < 9; n++) {
    field[n] = at;
    at = strchr(at, '\t');
    if (!at) {
      n++;
      break;
    }
    *at++ = 0;
  }
  if (n != 9) dt_fail("--published: a run needs 9 fields separated by tabs: %.60s", field[0]);
  *r = (run){.year = atoi(field[1]), .gpus = atoll(field[2]), .figure = atof(field[5])};
  char *to[6] = {r->id, r->cluster, r->flags, r->unit, r->counts, r->source};
  const size_t room[6] = {sizeof r->id,   sizeof r->cluster, sizeof r->flags,
                          sizeof r->unit, sizeof r->counts,  sizeof r->source};
  const int from[6] = {0, 3, 4, 6, 7, 8};
  for (int k = 0; k < 6; k++) {
    if (strlen(field[from[k]]) >= room[k])
      dt_fail("--published: run %.40s: a field too long", field[0]);
    memcpy(to[k], field[from[k]], strlen(field[from[k]]) + 1);
  }
  if (unit_of(r->unit) < 0 || !(r->figure > 0) || r->gpus < 1)
    dt_fail("--published: run %s: a unit of s/step, tokens/s/gpu, tflops/gpu-megatron or "
            "mfu-megatron, a "
            "positive figure and GPUs",
            r->id);
  return 1;
}

/* The number after a flag in a run's flags (0 where absent). */
static double flag(const char *flags, const char *name) {
  char key[48];
  snprintf(key, sizeof key, "%s ", name);
  const char *at = strstr(flags, key);
  return at ? atof(at + strlen(key)) : 0;
}

/* Megatron's FLOPs of a step (Narayanan et al. 2021, eq. 3), the formula
 * its table's TFLOP/s come from: 96 B s l h^2 (1 + s/6h + V/16lh), which
 * counts the recomputed forward (its runs recompute every layer). */
static double megatron_flops(const char *flags) {
  double B = flag(flags, "--batch"), s = flag(flags, "--seq"), l = flag(flags, "--layers");
  double h = flag(flags, "--dim"), V = flag(flags, "--vocab");
  return 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
}

/* Megatron's model FLOPs of a step (Korthikanti et al. 2022, section 6),
 * its MFU's numerator: 72 B s l h^2 (1 + s/6h + V/12lh), no recomputation
 * counted. */
static double megatron_model_flops(const char *flags) {
  double B = flag(flags, "--batch"), s = flag(flags, "--seq"), l = flag(flags, "--layers");
  double h = flag(flags, "--dim"), V = flag(flags, "--vocab");
  return 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
}

/* Plan one run; its prediction in the run's unit and the ratio of
 * throughputs, or a refusal's sentence in why. */
static int predict_run(const char *self, const run *r, double *figure, double *ratio, double *mfu,
                       char *why, size_t len) {
  static char text[1 << 16];
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "%s --predict --json --cluster %s --gpus %lld %s 2>&1 </dev/null", self,
           r->cluster, r->gpus, r->flags);
  FILE *p = popen(cmd, "r");
  size_t n = p ? fread(text, 1, sizeof text - 1, p) : 0;
  text[n] = 0;
  int rc = p ? pclose(p) : -1;
  double step = verify_json(text, "step_time_s"), tps = verify_json(text, "tokens_per_s");
  *mfu = verify_json(text, "mfu");
  if (rc != 0 || !(step > 0)) {
    const char *err = strstr(text, "error: ");
    snprintf(why, len, "%.*s", (int)strcspn(err ? err : text, "\n"), err ? err : text);
    return 0;
  }
  int u = unit_of(r->unit);
  /* the device's peak, as the plan's own MFU divides by it */
  double peak = verify_json(text, "model_flops_per_step") / (step * (double)r->gpus * *mfu);
  *figure = u == STEP     ? step
            : u == TOKENS ? tps / (double)r->gpus
            : u == MFU_MEGATRON
                ? 100 * megatron_model_flops(r->flags) / (step * (double)r->gpus * peak)
                : megatron_flops(r->flags) / step / (double)r->gpus / 1e12;
  *ratio = u == STEP ? r->figure / step : *figure / r->figure;
  return 1;
}

int verify_published(const char *self, const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) dt_fail("--published %s: cannot read it", path);
  verify_child_env();
  static run runs[256];
  char line[2048], why[256], misses[2048] = "";
  int n = 0, expressed = 0, within = 0;
  while (n < 256 && fgets(line, sizeof line, f)) n += parse_run(line, &runs[n]);
  fclose(f);
  dt_print0("verify-published: %d published runs (%s), each planned as it ran (plan --predict "
            "--json) beside the figure it published, in its unit; ratio: the predicted throughput "
            "over the published (above 1: the planner is optimistic); within 25%%: 0.75-1.25\n",
            n, path);
  dt_print0("  %-26s %4s %6s  %-17s %10s %-13s %10s  %5s  %5s  %s\n", "run", "year", "GPUs",
            "cluster", "published", "unit", "predicted", "ratio", "MFU", "verdict");
  for (int i = 0; i < n; i++) {
    const run *r = &runs[i];
    double got = 0, ratio = 0, mfu = 0;
    int ok = predict_run(self, r, &got, &ratio, &mfu, why, sizeof why);
    int in = ok && ratio >= 0.75 && ratio <= 1.25;
    expressed += ok;
    within += in;
    if (!in)
      snprintf(misses + strlen(misses), sizeof misses - strlen(misses),
               ok ? "%s%.47s (%.2f)" : "%s%.47s (refused)", misses[0] ? ", " : "", r->id, ratio);
    const char *file = strrchr(r->cluster, '/'); /* a cluster file by its name */
    dt_print0("  %-26s %4d %6lld  %-17s %10.4g %-13s ", r->id, r->year, r->gpus,
              file ? file + 1 : r->cluster, r->figure, unit_shown[unit_of(r->unit)]);
    if (ok)
      dt_print0("%10.4g  %5.2f  %4.1f%%  %s\n", got, ratio, 100 * mfu, in ? "ok" : "MISS");
    else
      dt_print0("%10s  %5s  %5s  REFUSED\n", "-", "-", "-");
    dt_print0("      %s; %s\n", r->counts, r->source);
    if (!ok) dt_print0("      %s\n", why);
  }
  int good = expressed == n && n > 0 && 5 * within >= 4 * n;
  dt_print0("within 25%%: %d of %d (%.0f%%), expressed: %d of %d; misses: %s\n", within, n,
            n ? 100.0 * within / n : 0.0, expressed, n, misses[0] ? misses : "none");
  dt_print0("%s: --verify-published: every run expressed and at least 80%% within 25%% of its "
            "published figure (%d problem(s))\n",
            good ? "CHECK PASSED" : "CHECK FAILED", good ? 0 : 1);
  return !good;
}
