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

/* 13's ops of rank 0 (stage 0, cp rank 0) as kernels: how many entries */
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
    int j = 0;
    while (j < nk && (strcmp(k[j].name, name) || memcmp(k[j].s, o[i].s, sizeof o[i].s))) j++;
    if (j == nk && nk < max) k[nk++] = (kernel_count){name, {0}, 0};
    if (j < max) {
      memcpy(k[j].s, o[i].s, sizeof k[j].s);
      k[j].calls += o[i].count;
    }
  }
  return nk;
}

void report_kernels(const model *m, const mesh *x) {
  kernel_count k[160];
  op apart[160];
  int napart, n = kernel_list(m, x, k, 160, apart, &napart);
  const char *open = kind_of(m)->kernels_open;
  dt_print0(",\n \"kernels_compared\": %s%s%s", open ? "\"not yet: " : "true", open ? open : "",
            open ? "\"" : "");
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
                                  : "the planner's own op, no lesson's kernel");
  dt_print0("]");
}
