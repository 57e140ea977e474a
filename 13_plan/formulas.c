/* formulas.c: bytes, memory and FLOPs per rank per step, in one place.
 *
 * For the lessons' models each formula is the one that lesson prints beside
 * what it measured, reached through the lesson's entry of kinds.h's table
 * (the tool fills it from the lessons' own formulas files), so that
 * --verify can ask for equality. For a GPT block (two layer norms,
 * attention, an MLP, the embeddings and the output layer) the planner's
 * own, each with its source: the ZeRO paper (Rajbhandari et al. 2020) for
 * the model states, Korthikanti et al. 2022 ("Reducing Activation
 * Recomputation in Large Transformer Models") for the activations, PaLM
 * (Chowdhery et al. 2022, appendix B) for model FLOPs. */
#include <string.h>

#include "block.h"
#include "dt.h"
#include "formulas.h"
#include "kinds.h"

const kind_fns *lesson_kinds[NKINDS];

static int is_lesson(const model *m) { return m->kind < GPT; }

const kind_fns *kind_of(const model *m) {
  const kind_fns *f = is_lesson(m) ? lesson_kinds[m->kind] : NULL;
  if (!f) dt_fail("model %s: no formulas for its kind (kinds.h's table is the tool's)", m->name);
  return f;
}

double parameters_of(const model *m) {
  if (m->kind == STATES) return m->params;
  if (m->kind == GPT) return block_params(m);
  return kind_of(m)->params(m);
}

/* PaLM's model FLOPs: 6 x parameters x tokens, plus 12 L D S per token for
 * attention's two products (QK^T and PV, forward and backward, full S^2). */
double model_flops(const model *m) {
  double T = (double)m->B * (double)(m->S ? m->S : 1);
  if (is_lesson(m) && kind_of(m)->model_flops) return kind_of(m)->model_flops(m);
  return 6 * parameters_of(m) * T + 12.0 * (double)(m->L * m->D * m->S) * T;
}

/* with full recomputation each layer's forward runs twice; with selective
 * recomputation its attention products (QK^T and PV) */
double hardware_flops(const model *m, const mesh *x) {
  double T = (double)m->B * (double)(m->S ? m->S : 1), att = 4.0 * (double)(m->L * m->D * m->S);
  if (is_lesson(m) && kind_of(m)->recompute_flops)
    return model_flops(m) + kind_of(m)->recompute_flops(m, x);
  return model_flops(m) + (x->recompute == RECOMPUTE_FULL        ? (2 * parameters_of(m) + att) * T
                           : x->recompute == RECOMPUTE_SELECTIVE ? att * T
                                                                 : 0);
}

void traffic_of(const model *m, const mesh *x, int64_t s, traffic t[NCOMM][NCOLL]) {
  memset(t, 0, sizeof(traffic) * NCOMM * NCOLL);
  if (m->kind == GPT) block_traffic(m, x, s, t); /* block.c */
  if (is_lesson(m)) kind_of(m)->traffic(m, x, s, t);
}

memory memory_of(const model *m, const mesh *x, int64_t s) {
  memory y = {0};
  int64_t T = x->n[TP], P = x->n[PP], G = x->n[DP] * x->n[CP];
  if (is_lesson(m)) { /* the lesson's formulas by dt.h's tags */
    int64_t mem[DT_NTAGS] = {0};
    kind_of(m)->memory(m, x, s, mem);
    y = (memory){.params = mem[DT_PARAMS],
                 .grads = mem[DT_GRADS],
                 .optim = mem[DT_OPTIM],
                 .activ = mem[DT_ACTIV],
                 .comm = mem[DT_COMMBUF],
                 .data = mem[DT_DATA]};
  } else if (m->kind == GPT || m->kind == STATES) {
    /* ZeRO's model states: 16-bit params and grads, fp32 master, m, v (K = 12) */
    double Ps = m->kind == GPT ? block_stage_params(m, x, s) : m->params / (double)(T * P);
    double pb = x->bf16 ? 2 : 4, ob = x->adamw ? (x->bf16 ? 12 : 8) : (x->bf16 ? 4 : 0);
    y.params = (int64_t)(pb * Ps / (x->zero == 3 ? (double)G : 1));
    y.grads = (int64_t)(pb * Ps / (x->zero >= 2 ? (double)G : 1));
    y.optim = (int64_t)(ob * Ps / (x->zero >= 1 ? (double)G : 1));
    if (m->kind == GPT) y.activ = block_activ(m, x, s); /* block.c */
  }
  y.total = y.params + y.grads + y.optim + y.activ + y.comm + y.data;
  return y;
}
