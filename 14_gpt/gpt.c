/* 14_gpt: a GPT trained on a real text on 12's mesh, vocabulary-parallel.
 *
 * nanoGPT's GPT (bias=False) on dp x pp x cp x tp ranks. The one new idea:
 * the vocabulary, the embedding's rows and the tied head's, is split over
 * tp. A rank embeds the tokens of its rows (zeros elsewhere), one sum over
 * tp makes the lookup; its head computes its rows' logits only, and the
 * cross-entropy comes from each row's max, sum of exponentials and target
 * logit, all-reduced over tp: the logits are never gathered. The rest is
 * composed as in 12: 07's sums over tp, 11's ring over cp, 09's walk over
 * pp, 05's average over dp x cp (06's shards). The embedding is the first
 * stage's, the head the last's; the tied weight's two gradients meet in an
 * all-reduce between them. Then the run checks, and rank 0 writes text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "06_fsdp/shard.h" /* the pieces it composes, each on its axis */
#include "07_tp/tensor.h"
#include "09_pp/schedule.h"
#include "09_pp/stage.h"
#include "09_pp/stash.h"
#include "09_pp/timeline.h"
#include "11_cp/ring.h"
#include "12_mesh/shape.h"
#include "12_mesh/table.h"
#include "12_mesh/topology.h"
#include "state.h"

/* 12's mesh, each axis's communicator split by topology.c's group of this
 * rank (12 builds them by hand), and the tied weight's: the first and the
 * last stage of this (dp, cp, tp); the stages between are each alone. */
static void coordinates(model *m) {
  int64_t r = m->mesh.world->rank, N = m->mesh.world->size;
  topo_coords(m->mesh.n, r, m->mesh.at);
  for (int a = 0; a < NCOMM; a++) {
    dt_comm *c = dt_comm_split(m->mesh.world, (int)topo_group(m->mesh.n, r, a),
                               (int)topo_place(m->mesh.n, r, a));
    *(a < AXES ? &m->mesh.axis[a] : &m->mesh.dc) = c;
  }
  m->mesh.first = m->mesh.at[PP] == 0;
  m->mesh.last = m->mesh.at[PP] == m->mesh.n[PP] - 1;
  int64_t ends = topo_group(m->mesh.n, r, PP); /* (dp, cp, tp) */
  m->mesh.emb = dt_comm_split(m->mesh.world, (int)(m->mesh.first || m->mesh.last ? ends : N + r),
                              m->mesh.last);
  snprintf(m->mesh.emb->name, sizeof m->mesh.emb->name, "emb");
}

/* The stage's layers of this tp shard, its rows of the vocabulary on the
 * first and last stage, the gains; the buffers and places: buffers.c. */
static void layout(model *m, dt_run *r) {
  coordinates(m);
  mesh_verify(m->mesh.world, m->mesh.axis, m->mesh.dc, m->mesh.n,
              m->mesh.at); /* 12's check of the groups */
  m->weights.L = r->c.layers / m->mesh.n[PP];
  m->weights.l0 = m->mesh.at[PP] * m->weights.L;
  m->weights.Lc = m->weights.L / m->weights.chunks;
  gpt_buffers(m, r);
  gpt_wires(m, &r->c); /* --precision's copies, of the sizes buffers.c set */
  dt_comm *each[] = {m->mesh.axis[TP], m->mesh.axis[CP], m->mesh.axis[PP], m->mesh.dc, m->mesh.emb};
  memcpy(r->comms, each, sizeof each);
  r->loss_ranks = (double)(m->mesh.n[DP] * m->mesh.n[CP]); /* the last stages' tp rank 0 */
  r->loss_how = "last stage, mean over dp x cp";
  gpt_plan(m); /* chunks.c: 09's plan, interleaved with --virtual-stages */
}

/* The lookup over the vocabulary's slices: this rank's rows, zeros for
 * the other tokens, one sum over tp; then each row's position (11's
 * global one under cp). Backward: only this rank's rows get gradients. */
static void embed(model *m, float *x0, const int32_t *tokens) {
  const gpt_weights *p = &m->weights;
  float *part = gpt_partial(m, x0);
  dt_embed_forward(tokens, m->step.R, gpt_wte(m, p->w), p->v0, p->Vs, p->D, part);
  gpt_reduce(m, part, x0);
  gpt_positions(m, gpt_wpe(m, p->w), m->step.mine, m->step.Rs, x0);
}

static void embed_backward(model *m, const int32_t *tokens) {
  const gpt_weights *p = &m->weights;
  float *d = gpt_gather(m, m->step.dx, m->step.dfull); /* dL/dx_0, every row */
  dt_embed_backward(tokens, m->step.R, d, p->v0, p->Vs, p->D, gpt_wte(m, p->g));
  gpt_positions_backward(m, d, 0, m->step.R, gpt_wpe(m, p->g));
}

/* An all-reduce over tp of the cross-entropy's pieces (n floats of buf,
 * op), counted on the loss's own rows of the report (row), not among tp's
 * all_reduce (activ); its time stays tp's, blocked all the same. Not
 * static: the exercise's stub, which has no all-reduce, leaves it unused. */
void gpt_pieces(model *m, float *buf, int64_t n, dt_op op, dt_counter *row) {
  dt_counter *ar = &m->mesh.axis[TP]->count[DT_ALL_REDUCE], kept = *ar;
  dt_all_reduce(m->mesh.axis[TP], buf, buf, (size_t)n, DT_F32, op);
  row->calls += ar->calls - kept.calls;
  row->bytes_sent += ar->bytes_sent - kept.bytes_sent;
  row->seconds += ar->seconds - kept.seconds; /* and still tp's: its blocked time is all of it */
  ar->calls = kept.calls;
  ar->bytes_sent = kept.bytes_sent;
}

/* The head's activations in the last stage's slot, after the stage's
 * output x_L: LN_f's mean, rstd [Rs], hf [R,D] (gathered), the logits
 * [R,Vs] and the loss's pieces mx, sum, tl [R]. */
typedef struct {
  float *mean, *rstd, *hf, *logits, *mx, *sum, *tl;
} head_acts;

static head_acts head_of(const model *m, float *slot) {
  int64_t R = m->step.R, Rs = m->step.Rs, D = m->weights.D;
  head_acts h = {.mean = slot + m->step.out + Rs * D};
  h.rstd = h.mean + Rs;
  h.hf = h.rstd + Rs;
  h.logits = h.hf + R * D;
  h.mx = h.logits + R * m->weights.Vs;
  h.sum = h.mx + R;
  h.tl = h.sum + R; /* right after sum: one all-reduce sums both */
  return h;
}

/* The head: LN_f, the logits of this rank's rows of the vocabulary, and
 * the sum over the R rows of each one's cross-entropy, from pieces. */
static double head(model *m, head_acts h, const float *x, const int32_t *targets) {
  int64_t R = m->step.R, Vs = m->weights.Vs, D = m->weights.D, v0 = m->weights.v0;
  float *w = m->weights.w, *own = h.hf + m->step.mine * D; /* this rank's rows of hf */
  dt_layernorm_forward(x, gpt_lnf(m, w), own, h.mean, h.rstd, m->step.Rs, D);
  gpt_gather(m, own, h.hf);
  dt_matmul(0, 1, R, Vs, D, h.hf, gpt_wte(m, w), h.logits, 0); /* [R, Vs]: never gathered */
  /* exercise: the vocabulary-parallel cross-entropy */
  dt_ce_max(h.logits, R, Vs, h.mx);
  gpt_pieces(m, h.mx, R, DT_MAX, &m->step.ce[0]); /* each row's max over every slice */
  dt_ce_sumexp(h.logits, R, Vs, h.mx, h.sum);
  dt_ce_target(h.logits, R, Vs, v0, targets, h.tl);    /* 0 but on the target's slice */
  gpt_pieces(m, h.sum, 2 * R, DT_SUM, &m->step.ce[1]); /* [sum | tl]: both summed */
  return dt_ce_loss(h.mx, h.sum, h.tl, R);
  /* end of exercise */
}

/* From the same pieces: dlogits = softmax - onehot, on this rank's rows;
 * wte's gradient there, LN_f's input's summed over tp. */
static void head_backward(model *m, head_acts h, const float *x, const int32_t *targets,
                          double scale) {
  int64_t R = m->step.R, Vs = m->weights.Vs, D = m->weights.D;
  float *w = m->weights.w, *g = m->weights.g, *dlogits = m->step.dlogits;
  dt_ce_backward(h.logits, R, Vs, m->weights.v0, targets, h.mx, h.sum, (float)scale, dlogits);
  dt_matmul(1, 0, Vs, D, R, dlogits, h.hf, gpt_wte(m, g), 1); /* dwte += dlogits^T hf */
  dt_matmul(0, 0, R, D, Vs, dlogits, gpt_wte(m, w), m->step.dh, 0);
  float *dhf = gpt_reduce(m, m->step.dh, m->step.dn);
  dt_layernorm_backward(x, gpt_lnf(m, w), dhf, h.mean, h.rstd, m->step.dx, gpt_lnf(m, g),
                        m->step.Rs, D, 0);
}

/* One action of the stage's plan (09's walk): microbatch a->mb through chunk
 * a->chunk, embedded on the first virtual stage, its loss from the last's head */
static double microbatch(void *lesson, dt_run *r, const action *a) {
  model *m = lesson;
  double loss = 0, mean = 1.0 / ((double)m->step.M * (double)m->step.R); /* this rank's M R rows */
  int64_t c = a->chunk, at = a->mb * m->step.R, k = c * m->step.M + a->mb; /* chunk c's slot */
  float *slot = stash_open(&m->step.st, (int)k), *x = slot + (size_t)m->step.out;
  int first = m->mesh.first && c == 0, last = m->mesh.last && c == m->weights.chunks - 1;
  if (a->type == 'W') /* zb1: the layers' weight gradients, deferred (layer.c) */
    for (int64_t l = 0; l < m->weights.Lc; l++) gpt_layer_weights(m, slot, c, l);
  else if (a->type == 'F') {
    if (first) embed(m, slot, m->step.tokens + at);
    for (int64_t l = 0; l < m->weights.Lc; l++) gpt_layer_forward(m, slot, c, l);
    if (last) loss = head(m, head_of(m, slot), x, m->step.targets + at) * mean;
  } else {
    if (last) head_backward(m, head_of(m, slot), x, m->step.targets + at, mean * r->scaler.scale);
    for (int64_t l = m->weights.Lc - 1; l >= 0; l--) gpt_layer_backward(m, slot, c, l); /* zb1: B */
    if (first) embed_backward(m, m->step.tokens + at);
  }
  if (a->type == 'W' || (a->type == 'B' && !m->step.zb)) stash_close(&m->step.st, (int)k);
  return loss;
}

static double train_step(model *m, dt_run *r, int64_t step) {
  gpt_step *s = &m->step;
  gpt_weights *p = &m->weights;
  pp_stage stage = {m->mesh.axis[PP], &s->wire,   (size_t)(s->Rs * p->D),
                    (size_t)s->out,   &s->st,     s->plan,
                    s->nplan,         s->tl,      &s->dx,
                    &s->dnext,        microbatch, m};
  gpt_tokens(m, &r->c, step);
  dt_zero(p->g, (size_t)p->nw * 4);
  double loss = gpt_walk(m, &stage, r); /* chunks.c: 09's walk, interleaved with V chunks */
  /* replicated over dp x cp: averaged there (05; --zero 1, 06's all-reduce
   * for the shards); the tied weight's halves summed between the first and
   * last stage; sequence parallelism's gains summed over tp */
  gpt_sum_gains(m);
  if (p->zero) fsdp_reduce(&p->f, 0, p->g);
  if (!p->zero && m->mesh.dc->size > 1) { /* in 16 bits each rank's g / G, summed */
    void *g = dt_wire_pack(&p->grads, p->g, (size_t)p->nw, 0, (int)m->mesh.dc->size);
    dt_all_reduce(m->mesh.dc, g, g, (size_t)p->nw, p->grads.type, dt_wire_op(&p->grads, DT_AVG));
    dt_wire_unpack(&p->grads, p->g, (size_t)p->nw, 0);
  }
  if (m->mesh.emb->size > 1)
    tp_sum(m->mesh.emb, &p->grads, gpt_wte(m, p->g), (size_t)(p->Vs * p->D));
  return m->mesh.at[TP] == 0 ? loss : 0; /* every tp rank computes it alike: count one */
}

int main(int argc, char **argv) {
  dt_run run = {.c = DT_TRAIN_DEFAULTS};
  gpt_defaults(&run.c); /* nanoGPT's AdamW and schedule, a model a laptop trains in a minute */
  const char *split = "contiguous", *schedule = "1f1b";
  model m = {.weights.chunks = 1};
  dt_option options[] = {
      DT_TRAIN_OPTIONS(&run.c),
      DT_REFUSED("--samples", "a GPT's data is its --text: each step draws B windows of it"),
      DT_ATTN_OPTIONS(&run.c),
      DT_GPT_OPTIONS(&run.c),
      DT_INT("--dp", &m.mesh.n[DP], 0, 1 << 20, "data-parallel ranks (0: from the ranks left)"),
      DT_INT("--pp", &m.mesh.n[PP], 0, 1 << 20, "pipeline stages (0: from the ranks left)"),
      DT_INT("--cp", &m.mesh.n[CP], 0, 1 << 20, "context-parallel ranks (0: from the ranks left)"),
      DT_INT("--tp", &m.mesh.n[TP], 0, 1 << 20,
             "tensor-parallel ranks, the vocabulary's too (0: from the ranks left)"),
      DT_INT("--micro", &m.step.M, 0, 1 << 20,
             "microbatches M per step (0: 2 x pp, 1 without pipeline)"),
      DT_STRING("--schedule", &schedule, "gpipe|1f1b|zb1",
                "the pipeline's schedule (09; zb1: ZB-H1, the weight gradients deferred)"),
      DT_INT("--virtual-stages", &m.weights.chunks, 1, 64,
             "chunks V a stage: interleaved 1F1B (09; pp V must divide --layers, pp --micro)"),
      DT_INT("--zero", &m.weights.zero, 0, 1,
             "1: shard the optimizer state over dp x cp (06), 0: replicas"),
      DT_STRING("--split", &split, "contiguous|zigzag",
                "cp rank i: chunk i, or i and 2cp-1-i (11)"),
      DT_FLAG("--sequence-parallel", &m.step.sp,
              "the residual stream and LayerNorms as S/tp rows of each tp rank (Megatron's SP)"),
      DT_FLAG("--recompute", &m.step.recompute,
              "keep each layer's input alone, recompute its forward in backward"),
      DT_END};
  dt_lesson lesson = {"14_gpt", "a GPT on a real text on the 4D mesh, the vocabulary split over tp",
                      1};
  m.mesh.world = dt_run_start(&run, &argc, &argv, &lesson, options);
  m.step.zigzag = strcmp(split, "zigzag") == 0;
  m.step.gpipe = schedule[0] == 'g';
  m.step.zb = schedule[0] == 'z';
  mesh_shape(m.mesh.n, m.mesh.world->size);
  run.c.vocab_multiple = m.mesh.n[TP]; /* each tp rank V/tp rows of the vocabulary */
  dt_run_resolve(&run);
  if (!m.step.M) m.step.M = m.mesh.n[PP] > 1 ? 2 * m.mesh.n[PP] : 1;
  mesh_check(m.mesh.n, m.step.M, m.step.zigzag, &run.c); /* 12's: what the mesh cannot split */
  gpt_check(&m, &run.c);
  gpt_plan_check(&m, &run.c, schedule); /* chunks.c: 09's refusals */
  layout(&m, &run);
  dt_run_begin(&run);
  if (m.weights.zero) fsdp_start(&m.weights.f, &run);
  mesh_table(m.mesh.world, m.mesh.n, m.mesh.at);
  for (int64_t step = run.c.start_step; step < run.c.steps; step++) {
    dt_step_begin(&run, step);
    double loss = train_step(&m, &run, step);
    if (dt_step_update(&run) && m.weights.zero) fsdp_step_taken(&m.weights.f);
    dt_step_end(&run, step, loss); /* and evaluation when due */
  }
  gpt_report(&m, &run);       /* the summary and the tables (none after --steps 0) */
  return dt_run_finish(&run); /* and --sample */
}
