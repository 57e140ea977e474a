/* search.h: --search, every mesh of some devices predicted and ranked. */
#ifndef PLAN_SEARCH_H
#define PLAN_SEARCH_H

#include "13_plan/inputs.h"

/* the shapes that fit, the best `top` printed (json: as one object) */
int search(const model *m, const mesh *base, const machine *c, int64_t gpus, int top, int json);

#endif
