/* table.c: the mesh as a table and a row of its bytes table (table.h). */
#define _POSIX_C_SOURCE 200809L /* gethostname */
#include "table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shape.h"

/* Every rank's coordinates and host on rank 0; the groups of each axis. */
void mesh_table(dt_comm *world, const int64_t *n, const int64_t *at) {
  enum { HOST = 32 };
  int64_t N = world->size, mine[AXES];
  char host[HOST] = "", *hosts = dt_host_alloc((size_t)(N * HOST), 1);
  int64_t *all = dt_host_alloc((size_t)(N * AXES), sizeof *all);
  gethostname(host, HOST - 1);
  memcpy(mine, at, sizeof mine);
  dt_host_gather(world, mine, all, AXES, DT_I64, 0);
  dt_host_gather(world, host, hosts, HOST / 4, DT_I32, 0); /* the name's bytes */
  dt_print0("the mesh: dp %lld x pp %lld x cp %lld x tp %lld = %lld rank%s (tp fastest, then cp, "
            "pp, dp)\n    rank   dp   pp   cp   tp   host\n",
            (long long)n[DP], (long long)n[PP], (long long)n[CP], (long long)n[TP], (long long)N,
            N == 1 ? "" : "s");
  for (int64_t r = 0; r < N && world->rank == 0; r++)
    dt_print0("  %6lld %4lld %4lld %4lld %4lld   %s\n", (long long)r, (long long)all[r * AXES + DP],
              (long long)all[r * AXES + PP], (long long)all[r * AXES + CP],
              (long long)all[r * AXES + TP], hosts + r * HOST);
  static const int order[NCOMM] = {TP, CP, PP, DP, DC};
  for (int k = 0; k < NCOMM && world->rank == 0; k++) {
    int a = order[k];
    char line[1024] = "";
    for (int64_t r = 0; r < N && strlen(line) < 900; r++)
      if (topo_place(n, r, a) == 0) { /* each group once, from its first rank */
        if (line[0]) strcat(line, " ");
        mesh_group(n, N, r, a, line, sizeof line);
      }
    dt_print0("  %-8s groups (%s = %lld): %s%s\n", axis_group[a], axis_name[a],
              (long long)topo_size(n, a), line, strlen(line) >= 900 ? " ..." : "");
  }
  free(all);
  free(hosts);
}

void mesh_row(const char *axis, const char *what, dt_counter got, uint64_t steps, uint64_t calls,
              uint64_t bytes, const char *how, int *bad) {
  *bad += got.calls != calls * steps || got.bytes_sent != bytes * steps;
  char key[48]; /* as data: "dp_cp all_reduce" */
  snprintf(key, sizeof key, "%s %.*s", strcmp(axis, "dp x cp") ? axis : "dp_cp",
           (int)strcspn(what, " "), what);
  dt_report("traffic", key, "{\"calls\": %llu, \"bytes\": %llu, \"formula\": %llu}",
            (unsigned long long)(got.calls / steps), (unsigned long long)(got.bytes_sent / steps),
            (unsigned long long)bytes);
  dt_print0("    %-8s %-22s %7llu %7llu %11llu %11llu   %s\n", axis, what,
            (unsigned long long)(got.calls / steps), (unsigned long long)calls,
            (unsigned long long)(got.bytes_sent / steps), (unsigned long long)bytes, how);
}

const char *mesh_how(const char *how, int E, char *buf, size_t n) {
  snprintf(buf, n, "%s", how);
  for (char *p = buf; (p = strstr(p, " x E")) != NULL; p += 4) p[3] = (char)('0' + E);
  return buf;
}
