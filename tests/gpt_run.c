/* gpt_run.c: the GPT of common/train (DT_GPT) trained through the run
 * every training lesson shares (dt_run), in one process, the whole model
 * one segment: the flags, the text, the schedule and decay groups, the
 * check against the yardstick (here the tiled attention against the
 * materialised one), evaluation, sampling, --save, --load, --dump-data and
 * checkpoints end to end. Not a lesson (no parallelism): the harness of
 * tests/suite_gpt.sh and bench/torch_gpt.py. */
#include <stdio.h>
#include <stdlib.h>

#include "train.h"

int main(int argc, char **argv) {
  dt_run run = {.c = DT_TRAIN_DEFAULTS};
  dt_gpt_defaults(&run.c);
  run.c.vocab_multiple = 1;
  dt_train_config *c = &run.c;
  const char *initial = NULL;
  dt_option options[] = {
      DT_TRAIN_OPTIONS(&run.c),
      DT_ATTN_OPTIONS(&run.c),
      DT_GPT_OPTIONS(&run.c),
      DT_INT("--pad", &run.c.vocab_multiple, 1, 4096,
             "pad the vocabulary to a multiple of this (a lesson's tensor-parallel ranks)"),
      DT_STRING("--save-initial", &initial, NULL,
                "write the initial model to this safetensors file (nanoGPT's names)"),
      DT_END};
  dt_lesson lesson = {"gpt_run", "the GPT of common/train through dt_run, in one process", 1};
  dt_comm *world = dt_run_init(&run, &argc, &argv, &lesson, options);
  if (world->size != 1) dt_fail("gpt_run trains in one process: run it with -np 1");
  int64_t n = dt_model_size(c), B = c->batch, S = c->seq;
  float *w = dt_alloc_f32((size_t)n, DT_PARAMS), *g = dt_alloc_f32((size_t)n, DT_GRADS);
  int seg = dt_run_segment(&run, w, g, (size_t)n);
  dt_run_place(&run, seg, 0, 0, 1, n, n);
  int32_t *windows = dt_host_alloc((size_t)(B * (S + 1) + 2 * B * S), sizeof *windows);
  int32_t *inputs = windows + B * (S + 1), *targets = inputs + B * S;
  dt_gpt_acts *acts = dt_gpt_acts_new(c, B, 0);
  dt_run_begin(&run);
  if (initial) { /* for bench/torch_gpt.py: the weights its step starts from */
    dt_run_gather(&run, 0, run.host);
    dt_save_model(initial, c, 0, run.host);
    dt_print0("saved the initial model to %s\n", initial);
  }
  for (int64_t step = c->start_step; step < c->steps; step++) {
    dt_step_begin(&run, step);
    dt_text_batch(c, step, 0, B, windows);
    dt_gpt_split_windows(windows, B, S, inputs, targets);
    double loss = dt_gpt_forward(c, w, inputs, targets, S, acts);
    dt_zero(g, (size_t)n * 4);
    dt_gpt_backward(c, w, acts, run.scaler.scale, g);
    dt_step_update(&run);
    dt_step_end(&run, step, loss);
    if (initial && step == 0) dt_print0("the first step's loss, to the last digit: %.17g\n", loss);
  }
  dt_run_summary(&run);
  dt_gpt_acts_free(acts);
  free(windows);
  int failed = dt_run_finish(&run);
  return failed;
}
