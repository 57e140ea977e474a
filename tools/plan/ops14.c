/* ops14.c: lesson 14's kernels (LN_F ... SUMSQ, CE_SUM ... POS_B) run as
 * --measure times them (ops.c): each the call 14 makes, on ten buffers of
 * the op's largest size, the tokens and targets of its rows in the tenth. */
#include <stdlib.h>

#include "ops.h"
#include "train.h"

int64_t ops14_largest(const op *o) {
  const int64_t *s = o->s;
  switch (o->k) {
  case LN_F:
  case LN_B: return s[0] * s[1];
  case EMB_F:
  case EMB_B: return (s[0] > s[1] ? s[0] : s[1]) * s[2];
  case CE_F:
  case CE_SUM:
  case CE_TGT:
  case CE_B: return s[0] * s[1];
  case POS_F:
  case POS_B: return s[0] * s[2];
  default: return s[0];
  }
}

void ops14_run(const op *o, float **p) {
  const int64_t *s = o->s;
  const int32_t *tokens = (const int32_t *)p[9];
  switch (o->k) {
  case LN_F: dt_layernorm_forward(p[0], p[1], p[2], p[3], p[4], s[0], s[1]); break;
  case LN_B:
    dt_layernorm_backward(p[0], p[1], p[5], p[3], p[4], p[6], p[7], s[0], s[1], (int)s[2]);
    break;
  case GELU_F: dt_gelu_forward(p[0], p[1], (size_t)s[0]); break;
  case GELU_B: dt_gelu_backward(p[0], p[1], p[1], (size_t)s[0]); break; /* in place, as 14 */
  case EMB_F: dt_embed_forward(tokens, s[0], p[0], 0, s[1], s[2], p[1]); break;
  case EMB_B: dt_embed_backward(tokens, s[0], p[1], 0, s[1], s[2], p[0]); break;
  case CE_F: dt_ce_max(p[0], s[0], s[1], p[2]); break;
  case CE_SUM: dt_ce_sumexp(p[0], s[0], s[1], p[2], p[3]); break;
  case CE_TGT: /* and the loss read, as 14 reads it after its pieces */
    dt_ce_target(p[0], s[0], s[1], 0, tokens, p[4]);
    dt_ce_loss(p[2], p[3], p[4], s[0]);
    break;
  case POS_F: dt_positions_forward(p[0], 0, s[0], 1, s[2], p[1]); break;
  case POS_B: dt_positions_backward(p[1], 0, s[0], 1, s[2], p[0]); break;
  case CE_B: dt_ce_backward(p[0], s[0], s[1], 0, tokens, p[2], p[3], 1e-3f, p[1]); break;
  case SUMSQ: dt_sum_squares(p[0], (size_t)s[0]); break;
  default: break;
  }
}

/* What the op reads that a forward makes: the tokens of its rows (each in
 * the slice), LayerNorm's statistics, the loss's max and sums */
void ops14_prepare(const op *o, float **p) {
  int ce = o->k == CE_F || o->k == CE_SUM || o->k == CE_TGT || o->k == CE_B;
  if (o->k == EMB_F || o->k == EMB_B || ce) {
    int64_t R = o->s[0], Vs = o->s[1];
    int32_t *ids = dt_host_alloc((size_t)R, sizeof *ids);
    for (int64_t r = 0; r < R; r++) ids[r] = (int32_t)(r * 7 % Vs);
    dt_copy_from_host(p[9], ids, (size_t)R * sizeof *ids);
    free(ids);
  }
  op f = *o;
  f.k = o->k == LN_B ? LN_F : -1;
  if (f.k >= 0) ops14_run(&f, p);
  if (!ce || o->k == CE_F) return;
  f.k = CE_F; /* the max, then the sums, where the piece reads them */
  ops14_run(&f, p);
  f.k = CE_SUM;
  if (o->k != CE_SUM) ops14_run(&f, p);
}
