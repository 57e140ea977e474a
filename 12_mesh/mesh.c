/* 12_mesh: 4D parallelism, data x pipeline x context x tensor on one mesh.
 *
 * N = dp x pp x cp x tp ranks, each with four coordinates (tp fastest), and
 * every collective runs along one axis, among the ranks that differ from
 * this one in that coordinate alone. The lesson writes none of them: tp is
 * 07's sums after Wo and W2, cp 11's ring on this tp rank's heads, pp 09's
 * stages and schedules, and over dp x cp, which hold the same weights, 05's
 * average of the gradients (--zero 1: 06's shards). The model is 11's; the
 * run (common/train/run.c) does the rest and compares with one process. */
#include <string.h>

#include "06_fsdp/shard.h" /* the pieces it composes, each on its axis */
#include "07_tp/tensor.h"
#include "09_pp/interleave.h"
#include "09_pp/schedule.h"
#include "09_pp/stage.h"
#include "09_pp/stash.h"
#include "09_pp/timeline.h"
#include "09_pp/zb.h"
#include "11_cp/ring.h"
#include "mesh.h"

/* This rank's coordinates, and one communicator per axis: the ranks whose other
 * three coordinates are this one's, ordered along it (mesh_verify checks both). */
static void coordinates(model *m) {
  int64_t r = m->world->rank;
  /* exercise: the mesh: a rank's coordinates and one communicator per axis */
  for (int a = AXES - 1; a >= 0; a--) { /* tp fastest */
    m->at[a] = r % m->n[a];
    r /= m->n[a];
  }
  for (int a = 0; a < AXES; a++) {
    int64_t color = 0; /* the other three coordinates, as one number */
    for (int b = 0; b < AXES; b++) color = b == a ? color : color * m->n[b] + m->at[b];
    m->axis[a] = dt_comm_split(m->world, (int)color, (int)m->at[a]);
  }
  /* the weights' replicas: every rank of the same pp and tp coordinates */
  m->dc = dt_comm_split(m->world, (int)(m->at[PP] * m->n[TP] + m->at[TP]),
                        (int)(m->at[DP] * m->n[CP] + m->at[CP]));
  /* end of exercise */
}

/* The stage's layers of this tp shard: one segment, replicated over dp x
 * cp (the run takes dc rank 0's copy); with --zero 1 the shards of 06. */
static void layout(model *m, dt_run *r) {
  int64_t lo = 0, hi, off, L = r->c.layers / m->n[PP];
  coordinates(m);
  mesh_verify(m->world, m->axis, m->dc, m->n,
              m->at); /* and names each communicator by its axis, for the watchdog */
  m->L = L;
  m->l0 = m->at[PP] * L;
  m->Lc = L / m->V;
  mesh_buffers(m, &r->c);
  m->n_layer = hi = 4 * m->D * m->W + 2 * m->D * m->Hs;
  int first;
  if (m->zero) {
    fsdp_init(&m->f, m->dc, &r->c, L, m->n_layer, 1, 0);
    fsdp_range(&m->f, &lo, &hi);
    first = fsdp_register(&m->f, r);
    m->w = m->f.w;
    m->g = m->f.g;
    m->ld = m->f.NS;
  } else {
    m->ld = m->n_layer;
    m->w = dt_alloc_f32((size_t)(L * m->ld), DT_PARAMS);
    m->g = dt_alloc_f32((size_t)(L * m->ld), DT_GRADS);
    first = dt_run_segment(r, m->w, m->g, (size_t)(L * m->ld));
    dt_wire_init(&m->grads, &r->c, (size_t)(m->dc->size > 1 ? L * m->ld : 0));
    r->seg[first].copy = m->dc->rank != 0; /* dc rank 0's copy counts */
  }
  for (int64_t l = 0; l < L; l++) {
    int seg = m->zero ? fsdp_segment(&m->f, first, l, &off) : first;
    mesh_place_layer(m, r, seg, m->zero ? off : l * m->ld, mesh_layer(m, l), lo, hi);
  }
  dt_comm *each[4] = {m->axis[TP], m->axis[CP], m->axis[PP], m->dc};
  memcpy(r->comms, each, sizeof each);
  r->loss_ranks = (double)(m->n[DP] * m->n[CP]); /* the last stages' tp rank 0 */
  r->loss_how = "last stage, mean over dp x cp";
  int P = (int)m->n[PP], s = (int)m->at[PP], V = (int)m->V;
  m->plan = dt_host_alloc((size_t)(3 * m->M * V), sizeof(action));
  if (V > 1 || m->zb) m->ev = dt_host_alloc((size_t)(4 * m->M * V + 1), sizeof(pp_event));
  if (m->zb) m->nev = pp_plan_zb(P, s, m->M, m->plan, m->ev, &m->T); /* F, B, W: 3M */
  m->nplan = m->zb   ? (int)(3 * m->M)
             : V > 1 ? pp_plan_v(P, s, m->M, V, m->plan)
                     : pp_plan(P, s, m->M, m->gpipe, m->plan);
  if (V > 1) m->nev = pp_events(P, s, m->M, V, m->plan, m->ev, &m->T);
  m->tl = timeline_new(m->nplan);
  timeline_schedule(m->tl, V, m->zb);
}

/* Layer l of a microbatch: u = x + Attn(x) Wo, x' = u + MLP(u). Along tp
 * this rank's heads and hidden units, their products summed after Wo and
 * W2 (07's g); along cp the ring, on those heads (11). */
static void forward(model *m, float *slot, int64_t c, int64_t l) {
  int64_t R = m->R, D = m->D, W = m->W;
  layer_acts p = mesh_acts(m, slot, l);
  layer_weights w = mesh_weights(m, m->w, c * m->Lc + l); /* chunk c's layer l */
  dt_matmul(0, 0, R, W, D, p.x, w.wq, p.q, 0);
  dt_matmul(0, 0, R, W, D, p.x, w.wk, p.k, 0);
  dt_matmul(0, 0, R, W, D, p.x, w.wv, p.v, 0);
  cp_ring_forward(&m->cr, p.q, p.k, p.v, p.o, p.lse);
  dt_matmul(0, 0, R, D, W, p.o, w.wo, p.u, 0); /* this rank's heads' share */
  tp_sum(m->axis[TP], &m->wire, p.u, (size_t)(R * D));
  dt_add(p.u, p.x, (size_t)(R * D)); /* the residual, once */
  dt_acts mlp = mesh_mlp(m, p, l);
  tp_forward(&mlp, 0, w.w1, w.w2, m->axis[TP], &m->wire);
}

/* The mirror, from m->dx = dL/dx' to dL/dx: the weights' gradients added
 * to g, complete where they live; the input's a sum over tp (07's f). */
static void backward(model *m, float *slot, int64_t c, int64_t l) {
  int64_t R = m->R, D = m->D, W = m->W, RW = R * W;
  layer_acts p = mesh_acts(m, slot, l);
  layer_weights w = mesh_weights(m, m->w, c * m->Lc + l);
  layer_weights g = mesh_weights(m, m->g, c * m->Lc + l); /* laid out as the weights */
  dt_acts mlp = mesh_mlp(m, p, l);
  tp_backward(&mlp, 0, w.w1, w.w2, g.w1, g.w2, m->axis[TP], &m->wire);
  float *du = mlp.dx, *dx = mlp.dnext;            /* dL/du, whole; room for dL/dx */
  dt_matmul(1, 0, W, D, R, p.o, du, g.wo, 1);     /* dWo += o^T du */
  dt_matmul(0, 1, R, W, D, du, w.wo, m->dout, 0); /* do = du Wo^T */
  cp_ring_backward(&m->cr, p.q, p.k, p.v, p.o, p.lse, m->dout, m->dqkv);
  float *wi[3] = {w.wq, w.wk, w.wv}, *gi[3] = {g.wq, g.wk, g.wv};
  for (int i = 0; i < 3; i++) { /* dq, dk, dv back through Wq, Wk, Wv */
    dt_matmul(1, 0, D, W, R, p.x, m->dqkv + i * RW, gi[i], 1);
    dt_matmul(0, 1, R, D, W, m->dqkv + i * RW, wi[i], dx, i > 0);
  }
  tp_sum(m->axis[TP], &m->wire, dx, (size_t)(R * D));
  dt_add(dx, du, (size_t)(R * D)); /* the residual path */
  m->dx = dx;
  m->dnext = du;
}

/* One action of the stage's plan (09's walk): microbatch a->mb through the
 * stage's layers, on the first stage from the step's inputs, or back. */
static double microbatch(void *lesson, dt_run *r, const action *a) {
  model *m = lesson;
  int64_t RD = m->R * m->D;
  double loss = 0;
  int64_t c = a->chunk, Lc = m->Lc, k = c * m->M + a->mb; /* chunk c's slot of a->mb */
  float *slot = stash_open(&m->st, (int)k);
  if (a->type == 'F') {
    if (m->at[PP] == 0 && c == 0) dt_copy(slot, m->bx + a->mb * RD, (size_t)RD * 4);
    m->rows = (dt_rows){r->kinks, m->keys + a->mb * m->R, mesh_layer(m, c * Lc), m->at[TP] * m->Hs};
    for (int64_t l = 0; l < Lc; l++) forward(m, slot, c, l);
  } else if (a->type == 'W') { /* zb1: the weights' gradients, deferred (zb.c) */
    for (int64_t l = 0; l < Lc; l++) mesh_zb_weights(m, slot, l);
    stash_close(&m->st, (int)k);
  } else { /* the last stage starts from the loss: a mean over this rank's M R D */
    if (m->at[PP] == m->n[PP] - 1 && c == m->V - 1)
      loss = dt_run_loss(r, slot + mesh_out(m), m->by + a->mb * RD, m->dx, (size_t)RD,
                         1.0 / ((double)m->M * (double)RD));
    for (int64_t l = Lc - 1; m->zb && l >= 0; l--) mesh_zb_input(m, slot, l); /* zb1: B alone */
    for (int64_t l = Lc - 1; !m->zb && l >= 0; l--) backward(m, slot, c, l);
    if (!m->zb) stash_close(&m->st, (int)k);
  }
  return loss;
}

static double train_step(model *m, dt_run *r, int64_t step) {
  int64_t RD = m->R * m->D;
  pp_stage stage = {m->axis[PP], &m->wire,  (size_t)RD, mesh_out(m), /* 09's walk, on pp */
                    &m->st,      m->plan,   m->nplan,   m->tl,
                    &m->dx,      &m->dnext, microbatch, m};
  dt_step_samples(&r->c, (int)m->n[DP], (int)m->at[DP], step, m->samples);
  for (int64_t mb = 0; mb < m->M; mb++) { /* cp's chunks of each sequence */
    if (m->bx) cp_inputs(&m->cr, &r->c, m->samples + mb * m->Bm, m->bx + mb * RD, m->by + mb * RD);
    cp_keys(&m->cr, m->samples + mb * m->Bm, m->keys + mb * m->R); /* the rows, for the check */
  }
  dt_zero(m->g, (size_t)(m->L * m->ld) * 4);
  pp_chunks chunks = {m->M, m->ev, m->nev}; /* V chunks, zb1: the plan's exchanges (09) */
  double loss = m->V > 1 || m->zb ? pp_step_chunks(&stage, &chunks, r) : pp_step(&stage, r);
  /* the weights are replicated over dp x cp: their gradients are averaged
   * there (05), or each layer's for the optimizer's shards (--zero 1, 06) */
  for (int64_t l = 0; m->zero && l < m->L; l++) fsdp_reduce(&m->f, l, m->g + l * m->ld);
  if (!m->zero && m->dc->size > 1) { /* in 16 bits each rank's g / G, summed */
    size_t n = (size_t)(m->L * m->ld);
    void *g = dt_wire_pack(&m->grads, m->g, n, 0, (int)m->dc->size);
    dt_all_reduce(m->dc, g, g, n, m->grads.type, dt_wire_op(&m->grads, DT_AVG));
    dt_wire_unpack(&m->grads, m->g, n, 0);
  }
  return m->at[TP] == 0 ? loss : 0; /* every tp rank computes it alike: count one */
}

int main(int argc, char **argv) {
  dt_run run = {.c = DT_TRAIN_DEFAULTS};
  run.c.layers = 4;
  run.c.dim = 32;
  run.c.batch = 8;
  run.c.model = DT_TRANSFORMER;
  run.c.seq = 32;
  run.c.heads = 4;
  run.c.optimizer = "adamw"; /* as 11 */
  const char *split = "contiguous", *schedule = "1f1b";
  model m = {.V = 1};
  dt_option options[] = {
      DT_TRAIN_OPTIONS(&run.c),
      DT_ATTN_OPTIONS(&run.c),
      DT_INT("--dp", &m.n[DP], 0, 1 << 20, "data-parallel ranks (0: from the ranks left)"),
      DT_INT("--pp", &m.n[PP], 0, 1 << 20, "pipeline stages (0: from the ranks left)"),
      DT_INT("--cp", &m.n[CP], 0, 1 << 20, "context-parallel ranks (0: from the ranks left)"),
      DT_INT("--tp", &m.n[TP], 0, 1 << 20, "tensor-parallel ranks (0: from the ranks left)"),
      DT_INT("--micro", &m.M, 0, 1 << 20,
             "microbatches M per step (0: 2 x pp, 1 without pipeline)"),
      DT_STRING("--schedule", &schedule, "gpipe|1f1b|zb1",
                "the pipeline's schedule (09; zb1: ZB-H1, each backward's weight gradients "
                "deferred)"),
      DT_INT("--virtual-stages", &m.V, 1, 64,
             "chunks V a stage: interleaved 1F1B (09; pp V must divide --layers, pp --micro)"),
      DT_INT("--zero", &m.zero, 0, 1,
             "1: shard the optimizer state over dp x cp (06), 0: replicas"),
      DT_STRING("--split", &split, "contiguous|zigzag",
                "cp rank i: chunk i, or i and 2cp-1-i (11)"),
      DT_END};
  dt_lesson lesson = {"12_mesh", "4D parallelism: data x pipeline x context x tensor on one mesh",
                      1};
  dt_comm *world = dt_run_init(&run, &argc, &argv, &lesson, options);
  m.world = world;
  m.zigzag = strcmp(split, "zigzag") == 0;
  m.gpipe = schedule[0] == 'g';
  m.zb = schedule[0] == 'z';
  mesh_shape(m.n, world->size);
  if (!m.M) m.M = m.n[PP] > 1 ? 2 * m.n[PP] : 1;
  mesh_check(m.n, m.M, m.zigzag, &run.c);
  interleave_check(m.n[PP], run.c.layers, m.M, m.V, schedule); /* 09's refusals */
  layout(&m, &run);
  dt_run_begin(&run);
  if (m.zero) fsdp_start(&m.f, &run);
  mesh_table(world, m.n, m.at);
  for (int64_t step = run.c.start_step; step < run.c.steps; step++) {
    dt_step_begin(&run, step);
    double loss = train_step(&m, &run, step);
    if (dt_step_update(&run) && m.zero) fsdp_step_taken(&m.f);
    dt_step_end(&run, step, loss);
  }
  dt_run_summary(&run);
  mesh_report(&m, &run);
  return dt_run_finish(&run);
}
