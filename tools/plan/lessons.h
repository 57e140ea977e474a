/* lessons.h: the lessons' entries of the cost model's table (13_plan/kinds.h):
 * 05, 06 and 09 in lessons.c, 11 and 12 in lesson_mesh.c, 14 in lesson14.c
 * (the table itself: kinds.c), each as the lesson's own formulas and code
 * compute it. */
#ifndef PLAN_LESSONS_H
#define PLAN_LESSONS_H

#include "13_plan/formulas.h"
#include "13_plan/kinds.h"

extern const kind_fns mlp_kind, transformer_kind, gpt14_kind;
void lessons_install(void); /* kinds.c: fills 13_plan's lesson_kinds, before any model is asked */

/* the once-a-step tail of 05-12's step: the gradients zeroed, averaged, stepped */
void optimizer_ops(op_list *l, const model *m, const mesh *x, int64_t s);
/* the optimizer's calls on [a, b) of a rank's buffer, each gain of [g0,
 * g1) (D floats a tensor) a run without decay of its own (lessons.c) */
void step_segment(op_list *l, int adamw, int64_t a, int64_t b, int64_t g0, int64_t g1, int64_t D);
/* ZB-H1's B and W of a block's MLP, per times (lessons.c); the copies of
 * 09's walk for the backwards its plan parks, n floats each */
void zb_mlp_ops(op_list *l, int64_t R, int64_t D, int64_t H, double per);
void parked_ops(op_list *l, const mesh *x, int64_t s, int64_t n);
/* 11's ring on one layer of a microbatch of stage s, cp rank c (cp_ring.c) */
void ring_ops(op_list *l, const model *m, const mesh *x, int64_t s, int64_t c, int backward);

/* gpt14: 14's default model (14_gpt/defaults.c), and its V: the text's
 * tokens (byte: --tokens byte) padded to a multiple of tp, or m->V so */
void gpt14_model(model *m);
void gpt14_vocab(model *m, const char *text, int byte, int64_t tp);

#endif
