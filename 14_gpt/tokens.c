/* tokens.c: the step's tokens and their positions (state.h). Each step every
 * rank draws the B windows of S+1 tokens itself (text.c's, keyed by data
 * seed, step and sample: 04's rule) and keeps its own rows: a microbatch's
 * R rows are its Bm sequences' Sl = S/cp positions of 11's chunks, so a
 * row's token, its target (the next token) and its position embedding are
 * those of its global position, not of its place here. */
#include "state.h"

/* Row i of a sequence's Sl rows here: its position in the whole sequence */
static int64_t position(const model *m, int64_t i) {
  int64_t C = m->step.cr.C;
  return cp_chunk(&m->step.cr, m->step.cr.rank, i / C) * C + i % C;
}

void gpt_tokens(model *m, const dt_train_config *c, int64_t step) {
  int64_t R = m->step.R, Sl = m->step.cr.Sl, S1 = m->weights.S + 1, MR = m->step.M * R;
  if (!m->mesh.first && !m->mesh.last) return; /* the stages between see no tokens */
  int32_t *tokens = m->step.windows + m->step.Bm * S1, *targets = tokens + MR; /* host */
  for (int64_t mb = 0; mb < m->step.M; mb++) {
    dt_text_batch(c, step, m->mesh.at[DP] * (c->batch / m->mesh.n[DP]) + mb * m->step.Bm,
                  m->step.Bm, m->step.windows);
    for (int64_t r = 0; r < R; r++) {
      const int32_t *at = m->step.windows + r / Sl * S1 + position(m, r % Sl);
      tokens[mb * R + r] = at[0];
      targets[mb * R + r] = at[1]; /* the next token */
    }
  }
  /* one copy each a step, to where the lookup's and the loss's kernels read */
  if (m->mesh.first) dt_copy_from_host(m->step.tokens, tokens, (size_t)MR * sizeof *tokens);
  if (m->mesh.last) dt_copy_from_host(m->step.targets, targets, (size_t)MR * sizeof *targets);
}

/* Rows [r0, r0 + n) of a microbatch, row k of buf, in runs of consecutive
 * positions (a chunk of a sequence at most): their positions' embedding
 * added to buf (forward), or buf added to the gradient dwpe (backward) */
static void positions(const model *m, const float *wpe, int64_t r0, int64_t n, float *buf,
                      float *dwpe) {
  int64_t C = m->step.cr.C, Sl = m->step.cr.Sl, D = m->weights.D;
  for (int64_t r = r0, run; r < r0 + n; r += run) {
    int64_t i = r % Sl;
    run = C - i % C < r0 + n - r ? C - i % C : r0 + n - r;
    if (dwpe)
      dt_positions_backward(buf + (r - r0) * D, position(m, i), run, 1, D, dwpe);
    else
      dt_positions_forward(wpe, position(m, i), run, 1, D, buf + (r - r0) * D);
  }
}

void gpt_positions(const model *m, const float *wpe, int64_t r0, int64_t n, float *out) {
  positions(m, wpe, r0, n, out, NULL);
}

void gpt_positions_backward(const model *m, const float *dout, int64_t r0, int64_t n, float *dwpe) {
  positions(m, NULL, r0, n, (float *)dout, dwpe);
}
