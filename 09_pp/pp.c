/* 09_pp: pipeline parallelism, GPipe and 1F1B.
 *
 * The L layers are cut into N contiguous stages, one per rank, and the global
 * batch into M microbatches. A microbatch's activations flow forward from
 * stage to stage and its activation gradients flow back; each stage adds its
 * layers' gradients up over the M microbatches, so one optimizer step per
 * batch trains exactly the single-process model. Two schedules order the same
 * 2M actions of a stage (pp_plan, schedule.c): GPipe runs all forwards, then all
 * backwards, and holds M microbatches' activations at the turn; 1F1B
 * interleaves them after a warm-up and holds at most N-s. Both leave the same
 * bubble, (N-1)/(M+N-1) of the time idle, which timeline.c draws. The run
 * (common/train/run.c) does the rest of the step and ends by training the same
 * model in one process and comparing. */
#include <stdio.h>
#include <stdlib.h>

#include "formulas.h"
#include "interleave.h"
#include "plans.h"
#include "stage.h"
#include "train.h"
#include "zb.h"

typedef struct {
  dt_comm *world;
  int64_t L, D, H, R, P, M, l0; /* L layers on this stage, from l0; M microbatches of R rows */
  int64_t V, Lc;                /* V chunks of Lc layers (virtual stages; 1 chunk: Lc = L) */
  float *w, *g;                 /* flat: layer l's [W1 | W2] at layer_offset(l) */
  dt_acts act;                  /* of one microbatch: pointed at its stash */
  int64_t *samples;             /* the step's samples */
  stashes st;                   /* x_0..x_L [R,D], a and h [R,H] of each microbatch in flight */
  int s, N, n, gpipe, zb;       /* stage s of N; n actions in plan; the schedule */
  action *plan;
  pp_event *ev;   /* the plan's exchanges, nev of them (schedule.c, interleave.c) */
  int nev, T;     /* and T, the step's slots where every action takes one */
  float *bx, *by; /* the global batch: x on the first stage, y on the last */
  dt_wire wire;   /* what activations travel in (--precision): out, then in */
  timeline *tl;   /* timeline.c */
} model;

static int64_t layer_offset(const model *m, int64_t l) { return l * 2 * m->D * m->H; }

/* Chunk c's first layer in the whole model: virtual stage cN + s's */
static int64_t chunk_l0(const model *m, int64_t c) {
  return m->V == 1 ? m->l0 : (c * m->N + m->s) * m->Lc;
}

/* A stage's layers are one run of the whole layer-major model, or V runs
 * of Lc layers, its chunks, NLc apart. */
static void layout(model *m, dt_run *r) {
  int64_t L = r->c.layers, D = r->c.dim, H = r->c.hidden, N = m->world->size;
  int64_t s = m->world->rank;
  if (L < N)
    dt_fail("--layers %lld cannot be split into %lld stages: every stage needs at least one layer "
            "(use --layers >= %lld or fewer ranks)",
            (long long)L, (long long)N, (long long)N);
  if (r->c.batch % m->M != 0)
    dt_fail("--batch %lld does not split into %lld microbatches: --microbatches must divide the "
            "global batch",
            (long long)r->c.batch, (long long)m->M);
  interleave_check(N, L, m->M, m->V, m->gpipe ? "gpipe" : m->zb ? "zb1" : "1f1b");
  m->s = (int)s;
  m->N = (int)N;
  m->L = L / N + (s < L % N); /* balanced: the first L%N stages get one layer more */
  m->l0 = s * (L / N) + (s < L % N ? s : L % N);
  m->Lc = m->L / m->V; /* chunk c: virtual stage cN + s, layers from l0 + (cN + s - s) Lc */
  m->D = D;
  m->H = H;
  m->R = r->c.batch / m->M;
  m->P = m->L * 2 * D * H;
  m->w = dt_alloc_f32((size_t)m->P, DT_PARAMS);
  m->g = dt_alloc_f32((size_t)m->P, DT_GRADS);
  int seg = dt_run_segment(r, m->w, m->g, (size_t)m->P);
  for (int64_t c = 0, n = m->Lc * 2 * D * H; c < m->V; c++) /* each chunk's in the whole model */
    dt_run_place(r, seg, c * n, layer_offset(m, chunk_l0(m, c)), 1, n, n);
  r->loss_ranks = 1; /* the last stage's loss, 0 elsewhere */
  r->loss_how = "last stage, sum over the microbatches";
  m->samples = dt_host_alloc((size_t)r->c.batch, sizeof(int64_t));
  stash_init(&m->st, &m->act, m->M * m->V, m->Lc, m->R, D, H, m->zb * m->L * m->R * D); /* dy */
  m->plan = dt_host_alloc((size_t)(3 * m->M * m->V), sizeof(action));
  if (m->V > 1 || m->zb) m->ev = dt_host_alloc((size_t)(4 * m->M * m->V + 1), sizeof(pp_event));
  if (s == 0 || s == N - 1) {
    m->bx = dt_alloc_f32((size_t)(r->c.batch * D), DT_DATA);
    m->by = dt_alloc_f32((size_t)(r->c.batch * D), DT_DATA);
  }
  dt_wire_init(&m->wire, &r->c, (size_t)(2 * m->R * D));
}

static void forward(model *m, int64_t c) {
  for (int64_t l = 0; l < m->Lc; l++) {
    float *w = m->w + layer_offset(m, c * m->Lc + l);
    dt_acts_forward(&m->act, l, w, w + m->D * m->H, 1);
  }
}

/* From the gradient of the chunk's output, in act.dx, to its input's. */
static void backward(model *m, int64_t c) {
  for (int64_t l = m->Lc - 1; l >= 0; l--) {
    float *w = m->w + layer_offset(m, c * m->Lc + l), *g = m->g + layer_offset(m, c * m->Lc + l);
    dt_acts_backward(&m->act, l, w, w + m->D * m->H, g, g + m->D * m->H, 1);
  }
}

/* One action of the plan (stage.c walks it): microbatch a->mb forward
 * through chunk a->chunk, from the batch on the first (virtual) stage, or
 * backward, from the loss on the last. */
static double microbatch(void *lesson, dt_run *r, const action *a) {
  model *m = lesson;
  int64_t D = m->D, R = m->R, c = a->chunk;
  double loss = 0;
  stash_acts(&m->st, &m->act, (int)(c * m->M + a->mb), NULL); /* slot c M + mb */
  if (m->by) m->act.y = m->by + a->mb * R * D;
  if (a->type == 'F') {
    if (m->s == 0 && c == 0) dt_copy(m->act.x, m->bx + a->mb * R * D, (size_t)(R * D) * 4);
    m->act.rows = (dt_rows){r->kinks, m->samples + a->mb * R, chunk_l0(m, c), 0}; /* the check's */
    forward(m, c);
  } else if (a->type == 'W') { /* ZB-H1's deferred weight gradients (zb.c) */
    zb_weights(&m->act, m->g, m->act.h + m->L * R * m->H, m->L);
    stash_close(&m->st, a->mb);
  } else { /* the last stage starts from the loss, its share of the mean over B*D */
    if (m->s == m->N - 1 && c == m->V - 1)
      loss = dt_run_loss(r, dt_acts_x(&m->act, m->Lc), m->act.y, m->act.dx, (size_t)(R * D),
                         1.0 / ((double)r->c.batch * D));
    if (m->zb) /* the input's gradient alone, W later */
      zb_input(&m->act, m->w, m->act.h + m->L * R * m->H, m->L);
    else
      backward(m, c);
    if (!m->zb) stash_close(&m->st, (int)(c * m->M + a->mb));
  }
  return loss;
}

/* One step: this stage's plan, exchanging with the neighbours before each
 * action and after the last (stage.c). */
static double train_step(model *m, dt_run *r, int64_t step) {
  int64_t RD = m->R * m->D;
  pp_stage stage = {m->world,   &m->wire,      (size_t)RD, (size_t)(m->Lc * RD), /* out: x_L */
                    &m->st,     m->plan,       m->n,       m->tl,
                    &m->act.dx, &m->act.dnext, microbatch, m};
  pp_chunks chunks = {m->M, m->ev, m->nev};
  dt_step_samples(&r->c, 1, 0, step, m->samples);
  if (m->bx) dt_make_batch(&r->c, m->samples, r->c.batch, m->bx, m->by);
  dt_zero(m->g, (size_t)m->P * 4);
  double loss = m->V > 1 || m->zb ? pp_step_chunks(&stage, &chunks, r) : pp_step(&stage, r);
  /* held in 16 bits as the reference holds them: an fp16 one beyond 65504
   * becomes inf here, and the run skips the step on every stage */
  if (m->wire.type != DT_F32) dt_round_half(m->g, (size_t)m->P, m->wire.type);
  return loss;
}

/* Bytes and memory per stage, measured, beside their formulas. */
static void report(model *m, dt_run *r) {
  uint64_t steps = (uint64_t)(r->c.steps - r->c.start_step);
  long long R = m->R, D = m->D, H = m->H, L = m->L, M = m->M, s = m->s, N = m->N, V = m->V;
  long long fwd = V - (s == N - 1), bwd = V - (s == 0), es = (long long)dt_dtype_size(m->wire.type);
  long long live = pp_live_any(m->N, m->s, M, (int)V, m->gpipe, m->zb);
  long long other = pp_live(m->N, m->s, M, V == 1 && !m->gpipe && !m->zb); /* 1F1B's, GPipe's */
  long long kept = m->zb * L * R * D * 4; /* zb1: each block's output gradient, for its W */
  long long slot = pp_slot_bytes(m->Lc, R, D, H) + kept, scratch = pp_scratch_bytes(R, D, H);
  long long bytes = pp_bytes_v(m->N, m->s, r->c.batch, D, es, m->V);
  int64_t want[DT_NTAGS]; /* formulas.c */
  int sched[3] = {(int)V, m->gpipe, m->zb};
  pp_memory(m->N, m->s, L, M, R, r->c.batch, D, H, sched, r->c.optimizer[0] == 'a', want);
  uint64_t sent = m->world->count[DT_SENDRECV].bytes_sent / steps;
  dt_report_traffic("pp", DT_SENDRECV, -1, (double)sent, (double)bytes);
  for (int t = DT_PARAMS; t <= DT_ACTIV; t++) /* rank 0's stage, as printed below */
    dt_report_figure("memory", dt_tag_name((dt_tag)t), (double)dt_mem_peak((dt_tag)t),
                     (double)want[t]);
  dt_print0("per stage, measured beside the formula:\n");
  dt_print_ranks(
      "stage %lld | sendrecv bytes per step %llu (formula %lld fwd + %lld bwd x B*D*%lld "
      "= %lld)\n",
      s, (unsigned long long)sent, fwd, bwd, es, bytes);
  if (V > 1) /* each microbatch crosses V boundaries of the stage each way, 1F1B's once */
    dt_print_ranks(
        "stage %lld | messages sent per step %llu (formula (2V - [s = 0] - [s = N-1]) x M = "
        "%lld, 1f1b's %lld) in %llu sendrecvs (the plan's %d)\n",
        s, (unsigned long long)(sent / (uint64_t)(R * D * es)), (fwd + bwd) * M,
        (2 - (s == 0) - (s == N - 1)) * M,
        (unsigned long long)(m->world->count[DT_SENDRECV].calls / steps), m->nev);
  dt_print_ranks("stage %lld peak in-flight %s %d (formula %lld) | activ peak %zu B "
                 "(formula %lld x %lld + scratch %lld = %lld; %s would hold %lld: %lld B)\n",
                 s, V > 1 ? "chunk-microbatches" : "microbatches", m->st.peak, live,
                 dt_mem_peak(DT_ACTIV), live, slot, scratch, (long long)want[DT_ACTIV],
                 m->gpipe || V > 1 || m->zb ? "1f1b" : "gpipe", other,
                 other * pp_slot_bytes(L, R, D, H) + scratch);
  dt_print_ranks("stage %lld params %zu B grads %zu B (formula %lld layers x 2DH x 4 = %lld each) "
                 "optim %zu B (formula K x %lld x 2DH = %lld, K 8 for AdamW's m and v, 0 for "
                 "sgd)\n",
                 s, dt_mem_peak(DT_PARAMS), dt_mem_peak(DT_GRADS), L, (long long)want[DT_PARAMS],
                 dt_mem_peak(DT_OPTIM), L, (long long)want[DT_OPTIM]);
  dt_print_memory_uncounted();
  if (m->zb)
    dt_print_ranks("stage %lld | activ: each microbatch's slot %lld B, %lld B of it the "
                   "blocks' output gradients B keeps for W (L x RD x 4)\n",
                   s, slot, kept);
  if (V > 1 || m->zb) pp_slot_model(m->T, m->N, M, m->V, m->zb);
  timeline_report(m->tl, m->world, m->M);
}

int main(int argc, char **argv) {
  dt_run run = {.c = DT_TRAIN_DEFAULTS};
  const char *schedule = "1f1b";
  int64_t M = 8, V = 1;
  dt_option options[] = {
      DT_TRAIN_OPTIONS(&run.c),
      DT_STRING("--schedule", &schedule, "gpipe|1f1b|zb1",
                "gpipe: all forwards then all backwards; 1f1b: one forward, one backward; "
                "zb1: 1f1b, each backward's weight gradients deferred (ZB-H1)"),
      DT_INT("--microbatches", &M, 1, 1 << 20,
             "microbatches M per global batch (M must divide --batch)"),
      DT_INT("--virtual-stages", &V, 1, 64,
             "chunks V a stage: interleaved 1F1B (N V must divide --layers, N "
             "--microbatches)"),
      DT_END};
  dt_lesson lesson = {"09_pp", "pipeline parallel training: stages, GPipe, 1F1B, bubble", 1};
  dt_comm *world = dt_run_init(&run, &argc, &argv, &lesson, options);
  model m = {.world = world, .M = M, .V = V, .gpipe = schedule[0] == 'g', .zb = schedule[0] == 'z'};
  layout(&m, &run);
  pp_shape plan = pp_plan_any(m.N, m.s, M, (int)V, m.gpipe, m.zb, m.plan, m.ev); /* plans.c */
  m.n = plan.n;
  m.nev = plan.nev;
  m.T = plan.T;
  m.tl = timeline_new(m.n);
  timeline_schedule(m.tl, (int)V, m.zb);
  dt_run_begin(&run);
  dt_print0("pipeline: %d stages, %lld microbatches of %lld rows, schedule %s\n", m.N, (long long)M,
            (long long)m.R,
            m.gpipe ? "gpipe (all F, then all B)"
            : m.zb  ? "zb1 (1F1B's F and B, each W where the stage would wait)"
                    : "1f1b (warm-up, 1F1B, cool-down)");
  if (V > 1)
    dt_print0("interleaved: V = %lld chunks a stage, %lld layer(s) each; chunk c of stage s is "
              "virtual stage cN + s; warm-up min(2(N-1-s) + (V-1)N, VM) chunk-microbatches\n",
              (long long)V, (long long)m.Lc);
  char layers[256];
  for (int64_t c = 0, len = 0; c < V && len < 200; c++) /* each chunk's, first to last */
    len += snprintf(layers + len, sizeof layers - (size_t)len, "%s%lld-%lld", c ? " " : "",
                    (long long)chunk_l0(&m, c), (long long)(chunk_l0(&m, c) + m.Lc - 1));
  timeline_plan(world, m.plan, m.n, (int)V, layers);

  for (int64_t step = run.c.start_step; step < run.c.steps; step++) {
    dt_step_begin(&run, step);
    double loss = train_step(&m, &run, step);
    dt_step_update(&run);
    dt_step_end(&run, step, loss);
  }
  dt_run_summary(&run);
  report(&m, &run);
  stash_free(&m.st);
  free(m.samples);
  free(m.plan);
  free(m.ev);
  timeline_free(m.tl);
  return dt_run_finish(&run);
}
