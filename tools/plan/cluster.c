/* cluster.c: the machines a plan is made for.
 *
 * A cluster is a datasheet: the presets below (each number's public source
 * in 13_plan/README.md, "The presets and their sources"), or a file the
 * user writes for their own, one `key = value` a line. This machine is
 * what --measure found, kept in a machine file (JSON, one field or one
 * operation a line) that --predict reads back. */
#define _POSIX_C_SOURCE 200809L /* mkdir's mode */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "13_plan/device.h"
#include "cluster.h"
#include "dt.h"

typedef struct {
  const char *key;
  size_t at; /* offsetof in machine */
  int need;  /* a cluster file must give it */
} field;
#define F(k, m, n)                                                                                 \
  { k, offsetof(machine, m), n }
static const field fields[] = {
    F("gpus_per_node", gpus_per_node, 1), F("peak_flops", flops, 1),
    F("gemm_fraction", eff, 1),           F("hbm_bytes", hbm, 1),
    F("hbm_bandwidth", hbm_bw, 1),        F("nvlink_bandwidth", intra.beta, 1),
    F("nvlink_latency", intra.alpha, 1),  F("ib_bandwidth", inter.beta, 1),
    F("ib_latency", inter.alpha, 1),      F("sms", sms, 1),
    F("attention_fraction", att_eff, 1),  F("nics_per_node", nics, 1)};
enum { NFIELDS = sizeof fields / sizeof *fields };

static void set_field(machine *c, const field *f, double v) {
  if (f->at == offsetof(machine, gpus_per_node))
    c->gpus_per_node = (int64_t)v;
  else if (strstr(f->key, "_bandwidth") && f->at != offsetof(machine, hbm_bw))
    *(double *)((char *)c + f->at) = 1 / v; /* a channel's beta: seconds per byte */
  else
    *(double *)((char *)c + f->at) = v;
}

/* The DGX presets, each number's source in 13_plan/README.md: 8 GPUs a
 * node on NVSwitch; NVLink as NCCL counts it (its links x its per-link
 * bandwidth, topo.h) and a NIC as NCCL counts it (its speed / 8, topo.cc),
 * 8 NICs a node; latencies a ring step from NCCL's own tuning model
 * (Simple protocol); the large-GEMM fraction from the public MAMF table
 * (measured bf16 matmul / peak); SMs from the datasheets; the fused
 * attention's fraction from FlashAttention-2's measurements. */
int cluster_preset(const char *name, machine *c) {
  static const struct {
    const char *name;
    double v[NFIELDS];
  } presets[] = {
      {"dgx-a100-40g",
       {8, 312e12, 0.869, 40e9, 1.555e12, 240e9, 3.4e-6, 25e9, 14e-6, 108, 0.50, 8}},
      {"dgx-a100-80g",
       {8, 312e12, 0.869, 80e9, 2.039e12, 240e9, 3.4e-6, 25e9, 14e-6, 108, 0.50, 8}},
      {"dgx-h100-80g",
       {8, 989e12, 0.803, 80e9, 3.35e12, 370.8e9, 3.4e-6, 50e9, 14e-6, 132, 0.339, 8}},
      {"dgx-h200", {8, 989e12, 0.803, 141e9, 4.8e12, 370.8e9, 3.4e-6, 50e9, 14e-6, 132, 0.339, 8}}};
  for (size_t i = 0; i < sizeof presets / sizeof *presets; i++)
    if (!strcmp(name, presets[i].name)) {
      *c = (machine){0};
      snprintf(c->name, sizeof c->name, "%s", name);
      snprintf(c->source, sizeof c->source, "preset (sources: 13_plan/README.md)");
      for (int k = 0; k < NFIELDS; k++) set_field(c, &fields[k], presets[i].v[k]);
      return 1;
    }
  return 0;
}

/* name = my-cluster, then each field once: `key = number`, # comments. */
void cluster_file(const char *path, machine *c) {
  FILE *f = fopen(path, "r");
  if (!f)
    dt_fail("--cluster %s: not a preset (dgx-a100-40g, dgx-a100-80g, dgx-h100-80g, dgx-h200) nor a "
            "file it can read: %s",
            path, strerror(errno));
  char line[512], key[64], rest[256];
  int seen[NFIELDS] = {0}, n = 0;
  *c = (machine){0};
  snprintf(c->name, sizeof c->name, "%s", path);
  snprintf(c->source, sizeof c->source, "cluster file %s", path);
  while (fgets(line, sizeof line, f)) {
    n++;
    char *hash = strchr(line, '#'), *end;
    if (hash) *hash = 0;
    if (sscanf(line, " %63[a-z_0-9] = %255s", key, rest) != 2) {
      if (strspn(line, " \t\r\n") == strlen(line)) continue;
      fclose(f);
      dt_fail("--cluster %s line %d: not `key = value`: %s", path, n, line);
    }
    if (!strcmp(key, "name")) {
      snprintf(c->name, sizeof c->name, "%.63s", rest);
      continue;
    }
    int k = 0;
    while (k < NFIELDS && strcmp(key, fields[k].key)) k++;
    double v = strtod(rest, &end);
    if (k == NFIELDS || *end || !(v > 0) || v > 1e30) {
      fclose(f);
      dt_fail("--cluster %s line %d: %s", path, n,
              k == NFIELDS ? "unknown key (see 13_plan/README.md)"
                           : "the value must be a positive number");
    }
    set_field(c, &fields[k], v);
    seen[k] = 1;
  }
  fclose(f);
  for (int k = 0; k < NFIELDS; k++)
    if (!seen[k] && fields[k].need)
      dt_fail("--cluster %s: no `%s = ...` line", path, fields[k].key);
  if (c->eff > 1 || c->att_eff > 1)
    dt_fail("--cluster %s: gemm_fraction and attention_fraction are fractions of peak, at most 1",
            path);
}

/* The machine file. Fields as the cluster file's (bandwidths in bytes per
 * second), then the all-reduce's fit and every op's time, one a line. */
void machine_write(const char *path, const machine *c) {
  char tmp[4200], dir[4096];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (slash && slash != dir) { /* its folder, and the one above (build/plan) */
    *slash = 0;
    char *up = strrchr(dir, '/');
    if (up) {
      *up = 0;
      mkdir(dir, 0755);
      *up = '/';
    }
    mkdir(dir, 0755);
  }
  struct stat st;
  if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
    dt_fail("--machine %s: not a regular file; refusing to replace it", path);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (!f) dt_fail("--machine %s: cannot write it: %s", path, strerror(errno));
  fprintf(f, "{\n  \"name\": \"%s\",\n  \"ranks\": %lld,\n  \"cores\": %lld,\n", c->name,
          (long long)c->ranks, (long long)c->cores);
  fprintf(f, "  \"gpus_per_node\": %lld,\n  \"peak_flops\": %.6g,\n  \"gemm_fraction\": %.6g,\n",
          (long long)c->gpus_per_node, c->flops, c->eff);
  fprintf(f, "  \"hbm_bytes\": %.6g,\n  \"hbm_bandwidth\": %.6g,\n", c->hbm, c->hbm_bw);
  fprintf(f, "  \"nvlink_bandwidth\": %.6g,\n  \"nvlink_latency\": %.6g,\n",
          c->intra.beta > 0 ? 1 / c->intra.beta : 0, c->intra.alpha);
  fprintf(f, "  \"ib_bandwidth\": %.6g,\n  \"ib_latency\": %.6g,\n",
          c->inter.beta > 0 ? 1 / c->inter.beta : 0, c->inter.alpha);
  const channel *fit[3] = {&c->ar, &c->rs, &c->ag};
  for (int i = 0; i < 3; i++)
    fprintf(f, "  \"%s_alpha\": %.6g,\n  \"%s_beta\": %.6g,\n",
            coll_name[i == 0   ? AR
                      : i == 1 ? RS
                               : AG],
            fit[i]->alpha,
            coll_name[i == 0   ? AR
                      : i == 1 ? RS
                               : AG],
            fit[i]->beta);
  fprintf(f, "  \"fit_residual\": %.4g,\n", c->fit_residual);
  fprintf(f, "  \"swap_intra\": %.6g,\n  \"swap_inter\": %.6g,\n", c->swap[0], c->swap[1]);
  fprintf(f, "  \"ops\": [\n");
  for (int i = 0; i < c->nops; i++)
    fprintf(f,
            "    {\"kernel\": \"%s\", \"shape\": [%lld, %lld, %lld, %lld, %lld], \"seconds\": "
            "%.6g}%s\n",
            kernel_name[c->ops[i].k], (long long)c->ops[i].s[0], (long long)c->ops[i].s[1],
            (long long)c->ops[i].s[2], (long long)c->ops[i].s[3], (long long)c->ops[i].s[4],
            c->ops[i].seconds, i + 1 < c->nops ? "," : "");
  fprintf(f, "  ]\n}\n");
  if (fclose(f) != 0 || rename(tmp, path) != 0)
    dt_fail("--machine %s: cannot write it: %s", path, strerror(errno));
  dt_print0("wrote %s: alpha, beta and %d operations' times (--predict reads it)\n", path, c->nops);
}

int machine_read(const char *path, machine *c) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  char line[512], key[64], kern[16];
  double v;
  long long s[5];
  *c = (machine){.measured = 1};
  c->ops = dt_host_alloc(MAXOPS, sizeof *c->ops);
  snprintf(c->source, sizeof c->source, "machine file %s (--measure)", path);
  while (fgets(line, sizeof line, f)) {
    if (sscanf(line,
               " {\"kernel\": \"%15[a-z0-9_]\", \"shape\": [%lld, %lld, %lld, %lld, %lld], "
               "\"seconds\": %lf",
               kern, &s[0], &s[1], &s[2], &s[3], &s[4], &v) == 7 &&
        c->nops < MAXOPS) {
      int k = 0;
      while (k < NKERNELS && strcmp(kern, kernel_name[k])) k++;
      c->ops[c->nops++] = (timed_op){k, {s[0], s[1], s[2], s[3], s[4]}, v};
    } else if (sscanf(line, " \"name\": \"%63[^\"]\"", c->name) == 1) {
    } else if (sscanf(line, " \"%63[a-z_]\": %lf", key, &v) == 2) {
      for (int k = 0; k < NFIELDS; k++)
        if (!strcmp(key, fields[k].key)) set_field(c, &fields[k], v > 0 ? v : 1e300);
      channel *fit[3] = {&c->ar, &c->rs, &c->ag};
      for (int i = 0; i < 3; i++) {
        char a[40], b[40];
        snprintf(a, sizeof a, "%s_alpha", coll_name[i == 0 ? AR : i == 1 ? RS : AG]);
        snprintf(b, sizeof b, "%s_beta", coll_name[i == 0 ? AR : i == 1 ? RS : AG]);
        if (!strcmp(key, a)) fit[i]->alpha = v;
        if (!strcmp(key, b)) fit[i]->beta = v;
      }
      if (!strcmp(key, "fit_residual")) c->fit_residual = v;
      if (!strcmp(key, "swap_intra")) c->swap[0] = v;
      if (!strcmp(key, "swap_inter")) c->swap[1] = v;
      if (!strcmp(key, "ranks")) c->ranks = (int64_t)v;
      if (!strcmp(key, "cores")) c->cores = (int64_t)v;
    }
  }
  fclose(f);
  if (c->intra.beta >= 1e299) c->intra.beta = 0; /* one rank: no channel was measured */
  if (c->inter.beta >= 1e299) c->inter.beta = 0;
  if (!(c->flops > 0) || !(c->hbm_bw > 0) || !c->gpus_per_node)
    dt_fail("--machine %s: not a machine file of --measure (no peak_flops, hbm_bandwidth or "
            "gpus_per_node)",
            path);
  return 1;
}
