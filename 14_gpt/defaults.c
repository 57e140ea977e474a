/* defaults.c: lesson 14's defaults (defaults.h). */
#include "defaults.h"

void gpt_defaults(dt_train_config *c) {
  dt_gpt_defaults(c); /* nanoGPT's: AdamW, warm-up and cosine, clip 1, README.md's text */
  c->layers = 2;
  c->dim = 64;
  c->batch = 16;
  c->steps = 1000;
  c->adamw_lr = 3e-3;
  c->eval_every = 250;
  c->sample = 300; /* then a sample */
  c->temperature = 0.8;
}
