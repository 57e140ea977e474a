/* shape.c: the mesh's shape, what it needs of the model, and the groups as
 * built (shape.h), of 12's mesh and of 14's alike.
 *
 * mesh_shape gives the axes the flags leave free the ranks left over.
 * mesh_check refuses, before any work, what the mesh cannot split.
 * mesh_verify asks every communicator which ranks it holds (bookkeeping:
 * a minimum over it, never counted) and compares them with the groups the
 * coordinates define: a wrong split is named with the groups it produced
 * beside the right ones, and the coordinates it mixed. It runs on every
 * start; `make check-12` relies on it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shape.h"

/* The axes the flags leave free (0) take the ranks left over (topology.c);
 * a wrong mesh is refused with the flags given. */
void mesh_shape(int64_t *n, int64_t N) {
  char flags[128] = "";
  for (int a = 0; a < AXES; a++)
    if (n[a]) /* for the messages: the axes given */
      snprintf(flags + strlen(flags), sizeof flags - strlen(flags), "%s--%s %lld",
               flags[0] ? " " : "", axis_name[a], (long long)n[a]);
  int64_t given = topo_fill(n, N, n), all = topo_ranks(n);
  if (N % given != 0)
    dt_fail("%s: %lld ranks along the axes given do not divide the job's %lld ranks", flags,
            (long long)given, (long long)N);
  if (all != N)
    dt_fail("%s: a mesh of %lld ranks, but the job has %lld: the axes' product must be N (leave an "
            "axis out, or 0, and it takes the ranks left)",
            flags, (long long)all, (long long)N);
}

void mesh_check(const int64_t *n, int64_t M, int zigzag, const dt_train_config *c) {
  int64_t T = n[TP], P = n[PP], parts = n[CP] * (zigzag ? 2 : 1);
  if (c->heads % T != 0)
    dt_fail("--heads %lld: the heads do not split over --tp %lld: each tensor-parallel rank holds "
            "whole heads "
            "(columns of Wq, Wk, Wv); choose --heads a multiple of %lld",
            (long long)c->heads, (long long)T, (long long)T);
  if (c->hidden % T != 0)
    dt_fail("--hidden %lld does not split over --tp %lld: each tensor-parallel rank holds H/tp "
            "hidden units; choose a multiple of %lld",
            (long long)c->hidden, (long long)T, (long long)T);
  if (c->layers % P != 0)
    dt_fail("--layers %lld: the layers do not split into --pp %lld stages of equal length; choose "
            "a multiple "
            "of %lld",
            (long long)c->layers, (long long)P, (long long)P);
  if (c->seq % parts != 0)
    dt_fail("--seq %lld does not split into %lld %s chunks of equal length: choose a multiple of "
            "%lld",
            (long long)c->seq, (long long)parts, zigzag ? "zigzag (2 cp)" : "contiguous (cp)",
            (long long)parts);
  if (c->batch % (n[DP] * M) != 0)
    dt_fail("--batch %lld does not split into dp x M = %lld x %lld microbatches of whole "
            "sequences; choose a multiple of %lld (or --micro)",
            (long long)c->batch, (long long)n[DP], (long long)M, (long long)(n[DP] * M));
}

/* Append "{4, 5}": the ranks s with id[s] == id[of] (id NULL: those together with of). */
static void members(const int64_t *mesh, int64_t N, const int64_t *id, int64_t of, int a, char *buf,
                    size_t len) {
  size_t n = strlen(buf);
  int first = 1;
  n += (size_t)snprintf(buf + n, len - n, "{");
  for (int64_t s = 0; s < N && n < len; s++)
    if (id ? id[s] == id[of] : topo_together(mesh, of, s, a)) {
      n += (size_t)snprintf(buf + n, len - n, "%s%lld", first ? "" : ", ", (long long)s);
      first = 0;
    }
  if (n < len) snprintf(buf + n, len - n, "}");
}

/* Rank r's group along a as built: id[s] names s's group, pos[r] is r's
 * rank in it. Writes what is wrong into why, or leaves it empty. */
static void judge(const int64_t *n, int64_t N, const int64_t *id, int64_t pos, int64_t r, int a,
                  char *why, size_t len) {
  int64_t size = topo_size(n, a);
  int mixed[AXES] = {0}, apart = 0, wrong = 0;
  char have[256] = "", right[512] = "", mix[64] = "";
  for (int64_t s = 0; s < N; s++) {
    int same = id[s] == id[r], should = topo_together(n, r, s, a);
    for (int b = 0; same && !should && b < AXES; b++)
      mixed[b] |= topo_place(n, s, b) != topo_place(n, r, b) && !topo_along(a, b);
    apart |= should && !same;
    wrong |= same != should;
  }
  if (!wrong && pos == topo_place(n, r, a)) return;
  members(n, N, id, r, a, have, sizeof have);
  for (int64_t s = 0; s < N; s++) { /* the right groups of the ranks it holds */
    char one[256] = "";
    members(n, N, NULL, s, a, one, sizeof one);
    if (id[s] == id[r] && !strstr(right, one))
      snprintf(right + strlen(right), sizeof right - strlen(right), "%s%s", right[0] ? " and " : "",
               one);
  }
  for (int b = 0; b < AXES; b++)
    if (mixed[b]) snprintf(mix + strlen(mix), sizeof mix - strlen(mix), " with %s", axis_name[b]);
  if (!wrong)
    snprintf(why, len,
             "rank %lld is rank %lld of its %s group %s; it should be rank %lld, its place along "
             "the axis: the split's key orders the group",
             (long long)r, (long long)pos, axis_group[a], have, (long long)topo_place(n, r, a));
  else
    snprintf(why, len, "rank %lld is in %s group %s; with %s = %lld the %s groups %s %s: %s%s",
             (long long)r, axis_group[a], have, axis_name[a], (long long)size, axis_group[a],
             apart ? "of its ranks are" : "are", right,
             mix[0] ? "the split's color mixes "
                    : "the split's color keeps apart ranks that differ "
                      "along it alone",
             mix[0] ? axis_name[a] : "");
  if (wrong && mix[0]) snprintf(why + strlen(why), len - strlen(why), "%s", mix);
}

void mesh_group(const int64_t *n, int64_t N, int64_t r, int a, char *buf, size_t len) {
  members(n, N, NULL, r, a, buf, len);
}

void mesh_verify(dt_comm *world, dt_comm *const *axis, dt_comm *dc, const int64_t *n,
                 const int64_t *at) {
  enum { K = 2 * NCOMM + AXES }; /* per rank: per group its id and rank; the coordinates */
  int64_t N = world->size, me = world->rank, mine[K];
  for (int a = 0; a < NCOMM; a++) { /* each group's smallest world rank names it */
    dt_comm *c = a < AXES ? axis[a] : dc;
    mine[2 * a] = me;
    dt_host_all_reduce(c, &mine[2 * a], 1, DT_I64, DT_MIN);
    mine[2 * a + 1] = c->rank;
  }
  memcpy(mine + 2 * NCOMM, at, AXES * sizeof *at);
  int64_t *all = dt_host_alloc((size_t)(N * K), sizeof *all), *id = dt_host_alloc((size_t)N, 8);
  dt_host_gather(world, mine, all, K, DT_I64, 0);
  char why[1024] = "";
  for (int64_t r = 0; me == 0 && r < N && !why[0]; r++) {
    int64_t want[AXES], *got = all + r * K + 2 * NCOMM;
    topo_coords(n, r, want);
    if (memcmp(want, got, sizeof want) != 0)
      snprintf(why, sizeof why,
               "rank %lld has the coordinates dp %lld, pp %lld, cp %lld, tp %lld; on the mesh dp "
               "%lld x pp %lld x cp %lld x tp %lld (tp fastest, then cp, pp, dp) it is at dp %lld, "
               "pp %lld, cp %lld, tp %lld",
               (long long)r, (long long)got[DP], (long long)got[PP], (long long)got[CP],
               (long long)got[TP], (long long)n[DP], (long long)n[PP], (long long)n[CP],
               (long long)n[TP], (long long)want[DP], (long long)want[PP], (long long)want[CP],
               (long long)want[TP]);
  }
  for (int a = 0; me == 0 && a < NCOMM; a++)
    for (int64_t r = 0; r < N && !why[0]; r++) {
      for (int64_t s = 0; s < N; s++) id[s] = all[s * K + 2 * a];
      judge(n, N, id, all[r * K + 2 * a + 1], r, a, why, sizeof why);
    }
  int bad = why[0] != 0;
  dt_host_broadcast(world, &bad, 1, DT_I32, 0);
  free(all);
  free(id);
  if (bad) dt_fail("the mesh's communicators are not its groups: %s", why);
  for (int a = 0; a < AXES; a++) /* the watchdog names a stuck call's communicator */
    snprintf(axis[a]->name, sizeof axis[a]->name, "%s", axis_name[a]);
  snprintf(dc->name, sizeof dc->name, "%s", axis_name[DC]);
}
