/* chunks.c: the pipeline's schedule, 09's plans (state.h). With
 * --virtual-stages V a stage holds V chunks of L/(pp V) layers, chunk c of
 * stage s being virtual stage c pp + s (09's interleaved 1F1B). The first
 * virtual stage, which embeds, is chunk 0 of stage 0; the last, whose head
 * the tied weight's other copy feeds, chunk V-1 of stage pp-1: the same two
 * ranks as without chunks, so the tied weight's all-reduce keeps its group. */
#include "09_pp/interleave.h"
#include "09_pp/zb.h"
#include "state.h"

void gpt_plan_check(const model *m, const dt_train_config *c, const char *schedule) {
  interleave_check(m->mesh.n[PP], c->layers, m->step.M, m->weights.chunks, schedule);
}

void gpt_plan(model *m) {
  gpt_step *s = &m->step;
  int P = (int)m->mesh.n[PP], at = (int)m->mesh.at[PP], V = (int)m->weights.chunks;
  s->plan = dt_host_alloc((size_t)(3 * s->M * V), sizeof(action));
  if (V > 1 || s->zb) /* exchanged in lockstep at the slot model's boundaries (09) */
    s->ev = dt_host_alloc((size_t)(4 * s->M * V + 1), sizeof(pp_event));
  if (s->zb) { /* ZB-H1: F, B and W of every microbatch */
    s->nev = pp_plan_zb(P, at, s->M, s->plan, s->ev, &s->T);
    s->nplan = (int)(3 * s->M);
  } else {
    s->nplan = V > 1 ? pp_plan_v(P, at, s->M, V, s->plan) : pp_plan(P, at, s->M, s->gpipe, s->plan);
  }
  if (V > 1) s->nev = pp_events(P, at, s->M, V, s->plan, s->ev, &s->T);
  s->tl = timeline_new(s->nplan);
  timeline_schedule(s->tl, V, s->zb);
}

int64_t gpt_layer(const model *m, int64_t j) {
  int64_t Lc = m->weights.Lc;
  return m->weights.chunks == 1 ? m->weights.l0 + j
                                : (j / Lc * m->mesh.n[PP] + m->mesh.at[PP]) * Lc + j % Lc;
}

double gpt_walk(const model *m, const pp_stage *stage, dt_run *r) {
  pp_chunks chunks = {m->step.M, m->step.ev, m->step.nev};
  return m->weights.chunks > 1 || m->step.zb ? pp_step_chunks(stage, &chunks, r)
                                             : pp_step(stage, r);
}
