/* topology.c: the mesh's axes, its sizes and a rank's place on it
 * (topology.h). */
#include "topology.h"

const char *const axis_name[NCOMM] = {"dp", "pp", "cp", "tp", "dp x cp"};
const char *const axis_group[NCOMM] = {"data", "pipeline", "context", "tensor", "dp x cp"};

int64_t topo_fill(const int64_t *want, int64_t N, int64_t *n) {
  static const int order[AXES] = {TP, CP, PP, DP};
  int free_axes[AXES], nfree = 0;
  int64_t given = 1;
  for (int k = 0; k < AXES; k++) /* before n is written: it may be want */
    if (!want[order[k]]) free_axes[nfree++] = order[k];
  for (int a = 0; a < AXES; a++) {
    n[a] = want[a] ? want[a] : 1;
    given *= n[a];
  }
  int64_t left = N / given, turn = 0;
  for (int64_t p = 2; nfree && left > 1; p++)
    for (; left % p == 0; left /= p) n[free_axes[turn++ % nfree]] *= p;
  return given;
}

int64_t topo_ranks(const int64_t *n) { return n[DP] * n[PP] * n[CP] * n[TP]; }

void topo_coords(const int64_t *n, int64_t r, int64_t *at) {
  for (int a = AXES - 1; a >= 0; a--) { /* tp fastest */
    at[a] = r % n[a];
    r /= n[a];
  }
}

int64_t topo_size(const int64_t *n, int a) { return a == DC ? n[DP] * n[CP] : n[a]; }

int64_t topo_place(const int64_t *n, int64_t r, int a) {
  int64_t at[AXES];
  topo_coords(n, r, at);
  return a == DC ? at[DP] * n[CP] + at[CP] : at[a];
}

int topo_along(int a, int b) { return b == a || (a == DC && (b == DP || b == CP)); }

int64_t topo_group(const int64_t *n, int64_t r, int a) {
  int64_t at[AXES], id = 0;
  topo_coords(n, r, at);
  for (int b = 0; b < AXES; b++) id = topo_along(a, b) ? id : id * n[b] + at[b];
  return id;
}

int topo_together(const int64_t *n, int64_t r, int64_t s, int a) {
  int64_t x[AXES], y[AXES];
  topo_coords(n, r, x);
  topo_coords(n, s, y);
  for (int b = 0; b < AXES; b++)
    if (x[b] != y[b] && !topo_along(a, b)) return 0;
  return 1;
}
