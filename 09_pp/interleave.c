/* interleave.c: interleaved 1F1B's plan and exchanges (interleave.h). */
#include <stdlib.h>
#include <string.h>

#include "interleave.h"

#include "formulas.h"

void interleave_check(int64_t N, int64_t L, int64_t M, int64_t V, const char *schedule) {
  if (V == 1) return;
  if (strcmp(schedule, "1f1b") != 0)
    dt_fail("--virtual-stages %lld runs interleaved 1F1B: not with --schedule %s", (long long)V,
            schedule);
  if (N == 1)
    dt_fail("--virtual-stages %lld needs 2 stages or more: on one, every chunk would pass its "
            "microbatch to itself",
            (long long)V);
  if (L % (N * V))
    dt_fail("--layers %lld does not split into %lld stages x %lld virtual stages of equal depth: "
            "--layers must be a multiple of %lld",
            (long long)L, (long long)N, (long long)V, (long long)(N * V));
  if (M % N)
    dt_fail("--microbatches %lld is not a multiple of the %lld stages: interleaved 1F1B runs the "
            "microbatches in groups of N",
            (long long)M, (long long)N);
}

void pp_slot_model(int T, int N, int64_t M, int64_t V, int zb) {
  long long busy = zb ? 3 * M : 2 * V * M, units = zb ? 3 * M : V * M;
  dt_print0("the plan in the slot model (every action one slot, messages free): %d slots, bubble "
            "(T - %s)/T = %lld/%d = %.1f%%; formula (N-1)/(%s+N-1) = %.1f%%\n",
            T, zb ? "3M" : "2VM", T - busy, T, 100.0 * (double)(T - busy) / T, zb ? "3M" : "VM",
            100.0 * (N - 1) / (double)(units + N - 1));
  /* a stage's idle slots, the plan's beside the formula's: what 13_plan predicts exactly */
  dt_report_figure(NULL, "bubble_slots", (double)(T - busy), (double)((zb ? 1 : 2) * (N - 1)));
}

/* Forward k's (b: backward k's) chunk and microbatch */
static action nth(char type, int64_t k, int N, int V) {
  /* exercise: the interleaved schedule's order */
  int64_t g = k / ((int64_t)N * V), i = k % ((int64_t)N * V);
  int c = (int)(i / N);
  return (action){type, (int)(g * N + i % N), type == 'F' ? c : V - 1 - c, 0, 0};
  /* end of exercise */
}

int pp_plan_v(int N, int s, int64_t M, int V, action *p) {
  int64_t n = 0, all = M * V, warm = pp_warmup_v(N, s, M, V);
  for (int64_t k = 0; k < warm; k++) p[n++] = nth('F', k, N, V);
  for (int64_t k = 0; k < all - warm; k++) {
    p[n++] = nth('F', warm + k, N, V);
    p[n++] = nth('B', k, N, V);
  }
  for (int64_t k = all - warm; k < all; k++) p[n++] = nth('B', k, N, V);
  return (int)n;
}

/* Where action a of stage s gets its input: the stage (DT_NOBODY: the
 * batch, or the loss) and the action there that makes it. */
static int source(int N, int s, int V, const action *a, action *from) {
  int v = a->chunk * N + s, last = N * V - 1;
  *from = *a;
  if (a->type == 'F') {
    from->chunk -= s == 0;
    return v == 0 ? DT_NOBODY : (s + N - 1) % N;
  }
  from->chunk += s == N - 1;
  return v == last ? DT_NOBODY : (s + 1) % N;
}

/* Where its output goes: a forward's on (DT_NOBODY after the last virtual
 * stage), a backward's input gradient back (none from virtual stage 0). */
static int sink(int N, int s, int V, const action *a) {
  int v = a->chunk * N + s;
  if (a->type == 'F') return v == N * V - 1 ? DT_NOBODY : (s + 1) % N;
  return v == 0 ? DT_NOBODY : (s + N - 1) % N;
}

/* END(q, a): the slot at whose end stage q's forward or backward a is done */
#define END(q, a) end[(q)*2 * MV + ((a)->type == 'B') * MV + (a)->chunk * M + (a)->mb]

int pp_lockstep(int N, int s, int64_t M, int V, action *all, int per, int T, action *plan,
                pp_event *ev) {
  int64_t MV = M * V, n = per;
  int *end = dt_host_alloc((size_t)(N * 2 * MV), sizeof *end); /* [stage][type][chunk][mb] */
  for (int q = 0; q < N; q++)
    for (action *a = all + q * per; a < all + (q + 1) * per; a++)
      if (a->type != 'W') END(q, a) = a->at + 1;
  /* stage s's exchanges, boundary by boundary: the forward ring, then the backward one */
  action *mine = all + s * per;
  int k = 0, pos = 0;
  for (int b = 1; b <= T; b++) {
    while (pos < n && mine[pos].at < b) pos++;
    for (int ring = 0; ring < 2; ring++) {
      char type = ring ? 'B' : 'F';
      pp_event e = {pos, DT_NOBODY, DT_NOBODY, {0}, {0}};
      for (int i = 0; i < n; i++) {
        action from;
        if (mine[i].type != type) continue;
        int src = source(N, s, V, &mine[i], &from);
        if (mine[i].at + 1 == b && sink(N, s, V, &mine[i]) != DT_NOBODY) {
          e.dst = sink(N, s, V, &mine[i]);
          e.out = mine[i];
        }
        if (src != DT_NOBODY && END(src, &from) == b) {
          e.src = src;
          e.in = mine[i];
          mine[i].parked = type == 'B' && i != pos; /* another action runs first */
        }
      }
      if (e.dst != DT_NOBODY || e.src != DT_NOBODY) ev[k++] = e;
    }
  }
  for (int i = 0; i < n; i++) plan[i] = mine[i];
  free(end);
  return k;
}

int pp_events(int N, int s, int64_t M, int V, action *plan, pp_event *ev, int *T) {
  int64_t MV = M * V, per = 2 * MV; /* actions a stage */
  action *all = dt_host_alloc((size_t)(N * per), sizeof *all);
  int *end = dt_host_alloc((size_t)(N * per), sizeof *end);
  int *next = dt_host_alloc((size_t)(2 * N), sizeof *next), *free_at = next + N;
  for (int q = 0; q < N; q++) pp_plan_v(N, q, M, V, all + q * per);
  for (int64_t i = 0; i < N * per; i++) end[i] = -1;
  int left = (int)(N * per), moved = 1;
  *T = 0;
  while (left && moved) { /* each stage on as far as its inputs are made */
    moved = 0;
    for (int q = 0; q < N; q++)
      while (next[q] < per) {
        action *a = all + q * per + next[q], from;
        int src = source(N, q, V, a, &from), t = free_at[q];
        if (src != DT_NOBODY && END(src, &from) < 0) break;
        if (src != DT_NOBODY && END(src, &from) > t) t = END(src, &from);
        a->at = t;
        END(q, a) = free_at[q] = t + 1;
        *T = t + 1 > *T ? t + 1 : *T;
        next[q]++;
        left--;
        moved = 1;
      }
  }
  if (left) /* an order where some stage waits on an input made after its own wait */
    dt_fail("interleaved plan: %d actions never get their input: the stages' orders (nth) wait "
            "on each other",
            left);
  int k = pp_lockstep(N, s, M, V, all, (int)per, *T, plan, ev);
  free(all);
  free(end);
  free(next);
  return k;
}
#undef END
