/* 07_tp: tensor parallelism, the Megatron MLP.
 *
 * Data parallelism (05) copies the whole model to every rank; here the model
 * itself is cut. Rank r holds hidden units r*H/N .. (r+1)*H/N-1 of every
 * block (those columns of W1, the same rows of W2) and runs the whole batch.
 * relu acts on each hidden unit alone, and h W2 is a sum over the slices, so
 * one all-reduce of the [B, D] partial outputs finishes a block (Megatron's
 * g); backward mirrors it, the input's gradient is again a sum (f). Weight
 * gradients are complete where they live: no gradient is all-reduced, no
 * weight gathered. --precision bf16|fp16 sends the activations in 16 bits.
 * The pieces lesson 08 reuses are in tensor.c. The run (common/train/run.c) does
 * the rest of the step and ends by training the same model in one process
 * and comparing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "tensor.h"
#include "train.h"

typedef struct {
  dt_comm *world;
  int64_t L, D, H, Hs, R, P; /* Hs = H/N hidden units here; R = B rows; P = 2LDHs here */
  float *w, *g;              /* flat shards: layer l's [W1_s | W2_s] at layer_offset(l) */
  dt_acts act;               /* of the whole batch: x_l and dx [B, D], a and h [B, Hs] */
  int64_t *samples;          /* the whole batch of the step */
  dt_wire wire;              /* what activations travel in (--precision) */
  double spread;             /* bookkeeping: the largest loss spread across ranks */
} model;

static int64_t layer_offset(const model *m, int64_t l) { return 2 * l * m->D * m->Hs; }

/* Rank r holds shard r of every layer: one segment, each layer in its place. */
static void layout(model *m, dt_run *r) {
  int64_t L = r->c.layers, D = r->c.dim, H = r->c.hidden, N = m->world->size;
  m->L = L;
  m->D = D;
  m->H = H;
  m->Hs = tp_slice(&r->c, (int)N); /* H/N, or a clear error */
  m->R = r->c.batch;
  m->P = L * 2 * D * m->Hs;
  m->w = dt_alloc_f32((size_t)m->P, DT_PARAMS);
  m->g = dt_alloc_f32((size_t)m->P, DT_GRADS);
  int seg = dt_run_segment(r, m->w, m->g, (size_t)m->P);
  for (int64_t l = 0; l < L; l++)
    tp_place(r, seg, layer_offset(m, l), l, m->world->rank, (int)N, 0, 2 * D * m->Hs);
  r->loss_ranks = 1; /* rank 0's loss: every rank computes the same */
  r->loss_how = "rank 0; every rank computes it alike";
  dt_acts_alloc(&m->act, L, m->R, D, m->Hs);
  m->samples = dt_host_alloc((size_t)m->R, sizeof(int64_t));
  dt_wire_init(&m->wire, &r->c, (size_t)(m->R * D));
}

/* Each block on this rank's slice, Megatron's f/g pair around it (tensor.c). */
static void forward(model *m) {
  for (int64_t l = 0; l < m->L; l++) {
    float *w = m->w + layer_offset(m, l);
    tp_forward(&m->act, l, w, w + m->D * m->Hs, m->world, &m->wire);
  }
}

static void backward(model *m) {
  for (int64_t l = m->L - 1; l >= 0; l--) {
    float *w = m->w + layer_offset(m, l), *g = m->g + layer_offset(m, l);
    tp_backward(&m->act, l, w, w + m->D * m->Hs, g, g + m->D * m->Hs, m->world, &m->wire);
  }
}

/* The whole batch on every rank: the loss and its gradient need no
 * communication, and the weight gradients none either. */
static double train_step(model *m, dt_run *r, int64_t step) {
  int64_t D = m->D, R = m->R;
  dt_step_samples(&r->c, 1, 0, step, m->samples); /* one replica: the whole global batch */
  dt_zero(m->g, (size_t)m->P * 4);
  dt_make_batch(&r->c, m->samples, R, m->act.x, m->act.y);
  m->act.rows = (dt_rows){r->kinks, m->samples, 0, m->world->rank * m->Hs}; /* for the check */
  forward(m);
  /* x_L and y are whole and alike on every rank, so is the loss */
  double loss = dt_run_loss(r, dt_acts_x(&m->act, m->L), m->act.y, m->act.dx, (size_t)(R * D),
                            1.0 / ((double)R * D));
  backward(m);
  /* Weight gradients never travel, but they are held in 16 bits as the
   * reference holds them: an fp16 gradient beyond 65504 becomes inf here. */
  if (m->wire.type != DT_F32) dt_round_half(m->g, (size_t)m->P, m->wire.type);
  double both[2] = {loss, -loss}; /* bookkeeping: do the ranks' losses agree? */
  dt_host_all_reduce(m->world, both, 2, DT_F64, DT_MAX);
  m->spread = fmax(m->spread, both[0] + both[1]);
  return m->world->rank == 0 ? loss : 0;
}

/* A formula's value, whole or to two decimals (the counters add whole bytes
 * per call: at NP=3 under 1 byte a call short of 2(N-1)/N x bytes). */
static const char *num(char *buf, double v) {
  snprintf(buf, 32, v == floor(v) ? "%.0f" : "%.2f", v);
  return buf;
}

/* Bytes and memory per rank, measured, beside their formulas and DP's. */
static void report(model *m, dt_run *r) {
  uint64_t steps = (uint64_t)(r->c.steps - r->c.start_step), N = (uint64_t)m->world->size;
  int64_t L = m->L, D = m->D, H = m->H, R = m->R, es = (int64_t)dt_dtype_size(m->wire.type);
  dt_counter ar = m->world->count[DT_ALL_REDUCE], all = dt_comm_total(m->world);
  double ring = 2.0 * (double)(N - 1) / (double)N, want = 2.0 * L * ring * (double)(R * D * es);
  int64_t DP = 2 * L * D * H, K = r->c.optimizer[0] == 'a' ? 8 : 0; /* K: AdamW's bytes */
  char f1[32], f2[32], how[4][128], dp_activ[32] = "n/a"; /* DP: 05 runs B/N rows per rank */
  dt_report_traffic("tp", DT_ALL_REDUCE, (double)(ar.calls / steps),
                    (double)(ar.bytes_sent / steps), want);
  dt_print0("  bytes sent per rank per step    calls    measured     formula\n");
  dt_print0("    %-26s %6llu %11llu %11s   2L x 2(N-1)/N x B x D x %lld: x_l+1 forward, dx_l "
            "backward\n",
            "all_reduce f/g (activ)", (unsigned long long)(ar.calls / steps),
            (unsigned long long)(ar.bytes_sent / steps), num(f1, want), (long long)es);
  dt_print0("    %-26s %6llu %11llu %11d   no weight gathered, no gradient reduced\n",
            "any other collective", (unsigned long long)((all.calls - ar.calls) / steps),
            (unsigned long long)((all.bytes_sent - ar.bytes_sent) / steps), 0);
  dt_print0(
      "    %-26s %6s %11llu %11s   DP (05): 2(N-1)/N x 2LDH x %lld = %s: TP/DP = B/H = %.4f\n",
      "total", "", (unsigned long long)(all.bytes_sent / steps), num(f1, want), (long long)es,
      num(f2, ring * (double)(DP * es)), (double)R / (double)H);
  double flops = 12.0 * (double)(L * R * D * m->Hs); /* forward 2 matmuls, backward 4 */
  if (N > 1)
    dt_print0(
        "  FLOPs per rank per step 12 x L x B x D x H/N = %.0f: %.1f per byte of f/g, formula "
        "3H/(%lld(N-1)) = %.1f at any B\n",
        flops, flops / (double)(ar.bytes_sent / steps), (long long)es,
        3.0 * (double)H / (double)(es * (int64_t)(N - 1)));
  if (R % (int64_t)N == 0) snprintf(dp_activ, 32, "%lld", (long long)dt_acts_bytes(L, R / N, D, H));
  snprintf(how[0], 128, "4 x 2LDH/N: W1_s and W2_s; DP (05): %lld", (long long)(4 * DP));
  snprintf(how[1], 128, "4 x 2LDH/N; DP (05): %lld", (long long)(4 * DP));
  snprintf(how[2], 128, "AdamW m and v: 8 x 2LDH/N (sgd: 0); DP (05): %lld", (long long)(K * DP));
  snprintf(how[3], 128, "((L+1)BD + 2LB(H/N) + 2BD + B(H/N)) x 4; DP (05): %s", dp_activ);
  dt_row rows[] = {{DT_PARAMS, 4 * m->P, how[0], 0},
                   {DT_GRADS, 4 * m->P, how[1], 0},
                   {DT_OPTIM, K * m->P, how[2], 0},
                   {DT_ACTIV, dt_acts_bytes(L, R, D, m->Hs), how[3], 0}};
  dt_print_memory(rows, 4, NULL);
  dt_print_memory_uncounted();
  dt_print0("  loss on every rank: largest spread across ranks %.2e over %lld steps\n", m->spread,
            (long long)steps);
}

int main(int argc, char **argv) {
  dt_run run = {.c = DT_TRAIN_DEFAULTS};
  dt_option options[] = {DT_TRAIN_OPTIONS(&run.c), DT_END};
  dt_lesson lesson = {"07_tp", "tensor parallel MLP (Megatron): W1 by columns, W2 by rows", 1};
  dt_comm *world = dt_run_init(&run, &argc, &argv, &lesson, options);
  model m = {.world = world};
  layout(&m, &run);
  dt_run_begin(&run);
  int64_t col0 = world->rank * m.Hs, D = m.D, Hs = m.Hs;
  dt_print0("tensor parallel over %d rank%s: %lld of the %lld hidden units per rank; every rank "
            "runs the whole batch of %lld; 2 all-reduces of [B, D] per layer\n",
            world->size, world->size > 1 ? "s" : "", (long long)Hs, (long long)m.H, (long long)m.R);
  dt_print_ranks("W1[:, %lld:%lld] [%lld x %lld] and W2[%lld:%lld, :] [%lld x %lld] of every "
                 "layer: %lld of %lld parameters\n",
                 (long long)col0, (long long)(col0 + Hs), (long long)D, (long long)Hs,
                 (long long)col0, (long long)(col0 + Hs), (long long)Hs, (long long)D,
                 (long long)m.P, (long long)(2 * m.L * D * m.H));

  for (int64_t step = run.c.start_step; step < run.c.steps; step++) {
    dt_step_begin(&run, step);
    double loss = train_step(&m, &run, step);
    dt_step_update(&run);
    dt_step_end(&run, step, loss);
  }
  dt_run_summary(&run);
  report(&m, &run);
  free(m.samples);
  return dt_run_finish(&run);
}
