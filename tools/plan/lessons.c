/* lessons.c: lessons 05, 06 and 09 (common/train's residual MLP blocks) as
 * the cost model's table (13_plan/kinds.h) takes them: each formula called
 * from the lesson's own formulas file (05_dp, 06_fsdp, 09_pp's
 * formulas.c), each operation as the lesson's code calls it; the
 * optimizer's tail of 05-12. */
#include <stdlib.h>

#include "05_dp/formulas.h"
#include "06_fsdp/formulas.h"
#include "09_pp/formulas.h"
#include "09_pp/plans.h"
#include "lessons.h"

static int64_t up(int64_t a, int64_t b) { return (a + b - 1) / b; }

static double mlp_params(const model *m) { return (double)(m->L * 2 * m->D * m->H); }

static void mlp_traffic(const model *m, const mesh *x, int64_t s, traffic t[NCOMM][NCOLL]) {
  int64_t P = x->n[PP], G = x->n[DP] * x->n[CP], L = stage_layers(m, x, s), D = m->D, H = m->H;
  int64_t es = x->bf16 ? 2 : 4;
  if (m->kind == DP05) { /* one all-reduce per tensor, each rounded down (05_dp/formulas.c) */
    size_t *counts = dt_host_alloc((size_t)(2 * L), sizeof *counts);
    for (int64_t i = 0; i < 2 * L; i++) counts[i] = (size_t)(D * H);
    int rounded;
    t[DC][AR] = (traffic){
        2 * L, (int64_t)dp_ring_bytes(counts, (int)(2 * L), (uint64_t)G, (uint64_t)es, &rounded)};
    free(counts);
  } else if (m->kind == FSDP06) { /* the gathers and scatters of shards of S = 2DH/N */
    int64_t calls[FSDP_KINDS], bytes[FSDP_KINDS];
    fsdp_traffic(L, G, up(2 * D * H, G), es, x->zero, 1, 1, calls, bytes);
    t[DC][AG] = (traffic){calls[FSDP_GATHER], bytes[FSDP_GATHER]};
    t[DC][RS] = (traffic){calls[FSDP_SCATTER], bytes[FSDP_SCATTER]};
    t[DC][AR] = (traffic){calls[FSDP_REDUCE], bytes[FSDP_REDUCE]};
  } else { /* 09: a stage's activations forward, gradients back (09_pp/formulas.c) */
    int64_t V = x->V > 1 ? x->V : 1; /* the calls are the plan's (09_pp/plans.c) */
    t[PP][P2P] = (traffic){pp_plan_count((int)P, (int)s, x->M, (int)V, x->gpipe, x->zb).nev,
                           pp_bytes_v((int)P, (int)s, m->B, D, es, V)};
  }
}

static void mlp_memory(const model *m, const mesh *x, int64_t s, int64_t mem[DT_NTAGS]) {
  int64_t P = x->n[PP], G = x->n[DP] * x->n[CP], L = stage_layers(m, x, s), D = m->D, H = m->H;
  int64_t R = rows_per_micro(m, x);
  if (m->kind == DP05) dp_memory(L, D, H, R, x->adamw, 0, mem);
  if (m->kind == FSDP06) /* the shards, and what is whole at the worst moment */
    fsdp_memory(L, G, up(2 * D * H, G), D, H, R, x->zero, 0, x->adamw, 0, mem);
  int sched[3] = {(int)(x->V > 1 ? x->V : 1), x->gpipe, x->zb}; /* 09's schedule */
  if (m->kind == PP09) pp_memory((int)P, (int)s, L, x->M, R, m->B, D, H, sched, x->adamw, mem);
}

/* 05-09's residual MLP blocks (common/train/model.c): 2 products each way */
static void mlp_ops(op_list *l, const model *m, const mesh *x, int64_t s, int64_t c) {
  (void)c;
  int64_t R = rows_per_micro(m, x), D = m->D, H = m->H, L = stage_layers(m, x, s), P = x->n[PP];
  double per = (double)(x->M * L);
  l->per_micro = 1;
  add(l, MLP_F, R, D, H, 1, 0, per, 4.0 * (double)(R * D * H),
      4.0 * (double)(2 * R * D + 2 * D * H + 2 * R * H));
  if (s == 0 && P > 1) ew(l, R * D, 2, (double)x->M, 4);
  l->backward = 1;
  if (!x->zb)
    add(l, MLP_B, R, D, H, 1, 0, per, 8.0 * (double)(R * D * H),
        4.0 * (double)(3 * R * D + 4 * D * H + 3 * R * H));
  if (x->zb) { /* ZB-H1's B and W apart (09_pp/zb.c): dy kept, each layer's residual a copy */
    ew(l, R * D, 2, (double)x->M, 4);
    zb_mlp_ops(l, R, D, H, per);
    ew(l, R * D, 2, per, 4);
  }
  parked_ops(l, x, s, R * D);
  if (s == P - 1)
    add(l, LOSS, R * D, 0, 0, 0, 0, (double)x->M, 3.0 * (double)(R * D), 12.0 * (double)(R * D));
  l->per_micro = l->backward = 0;
  int64_t rows = m->kind == PP09 ? m->B : R; /* 09 makes the whole batch on its end stages */
  if (s == 0 || s == P - 1) add(l, DATA05, rows, D, 0, 0, 0, 1, 0, 8.0 * (double)(rows * D));
  optimizer_ops(l, m, x, s);
}

const kind_fns mlp_kind = {
    .params = mlp_params, .traffic = mlp_traffic, .memory = mlp_memory, .ops = mlp_ops};

/* ZB-H1's split of a block's MLP backward (09_pp/zb.c, 12_mesh/zb.c), per
 * layer and microbatch: B's dh = dy W2^T, ReLU's gradient, dx = da W1^T;
 * W's dW2 += h^T dy and dW1 += x^T da */
void zb_mlp_ops(op_list *l, int64_t R, int64_t D, int64_t H, double per) {
  gemm(l, R, H, D, 0, 1, per, 4);
  add(l, RELU_B, R * H, 0, 0, 0, 0, per, (double)(R * H), 12.0 * (double)(R * H));
  gemm(l, R, D, H, 0, 1, per, 4);
  gemm(l, H, D, R, 1, 0, per, 4);
  gemm(l, D, H, R, 1, 0, per, 4);
}

/* 09's walk (09_pp/stage.c): a backward whose gradient arrived before it
 * ran waited in its slot and is copied out, n floats, as its plan parks it */
void parked_ops(op_list *l, const mesh *x, int64_t s, int64_t n) {
  int P = (int)x->n[PP], V = (int)(x->V > 1 ? x->V : 1);
  if (P > 1) ew(l, n, 2, pp_plan_count(P, (int)s, x->M, V, x->gpipe, x->zb).parked, 4);
}

/* n weights stepped, count calls: SGD reads w and g and writes w, AdamW
 * reads m and v too and writes them */
static void optimizer(op_list *l, int adamw, int64_t n, double count) {
  double f = (double)n;
  add(l, adamw ? ADAMW : SGD, n, 0, 0, 0, 0, count, 12.0 * f, (adamw ? 28.0 : 12.0) * f);
}

void optimizer_ops(op_list *l, const model *m, const mesh *x, int64_t s) {
  int64_t G = x->n[DP] * x->n[CP], T = x->n[TP], L = stage_layers(m, x, s);
  int64_t n = m->kind == MESH12 ? 4 * m->D * (m->D / T) + 2 * m->D * (m->H / T)
              : m->kind == CP11 ? 4 * m->D * m->D + 2 * m->D * m->H
                                : 2 * m->D * m->H;
  int64_t shard = up(n, G), stepped = L * (m->kind == FSDP06 || x->zero ? shard : n);
  if (m->kind != FSDP06 || x->zero == 1)
    ew(l, L * (x->zero ? G * shard : n), 1, 1, 4); /* g zeroed */
  if (m->kind == FSDP06 && x->zero >= 2) /* 06's transient layers: gradients (2, 3), params (3) */
    add(l, ALLOC, G * shard, 0, 0, 0, 0, (double)(L * (x->zero == 3 ? 3 : 1)), 0,
        4.0 * (double)(G * shard));
  /* the gradients are averaged: MPI sums, then the comm layer scales the
   * result by 1/G (dt_finish_avg), a pass over each call's buffer */
  int64_t avg = m->kind == DP05                ? m->D * m->H
                : x->zero || m->kind == FSDP06 ? (x->zero == 1 ? G * shard : shard)
                                               : L * n;
  double calls = m->kind == DP05 ? 2.0 * (double)L : x->zero || m->kind == FSDP06 ? (double)L : 1;
  if (G > 1) ew_scale(l, avg, calls, 4);
  /* one call a segment: 06 below ZeRO 3 and 12 with ZeRO step each layer's shard apart */
  int64_t calls_opt = (m->kind == FSDP06 && x->zero < 3) || (m->kind == MESH12 && x->zero) ? L : 1;
  int64_t each = stepped / calls_opt;
  optimizer(l, x->adamw, each, (double)calls_opt);
}

/* The optimizer's calls on [a, b) of the rank's buffer (common/train/
 * model.c's dt_optimizer_step): AdamW in runs, each gain of [g0, g1) (D
 * floats a tensor) a plain run of its own without decay */
void step_segment(op_list *l, int adamw, int64_t a, int64_t b, int64_t g0, int64_t g1, int64_t D) {
  int64_t at = a;
  for (int64_t g = g0; adamw && g < g1; g += D) {
    int64_t lo = g > a ? g : a, hi = g + D < b ? g + D : b;
    if (hi <= lo) continue;
    if (lo > at) optimizer(l, 1, lo - at, 1);
    optimizer(l, 1, hi - lo, 1);
    at = hi;
  }
  if (b > at) optimizer(l, adamw, b - at, 1);
}
