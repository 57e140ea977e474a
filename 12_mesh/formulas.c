/* formulas.c: 12_mesh's printed formulas, pure (formulas.h). */
#include "formulas.h"

#include "09_pp/formulas.h"
#include "09_pp/schedule.h"
#include "train.h"

mesh_traffic mesh_traffic_of(const mesh_share *x) {
  int64_t T = x->n[TP], C = x->n[CP], P = x->n[PP], G = x->n[DP] * x->n[CP];
  int64_t E = x->wire16 ? 2 : 4, RDE = x->R * x->D * E, L = x->L, M = x->M; /* bytes an element */
  mesh_traffic t = {{0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}};
  t.tp.calls = T > 1 ? 4 * L * M : 0; /* after Wo and W2, their mirrors in backward */
  t.tp.bytes = t.tp.calls * (2 * (T - 1) * RDE / T);
  t.cp.calls = C > 1 ? L * M * (3 * C - 2) : 0; /* (cp-1) hops forward, (cp-1) + cp backward */
  t.cp.bytes = t.cp.calls * 2 * x->R * x->W * E;
  int64_t V = x->V > 1 ? x->V : 1; /* each microbatch crosses V of the stage's boundaries a way */
  t.pp.calls = V > 1 || x->zb ? 0 : pp_exchanges((int)P, (int)x->s, M, x->gpipe);
  t.pp.bytes = P > 1 ? M * (2 * V - (x->s + 1 == P) - (x->s == 0)) * RDE : 0;
  if (!x->shard) {
    t.grads = (mesh_flow){G > 1, G > 1 ? 2 * (G - 1) * L * x->n_layer * E / G : 0};
  } else { /* as 06 --zero 1 over dp x cp */
    t.grads = (mesh_flow){L, 2 * L * (G - 1) * x->shard * E};
    t.params = (mesh_flow){L, L * (G - 1) * x->shard * E};
  }
  return t;
}

void mesh_memory(const mesh_share *x, int64_t *mem) {
  int64_t R = x->R, D = x->D, W = x->W, A = x->A, Hs = x->Hs, C = x->C, L = x->L, M = x->M;
  int64_t G = x->n[DP] * x->n[CP], P = x->n[PP], ends = x->s == 0 || x->s == P - 1;
  int64_t V = x->V > 1 ? x->V : 1, Lc = L / V; /* a slot holds a chunk's Lc layers */
  int64_t live = V > 1   ? pp_live_v((int)P, (int)x->s, M, (int)V)
                 : x->zb ? pp_live_zb((int)P, M) /* each held until its W */
                         : pp_live((int)P, (int)x->s, M, x->gpipe);
  int64_t slot = R * D + Lc * (4 * R * W + R * A + 2 * R * D + 2 * R * Hs) +
                 x->zb * Lc * (2 * R * D + 3 * R * W); /* dy, du, dq dk dv: B's for W */
  int64_t scratch = 2 * R * D + R * Hs + 4 * R * W + C * W + C * A + R * A;
  /* 16 bits: the ring's blocks as floats, [K|V] and [dK|dV] (its wires in
   * flight); the copies of tp's and pp's [R,D] (out and in) and of the
   * gradients (dp x cp), or 06's of a layer's G shards: its wire and a
   * gathered layer */
  int64_t E = x->wire16 ? 2 : 4, travels = x->n[TP] > 1 || P > 1;
  int64_t copies = travels * 2 * R * D + (x->shard ? 2 * G * x->shard : (G > 1) * L * x->n_layer);
  mem[DT_PARAMS] = mem[DT_GRADS] = 4 * L * (x->shard ? G * x->shard : x->n_layer);
  mem[DT_OPTIM] = (x->adamw ? 8 : 0) * L * (x->shard ? x->shard : x->n_layer);
  mem[DT_ACTIV] = 4 * (live * slot + scratch + x->wire16 * 4 * R * W);
  mem[DT_COMMBUF] = 8 * R * W * E + x->wire16 * copies * 2;
  mem[DT_DATA] = ends * 2 * M * R * D * 4;
}
