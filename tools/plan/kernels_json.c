/* kernels_json.c: --predict --json's "kernels", 13's list of a step's work
 * in the form a lesson's --report-json records its own (common/comm/
 * opcount.c): each kernel the step calls, its shape, its calls a step, on
 * rank 0's stage and cp rank. The ops of compute.c that are the same entry
 * point at the same shape are one entry; an op costed but no kernel is
 * listed apart with why ("costed_not_kernels"), never dropped. */
#include <stdio.h>
#include <string.h>

#include "13_plan/compute.h"
#include "13_plan/kinds.h"
#include "report.h"

/* one kernel at shape s, count calls more */
static void put(kernel_count *k, int *nk, int max, const char *name, const int64_t *s,
                double count) {
  int j = 0;
  while (j < *nk && (strcmp(k[j].name, name) || memcmp(k[j].s, s, sizeof k[j].s))) j++;
  if (j == *nk && *nk < max) k[(*nk)++] = (kernel_count){name, {s[0], s[1], s[2], s[3], s[4]}, 0};
  if (j < max) k[j].calls += count;
}

/* 13's ops of rank 0 (stage 0, cp rank 0) as kernels: how many entries.
 * 11's block forward is costed as 11 walks it, the block and its merge
 * (op_run.c times them so): two kernels, each listed. */
int kernel_list(const model *m, const mesh *x, kernel_count *k, int max, op *apart, int *napart) {
  op o[160];
  int n = ops_of(m, x, 0, 0, o, 160), nk = 0;
  *napart = 0;
  for (int i = 0; i < n; i++) {
    const char *name = op_kernel(&o[i]);
    if (!name) {
      apart[(*napart)++] = o[i];
      continue;
    }
    put(k, &nk, max, name, o[i].s, o[i].count);
    const int64_t merged[5] = {o[i].s[0], o[i].s[1], o[i].s[2], 0, 0};
    if (o[i].k == ATT_F) put(k, &nk, max, "dt_attn_merge", merged, o[i].count);
  }
  return nk;
}

void report_kernels(const model *m, const mesh *x) {
  kernel_count k[160];
  op apart[160];
  int napart, n = kernel_list(m, x, k, 160, apart, &napart);
  dt_print0(",\n \"kernels\": [");
  for (int i = 0; i < n; i++)
    dt_print0("%s\n  {\"kernel\": \"%s\", \"shape\": [%lld, %lld, %lld, %lld, %lld], \"calls\": "
              "%.17g}",
              i ? "," : "", k[i].name, (long long)k[i].s[0], (long long)k[i].s[1],
              (long long)k[i].s[2], (long long)k[i].s[3], (long long)k[i].s[4], k[i].calls);
  dt_print0("],\n \"costed_not_kernels\": [");
  for (int i = 0; i < napart; i++) /* 06's transient layers: dt_alloc's pages, no kernel */
    dt_print0("%s{\"op\": \"%s\", \"shape\": [%lld, %lld], \"count\": %.17g, \"why\": \"%s\"}",
              i ? ", " : "", kernel_name[apart[i].k], (long long)apart[i].s[0],
              (long long)apart[i].s[1], apart[i].count,
              apart[i].k == ALLOC ? "fresh pages a layer (06's dt_alloc), faulted in: no kernel"
              : apart[i].k == DATA11
                  ? "11's chunks made by a host loop (cp_inputs), copied in: no kernel"
                  : "the planner's own op, no lesson's kernel");
  dt_print0("]");
}
