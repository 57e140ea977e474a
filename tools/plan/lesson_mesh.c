/* lesson_mesh.c: lessons 11 and 12 (the transformer on cp's ring, and on
 * the mesh) as the cost model's table (13_plan/kinds.h) takes them: 11's
 * formulas called from 11_cp/formulas.c, 12's from 12_mesh/formulas.c on
 * the rank's share as 12_mesh/buffers.c sizes it, each operation as
 * 12_mesh/mesh.c and 11_cp/cp.c call it. */
#include "11_cp/formulas.h"
#include "12_mesh/formulas.h"
#include "13_plan/block.h"
#include "lessons.h"

static int64_t up(int64_t a, int64_t b) { return (a + b - 1) / b; }

static double transformer_params(const model *m) { /* dt_params_per_layer: 4D^2 + 2DH */
  return (double)(m->L * (4 * m->D * m->D + 2 * m->D * m->H));
}

/* Stage s of a mesh12 model as 12's formulas take a rank's share */
static mesh_share mesh_share_of(const model *m, const mesh *x, int64_t s) {
  int64_t T = x->n[TP], C = x->n[CP], G = x->n[DP] * x->n[CP], D = m->D, W = D / T;
  int64_t n = 4 * D * W + 2 * D * (m->H / T);
  return (mesh_share){.n = x->n,
                      .s = s,
                      .L = stage_layers(m, x, s),
                      .M = x->M,
                      .R = rows_per_micro(m, x),
                      .D = D,
                      .W = W,
                      .A = m->A / T,
                      .Hs = m->H / T,
                      .C = m->S / (C * (x->zigzag ? 2 : 1)),
                      .n_layer = n,
                      .shard = x->zero ? up(n, G) : 0,
                      .gpipe = x->gpipe,
                      .V = x->V,
                      .zb = x->zb,
                      .adamw = x->adamw};
}

static void transformer_traffic(const model *m, const mesh *x, int64_t s, traffic t[NCOMM][NCOLL]) {
  if (m->kind == MESH12) { /* 12_mesh/formulas.c */
    mesh_share sh = mesh_share_of(m, x, s);
    mesh_traffic f = mesh_traffic_of(&sh);
    t[TP][AR] = (traffic){f.tp.calls, f.tp.bytes};
    t[CP][P2P] = (traffic){f.cp.calls, f.cp.bytes};
    t[PP][P2P] = (traffic){f.pp.calls, f.pp.bytes};
    if (x->V > 1 || x->zb) /* 12 walks 09's interleaved or ZB-H1 plan: its exchanges */
      t[PP][P2P].calls = block_exchanges(x, s); /* 13_plan/block.c: 09's plans.c */
    t[DC][AR] = (traffic){f.grads.calls, f.grads.bytes};
    if (x->zero) t[DC][AG] = (traffic){f.params.calls, f.params.bytes};
    return;
  }
  /* 11: the ring's hops and the gradients' all-reduce (11_cp/formulas.c) */
  int64_t L = stage_layers(m, x, s), D = m->D, C = x->n[CP], want[2];
  int64_t hops = cp_attention_bytes(L, C, rows_per_micro(m, x), D, 4, 0, want);
  t[CP][P2P] = (traffic){hops, want[0] + want[1]};
  t[DC][AR] = (traffic){1, cp_gradient_bytes(C, L * (4 * D * D + 2 * D * m->H), 4)};
}

static void transformer_memory(const model *m, const mesh *x, int64_t s, int64_t mem[DT_NTAGS]) {
  if (m->kind == MESH12) {
    mesh_share sh = mesh_share_of(m, x, s);
    mesh_memory(&sh, mem);
    return;
  }
  /* 11_cp/formulas.c: C here the tokens of a chunk */
  cp_memory(stage_layers(m, x, s), rows_per_micro(m, x), m->D, m->H, m->A,
            m->S / (x->n[CP] * (x->zigzag ? 2 : 1)), 0, 0, x->adamw, mem);
}

/* A layer's residual, each way: 12 adds it twice (dt_add, after attention
 * and after the MLP); 11 copies x where Wo's product accumulates, its MLP's
 * residual inside the block (one dt_copy) */
static void residual(op_list *l, int64_t n, int64_t copies, double per) {
  if (copies) ew(l, n, 2, per, 4);
  if (!copies) ew(l, n, 3, 2 * per, 4);
}

/* 11's and 12's transformer layer (tp = 1 for 11, whose MLP adds the residual itself) */
static void transformer_ops(op_list *l, const model *m, const mesh *x, int64_t s, int64_t c) {
  int64_t T = x->n[TP], R = rows_per_micro(m, x), D = m->D, W = D / T, Hs = m->H / T;
  int64_t L = stage_layers(m, x, s), res = m->kind == CP11, P = x->n[PP];
  double per = (double)(x->M * L);
  l->per_micro = 1;
  gemm(l, R, W, D, 0, 0, 3 * per, 4); /* q, k, v */
  ring_ops(l, m, x, s, c, 0);
  gemm(l, R, D, W, 0, 0, per, 4); /* o Wo */
  residual(l, R * D, res, per);   /* after attention and after the MLP */
  add(l, MLP_F, R, D, Hs, res, 0, per, 4.0 * (double)(R * D * Hs),
      4.0 * (double)(2 * R * D + 2 * D * Hs + 2 * R * Hs));
  if (s == 0 && !res) ew(l, R * D, 2, (double)x->M, 4); /* 12's microbatch into its slot */
  l->backward = 1;
  if (!x->zb)
    add(l, MLP_B, R, D, Hs, res, 0, per, 8.0 * (double)(R * D * Hs),
        4.0 * (double)(3 * R * D + 4 * D * Hs + 3 * R * Hs));
  if (x->zb) { /* 12_mesh/zb.c: B's dy kept, then the MLP's B and W apart */
    ew(l, R * D, 2, per, 4);
    zb_mlp_ops(l, R, D, Hs, per);
  }
  if (m->kind == MESH12) parked_ops(l, x, s, R * D);
  gemm(l, W, D, R, 1, 0, per, 4); /* dWo */
  gemm(l, R, W, D, 0, 1, per, 4); /* do */
  ring_ops(l, m, x, s, c, 1);
  gemm(l, D, W, R, 1, 0, 3 * per, 4); /* dWq, dWk, dWv */
  gemm(l, R, D, W, 0, 1, 3 * per, 4); /* their inputs' gradients */
  residual(l, R * D, res, per);
  if (s == P - 1)
    add(l, LOSS, R * D, 0, 0, 0, 0, (double)x->M, 3.0 * (double)(R * D), 12.0 * (double)(R * D));
  l->per_micro = l->backward = 0;
  if (s == 0 || s == P - 1 || res) /* cp's chunks of the step's sequences */
    add(l, DATA11, m->B / (x->n[DP] * x->M), m->S, x->n[CP], 2 * c + x->zigzag, D, (double)x->M, 0,
        8.0 * (double)(R * D));
  optimizer_ops(l, m, x, s);
}

const kind_fns transformer_kind = {.params = transformer_params,
                                   .traffic = transformer_traffic,
                                   .memory = transformer_memory,
                                   .ops = transformer_ops};
