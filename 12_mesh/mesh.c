/* 12_mesh: 4D parallelism, data x pipeline x context x tensor on one mesh.
 *
 * N = dp x pp x cp x tp ranks. Every rank has four coordinates (tp fastest:
 * neighbouring ranks, one node's fast links; then cp, pp, dp), and every
 * collective runs along one axis, among the ranks that differ from this one
 * in that coordinate alone:
 *   tp  Megatron's attention and MLP (07): Wq, Wk, Wv by columns (a rank's
 *       heads), Wo by rows, one all-reduce after Wo; W1 by columns, W2 by
 *       rows, one after W2; the mirror in backward;
 *   cp  ring attention (11) on this tp rank's heads: every sequence cut into
 *       chunks, K and V travelling around the ring;
 *   pp  the layers cut into stages, the step's M microbatches flowing through
 *       them by GPipe or 1F1B (09);
 *   dp  each data rank its own sequences; the weights are replicated over
 *       dp x cp, so their gradients are averaged there (05); --zero 1 shards
 *       the optimizer state over the same ranks (06).
 * The lesson writes none of the parallelism: it composes the earlier
 * lessons' pieces, each on its own axis. The model is 11's causal
 * transformer; the run (common/train/run.c) does the rest of the step and
 * ends by training the same model in one process and comparing. */
#include <string.h>

#include "06_fsdp/shard.h" /* the pieces it composes, each on its axis */
#include "07_tp/tensor.h"
#include "09_pp/schedule.h"
#include "09_pp/stash.h"
#include "09_pp/timeline.h"
#include "11_cp/ring.h"
#include "mesh.h"

/* This rank's coordinates, and one communicator per axis: the ranks whose
 * other three coordinates are this one's, ordered along the axis. */
static void coordinates(mesh *m) {
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

/* Layer lg as this rank holds it, [Wq | Wk | Wv | Wo | W1 | W2] of its tp
 * shard (07): columns of Wq, Wk, Wv, W1, rows of Wo, W2; [lo, hi) of it. */
static void place(mesh *m, dt_run *r, int seg, int64_t off, int64_t lg, int64_t lo, int64_t hi) {
  static const int by_rows[6] = {0, 0, 0, 1, 0, 1};
  int64_t base = 0;
  for (int j = 0; j < 6; j++) {
    dt_tensor x = dt_model_tensor(&r->c, 6 * lg + j);
    base += tp_place_shard(r, seg, off, &x, by_rows[j], (int)m->at[TP], (int)m->n[TP], lo - base,
                           hi - base);
  }
}

/* The stage's layers of this tp shard: one segment, replicated over dp x
 * cp (the run takes dc rank 0's copy); with --zero 1 the shards of 06. */
static void layout(mesh *m, dt_run *r) {
  int64_t lo = 0, hi, off, L = r->c.layers / m->n[PP];
  coordinates(m);
  mesh_verify(m); /* and names each communicator by its axis, for the watchdog */
  m->L = L;
  m->l0 = m->at[PP] * L;
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
    r->seg[first].copy = m->dc->rank != 0; /* dc rank 0's copy counts */
  }
  for (int64_t l = 0; l < L; l++) {
    int seg = m->zero ? fsdp_segment(&m->f, first, l, &off) : first;
    place(m, r, seg, m->zero ? off : l * m->ld, m->l0 + l, lo, hi);
  }
  dt_comm *each[4] = {m->axis[TP], m->axis[CP], m->axis[PP], m->dc};
  memcpy(r->comms, each, sizeof each);
  r->loss_ranks = (double)(m->n[DP] * m->n[CP]); /* the last stages' tp rank 0 */
  r->loss_how = "last stage, mean over dp x cp";
  m->plan = dt_host_alloc((size_t)(2 * m->M), sizeof(action));
  m->nplan = pp_plan((int)m->n[PP], (int)m->at[PP], m->M, m->gpipe, m->plan);
  m->tl = timeline_new(m->nplan);
}

static dt_acts mlp_acts(mesh *m, layer_acts p, int64_t l) { /* 07's: u as x_0, x' as x_1 */
  dt_rows rows = m->rows;
  rows.layer += l;
  return (dt_acts){.L = 1,
                   .R = m->R,
                   .D = m->D,
                   .Hs = m->Hs,
                   .x = p.u,
                   .a = p.a,
                   .h = p.h,
                   .dx = m->dx,
                   .dnext = m->dnext,
                   .dh = m->dh,
                   .rows = rows};
}

/* Layer l of a microbatch: u = x + Attn(x) Wo, x' = u + MLP(u). Along tp
 * this rank's heads and hidden units, their products summed after Wo and
 * W2 (07's g); along cp the ring, on those heads (11). */
static void forward(mesh *m, float *slot, int64_t l) {
  int64_t R = m->R, D = m->D, W = m->W, DW = D * W;
  layer_acts p = mesh_acts(m, slot, l);
  const float *w = m->w + l * m->ld;
  dt_matmul(0, 0, R, W, D, p.x, w, p.q, 0);
  dt_matmul(0, 0, R, W, D, p.x, w + DW, p.k, 0);
  dt_matmul(0, 0, R, W, D, p.x, w + 2 * DW, p.v, 0);
  cp_ring_forward(&m->cr, p.q, p.k, p.v, p.o, p.lse);
  dt_matmul(0, 0, R, D, W, p.o, w + 3 * DW, p.u, 0); /* this rank's heads' share */
  tp_sum(m->axis[TP], &m->wire, p.u, (size_t)(R * D));
  dt_add(p.u, p.x, (size_t)(R * D)); /* the residual, once */
  dt_acts mlp = mlp_acts(m, p, l);
  tp_forward(&mlp, 0, w + 4 * DW, w + 4 * DW + D * m->Hs, m->axis[TP], &m->wire);
}

/* The mirror, from m->dx = dL/dx' to dL/dx: the weights' gradients added
 * to g, complete where they live; the input's a sum over tp (07's f). */
static void backward(mesh *m, float *slot, int64_t l) {
  int64_t R = m->R, D = m->D, W = m->W, DW = D * W, RW = R * W;
  layer_acts p = mesh_acts(m, slot, l);
  const float *w = m->w + l * m->ld;
  float *g = m->g + l * m->ld;
  dt_acts mlp = mlp_acts(m, p, l);
  tp_backward(&mlp, 0, w + 4 * DW, w + 4 * DW + D * m->Hs, g + 4 * DW, g + 4 * DW + D * m->Hs,
              m->axis[TP], &m->wire);
  float *du = mlp.dx, *dx = mlp.dnext;                  /* dL/du, whole; room for dL/dx */
  dt_matmul(1, 0, W, D, R, p.o, du, g + 3 * DW, 1);     /* dWo += o^T du */
  dt_matmul(0, 1, R, W, D, du, w + 3 * DW, m->dout, 0); /* do = du Wo^T */
  cp_ring_backward(&m->cr, p.q, p.k, p.v, p.o, p.lse, m->dout, m->dqkv);
  for (int i = 0; i < 3; i++) { /* dq, dk, dv back through Wq, Wk, Wv */
    dt_matmul(1, 0, D, W, R, p.x, m->dqkv + i * RW, g + i * DW, 1);
    dt_matmul(0, 1, R, D, W, m->dqkv + i * RW, w + i * DW, dx, i > 0);
  }
  tp_sum(m->axis[TP], &m->wire, dx, (size_t)(R * D));
  dt_add(dx, du, (size_t)(R * D)); /* the residual path */
  m->dx = dx;
  m->dnext = du;
}

/* Between two actions, along pp (09): a forward's output to the next stage,
 * a backward's input gradient to the previous one, in one sendrecv. */
static void exchange(mesh *m, const action *done, const action *next) {
  float *out = done && done->type == 'F' ? mesh_out(m, m->st.slot[done->mb]) : NULL;
  float *in = next && next->type == 'F' ? stash_open(&m->st, next->mb) : NULL; /* its x_0 */
  if (pp_exchange(m->axis[PP], &m->wire, done, next, out, m->dx, in, m->dnext,
                  (size_t)(m->R * m->D))) {
    float *t = m->dx; /* the next backward starts from what arrived */
    m->dx = m->dnext;
    m->dnext = t;
  }
}

/* The weights are replicated over dp x cp: their gradients are averaged
 * there (05), or each layer's for the optimizer's shards (--zero 1, 06). */
static void sync_gradients(mesh *m) {
  for (int64_t l = 0; m->zero && l < m->L; l++) fsdp_reduce(&m->f, l, m->g + l * m->ld);
  if (!m->zero && m->dc->size > 1)
    dt_all_reduce(m->dc, m->g, m->g, (size_t)(m->L * m->ld), DT_F32, DT_AVG);
}

static double train_step(mesh *m, dt_run *r, int64_t step) {
  int64_t RD = m->R * m->D;
  double loss = 0;
  int first = m->at[PP] == 0, last = m->at[PP] == m->n[PP] - 1;
  dt_step_samples(&r->c, (int)m->n[DP], (int)m->at[DP], step, m->samples);
  for (int64_t mb = 0; mb < m->M; mb++) { /* cp's chunks of each sequence */
    if (first || last)
      cp_inputs(&m->cr, &r->c, m->samples + mb * m->Bm, m->bx + mb * RD, m->by + mb * RD);
    cp_keys(&m->cr, m->samples + mb * m->Bm, m->keys + mb * m->R); /* the rows, for the check */
  }
  dt_zero(m->g, (size_t)(m->L * m->ld) * 4);
  timeline_start(m->tl, m->axis[PP]);
  for (const action *a = m->plan; a < m->plan + m->nplan; a++) {
    exchange(m, a > m->plan ? a - 1 : NULL, a);
    double t0 = dt_span_begin();
    float *slot = stash_open(&m->st, a->mb);
    if (a->type == 'F') {
      if (first) dt_copy(slot, m->bx + a->mb * RD, (size_t)RD * 4);
      m->rows = (dt_rows){r->kinks, m->keys + a->mb * m->R, m->l0, m->at[TP] * m->Hs};
      for (int64_t l = 0; l < m->L; l++) forward(m, slot, l);
    } else { /* the last stage starts from the loss: a mean over this rank's M R D */
      if (last)
        loss += dt_run_loss(r, mesh_out(m, slot), m->by + a->mb * RD, m->dx, (size_t)RD,
                            1.0 / ((double)m->M * (double)RD));
      for (int64_t l = m->L - 1; l >= 0; l--) backward(m, slot, l);
      stash_close(&m->st, a->mb);
    }
    timeline_record(m->tl, (int)(a - m->plan), a, t0);
  }
  exchange(m, &m->plan[m->nplan - 1], NULL);
  timeline_step_end(m->tl, m->axis[PP]);
  sync_gradients(m);
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
  int64_t want[AXES] = {0}, M = 0, zero = 0;
  const char *split = "contiguous", *schedule = "1f1b";
  dt_option options[] = {
      DT_TRAIN_OPTIONS(&run.c),
      DT_REFUSED("--precision=bf16 --precision=fp16 --loss-scale --growth-interval",
                 "the mesh trains in fp32 only for now"),
      DT_ATTN_OPTIONS(&run.c),
      DT_INT("--dp", &want[DP], 0, 1 << 20, "data-parallel ranks (0: from the ranks left)"),
      DT_INT("--pp", &want[PP], 0, 1 << 20, "pipeline stages (0: from the ranks left)"),
      DT_INT("--cp", &want[CP], 0, 1 << 20, "context-parallel ranks (0: from the ranks left)"),
      DT_INT("--tp", &want[TP], 0, 1 << 20, "tensor-parallel ranks (0: from the ranks left)"),
      DT_INT("--micro", &M, 0, 1 << 20, "microbatches M per step (0: 2 x pp, 1 without pipeline)"),
      DT_STRING("--schedule", &schedule, "gpipe|1f1b", "the pipeline's schedule (09)"),
      DT_INT("--zero", &zero, 0, 1, "1: shard the optimizer state over dp x cp (06), 0: replicas"),
      DT_STRING("--split", &split, "contiguous|zigzag",
                "cp rank i: chunk i, or i and 2cp-1-i (11)"),
      DT_END};
  dt_lesson lesson = {"12_mesh", "4D parallelism: data x pipeline x context x tensor on one mesh",
                      1};
  dt_comm *world = dt_run_init(&run, &argc, &argv, &lesson, options);
  mesh m = {.world = world, .zero = (int)zero, .gpipe = schedule[0] == 'g'};
  m.zigzag = strcmp(split, "zigzag") == 0;
  mesh_shape(&m, want, world->size);
  m.M = M ? M : m.n[PP] > 1 ? 2 * m.n[PP] : 1;
  mesh_check(&m, &run.c);
  layout(&m, &run);
  dt_run_begin(&run);
  if (m.zero) fsdp_start(&m.f, &run);
  mesh_table(&m);
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
