/* layer.c: one block of the GPT on this rank (state.h), and the two flags
 * that reshape it. The block is composed as 12 composes 11's: the
 * LayerNorms on this rank's rows of the stream, gathered for the
 * column-parallel products and the row-parallel ones summed over tp,
 * attention as 11's ring over cp on this tp rank's heads, the MLP from
 * common/train's pieces. Nothing of the block is new in 14.
 *
 * --sequence-parallel, Megatron's sequence parallelism. Without it every
 * rank of a tensor group holds the whole residual stream, [R, D], and
 * computes the LayerNorms on every row alike; the row-parallel products
 * (after Wo, W2, the embedding, the head's backward) are summed by an
 * all-reduce (07's tp_sum). With it a rank holds Rs = R/tp rows of the
 * stream: its LayerNorms run on those rows, an all-gather gives the
 * column-parallel matmul (Wq|Wk|Wv, W1, the head) every row, and a
 * reduce-scatter in place of the all-reduce leaves each rank the sum of its
 * own rows. An all-reduce is a reduce-scatter and an all-gather: the bytes
 * are the same, the stream's memory is divided by tp. The gains then see
 * a rank's rows only, so their gradients are summed over tp once a step.
 * In 16 bits (--precision) each travels as a 16-bit copy, half the bytes.
 *
 * --recompute, full activation recomputation. A layer's forward keeps only
 * its output in the microbatch's slot (the input is the layer before's
 * output): everything in between, LayerNorms, q, k, v, the attention's
 * output and log-sum-exp, the MLP's a and u, goes to one layer's scratch,
 * shared by every layer and every microbatch. Backward runs the layer's
 * forward again from its input into that scratch (its tp sums and its ring
 * again, the same bits), then goes back through it. Memory: (L+1) rows of
 * the stream a microbatch instead of L layers of activations; compute: the
 * layers' forward once more. */
#include "state.h"

void gpt_check(const model *m, const dt_train_config *c) {
  int64_t T = m->mesh.n[TP], R = c->batch / (m->mesh.n[DP] * m->step.M) * (c->seq / m->mesh.n[CP]);
  if (m->step.sp && R % T != 0)
    dt_fail("--sequence-parallel: the %lld rows of a microbatch (B/(dp M) x S/cp) do not split "
            "over --tp %lld: each tp rank holds R/tp rows of the residual stream; choose --batch "
            "or --seq so that they do",
            (long long)R, (long long)T);
  if (m->step.zb && m->step.recompute)
    dt_fail("--schedule zb1 keeps each layer's activations until its W runs: not with "
            "--recompute, which keeps a layer's input alone");
}

float *gpt_gather(model *m, const float *own, float *full) {
  if (!m->step.sp) return (float *)own; /* every row is here already */
  size_t n = (size_t)(m->step.Rs * m->weights.D);
  void *in = dt_wire_pack(&m->step.wire, (float *)own, n, 0, 1);
  void *out = m->step.wire.type == DT_F32 ? (void *)full : (void *)(m->step.wire.buf + n);
  dt_all_gather(m->mesh.axis[TP], in, out, n, m->step.wire.type);
  dt_wire_unpack(&m->step.wire, full, (size_t)(m->step.R * m->weights.D), n);
  return full;
}

float *gpt_partial(const model *m, float *out) { return m->step.sp ? m->step.full : out; }

float *gpt_reduce(model *m, float *part, float *own) {
  if (!m->step.sp) {
    tp_sum(m->mesh.axis[TP], &m->step.wire, part, (size_t)(m->step.R * m->weights.D));
    return part;
  }
  size_t n = (size_t)(m->step.Rs * m->weights.D), RD = (size_t)(m->step.R * m->weights.D);
  void *in = dt_wire_pack(&m->step.wire, part, RD, 0, 1);
  void *out = m->step.wire.type == DT_F32 ? (void *)own : (void *)(m->step.wire.buf + RD);
  dt_reduce_scatter(m->mesh.axis[TP], in, out, n, m->step.wire.type, DT_SUM);
  dt_wire_unpack(&m->step.wire, own, n, RD);
  return own;
}

void gpt_sum_gains(model *m) {
  if (m->step.sp && m->mesh.n[TP] > 1)
    tp_sum(m->mesh.axis[TP], &m->weights.grads, gpt_gains(m, m->weights.g), (size_t)gpt_gains_n(m));
}

/* Layer l's activations of a microbatch: its input x and output out [Rs,
 * D] in the slot, and in between (the slot's, or with --recompute the one
 * layer's scratch): LN1's mean, rstd [Rs] and h1 [R,D] (gathered), q, k,
 * v, o [R,W], lse [R,A], x2 = x + attention [Rs,D], LN2's and h2, a, u
 * [R,Hs]; a layer's floats are formulas.c's gpt_per_layer. */
typedef struct {
  float *x, *mean1, *rstd1, *h1, *q, *k, *v, *o, *lse, *x2, *mean2, *rstd2, *h2, *a, *u, *out;
} layer_acts;

static layer_acts acts_of(const model *m, float *slot, int64_t l) {
  int64_t R = m->step.R, Rs = m->step.Rs, D = m->weights.D, RW = R * m->weights.W;
  float *at = m->step.recompute ? m->step.layer : slot + Rs * D + l * m->step.per_layer;
  layer_acts p = {.mean1 = at, .rstd1 = at + Rs};
  p.h1 = p.rstd1 + Rs;
  p.q = p.h1 + R * D;
  p.k = p.q + RW;
  p.v = p.k + RW;
  p.o = p.v + RW;
  p.lse = p.o + RW;
  p.x2 = p.lse + R * m->weights.A;
  p.mean2 = p.x2 + Rs * D;
  p.rstd2 = p.mean2 + Rs;
  p.h2 = p.rstd2 + Rs;
  p.a = p.h2 + R * D;
  p.u = p.a + R * m->weights.Hs;
  p.out = m->step.recompute ? slot + (l + 1) * Rs * D : p.u + R * m->weights.Hs;
  p.x = m->step.recompute ? slot + l * Rs * D
                          : slot + l * m->step.per_layer; /* x_0, or the last out */
  return p;
}

/* The layer's pieces (dt_gpt_mlp_*) see the R rows as one sequence: the
 * MLP's shape, this tp rank's A heads of W/A columns */
static dt_gpt_shape shape_of(const model *m) {
  return (dt_gpt_shape){
      1, m->step.R, m->weights.D, m->weights.A, m->weights.W / m->weights.A, m->weights.Hs};
}

/* Layer l's weights on this rank: ln1, ln2 [D] (whole: a tp replica); its
 * tp shard of Wq, Wk, Wv [D,W], Wo [W,D], W1 [D,Hs], W2 [Hs,D]; of m->weights.w,
 * or their gradients of m->weights.g */
static dt_gpt_block weights_of(const model *m, float *w, int64_t l) {
  int64_t DW = m->weights.D * m->weights.W;
  float *at = w + l * m->weights.nl, *gains = gpt_gains(m, w) + 2 * l * m->weights.D;
  return (dt_gpt_block){gains,       at,
                        at + DW,     at + 2 * DW,
                        at + 3 * DW, gains + m->weights.D,
                        at + 4 * DW, at + 4 * DW + m->weights.D * m->weights.Hs};
}

/* Layer l: x2 = x + Attn(LN1(x)) Wo, out = x2 + gelu(LN2(x2) W1) W2. The
 * LayerNorms on this rank's rows of the stream, gathered for the
 * column-parallel products, the row-parallel ones summed over tp (07's g;
 * with --sequence-parallel, scattered: above); attention is 11's ring
 * over cp on this tp rank's heads. */
static void forward(model *m, layer_acts p, int64_t l) {
  int64_t R = m->step.R, Rs = m->step.Rs, D = m->weights.D, W = m->weights.W;
  dt_gpt_block w = weights_of(m, m->weights.w, l);
  dt_gpt_shape s = shape_of(m);
  dt_layernorm_forward(p.x, w.ln1, p.h1 + m->step.mine * D, p.mean1, p.rstd1, Rs, D);
  gpt_gather(m, p.h1 + m->step.mine * D, p.h1);
  dt_matmul(0, 0, R, W, D, p.h1, w.wq, p.q, 0);
  dt_matmul(0, 0, R, W, D, p.h1, w.wk, p.k, 0);
  dt_matmul(0, 0, R, W, D, p.h1, w.wv, p.v, 0);
  cp_ring_forward(&m->step.cr, p.q, p.k, p.v, p.o, p.lse);
  float *part = gpt_partial(m, p.x2);
  dt_matmul(0, 0, R, D, W, p.o, w.wo, part, 0); /* this rank's heads' share */
  gpt_reduce(m, part, p.x2);
  dt_add(p.x2, p.x, (size_t)(Rs * D)); /* the residual, once */
  dt_layernorm_forward(p.x2, w.ln2, p.h2 + m->step.mine * D, p.mean2, p.rstd2, Rs, D);
  gpt_gather(m, p.h2 + m->step.mine * D, p.h2);
  dt_gpt_mlp_forward(&s, &w, p.h2, p.a, p.u, NULL, part = gpt_partial(m, p.out));
  gpt_reduce(m, part, p.out);
  dt_add(p.out, p.x2, (size_t)(Rs * D));
}

/* The mirror, from m->step.dx = dL/dout to dL/dx in place: the weights'
 * gradients added to g; the LayerNorms' input gradients summed over tp. */
static void backward(model *m, layer_acts p, int64_t l) {
  int64_t R = m->step.R, Rs = m->step.Rs, D = m->weights.D, W = m->weights.W, RW = R * W;
  dt_gpt_block w = weights_of(m, m->weights.w, l), g = weights_of(m, m->weights.g, l);
  dt_gpt_shape s = shape_of(m);
  float *d = gpt_gather(m, m->step.dx, m->step.dfull); /* dL/dout, every row */
  dt_gpt_mlp_backward(&s, &w, &g, p.h2, p.a, p.u, d, m->step.du, m->step.dh);
  float *dh = gpt_reduce(m, m->step.dh, m->step.dn);
  dt_layernorm_backward(p.x2, w.ln2, dh, p.mean2, p.rstd2, m->step.dx, g.ln2, Rs, D,
                        1); /* dL/dx2 */
  d = gpt_gather(m, m->step.dx, m->step.dfull);
  dt_matmul(1, 0, W, D, R, p.o, d, g.wo, 1);          /* dWo += o^T d */
  dt_matmul(0, 1, R, W, D, d, w.wo, m->step.dout, 0); /* do = d Wo^T */
  cp_ring_backward(&m->step.cr, p.q, p.k, p.v, p.o, p.lse, m->step.dout, m->step.dqkv);
  float *wi[3] = {w.wq, w.wk, w.wv}, *gi[3] = {g.wq, g.wk, g.wv};
  for (int i = 0; i < 3; i++) { /* dq, dk, dv back through Wq, Wk, Wv */
    dt_matmul(1, 0, D, W, R, p.h1, m->step.dqkv + i * RW, gi[i], 1);
    dt_matmul(0, 1, R, D, W, m->step.dqkv + i * RW, wi[i], m->step.dh, i > 0);
  }
  dh = gpt_reduce(m, m->step.dh, m->step.dn);
  dt_layernorm_backward(p.x, w.ln1, dh, p.mean1, p.rstd1, m->step.dx, g.ln1, Rs, D, 1); /* dL/dx */
}

/* --schedule zb1's gradients of layer l that W needs, kept in the slot
 * after the rest (formulas.c's gpt_kept): the output's dy and x2's dx2
 * [R,D] (every row), GELU's da [R,Hs], the ring's dq, dk, dv 3[R,W] */
typedef struct {
  float *dy, *dx2, *da, *dqkv;
} kept;

static kept kept_of(const model *m, float *slot, int64_t l) {
  int64_t R = m->step.R, RD = R * m->weights.D, Hs = m->weights.Hs, W = m->weights.W;
  float *at = slot + m->step.kept + l * (2 * RD + R * Hs + 3 * R * W);
  return (kept){at, at + RD, at + 2 * RD, at + 2 * RD + R * Hs};
}

/* ZB-H1's B: backward's path from dL/dout to dL/dx alone, what W needs
 * kept; the gains' gradients, from the LayerNorms' own pass, here too */
static void input(model *m, layer_acts p, kept k, int64_t j) {
  int64_t R = m->step.R, Rs = m->step.Rs, D = m->weights.D, W = m->weights.W, RW = R * W;
  dt_gpt_block w = weights_of(m, m->weights.w, j), g = weights_of(m, m->weights.g, j);
  dt_copy(k.dy, gpt_gather(m, m->step.dx, m->step.dfull), (size_t)(R * D) * 4);
  dt_matmul(0, 1, R, m->weights.Hs, D, k.dy, w.w2, m->step.du, 0); /* du = dy W2^T */
  dt_gelu_backward(p.a, m->step.du, k.da, (size_t)(R * m->weights.Hs));
  dt_matmul(0, 1, R, D, m->weights.Hs, k.da, w.w1, m->step.dh, 0); /* dh2 = da W1^T */
  float *dh = gpt_reduce(m, m->step.dh, m->step.dn);
  dt_layernorm_backward(p.x2, w.ln2, dh, p.mean2, p.rstd2, m->step.dx, g.ln2, Rs, D, 1);
  dt_copy(k.dx2, gpt_gather(m, m->step.dx, m->step.dfull), (size_t)(R * D) * 4);
  dt_matmul(0, 1, R, W, D, k.dx2, w.wo, m->step.dout, 0); /* do = dx2 Wo^T */
  cp_ring_backward(&m->step.cr, p.q, p.k, p.v, p.o, p.lse, m->step.dout, k.dqkv);
  float *wi[3] = {w.wq, w.wk, w.wv};
  for (int i = 0; i < 3; i++) dt_matmul(0, 1, R, D, W, k.dqkv + i * RW, wi[i], m->step.dh, i > 0);
  dh = gpt_reduce(m, m->step.dh, m->step.dn);
  dt_layernorm_backward(p.x, w.ln1, dh, p.mean1, p.rstd1, m->step.dx, g.ln1, Rs, D, 1);
}

/* chunk c's layer l: the slot's layer l, the stage's layer c Lc + l */
void gpt_layer_forward(model *m, float *slot, int64_t c, int64_t l) {
  forward(m, acts_of(m, slot, l), c * m->weights.Lc + l);
}

void gpt_layer_backward(model *m, float *slot, int64_t c, int64_t l) {
  layer_acts p = acts_of(m, slot, l);
  int64_t j = c * m->weights.Lc + l;
  if (m->step.recompute) forward(m, p, j); /* again, its output written where it already is */
  if (m->step.zb)
    input(m, p, kept_of(m, slot, l), j);
  else
    backward(m, p, j);
}

void gpt_layer_weights(model *m, float *slot, int64_t c, int64_t l) {
  int64_t R = m->step.R, D = m->weights.D, W = m->weights.W, Hs = m->weights.Hs, RW = R * W;
  layer_acts p = acts_of(m, slot, l);
  dt_gpt_block g = weights_of(m, m->weights.g, c * m->weights.Lc + l);
  kept k = kept_of(m, slot, l);
  dt_matmul(1, 0, Hs, D, R, p.u, k.dy, g.w2, 1);  /* dW2 += u^T dy */
  dt_matmul(1, 0, D, Hs, R, p.h2, k.da, g.w1, 1); /* dW1 += h2^T da */
  dt_matmul(1, 0, W, D, R, p.o, k.dx2, g.wo, 1);  /* dWo += o^T dx2 */
  float *gi[3] = {g.wq, g.wk, g.wv};
  for (int i = 0; i < 3; i++) dt_matmul(1, 0, D, W, R, p.h1, k.dqkv + i * RW, gi[i], 1);
}
