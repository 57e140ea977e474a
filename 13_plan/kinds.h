/* kinds.h: what the cost model knows of a lesson's model, through one small
 * table of functions a model kind: its parameters, FLOPs, calls and bytes,
 * memory and operations, each as the lesson computes them. The model
 * (formulas.c, compute.c) holds the planner's GPT block and model states
 * itself and asks this table for every lesson's kind; the tool that runs
 * the model (tools/plan/kinds.c) fills it, so that the model depends on
 * no lesson above it and a new lesson's model is one entry there. */
#ifndef PLAN_KINDS_H
#define PLAN_KINDS_H

#include "dt.h"
#include "inputs.h"
#include "oplist.h"

typedef struct {
  double (*params)(const model *m);      /* the whole model's */
  double (*model_flops)(const model *m); /* a step's; NULL: PaLM's 6 P T + 12 L D S T */
  double (*recompute_flops)(const model *m, const mesh *x); /* NULL: the generic ones */
  void (*traffic)(const model *m, const mesh *x, int64_t s, traffic t[NCOMM][NCOLL]);
  void (*memory)(const model *m, const mesh *x, int64_t s, int64_t mem[DT_NTAGS]);
  /* a step's: the kernels the lesson's step calls, each entry point once
   * (op_kernel), which --verify compares with the lesson's count */
  void (*ops)(op_list *l, const model *m, const mesh *x, int64_t s, int64_t c);
} kind_fns;

/* one entry a lesson's kind (MESH12 ... GPT14), NULL until the tool sets it */
extern const kind_fns *lesson_kinds[NKINDS];
const kind_fns *kind_of(const model *m); /* m's entry; a clear failure where none is set */

#endif
