/* block.h: the planner's GPT block (block.c): its parameters, its
 * activations, its traffic per axis, each with its source. */
#ifndef PLAN_BLOCK_H
#define PLAN_BLOCK_H

#include "inputs.h"

int64_t kv_heads(const model *m);                 /* KV, or A where not grouped */
int64_t padded_vocab(const model *m, int64_t tp); /* Megatron's: a multiple of pad x tp */
double block_params(const model *m);              /* the whole model */
double block_stage_params(const model *m, const mesh *x, int64_t stage); /* one tp rank's */
double block_layer_activ(const model *m, const mesh *x); /* one layer, one microbatch, bytes */
int64_t block_activ(const model *m, const mesh *x, int64_t stage);
void block_traffic(const model *m, const mesh *x, int64_t stage, traffic t[NCOMM][NCOLL]);
int64_t block_exchanges(const mesh *x, int64_t stage); /* the pipeline's sends and receives */

#endif
