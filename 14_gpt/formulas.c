/* formulas.c: 14_gpt's printed formulas, pure (formulas.h). */
#include "formulas.h"

#include "09_pp/formulas.h"
#include "09_pp/schedule.h"
#include "train.h"

/* calls of an all-reduce of `floats` over T ranks, and the bytes one rank
 * sends (the ring's 2(T-1)/T, in the counters' integer arithmetic), E
 * bytes an element */
static mesh_flow all_reduce(int64_t calls, int64_t floats, int64_t T, int64_t E) {
  return (mesh_flow){T > 1 ? calls : 0, T > 1 ? calls * (2 * (T - 1) * floats * E / T) : 0};
}

void gpt_classes(const gpt_share *x, int64_t at[4]) {
  at[0] = 0;
  at[1] = x->L * (4 * x->D * x->W + 2 * x->D * x->Hs);
  at[2] = at[1] + (x->first || x->last) * x->Vs * x->D;
  at[3] = at[2] + (2 * x->L + x->last) * x->D + x->first * x->S * x->D;
}

gpt_share gpt_share_sized(const gpt_sizes *z) {
  int64_t T = z->n[TP], G = z->n[DP] * z->n[CP];
  gpt_share x = {.n = z->n,
                 .s = z->s,
                 .L = z->L,
                 .M = z->M,
                 .R = z->R,
                 .Rs = z->sp ? z->R / T : z->R,
                 .D = z->D,
                 .W = z->D / T,
                 .A = z->heads / T,
                 .Hs = z->H / T,
                 .C = z->C,
                 .Vs = z->V / T,
                 .S = z->S,
                 .first = z->s == 0,
                 .last = z->s == z->n[PP] - 1,
                 .sp = z->sp};
  int64_t at[4];
  gpt_classes(&x, at);
  x.nw = at[3];
  x.shard = z->zero ? (x.nw + G - 1) / G : 0; /* 06's padded shard */
  int64_t lo = z->zero ? z->dc * x.shard : 0, hi = z->zero ? lo + x.shard : x.nw;
  x.own = (hi < x.nw ? hi : x.nw) - (lo < x.nw ? lo : x.nw);
  return x;
}

gpt_traffic gpt_traffic_of(const gpt_share *x) {
  int64_t T = x->n[TP], C = x->n[CP], P = x->n[PP], G = x->n[DP] * x->n[CP];
  int64_t L = x->L, M = x->M, R = x->R, D = x->D, E = x->wire16 ? 2 : 4; /* bytes an element */
  gpt_traffic t = {0};
  /* per microbatch: after Wo and W2, their mirrors in backward, again for
   * --recompute; the embedding's lookup, the head's backward */
  int64_t per = (4 + 2 * x->recompute) * L + x->first + x->last;
  if (!x->sp) t.activ = all_reduce(M * per, R * D, T, E);
  if (x->sp && T > 1) { /* each all-reduce a reduce-scatter and an all-gather, of Rs rows */
    t.gather = t.scatter = (mesh_flow){M * per, M * per * (T - 1) * x->Rs * D * E};
    t.gains = all_reduce(1, (2 * L + x->last) * D, T, E);
  }
  if (x->last) { /* the loss's pieces: fp32 in any --precision */
    t.max = all_reduce(M, R, T, 4);
    t.sums = all_reduce(M, 2 * R, T, 4);
  }
  int64_t hops = C > 1 ? L * M * (3 * C - 2 + x->recompute * (C - 1)) : 0;
  t.cp = (mesh_flow){hops, hops * 2 * R * x->W * E};
  int64_t V =
      x->chunks > 1 ? x->chunks : 1; /* each microbatch crosses V of the stage's boundaries a way */
  t.pp = (mesh_flow){V > 1 || x->zb ? 0 : pp_exchanges((int)P, (int)x->s, M, x->gpipe),
                     P > 1 ? M * (2 * V - (x->s + 1 == P) - (x->s == 0)) * x->Rs * D * E : 0};
  if (!x->shard) {
    t.grads = all_reduce(1, x->nw, G, E);
  } else if (G > 1) { /* as 06 --zero 1, the rank's buffer one layer */
    t.grads = (mesh_flow){1, 2 * (G - 1) * x->shard * E};
    t.params = (mesh_flow){1, (G - 1) * x->shard * E};
  }
  if (P > 1 && (x->first || x->last)) t.emb = all_reduce(1, x->Vs * D, 2, E);
  return t;
}

int64_t gpt_per_layer(const gpt_share *x) {
  int64_t R = x->R, Rs = x->Rs, D = x->D;
  return 4 * Rs + 2 * R * D + 4 * R * x->W + R * x->A + 2 * Rs * D + 2 * R * x->Hs;
}

int64_t gpt_kept(const gpt_share *x) {
  return x->zb * x->L * (2 * x->R * x->D + x->R * x->Hs + 3 * x->R * x->W);
}

int64_t gpt_slot(const gpt_share *x) {
  int64_t R = x->R, Rs = x->Rs, D = x->D, head = 2 * Rs + R * D + R * x->Vs + 3 * R;
  int64_t Lc = x->chunks > 1 ? x->L / x->chunks : x->L; /* a slot holds a chunk's layers */
  return Rs * D + Lc * (x->recompute ? Rs * D : gpt_per_layer(x)) + x->last * head + gpt_kept(x);
}

void gpt_memory(const gpt_share *x, int64_t *mem) {
  int64_t R = x->R, Rs = x->Rs, D = x->D, W = x->W, G = x->n[DP] * x->n[CP];
  int64_t live = x->chunks > 1 ? pp_live_v((int)x->n[PP], (int)x->s, x->M, (int)x->chunks)
                 : x->zb       ? pp_live_zb((int)x->n[PP], x->M) /* each held until its W */
                               : pp_live((int)x->n[PP], (int)x->s, x->M, x->gpipe);
  int64_t scratch = 2 * Rs * D + x->sp * (Rs * D + 2 * R * D) + R * D + R * x->Hs + 4 * R * W +
                    x->last * R * x->Vs + x->recompute * (gpt_per_layer(x) - Rs * D) +
                    x->C * (W + x->A) + R * x->A;
  mem[DT_PARAMS] = mem[DT_GRADS] = 4 * (x->shard ? G * x->shard : x->nw);
  mem[DT_OPTIM] = x->adamw ? 8 * x->own : 0;
  /* 16 bits: the ring's blocks as floats (its wires in flight); the copies
   * of the rows (R + Rs, gathered or scattered), of the gradients (all of
   * them over dp x cp, else the larger of wte's rows between two stages and
   * the gains over tp), of 06's wire and a gathered layer with --zero 1 */
  int64_t T = x->n[TP], P = x->n[PP], travels = T > 1 || P > 1 || x->sp;
  int64_t ends = P > 1 && (x->first || x->last) ? x->Vs * D : 0;
  int64_t gains = x->sp && T > 1 ? (2 * x->L + x->last) * D : 0;
  int64_t grads = !x->shard && G > 1 ? x->nw : ends > gains ? ends : gains;
  int64_t copies = travels * (R + Rs) * D + grads + (x->shard ? 2 * G * x->shard : 0);
  mem[DT_ACTIV] = 4 * (live * gpt_slot(x) + scratch + x->wire16 * 4 * R * W);
  mem[DT_COMMBUF] = 8 * R * W * (x->wire16 ? 2 : 4) + x->wire16 * 2 * copies;
  mem[DT_DATA] = (x->first + x->last) * x->M * R * 4;
}

double gpt_model_flops(int64_t L, int64_t D, int64_t H, int64_t V, int64_t S, int64_t B) {
  double N = (double)V * D + (double)L * (2 * D + 4 * D * D + 2 * D * H) + (double)D;
  return (6 * N + 12.0 * (double)(L * D * S)) * (double)(B * S);
}

double gpt_recompute_flops(int64_t L, int64_t D, int64_t H, int64_t S, int64_t B) {
  return (2.0 * (double)(4 * D * D + 2 * D * H) + 4.0 * (double)(D * S)) * (double)(L * B * S);
}
