/* layer.c: one block of the GPT on this rank (gpt.h), composed as 12
 * composes 11's: the LayerNorms on this rank's rows of the stream,
 * gathered for the column-parallel products and the row-parallel ones
 * summed over tp (sequence.c), attention as 11's ring over cp on this tp
 * rank's heads, the MLP from common/train's pieces. Nothing here is new in
 * 14; it sits apart from gpt.c so that recompute.c, which runs it twice,
 * and gpt.c's walk both call it without calling each other in a circle. */
#include "gpt.h"

/* Layer l: x2 = x + Attn(LN1(x)) Wo, out = x2 + gelu(LN2(x2) W1) W2. The
 * LayerNorms on this rank's rows of the stream, gathered for the
 * column-parallel products (sequence.c), the row-parallel ones summed over
 * tp (07's g); attention is 11's ring over cp on this tp rank's heads. */
void gpt_forward_core(model *m, layer_acts p, int64_t l) {
  int64_t R = m->R, Rs = m->Rs, D = m->D, W = m->W;
  dt_gpt_block w = gpt_layer(m, m->w, l);
  dt_gpt_shape s = gpt_shape(m);
  dt_layernorm_forward(p.x, w.ln1, p.h1 + m->mine * D, p.mean1, p.rstd1, Rs, D);
  gpt_gather(m, p.h1 + m->mine * D, p.h1);
  dt_matmul(0, 0, R, W, D, p.h1, w.wq, p.q, 0);
  dt_matmul(0, 0, R, W, D, p.h1, w.wk, p.k, 0);
  dt_matmul(0, 0, R, W, D, p.h1, w.wv, p.v, 0);
  cp_ring_forward(&m->cr, p.q, p.k, p.v, p.o, p.lse);
  float *part = gpt_partial(m, p.x2);
  dt_matmul(0, 0, R, D, W, p.o, w.wo, part, 0); /* this rank's heads' share */
  gpt_reduce(m, part, p.x2);
  dt_add(p.x2, p.x, (size_t)(Rs * D)); /* the residual, once */
  dt_layernorm_forward(p.x2, w.ln2, p.h2 + m->mine * D, p.mean2, p.rstd2, Rs, D);
  gpt_gather(m, p.h2 + m->mine * D, p.h2);
  dt_gpt_mlp_forward(&s, &w, p.h2, p.a, p.u, NULL, part = gpt_partial(m, p.out));
  gpt_reduce(m, part, p.out);
  dt_add(p.out, p.x2, (size_t)(Rs * D));
}

/* The mirror, from m->dx = dL/dout to dL/dx in place: the weights'
 * gradients added to g; the LayerNorms' input gradients summed over tp. */
void gpt_backward_core(model *m, layer_acts p, int64_t l) {
  int64_t R = m->R, Rs = m->Rs, D = m->D, W = m->W, RW = R * W;
  dt_gpt_block w = gpt_layer(m, m->w, l), g = gpt_layer(m, m->g, l);
  dt_gpt_shape s = gpt_shape(m);
  float *d = gpt_gather(m, m->dx, m->dfull); /* dL/dout, every row */
  dt_gpt_mlp_backward(&s, &w, &g, p.h2, p.a, p.u, d, m->du, m->dh);
  float *dh = gpt_reduce(m, m->dh, m->dn);
  dt_layernorm_backward(p.x2, w.ln2, dh, p.mean2, p.rstd2, m->dx, g.ln2, Rs, D, 1); /* dL/dx2 */
  d = gpt_gather(m, m->dx, m->dfull);
  dt_matmul(1, 0, W, D, R, p.o, d, g.wo, 1);     /* dWo += o^T d */
  dt_matmul(0, 1, R, W, D, d, w.wo, m->dout, 0); /* do = d Wo^T */
  cp_ring_backward(&m->cr, p.q, p.k, p.v, p.o, p.lse, m->dout, m->dqkv);
  float *wi[3] = {w.wq, w.wk, w.wv}, *gi[3] = {g.wq, g.wk, g.wv};
  for (int i = 0; i < 3; i++) { /* dq, dk, dv back through Wq, Wk, Wv */
    dt_matmul(1, 0, D, W, R, p.h1, m->dqkv + i * RW, gi[i], 1);
    dt_matmul(0, 1, R, D, W, m->dqkv + i * RW, wi[i], m->dh, i > 0);
  }
  dh = gpt_reduce(m, m->dh, m->dn);
  dt_layernorm_backward(p.x, w.ln1, dh, p.mean1, p.rstd1, m->dx, g.ln1, Rs, D, 1); /* dL/dx */
}
