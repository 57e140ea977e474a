/* stage.c: one step of a pipeline stage (stage.h). */
#include "stage.h"

static const pp_chunks one = {0, NULL, 0}; /* GPipe, 1F1B: one chunk, pp_pair's exchanges */

static float *slot(const pp_stage *s, const pp_chunks *c, const action *a) {
  return stash_open(s->st, (int)(a->chunk * c->M + a->mb));
}

/* An exchange: a forward's input lands in its microbatch's slot; a
 * backward's output gradient in *dnext when that backward runs next, as *dx
 * may be on its way out, else in its slot, in the output's place (the
 * backward reads its layers' inputs, never their output). */
static void exchange(const pp_stage *s, const pp_chunks *c, const pp_event *e, const action *next) {
  float *out = NULL, *in = NULL;
  int swap = 0;
  if (e->dst != DT_NOBODY) out = e->out.type == 'F' ? slot(s, c, &e->out) + s->out : *s->dx;
  if (e->src != DT_NOBODY && e->in.type == 'F') in = slot(s, c, &e->in); /* its x_0 */
  if (e->src != DT_NOBODY && e->in.type == 'B') {
    swap = next && next->type == 'B' && next->mb == e->in.mb && next->chunk == e->in.chunk;
    in = swap ? *s->dnext : slot(s, c, &e->in) + s->out;
  }
  pp_exchange(s->pp, s->wire, e, out, in, s->n);
  if (swap) {
    float *t = *s->dnext; /* the next backward starts from it */
    *s->dnext = *s->dx;
    *s->dx = t;
  }
}

/* Before action i (i = nplan: after the last): its exchanges, the plan's
 * (with chunks) or the one between it and the action before (pp_pair). */
static void exchanges(const pp_stage *s, const pp_chunks *c, const pp_event **e, int i) {
  const action *next = i < s->nplan ? &s->plan[i] : NULL;
  pp_event pair;
  if (!c->ev && pp_pair(s->pp->size, s->pp->rank, i ? &s->plan[i - 1] : NULL, next, &pair))
    exchange(s, c, &pair, next);
  for (; c->ev && *e < c->ev + c->nev && (*e)->pos == i; (*e)++) exchange(s, c, *e, next);
}

double pp_step(const pp_stage *s, dt_run *r) { return pp_step_chunks(s, &one, r); }

double pp_step_chunks(const pp_stage *s, const pp_chunks *c, dt_run *r) {
  double loss = 0;
  const pp_event *e = c->ev;
  timeline_start(s->tl, s->pp);
  for (int i = 0; i < s->nplan; i++) {
    const action *a = &s->plan[i];
    exchanges(s, c, &e, i);
    if (a->parked) dt_copy(*s->dx, slot(s, c, a) + s->out, s->n * 4); /* it waited there */
    double t0 = dt_span_begin();
    loss += s->compute(s->lesson, r, a);
    timeline_record(s->tl, i, a, t0);
  }
  exchanges(s, c, &e, s->nplan);
  timeline_step_end(s->tl, s->pp);
  return loss;
}
