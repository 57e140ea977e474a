/* stage.c: one step of a pipeline stage (stage.h). */
#include "stage.h"

/* Between two actions: what `done` produced leaves, what `next` needs
 * arrives (schedule.c). A forward's input lands in its microbatch's slot; a
 * backward's output gradient in *dnext, as *dx may be on its way out. */
static void exchange(const pp_stage *s, const action *done, const action *next) {
  float *out = done && done->type == 'F' ? s->st->slot[done->mb] + s->out : NULL;
  float *in = next && next->type == 'F' ? stash_open(s->st, next->mb) : NULL; /* its x_0 */
  if (pp_exchange(s->pp, s->wire, done, next, out, *s->dx, in, *s->dnext, s->n)) {
    float *t = *s->dnext; /* the next backward starts from it */
    *s->dnext = *s->dx;
    *s->dx = t;
  }
}

double pp_step(const pp_stage *s, dt_run *r) {
  double loss = 0;
  timeline_start(s->tl, s->pp);
  for (const action *a = s->plan; a < s->plan + s->nplan; a++) {
    exchange(s, a > s->plan ? a - 1 : NULL, a);
    double t0 = dt_span_begin();
    loss += s->compute(s->lesson, r, a);
    timeline_record(s->tl, (int)(a - s->plan), a, t0);
  }
  exchange(s, &s->plan[s->nplan - 1], NULL);
  timeline_step_end(s->tl, s->pp);
  return loss;
}
