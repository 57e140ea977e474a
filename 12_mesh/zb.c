/* zb.c: a layer's backward split as ZB-H1 splits it (09's zb.h), for 12's
 * transformer layer (mesh.h). B carries the gradient from the layer's
 * output x' to its input x, through the MLP (07's, its input's sum over
 * tp), Wo and cp's ring (11's), and keeps what the weights' gradients need:
 * the output's gradient dy and u's du [R,D], the ring's dq, dk, dv 3[R,W]
 * (after the chunk's layers in the slot), ReLU's da in a's place. W, later,
 * adds the six weight gradients from them, complete on this rank. */
#include "mesh.h"

typedef struct {
  float *dy, *du, *dqkv;
} kept;

static kept kept_of(const model *m, float *slot, int64_t l) {
  int64_t RD = m->R * m->D, n = 2 * RD + 3 * m->R * m->W;         /* floats a layer keeps */
  float *at = slot + mesh_out(m) + RD + 2 * m->R * m->Hs + l * n; /* after the last x', a, h */
  return (kept){at, at + RD, at + 2 * RD};
}

void mesh_zb_input(model *m, float *slot, int64_t l) {
  int64_t R = m->R, D = m->D, W = m->W, Hs = m->Hs, RW = R * W;
  layer_acts p = mesh_acts(m, slot, l);
  layer_weights w = mesh_weights(m, m->w, l);
  kept k = kept_of(m, slot, l);
  dt_copy(k.dy, m->dx, (size_t)(R * D) * 4);
  dt_matmul(0, 1, R, Hs, D, k.dy, w.w2, m->dh, 0);     /* dh = dy W2^T */
  dt_relu_backward(p.a, m->dh, p.a, (size_t)(R * Hs)); /* da, in a's place */
  dt_matmul(0, 1, R, D, Hs, p.a, w.w1, k.du, 0);       /* du = da W1^T, partial */
  tp_sum(m->axis[TP], &m->wire, k.du, (size_t)(R * D));
  dt_add(k.du, k.dy, (size_t)(R * D));              /* the MLP's residual */
  dt_matmul(0, 1, R, W, D, k.du, w.wo, m->dout, 0); /* do = du Wo^T */
  cp_ring_backward(&m->cr, p.q, p.k, p.v, p.o, p.lse, m->dout, k.dqkv);
  float *wi[3] = {w.wq, w.wk, w.wv};
  for (int i = 0; i < 3; i++) /* dx = sum of dq, dk, dv back through Wq, Wk, Wv */
    dt_matmul(0, 1, R, D, W, k.dqkv + i * RW, wi[i], m->dx, i > 0);
  tp_sum(m->axis[TP], &m->wire, m->dx, (size_t)(R * D));
  dt_add(m->dx, k.du, (size_t)(R * D)); /* the attention's residual */
}

void mesh_zb_weights(model *m, float *slot, int64_t l) {
  int64_t R = m->R, D = m->D, W = m->W, Hs = m->Hs, RW = R * W;
  layer_acts p = mesh_acts(m, slot, l);
  layer_weights g = mesh_weights(m, m->g, l);
  kept k = kept_of(m, slot, l);
  dt_matmul(1, 0, Hs, D, R, p.h, k.dy, g.w2, 1); /* dW2 += h^T dy */
  dt_matmul(1, 0, D, Hs, R, p.u, p.a, g.w1, 1);  /* dW1 += u^T da */
  dt_matmul(1, 0, W, D, R, p.o, k.du, g.wo, 1);  /* dWo += o^T du */
  float *gi[3] = {g.wq, g.wk, g.wv};
  for (int i = 0; i < 3; i++) dt_matmul(1, 0, D, W, R, p.x, k.dqkv + i * RW, gi[i], 1);
}
