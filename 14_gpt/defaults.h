/* defaults.h: lesson 14's model, optimiser and schedule by default
 * (defaults.c): gpt.c starts its flags from them, and 13_plan's model
 * gpt14 is made of them, so that the plan predicts the run the lesson
 * makes when given nothing. */
#ifndef GPT_DEFAULTS_H
#define GPT_DEFAULTS_H

#include "train.h"

/* nanoGPT's optimiser and schedule (dt_gpt_defaults) on a model that 2
 * cores take through visible learning in about a minute */
void gpt_defaults(dt_train_config *c);

#endif
