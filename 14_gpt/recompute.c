/* recompute.c: --recompute, full activation recomputation (gpt.h).
 *
 * A layer's forward keeps only its output in the microbatch's slot (the
 * input is the layer before's output): everything in between, LayerNorms,
 * q, k, v, the attention's output and log-sum-exp, the MLP's a and u, goes
 * to one layer's scratch, shared by every layer and every microbatch.
 * Backward runs the layer's forward again from its input into that scratch
 * (its tp sums and its ring again, the same bits), then goes back through
 * it. Memory: (L+1) rows of the stream a microbatch instead of L layers of
 * activations; compute: the layers' forward once more. */
#include "gpt.h"

void gpt_layer_forward(model *m, float *slot, int64_t l) {
  gpt_forward_core(m, gpt_acts(m, slot, l), l);
}

void gpt_layer_backward(model *m, float *slot, int64_t l) {
  layer_acts p = gpt_acts(m, slot, l);
  if (m->recompute) { /* the forward again, its output written where it already is */
    gpt_forward_core(m, p, l);
  }
  gpt_backward_core(m, p, l);
}
